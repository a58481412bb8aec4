"""The bedtools 2.30 operations of GATK-SV's cn.MOPS scripts on 0-based, half-open intervals: reading a BED
file, ``intersect -v`` (drop what overlaps), ``merge`` (join overlapping and book-ended intervals) and
``subtract``. Overlap is bedtools': ``b.start < a.end and b.end > a.start``, a zero-length interval [z, z)
taken as [z - 1, z + 1).
"""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError


def read_bed(path: str | os.PathLike) -> pd.DataFrame:
    """The intervals of a BED file (chrom, start, end; plain or gzipped; '#', 'track' and 'browser' lines and
    blank lines skipped), as bedtools reads them."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"BED file not found: {path}")
    with open(p, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    rows = []
    with (gzip.open(p, "rt") if gz else open(p, "rt")) as fh:
        for no, line in enumerate(fh, start=1):
            line = line.rstrip("\r\n")
            if not line.strip() or line.startswith(("#", "track", "browser")):
                continue
            f = line.split("\t")
            try:
                rows.append((f[0], int(f[1]), int(f[2])))
            except (IndexError, ValueError):
                raise InputError(f"{path}, line {no}: not a BED interval (chrom<TAB>start<TAB>end): {line[:80]!r}") \
                    from None
            if rows[-1][2] < rows[-1][1]:
                raise InputError(f"{path}, line {no}: the end {rows[-1][2]} is before the start {rows[-1][1]}.")
    return pd.DataFrame(rows, columns=["chrom", "start", "end"]).astype({"start": np.int64, "end": np.int64})


def _effective(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    zero = end == start
    return np.where(zero, start - 1, start), np.where(zero, end + 1, end)


def contig_runs(chrom: np.ndarray) -> tuple[list, np.ndarray]:
    """The runs of equal names in ``chrom`` (m,): their names and bounds (runs + 1,) int64, run k the rows
    ``bounds[k]:bounds[k + 1]``. One comparison per row: a matrix sorted by contig is one run per contig, where
    testing each contig against every row was a pass over the rows per contig."""
    chrom = np.asarray(chrom, dtype=object)
    if len(chrom) == 0:
        return [], np.zeros(1, dtype=np.int64)
    bounds = np.r_[0, np.flatnonzero(chrom[1:] != chrom[:-1]) + 1, len(chrom)].astype(np.int64)
    return chrom[bounds[:-1]].tolist(), bounds


def rows_of(runs: tuple[list, np.ndarray], names) -> np.ndarray:
    """The rows (sorted, int64) of the runs (``contig_runs``) named in ``names``."""
    wanted, (run_names, bounds) = set(names), runs
    keep = np.fromiter((n in wanted for n in run_names), dtype=bool, count=len(run_names))
    return np.flatnonzero(np.repeat(keep, np.diff(bounds))).astype(np.int64)


def overlapping(chrom: np.ndarray, start: np.ndarray, end: np.ndarray, bed: pd.DataFrame) -> np.ndarray:
    """Boolean mask of the intervals (chrom, start, end) that overlap any interval of ``bed``."""
    hit = np.zeros(len(start), dtype=bool)
    a_start, a_end = _effective(np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64))
    runs = contig_runs(chrom)
    for name, b in bed.groupby("chrom", sort=False):
        rows = rows_of(runs, [name])
        if rows.size == 0:
            continue
        bs, be = _effective(b["start"].to_numpy(), b["end"].to_numpy())
        order = np.argsort(bs, kind="stable")
        bs, be = bs[order], be[order]
        max_end = np.maximum.accumulate(be)
        # the B intervals starting before a's end; the largest end among them reaches past a's start?
        k = np.searchsorted(bs, a_end[rows], side="left")
        reach = np.where(k > 0, max_end[np.maximum(k - 1, 0)], np.iinfo(np.int64).min)
        hit[rows] = reach > a_start[rows]
    return hit


def merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``bedtools merge`` of one chromosome's intervals sorted by start: (starts, ends) of the merged ones."""
    out_s, out_e = [], []
    for s, e in zip(start.tolist(), end.tolist()):
        if out_e and s <= out_e[-1]:
            out_e[-1] = max(out_e[-1], e)
        else:
            out_s.append(s)
            out_e.append(e)
    return np.asarray(out_s, dtype=np.int64), np.asarray(out_e, dtype=np.int64)


def by_chrom(bed: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """``bed``'s intervals per chromosome, as ``subtract`` reads them: (start, end, effective start, effective
    end) int64 arrays (a zero-length interval counts as one base wide on either side, as bedtools takes it)."""
    out = {}
    for chrom, b in bed.groupby("chrom", sort=False):
        s, e = b["start"].to_numpy(dtype=np.int64), b["end"].to_numpy(dtype=np.int64)
        out[str(chrom)] = (s, e, *_effective(s, e))
    return out


def subtract(chrom: str, start: int, end: int, bed: dict) -> list[tuple[int, int]]:
    """``bedtools subtract -a`` of one interval: the pieces of [start, end) that no interval of ``bed``
    (``by_chrom`` of a BED) covers."""
    if chrom not in bed:
        return [(start, end)]
    b_start, b_end, bs, be = bed[chrom]
    hit = (bs < end) & (be > start)
    if not hit.any():
        return [(start, end)]
    pieces, at = [], start
    for s, e in sorted(zip(b_start[hit].tolist(), b_end[hit].tolist())):
        if s > at:
            pieces.append((at, min(s, end)))
        at = max(at, e)
        if at >= end:
            break
    if at < end:
        pieces.append((at, end))
    return [(s, e) for s, e in pieces if e > s]


__all__ = ["read_bed", "overlapping", "merge", "by_chrom", "subtract"]
