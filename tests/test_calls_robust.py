"""make_robust_cnvr and calc_fractional_copy_numbers (cn.mops's makeRobustCNVR / calcFractionalCopyNumbers).

No golden cases exist for these two; the tests check their behaviour on hand-built and simulated results.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gcnmops
from gcnmops.errors import InputError
from gcnmops.example import example_cohort
from gcnmops.result import CNVDetectionResult
from gcnmops.calls.robust import calc_fractional_copy_numbers, make_robust_cnvr

LABEL = r"^CN\d+\.\d$"


# ------------------------------------------------------------------------------------------ helpers
def _gr(sizes: dict[str, int], window: int = 1000) -> pd.DataFrame:
    parts = []
    for chrom, n in sizes.items():
        pos = np.arange(n, dtype=np.int64)
        parts.append(pd.DataFrame({"seqnames": chrom, "start": pos * window + 1, "end": (pos + 1) * window}))
    return pd.concat(parts, ignore_index=True)


def _result(gr: pd.DataFrame, samples: list[str], *, ini=None, x=None, cnvs=None, segmentation=None, cnvr=None,
            method="cn.mops", lam=None) -> CNVDetectionResult:
    """A minimal result built by hand (the slots these functions read)."""
    m, N = len(gr), len(samples)
    folds = [0.025, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4]
    classes = [f"CN{i}" for i in range(9)]
    empty = pd.DataFrame(columns=["seqnames", "start", "end", "sampleName", "median", "mean", "CN"])
    L = np.outer(np.full(m, 100.0) if lam is None else lam, folds)
    return CNVDetectionResult(
        gr=gr, normalized_data=np.zeros((m, N)) if x is None else x, local_assessments=np.zeros((m, N)),
        individual_call=np.zeros((m, N)), ini_call=np.zeros(m) if ini is None else ini,
        cn_index=np.full((m, N), 2, dtype=np.int8), posterior_probs=None,
        params={"method": method, "folds": folds, "classes": classes, "priorImpact": 1.0, "cyc": 20,
                "minReadCount": 1.0, "mainClass": "CN2", "upperThreshold": 0.5, "lowerThreshold": -0.9,
                "cov": np.ones(N), "L": L, "A": np.zeros((m, 9))},
        segmentation=empty if segmentation is None else segmentation, cnvs=empty if cnvs is None else cnvs,
        cnvr=pd.DataFrame(columns=["seqnames", "start", "end", *samples]) if cnvr is None else cnvr,
        sample_names=samples)


@pytest.fixture(scope="module")
def cohort_result():
    data, truth = example_cohort(n_regions=3000, n_samples=24, n_cnvs=8, seed=4)
    return gcnmops.cn_mops(data, backend="cpu"), truth


# --------------------------------------------------------------------------------------- makeRobustCNVR
def test_robust_regions_follow_the_ini_plateaus(caplog):
    gr = _gr({"chr1": 300, "chr2": 200})
    rng = np.random.default_rng(0)
    ini = np.abs(rng.normal(0, 0.02, len(gr)))
    ini[100:130] += 1.0  # chr1 rows 100..129: many samples deviate
    ini[300 + 50:300 + 62] += 0.8  # chr2 rows 50..61
    ini[200:202] += 3.0  # two rows only: shorter than min_width
    r = _result(gr, ["a", "b"], ini=ini)
    out = make_robust_cnvr(r, robust=0.5, min_width=4)
    assert list(out.cnvr.columns) == ["seqnames", "start", "end", "a", "b"]
    got = list(map(tuple, out.cnvr[["seqnames", "start", "end"]].to_numpy()))
    assert got == [("chr1", gr["start"][100], gr["end"][129]), ("chr2", gr["start"][350], gr["end"][361])]
    assert out.cnvr[["a", "b"]].isna().all().all()
    # only cnvr changes
    assert out.segmentation is r.segmentation and out.cnvs is r.cnvs and out.ini_call is r.ini_call
    # a higher robustness keeps only the stronger plateau; a huge one none (with cn.mops's message)
    strong = make_robust_cnvr(r, robust=0.9, min_width=4)
    assert list(strong.cnvr["seqnames"]) == ["chr1"]
    with caplog.at_level("INFO", logger="gcnmops"):
        none = make_robust_cnvr(r, robust=10, min_width=4)
    assert len(none.cnvr) == 0 and list(none.cnvr.columns) == ["seqnames", "start", "end", "a", "b"]
    assert "No CNV regions detected with this settings." in caplog.text


def test_robust_zero_is_the_union_of_the_cnvs(caplog):
    gr = _gr({"chr1": 100, "chr2": 100})
    cnvs = pd.DataFrame({
        "seqnames": ["chr1", "chr1", "chr1", "chr1", "chr2"],
        "start": [10001, 15001, 20001, 60001, 1],
        "end": [16000, 20000, 25000, 61000, 5000],  # 1-2 overlap, 2-3 touch (20000 | 20001): one region
        "sampleName": ["a", "b", "a", "b", "a"], "median": 1.0, "mean": 1.0, "CN": None,
    })
    r = _result(gr, ["a", "b"], cnvs=cnvs)
    out = make_robust_cnvr(r, robust=0)
    assert list(map(tuple, out.cnvr[["seqnames", "start", "end"]].to_numpy())) == [
        ("chr1", 10001, 25000), ("chr1", 60001, 61000), ("chr2", 1, 5000)]
    assert make_robust_cnvr(r, robust=-1).cnvr.equals(out.cnvr)
    with caplog.at_level("INFO", logger="gcnmops"):
        empty = make_robust_cnvr(_result(gr, ["a", "b"]), robust=0)
    assert len(empty.cnvr) == 0 and "No individual CNVs in the result object." in caplog.text
    with pytest.raises(InputError, match="robust"):
        make_robust_cnvr(r, robust="high")


def test_robust_on_a_cohort(cohort_result):
    r, truth = cohort_result
    # robust <= 0 restores cn.mops's CNV regions (contiguous windows: genomic and row unions agree)
    restored = make_robust_cnvr(r, robust=0)
    assert restored.cnvr.reset_index(drop=True)[["seqnames", "start", "end"]].equals(
        r.cnvr.reset_index(drop=True)[["seqnames", "start", "end"]].astype({"start": np.int64, "end": np.int64}))
    # robust regions: fewer as robustness grows, each one high in INI and overlapping a CNV region
    counts = []
    for robust in (0.1, 0.3, 0.6):
        rr = make_robust_cnvr(r, robust=robust, min_width=4)
        counts.append(len(rr.cnvr))
        for _, reg in rr.cnvr.iterrows():
            rows = (r.gr["seqnames"] == reg["seqnames"]) & (r.gr["start"] >= reg["start"]) & (r.gr["end"] <= reg["end"])
            assert r.ini_call[rows.to_numpy()].mean() > robust
            assert ((r.cnvr["seqnames"] == reg["seqnames"]) & (r.cnvr["start"] <= reg["end"])
                    & (r.cnvr["end"] >= reg["start"])).any()
    assert counts[0] >= counts[1] >= counts[2] >= 1
    # planted CNVs with many carriers are found as robust regions
    carriers = truth.groupby(["seqnames", "start", "end"]).size()
    common = carriers[carriers >= 5]
    rr = make_robust_cnvr(r, robust=0.1, min_width=4)
    for (chrom, start, end), _ in common.items():
        assert ((rr.cnvr["seqnames"] == chrom) & (rr.cnvr["start"] <= end) & (rr.cnvr["end"] >= start)).any()


# ----------------------------------------------------------------------------- calcFractionalCopyNumbers
def test_fractional_errors(cohort_result):
    r, _ = cohort_result
    with pytest.raises(InputError, match="Only possible for referencecn.mops!"):
        calc_fractional_copy_numbers(r)
    with pytest.raises(InputError, match="No CNV regions in result object"):
        calc_fractional_copy_numbers(r.replace(cnvr=r.cnvr.iloc[:0]))
    ref_empty = _result(_gr({"chr1": 50}), ["a", "b"], method="referencecn.mops")
    with pytest.raises(InputError, match="No CNV regions in result object"):
        calc_fractional_copy_numbers(ref_empty)
    with pytest.raises(InputError, match="segStat"):
        calc_fractional_copy_numbers(ref_empty, seg_stat="mode")


def _synthetic_reference(lam: float = 1000.0):
    """A referencecn.mops-shaped result: 3 samples, 60 regions, lambda ``lam``; sample b has 1.5x (CN3)
    in rows 20..29, sample c 0.5x (CN1) in rows 40..49."""
    gr = _gr({"chr1": 60})
    x = np.full((60, 3), lam)
    x[20:30, 1] *= 1.5
    x[40:50, 2] *= 0.5
    seg_rows = [("b", 0, 19, 0.0), ("b", 20, 29, np.log2(1.5)), ("b", 30, 59, 0.0), ("c", 0, 39, 0.0),
                ("c", 40, 49, -1.0), ("c", 50, 59, 0.0), ("a", 0, 59, 0.01)]
    seg = pd.DataFrame({"seqnames": "chr1", "start": [gr["start"][s] for _, s, _, _ in seg_rows],
                        "end": [gr["end"][e] for _, _, e, _ in seg_rows], "sampleName": [k for k, *_ in seg_rows],
                        "median": [v for *_, v in seg_rows], "mean": [v for *_, v in seg_rows], "CN": None})
    cnvs = seg.iloc[[1, 4]].reset_index(drop=True)
    cnvr = pd.DataFrame({"seqnames": "chr1", "start": cnvs["start"], "end": cnvs["end"], "a": None, "b": None,
                         "c": None})
    return _result(gr, ["a", "b", "c"], x=x, cnvs=cnvs, segmentation=seg, cnvr=cnvr, method="referencecn.mops",
                   lam=np.full(60, lam))


def test_fractional_copy_numbers_of_a_synthetic_reference_result():
    r = _synthetic_reference()
    out = calc_fractional_copy_numbers(r)
    # with many reads the one-step posterior is certain: sINI = log2 of the true fold, CN = 2 * fold
    assert out.cnvr[["a", "b", "c"]].values.tolist() == [["CN2.0", "CN3.0", "CN2.0"], ["CN2.0", "CN2.0", "CN1.0"]]
    assert out.cnvr[["seqnames", "start", "end"]].equals(r.cnvr[["seqnames", "start", "end"]])
    assert out.cnvs["CN"].tolist() == ["CN3.0", "CN1.0"]
    # segments: 2 * 2^mean, one decimal
    assert out.segmentation["CN"].tolist() == ["CN2.0", "CN3.0", "CN2.0", "CN2.0", "CN1.0", "CN2.0", "CN2.0"]
    assert out.segmentation["CN"].str.match(LABEL).all()
    # the input is not modified
    assert r.cnvr["a"].isna().all() and r.segmentation["CN"].isna().all()
    # median statistic: same answer on these flat segments
    med = calc_fractional_copy_numbers(r, seg_stat="median")
    assert med.cnvr.equals(out.cnvr)
    # the label is written with one decimal, rounded
    tweaked = r.replace(segmentation=r.segmentation.assign(mean=[0.0, np.log2(1.2345), 0, 0, 0, 0, 3.0]))
    assert calc_fractional_copy_numbers(tweaked).segmentation["CN"].tolist()[1::5] == ["CN2.5", "CN16.0"]


def test_fractional_copy_numbers_of_reference_cn_mops():
    """Cases with a known dosage against normal controls (simulated Poisson counts)."""
    rng = np.random.default_rng(3)
    m = 1500
    mu = rng.uniform(80, 120, m)
    controls = rng.poisson(mu[:, None] * np.ones((1, 20))).astype(float)
    dosage = np.ones((m, 4))
    dosage[300:340, 0] = 1.5  # case 1: CN3
    dosage[800:830, 1] = 0.5  # case 2: CN1
    dosage[1100:1140, 2] = 2.0  # case 3: CN4
    cases = rng.poisson(mu[:, None] * dosage).astype(float)
    pos = np.arange(m)
    ranges = pd.DataFrame({"seqnames": "chr7", "start": pos * 5000 + 1, "end": (pos + 1) * 5000})
    cases_df = pd.concat([ranges, pd.DataFrame(cases, columns=[f"T{k}" for k in range(1, 5)])], axis=1)
    controls_df = pd.concat([ranges, pd.DataFrame(controls, columns=[f"N{k}" for k in range(1, 21)])], axis=1)
    r = gcnmops.reference_cn_mops(cases_df, controls_df, seg_algorithm="fast", backend="cpu")
    out = calc_fractional_copy_numbers(r)
    assert out.cnvr[r.sample_names].stack().str.match(LABEL).all()

    def label_at(sample, row):
        hit = out.cnvr[(out.cnvr["start"] <= ranges["start"][row]) & (out.cnvr["end"] >= ranges["end"][row])]
        assert len(hit) == 1
        return float(hit[sample].iat[0][2:])

    assert 2.6 <= label_at("T1", 320) <= 3.4
    assert 0.7 <= label_at("T2", 815) <= 1.3
    assert 3.5 <= label_at("T3", 1120) <= 4.5
    assert 1.7 <= label_at("T4", 320) <= 2.3  # a sample without the CNV stays near 2
    # CNVs of a sample get labels from their own segment mean
    for _, c in out.cnvs.iterrows():
        assert c["CN"] == f"CN{round(2 * 2 ** c['mean'], 1):.1f}"
