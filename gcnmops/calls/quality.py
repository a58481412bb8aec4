"""The statistics of calls that the call files (``gcnmops.outputs.callfiles``) and the plots show: each CNV's
direction and the phred quality of a sample's state over a set of windows, with the index of a result's windows
by chromosome that finds a call's windows.

Normal class: ``params["mainClass"]`` (CN2; haplocn.mops CN1). A CNV's direction: loss/gain by its integer
copy number against the normal class when known, else by the sign of its segment statistic (the mean, or the
median with ``useMedian``, of sINI).

Quality Q (phred, integer 0-99) of a sample's state over a set of windows (a CNV, or a CNV region): Q =
min(99, round(-10 log10(1 - p))), p the probability of the stated copy number:

- with posteriors (``return_posterior=True``): the mean over the windows of the posterior probability of the
  stated class (a non-normal state of unknown copy number: 1 - the posterior of the normal class; a normal
  state: the posterior of the normal class);
- otherwise a proxy from sINI (the posterior-weighted log2 fold change the model gives every window): with s
  the sample's mean sINI over the windows and e = log2(I_c / I_normal) of the stated class c (unknown copy
  number: the nearest class on the call's side), p = clip(s / e, 0, 1) for a non-normal state and
  1 - clip(|s| / |e'|, 0, 1) for the normal state (e' the nearest class on the side of s): the posterior mass
  on c were it shared between c and the normal class only.
"""
from __future__ import annotations

import re
import threading

import numpy as np
import pandas as pd

from ..data import chromosome_blocks

_CN_LABEL = re.compile(r"^CN(\d+(?:\.\d*)?)$")
MAX_Q = 99
_DEFAULT_STEP = {-1: -1.0, 1: float(np.log2(1.5))}  # nearest classes' log2 folds when params lack folds


# -------------------------------------------------------------------------------------------------
# a result's windows by chromosome, CNVs per CNV region
# -------------------------------------------------------------------------------------------------

def _derived(result, name: str, build):
    """``result.derived(name, build)``, built by one thread at a time: the call files are made on several threads
    at once, and each would otherwise build the same index (Python work, serialized by the GIL)."""
    with _BUILDING:
        return result.derived(name, build)


_BUILDING = threading.RLock()


def window_index(result) -> "_Windows":
    """The windows of ``result.gr`` by chromosome (``_Windows``), built once per result."""
    return _derived(result, "quality.windows", lambda: _Windows(result.gr))


