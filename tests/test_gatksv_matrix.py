"""The bincov matrix reader: plain-integer matrices through the threaded bgzip inflation and the parallel integer
parser (gcnmops.io.inttable), read exactly as the cell-by-cell pandas reading reads them (bgzip, gzip, plain text); any other cell sends the whole file
to the cell-by-cell reading, its cells kept verbatim."""
from __future__ import annotations

import gzip

import numpy as np
import pytest

from gcnmops.gatksv import matrix

pysam = pytest.importorskip("pysam")


def _text(rng, m=3000, n=7):
    counts = rng.poisson(30, size=(m, n))
    counts[5, 2] = 2 ** 31 - 1
    lines = ["#Chr\tStart\tEnd\t" + "\t".join(f"S{k}" for k in range(n))]
    for i in range(m):
        contig, at = ("chr1", i) if i < 2000 else ("chrX", i - 2000)
        lines.append(f"{contig}\t{at * 100}\t{at * 100 + 100}\t" + "\t".join(map(str, counts[i])))
    return "\n".join(lines) + "\n"


def _write(tmp_path, text, how):
    plain = tmp_path / "m.bed"
    plain.write_text(text)
    if how == "plain":
        return plain
    if how == "gzip":
        gz = tmp_path / "m.gzip.bed.gz"
        gz.write_bytes(gzip.compress(text.encode()))
        return gz
    pysam.tabix_compress(str(plain), str(tmp_path / "m.bed.gz"), force=True)
    return tmp_path / "m.bed.gz"


def _slow(path, monkeypatch):
    with monkeypatch.context() as mp:
        mp.setattr(matrix, "_read_fast", lambda *a: None)
        return matrix.read_depth_matrix(path)


def _same(a, b):
    assert a.header == b.header and a.samples == b.samples and a.text == b.text
    assert list(a.contig) == list(b.contig)
    np.testing.assert_array_equal(a.start, b.start)
    np.testing.assert_array_equal(a.end, b.end)
    np.testing.assert_array_equal(a.values, b.values)
    assert a.values.flags.f_contiguous and a.values.dtype == np.float64


@pytest.mark.parametrize("how", ["bgzip", "gzip", "plain"])
@pytest.mark.parametrize("chunk", [1000, 1 << 24])
def test_fast_reading_equals_the_cell_by_cell_one(tmp_path, monkeypatch, how, chunk):
    from gcnmops.io import inttable

    path = _write(tmp_path, _text(np.random.default_rng(1)), how)
    monkeypatch.setattr(inttable, "CHUNK_BYTES", chunk)  # many chunks, cut across pieces, or one
    calls = []
    real = matrix._read_fast
    monkeypatch.setattr(matrix, "_read_fast", lambda *a: calls.append(1) or real(*a))
    fast = matrix.read_depth_matrix(path, threads=3)
    assert calls and fast.values[5, 2] == 2 ** 31 - 1
    assert fast.base.dtype == np.int32 and fast.values.dtype == np.float64  # the cells as parsed; read as numbers
    monkeypatch.undo()
    _same(fast, _slow(path, monkeypatch))


@pytest.mark.parametrize("cell", ["NA", ".", "", "4294967296", "1.5", "2147483648", "-2147483649", " 5", "5 ",
                                  "+", "00000000005"])
def test_other_cells_are_read_cell_by_cell(tmp_path, monkeypatch, cell):
    text = _text(np.random.default_rng(2)).split("\n")
    fields = text[2500].split("\t")
    fields[4] = cell
    text[2500] = "\t".join(fields)
    path = _write(tmp_path, "\n".join(text), "bgzip")
    assert matrix._read_fast(path, text[0], text[0].split("\t"), 2, 1) is None
    m = matrix.read_depth_matrix(path)
    _same(m, _slow(path, monkeypatch))
    if cell in ("4294967296", "2147483648", "-2147483649", "00000000005"):
        assert m.values[2499, 1] == int(cell)
    else:
        assert np.isnan(m.values[2499, 1]) and m.text == {(2499, 1): cell}


