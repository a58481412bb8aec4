"""The fast paths of reading (issue 14) give exactly what the plain computations give.

- chromosome names compared where their string object changes (data.name_changes / _object_changes) against a
  plain element-by-element comparison, on adversarial inputs;
- validate_counts' one-reduction checks on matrices large enough for the parallel path: every bad value (NaN,
  Inf, negative, beyond 2^53; integer and float input; first and last row block) is rejected with the message the
  plain checks give, and clean matrices come back as numpy's own conversion;
- the command line hands the data it read over without a second validation (data.Validated), while the public
  cn_mops(CountData) validates it again.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gcnmops
from gcnmops import data as D
from gcnmops.data import MAX_COUNT, CountData, Validated, chromosome_blocks, make_count_data, validate_counts
from gcnmops.errors import InputError
from gcnmops.example import example_cohort
from gcnmops.io import read_counts


# --------------------------------------------------------------------------------------------
# chromosome names
# --------------------------------------------------------------------------------------------
def _plain_changes(chrom) -> np.ndarray:
    values = np.asarray(list(chrom), dtype=object)
    return np.array([values[i + 1] != values[i] for i in range(len(values) - 1)], dtype=bool)


def _plain_blocks(chrom) -> list[tuple[str, int, int]]:
    values = list(chrom)
    out, start = [], 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[i - 1]:
            out.append((str(values[start]), start, i))
            start = i
    return out


class _Loud(str):
    """A str subclass that says every pair differs (identity tells nothing about its equality)."""

    def __ne__(self, other):
        return True

    def __eq__(self, other):
        return False

    __hash__ = str.__hash__


def _shared_runs(names: list[str], lengths: list[int]) -> np.ndarray:
    """One string object per run, as the readers make them."""
    objects = np.empty(len(names), dtype=object)
    objects[:] = names
    return np.repeat(objects, lengths)  # (np.full(k, name, dtype=object) makes a string object per row)


def _adversarial_inputs() -> dict[str, object]:
    rng = np.random.default_rng(5)
    shared = _shared_runs(["chr1", "chr2", "chr1", "chrX"], [50, 30, 40, 60])
    distinct = np.array(["".join(["chr", str(k)]) for k in (1, 1, 1, 2, 2, 1)], dtype=object)  # equal, not same
    assert distinct[0] is not distinct[1] and distinct[0] == distinct[1]
    mixed = shared.copy()
    mixed[20] = "".join(["ch", "r1"])  # an equal string, another object, inside a run of one object
    mixed[21] = "".join(["ch", "r1"])  # and another
    mixed[90] = "".join(["ch", "r2"])  # a different name inside a run of one object
    mixed[170] = "chr1"  # the same object as the first run's, inside the last run
    nan = float("nan")
    big = rng.choice(np.array(["chr1", "chr2", "chr3"], dtype=object), 50_000, p=[0.98, 0.01, 0.01])
    big_copies = np.array(["".join(["chr", s[3:]]) if rng.random() < 0.05 else s for s in big], dtype=object)
    return {
        "shared runs": shared,
        "equal strings in distinct objects": distinct,
        "distinct object inside a run": mixed,
        "one NaN object repeated": np.array([nan, nan, nan, "chr1", "chr1"], dtype=object),
        "None and numbers": np.array([None, None, 1, 1, 1.0, "1", "1"], dtype=object),
        "str subclass, one object": _shared_runs([_Loud("chr1")], [4]),
        "strided view": _shared_runs(["a", "b", "a"], [60, 60, 61])[::2],
        "reversed view": _shared_runs(["a", "b", "c"], [30, 1, 40])[::-1],
        "Series of shared objects": pd.Series(shared, dtype=object),
        "Series with an index": pd.Series(mixed, index=np.arange(100, 100 + mixed.size), dtype=object),
        "numpy U array": np.array(["chr1", "chr1", "chr10", "chr1", "chr1"]),
        "numpy S array": np.array([b"chr1", b"chr1", b"chr2"]),
        "categorical": pd.Series(pd.Categorical(["chr2", "chr2", "chr1", "chr1", "chr2"])),
        "list": ["chr1", "chr1", "chr2"],
        "two rows, equal": np.array(["x", "".join(["", "x"])], dtype=object),
        "one row": np.array(["chr1"], dtype=object),
        "large, 95% shared": big_copies,
    }


#: the inputs whose names are compared where their object changes (the others take the plain comparison)
_BY_OBJECT = {"shared runs", "distinct object inside a run", "strided view", "reversed view",
              "Series of shared objects", "Series with an index", "large, 95% shared"}


@pytest.mark.parametrize("name", list(_adversarial_inputs()))
def test_name_changes_are_the_plain_comparison(name):
    chrom = _adversarial_inputs()[name]
    if name in _BY_OBJECT:
        assert D._object_changes(np.asarray(chrom, dtype=object)) is not None
    got = D.name_changes(chrom)
    assert got.dtype == bool
    np.testing.assert_array_equal(got, _plain_changes(chrom))
    if name not in ("one NaN object repeated",):  # NaN != NaN: every row its own block, str() of each
        assert chromosome_blocks(chrom) == _plain_blocks(chrom)


def test_arrow_strings_compared_as_stored():
    pa = pytest.importorskip("pyarrow")  # noqa: F841 - pandas' Arrow strings need it
    chrom = pd.Series(["chr1", "chr1", "chr2", "chr1", "chr1"], dtype="string[pyarrow]")
    np.testing.assert_array_equal(D.name_changes(chrom), _plain_changes(chrom))
    assert chromosome_blocks(chrom) == _plain_blocks(chrom)


def test_object_changes_only_vouch_for_plain_strings():
    """Rows where the object changes, only when every object is a str; else None (then strings are compared)."""
    runs = _shared_runs(["chr1", "chr2", "chr1"], [30, 20, 20])
    np.testing.assert_array_equal(D._object_changes(runs), [30, 50])
    assert D._object_changes(np.array([float("nan")] * 3, dtype=object)) is None
    assert D._object_changes(_shared_runs([_Loud("chr1")], [30])) is None
    assert D._object_changes(np.array(["chr1", 1], dtype=object)) is None
    fresh = np.array(["".join(["c", str(k % 2)]) for k in range(100)], dtype=object)
    assert D._object_changes(fresh) is None  # mostly distinct objects: the plain comparison is as cheap


def test_seqnames_of_shared_and_mixed_objects():
    """Runs of string objects are taken as strings; anything else is converted as before (astype(str))."""
    runs = pd.Series(_shared_runs(["chr1", "chr2"], [4, 4]), dtype=object)
    out = D._seqnames(runs)
    assert list(out) == list(runs) and out.dtype == object
    assert not np.shares_memory(out.to_numpy(), runs.to_numpy())
    assert np.shares_memory(D._seqnames(runs, copy=False).to_numpy(), runs.to_numpy())
    mixed = pd.Series(np.array(["chr1"] * 3 + [1, 1], dtype=object))
    assert list(D._seqnames(mixed)) == ["chr1", "chr1", "chr1", "1", "1"]


def test_npz_seqnames_are_runs_of_one_object(tmp_path):
    """The .npz reader makes one string object per chromosome's rows: its names take the comparison by object."""
    chrom = np.repeat(np.array(["chr1", "chr2", "chrX"]), [300, 200, 100])
    np.savez(tmp_path / "c.npz", counts=np.ones((600, 2)), seqnames=chrom, start=np.arange(600) * 10 + 1,
             end=np.arange(600) * 10 + 10)
    d = read_counts(tmp_path / "c.npz")
    np.testing.assert_array_equal(D._object_changes(d.ranges["seqnames"].to_numpy()), [300, 500])
    assert d.blocks() == [("chr1", 0, 300), ("chr2", 300, 500), ("chrX", 500, 600)]


