"""seg_algorithm="DNAcopy": CBS through R's DNAcopy (rpy2), and the errors when it is not installed.

The DNAcopy tests skip where rpy2/R/DNAcopy are missing (scripts/setup.sh installs r-bioc-dnacopy); the
missing-package tests run everywhere.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

import gcnmops
import gcnmops.segmentation.dnacopy as dna
from gcnmops.calls.cnvs import call_cnvs, call_cnvs_dnacopy
from gcnmops.data import chromosome_blocks
from gcnmops.errors import InputError
from gcnmops.example import example_cohort
from gcnmops.io.rsession import r_session

needs_dnacopy = pytest.mark.skipif(not dna.dnacopy_available(), reason="rpy2 + R package DNAcopy not installed")

COHORT = dict(n_regions=2000, n_samples=16, n_cnvs=6, seed=2)


@pytest.fixture(scope="module")
def cohort():
    return example_cohort(**COHORT)


@pytest.fixture(scope="module")
def dnacopy_result(cohort):
    data, _ = cohort
    return gcnmops.cn_mops(data, backend="cpu", seg_algorithm="DNAcopy", seed=7)


def _overlaps(a: pd.DataFrame, b_row, sample_col: str) -> pd.Series:
    return ((a[sample_col] == b_row["sample_name"]) & (a["seqnames"] == b_row["seqnames"])
            & (a["start"] <= b_row["end"]) & (a["end"] >= b_row["start"]))


# ------------------------------------------------------------------------------------ missing packages
@pytest.fixture
def fresh_session(monkeypatch):
    r_session.cache_clear()
    dna._r_session.cache_clear()
    dna._boundary.cache_clear()
    yield monkeypatch
    r_session.cache_clear()
    dna._r_session.cache_clear()
    dna._boundary.cache_clear()


def test_missing_rpy2_is_a_clear_input_error(fresh_session):
    fresh_session.setitem(sys.modules, "rpy2", None)  # "import rpy2..." now raises ImportError
    fresh_session.setitem(sys.modules, "rpy2.robjects", None)
    sini = np.zeros((50, 2))
    with pytest.raises(InputError, match=r"rpy2.*pip install.*r-bioc-dnacopy.*BiocManager::install\('DNAcopy'\)"):
        call_cnvs_dnacopy(sini, _gr(50), [("chr1", 0, 50)], ["a", "b"], 0.5, -0.9, 3, False, {})
    assert not dna.dnacopy_available()


def test_cn_mops_reports_missing_rpy2(fresh_session, cohort):
    fresh_session.setitem(sys.modules, "rpy2", None)
    fresh_session.setitem(sys.modules, "rpy2.robjects", None)
    with pytest.raises(InputError, match="DNAcopy"):
        gcnmops.cn_mops(cohort[0], backend="cpu", seg_algorithm="DNAcopy")


@pytest.mark.skipif(not dna.dnacopy_available(), reason="needs rpy2 + R (the R package is faked missing)")
def test_missing_r_package_is_a_clear_input_error(fresh_session):
    fresh_session.setattr(dna, "R_PACKAGE", "DNAcopyNotInstalledAnywhere")
    with pytest.raises(InputError, match=r"R package DNAcopyNotInstalledAnywhere is not installed.*r-bioc-dnacopy"):
        call_cnvs_dnacopy(np.zeros((50, 2)), _gr(50), [("chr1", 0, 50)], ["a", "b"], 0.5, -0.9, 3, False, {})


def _gr(m: int) -> pd.DataFrame:
    idx = np.arange(1, m + 1, dtype=np.int64)
    return pd.DataFrame({"seqnames": "chr1", "start": idx, "end": idx})


# ----------------------------------------------------------------------------------------- behaviour
@needs_dnacopy
def test_finds_most_planted_cnvs(dnacopy_result, cohort):
    _, truth = cohort
    r = dnacopy_result
    assert r.params["segAlgorithm"] == "DNAcopy"
    found = np.array([_overlaps(r.cnvs, t, "sampleName").any() for _, t in truth.iterrows()])
    true_calls = np.array([_overlaps(truth.rename(columns={"sample_name": "sampleName"}),
                                     {"sample_name": c["sampleName"], "seqnames": c["seqnames"], "start": c["start"],
                                      "end": c["end"]}, "sampleName").any() for _, c in r.cnvs.iterrows()])
    assert found.mean() >= 0.8, f"sensitivity {found.mean():.2f}"
    assert true_calls.mean() >= 0.9, f"precision {true_calls.mean():.2f}"
    # losses are called as losses, gains as gains
    for _, t in truth.iterrows():
        hit = r.cnvs[_overlaps(r.cnvs, t, "sampleName")]
        if len(hit):
            assert (np.sign(hit["mean"]) == (1 if t["CN"] > 2 else -1)).all()


@needs_dnacopy
def test_segments_tile_and_medians_come_from_unjittered_values(dnacopy_result, cohort):
    data, _ = cohort
    r = dnacopy_result
    seg = r.segmentation
    gr = r.gr
    sini = r.local_assessments
    row_of_start = {(c, s): i for i, (c, s) in enumerate(zip(gr["seqnames"], gr["start"]))}
    row_of_end = {(c, e): i for i, (c, e) in enumerate(zip(gr["seqnames"], gr["end"]))}
    names = list(r.sample_names)
    covered = np.zeros(sini.shape, dtype=int)
    for _, s in seg.iterrows():
        a, b = row_of_start[(s["seqnames"], s["start"])], row_of_end[(s["seqnames"], s["end"])]
        k = names.index(s["sampleName"])
        covered[a:b + 1, k] += 1
        x = sini[a:b + 1, k]
        assert s["median"] == np.median(x)  # exactly: from the values without jitter
        assert abs(s["mean"] - x.mean()) < 1e-4  # DNAcopy's mean of the jittered values, 4 decimals
        assert s["mean"] == round(s["mean"], 4)
        assert b - a + 1 >= 2
    assert (covered == 1).all()  # segments tile every sample's chromosomes
    # segmentation order: chromosome, sample, start; individual calls are the segment means
    order = seg.assign(c=seg["seqnames"].map({"chr1": 0, "chr2": 1}), k=seg["sampleName"].map(names.index))
    assert order.sort_values(["c", "k", "start"], kind="stable").index.equals(seg.index)
    k = names.index(seg["sampleName"].iat[0])
    a, b = row_of_start[(seg["seqnames"].iat[0], seg["start"].iat[0])], row_of_end[(seg["seqnames"].iat[0],
                                                                                    seg["end"].iat[0])]
    assert (r.individual_call[a:b + 1, k] == seg["mean"].iat[0]).all()
    # CNV calls: the segments beyond the thresholds, at least min(minWidth, 5) regions wide
    cnv_keys = set(map(tuple, r.cnvs[["seqnames", "start", "end", "sampleName"]].to_numpy()))
    expect = seg[(seg["mean"] >= 0.5) | (seg["mean"] <= -0.9)]
    assert cnv_keys == set(map(tuple, expect[["seqnames", "start", "end", "sampleName"]].to_numpy()))


@needs_dnacopy
def test_integer_copy_numbers_and_writers_accept_the_result(dnacopy_result, tmp_path):
    integer = gcnmops.calc_integer_copy_numbers(dnacopy_result)
    assert set(integer.cnvs["CN"]) <= {f"CN{i}" for i in range(9)}
    written = integer.write(tmp_path, formats=["vcf", "bed"])
    assert all(p.exists() for p in written)


@needs_dnacopy
def test_seed_makes_runs_reproducible(cohort, dnacopy_result):
    data, _ = cohort
    sini = dnacopy_result.local_assessments[:, :3]
    blocks = chromosome_blocks(data.chromosomes)
    a = dna.dnacopy_segments(sini, blocks, 3, seed=11)
    b = dna.dnacopy_segments(sini, blocks, 3, seed=11)
    pd.testing.assert_frame_equal(a, b)
    # the seed may come with the segmentation arguments too (cn_mops(..., seed=...) passes it that way)
    gr = data.genomic_ranges()
    c1 = call_cnvs_dnacopy(sini, gr, blocks, ["x", "y", "z"], 0.5, -0.9, 3, False, {"seed": 11})
    c2 = call_cnvs_dnacopy(sini, gr, blocks, ["x", "y", "z"], 0.5, -0.9, 3, False, {}, seed=11)
    pd.testing.assert_frame_equal(c1.segmentation, c2.segmentation)


@needs_dnacopy
def test_arguments(cohort, caplog):
    data, _ = cohort
    gr = data.genomic_ranges()
    blocks = chromosome_blocks(data.chromosomes)
    sini = np.zeros((data.n_regions, 2))
    sini[100:140, 0] = -1.0  # a clear loss of 40 regions in sample a
    with pytest.raises(InputError, match="min_width >= 2"):
        call_cnvs_dnacopy(sini, gr, blocks, ["a", "b"], 0.5, -0.9, 1, False, {})
    with pytest.raises(InputError, match="Unknown DNAcopy segmentation argument"):
        call_cnvs_dnacopy(sini, gr, blocks, ["a", "b"], 0.5, -0.9, 3, False, {"delta": 3})
    with caplog.at_level("INFO", logger="gcnmops"):
        calls = call_cnvs_dnacopy(sini, gr, blocks, ["a", "b"], 0.5, -0.9, 12, False,
                                      {"undo_splits": "sdundo", "undo_SD": 2}, seed=1)
    assert 'maximum "minWidth" is 5' in caplog.text
    assert len(calls.cnvs) == 1 and calls.cnvs["sampleName"].iat[0] == "a"
    assert (calls.cnvs["start"].iat[0], calls.cnvs["end"].iat[0]) == (gr["start"].iat[100], gr["end"].iat[139])
    assert calls.cnvr[["seqnames", "start", "end"]].equals(calls.cnvs[["seqnames", "start", "end"]])
    # fewer than 6 regions: no segmentation (as cn.mops), individual calls = sINI
    tiny = call_cnvs(np.ones((5, 2)), _gr(5), [("chr1", 0, 5)], ["a", "b"], 0.5, -0.9, 3, False, {},
                     seg_algorithm="DNAcopy")
    assert len(tiny.segmentation) == 0 and (tiny.individual_call == 1).all()
    # nothing beyond the thresholds: no CNVs, empty tables with the usual columns
    none = call_cnvs_dnacopy(np.zeros((60, 2)), _gr(60), [("chr1", 0, 60)], ["a", "b"], 0.5, -0.9, 3, False, {},
                                 seed=1)
    assert len(none.cnvs) == 0 and list(none.cnvr.columns) == ["seqnames", "start", "end", "a", "b"]
    assert len(none.segmentation) == 2


@needs_dnacopy
def test_stored_boundary_is_getbdry():
    """The boundary loaded for cn.mops's (0.05, 10000, 0.01) equals what getbdry computes."""
    stored = dna._boundary(dna.BDRY_ETA, dna.BDRY_NPERM, dna.BDRY_ALPHA)
    assert np.array_equal(stored, dna._getbdry(dna.BDRY_ETA, dna.BDRY_NPERM, dna.BDRY_ALPHA))