@pytest.mark.parametrize("gaps", [0, 3, 500])
def test_select_is_fancy_indexing(gaps):
    """select: values[rows][:, cols] as a Fortran-ordered copy, whether the rows are a few runs or scattered."""
    rng = np.random.default_rng(gaps)
    values = np.asfortranarray(rng.random((3000, 7)))
    values[5, 2] = np.nan
    rows = np.arange(2500)
    if gaps:
        rows = np.sort(rng.choice(3000, 2500 - gaps, replace=False)) if gaps > 64 else \
            np.delete(rows, rng.choice(2500, gaps, replace=False))
    cols = np.array([6, 0, 2, 2])
    got = matrix.select(values, rows, cols)
    assert got.flags["F_CONTIGUOUS"]
    np.testing.assert_array_equal(got, values[np.ix_(rows, cols)])


def test_a_selection_shares_the_matrix_until_its_cells_are_asked_for():
    """PrintSVEvidence's rows and the sex columns are a selection of the read matrix (no copy of a contig of 500
    samples per pass); its cells, when asked for, equal fancy indexing."""
    rng = np.random.default_rng(3)
    base = np.asfortranarray(rng.poisson(30, size=(50, 6)).astype(np.float64))
    m = matrix.DepthMatrix("#Chr\tStart\tEnd\t" + "\t".join("FEDCBA"), list("FEDCBA"),
                           np.array(["chr1"] * 30 + ["chrX"] * 20, dtype=object), np.arange(50) * 100,
                           np.arange(1, 51) * 100, base)
    x = matrix.print_sv_evidence(m, "chrX")  # Java order: A..F, the columns reversed
    sub = x.take(slice(None), [1, 3])
    assert sub.base is base and "values" not in vars(sub)
    np.testing.assert_array_equal(sub.values, base[30:, ::-1][:, [1, 3]])
    assert sub.samples == ["B", "D"] and list(sub.start) == list(np.arange(30, 50) * 100)


@pytest.mark.parametrize("m", [6, 7])
def test_median_zero_rule_equals_the_median(m):
    """count_data's median-0 test (cells counted in one pass) equals np.median(...) == 0 on odd and even row
    counts, NA cells (read as 0), negative cells and subnormal ones (where counting would be wrong)."""
    from gcnmops.gatksv.runcnmops import _column_counts, _median_zero

    cols = [[0, 0, 0, 1, 2, 3, 4], [0, 0, 0, 0, 2, 3, 4], [np.nan, np.nan, 0, 0, 5, 5, 5], [-1, 0, 0, 1, 1, 1, 1],
            [-2, 2, 0, 0, 7, 7, 7], [5e-324, 0, 0, 0, 9, 9, 9], [1, 2, 3, 4, 5, 6, 7], [0, 0, 0, 0, 0, 0, 0]]
    values = np.asfortranarray(np.array(cols, dtype=np.float64).T[:m])
    nans, zeros, plain = _column_counts(values)
    filled = np.where(np.isnan(values), 0.0, values)
    np.testing.assert_array_equal(_median_zero(filled, zeros, plain), np.median(filled, axis=0) == 0)
    assert list(nans) == [int(np.isnan(values[:, k]).sum()) for k in range(values.shape[1])]


def test_quotes_are_literal_on_both_readers(tmp_path, monkeypatch):
    """A quoted contig name is read as written (awk and GATK do not unquote) by the fast reader and by the
    cell-by-cell one alike, so that an unrelated odd cell does not rename a contig."""
    text = '#Chr\tStart\tEnd\tA\tB\n"chr1"\t0\t100\t5\t6\n"chr1"\t100\t200\t7\t8\n'
    fast = matrix.read_depth_matrix(_write(tmp_path, text, "plain"))
    slow = matrix.read_depth_matrix(_write(tmp_path, text.replace("\t8\n", "\tNA\n"), "plain"))
    assert list(fast.contig) == list(slow.contig) == ['"chr1"', '"chr1"']
    assert fast.base.dtype == np.int32 and slow.text == {(1, 1): "NA"}
