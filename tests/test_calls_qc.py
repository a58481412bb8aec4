"""Sample QC (calls.qc), windows left out (io.exclude), call filters (calls.filters), and what a run writes of
them: sample_qc.tsv, params.json, the VCF header, FILTER values and filter columns, per-window tracks."""
from __future__ import annotations

import json
import logging
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from gcnmops.calls import qc
from gcnmops.calls.filters import call_filters, filter_status
from gcnmops.errors import InputError
from gcnmops.io.exclude import exclude_rows, overlapping_windows, read_exclude_bed

try:
    import pysam
except ImportError:  # pragma: no cover - optional
    pysam = None

needs_pysam = pytest.mark.skipif(pysam is None, reason="pysam not installed (pip install pysam)")
BEDTOOLS = shutil.which("bedtools")
BCFTOOLS = shutil.which("bcftools")


# ------------------------------------------------------------------------------------------------ spread
def test_spread_of_a_small_array_by_hand():
    mad, iqr, bivar = qc.spread(np.array([1.0, 2.0, 3.0, 4.0, 100.0, np.nan]))
    assert mad == pytest.approx(1.4826)  # median |a - 3| = 1, scaled
    assert iqr == pytest.approx(2.0)  # 4 - 2 (linear interpolation)
    assert 1.0 < bivar < 2.5  # the outlier 100 has no weight
    assert np.isnan(qc.spread(np.array([np.nan]))[0])


def test_spread_estimates_the_standard_deviation_robustly():
    rng = np.random.default_rng(3)
    x = rng.normal(0.0, 0.5, 200_000)
    mad, iqr, bivar = qc.spread(x)
    assert mad == pytest.approx(0.5, rel=0.02) and bivar == pytest.approx(0.5, rel=0.02)
    assert iqr == pytest.approx(0.5 * 1.349, rel=0.02)
    x[:10_000] = 50.0  # 5% wild values: the standard deviation explodes, the robust scales barely move
    mad, _, bivar = qc.spread(x)
    assert np.std(x) > 10 and mad < 0.6 and bivar < 0.6


def test_biweight_midvariance_without_spread_is_the_mad():
    assert qc.biweight_midvariance(np.zeros(10)) == 0.0


# ------------------------------------------------------------------------------------------------ outliers
def _coverage(medians, empty):
    return pd.DataFrame({"sample": [f"s{i}" for i in range(len(medians))], "total_count": 1.0,
                         "median_count": np.asarray(medians, float), "empty_fraction": np.asarray(empty, float)})


def test_an_empty_sample_is_flagged_and_auto_excluded():
    cov = _coverage([98, 105, 0, 101, 99], [0.021, 0.03, 0.961, 0.025, 0.028])
    reasons = qc.outlier_reasons(cov)
    assert reasons[2] == ["median_zero", "empty_windows"] and not any(reasons[:2] + reasons[3:])
    assert qc.auto_excluded(cov) == ["s2"]
    assert qc.excluded_samples("auto", cov) == ["s2"]
    assert qc.excluded_samples("s0, s3", cov) == ["s0", "s3"]
    with pytest.raises(InputError, match="unknown sample"):
        qc.excluded_samples(["s9"], cov)


def test_a_tight_or_sparse_cohort_flags_nothing():
    assert not any(qc.outlier_reasons(_coverage([100, 100, 100, 101], [0.02, 0.02, 0.02, 0.05])))  # MAD 0
    assert not any(qc.outlier_reasons(_coverage([0, 0, 0, 0], [0.6, 0.7, 0.65, 0.62])))  # sparse data
    two = qc.outlier_reasons(_coverage([100, 0], [0.0, 0.9]))  # too few for the cohort rule
    assert two == [[], ["median_zero"]]


def test_spread_and_cnv_count_outliers():
    table = _coverage([100] * 5, [0.01] * 5).assign(log2_mad=[0.1, 0.12, 0.11, 0.6, 0.1],
                                                    cnvs=[40, 45, 2000, 50, 38])
    assert qc.outlier_reasons(table) == [[], [], ["cnv_count"], ["spread"], []]


def test_log2_ratios_against_the_windows_median():
    x = np.array([[10.0, 20.0, 30.0], [0.0, 0.0, 5.0], [np.nan, 4.0, 4.0]])
    lr = qc.log2_ratios(x)
    assert lr[0] == pytest.approx(np.log2(np.array([11, 21, 31]) / 21))
    assert np.isnan(lr[1]).all()  # median 0: left out
    assert np.isnan(lr[2, 0]) and lr[2, 1] == 0.0


