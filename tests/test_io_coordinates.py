"""Coordinate conventions of count files: BED-style (0-based, half-open) files converted to cn.mops's 1-based ranges,
undeclared 0-based-looking files refused naming --zero-based/--one-based, never a silent shift."""
from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import gcnmops
from gcnmops.errors import InputError
from gcnmops.example import example_cohort
from gcnmops.io import read_counts

pysam = pytest.importorskip("pysam")


@pytest.fixture(scope="module")
def cohort():
    return example_cohort(n_regions=400, n_samples=8, window=1000, seed=3, n_cnvs=3)[0]


def _frame(data, zero_based: bool, seq="seqnames") -> pd.DataFrame:
    r = data.ranges
    df = pd.DataFrame({seq: r["seqnames"].astype(str), "start": r["start"] - (1 if zero_based else 0), "end": r["end"]})
    for k, s in enumerate(data.sample_names):
        df[s] = data.counts[:, k].astype(np.int64)
    return df


def _bincov(tmp_path, data):
    """A GATK-SV bincov matrix: '#Chr Start End samples...', 0-based, bgzipped and tabix-indexed (pysam)."""
    df = _frame(data, True, "#Chr").rename(columns={"start": "Start", "end": "End"})
    plain = tmp_path / "batch.bincov.bed"
    df.to_csv(plain, sep="\t", index=False)
    gz = pysam.tabix_index(str(plain), preset="bed", force=True)  # bgzip + index; tabix skips the '#' header
    return gz


def _same_ranges(a, b):
    pd.testing.assert_frame_equal(a.ranges.reset_index(drop=True).astype({"seqnames": str}),
                                  b.ranges.reset_index(drop=True).astype({"seqnames": str}), check_dtype=False)
    np.testing.assert_array_equal(a.counts, b.counts)
    assert list(a.sample_names) == list(b.sample_names)


def test_bincov_matrix_is_read_as_zero_based(tmp_path, cohort, caplog):
    gz = _bincov(tmp_path, cohort)
    with caplog.at_level(logging.INFO, logger="gcnmops"):
        data = read_counts(gz)
    _same_ranges(data, cohort)  # starts + 1: the same 1-based bins as the original cohort
    lines = [r.getMessage() for r in caplog.records if "coordinates read as" in r.getMessage()]
    assert len(lines) == 1 and "0-based" in lines[0] and "'#' header" in lines[0]


def test_zero_and_one_based_give_the_same_calls(tmp_path, cohort):
    gz = _bincov(tmp_path, cohort)
    one = tmp_path / "one.tsv"
    _frame(cohort, False).to_csv(one, sep="\t", index=False)
    a = gcnmops.cn_mops(read_counts(gz), backend="cpu")
    b = gcnmops.cn_mops(read_counts(one), backend="cpu")
    assert len(b.cnvs) > 0
    pd.testing.assert_frame_equal(a.cnvs.reset_index(drop=True), b.cnvs.reset_index(drop=True))
    assert (a.cnvs["start"] % 1000 == 1).all()  # the bins' first bases, not their 0-based starts


def test_bed_extension_declares_zero_based(tmp_path, cohort):
    p = tmp_path / "counts.bed"
    _frame(cohort, True, "chrom").to_csv(p, sep="\t", index=False)
    _same_ranges(read_counts(p), cohort)


def test_undeclared_zero_based_table_is_refused(tmp_path, cohort):
    p = tmp_path / "pasted_mosdepth.tsv"  # 0-based bins without a BED marker: starts at 0, bins abut half-open
    _frame(cohort, True).to_csv(p, sep="\t", index=False)
    with pytest.raises(InputError, match="--zero-based.*--one-based"):
        read_counts(p)
    _same_ranges(read_counts(p, coordinates="0-based"), cohort)
    shifted = read_counts(p, coordinates="1-based")  # said by the user: as it stands
    assert int(shifted.ranges["start"].iloc[0]) == 0


def test_bed_style_header_over_one_based_bins_is_refused(tmp_path, cohort):
    p = tmp_path / "odd.tsv"
    _frame(cohort, False, "#chrom").to_csv(p, sep="\t", index=False)
    with pytest.raises(InputError, match="1-based closed bins do.*--zero-based"):
        read_counts(p)
    _same_ranges(read_counts(p, coordinates="1-based"), cohort)


def test_one_based_table_is_read_as_it_is(tmp_path, cohort):
    p = tmp_path / "plain.tsv.gz"
    _frame(cohort, False).to_csv(p, sep="\t", index=False)
    _same_ranges(read_counts(p), cohort)


def test_parquet_follows_the_rule(tmp_path, cohort):
    pytest.importorskip("pyarrow")
    p = tmp_path / "z.parquet"
    _frame(cohort, True).to_parquet(p, index=False)
    with pytest.raises(InputError, match="--zero-based"):
        read_counts(p)
    _same_ranges(read_counts(p, coordinates="0-based"), cohort)


def test_bad_choice():
    with pytest.raises(InputError, match="coordinates must be one of"):
        read_counts("x.tsv", coordinates="0")


def test_cli_flags(tmp_path, cohort):
    p = tmp_path / "pasted.tsv"
    _frame(cohort, True).to_csv(p, sep="\t", index=False)
    cmd = [sys.executable, "-m", "gcnmops", "convert", str(p), "-o", str(tmp_path / "c.zarr")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 2 and "--zero-based" in r.stderr
    r = subprocess.run(cmd + ["--zero-based"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    from gcnmops.io.store import open_count_store

    store = open_count_store(tmp_path / "c.zarr")
    assert store.shape == cohort.counts.shape
