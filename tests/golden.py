"""Loading the golden outputs of the real cn.mops (format: ../shared/golden/README.md)."""
from __future__ import annotations

import gzip
import json
import os
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
GOLDEN_DIR = Path(os.environ.get("GCNMOPS_GOLDEN_DIR", REPO.parent / "shared" / "golden"))

#: cn.mops argument names -> ours
R_TO_PY = {
    "I": "I", "classes": "classes", "priorImpact": "prior_impact", "cyc": "cyc", "norm": "norm",
    "normType": "norm_type", "sizeFactor": "size_factor", "normQu": "norm_qu", "quSizeFactor": "qu_size_factor",
    "upperThreshold": "upper_threshold", "lowerThreshold": "lower_threshold", "minWidth": "min_width",
    "segAlgorithm": "seg_algorithm", "minReadCount": "min_read_count", "useMedian": "use_median",
    "returnPosterior": "return_posterior",
}


def case_names() -> list[str]:
    if not GOLDEN_DIR.is_dir():
        return []
    return sorted(p.parent.name for p in GOLDEN_DIR.glob("*/manifest.json"))


@lru_cache(maxsize=None)
def manifest(case: str) -> dict:
    return json.loads((GOLDEN_DIR / case / "manifest.json").read_text())


def array(case: str, name: str) -> np.ndarray:
    info = manifest(case)["arrays"][name]
    path = GOLDEN_DIR / case / info["file"]
    if info["dtype"] == "str":
        flat = pd.read_csv(path, sep="\t", header=None, dtype=str, keep_default_na=False).to_numpy()
        return flat.reshape(info["shape"], order="F") if len(info["shape"]) == 1 else flat
    dtype = {"float64": "<f8", "int32": "<i4"}[info["dtype"]]
    return np.frombuffer(gzip.open(path).read(), dtype=dtype).reshape(info["shape"], order="F")


def table(case: str, name: str) -> pd.DataFrame:
    info = manifest(case)["tables"][name]
    return pd.read_csv(GOLDEN_DIR / case / info["file"], sep="\t", dtype={"seqnames": str}, keep_default_na=False,
                       na_values=[])


def call_kwargs(case: str) -> dict:
    """The case's R call parameters mapped to our keyword names (R objects such as controls excluded)."""
    params = manifest(case).get("params") or {}
    return {R_TO_PY[k]: v for k, v in params.items() if k in R_TO_PY}


def assert_close(actual, expected, what: str, rtol: float = 1e-9, atol: float = 1e-300) -> None:
    """|a - e| <= rtol * |e| + atol elementwise, NaN positions equal; the message names the worst element."""
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    assert a.shape == e.shape, f"{what}: shape {a.shape} != {e.shape}"
    nan_a, nan_e = np.isnan(a), np.isnan(e)
    assert (nan_a == nan_e).all(), f"{what}: NaN positions differ"
    ok = nan_e | (np.abs(a - e) <= rtol * np.abs(e) + atol)
    if not ok.all():
        idx = np.unravel_index(np.argmax(~ok), ok.shape)
        raise AssertionError(f"{what}: {int((~ok).sum())} value(s) beyond rtol {rtol}; first at {idx}: "
                             f"{a[idx]!r} vs cn.mops {e[idx]!r}")
