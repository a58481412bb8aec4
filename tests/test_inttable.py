"""The parallel integer-table parser (gcnmops.io.inttable): every split of the text into pieces and chunks, and any
thread count, gives the same table; any line outside its strict form gives None (the caller's exact reader then
reads the file), never a different table."""
from __future__ import annotations

import numpy as np
import pytest

from gcnmops.io import inttable
from gcnmops.io.inttable import read_int_table


def _table(rng, m=400, n=5):
    names = np.array(["chr1", "chr2", "chrX", "HLA-A*01:01", "chr1"])[np.minimum(np.arange(m) // 90, 4)]
    first = rng.integers(0, 10 ** 12, m)
    second = first + rng.integers(-5, 10 ** 6, m)
    cells = rng.integers(-(2 ** 31), 2 ** 31, (m, n)).astype(np.int32)
    cells[:, 1] = rng.poisson(3, m)
    cells[0, 0], cells[1, 0] = 2 ** 31 - 1, -(2 ** 31)
    return names, first, second, cells


def _text(names, first, second, cells, final_newline=True):
    lines = [f"{a}\t{b}\t{c}\t" + "\t".join(map(str, row)) for a, b, c, row in zip(names, first, second, cells)]
    return ("\n".join(lines) + ("\n" if final_newline else "")).encode()


def _pieces(data: bytes, rng, k: int):
    cuts = np.sort(rng.choice(np.arange(1, len(data)), k, replace=False)) if k else []
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


@pytest.mark.parametrize("chunk, threads, k", [(1 << 20, 1, 0), (64, 1, 7), (300, 3, 40), (1, 2, 200)])
@pytest.mark.parametrize("final_newline", [True, False])
def test_any_split_gives_the_table(monkeypatch, chunk, threads, k, final_newline):
    rng = np.random.default_rng(k)
    names, first, second, cells = _table(rng)
    header = b"#Chr\tStart\tEnd\ta\tb\tc\td\te\n##second header line\n"
    monkeypatch.setattr(inttable, "CHUNK_BYTES", chunk)
    pieces = _pieces(header + _text(names, first, second, cells, final_newline), rng, k)
    kinds = (bytes, memoryview, lambda p: np.frombuffer(p, dtype=np.uint8))  # bytes or buffers, as readers give
    pieces = [kinds[i % 3](p) for i, p in enumerate(pieces)]
    got = read_int_table(pieces, 5, skip=2, threads=threads)
    assert list(got.names) == list(names)
    np.testing.assert_array_equal(got.first, first)
    np.testing.assert_array_equal(got.second, second)
    assert got.cells.dtype == np.int32 and got.cells.flags.f_contiguous
    np.testing.assert_array_equal(got.cells, cells)


@pytest.mark.parametrize("line, cells", [("c\t0\t1\t+5\t-0", [5, 0]), ("c\t-3\t+1\t007\t2147483647", [7, 2 ** 31 - 1]),
                                         ("c\t0\t1\t-2147483648\t0000000001", [-(2 ** 31), 1])])
def test_plain_integers_with_signs_and_zeros(line, cells):
    got = read_int_table([line.encode() + b"\n"], 2)
    assert got.cells.tolist() == [cells]


@pytest.mark.parametrize("line", [
    "c\t0\t1\t5\tNA", "c\t0\t1\t5\t.", "c\t0\t1\t5\t", "c\t0\t1\t5\t1.5", "c\t0\t1\t5\t2147483648",
    "c\t0\t1\t5\t-2147483649", "c\t0\t1\t5\t00000000001", "c\t0\t1\t5 \t1", "c\t0\t1\t 5\t1", "c\t0\t1\t5\t1\r",
    "c\t0\t1\t5", "c\t0\t1\t5\t1\t2", "\t0\t1\t5\t1", "c\t1e3\t1\t5\t1", "c\t1234567890123456789\t1\t5\t1",
    "c\t0\t1\t5\t+", "c\r\t0\t1\t5\t1", "c 0 1 5 1", ""])
def test_anything_else_is_refused(line):
    good = b"c\t0\t1\t5\t1\n"
    assert read_int_table([good + line.encode() + b"\n" + good], 2) is None


def test_names_that_are_not_utf8_are_refused_and_no_rows_is_none():
    assert read_int_table([b"\xff\xfe\t0\t1\t5\n"], 1) is None
    assert read_int_table([b"#header only\n"], 1, skip=1) is None
    assert read_int_table([], 1) is None


@pytest.mark.parametrize("chunk, threads, k", [(64, 1, 7), (300, 3, 40), (1, 2, 200)])
@pytest.mark.parametrize("final_newline", [True, False])
def test_known_row_count_streams_the_same_table(monkeypatch, chunk, threads, k, final_newline):
    """With the row count known beforehand (count_lines less the skipped lines), chunks are parsed as they come
    (at most 4 x threads in memory) into the same table; a wrong count gives None, never a different table."""
    rng = np.random.default_rng(k)
    names, first, second, cells = _table(rng)
    text = b"#Chr\tStart\tEnd\ta\tb\tc\td\te\n##second header line\n" + _text(names, first, second, cells,
                                                                              final_newline)
    monkeypatch.setattr(inttable, "CHUNK_BYTES", chunk)
    assert inttable.count_lines(map(inttable.line_stats, _pieces(text, rng, k))) == len(names) + 2
    got = read_int_table(_pieces(text, rng, k), 5, skip=2, threads=threads, rows=len(names))
    assert list(got.names) == list(names)
    np.testing.assert_array_equal(got.first, first)
    np.testing.assert_array_equal(got.second, second)
    np.testing.assert_array_equal(got.cells, cells)
    for wrong in (len(names) - 1, len(names) + 1):
        assert read_int_table(_pieces(text, rng, k), 5, skip=2, threads=threads, rows=wrong) is None
