"""``compressCov.sh -z -s`` (rebinning by summing) and the exclusion of ``cnMOPS_workflow.sh -x`` (``bedtools
intersect -v``), producing the table ``runcnMOPS.R`` reads.

compressCov.sh: the new bin is RATIO times the width of the second data row; per contig (in ``sort -V`` order)
windows ``[MIN + k NBIN, MIN + (k + 1) NBIN)`` for ``k = 0 .. (MAX - MIN) / NBIN``, MIN the contig's first
Start and MAX its last End (file order); ``bedtools map -o sum`` sums each sample over the rows that overlap a
window ("." when none does, or when one of the sums' cells is not a number to bedtools); a window is kept when
its first sample's sum is not ".".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numba import njit, prange

from ..errors import InputError
from .intervals import overlapping
from .matrix import DepthMatrix, select
from .shelltools import awk_equal, bedtools_number, bedtools_sum_text, r_number, version_sorted


@dataclass
class BinTable:
    """The table runcnMOPS.R reads: header line, samples, bins (contig object, 0-based start, end int64) and
    each cell's number as R reads it (NaN where R reads NA), plus how the cells are written (``cell_text``)."""

    header: str
    samples: list[str]
    contig: np.ndarray
    start: np.ndarray
    end: np.ndarray
    values: np.ndarray
    written: object = None  # callable (row, col) -> the cell's text, for writing the table

    def lines(self):
        yield self.header
        for r in range(len(self.start)):
            cells = [self.written(r, c) for c in range(len(self.samples))]
            yield "\t".join([str(self.contig[r]), str(self.start[r]), str(self.end[r])] + cells)

    def keep(self, mask: np.ndarray) -> "BinTable":
        rows = np.flatnonzero(mask)
        written = self.written
        values = select(self.values, rows, np.arange(self.values.shape[1]))
        return BinTable(self.header, self.samples, self.contig[rows], self.start[rows], self.end[rows], values,
                        lambda r, c: written(int(rows[r]), c))


def raw_table(m: DepthMatrix) -> BinTable:
    """The matrix unrebinned (REBIN 1), as R reads its cells."""
    return BinTable(m.header, m.samples, m.contig, m.start, m.end, m.numbers(r_number), m.cell_text)


def compress_cov(m: DepthMatrix, ratio: int, what: str = "the matrix", bed: pd.DataFrame | None = None) -> BinTable:
    """compressCov.sh -s: ``m`` rebinned by ``ratio`` (> 1), sums as bedtools prints them, read back as R reads
    them; with ``bed``, then :func:`exclude`'s bins only (their sums alone computed)."""
    if not m.header.startswith("#"):
        raise InputError(f"{what}: compressCov.sh needs the header line to start with '#' (#Chr Start End ...).")
    if any(not f or any(c.isspace() for c in f) for f in m.samples):
        raise InputError(f"{what}: a sample name is empty or holds a blank; compressCov.sh counts the samples by "
                         "splitting the header on blanks.")
    if m.n_rows == 0:
        raise InputError(f"{what} has no bins to rebin.")
    names = m.contig_names()
    if any("#" in t for t in m.text.values()) or any("#" in str(c) for c in names):
        raise InputError(f"{what}: a data row holds '#', which compressCov.sh takes for a header line.")
    k = 1 if m.n_rows > 1 else 0
    nbin = int(ratio) * int(m.end[k] - m.start[k])
    if nbin <= 0:
        raise InputError(f"{what}: the new bin width {ratio} x {int(m.end[k] - m.start[k])} is not positive.")
    if (m.end <= m.start).any():
        i = int(np.argmax(m.end <= m.start))
        raise InputError(f"{what}: bin {m.contig[i]}:{m.start[i]}-{m.end[i]} is empty (End <= Start).")
    if not m.samples:  # no first sample: every window's first sum is "."
        return BinTable(m.header, m.samples, np.empty(0, dtype=object), np.empty(0, np.int64), np.empty(0, np.int64),
                        np.empty((0, 0)), lambda r, c: ".")
    windows = [_windows(m, contig, m.rows_of([n for n in names if awk_equal(n, contig)]), nbin)
               for contig in version_sorted(names)]
    contigs = np.concatenate([np.full(len(w.start), w.contig, dtype=object) for w in windows])
    starts = np.concatenate([w.start for w in windows])
    if bed is not None:  # bins kept by the exclusion: their windows alone summed
        out = overlapping(contigs, starts, starts + nbin, bed)
        ends = np.cumsum([len(w.start) for w in windows])
        for w, a, b in zip(windows, np.r_[0, ends[:-1]], ends):
            w.drop(out[a:b])
        contigs, starts = contigs[~out], starts[~out]
    # cells as bedtools reads them: the plain integers where the matrix has no other cell (a selection of its base)
    cells = m.numbers(bedtools_number) if m.text else m.base  # a matrix with text cells holds its own base
    rows, cols = m.base_rows(), m.base_cols()
    sums = np.empty((len(starts), len(m.samples)), dtype=np.float64, order="F")
    seg = np.concatenate([[0], np.cumsum([w.n_src for w in windows])]).astype(np.int64)
    src = np.concatenate([rows[w.src] for w in windows] + [np.empty(0, np.int64)])
    bounds = np.concatenate([w.bounds[:-1] + seg[k] for k, w in enumerate(windows)] + [[seg[-1]]]).astype(np.int64)
    _window_sums(cells, src, cols, bounds, sums)
    if m.text:  # a window whose first sample's sum is "." (a cell bedtools reads as none)
        kept = np.flatnonzero(~np.isnan(sums[:, 0]))
        if len(kept) < len(starts):
            contigs, starts, sums = contigs[kept], starts[kept], select(sums, kept, np.arange(sums.shape[1]))
    values = _as_printed(sums)
    return BinTable(m.header, m.samples, contigs, starts, starts + nbin, values,
                    lambda r, c: bedtools_sum_text(sums[r, c]))