@pytest.mark.parametrize("fmt", ["tsv", "parquet", "frame", "arrow"])
def test_every_readers_seqnames_are_runs_of_one_object(tmp_path, fmt):
    """Names read as one string per row (text, Parquet, a DataFrame, Arrow strings) become one object per run."""
    m = 3000
    df = pd.DataFrame({"seqnames": np.repeat(["chr1", "chr2", "chr1"], m // 3), "start": np.arange(m) + 1,
                       "end": np.arange(m) + 1, "a": 1, "b": 2})
    if fmt == "arrow":
        pytest.importorskip("pyarrow")
        df["seqnames"] = df["seqnames"].astype("string[pyarrow]")
    if fmt in ("tsv", "parquet"):
        path = tmp_path / f"c.{fmt}"
        df.to_csv(path, sep="\t", index=False) if fmt == "tsv" else df.to_parquet(path)
        d = read_counts(path)
    else:
        assert D._object_changes(df["seqnames"].to_numpy(dtype=object)) is None  # one object per row
        d = read_counts(df)
    names = d.ranges["seqnames"].to_numpy()
    assert list(names) == ["chr1"] * (2 * m // 3) + ["chr2"] * (m // 3)  # regrouped, values unchanged
    changes = D._object_changes(names)  # chr1's two runs (two objects) brought together, then chr2
    assert changes is not None and 2 * m // 3 in changes and len(changes) <= 2
    assert d.blocks() == [("chr1", 0, 2 * m // 3), ("chr2", 2 * m // 3, m)]


def test_one_object_per_run_keeps_the_values():
    names = np.array(["".join(["c", s]) for s in "aabbbaac"], dtype=object)
    out = D._one_object_per_run(names)
    assert list(out) == list(names) and out is not names
    assert out[0] is out[1] and out[2] is out[3] is out[4] and out[5] is not out[0]
    assert list(D._one_object_per_run(np.array(["x"], dtype=object))) == ["x"]


def test_bare_matrix_chromosomes_are_one_object():
    d = make_count_data(np.ones((1000, 2)))
    assert list(D._object_changes(d.chromosomes)) == [] and set(d.chromosomes) == {"undef"}
    assert d.blocks() == [("undef", 0, 1000)]


def test_ranges_of_a_table_share_no_memory_with_it():
    """make_count_data's ranges are its own (a user changing the table afterwards changes nothing)."""
    ranges = pd.DataFrame({"seqnames": _shared_runs(["chr1", "chr2"], [3, 3]), "start": np.arange(1, 7) * 100,
                           "end": np.arange(1, 7) * 100 + 99})
    d = make_count_data(np.ones((6, 2)), None, ranges)
    for col in ("seqnames", "start", "end"):
        assert not np.shares_memory(d.ranges[col].to_numpy(), ranges[col].to_numpy()), col
    ranges.loc[0, "seqnames"] = "chrZ"
    ranges.loc[0, "start"] = 5
    assert d.ranges["seqnames"][0] == "chr1" and d.ranges["start"][0] == 100


# --------------------------------------------------------------------------------------------
# counts on the parallel path
# --------------------------------------------------------------------------------------------
_M, _N = 70_000, 31  # 2,170,000 cells: above data._PARALLEL_CELLS, several row blocks


def test_shape_takes_the_parallel_path():
    assert _M * _N >= D._PARALLEL_CELLS
    assert _M > 2 * max(4096, (1 << 20) // _N)  # first and last row blocks differ


def _plain_message(values, monkeypatch) -> str:
    with monkeypatch.context() as mp:
        mp.setattr(D, "_float64_if_clean", lambda arr: None)  # validate_counts' own checks only
        with pytest.raises(InputError) as err:
            validate_counts(values, sample_names=[f"S{k}" for k in range(_N)])
    return str(err.value)


def _matrix(dtype, order: str) -> np.ndarray:
    rng = np.random.default_rng(11)
    return np.asarray(rng.integers(0, 100, (_M, _N)), dtype=dtype, order=order)


_BAD = [
    ("NaN", np.float64, np.nan, "finite"),
    ("Inf", np.float64, np.inf, "finite"),
    ("-Inf", np.float64, -np.inf, "finite"),
    ("negative float", np.float64, -0.5, "non-negative"),
    ("float above 2^53", np.float64, 2.0 ** 53 + 2, r"exceeds 2\^53"),
    ("NaN float32", np.float32, np.nan, "finite"),
    ("negative int32", np.int32, -1, "non-negative"),
    ("negative int64", np.int64, -(2 ** 62), "non-negative"),
    ("int64 2^53 + 1", np.int64, 2 ** 53 + 1, r"exceeds 2\^53"),
    ("uint64 2^63", np.uint64, 2 ** 63, r"exceeds 2\^53"),
    ("negative int8", np.int8, -3, "non-negative"),
]


@pytest.mark.parametrize("order", ["F", "C"])
@pytest.mark.parametrize("where", ["first", "last"])
@pytest.mark.parametrize("case", _BAD, ids=[c[0] for c in _BAD])
def test_bad_counts_rejected_with_the_plain_message(case, where, order, monkeypatch):
    _, dtype, value, words = case
    x = _matrix(dtype, order)
    r, c = (3, 0) if where == "first" else (_M - 2, _N - 1)
    x[r, c] = value
    expected = _plain_message(x, monkeypatch)
    with pytest.raises(InputError, match=words) as err:
        validate_counts(x, sample_names=[f"S{k}" for k in range(_N)])
    assert str(err.value) == expected
    assert f"region {r + 1}, sample {c + 1}" in expected


def test_big_endian_counts_checked_as_their_values(monkeypatch):
    x = _matrix(np.dtype(">i8"), "C")
    np.testing.assert_array_equal(validate_counts(x), x.astype(np.float64))
    x[_M - 1, 2] = -7
    assert str(pytest.raises(InputError, validate_counts, x, sample_names=[f"S{k}" for k in range(_N)]).value) \
        == _plain_message(x, monkeypatch)


@pytest.mark.parametrize("dtype,order", [(np.float64, "F"), (np.float64, "C"), (np.float32, "F"), (np.int32, "C"),
                                         (np.int64, "F"), (np.uint16, "C"), (np.bool_, "F")])
def test_clean_counts_are_numpys_conversion(dtype, order):
    x = _matrix(dtype, order)
    x[0, 0] = 0
    if np.dtype(dtype).kind in "iuf" and np.dtype(dtype).itemsize == 8:
        x[_M - 1, _N - 1] = 2 ** 53  # the largest count accepted
    out = validate_counts(x)
    assert out.dtype == np.float64 and out.flags.f_contiguous
    np.testing.assert_array_equal(out, np.asarray(x, dtype=np.float64))
    if dtype == np.float64 and order == "F":
        assert out is x  # used as it is


def test_negative_zero_accepted_as_before():
    """-0.0 fails the one-reduction check (its sign bit) but not cn.mops's: the plain checks accept it."""
    x = _matrix(np.float64, "F")
    x[5, 5] = -0.0
    out = validate_counts(x)
    np.testing.assert_array_equal(out, x)


def test_within_limits_is_min_and_max():
    rng = np.random.default_rng(3)
    edges = {
        np.float64: [0.0, 1.5, MAX_COUNT, np.nextafter(MAX_COUNT, np.inf), np.inf, -np.inf, np.nan, -1e-300,
                     np.finfo(np.float64).max, 5e-324],
        np.int64: [0, MAX_COUNT, MAX_COUNT + 1, -1, np.iinfo(np.int64).min, np.iinfo(np.int64).max],
        np.int32: [0, np.iinfo(np.int32).max, -1, np.iinfo(np.int32).min],
        np.int16: [0, 1, -1, np.iinfo(np.int16).max],
        np.uint64: [0, MAX_COUNT, MAX_COUNT + 1, np.iinfo(np.uint64).max],
        np.uint8: [0, 255],
    }
    for dtype, values in edges.items():
        for v in values:
            x = rng.integers(0, 100, 64).astype(dtype)
            x[int(rng.integers(0, 64))] = v
            for arr in (x, x.reshape(8, 8).T, x[::3], x.astype(np.dtype(dtype).newbyteorder(">"))):
                if arr.dtype.kind == "f" and not arr.dtype.isnative:
                    continue  # floats are checked after their conversion to native float64
                plain = bool(arr.min() >= 0 and arr.max() <= MAX_COUNT)
                assert D._within_limits(arr) == plain, (dtype, v, arr.strides)


# --------------------------------------------------------------------------------------------
# validated once
# --------------------------------------------------------------------------------------------
def _counting(monkeypatch) -> list:
    calls = []
    real = D.validate_counts

    def counted(values, *args, **kwargs):
        calls.append(np.shape(values))
        return real(values, *args, **kwargs)

    monkeypatch.setattr(D, "validate_counts", counted)
    return calls


def _cohort(tmp_path):
    data = example_cohort(n_regions=400, n_samples=6)[0]
    path = tmp_path / "cohort.npz"
    np.savez(path, counts=data.counts, sample_names=np.array(data.sample_names),
             seqnames=data.ranges["seqnames"].to_numpy(dtype=str), start=data.ranges["start"].to_numpy(),
             end=data.ranges["end"].to_numpy())
    return data, path


def test_cli_validates_its_input_once(tmp_path, monkeypatch):
    from gcnmops.cli import main

    _, path = _cohort(tmp_path)
    calls = _counting(monkeypatch)
    assert main(["run", str(path), "-o", str(tmp_path / "out"), "--backend", "cpu", "--quiet"]) == 0
    assert calls == [(400, 6)]


def test_cli_single_and_reference_validate_once(tmp_path, monkeypatch):
    from gcnmops.cli import main

    calls = _counting(monkeypatch)
    assert main(["run", "--example", "--method", "single", "-o", str(tmp_path / "s"), "--backend", "cpu",
                 "--quiet", "--no-integer"]) == 0
    n_example = len(calls)
    calls.clear()
    assert main(["run", "--example", "--method", "reference", "-o", str(tmp_path / "r"), "--backend", "cpu",
                 "--quiet", "--no-integer"]) == 0
    # the example cohort (validated when it is made), then its cases and controls: each once, not again
    assert len(calls) == n_example + 1, calls


def test_public_cn_mops_validates_count_data_again(tmp_path, monkeypatch):
    data, _ = _cohort(tmp_path)
    calls = _counting(monkeypatch)
    gcnmops.cn_mops(data, backend="cpu")
    assert calls == [(400, 6)]
    changed = CountData(counts=data.counts.copy(), sample_names=data.sample_names, ranges=data.ranges)
    changed.counts[7, 1] = -1
    with pytest.raises(InputError, match="non-negative"):
        gcnmops.cn_mops(changed, backend="cpu")


def test_validated_is_taken_as_it_is(tmp_path, monkeypatch):
    data, _ = _cohort(tmp_path)
    calls = _counting(monkeypatch)
    assert read_counts(Validated(data)) is data
    assert calls == []
    one = make_count_data(data.counts[:, :1], data.sample_names[:1], data.ranges, min_samples=1)
    calls.clear()
    with pytest.raises(InputError, match="ONE sample"):  # too few for cn.mops: validated, and said so
        read_counts(Validated(one))
    assert calls == [(400, 1)]
