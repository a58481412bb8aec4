"""Bad input (issue 16): every case ends in cn.mops's result or an InputError naming the problem and the fix.

A table of bad files, each through the Python API (InputError with the expected words) and the command line
(exit 2, stderr starting with "error:", no traceback, no output folder); inputs that are recognized and
repaired (row-name columns, numeric headers, comment lines, unsorted regions); huge counts (memory and time
bounded by the matrix, not by the values; the bounded density mode against the FFT one); parameters that arrive
as strings; objects built by hand, unknown arguments, commands refused before any work; and bounded-time fuzz
tests of the readers (TSV, CSV, npz, Parquet, BAM). Faults (signals, a full disk, read-only installs, killed
batches) are in test_cli_meta.py, test_jitcache.py and test_batch.py.
"""
from __future__ import annotations

import gzip
import io
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import background
import gcnmops
from gcnmops.data import CountData
from gcnmops.errors import InputError
from gcnmops.io import read_counts
from gcnmops.io.columns import count_data_from_frame
from gcnmops.params import CnMopsParams, as_bool
from gcnmops.pipeline.methods import build_params

REPO = Path(__file__).resolve().parents[1]


def _parquet_ok() -> bool:
    try:
        import pyarrow  # noqa: F401
    except Exception:
        return False
    return True




