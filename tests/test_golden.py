"""Every golden case of the real cn.mops, array by array and table by table.

Cases are discovered under GCNMOPS_GOLDEN_DIR (default ../shared/golden). What another test module
checks, or what a later stage covers, is reported as skipped with the reason.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd
import pytest

import gcnmops
from golden import GOLDEN_DIR, array, assert_close, call_kwargs, case_names, manifest, table

#: R entry point of a case -> our function
ENTRY_POINTS = {"cn.mops": gcnmops.cn_mops, "exomecn.mops": gcnmops.exome_cn_mops,
                "haplocn.mops": gcnmops.haplo_cn_mops, "referencecn.mops": gcnmops.reference_cn_mops,
                "singlecn.mops": gcnmops.single_cn_mops}
#: cases checked in dedicated modules
ELSEWHERE = {"normalize": "tests/test_normalization.py", "segment": "tests/test_segmentation.py",
             "bam_counts": "tests/test_io_bam.py"}
MODEL_ARRAYS = ("normalizedData", "params_L", "params_A", "params_cov", "localAssessments", "iniCall",
                "integerCopyNumber", "posteriorProbs", "individualCall")
TABLES = ("gr", "segmentation", "cnvs", "cnvr", "segmentation_integer", "cnvs_integer", "cnvr_integer")
#: sINI, INI and posteriors are sums of posteriors: an absolute floor far below any decision
ABS_FLOOR = {"localAssessments": 1e-12, "iniCall": 1e-12, "posteriorProbs": 1e-15, "individualCall": 1e-12,
             "params_A": 1e-15}


def entry_point(case: str):
    return manifest(case)["call"].split("(")[0]


def items(case: str) -> list[str]:
    m = manifest(case)
    arrays = m["arrays"] if isinstance(m["arrays"], dict) else {}
    tables = m["tables"] if isinstance(m["tables"], dict) else {}
    return [a for a in MODEL_ARRAYS if a in arrays] + [t for t in TABLES if t in tables]


def golden_items():
    out = []
    for case in case_names():
        if case in ELSEWHERE or entry_point(case) not in ENTRY_POINTS:
            out.append(pytest.param(case, None, id=f"{case}"))
        else:
            out.extend(pytest.param(case, item, id=f"{case}-{item}") for item in items(case))
    return out


def input_frame(case: str, name: str, names: list[str]) -> pd.DataFrame:
    """The case's counts ``name`` (input_counts, controls_counts) as a table, with the input ranges if any."""
    counts = array(case, name)
    if "input_ranges" in (manifest(case)["tables"] or {}):
        frame = table(case, "input_ranges")
        for k, s in enumerate(names):
            frame[s] = counts[:, k]
        return frame
    return pd.DataFrame(np.asarray(counts, dtype=np.float64), columns=names)


@lru_cache(maxsize=None)
def run_case(case: str, backend: str = "cpu"):
    data = input_frame(case, "input_counts", manifest(case)["sampleNames"])
    args = [data]
    if entry_point(case) == "referencecn.mops":  # the controls: manifest array controls_counts
        info = manifest(case)["arrays"]["controls_counts"]
        names = (info.get("dimnames") or [None, None])[1] or [f"Control_{k + 1}" for k in range(info["shape"][1])]
        args.append(input_frame(case, "controls_counts", names))
    result = ENTRY_POINTS[entry_point(case)](*args, backend=backend, **call_kwargs(case))
    if "cnvr_integer" in (manifest(case)["tables"] or {}):
        return result, gcnmops.calc_integer_copy_numbers(result, backend=backend)
    return result, None


def ours_array(result, name: str) -> np.ndarray:
    return {
        "normalizedData": lambda: result.normalized_data,
        "params_L": lambda: result.params["L"],
        "params_A": lambda: result.params["A"],
        "params_cov": lambda: result.params["cov"],
        "localAssessments": lambda: result.local_assessments,
        "iniCall": lambda: result.ini_call,
        "integerCopyNumber": lambda: result.integer_copy_number,
        "posteriorProbs": lambda: result.posterior_probs,
        "individualCall": lambda: result.individual_call,
    }[name]()


def compare_table(ours: pd.DataFrame, gold: pd.DataFrame, what: str) -> None:
    assert list(ours.columns) == list(gold.columns), f"{what}: columns {list(ours.columns)} != {list(gold.columns)}"
    assert len(ours) == len(gold), f"{what}: {len(ours)} rows, cn.mops has {len(gold)}"
    for col in gold.columns:
        if col in ("median", "mean"):
            assert_close(ours[col].to_numpy(dtype=float), gold[col].to_numpy(dtype=float), f"{what}.{col}",
                         atol=1e-12)
        else:
            mine = ours[col].map(lambda v: "NA" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v))
            theirs = gold[col].astype(str)
            bad = np.flatnonzero(mine.to_numpy() != theirs.to_numpy())
            assert bad.size == 0, (f"{what}.{col}: {bad.size} rows differ; first row {bad[0]}: "
                                   f"{mine.iloc[bad[0]]!r} vs cn.mops {theirs.iloc[bad[0]]!r}")


@pytest.mark.skipif(not GOLDEN_DIR.is_dir(), reason=f"golden directory {GOLDEN_DIR} not found")
@pytest.mark.parametrize("case,item", golden_items())
def test_golden(case: str, item: str | None) -> None:
    if case in ELSEWHERE:
        pytest.skip(f"golden case {case} is checked in {ELSEWHERE[case]}")
    assert item is not None, f"golden case {case}: no test for {entry_point(case)}()"
    result, integer = run_case(case)
    if item.endswith("_integer"):
        ours = getattr(integer, item.removesuffix("_integer"))
        compare_table(ours, table(case, item), f"{case}/{item}")
    elif item in TABLES:
        ours = result.gr if item == "gr" else getattr(result, item)
        compare_table(ours, table(case, item), f"{case}/{item}")
    elif item == "integerCopyNumber":
        mine, gold = ours_array(result, item), array(case, item)
        assert mine.shape == gold.shape
        bad = np.argwhere(mine != gold)
        assert bad.size == 0, f"{case}/{item}: {len(bad)} labels differ, first at {tuple(bad[0])}"
    else:
        assert_close(ours_array(result, item), array(case, item), f"{case}/{item}",
                     atol=ABS_FLOOR.get(item, 1e-300))


BITWISE_ARRAYS = ("normalizedData", "params_L", "params_A", "localAssessments", "iniCall", "individualCall",
                  "posteriorProbs")


def bitwise_items():
    return [pytest.param(case, item, id=f"{case}-{item}") for case in case_names()
            if case not in ELSEWHERE and entry_point(case) in ENTRY_POINTS
            for item in items(case) if item in BITWISE_ARRAYS]


@pytest.mark.skipif(not GOLDEN_DIR.is_dir(), reason=f"golden directory {GOLDEN_DIR} not found")
@pytest.mark.parametrize("case,item", bitwise_items())
def test_golden_bit_identical(case: str, item: str) -> None:
    """Beyond 1e-9: the CPU pipeline reproduces cn.mops's doubles exactly (R's lgamma, summation orders and
    long-double means), so near-tied segment boundaries cannot fall differently."""
    result, _ = run_case(case)
    mine = np.asarray(ours_array(result, item), dtype=np.float64)
    gold = np.asarray(array(case, item), dtype=np.float64)
    differ = np.flatnonzero((mine != gold).ravel() & ~(np.isnan(mine) & np.isnan(gold)).ravel())
    assert differ.size == 0, f"{case}/{item}: {differ.size} of {gold.size} values differ in some bit"