@dataclass
class _Windows:
    """One contig's windows of ``bedtools map`` that some bin overlaps: contig, start (w,) int64, and for each
    the bins summed into it: ``src[bounds[i]:bounds[i + 1]]`` (rows of the matrix, in file order)."""

    contig: str
    start: np.ndarray
    src: np.ndarray
    bounds: np.ndarray

    @property
    def n_src(self) -> int:
        return len(self.src)

    def drop(self, out: np.ndarray) -> None:
        """Leave out the windows where ``out`` (w,) is True."""
        keep = np.flatnonzero(~out)
        if len(keep) == len(self.start):
            return
        lo, hi = self.bounds[keep], self.bounds[keep + 1]
        n = hi - lo
        self.src = self.src[np.repeat(lo, n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))]
        self.start, self.bounds = self.start[keep], np.concatenate([[0], np.cumsum(n)])


def _windows(m: DepthMatrix, contig: str, rows: np.ndarray, nbin: int) -> _Windows:
    """The windows ``[MIN + k NBIN, MIN + (k + 1) NBIN)`` of one contig (``rows``: its bins) that a bin overlaps."""
    s, e = m.start[rows], m.end[rows]
    if (np.diff(s) < 0).any():
        i = int(rows[np.argmax(np.diff(s) < 0) + 1])
        raise InputError(f"bedtools map needs sorted bins: {m.contig[i]}:{m.start[i]} comes after a later start.")
    lo, hi = int(s[0]), int(e[-1])
    n_win = (hi - lo) // nbin + 1 if hi >= lo else 0
    first = np.maximum((s - lo) // nbin, 0)
    last = np.minimum(-((lo - e) // nbin) - 1, n_win - 1)  # ceil((e - lo) / nbin) - 1
    span = np.maximum(last - first + 1, 0)
    win = np.repeat(first, span) + (np.arange(span.sum()) - np.repeat(np.cumsum(span) - span, span))
    src = np.repeat(rows, span)
    if not np.all(np.diff(win) >= 0):
        order = np.argsort(win, kind="stable")
        win, src = win[order], src[order]
    heads = np.flatnonzero(np.r_[True, win[1:] != win[:-1]]) if len(win) else np.empty(0, np.int64)
    return _Windows(contig, lo + nbin * win[heads].astype(np.int64), src.astype(np.int64),
                    np.r_[heads, len(win)].astype(np.int64))


@njit(parallel=True, cache=True, nogil=True)
def _window_sums(cells, src, cols, bounds, out):  # pragma: no cover - numba
    """out[w, j] = cells[src[bounds[w]], cols[j]] + ... + cells[src[bounds[w + 1] - 1], cols[j]], added in that
    order in float64 (as ``np.add.reduceat`` of the float64 cells); one column per thread, read down its column of
    ``cells`` (order F; float64 or int32)."""
    for j in prange(cols.shape[0]):
        c = cols[j]
        for w in range(bounds.shape[0] - 1):
            acc = np.float64(cells[src[bounds[w]], c])
            for i in range(bounds[w] + 1, bounds[w + 1]):
                acc += np.float64(cells[src[i], c])
            out[w, j] = acc


@njit(parallel=True, cache=True, nogil=True)
def _odd_columns(sums):  # pragma: no cover - numba
    """(N,) bool: the columns of ``sums`` with a number bedtools prints otherwise than R reads an integer."""
    odd = np.zeros(sums.shape[1], dtype=np.bool_)
    for j in prange(sums.shape[1]):
        for i in range(sums.shape[0]):
            v = sums[i, j]
            if v == v and (abs(v) >= 1e10 or v != np.floor(v)):
                odd[j] = True
                break
    return odd


def _as_printed(sums: np.ndarray) -> np.ndarray:
    """The sums as R reads them back from bedtools' text (10 significant digits; "." -> NA); ``sums`` itself
    where every sum is an integer below 1e10."""
    odd_cols = np.flatnonzero(_odd_columns(sums)) if sums.size else np.empty(0, np.int64)
    if not len(odd_cols):
        return sums
    out = sums.copy(order="F")
    for c in odd_cols:
        col = out[:, c]
        for r in np.flatnonzero(~np.isnan(col) & ((np.abs(col) >= 1e10) | (col != np.floor(col)))):
            col[r] = float(bedtools_sum_text(col[r]))
    return out


def exclude(table: BinTable, bed: pd.DataFrame) -> BinTable:
    """``bedtools intersect -v -wa -b BED``: the bins that overlap no interval of ``bed``."""
    return table.keep(~overlapping(table.contig, table.start, table.end, bed))


__all__ = ["BinTable", "raw_table", "compress_cov", "exclude"]
