"""Regions to leave out of a run (``--exclude BED``, as GATK-SV's ``-x`` / ``bedtools intersect -v``): the windows
overlapping any interval of the BED are removed before the model.

Coordinates: a BED interval is 0-based, half-open [a, b) (bases a + 1 .. b in 1-based terms); a window of cn.mops
is 1-based, closed [s, e], i.e. [s - 1, e) half-open. They overlap when they share a base: s - 1 < b and a < e.
A zero-length interval (a = b, a point between two bases) removes the windows on both sides of it, as bedtools
does: it counts as [a - 1, a + 1).
"""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError


def read_exclude_bed(path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The intervals of the BED ``path`` (plain or gzipped; ``track``/``browser``/``#`` lines skipped; columns
    after the third ignored) by chromosome, merged where they overlap or touch: chromosome -> (starts, ends),
    0-based half-open, sorted and disjoint. InputError naming the line for anything but a BED."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"--exclude: the BED file {str(path)!r} does not exist.")
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    chroms, starts, ends = [], [], []
    with opener(path, "rt") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip() or line.startswith(("#", "track", "browser")):
                continue
            fields = line.rstrip("\r\n").split("\t")
            try:
                a, b = int(fields[1]), int(fields[2])
            except (IndexError, ValueError):
                raise InputError(f"--exclude: line {number} of {str(path)!r} is not a BED line (chrom<TAB>start"
                                 f"<TAB>end, 0-based): {line.strip()[:80]!r}") from None
            if a < 0 or b < a:
                raise InputError(f"--exclude: line {number} of {str(path)!r} has start {a} and end {b}: a BED "
                                 "interval needs 0 <= start <= end.")
            if a == b:  # a point: the bases on both sides (bedtools)
                a, b = max(a - 1, 0), b + 1
            chroms.append(fields[0])
            starts.append(a)
            ends.append(b)
    frame = pd.DataFrame({"chrom": chroms, "start": np.asarray(starts, np.int64), "end": np.asarray(ends, np.int64)})
    out = {}
    for chrom, part in frame.groupby("chrom", sort=False):
        part = part.sort_values("start", kind="stable")
        s, e = part["start"].to_numpy(), np.maximum.accumulate(part["end"].to_numpy())
        first = np.r_[True, s[1:] > e[:-1]]  # a new merged interval where a start is past every end before it
        out[str(chrom)] = (s[first], np.maximum.reduceat(e, np.flatnonzero(first)))
    return out


def overlapping_windows(ranges: pd.DataFrame, intervals: dict[str, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """(m,) bool: which windows of ``ranges`` (seqnames, 1-based closed start, end) overlap an interval of
    ``intervals`` (``read_exclude_bed``)."""
    hit = np.zeros(len(ranges), bool)
    chrom = ranges["seqnames"].astype(str).to_numpy()
    start = ranges["start"].to_numpy(np.int64)
    end = ranges["end"].to_numpy(np.int64)
    for name, (s, e) in intervals.items():
        rows = np.flatnonzero(chrom == name)
        if rows.size == 0:
            continue
        # the last interval starting before the window's end: the only one that may reach past its start
        last = np.searchsorted(s, end[rows], side="left") - 1
        hit[rows] = (last >= 0) & (e[np.maximum(last, 0)] > start[rows] - 1)
    return hit


def exclude_rows(ranges: pd.DataFrame | None, path) -> np.ndarray:
    """(m,) bool: the windows of ``ranges`` that ``--exclude`` ``path`` removes; InputError where the counts have no
    coordinates or no chromosome of the BED is one of theirs (a naming mismatch such as chr1 / 1)."""
    if ranges is None:
        raise InputError("--exclude needs counts with genomic coordinates (seqnames, start, end); this input is a "
                         "bare matrix.")
    intervals = read_exclude_bed(path)
    names = set(ranges["seqnames"].astype(str).unique())
    if intervals and not names & set(intervals):
        raise InputError(f"--exclude: none of the chromosomes of {str(path)!r} ({', '.join(list(intervals)[:3])} ...) "
                         f"is one of the counts' ({', '.join(sorted(names)[:3])} ...): check the naming (chr1 or 1).")
    return overlapping_windows(ranges, intervals)


__all__ = ["read_exclude_bed", "overlapping_windows", "exclude_rows"]