def _frame(m: int = 40, n: int = 4, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.poisson(60, size=(m, n)), columns=[f"S{k + 1}" for k in range(n)])
    df.insert(0, "end", np.arange(1, m + 1) * 1000)
    df.insert(0, "start", np.arange(m) * 1000 + 1)
    df.insert(0, "seqnames", ["chr1"] * (m // 2) + ["chr2"] * (m - m // 2))
    return df


def _tsv(df: pd.DataFrame, **kw) -> str:
    buf = io.StringIO()
    df.to_csv(buf, sep="\t", index=False, **kw)
    return buf.getvalue()


def _csv(df: pd.DataFrame, **kw) -> str:
    buf = io.StringIO()
    df.to_csv(buf, index=kw.pop("index", False), **kw)
    return buf.getvalue()


def _with(df: pd.DataFrame, row: int, col: str, value) -> pd.DataFrame:
    out = df.copy().astype({col: object})
    out.loc[row, col] = value
    return out


# --------------------------------------------------------------------------------------------
# the table: (file name, content, words the message must hold)
# --------------------------------------------------------------------------------------------
BAD_FILES = [
    ("negative.tsv", lambda: _tsv(_with(_frame(), 3, "start", -7)), ["negative position -7", "line 5", "'start'"]),
    ("beyond_int64.tsv", lambda: _tsv(_with(_frame(), 4, "start", "99999999999999999999")),
     ["99999999999999999999", "beyond the largest supported position", "line 6"]),
    ("end_before_start.tsv", lambda: _tsv(_with(_frame(), 5, "end", 4000)),
     ["ends before it starts", "line 7", "chr1:5001-4000", "swapped"]),
    ("tab_in_name.csv", lambda: _csv(_frame().rename(columns={"S2": "S\t2"})), ["'S\\t2'", "contains a tab"]),
    ("newline_in_name.csv", lambda: _csv(_frame().rename(columns={"S2": "S\n2"})), ["'S\\n2'", "newline"]),
    ("control_in_chrom.tsv", lambda: _tsv(_with(_frame(), 0, "seqnames", "chr\x071")),
     ["Chromosome name", "control character"]),
    ("empty_header_cell.csv", lambda: "seqnames,start,end,S1,,S3\n" + "\n".join(
        f"chr1,{i * 10 + 1},{i * 10 + 10},5,6,7" for i in range(8)) + "\n", ["Column 5", "has no name"]),
    ("unnamed_not_index.csv", lambda: ",S1,S2\n" + "\n".join(f"{7 * i + 3},{i},{i + 1}" for i in range(8)) + "\n",
     ["Column 1", "has no name", "row numbers"]),
    ("count_2_53_plus_1.tsv", lambda: _tsv(_with(_frame(), 2, "S3", 2 ** 53 + 1)),
     ["9007199254740993", "sample 'S3'", "line 4", "exceeds 2^53"]),
    ("count_1e308.tsv", lambda: _tsv(_with(_frame(), 2, "S1", "1e308")), ["1e+308", "exceeds 2^53", "'S1'"]),
    ("count_uint64_max.tsv", lambda: _tsv(_with(_frame(), 9, "S4", str(2 ** 64 - 1))),
     ["18446744073709551615", "exceeds 2^53", "line 11"]),
    ("count_inf.tsv", lambda: _tsv(_with(_frame(), 1, "S2", "inf")), ["finite", "region 2"]),
    ("only_comments.tsv", lambda: "# counts of my cohort\n# nothing yet\n", ["empty", "comments"]),
    ("comment_then_bad.tsv", lambda: "# my counts\n" + _tsv(_with(_frame(), 0, "S1", "five")),
     ["non-numeric value 'five'", "line 3"]),
    ("duplicate_names.tsv", lambda: _tsv(_frame().rename(columns={"S3": "S1"})), ["'S1'", "more than once"]),
    ("ragged.tsv", lambda: "seqnames\tstart\tend\ts1\ts2\n# x\nc1\t1\t10\t5\t6\nc1\t11\t20\t5\t6\t7\n",
     ["ragged"]),
]


@pytest.mark.parametrize("name,content,words", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_bad_file_api(tmp_path, name, content, words):
    p = tmp_path / name
    p.write_text(content())
    with pytest.raises(InputError) as err:
        read_counts(p)
    for w in words:
        assert w in str(err.value), (w, str(err.value))
    assert str(p) in str(err.value) or "Sample name" in str(err.value) or "Chromosome name" in str(err.value)


def _cli(args, cwd, timeout=120):
    return subprocess.run([sys.executable, "-m", "gcnmops", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_bad_files_cli(tmp_path):
    """One interpreter per file costs ~2 s: the CLI runs on every file of the table in one test, 4 at a time."""
    from concurrent.futures import ThreadPoolExecutor

    for name, content, _ in BAD_FILES:
        (tmp_path / name).write_text(content())
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = list(pool.map(lambda c: _cli(["run", c[0], "-o", f"out_{c[0]}", "--quiet", "--backend", "cpu"],
                                            tmp_path), BAD_FILES))
    for (name, _, words), r in zip(BAD_FILES, runs):
        out = tmp_path / f"out_{name}"
        assert r.returncode == 2, (name, r.stderr)
        assert r.stderr.startswith("error: "), (name, r.stderr)
        assert "Traceback" not in r.stderr, (name, r.stderr)
        assert words[0] in r.stderr, (name, r.stderr)
        assert not out.exists(), name


def test_messages_quote_the_path_as_given(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "list.tsv").write_text("seqnames\tstart\tend\n")
    with pytest.raises(InputError, match=r"^Count file not found: \./in//nope\.tsv$"):
        read_counts("./in//nope.tsv")
    with pytest.raises(InputError) as err:
        count_data_from_frame(pd.DataFrame({"chr": ["a"], "start": [1], "end": [2]}), source="in/list.rds")
    assert str(err.value).startswith("in/list.rds has no sample columns")
    with pytest.raises(InputError, match="^The DataFrame has no sample columns"):
        read_counts(pd.DataFrame({"chr": ["a"], "start": [1], "end": [2]}))


# --------------------------------------------------------------------------------------------
# in-memory objects and parameters
# --------------------------------------------------------------------------------------------
BAD_OBJECTS = [
    ("complex array", lambda: np.array([[1, 2], [3, 4 + 1j], [5, 6]]), ["complex", "arr.real"]),
    ("complex64 array", lambda: np.array([[1, 2], [3, 4], [5, 6]], dtype=np.complex64), ["complex64"]),
    ("complex column", lambda: pd.DataFrame({"a": [1, 2, 3], "b": np.array([1, 2, 3 + 2j])}), ["'b'", "complex"]),
    ("masked array", lambda: np.ma.masked_array([[1, 2], [3, 4], [5, 6]], mask=[[0, 0], [0, 1], [0, 0]]),
     ["masked", "filled"]),
    ("int64 above 2^53", lambda: np.array([[1, 2], [2 ** 53 + 1, 4], [5, 6]], dtype=np.int64),
     ["9007199254740993", "region 2, sample 1", "exceeds 2^53"]),
    ("uint64 max", lambda: np.array([[1, 2], [3, 2 ** 64 - 1], [5, 6]], dtype=np.uint64),
     ["18446744073709551615", "exceeds 2^53"]),
    ("float 2^63", lambda: np.array([[1, 2], [3, 2.0 ** 63], [5, 6]]), ["exceeds 2^53"]),
    ("1e308 in a frame", lambda: pd.DataFrame({"a": [1.0, 2, 3], "b": [1, 1e308, 3]}),
     ["'b'", "data row 2", "exceeds 2^53"]),
    ("coordinates beyond 2^53", lambda: pd.DataFrame({"chr": ["a", "a"], "start": [1, 2 ** 60], "end": [5, 2 ** 61],
                                                      "s1": [1, 2], "s2": [3, 4]}), ["beyond the largest"]),
    ("float coordinates", lambda: pd.DataFrame({"chr": ["a", "a"], "start": [1, 2.5], "end": [5, 6],
                                                "s1": [1, 2], "s2": [3, 4]}), ["whole-number", "2.5"]),
    ("tab in a DataFrame name", lambda: pd.DataFrame({"a\tb": [1, 2], "c": [3, 4]}), ["contains a tab"]),
    ("empty DataFrame name", lambda: pd.DataFrame({"x": [1, 2], "  ": [3, 4]}), ["Column 2", "no name"]),
]


@pytest.mark.parametrize("what,make,words", BAD_OBJECTS, ids=[c[0] for c in BAD_OBJECTS])
def test_bad_objects(what, make, words):
    with pytest.raises(InputError) as err:
        gcnmops.cn_mops(make(), backend="cpu")
    for w in words:
        assert w in str(err.value), (w, str(err.value))


def test_counts_up_to_2_53_are_accepted():
    x = np.full((3, 2), 7, dtype=np.int64)
    x[1, 1] = 2 ** 53
    assert read_counts(x).counts[1, 1] == 2.0 ** 53
    masked_nothing = np.ma.masked_array([[1, 2], [3, 4]], mask=False)
    np.testing.assert_array_equal(read_counts(masked_nothing).counts, [[1, 2], [3, 4]])


@pytest.mark.parametrize("text,value", [("TRUE", True), ("FALSE", False), ("T", True), ("F", False),
                                        ("true", True), ("false", False), ("True", True), ("False", False),
                                        (" FALSE ", False), (True, True), (np.False_, False), (0, False), (1, True)])
def test_booleans_as_r_reads_them(text, value):
    assert as_bool(text, "use_median") is value
    assert CnMopsParams(use_median=text, return_posterior=text).validated().use_median is value
    assert build_params("cn.mops", {"use_median": text})[0].use_median is value


@pytest.mark.parametrize("text", ["no", "yes", "0", "1", "", "FALSE.", "nope", None, 2, 0.5])
def test_booleans_other_values_refused(text):
    with pytest.raises(InputError, match="use_median must be TRUE or FALSE"):
        build_params("cn.mops", {"use_median": text})
    with pytest.raises(InputError, match="return_posterior must be TRUE or FALSE"):
        CnMopsParams(return_posterior=text).validated()


def test_batch_manifest_boolean(tmp_path):
    from gcnmops.pipeline.batch import read_manifest

    data = tmp_path / "c.tsv"
    data.write_text(_tsv(_frame()))
    for cell, ok in (("FALSE", True), ("no", False)):
        m = tmp_path / f"m_{cell}.tsv"
        m.write_text(f"id\tinput\tmethod\tuse_median\ne1\t{data}\tcn.mops\t{cell}\n")
        if ok:
            assert read_manifest(m)
        else:
            with pytest.raises(InputError, match="use_median must be TRUE or FALSE"):
                read_manifest(m)


def test_normal_class_checks():
    x = _frame().iloc[:, 3:].to_numpy()
    with pytest.raises(InputError, match="same length"):  # cn.mops: "I and classes must have same length!"
        gcnmops.cn_mops(x, I=[0.025, 0.5, 1.5, 2], backend="cpu")
    with pytest.raises(InputError, match="One element of classes must be CN2"):
        gcnmops.cn_mops(x, classes=[f"C{i}" for i in range(9)], backend="cpu")
    # cn.mops runs a normal class whose fold is not 1 (it checks no more than the above): we too, with a warning
    with pytest.warns(RuntimeWarning, match="normal class CN2 has fold change 0.5"):
        gcnmops.cn_mops(x, classes=[f"CN{i}" for i in range(1, 10)], backend="cpu")
    with pytest.warns(RuntimeWarning, match="fold change 1.5 in I .I has no fold change 1"):
        gcnmops.cn_mops(x, I=[0.025, 0.5, 1.5, 2], classes=["CN0", "CN1", "CN2", "CN3"], backend="cpu")
    with pytest.warns(RuntimeWarning, match="normal class CN1 has fold change 0.5"):
        gcnmops.haplo_cn_mops(x, I=[0.025, 0.5, 1, 2, 3, 4, 5, 6, 7], backend="cpu")


# --------------------------------------------------------------------------------------------
# inputs recognized and repaired
# --------------------------------------------------------------------------------------------
def _same(a: CountData, b: CountData) -> None:
    np.testing.assert_array_equal(a.counts, b.counts)
    assert a.sample_names == b.sample_names
    if b.ranges is None:
        assert a.ranges is None
    else:
        pd.testing.assert_frame_equal(a.ranges, b.ranges)


def test_row_name_columns_are_dropped(tmp_path, caplog):
    df = _frame()
    plain = read_counts(df)
    bare = read_counts(df.iloc[:, 3:])
    (tmp_path / "pandas.csv").write_text(_csv(df, index=True))  # header ",seqnames,...", rows 0..m-1
    (tmp_path / "pandas_text.csv").write_text(_csv(df.set_axis([f"r{i}" for i in range(len(df))]), index=True))
    # R's write.csv(matrix): header "","S1",..., row names "1","2",... quoted
    lines = [",".join(['""'] + [f'"{c}"' for c in df.columns[3:]])]
    lines += [",".join([f'"{i + 1}"'] + [str(v) for v in row]) for i, row in enumerate(df.iloc[:, 3:].to_numpy())]
    (tmp_path / "r_write_csv.csv").write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING, logger="gcnmops"):
        _same(read_counts(tmp_path / "pandas.csv"), plain)
        _same(read_counts(tmp_path / "pandas_text.csv"), plain)
        _same(read_counts(tmp_path / "r_write_csv.csv"), bare)
        _same(read_counts(pd.read_csv(tmp_path / "pandas.csv")), plain)  # an 'Unnamed: 0' column
    assert sum("taken as row names" in r.message for r in caplog.records) == 4
    assert "row numbers 1..40" in caplog.text and "row numbers 0..39" in caplog.text


def test_numeric_header_rule(tmp_path):
    """Sample numbers 1..N or 0..N-1 (N >= 3), quoted numbers, an empty cell or a field less than the data: a
    header. Other numbers: the first region (no header; Sample_1..)."""
    x = _frame().iloc[:, 3:].to_numpy()
    for first, names in (("1\t2\t3\t4", ["1", "2", "3", "4"]), ("0\t1\t2\t3", ["0", "1", "2", "3"]),
                         ('"7"\t"9"\t"5"\t"3"', ["7", "9", "5", "3"])):
        p = tmp_path / "h.tsv"
        p.write_text(first + "\n" + "\n".join("\t".join(map(str, r)) for r in x) + "\n")
        d = read_counts(p)
        assert d.sample_names == names and d.counts.shape == x.shape
    p = tmp_path / "data.tsv"
    p.write_text("17\t2\t3\t4\n" + "\n".join("\t".join(map(str, r)) for r in x) + "\n")
    d = read_counts(p)
    assert d.sample_names == ["Sample_1", "Sample_2", "Sample_3", "Sample_4"] and d.counts.shape[0] == len(x) + 1


def test_leading_comment_lines(tmp_path):
    df = _frame()
    p = tmp_path / "c.tsv.gz"
    with gzip.open(p, "wt") as fh:
        fh.write("# produced by my pipeline\n\n## version 2\n" + _tsv(df))
    _same(read_counts(p), read_counts(df))
    q = tmp_path / "bed_style.tsv"
    q.write_text(_tsv(df.rename(columns={"seqnames": "#chrom"})))
    with pytest.raises(InputError, match="--zero-based.*--one-based"):  # a BED-style header over 1-based bins
        read_counts(q)
    _same(read_counts(q, coordinates="1-based"), read_counts(df))
    q.write_text(_tsv(df.rename(columns={"seqnames": "#chrom"}).assign(start=df["start"] - 1)))
    _same(read_counts(q), read_counts(df))  # BED style: 0-based starts converted


def test_unsorted_regions_are_sorted(tmp_path, caplog):
    df = _frame()
    shuffled = df.sample(frac=1, random_state=4)
    shuffled = pd.concat([shuffled[shuffled.seqnames == "chr1"], shuffled[shuffled.seqnames == "chr2"]])
    with caplog.at_level(logging.WARNING, logger="gcnmops"):
        _same(read_counts(shuffled), read_counts(df))
        _same(read_counts(df.iloc[::-1]), _reversed_chroms(df))
    assert "not in increasing start order" in caplog.text
    # equal starts keep their order; overlapping and identical regions are kept (cn.mops keeps them)
    dup = pd.concat([df.iloc[:5], df.iloc[2:3], df.iloc[5:]]).reset_index(drop=True)
    dup.loc[5, "end"] = 2500
    d = read_counts(dup)
    assert d.counts.shape[0] == len(df) + 1
    assert (np.diff(d.ranges["start"].to_numpy()[:20]) >= 0).all()
    r = gcnmops.cn_mops(d, backend="cpu")
    assert len(r.gr) == len(df) + 1


def _reversed_chroms(df: pd.DataFrame) -> CountData:
    """The data of df with chr2 first (its first appearance in the reversed table), each sorted by start."""
    return read_counts(pd.concat([df[df.seqnames == "chr2"], df[df.seqnames == "chr1"]]))


def test_sorted_result_has_no_inverted_segments():
    from gcnmops.example import example_cohort

    data, _ = example_cohort(n_regions=600, n_samples=8, n_cnvs=6)
    df = pd.concat([data.ranges, pd.DataFrame(data.counts, columns=data.sample_names)], axis=1)
    ref = gcnmops.cn_mops(read_counts(df), backend="cpu")
    shuffled = gcnmops.cn_mops(read_counts(df.sample(frac=1, random_state=2)), backend="cpu")
    for table in ("segmentation", "cnvs", "cnvr"):
        a, b = getattr(ref, table), getattr(shuffled, table)
        assert (b["end"] >= b["start"]).all()
        key = [c for c in ("seqnames", "start", "end", "sampleName") if c in a.columns]
        pd.testing.assert_frame_equal(a.sort_values(key).reset_index(drop=True)[key],
                                      b.sort_values(key).reset_index(drop=True)[key])


# --------------------------------------------------------------------------------------------
# huge counts: bounded memory and time
# --------------------------------------------------------------------------------------------
def test_huge_counts_bounded_memory_and_time():
    """A single huge count scales every variance-to-mean ratio: R's density() would need 2^40+ grid points.
    Run under a 3 GiB address-space limit (the old code needed 24 GB for 1e10)."""
    script = textwrap.dedent("""
        import resource, sys, time, warnings
        warnings.simplefilter("ignore")
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        import numpy as np, gcnmops
        rng = np.random.default_rng(1)
        for v in (2 ** 53, 1e15, 1e10, 2 ** 31 - 1):
            for m in (12, 400):
                c = rng.poisson(50, size=(m, 4)).astype(np.float64)
                c[m // 2, 1] = v
                t = time.perf_counter()
                r = gcnmops.cn_mops(c, backend="cpu")
                r = gcnmops.cn_mops(c, backend="cpu", norm_type="mode")
                assert time.perf_counter() - t < 30, (v, m)
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def test_bounded_density_mode_equals_the_fft_one(monkeypatch):
    """The bounded path (grids not materialized) against R's algorithm (FFT) on grids both can afford."""
    import gcnmops.exact.density as D

    rng = np.random.default_rng(0)
    checked = 0
    for trial in range(60):
        m = int(rng.integers(5, 1500))
        kind = trial % 4
        if kind == 0:
            v = rng.gamma(2.0, rng.uniform(0.5, 80), m)
        elif kind == 1:
            v = np.r_[rng.normal(1, 0.1, m), rng.normal(rng.uniform(2, 300), 1, m // 3)]
        elif kind == 2:
            v = rng.choice([1.0, 1.01, 5.0, 7.5], size=m, p=[.45, .45, .05, .05]) + rng.normal(0, 1e-3, m)
        else:
            v = np.r_[np.full(m, 2.0), rng.uniform(0, 3000, m // 8)]
        v = np.abs(v)
        (u,) = D.quantiles7(v, (0.95,))
        if u <= 0 or D._working_points(u * 100) > D.DENSE_GRID_LIMIT:
            continue
        dense = D.density_mode(v, 0.0, u, u * 100)
        assert D._bounded_density_mode(v, 0.0, u, u * 100) == dense, trial
        checked += 1
    assert checked > 40
    monkeypatch.setattr(D, "DENSE_GRID_LIMIT", 512)  # the bounded path through density_mode itself
    v = rng.gamma(2.0, 3.0, 400)
    (u,) = D.quantiles7(v, (0.95,))
    monkeypatch.setattr(D, "DENSE_GRID_LIMIT", 2 ** 20)
    dense = D.density_mode(v, 0.0, u, u * 100)
    monkeypatch.setattr(D, "DENSE_GRID_LIMIT", 512)
    assert D.density_mode(v, 0.0, u, u * 100) == dense


# --------------------------------------------------------------------------------------------
# fuzz: mutated small valid files end in a result or an InputError, in bounded time
# --------------------------------------------------------------------------------------------
_TOKENS = ["\t", ",", "\n", '"', "#", "-", "e", "9" * 22, "\x00", "nan", "inf", "\r", " ", "1e308", "-1",
           "18446744073709551615", "chr", "start", "end", "\ufeff", "''", "\x07", ".5", "1+2j", "NA"]


class _Slow(Exception):
    pass


def _alarm(signum, frame):
    raise _Slow()


def _mutate_text(text: str, rng: np.random.Generator) -> str:
    for _ in range(int(rng.integers(1, 4))):
        op = int(rng.integers(0, 7))
        i = int(rng.integers(0, max(len(text), 1)))
        if op == 0:  # insert a token
            text = text[:i] + str(rng.choice(_TOKENS)) + text[i:]
        elif op == 1:  # delete a span
            text = text[:i] + text[i + int(rng.integers(1, 12)):]
        elif op == 2:  # replace a character
            text = text[:i] + str(rng.choice(_TOKENS)) + text[i + 1:]
        elif op == 3:  # duplicate or drop a line
            lines = text.split("\n")
            k = int(rng.integers(0, len(lines)))
            lines.insert(k, lines[int(rng.integers(0, len(lines)))]) if rng.random() < 0.5 else lines.pop(k)
            text = "\n".join(lines)
        elif op == 4:  # swap two lines
            lines = text.split("\n")
            a, b = (int(k) for k in rng.integers(0, len(lines), 2))
            lines[a], lines[b] = lines[b], lines[a]
            text = "\n".join(lines)
        elif op == 5:  # truncate
            text = text[:i]
        else:  # a number becomes another
            words = text.split("\t") if "\t" in text else text.split(",")
            k = int(rng.integers(0, len(words)))
            words[k] = str(rng.choice(["0", "-3", "2.5", "1e16", "9007199254740993", "", "x", "4294967296"]))
            text = ("\t" if "\t" in text else ",").join(words)
    return text


def _mutate_frame(df: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    df = df.copy()
    if df.shape[0] == 0 or df.shape[1] == 0:
        return df
    op = int(rng.integers(0, 8))
    col = df.columns[int(rng.integers(0, df.shape[1]))]
    row = int(rng.integers(0, len(df)))
    if op == 0:
        df = df.rename(columns={col: str(rng.choice(["", "start", "chr", "Unnamed: 0", "a\tb", "S1", "end"]))})
    elif op == 1:
        df = df.astype({col: object})
        df.loc[row, col] = rng.choice([None, "x", -1, 2 ** 62, 1e300, 2.5, "7"])
    elif op == 2:
        df = df.drop(columns=[col])
    elif op == 3:
        df = df.iloc[rng.permutation(len(df))]
    elif op == 4:
        df = df.iloc[: int(rng.integers(0, 3))]
    elif op == 5:
        df.insert(0, "", np.arange(len(df)) + int(rng.integers(0, 3)), allow_duplicates=True)
    elif op == 6:
        df = df.astype({col: str(rng.choice(["float32", "int8", "uint64", "str", "category"]))}, errors="ignore")
    else:
        df = df.set_index(col)
    return df


def _mutate_npz(path: Path, base: pd.DataFrame, rng: np.random.Generator) -> None:
    counts = base.iloc[:, 3:].to_numpy()
    arrays = {"counts": counts, "sample_names": np.array(base.columns[3:]), "seqnames": base.seqnames.to_numpy(str),
              "start": base.start.to_numpy(), "end": base.end.to_numpy()}
    op = int(rng.integers(0, 6))
    key = str(rng.choice(list(arrays)))
    if op == 0:
        arrays.pop(key)
    elif op == 1:
        arrays[key] = arrays[key][: int(rng.integers(0, 4))]
    elif op == 2:
        arrays["counts"] = arrays["counts"].astype(str(rng.choice(["complex128", "float16", "uint64", "int8", "bool"])))
    elif op == 3:
        a = arrays["counts"].astype(np.float64)
        a.flat[int(rng.integers(0, a.size))] = rng.choice([np.nan, -1.0, np.inf, 2.0 ** 60])
        arrays["counts"] = a
    elif op == 4:
        arrays[key] = arrays[key].reshape(-1)[:, None] if arrays[key].ndim == 1 else arrays[key].T
    np.savez(path, **arrays)
    if op == 5:  # corrupt the bytes
        raw = bytearray(path.read_bytes())
        for _ in range(int(rng.integers(1, 20))):
            raw[int(rng.integers(0, len(raw)))] = int(rng.integers(0, 256))
        path.write_bytes(bytes(raw[: int(rng.integers(len(raw) // 2, len(raw) + 1))]))


def test_fuzz_readers(tmp_path):
    """~200 mutations of small valid TSV, CSV, npz and Parquet files (fixed seed): each ends in a CountData (then
    a cn.mops result) or an InputError, within a few seconds; nothing else."""
    rng = np.random.default_rng(20240611)
    base = _frame(m=24, n=3)
    kinds = ["tsv", "csv", "npz"] + (["parquet"] * 1 if _parquet_ok() else [])
    outcomes = {"result": 0, "InputError": 0}
    old = signal.signal(signal.SIGALRM, _alarm)
    t_all = time.perf_counter()
    try:
        for case in range(200):
            kind = kinds[case % len(kinds)]
            p = tmp_path / f"f{case}.{kind}"
            if kind in ("tsv", "csv"):
                text = _tsv(base) if kind == "tsv" else _csv(base)
                p.write_text(_mutate_text(text, rng), encoding="utf-8", errors="surrogatepass")
            elif kind == "npz":
                _mutate_npz(p, base, rng)
            else:
                df = _mutate_frame(base, rng)
                try:
                    df.to_parquet(p, index=not isinstance(df.index, pd.RangeIndex))
                except Exception:  # a frame pyarrow cannot store: corrupt the bytes of a good file instead
                    base.to_parquet(p, index=False)
                    raw = bytearray(p.read_bytes())
                    raw[int(rng.integers(0, len(raw)))] ^= 0xFF
                    p.write_bytes(bytes(raw))
            signal.alarm(20)
            t0 = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    data = read_counts(p)
                    gcnmops.cn_mops(data, backend="cpu")
                outcomes["result"] += 1
            except InputError as e:
                assert str(e), case
                outcomes["InputError"] += 1
            except _Slow:
                pytest.fail(f"case {case} ({kind}) took more than 20 s")
            except Exception as e:  # noqa: BLE001 - the point of the test
                shown = p.read_bytes()[:400] if kind in ("tsv", "csv") else kind
                pytest.fail(f"case {case} ({kind}): {type(e).__name__}: {e}\n{shown!r}")
            finally:
                signal.alarm(0)
            assert time.perf_counter() - t0 < 20
    finally:
        signal.signal(signal.SIGALRM, old)
    print(outcomes)
    assert outcomes["result"] > 10 and outcomes["InputError"] > 10, outcomes
    assert time.perf_counter() - t_all < 60, outcomes


# --------------------------------------------------------------------------------------------
# objects built by hand, arguments, messages for every face
# --------------------------------------------------------------------------------------------
def test_a_count_data_given_directly_is_checked_again():
    """A CountData made or changed by hand is no shortcut past the checks (negative, NaN, beyond 2^53)."""
    d = read_counts(_frame())
    for value, words in ((-4.0, "non-negative"), (np.nan, "finite"), (2.0 ** 60, r"exceeds 2\^53")):
        counts = d.counts.copy()
        counts[3, 1] = value
        with pytest.raises(InputError, match=words):
            gcnmops.cn_mops(CountData(counts=counts, sample_names=d.sample_names, ranges=d.ranges), backend="cpu")
    order = np.r_[19:-1:-1, 39:19:-1]  # each chromosome's rows backwards
    shuffled = CountData(counts=np.asfortranarray(d.counts[order]), sample_names=d.sample_names,
                         ranges=d.ranges.iloc[order].reset_index(drop=True))
    a, b = gcnmops.cn_mops(d, backend="cpu"), gcnmops.cn_mops(shuffled, backend="cpu")
    np.testing.assert_array_equal(a.local_assessments, b.local_assessments)  # sorted as a file would be
    pd.testing.assert_frame_equal(a.cnvs, b.cnvs)


def test_unknown_arguments_are_refused_before_any_work(monkeypatch):
    """cn.mops's camelCase names and typos: an InputError naming the right name, before the model runs (not a
    TypeError from the segmentation afterwards), for every method."""
    import gcnmops.pipeline.stages as stages

    def no_model(*a, **k):
        raise AssertionError("the model ran")

    monkeypatch.setattr(stages, "fit", no_model)
    x = _frame().iloc[:, 3:].to_numpy()
    with pytest.raises(InputError, match=r"'priorImpact' \(cn.mops's priorImpact is prior_impact here\)"):
        gcnmops.cn_mops(x, priorImpact=10, backend="cpu")
    with pytest.raises(InputError, match=r"'alhpa' \(did you mean 'alpha'\?\).*fast segmentation takes only alpha"):
        gcnmops.exome_cn_mops(x, alhpa=0.1, backend="cpu")
    with pytest.raises(InputError, match="'minWidth' .* min_width"):
        gcnmops.haplo_cn_mops(x, minWidth=3, backend="cpu")
    with pytest.raises(InputError, match="'foo'.*DNAcopy segmentation takes only"):
        gcnmops.reference_cn_mops(x[:, :2], x[:, 2:], foo=1, backend="cpu")
    with pytest.raises(InputError, match="'cycles'"):
        gcnmops.single_cn_mops(x[:, 0], cycles=3, backend="cpu")


def test_messages_name_the_method_for_every_face():
    """The command line and R users are not told to call a Python function only."""
    x = _frame().iloc[:, 3:].to_numpy()
    with pytest.raises(InputError, match=r"--method single; single_cn_mops\(\) in Python, singlegcn.mops\(\) in R"):
        gcnmops.cn_mops(x[:, :1], backend="cpu")
    with pytest.raises(InputError, match=r"--method cn.mops; cn_mops\(\) in Python, gcn.mops\(\) in R"):
        gcnmops.single_cn_mops(x, backend="cpu")


def test_identical_ranges_are_kept_as_rows_of_their_own():
    """cn.mops keeps repeated (identical) regions, each a row of its own, in every method; so do we, and calls
    stay valid (no segment ends before it starts)."""
    df = _frame(m=120, n=5)
    df.loc[60:70, ["start", "end"]] = df.loc[60, ["start", "end"]].to_numpy()  # 11 copies of one region
    for fn in (gcnmops.cn_mops, gcnmops.haplo_cn_mops, gcnmops.exome_cn_mops):
        r = fn(df, backend="cpu")
        assert len(r.gr) == len(df) and (r.gr["start"].to_numpy() == df["start"].to_numpy()).all()
        for table in (r.segmentation, r.cnvs, r.cnvr):
            assert (table["end"] >= table["start"]).all()


def test_distributed_input_unsorted_within_a_chromosome_is_refused():
    """A Dask/Zarr/numpy matrix is not reordered by the distributed pipeline: rows whose starts decrease are
    refused (a table file is sorted when read, as everywhere)."""
    from gcnmops.distributed.store import open_matrix

    df = _frame()
    ranges = df.iloc[:, :3].copy()
    ranges.loc[[4, 5], "start"] = ranges.loc[[5, 4], "start"].to_numpy()
    ranges["end"] = ranges["start"] + 999
    with pytest.raises(InputError, match=r"not in increasing start order .* row 6, chr1:4001 after 5001"):
        open_matrix(df.iloc[:, 3:].to_numpy(float), ranges=ranges, sample_names=list(df.columns[3:]))
    assert open_matrix(df.iloc[:, 3:].to_numpy(float), ranges=df.iloc[:, :3]).shape == (40, 4)


BAD_COMMANDS = [  # (arguments, words stderr must hold) of commands that must stop before any work
    (["run", "--example", "-o", "out", "--cyc", "-3"], "cyc must be a whole number of EM cycles from 1"),
    (["run", "--example", "-o", "out", "--norm-type", "foo"], "norm_type must be one of"),
    (["run", "--example", "-o", "out", "--cyc", str(2**31)], "cyc must be a whole number of EM cycles from 1 to"),
    (["run", "--example", "-o", "out", "--min-width", "9" * 25], "min_width must be a whole number of regions"),
    (["run", "six.tsv", "-o", "out", "--method", "single"], "--method cn.mops"),
    (["batch", "a_folder", "-o", "out"], "is a folder"),
    (["batch", "binary.tsv", "-o", "out"], "not a text file"),
    (["batch", "two_bad.tsv", "-o", "out"], "line 3: id 'e 2' cannot name a folder"),
]


def test_bad_commands_cli(tmp_path):
    """Parameter errors come first (before the input is read and before the GPU probe's notice), manifests that
    are folders or binary, and every bad line of a manifest at once: `error:`, exit 2, nothing written."""
    from concurrent.futures import ThreadPoolExecutor

    (tmp_path / "six.tsv").write_text(_tsv(_frame(n=6)))
    (tmp_path / "a_folder").mkdir()
    (tmp_path / "binary.tsv").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "two_bad.tsv").write_text("id\tinput\tmethod\ne1\tsix.tsv\tcn.mops\ne 2\tsix.tsv\tcn.mops\n"
                                          "e3\tsix.tsv\tcn.mops\tx\n")
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = list(pool.map(lambda c: _cli(c[0], tmp_path), BAD_COMMANDS))
    for k, ((args, words), r) in enumerate(zip(BAD_COMMANDS, runs)):
        last = [line for line in r.stderr.splitlines() if not line.startswith(" ")][-1]
        assert r.returncode == 2 and last.startswith("error: ") and words in r.stderr, (args, r.stderr)
        assert k >= 4 or r.stderr.startswith("error: "), r.stderr  # parameters: before the GPU probe's notice
        assert "Traceback" not in r.stderr and not (tmp_path / "out").exists(), (args, r.stderr)
    assert "line 4: 4 fields for 3 columns" in runs[-1].stderr  # the first bad line hides none of the others


def _start_dnacopy_alpha(items) -> background.Job | None:
    """The run of test_dnacopy_with_another_alpha_does_not_crash as a background job (~20 s, most of it DNAcopy's
    getbdry for alpha 0.05), where rpy2 is installed."""
    import importlib.util

    if importlib.util.find_spec("rpy2") is None:
        return None

    def args(folder):
        (folder / "c.tsv").write_text(_tsv(_frame(m=120, n=5)))
        return [sys.executable, "-c", "import gcnmops; r = gcnmops.cn_mops('c.tsv', seg_algorithm='DNAcopy', "
                "alpha=0.05, backend='cpu'); print('segments', len(r.segmentation))"]

    return background.Job(args, prefix="dnacopy")


background.register("dnacopy_alpha_run", _start_dnacopy_alpha)


@pytest.fixture
def dnacopy_alpha_run(background_jobs) -> background.Job | None:
    return background_jobs.get("dnacopy_alpha_run")


def test_dnacopy_with_another_alpha_does_not_crash(dnacopy_alpha_run):
    """segAlgorithm "DNAcopy" with alpha 0.05: cn.mops hands DNAcopy the boundary of alpha 0.01, which DNAcopy reads
    beyond (a segmentation fault that ends R's session, and ours); the boundary of the alpha given is used. The
    run is a child process (a background job started with the session)."""
    from gcnmops.segmentation.dnacopy import dnacopy_available

    if not dnacopy_available():
        pytest.skip("rpy2 + R package DNAcopy not installed")
    job = dnacopy_alpha_run
    assert job is not None, "the DNAcopy run was not started with the session (see _start_dnacopy_alpha)"
    returncode, out = job.wait(300), job.output()
    assert returncode == 0 and any(line.startswith("segments") for line in out.splitlines()), out[-2000:]


def test_fuzz_bam_reader(tmp_path):
    """Mutated BAM files (bytes flipped, truncated, bytes inserted; fixed seed): counting ends in counts or an
    InputError, each within seconds."""
    from golden import GOLDEN_DIR

    from gcnmops.alignments.counting import count_reads

    source = GOLDEN_DIR / "bam" / "test1.bam"
    if not source.exists():
        pytest.skip(f"no BAM under {GOLDEN_DIR}")
    pytest.importorskip("pysam")
    good = source.read_bytes()
    rng = np.random.default_rng(7)
    outcomes = {"counts": 0, "InputError": 0}
    for case in range(40):
        raw = bytearray(good)
        i = int(rng.integers(0, len(raw)))
        if case % 3 == 0:
            raw[i] ^= int(rng.integers(1, 256))
        elif case % 3 == 1:
            raw = raw[:i]
        else:
            raw[i:i] = bytes(rng.integers(0, 256, int(rng.integers(1, 50)), dtype=np.uint8))
        path = tmp_path / f"f{case}.bam"
        path.write_bytes(bytes(raw))
        t0 = time.perf_counter()
        try:
            count_reads([str(path)], window=25000, progress=False)
            outcomes["counts"] += 1
        except InputError as e:
            assert str(path) in str(e) or "BAM" in str(e), str(e)
            outcomes["InputError"] += 1
        assert time.perf_counter() - t0 < 20, case
    assert outcomes["InputError"] > 20, outcomes


def test_large_tables_are_read_in_parts_with_the_same_result(tmp_path, monkeypatch):
    """A large text table is parsed in parts (Ctrl-C is seen between them): the same counts, names, ranges and
    messages (line numbers) as in one piece."""
    from gcnmops.io import readers

    df = _frame(m=3000, n=4)
    good, bad, ragged = tmp_path / "good.tsv", tmp_path / "bad.tsv", tmp_path / "ragged.tsv"
    good.write_text(_tsv(df))
    bad.write_text(_tsv(_with(df, 2500, "S2", "five")))
    ragged.write_text(_tsv(df) + "chr2\t1\t2\t3\t4\t5\t6\t7\n")
    whole = read_counts(good)
    messages = []
    for part_bytes in (readers.TEXT_PART_BYTES, 1):  # 1: parts of 1024 rows
        monkeypatch.setattr(readers, "TEXT_PART_BYTES", part_bytes)
        _same(read_counts(good), whole)
        for path in (bad, ragged):
            with pytest.raises(InputError) as err:
                read_counts(path)
            messages.append(str(err.value))
    assert messages[:2] == messages[2:] and "line 2502" in messages[0] and "line 3002" in messages[1], messages


# --------------------------------------------------------------------------------------------
# damaged reference manifests (case mode): each class an InputError naming the reference, never a traceback
# --------------------------------------------------------------------------------------------
def _part(man):
    return man["parts"][0]


DAMAGED_MANIFESTS = [  # (what, change of the manifest (or its text), words of the message)
    ("not JSON", "{\"format\": ", "cannot be read as a reference manifest"),
    ("nested too deep", "[" * 100000 + "]" * 100000, "cannot be read as a reference manifest"),
    ("not a mapping", lambda m: [m], "is not a gcnmops reference"),
    ("an entry missing", lambda m: m.pop("n_regions"), "manifest entry 'n_regions' is missing"),
    ("an entry of another type", lambda m: m.update(sample_names="S1"), "'sample_names' is str"),
    ("no regions", lambda m: m.update(n_regions=0), "it holds 0 regions"),
    ("a part not a mapping", lambda m: m.update(parts=["all"]), "part 1 is not a mapping"),
    ("a part's name leaving the store", lambda m: _part(m).update(name="../../x"), "is not a folder of the store"),
    ("an unknown method", lambda m: m.update(method="cnmopz"), "its method 'cnmopz' is none of"),
    ("unknown parameters", lambda m: m["params"].update(bogus=1), "unexpected keyword argument 'bogus'"),
    ("a parameter out of range", lambda m: m["params"].update(cyc=2**70), "cyc must be a whole number"),
    ("a normalization state cut", lambda m: _part(m)["normalization"]["chromosomes"][0].pop("mode"), "'mode'"),
]


@pytest.fixture(scope="module")
def reference_store(tmp_path_factory):
    from gcnmops.casemode import build_reference

    path = tmp_path_factory.mktemp("reference") / "ref"
    build_reference(count_data_from_frame(_frame(m=60, n=5))).save(path)
    return path


def test_damaged_reference_manifests(reference_store, tmp_path):
    import json
    import shutil

    from gcnmops.casemode.reference import load_reference

    original = json.loads((reference_store / "manifest.json").read_text())
    for k, (what, change, words) in enumerate(DAMAGED_MANIFESTS):
        path = tmp_path / f"ref{k}"
        shutil.copytree(reference_store, path)
        if isinstance(change, str):
            text = change
        else:
            man = json.loads(json.dumps(original))
            changed = change(man)
            text = json.dumps(changed if isinstance(changed, list) else man)
        (path / "manifest.json").write_text(text)
        with pytest.raises(InputError) as err:
            load_reference(path)
        assert str(path) in str(err.value) and words in str(err.value), (what, str(err.value))
    (tmp_path / "new.tsv").write_text(_tsv(_frame(m=60, n=2)))
    r = _cli(["call", "new.tsv", "--reference-cohort", str(tmp_path / "ref7"), "-o", "out"], tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "is not a folder of the store" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
