"""Where reads are counted: getReadCountsFromBAM's windows of a reference, user regions (BED or a table), and
the counting plan that sends each read to its elementary interval between the regions' breakpoints.
"""
from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..errors import InputError
from .bamheader import BamHeader


# --------------------------------------------------------------------------------------------
# windows and regions
# --------------------------------------------------------------------------------------------
def reference_windows(length: int, window: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of getReadCountsFromBAM's windows on a reference of ``length`` bp.

    WL >= L gives the single window [0, L] (an IRanges quirk: start 0, width L + 1). Otherwise, when
    L is a multiple of WL, L is first reduced by one; windows start at 1, WL + 1, 2 WL + 1, ... (every
    start <= L) and end at WL, 2 WL, ..., the last one at L.
    """
    length = int(length)
    window = int(window)
    if window >= length:
        return np.array([0], np.int64), np.array([length], np.int64)
    if length % window == 0:
        length -= 1
    starts = np.arange(1, length + 1, window, dtype=np.int64)
    ends = starts + (window - 1)
    ends[-1] = length
    return starts, ends


def bam_windows(header: BamHeader, window: int, ref_seq_names: Sequence[str]) -> pd.DataFrame:
    """The windows of every reference in ``ref_seq_names`` (in that order) as seqnames/start/end."""
    targets = header.targets()
    parts = []
    for name in ref_seq_names:
        s, e = reference_windows(targets[name], window)
        parts.append(pd.DataFrame({"seqnames": name, "start": s, "end": e}))
    return pd.concat(parts, ignore_index=True)


def read_regions(regions) -> pd.DataFrame:
    """User regions -> DataFrame seqnames/start/end (1-based, closed).

    A path ending in ``.bed`` (optionally ``.gz``) is BED: tab-separated chrom, chromStart, chromEnd
    (0-based, half-open; converted), further columns ignored, ``#``/``track``/``browser`` lines
    skipped. Another path is a table with a header holding seqnames (or chr/chrom/chromosome), start
    and end, 1-based closed (the count TSV format). A DataFrame is taken as 1-based closed likewise.
    """
    if isinstance(regions, (str, os.PathLike)):
        p = Path(regions)
        if not p.is_file():
            raise InputError(f"Regions file not found: {p}")
        name = p.name.lower()
        if name.endswith((".bed", ".bed.gz")):
            frame = _read_bed(p)
        else:
            try:
                frame = pd.read_csv(p, sep=None, engine="python", dtype={0: str})
            except Exception as err:  # noqa: BLE001
                raise InputError(f"Cannot read regions table {p}: {err}") from None
            source = str(p)
            frame = _region_columns(frame, source)
    elif isinstance(regions, pd.DataFrame):
        frame = _region_columns(regions, "the regions DataFrame")
    else:
        raise InputError(f"regions must be a BED/TSV file path or a DataFrame, not {type(regions).__name__}.")
    if len(frame) == 0:
        raise InputError("The regions hold no region.")
    return frame


def _read_bed(p: Path) -> pd.DataFrame:
    rows = []
    opener = gzip.open if p.name.lower().endswith(".gz") else open
    with opener(p, "rt") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line.strip() or line.startswith(("#", "track", "browser")):
                continue
            f = line.split("\t")
            if len(f) < 3:
                f = line.split()
            if len(f) < 3:
                raise InputError(f"{p}, line {lineno}: a BED line needs chrom, chromStart, chromEnd.")
            try:
                s, e = int(f[1]), int(f[2])
            except ValueError:
                raise InputError(f"{p}, line {lineno}: chromStart/chromEnd must be integers, got "
                                 f"'{f[1]}', '{f[2]}'.") from None
            if s < 0 or e <= s:
                raise InputError(f"{p}, line {lineno}: BED interval [{s}, {e}) is empty or negative.")
            rows.append((f[0], s + 1, e))
    return pd.DataFrame(rows, columns=["seqnames", "start", "end"]).astype({"start": np.int64, "end": np.int64})


def _region_columns(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    from ..io.columns import END_ALIASES, SEQNAMES_ALIASES, START_ALIASES

    lower = {str(c).lower(): c for c in frame.columns}
    cols = {}
    for role, aliases in (("seqnames", SEQNAMES_ALIASES), ("start", START_ALIASES), ("end", END_ALIASES)):
        hit = next((lower[a] for a in aliases if a in lower), None)
        if hit is None:
            raise InputError(f"{source} lacks a '{role}' column (need seqnames, start, end; 1-based, closed).")
        cols[role] = hit
    out = pd.DataFrame({"seqnames": frame[cols["seqnames"]].astype(str).to_numpy()})
    for role in ("start", "end"):
        vals = pd.to_numeric(frame[cols[role]], errors="coerce")
        if vals.isna().any():
            raise InputError(f"{source}: column '{role}' must hold integer coordinates.")
        out[role] = vals.astype(np.int64).to_numpy()
    bad = (out["end"] < out["start"]).to_numpy()
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{source}: region {i + 1} ends before it starts ({out['start'][i]} > {out['end'][i]}).")
    return out


# --------------------------------------------------------------------------------------------
# counting plan: region breakpoints per reference
# --------------------------------------------------------------------------------------------
@dataclass
class CountPlan:
    """Where each read goes: per counted reference, sorted breakpoints; per region, two indices.

    Reference k (header index ``refs[k]``) owns ``bp[bp_off[k]:bp_off[k+1]]``; a read at 1-based
    position x adds one to ``counts[j]`` where bp[j] <= x < bp[j+1] within that slice. Region i
    (on reference k) is the sum of counts[lo[i]:hi[i]].
    """

    ref_slot: np.ndarray  # int32 (n header refs,), slot k or -1
    refs: list[int]  # header index of each slot
    bp: np.ndarray  # int64
    bp_off: np.ndarray  # int64 (n slots + 1,)
    lo: np.ndarray  # int64 (m,)
    hi: np.ndarray  # int64 (m,)

    def new_counts(self) -> np.ndarray:
        return np.zeros(self.bp.size, np.int64)

    def region_counts(self, counts: np.ndarray) -> np.ndarray:
        cum = np.concatenate([[0], np.cumsum(counts)])
        return cum[self.hi] - cum[self.lo]


def make_plan(header: BamHeader, ranges: pd.DataFrame) -> CountPlan:
    """Plan for counting into ``ranges`` (seqnames/start/end, 1-based closed) of ``header``'s refs."""
    index = {name: i for i, name in enumerate(header.references)}
    seq = ranges["seqnames"].to_numpy(dtype=object)
    starts = ranges["start"].to_numpy(np.int64)
    ends = ranges["end"].to_numpy(np.int64)
    codes, uniques = pd.factorize(seq)
    unknown = [u for u in uniques if u not in index]
    if unknown:
        raise InputError(f"Reference(s) {', '.join(map(str, unknown[:10]))} are not in the BAM header of "
                         f"{header.path} (it has {_preview(header.references)}).")
    ref_slot = np.full(len(header.references), -1, np.int32)
    refs, bps = [], []
    lo = np.empty(len(seq), np.int64)
    hi = np.empty(len(seq), np.int64)
    offset = 0
    bp_off = [0]
    for k, name in enumerate(uniques):
        ref_slot[index[name]] = k
        refs.append(index[name])
        rows = np.flatnonzero(codes == k)
        bp = np.unique(np.concatenate([starts[rows], ends[rows] + 1]))
        lo[rows] = offset + np.searchsorted(bp, starts[rows])
        hi[rows] = offset + np.searchsorted(bp, ends[rows] + 1)
        bps.append(bp)
        offset += bp.size
        bp_off.append(offset)
    return CountPlan(ref_slot, refs, np.concatenate(bps), np.asarray(bp_off, np.int64), lo, hi)


def _preview(names: Sequence[str], k: int = 8) -> str:
    shown = ", ".join(names[:k])
    return shown + (f", ... ({len(names)} in all)" if len(names) > k else "")