def cnv_region_pairs(cnvr: pd.DataFrame, cnvs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(region, cnv) index pairs of every CNV region and CNV that overlap (same chromosome)."""
    regions, cnv_idx = [], []
    r_chrom = cnvr["seqnames"].astype(str).to_numpy()
    c_chrom = cnvs["seqnames"].astype(str).to_numpy()
    r_start, r_end = cnvr["start"].to_numpy(np.int64), cnvr["end"].to_numpy(np.int64)
    c_start, c_end = cnvs["start"].to_numpy(np.int64), cnvs["end"].to_numpy(np.int64)
    for name in pd.unique(r_chrom):
        ri = np.flatnonzero(r_chrom == name)
        ci = np.flatnonzero(c_chrom == name)
        if ci.size == 0:
            continue
        ri = ri[np.argsort(r_start[ri], kind="stable")]
        starts, ends = r_start[ri], np.maximum.accumulate(r_end[ri])
        # regions [lo, hi) that may overlap each CNV: start <= cnv end, running max end >= cnv start
        lo = np.searchsorted(ends, c_start[ci], side="left")
        hi = np.searchsorted(starts, c_end[ci], side="right")
        n = np.maximum(hi - lo, 0)
        if n.sum() == 0:
            continue
        cand_c = np.repeat(ci, n)
        cand_r = ri[np.repeat(lo, n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))]
        hit = (r_start[cand_r] <= c_end[cand_c]) & (r_end[cand_r] >= c_start[cand_c])
        regions.append(cand_r[hit])
        cnv_idx.append(cand_c[hit])
    if not regions:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(regions), np.concatenate(cnv_idx)


class _Chrom:
    """One chromosome's windows by start: ``rows`` (None: the rows ``first``, ``first`` + 1, ... in order),
    their ``starts``, ``reach`` (the running maximum of their ends) and ``sorted_ends`` (the ends in
    increasing order; None until first asked for)."""

    __slots__ = ("rows", "first", "starts", "reach", "sorted_ends")

    def __init__(self, rows: np.ndarray | None, first: int, starts: np.ndarray, reach: np.ndarray,
                 sorted_ends: np.ndarray | None):
        self.rows, self.first, self.starts, self.reach, self.sorted_ends = rows, first, starts, reach, sorted_ends

    def take(self, lo: int, hi: int) -> np.ndarray:
        """The rows at positions [lo, hi) of the start order."""
        return self.rows[lo:hi] if self.rows is not None else np.arange(self.first + lo, self.first + max(lo, hi))


def _drop_within(drops: np.ndarray, first: int, stop: int) -> bool:
    """True when a row of (first, stop) is in ``drops`` (sorted row numbers)."""
    return bool(np.searchsorted(drops, first, side="right") < np.searchsorted(drops, stop, side="left"))


class _Windows:
    """The windows (rows of ``gr``) of each chromosome (order of first appearance), by start, to find those
    overlapping a range; built once per result (``window_index``). A chromosome whose rows are one block with
    starts in order (any genome's windows) is kept as views of ``start``/``end``; others as sorted copies."""

    def __init__(self, gr: pd.DataFrame):
        self.start = gr["start"].to_numpy(np.int64)
        self.end = gr["end"].to_numpy(np.int64)
        spans: dict[str, list[tuple[int, int]]] = {}
        for name, first, stop in chromosome_blocks(gr["seqnames"]):
            spans.setdefault(str(name), []).append((first, stop))
        # the rows whose start / end is below the previous row's (none within a chromosome of ordered windows)
        start_drops = np.flatnonzero(self.start[1:] < self.start[:-1]) + 1
        end_drops = np.flatnonzero(self.end[1:] < self.end[:-1]) + 1
        self.by_chrom: dict[str, _Chrom] = {}
        for name, parts in spans.items():
            (first, stop) = parts[0]
            if len(parts) == 1 and not _drop_within(start_drops, first, stop):
                starts, ends = self.start[first:stop], self.end[first:stop]
                if _drop_within(end_drops, first, stop):
                    self.by_chrom[name] = _Chrom(None, first, starts, np.maximum.accumulate(ends), None)
                else:
                    self.by_chrom[name] = _Chrom(None, first, starts, ends, ends)
                continue
            rows = np.concatenate([np.arange(a, b) for a, b in parts])
            rows = rows[np.argsort(self.start[rows], kind="stable")]
            self.by_chrom[name] = _Chrom(rows, 0, self.start[rows], np.maximum.accumulate(self.end[rows]), None)

    def overlap_counts(self, chrom: str, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """How many windows of ``chrom`` overlap each range [start, end] (any windows, nested or not)."""
        entry = self.by_chrom.get(str(chrom))
        if entry is None:
            return np.zeros(len(start), np.int64)
        if entry.sorted_ends is None:
            entry.sorted_ends = np.sort(self.end[entry.take(0, len(entry.starts))])
        # windows overlapping [s, e]: start <= e, minus those ending before s (which all start before e)
        return (np.searchsorted(entry.starts, end, side="right")
                - np.searchsorted(entry.sorted_ends, start, side="left"))

    def rows(self, chrom: str, start: int, end: int) -> np.ndarray:
        """Rows of the windows overlapping [start, end], by start."""
        entry = self.by_chrom.get(str(chrom))
        if entry is None:
            return np.zeros(0, np.int64)
        cand = entry.take(int(np.searchsorted(entry.reach, start, side="left")),
                          int(np.searchsorted(entry.starts, end, side="right")))
        return cand[(self.end[cand] >= start) & (self.start[cand] <= end)]

    def width(self, row: int) -> int:
        return int(self.end[row] - self.start[row] + 1)

    def lengths(self) -> dict[str, int]:
        """Each chromosome's last window end (its known length)."""
        return {name: int(entry.reach[-1]) for name, entry in self.by_chrom.items()}


# -------------------------------------------------------------------------------------------------
# copy numbers, directions, qualities
# -------------------------------------------------------------------------------------------------

def cn_value(label) -> float | None:
    """The copy number of a label ``CN<number>`` (``CN2`` -> 2.0, ``CN1.5`` -> 1.5); None for anything else."""
    if label is None or (isinstance(label, float) and np.isnan(label)):
        return None
    m = _CN_LABEL.match(str(label))
    return float(m.group(1)) if m else None


def main_cn(result) -> float | None:
    """The copy number of the normal class (``params["mainClass"]``), or None."""
    return cn_value(result.params.get("mainClass"))


def direction(cn: float | None, stat: float, main: float | None) -> str | None:
    """"loss"/"gain" from the copy number when known and not normal, else from the sign of the statistic;
    None for a normal copy number (or no evidence)."""
    if cn is not None and main is not None:
        return None if cn == main else ("loss" if cn < main else "gain")
    if np.isfinite(stat) and stat != 0:
        return "loss" if stat < 0 else "gain"
    return None


def cnv_directions(result, cnvs: pd.DataFrame | None = None) -> np.ndarray:
    """(len(cnvs),) int8 direction of each CNV (default ``result.cnvs``): -1 loss, +1 gain, 0 for a call whose
    integer copy number is the normal class (grey in the BEDs and plots); by the sign of its statistic (mean,
    median with useMedian) before integer copy numbers."""
    cnvs = result.cnvs if cnvs is None else cnvs
    main = main_cn(result)
    stat = cnvs["median" if result.params.get("useMedian", False) else "mean"].to_numpy(float)
    sign = {"loss": -1, "gain": 1, None: 0}
    return np.array([sign[direction(cn_value(lab), float(v), main)] for lab, v in
                     zip(cnvs["CN"].to_numpy(dtype=object), stat)], dtype=np.int8)


def _phred(p_right: np.ndarray) -> np.ndarray:
    """min(99, round(-10 log10(1 - p))) elementwise (p NaN: 0)."""
    wrong = np.clip(1.0 - np.nan_to_num(np.asarray(p_right, float), nan=0.0), 1e-10, 1.0)
    return np.minimum(MAX_Q, np.rint(-10.0 * np.log10(wrong))).astype(np.int64)


class Evidence:
    """The qualities Q of the module docstring, per sample, over a set of windows."""

    def __init__(self, result):
        p = result.params
        self.classes = [str(c) for c in p.get("classes", [])]
        folds = np.asarray(p.get("folds", []), dtype=np.float64)
        main = str(p.get("mainClass"))
        self.main_idx = self.classes.index(main) if main in self.classes else -1
        self.class_idx = {c: i for i, c in enumerate(self.classes)}
        if self.main_idx >= 0 and folds.size == len(self.classes):
            self.log2fold = np.log2(np.maximum(folds, 1e-300)) - np.log2(folds[self.main_idx])
        else:
            self.log2fold = np.full(len(self.classes), np.nan)
        below = self.log2fold[self.log2fold < 0]
        above = self.log2fold[self.log2fold > 0]
        self.step = {-1: float(below.max()) if below.size else _DEFAULT_STEP[-1],
                     1: float(above.min()) if above.size else _DEFAULT_STEP[1]}
        self.sini = np.asarray(result.local_assessments, dtype=np.float64)
        post = result.posterior_probs
        self.post = None if post is None or self.main_idx < 0 else np.asarray(post, dtype=np.float64)

    def qualities(self, row_sets: list, cols: np.ndarray, cls: np.ndarray, sign: np.ndarray) -> np.ndarray:
        """(n, k) Q of n items: item i's samples ``cols[i]`` over its windows ``row_sets[i]`` (Q 0 without
        windows); ``sign`` -1/+1 non-normal (of class index ``cls``, -1 unknown), 0 normal; ``cols``, ``cls``,
        ``sign`` (n, k). The means over an item's windows are taken item by item, the rest for all at once
        (elementwise: the same values as item by item)."""
        cols, cls, sign = np.asarray(cols), np.asarray(cls), np.asarray(sign)
        q = np.zeros(cls.shape, np.int64)
        full = [i for i, rows in enumerate(row_sets) if rows.size]
        if not full or cls.shape[1] == 0:
            return q
        cls_f, sign_f = cls[full], sign[full]
        if self.post is not None:
            at = np.arange(cls.shape[1])
            means = [self.post[row_sets[i]][:, :, cols[i]].mean(axis=0) for i in full]  # (classes, samples) each
            p_main = np.array([pm[self.main_idx, at] for pm in means])
            p_cls = np.array([pm[np.maximum(c, 0), at] for pm, c in zip(means, cls_f)])
            q[full] = _phred(np.where(sign_f == 0, p_main, np.where(cls_f >= 0, p_cls, 1.0 - p_main)))
            return q
        s = np.array([self._mean_sini(row_sets[i], cols[i]) for i in full])
        e_cls = np.where(cls_f >= 0, self.log2fold[np.maximum(cls_f, 0)] if self.log2fold.size else np.nan, np.nan)
        e_alt = np.where(np.isfinite(e_cls) & (e_cls != 0), e_cls,
                         np.where(sign_f < 0, self.step[-1], self.step[1]))
        e_ref = np.where(s < 0, self.step[-1], self.step[1])
        with np.errstate(divide="ignore", invalid="ignore"):
            p_alt = np.clip(s / e_alt, 0.0, 1.0)
            p_ref = 1.0 - np.clip(np.abs(s) / np.abs(e_ref), 0.0, 1.0)
        q[full] = _phred(np.where(sign_f == 0, p_ref, p_alt))
        return q

    def _mean_sini(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """(k,) mean sINI of samples ``cols`` over windows ``rows`` (finite values; 0 where none)."""
        x = self.sini[rows][:, cols]
        finite = np.isfinite(x)
        return np.where(finite, x, 0.0).sum(axis=0) / np.maximum(finite.sum(axis=0), 1)


def _cnv_qualities(result, cnvs: pd.DataFrame, windows: _Windows, evidence: Evidence) -> tuple[np.ndarray, list]:
    """(Q, direction) of each CNV of ``cnvs`` (its own windows and sample)."""
    main = main_cn(result)
    stat = "median" if result.params.get("useMedian", False) else "mean"
    sample_col = pd.Index(result.sample_names).get_indexer(cnvs["sampleName"].to_numpy())
    q = np.zeros(len(cnvs), np.int64)
    directions, items = [], []  # items: (CNV, its windows, sample column, class, sign)
    for i, (chrom, s, e, label, v, col) in enumerate(zip(cnvs["seqnames"], cnvs["start"], cnvs["end"], cnvs["CN"],
                                                         cnvs[stat].to_numpy(float), sample_col)):
        cn = cn_value(label)
        d = direction(cn, float(v), main)
        directions.append(d)
        # the CNV's own call: its direction, else (normal integer copy number) the sign of its statistic
        sign = {"loss": -1, "gain": 1}.get(d or direction(None, float(v), None), 0)
        cls = evidence.class_idx.get(str(label), -1) if d is not None else -1
        if col >= 0:
            items.append((i, windows.rows(chrom, int(s), int(e)), col, cls, sign))
    if items:
        at, row_sets, cols, classes, signs = zip(*items)
        q[list(at)] = evidence.qualities(list(row_sets), np.array(cols, np.int64)[:, None],
                                         np.array(classes, np.int64)[:, None], np.array(signs, np.int64)[:, None])[:, 0]
    return q, directions


def call_qualities(result) -> tuple[np.ndarray, list]:
    """``_cnv_qualities`` of ``result.cnvs`` (in its order), computed once per result (both BEDs use them)."""
    cnvs = result.cnvs
    # keyed by the frame, which the value holds: another frame cannot take its id while it is cached
    return _derived(result, f"quality.cnv_qualities.{id(cnvs)}",
                    lambda: (cnvs, *_cnv_qualities(result, cnvs, window_index(result), Evidence(result))))[1:]