# ------------------------------------------------------------------------------------------------ --exclude
WINDOWS = pd.DataFrame({"seqnames": ["chr1"] * 5 + ["chr2"] * 2,
                        "start": [1, 101, 201, 301, 401, 1, 101], "end": [100, 200, 300, 400, 500, 100, 200]})
#: BED lines (0-based, half-open) and the windows each removes (row numbers of WINDOWS)
BOUNDARIES = [
    ("chr1\t100\t101", {1}),        # base 101 (1-based): the second window only
    ("chr1\t99\t100", {0}),         # base 100: the first window only
    ("chr1\t0\t100", {0}),          # the first window exactly
    ("chr1\t200\t200", {1, 2}),     # a point between bases 200 and 201: both sides (bedtools)
    ("chr1\t399\t401", {3, 4}),     # bases 400 and 401
    ("chr2\t0\t1", {5}),            # base 1 of chr2
    ("chr1\t500\t600", set()),      # after the last window
    ("chr1\t1000\t2000\nchr3\t0\t1000", set()),  # beyond the windows; another chromosome
]


def _write_bed(path, lines):
    path.write_text("track name=blacklist\n# a comment\n" + "".join(f"{ln}\tname\n" for ln in lines))
    return path


@pytest.mark.parametrize("line,removed", BOUNDARIES)
def test_exclude_boundaries(tmp_path, line, removed):
    hit = exclude_rows(WINDOWS, _write_bed(tmp_path / "x.bed", [line]))
    assert set(np.flatnonzero(hit)) == removed


@pytest.mark.skipif(BEDTOOLS is None, reason="bedtools not installed")
def test_exclude_is_bedtools_intersect_v(tmp_path):
    """Random windows and intervals (points, touching and nested ones too): the windows left are those of
    ``bedtools intersect -v``."""
    rng = np.random.default_rng(7)
    starts = np.sort(rng.choice(np.arange(1, 100_000), 400, replace=False))
    ends = starts + rng.integers(0, 300, starts.size)
    windows = pd.DataFrame({"seqnames": "chr1", "start": starts, "end": ends})
    a = rng.integers(0, 100_000, 60)
    bed = [f"chr1\t{s}\t{s + w}" for s, w in zip(a, rng.choice([0, 1, 2, 50, 500], 60))]
    hit = exclude_rows(windows, _write_bed(tmp_path / "x.bed", bed))
    wpath = tmp_path / "w.bed"
    wpath.write_text("".join(f"chr1\t{s - 1}\t{e}\n" for s, e in zip(starts, ends)))
    plain = tmp_path / "b.bed"
    plain.write_text("".join(f"{ln}\n" for ln in bed))
    out = subprocess.run([BEDTOOLS, "intersect", "-v", "-a", wpath, "-b", plain], capture_output=True, text=True,
                         check=True).stdout.split()
    kept = {int(v) + 1 for v in out[1::3]}
    assert set(starts[~hit]) == kept and 0 < hit.sum() < hit.size


def test_exclude_merges_touching_intervals_and_refuses_bad_lines(tmp_path):
    merged = read_exclude_bed(_write_bed(tmp_path / "m.bed", ["chr1\t10\t20", "chr1\t20\t30", "chr1\t5\t12"]))
    assert [list(v) for v in merged["chr1"]] == [[5], [30]]
    assert overlapping_windows(WINDOWS, merged).sum() == 1
    with pytest.raises(InputError, match="line 3"):
        read_exclude_bed(_write_bed(tmp_path / "bad.bed", ["chr1\tten\t20"]))
    with pytest.raises(InputError, match="naming"):
        exclude_rows(WINDOWS, _write_bed(tmp_path / "n.bed", ["1\t0\t100"]))
    with pytest.raises(InputError, match="bare matrix"):
        exclude_rows(None, tmp_path / "n.bed")


# ------------------------------------------------------------------------------------------------ filters
def test_filter_status():
    sel = call_filters(min_length=1000, min_quality=20)
    assert sel == {"minLength": 1000, "minQuality": 20}
    got = filter_status(np.array([999, 1000, 5000, 10]), np.array([30, 19, 20, 5]), sel)
    assert list(got) == ["Short", "LowQual", "PASS", "LowQual;Short"]
    assert list(filter_status(np.array([1]), np.array([0]), {})) == ["PASS"]
    with pytest.raises(InputError, match="--min-length"):
        call_filters(min_length=-1)
