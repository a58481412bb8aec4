"""``makeMatrix.sh -z [-r RESTRICT] -o OUT SAMPLES``: the depth matrix of ``cnMOPS_workflow.sh BINCOVS`` built from
per-sample binCov files, as the script builds it.

- SAMPLES is read with bash ``while read ID cov``: an ID and a path per line (a last line without a newline is
  not read); the IDs become the column names (``unionbedg -names``).
- ``bedtools unionbedg -header``: per contig, the segments between every start and end of every file that some
  file covers; each sample's cell is its count where it covers the segment (written as in its file) and ``0``
  (the filler) where it does not.
- ``sed -e 's/chrom/Chr/g' -e 's/start/Start/g' -e 's/end/End/g'`` over the whole table (sample names and
  contig names included), ``-r``: rows overlapping RESTRICT removed (``bedtools intersect -v``), then ``#`` put
  before the header and the rows ordered by ``sort -Vk1,1 -k2,2n -k3,3n | uniq``.

Cells are written as read, but for a count with leading zeros or a sign (``007``), written as its number.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from .intervals import overlapping, read_bed
from .matrix import DepthMatrix, read_sample_bincov
from .shelltools import bash_read, version_sorted


def _sed(text: str) -> str:
    return text.replace("chrom", "Chr").replace("start", "Start").replace("end", "End")


def bincov_list(path: str | os.PathLike) -> list[tuple[str, str]]:
    """(sample ID, binCov path) of each line ``while read ID cov`` reads from ``path``."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"BINCOVS list not found: {path}")
    text = p.read_text(encoding="utf-8", errors="surrogateescape")
    lines = text.split("\n")[:-1]  # bash's read drops a last line that has no newline
    out = []
    for no, line in enumerate(lines, start=1):
        fields = bash_read(line).split(None, 1)
        if not fields:
            continue
        if len(fields) < 2:
            raise InputError(f"{path}, line {no}: a sample ID and the path of its binCov file (tab-separated) are "
                             f"needed; found only {fields[0]!r}.")
        out.append((fields[0], fields[1].strip()))
    if not out:
        raise InputError(f"{path} lists no sample (lines of sample ID<TAB>binCov path, each ending in a newline).")
    return out


def _checked(m: DepthMatrix, what: str) -> None:
    """Refuses the inputs whose unionbedg output bedtools leaves undefined: unsorted or overlapping bins."""
    change = np.flatnonzero(m.contig[1:] != m.contig[:-1]) + 1
    blocks = np.split(np.arange(m.n_rows), change)
    names = [m.contig[b[0]] for b in blocks]
    if len(set(names)) < len(names):
        raise InputError(f"{what}: the rows of a contig are not together; sort the file (sort -k1,1 -k2,2n).")
    for b in blocks:
        s, e = m.start[b], m.end[b]
        bad = np.flatnonzero((e <= s) | np.r_[False, s[1:] < e[:-1]])
        if bad.size:
            i = int(b[bad[0]])
            raise InputError(f"{what}: bin {m.contig[i]}:{m.start[i]}-{m.end[i]} is empty or overlaps the bin "
                             "before it; binCov rows are sorted, non-overlapping bins (sort -k1,1 -k2,2n).")


def _union_contig(parts: list[tuple[DepthMatrix, np.ndarray]]):
    """unionbedg of one contig: (segment starts, ends, values (segments x samples), text {(seg, sample): cell})."""
    ref = next(rows for _, rows in parts if rows.size)
    first = parts[0][0]
    if all(rows.size == ref.size and np.array_equal(m.start[rows], first.start[ref]) and
           np.array_equal(m.end[rows], first.end[ref]) for m, rows in parts):
        # the common case: every sample has the same bins, and they are the segments
        at = [rows for _, rows in parts]
        covered = [np.ones(ref.size, dtype=bool)] * len(parts)
        seg_s, seg_e = first.start[ref], first.end[ref]
    else:
        points = np.unique(np.concatenate([np.r_[m.start[rows], m.end[rows]] for m, rows in parts]))
        seg_s, seg_e = points[:-1], points[1:]
        at, covered = [], []
        for m, rows in parts:
            k = np.searchsorted(m.start[rows], seg_s, side="right") - 1
            ok = (k >= 0) & (m.end[rows][np.maximum(k, 0)] >= seg_e) if rows.size else np.zeros(seg_s.size, bool)
            at.append(rows[np.maximum(k, 0)] if rows.size else np.zeros(seg_s.size, np.int64))
            covered.append(ok)
        anyone = np.logical_or.reduce(covered)
        seg_s, seg_e = seg_s[anyone], seg_e[anyone]
        at = [a[anyone] for a in at]
        covered = [c[anyone] for c in covered]
    values = np.zeros((seg_s.size, len(parts)), dtype=np.float64, order="F")
    text = {}
    for j, ((m, _), a, ok) in enumerate(zip(parts, at, covered)):
        values[ok, j] = m.values[a[ok], 0]
        if m.text:
            odd = np.fromiter((r for r, _c in m.text), dtype=np.int64)
            for i in np.flatnonzero(ok & np.isin(a, odd)):
                text[(int(i), j)] = m.text[(int(a[i]), 0)]
    return seg_s, seg_e, values, text


def make_matrix(samples: str | os.PathLike, restrict: str | os.PathLike | None = None) -> DepthMatrix:
    """makeMatrix.sh: the depth matrix of the binCov files listed in ``samples`` (rows restricted by the BED
    ``restrict`` when given)."""
    listed = bincov_list(samples)
    mats = []
    for name, path in listed:
        m = read_sample_bincov(path, name)
        _checked(m, f"binCov file of sample {name} ({path})")
        mats.append(m)
    orders = [list(pd.unique(m.contig)) for m in mats]
    contigs = list(pd.unique(np.concatenate([np.asarray(o, dtype=object) for o in orders])))
    rank = {c: k for k, c in enumerate(contigs)}
    for (name, path), order in zip(listed, orders):
        if any(rank[a] > rank[b] for a, b in zip(order, order[1:])):
            raise InputError(f"binCov file of sample {name} ({path}): its contigs are not in the same order as in the "
                             f"files before it ({', '.join(map(str, contigs))}); bedtools unionbedg needs one order.")
    out_c, out_s, out_e, out_v, text, n = [], [], [], [], {}, 0
    for contig in contigs:
        parts = [(m, np.flatnonzero(m.contig == contig)) for m in mats]
        s, e, v, t = _union_contig(parts)
        out_c.append(np.full(s.size, _sed(str(contig)), dtype=object))
        out_s.append(s)
        out_e.append(e)
        out_v.append(v)
        text.update({(r + n, c): x for (r, c), x in t.items()})
        n += s.size
    contig = np.concatenate(out_c)
    start, end = np.concatenate(out_s), np.concatenate(out_e)
    values = np.asfortranarray(np.concatenate(out_v, axis=0))
    keep = np.ones(n, dtype=bool)
    if restrict is not None:
        keep = ~overlapping(contig, start, end, read_bed(restrict))
    rank = {c: k for k, c in enumerate(version_sorted(list(pd.unique(contig))))}
    kept = np.flatnonzero(keep)
    order = kept[np.lexsort((end[kept], start[kept], np.array([rank[c] for c in contig[kept]], dtype=np.int64)))]
    names = [_sed(name) for name, _ in listed]
    header = "#" + "\t".join(["Chr", "Start", "End"] + names)
    m = DepthMatrix(header, names, contig, start, end, values, text)
    return m.take(order)


__all__ = ["bincov_list", "make_matrix"]
