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


def compress_cov(m: DepthMatrix, ratio: int, what: str = "the matrix") -> BinTable:
    """compressCov.sh -s: ``m`` rebinned by ``ratio`` (> 1), sums as bedtools prints them, read back as R reads
    them."""
    if not m.header.startswith("#"):
        raise InputError(f"{what}: compressCov.sh needs the header line to start with '#' (#Chr Start End ...).")
    if any(not f or any(c.isspace() for c in f) for f in m.samples):
        raise InputError(f"{what}: a sample name is empty or holds a blank; compressCov.sh counts the samples by "
                         "splitting the header on blanks.")
    if m.n_rows == 0:
        raise InputError(f"{what} has no bins to rebin.")
    if any("#" in t for t in m.text.values()) or any("#" in str(c) for c in pd.unique(m.contig)):
        raise InputError(f"{what}: a data row holds '#', which compressCov.sh takes for a header line.")
    k = 1 if m.n_rows > 1 else 0
    nbin = int(ratio) * int(m.end[k] - m.start[k])
    if nbin <= 0:
        raise InputError(f"{what}: the new bin width {ratio} x {int(m.end[k] - m.start[k])} is not positive.")
    if (m.end <= m.start).any():
        i = int(np.argmax(m.end <= m.start))
        raise InputError(f"{what}: bin {m.contig[i]}:{m.start[i]}-{m.end[i]} is empty (End <= Start).")
    cells = m.numbers(bedtools_number)
    names = list(pd.unique(m.contig))
    parts = []
    for contig in version_sorted(names):
        same = [n for n in names if awk_equal(n, contig)]
        rows = np.flatnonzero(np.isin(m.contig, same))
        parts.append(_map_sum(m, contig, rows, nbin, cells))
    starts = np.concatenate([p[1] for p in parts])
    sums = (parts[0][3] if len(parts) == 1 else np.concatenate([p[3] for p in parts], axis=0) if parts else
            np.empty((0, len(m.samples))))
    contigs = np.concatenate([np.full(len(p[1]), p[0], dtype=object) for p in parts])
    ends = np.concatenate([p[2] for p in parts])
    kept = ~np.isnan(sums[:, 0]) if len(m.samples) else np.zeros(len(starts), dtype=bool)
    rows = np.flatnonzero(kept)
    contigs, starts, ends, sums = contigs[rows], starts[rows], ends[rows], select(sums, rows, np.arange(sums.shape[1]))
    values = _as_printed(sums)
    return BinTable(m.header, m.samples, contigs, starts, ends, values,
                    lambda r, c: bedtools_sum_text(sums[r, c]))


def _map_sum(m: DepthMatrix, contig: str, rows: np.ndarray, nbin: int, cells: np.ndarray):
    """(contig, window starts, window ends, sums (windows x samples; NaN = ".")) of one contig."""
    s, e = m.start[rows], m.end[rows]
    if (np.diff(s) < 0).any():
        i = int(rows[np.argmax(np.diff(s) < 0) + 1])
        raise InputError(f"bedtools map needs sorted bins: {m.contig[i]}:{m.start[i]} comes after a later start.")
    lo, hi = int(s[0]), int(e[-1])
    n_win = (hi - lo) // nbin + 1 if hi >= lo else 0
    w_start = lo + nbin * np.arange(n_win, dtype=np.int64)
    first = np.maximum((s - lo) // nbin, 0)
    last = np.minimum(-((lo - e) // nbin) - 1, n_win - 1)  # ceil((e - lo) / nbin) - 1
    span = np.maximum(last - first + 1, 0)
    win = np.repeat(first, span) + (np.arange(span.sum()) - np.repeat(np.cumsum(span) - span, span))
    src = np.repeat(rows, span)
    sums = np.zeros((n_win, cells.shape[1]), dtype=np.float64, order="F")
    if win.size:
        ordered = np.all(np.diff(win) >= 0)
        order = None if ordered else np.argsort(win, kind="stable")
        w = win if ordered else win[order]
        src_rows = src if ordered else src[order]
        starts = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])
        run = src_rows[-1] - src_rows[0] == len(src_rows) - 1 and (np.diff(src_rows) == 1).all()
        block = cells[src_rows[0]:src_rows[-1] + 1] if run else select(cells, src_rows, np.arange(cells.shape[1]))
        sums[w[starts]] = np.add.reduceat(block, starts, axis=0)
    covered = np.bincount(win, minlength=n_win) > 0 if n_win else np.zeros(0, dtype=bool)
    sums[~covered] = np.nan
    return contig, w_start, w_start + nbin, sums


def _as_printed(sums: np.ndarray) -> np.ndarray:
    """The sums as R reads them back from bedtools' text (10 significant digits; "." -> NA)."""
    out = sums.copy(order="F")
    odd = ~np.isnan(out) & ((np.abs(out) >= 1e10) | (out != np.floor(out)))
    for r, c in zip(*np.nonzero(odd)):
        out[r, c] = float(bedtools_sum_text(out[r, c]))
    return out


def exclude(table: BinTable, bed: pd.DataFrame) -> BinTable:
    """``bedtools intersect -v -wa -b BED``: the bins that overlap no interval of ``bed``."""
    return table.keep(~overlapping(table.contig, table.start, table.end, bed))


__all__ = ["BinTable", "raw_table", "compress_cov", "exclude"]
