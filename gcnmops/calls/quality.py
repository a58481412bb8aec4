"""The statistics of calls that the call files (``gcnmops.outputs.callfiles``) and the plots show: each CNV's
direction and the phred quality of a sample's state over a set of windows, with the index of a result's windows
by chromosome that finds a call's windows.

Normal class: ``params["mainClass"]`` (CN2; haplocn.mops CN1). A CNV's direction: loss/gain by its integer
copy number against the normal class when known, else by the sign of its segment statistic (the mean, or the
median with ``useMedian``, of sINI).

Qualities (phred, 0-99 with one decimal) come from the model cn.mops fitted (``docs/qualities.md`` has the derivation).
Per window w of a set W (a CNV's windows, or a CNV region's), sample k and class i, the model's expected count
is mu = cov_k L[w, i] (``params["L"]``: lambda of each class, ``params["cov"]``), and the sample's normalized
count x (what the model saw) has the Poisson log-likelihood x log(mu) - mu. Summed over W and divided by the
sample's dispersion phi_k (``dispersion``: real counts vary more than Poisson counts; phi >= 1: the median of its
squared Pearson residuals over every window of the genome, read from counts of them on a fixed grid), it is the
log-likelihood of "the sample is of class i over all of W". With the prior pi_i = the model's mean mixture
weight of class i over W (``params["A"]``), at least 1/N (N samples: the sample itself could be of any class),
renormalized, the posterior of class i is P(i) = pi_i exp(l_i / phi_k) / sum_j pi_j exp(l_j / phi_k).

- call quality (QUAL, the BED score, ``--min-quality``) of a loss (gain): -10 log10 P(no loss (gain)), the
  posterior of the normal class and the classes on the other side: the chance the CNV is not there;
- genotype quality (CNQ) of a state of class c: -10 log10 (1 - P(c)) (a non-normal state of unknown copy
  number: its call quality);
- of a normal state both are -10 log10 (1 - P(normal)).

The model's phred score r = -10 log10(error) treats windows as independent Poisson draws around the fitted
lambdas; real counts vary together along the genome, and segmentation picks a call's windows from the data, so
r overstates the evidence (false calls on real counts have r of tens to thousands). The quality is r calibrated
against the observed false-call rate of spike-ins into real counts (``benchmarks/spikein.py``), with the call's
locus dispersion D (``locus_dispersion``: how much the *other* samples' counts of its windows vary around the
normal class, against the sample's own dispersion; at least 1): Q = min(``MAX_Q``, -10 log10
``calibrated_error(r, D)``) to ``Q_DECIMALS`` decimals with the constants ``CALIBRATION``, the same map for
both kinds; sets without windows get 0. Every path computes them the same way, bit for bit: where a block of whole
chromosomes has its matrices (``pipeline.stages.finish_block``), ``block_evidence`` sums each call's
log-likelihoods, mixture weights and locus medians and counts the residuals (``CallEvidence``, held by the
block's result); the blocks' evidence is joined (``CallEvidence.join``: counts added, calls appended), and the
dispersion, posteriors and calibration are applied when the call files are written (``Evidence``). More windows,
or counts further from the normal class towards the stated one, give a higher quality (r grows with both, the map
is increasing in r); a sample's own counts never change its D.
"""
from __future__ import annotations

import re
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..data import chromosome_blocks
from .posteriors import log_errors
from .setsums import RowSets
from .dispersion import (ResidualCounts, dispersion, locus_dispersion, locus_medians, residual_counts,
                         set_locus_sums)

_CN_LABEL = re.compile(r"^CN(\d+(?:\.\d*)?)$")
MAX_Q = 99


class Calibration(NamedTuple):
    """The constants of the map from the model's phred score r and the locus dispersion D of a call to the error
    its quality states (``calibrated_error``): with r' = r / D, a noise term 10^(-(q0 + scale r'^power) / 10)
    plus a systematic term 10^(-tail_q / 10) D^locus_power / (1 + r' / tail_r)."""

    q0: float
    scale: float
    power: float
    tail_q: float
    tail_r: float
    locus_power: float = 0.0


#: the calibration of the model's phred scores r (and the calls' locus dispersion D) into qualities, fitted on
#: spike-in replicates 1-400 (``benchmarks/accuracy.py spikein --fit``; docs/qualities.md)
CALIBRATION = Calibration(q0=2.952, scale=0.002984, power=2.342, tail_q=13.38, tail_r=1.377, locus_power=0.3477)
#: qualities are written with this many decimals (VCF QUAL is a float; the BED score is 10 x Q)
Q_DECIMALS = 1


# -------------------------------------------------------------------------------------------------
# a result's windows by chromosome, CNVs per CNV region
# -------------------------------------------------------------------------------------------------

def _derived(result, name: str, build):
    """``result.derived(name, build)``, each value built by one thread at a time: the call files are made on
    several threads at once, and each would otherwise build the same index (Python work, serialized by the GIL).
    One lock per result and value: a value being built (the calls' evidence) holds up no other."""
    with _LOCKS:
        lock = result.__dict__.setdefault("_derived_locks", {}).setdefault(name, threading.RLock())
    with lock:
        return result.derived(name, build)


_LOCKS = threading.Lock()


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

    def _kept(self, chrom, start, end):
        """Per chromosome of the ranges [start[i], end[i]] on ``chrom[i]``: (the ranges' indices, the rows of the
        windows overlapping each, concatenated in the ranges' order and by start within one, how many each has),
        found with one search per chromosome."""
        chrom = pd.Series(np.asarray(chrom, dtype=object)).astype(str).to_numpy()
        start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
        for name in pd.unique(chrom):
            entry = self.by_chrom.get(name)
            if entry is None:
                continue
            idx = np.flatnonzero(chrom == name)
            lo = np.searchsorted(entry.reach, start[idx], side="left")
            n = np.maximum(np.searchsorted(entry.starts, end[idx], side="right") - lo, 0)
            pos = np.repeat(lo - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))  # positions in start order
            cand = entry.first + pos if entry.rows is None else entry.rows[pos]
            keep = (self.end[cand] >= np.repeat(start[idx], n)) & (self.start[cand] <= np.repeat(end[idx], n))
            yield idx, cand[keep], np.bincount(np.repeat(np.arange(idx.size), n)[keep], minlength=idx.size)

    def row_sets(self, chrom, start, end) -> list[np.ndarray]:
        """``rows(chrom[i], start[i], end[i])`` of every range i, in their order (each the same int64 array as
        ``rows``'s), found with one search per chromosome instead of one per range."""
        return self.flat_row_sets(chrom, start, end).split()

    def flat_row_sets(self, chrom, start, end) -> RowSets:
        """``row_sets`` as one RowSets (set i the rows of range i)."""
        parts = list(self._kept(chrom, start, end))
        sizes = np.zeros(len(start), np.int64)
        for idx, _, kept in parts:
            sizes[idx] = kept
        ptr = np.zeros(sizes.size + 1, np.int64)
        np.cumsum(sizes, out=ptr[1:])
        rows = np.empty(int(ptr[-1]), np.int64)
        for idx, kept_rows, kept in parts:  # each chromosome's sets to their places
            local = np.cumsum(kept) - kept
            rows[np.repeat(ptr[idx] - local, kept) + np.arange(kept_rows.size)] = kept_rows
        return RowSets(rows, ptr)

    def edge_rows(self, chrom, start, end) -> tuple[np.ndarray, np.ndarray]:
        """(first, last) int64: the first and the last row of ``row_sets``' set of each range (-1 for none)."""
        first, last = np.full(len(start), -1, np.int64), np.full(len(start), -1, np.int64)
        for idx, rows, kept in self._kept(chrom, start, end):
            has = kept > 0
            stop = np.cumsum(kept)
            first[idx[has]] = rows[(stop - kept)[has]]
            last[idx[has]] = rows[stop[has] - 1]
        return first, last

    def widths(self, rows: np.ndarray) -> np.ndarray:
        """int64 widths (bp) of the windows ``rows``; 0 for row -1."""
        rows = np.asarray(rows, np.int64)
        safe = np.maximum(rows, 0)
        return np.where(rows >= 0, self.end[safe] - self.start[safe] + 1, 0) if len(self.end) else np.zeros_like(rows)

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


class Qualities(NamedTuple):
    """Call and genotype qualities (the module docstring), each (n, k) float64."""

    call: np.ndarray
    genotype: np.ndarray


#: cells (windows x samples) of locus medians that the evidence of a block's calls makes once for both kinds of
#: call (``_Model.shared_medians``): 256 MB
SHARED_MEDIAN_CELLS = 1 << 25


class _Model:
    """The fitted model of a block of windows (a result's params and normalized data), to sum each class's
    Poisson log-likelihood over sets of windows and average its mixture weights (``set_sums``, ``over``). Every
    sum is over a fresh C-ordered array of the set's windows only: the same set gives the same bits in any block
    holding it (one chromosome, or the whole genome)."""

    def __init__(self, params: dict, normalized: np.ndarray):
        self.classes = [str(c) for c in params.get("classes", [])]
        main = str(params.get("mainClass"))
        self.main_idx = self.classes.index(main) if main in self.classes else -1
        self.x = normalized
        m, N = normalized.shape
        n = len(self.classes)
        self.lam_all = np.asarray(params["L"], dtype=np.float64).reshape(m, n)
        self.alpha_all = np.asarray(params["A"], dtype=np.float64).reshape(m, n)
        cov = np.asarray(params.get("cov", np.ones(N)), dtype=np.float64).reshape(-1)
        self.cov = cov if cov.size == N else np.ones(N)
        with np.errstate(divide="ignore"):
            self.log_cov = np.log(self.cov)
        # a window is evidence where every class has a positive lambda; a cell where its count is finite
        from .setsums import usable_windows

        self.usable = usable_windows(self.lam_all)

    def _rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``setsums.model_rows`` of the windows ``rows``: (lambda, log lambda, alpha), each (len(rows), classes)."""
        from .setsums import model_rows

        return model_rows(self.lam_all, self.alpha_all, self.usable, rows)

    def _normal_lambda(self, rows=slice(None)) -> np.ndarray:
        """(k,) the normal class's lambda of the windows ``rows`` (default all), 0 where a window is no evidence."""
        return np.where(self.usable[rows], self.lam_all[rows, self.main_idx], 0.0)

    def residual_counts(self) -> ResidualCounts:
        """``residual_counts`` of the block against the normal class's expected counts cov L[:, normal]."""
        if self.main_idx < 0:
            return ResidualCounts(self.x.shape[1], np.zeros(0, np.int64), np.zeros(0, np.int64))
        # windows without evidence have lambda 0 here: left out
        return residual_counts(self.x, self._normal_lambda()[:, None], self.cov)

    def set_sums(self, sets: list[np.ndarray], set_of: np.ndarray, col_of: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
        """(logliks (items, classes), priors (sets, classes)): each class's Poisson log-likelihood (no dispersion)
        of item j, sample ``col_of[j]`` summed over the windows ``sets[set_of[j]]`` (``setsums.set_logliks``), and
        the mean mixture weight of each class over each set of windows (``setsums.set_means``); the windows' model
        arrays made once for both."""
        from .setsums import flat_sets, set_logliks, set_means

        rows, ptr, union, pos = flat_sets(sets)
        lam, log_lam, alpha = self._rows(union)
        return (set_logliks(self.x, self.usable, lam, log_lam, self.cov, self.log_cov, rows, pos, ptr, set_of,
                            col_of), set_means(alpha, pos, ptr))

    def over(self, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(loglik (classes, k), prior (classes,)): each class's Poisson log-likelihood of the samples ``cols``
        summed over windows ``rows`` (no dispersion), and its mean mixture weight over them."""
        cols = np.asarray(cols, np.int64)
        logliks, priors = self.set_sums([np.asarray(rows, np.int64)], np.zeros(cols.size, np.int64), cols)
        return logliks.T, priors[0]

    def locus_medians(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), N) ``locus_medians`` of the windows ``rows`` against the normal class."""
        rows = np.asarray(rows, np.int64)
        if self.main_idx < 0:
            return np.full((rows.size, self.x.shape[1]), np.nan)
        return locus_medians(self.x[rows], self._normal_lambda(rows)[:, None] * self.cov[None, :])

    def shared_medians(self, rows: np.ndarray):
        """``locus_medians`` for any windows among ``rows``, made once for all of them where they hold at most
        SHARED_MEDIAN_CELLS cells (else ``locus_medians`` itself): each window's medians are its own, whichever
        windows are asked with it."""
        union = np.unique(np.asarray(rows, np.int64))
        if union.size * max(self.x.shape[1], 1) > SHARED_MEDIAN_CELLS:
            return self.locus_medians
        made = self.locus_medians(union)
        return lambda asked: made[np.searchsorted(union, asked)]

    def locus_sums(self, sets: list[np.ndarray], cols: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """``set_locus_sums`` of the sets of windows ``sets`` (the sample ``cols[i]`` of set i; None: every
        sample)."""
        return set_locus_sums(self.locus_medians, sets, cols, self.x.shape[1])


def _picked(held: np.ndarray, at: np.ndarray, col: np.ndarray) -> np.ndarray:
    """``held[at][:, :, col]`` of an (items, x, samples) array, copied once (not at all where ``at`` and ``col``
    take every item and sample in order)."""
    every = np.arange(held.shape[2])
    if col.size == every.size and np.array_equal(col, every):
        return held if np.array_equal(at, np.arange(held.shape[0])) else held[at]
    return held[at][:, :, col]


def _cnv_keys(cnvs: pd.DataFrame) -> pd.MultiIndex:
    return pd.MultiIndex.from_arrays([cnvs["seqnames"].astype(str).to_numpy(), cnvs["start"].to_numpy(np.int64),
                                      cnvs["end"].to_numpy(np.int64), cnvs["sampleName"].astype(str).to_numpy()])


def _region_keys(cnvr: pd.DataFrame) -> pd.MultiIndex:
    return pd.MultiIndex.from_arrays([cnvr["seqnames"].astype(str).to_numpy(), cnvr["start"].to_numpy(np.int64),
                                      cnvr["end"].to_numpy(np.int64)])


@dataclass(frozen=True)
class CallEvidence:
    """What the qualities need of the model, gathered per block of whole chromosomes where its matrices are at
    hand (``block_evidence``) and joined over blocks (``join``), before the dispersion is known: the residuals'
    counts of each sample, and per call (CNV: its windows and sample; CNV region: its windows, every sample) the
    raw log-likelihood of each class and the mean mixture weights.

    ``samples`` (N,): the samples of ``residuals`` (``ResidualCounts``) and the columns of ``region_loglik``;
    ``cnv_keys`` (seqnames, start, end, sampleName) with ``cnv_windows`` (n,), ``cnv_loglik`` (n, classes),
    ``cnv_prior`` (n, classes); ``region_keys`` (seqnames, start, end) with ``region_windows`` (r,),
    ``region_loglik`` (r, classes, N), ``region_prior`` (r, classes); ``cnv_locus`` (n, 2) and ``region_locus``
    (r, 2, N): the sum and count of the windows' ``locus_medians`` (the locus dispersion's)."""

    samples: tuple
    residuals: ResidualCounts | None
    cnv_keys: pd.MultiIndex
    cnv_windows: np.ndarray
    cnv_loglik: np.ndarray
    cnv_prior: np.ndarray
    region_keys: pd.MultiIndex
    region_windows: np.ndarray
    region_loglik: np.ndarray
    region_prior: np.ndarray
    cnv_locus: np.ndarray | None = None
    region_locus: np.ndarray | None = None

    @classmethod
    def join(cls, parts: list["CallEvidence | None"]) -> "CallEvidence | None":
        """The evidence of several blocks (the same samples, disjoint windows): counts added (None where a block's
        are), calls appended; None where a block has none."""
        if not parts or any(p is None for p in parts):
            return None
        first = parts[0]

        def keys(name):
            values = [getattr(p, name) for p in parts]
            return values[0].append(values[1:]) if len(values) > 1 else values[0]

        residuals = None if any(p.residuals is None for p in parts) else \
            sum((p.residuals for p in parts[1:]), first.residuals)

        def locus(name):
            values = [getattr(p, name) for p in parts]
            return None if any(v is None for v in values) else np.concatenate(values)

        return cls(first.samples, residuals, keys("cnv_keys"),
                   *(np.concatenate([getattr(p, f) for p in parts]) for f in ("cnv_windows", "cnv_loglik",
                                                                               "cnv_prior")),
                   keys("region_keys"),
                   *(np.concatenate([getattr(p, f) for p in parts]) for f in ("region_windows", "region_loglik",
                                                                               "region_prior")),
                   locus("cnv_locus"), locus("region_locus"))


def model_residuals(params: dict, normalized: np.ndarray) -> ResidualCounts:
    """The residual counts of a block's model (``params``: classes, mainClass, cov, L; normalized data (m, N))
    against its normal class: what ``block_evidence`` holds, made without the calls (beside the segmentation)."""
    return _Model(params, normalized).residual_counts()


def block_evidence(params: dict, normalized: np.ndarray, gr: pd.DataFrame, sample_names: list[str],
                   cnvs: pd.DataFrame, cnvr: pd.DataFrame, residuals: ResidualCounts | None = None) -> CallEvidence:
    """The CallEvidence of a block of whole chromosomes: its regions ``gr``, normalized data (m, N), ``params``
    (classes, mainClass, cov, L and A of its regions) and its calls ``cnvs`` / ``cnvr``; ``residuals``: its
    ``model_residuals`` where they were made already."""
    model = _Model(params, normalized)
    windows = _Windows(gr)
    names = [str(s) for s in sample_names]
    n = len(model.classes)
    sample_col = pd.Index(names).get_indexer(cnvs["sampleName"].astype(str).to_numpy())
    cnv_sets = windows.flat_row_sets(cnvs["seqnames"], cnvs["start"], cnvs["end"])
    region_sets = windows.flat_row_sets(cnvr["seqnames"], cnvr["start"], cnvr["end"])
    N = len(names)
    cnv_items = np.flatnonzero((sample_col >= 0) & (cnv_sets.sizes > 0))
    regions = np.arange(len(region_sets), dtype=np.int64)
    set_of = np.concatenate([cnv_items, len(cnv_sets) + np.repeat(regions, N)]).astype(np.int64)
    col_of = np.concatenate([sample_col[cnv_items], np.tile(np.arange(N, dtype=np.int64), len(regions))])
    sums, priors = model.set_sums(cnv_sets.join(region_sets), set_of, col_of)
    cnv_loglik = np.zeros((len(cnvs), n))
    cnv_loglik[cnv_items] = sums[:cnv_items.size]
    region_loglik = np.ascontiguousarray(sums[cnv_items.size:].reshape(len(regions), N, n).transpose(0, 2, 1))
    medians = model.shared_medians(np.concatenate([cnv_sets.rows, region_sets.rows]))
    cnv_locus = np.zeros((len(cnvs), 2))
    cnv_locus[cnv_items] = np.stack(set_locus_sums(medians, cnv_sets.take(cnv_items), sample_col[cnv_items], N),
                                    axis=1)
    region_locus = (np.stack(set_locus_sums(medians, region_sets, None, N), axis=1) if len(region_sets)
                    else np.zeros((0, 2, N)))
    return CallEvidence(
        tuple(names), model.residual_counts() if residuals is None else residuals, _cnv_keys(cnvs),
        cnv_sets.sizes, cnv_loglik, priors[:len(cnv_sets)].reshape(len(cnvs), n),
        _region_keys(cnvr), region_sets.sizes, region_loglik,
        priors[len(cnv_sets):].reshape(len(cnvr), n), cnv_locus, region_locus)


def has_matrices(result) -> bool:
    """True when ``result`` holds its normalized data and L, A of every region in this process."""
    x = getattr(result, "normalized_data", None)
    lam = result.params.get("L")
    return (isinstance(x, np.ndarray) and x.ndim == 2 and x.shape[0] == len(result.gr) and x.shape[0] > 0
            and isinstance(lam, np.ndarray) and lam.shape[0] == len(result.gr))


def call_evidence(result, residuals: ResidualCounts | None = None) -> CallEvidence | None:
    """The result's CallEvidence: the one its blocks gathered (``result.call_evidence``), else made from its
    matrices (once per result; ``residuals``: its ``model_residuals`` made already); None where it has
    neither."""
    held = getattr(result, "call_evidence", None)
    if isinstance(held, Future):  # being made beside the writers (``pipeline.run.run_and_write``)
        held = held.result()
    if held is not None:
        return held
    if not has_matrices(result):
        return None
    return _derived(result, "quality.call_evidence",
                    lambda: block_evidence(result.params, result.normalized_data, result.gr, result.sample_names,
                                           result.cnvs, result.cnvr, residuals))


class Evidence:
    """The model's evidence for a sample's state over a set of windows: the posteriors and qualities of the
    module docstring, from the result's CallEvidence (a set it does not hold: from the result's matrices, where
    it has them; else quality 0)."""

    def __init__(self, result):
        p = result.params
        self.classes = [str(c) for c in p.get("classes", [])]
        main = str(p.get("mainClass"))
        self.main_idx = self.classes.index(main) if main in self.classes else -1
        self.class_idx = {c: i for i, c in enumerate(self.classes)}
        folds = np.asarray(p.get("folds", []), dtype=np.float64)
        n = len(self.classes)
        # the side of each class against the normal one: -1 below, +1 above, 0 the normal class
        self.side = (np.sign(folds - folds[self.main_idx]).astype(np.int64) if self.main_idx >= 0 and folds.size == n
                     else np.zeros(n, np.int64))
        self.result = result
        self.held = call_evidence(result)
        self.samples = list(self.held.samples) if self.held is not None else [str(s) for s in result.sample_names]
        self.phi = dispersion(self.held.residuals) if self.held is not None else np.ones(len(self.samples))
        self._model = None

    def columns(self, names) -> np.ndarray:
        """The evidence's columns of the samples ``names``."""
        return pd.Index(self.samples).get_indexer([str(s) for s in names])

    def model(self) -> _Model | None:
        """The result's model over all its windows (sets the CallEvidence lacks), None without its matrices."""
        if self._model is None and has_matrices(self.result):
            self._model = _Model(self.result.params, self.result.normalized_data)
        return self._model

    def qualities(self, row_sets: list, cols: np.ndarray, cls: np.ndarray, sign: np.ndarray) -> Qualities:
        """Call and genotype Q of n items: item i's samples ``cols[i]`` (columns of the result) over its windows
        ``row_sets[i]`` (rows of the result, which must hold its matrices); see ``posterior_qualities``."""
        cols = np.asarray(cols)
        model = self.model()
        n, k, c = len(row_sets), cols.shape[1] if cols.ndim == 2 else 0, len(self.classes)
        loglik, prior = np.zeros((n, c, k)), np.zeros((n, c))
        locus = np.zeros((n, 2, k))
        windows = np.array([r.size for r in row_sets], np.int64)
        if model is None:
            windows[:] = 0
        else:
            for i, rows in enumerate(row_sets):
                if rows.size and k:
                    loglik[i], prior[i] = model.over(rows, cols[i])
                    sums, counts = model.locus_sums([rows], None)
                    locus[i] = np.stack([sums[0][cols[i]], counts[0][cols[i]]])
        names = np.asarray(self.result.sample_names, dtype=object)
        ev_cols = self.columns(names[cols.reshape(-1)]).reshape(cols.shape) if cols.size else cols
        return self.posterior_qualities(loglik, prior, windows, ev_cols, cls, sign,
                                        locus=self.locus(locus, ev_cols) if cols.size else None)

    def locus(self, sums_counts: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """(n, k) the locus dispersion D (``locus_dispersion``) of n items' samples ``cols`` (n, k) (evidence
        columns) from their sums and counts of locus medians ``sums_counts`` (n, 2, k)."""
        return locus_dispersion(sums_counts[:, 0], sums_counts[:, 1], self.phi[np.asarray(cols, np.int64)])

    def cnv_qualities(self, cnvs: pd.DataFrame, cls: np.ndarray, sign: np.ndarray, raw: bool = False) -> Qualities:
        """Call and genotype Q (n,) of each CNV of ``cnvs`` over its own windows and sample (class index ``cls``,
        sign ``sign`` as ``posterior_qualities``); ``raw``: the model's phred scores r (float) instead."""
        n, c = len(cnvs), len(self.classes)
        loglik, prior, windows = np.zeros((n, c, 1)), np.zeros((n, c)), np.zeros(n, np.int64)
        locus = np.zeros((n, 2, 1))
        at = (self.held.cnv_keys.get_indexer(_cnv_keys(cnvs)) if self.held is not None and n
              else np.full(n, -1))
        found = at >= 0
        if found.any():
            loglik[found, :, 0] = self.held.cnv_loglik[at[found]]
            prior[found], windows[found] = self.held.cnv_prior[at[found]], self.held.cnv_windows[at[found]]
            if self.held.cnv_locus is not None:
                locus[found, :, 0] = self.held.cnv_locus[at[found]]
        col = self.columns(cnvs["sampleName"].to_numpy())
        result_col = pd.Index([str(s) for s in self.result.sample_names]).get_indexer(
            cnvs["sampleName"].astype(str).to_numpy())
        missing = np.flatnonzero(~found & (result_col >= 0))  # calls the CallEvidence does not hold
        model = self.model() if missing.size else None
        if model is not None:
            ranges = (cnvs[c].to_numpy()[missing] for c in ("seqnames", "start", "end"))
            sets = window_index(self.result).row_sets(*ranges)
            for i, rows in zip(missing, sets):
                windows[i] = rows.size
                if rows.size:
                    ll, prior[i] = model.over(rows, result_col[[i]])
                    loglik[i, :, 0] = ll[:, 0]
                    locus[i, :, 0] = np.concatenate(model.locus_sums([rows], result_col[[i]]))
        cols = np.maximum(col, 0)[:, None]
        d = self.locus(locus, cols)
        q = self.posterior_qualities(loglik, prior, np.where(col >= 0, windows, 0), cols,
                                     np.asarray(cls)[:, None], np.asarray(sign)[:, None], raw=raw, locus=d)
        if raw:
            return Qualities(q.call[:, 0], d[:, 0])
        return Qualities(q.call[:, 0], q.genotype[:, 0])

    def region_qualities(self, cnvr: pd.DataFrame, names, cls: np.ndarray, sign: np.ndarray) -> Qualities:
        """Call and genotype Q (r, k) of the samples ``names`` over each CNV region of ``cnvr``'s windows
        (``cls``, ``sign`` (r, k) as ``posterior_qualities``)."""
        r, c, k = len(cnvr), len(self.classes), len(names)
        col = np.maximum(self.columns(names), 0)
        prior, windows = np.zeros((r, c)), np.zeros(r, np.int64)
        at = self.held.region_keys.get_indexer(_region_keys(cnvr)) if self.held is not None and r else np.full(r, -1)
        found = at >= 0
        if found.all() and self.held.region_locus is not None:  # the usual case: no zeros to fill in
            loglik, locus = _picked(self.held.region_loglik, at, col), _picked(self.held.region_locus, at, col)
        else:
            loglik, locus = np.zeros((r, c, k)), np.zeros((r, 2, k))
            if found.any():
                loglik[found] = _picked(self.held.region_loglik, at[found], col)
                if self.held.region_locus is not None:
                    locus[found] = _picked(self.held.region_locus, at[found], col)
        if found.any():
            prior[found], windows[found] = self.held.region_prior[at[found]], self.held.region_windows[at[found]]
        model = self.model() if (~found).any() else None
        if model is not None:
            result_col = pd.Index([str(s) for s in self.result.sample_names]).get_indexer([str(s) for s in names])
            lost = np.flatnonzero(~found)
            ranges = (cnvr[c].to_numpy()[lost] for c in ("seqnames", "start", "end"))
            sets = window_index(self.result).row_sets(*ranges)
            for i, rows in zip(lost, sets):
                windows[i] = rows.size
                if rows.size and k:
                    loglik[i], prior[i] = model.over(rows, result_col)
                    sums, counts = model.locus_sums([rows], None)
                    locus[i] = np.stack([sums[0][result_col], counts[0][result_col]])
        cols = np.broadcast_to(col, (r, k))
        return self.posterior_qualities(loglik, prior, windows, cols, cls, sign, locus=self.locus(locus, cols))

    def posterior_qualities(self, loglik: np.ndarray, prior: np.ndarray, windows: np.ndarray, cols: np.ndarray,
                            cls: np.ndarray, sign: np.ndarray, raw: bool = False,
                            locus: np.ndarray | None = None) -> Qualities:
        """Call and genotype Q (n, k) of n items from their raw log-likelihoods ``loglik`` (n, classes, k),
        mean mixture weights ``prior`` (n, classes) and window counts ``windows`` (n,) (Q 0 without windows):
        the samples' evidence columns ``cols`` (n, k) give the dispersion; ``sign`` (n, k) -1/+1 non-normal (of
        class index ``cls``, -1 unknown), 0 normal. ``raw``: the model's phred scores r (float64, before
        ``calibrate``) instead; ``locus`` (n, k): the items' locus dispersion D (None: 1)."""
        cls, sign, cols = np.asarray(cls, np.int64), np.asarray(sign, np.int64), np.asarray(cols, np.int64)
        call = np.zeros(cls.shape, np.float64)
        genotype = np.zeros(cls.shape, np.float64)
        if self.main_idx < 0 or cls.size == 0:
            return Qualities(call, genotype)
        floor = 1.0 / max(len(self.samples), 1)
        prior = np.maximum(prior, floor)
        with np.errstate(divide="ignore"):
            log_prior = np.log(prior / prior.sum(axis=1, keepdims=True))
        log_err_call, log_err_cls = log_errors(loglik, log_prior, self.phi[cols], sign, cls, self.side)
        has = (np.asarray(windows) > 0)[:, None]
        d = np.ones(cls.shape) if locus is None else np.broadcast_to(locus, cls.shape)

        def score(log_error):
            return model_phred(log_error) if raw else calibrate(model_phred(log_error), locus=d)

        call = np.where(has, score(log_err_call), 0.0)
        genotype = np.where(has, score(np.where((sign != 0) & (cls >= 0), log_err_cls, log_err_call)), 0.0)
        return Qualities(call, genotype)


def model_phred(log_error: np.ndarray) -> np.ndarray:
    """The model's phred score r = -10 log10(error) (float64, >= 0) of the natural log of its error
    probability."""
    return np.maximum(np.nan_to_num(-10.0 / np.log(10.0) * np.asarray(log_error, dtype=np.float64), nan=0.0,
                                    posinf=np.finfo(np.float64).max), 0.0)


def calibrated_error(r: np.ndarray, constants: Calibration = CALIBRATION, locus: np.ndarray | None = None
                     ) -> np.ndarray:
    """The chance that a call of model phred score r and locus dispersion D (``locus``, >= 1; None: 1) is false
    (float64, decreasing in r, increasing in D): with r' = r / D (the model's score with the locus's own
    dispersion where it exceeds the sample's), the noise term, false calls the counts' noise makes, whose chance
    falls fast with the evidence, plus the systematic term, false calls of windows where the model misreads real
    counts (artefact-prone windows, unstable fits), D^locus_power more likely where the other samples' counts
    vary more than the model allows, whose chance falls only as 1/r' (``Calibration``)."""
    r = np.maximum(np.nan_to_num(np.asarray(r, dtype=np.float64), nan=0.0), 0.0)  # no evidence: r 0
    d = 1.0 if locus is None else np.maximum(np.nan_to_num(np.asarray(locus, dtype=np.float64), nan=1.0), 1.0)
    c = constants
    r = r / d
    with np.errstate(over="ignore"):
        noise = 10.0 ** (-(c.q0 + c.scale * r ** c.power) / 10.0)
        systematic = 10.0 ** (-c.tail_q / 10.0) * d ** c.locus_power / (1.0 + r / c.tail_r)
    return np.minimum(noise + systematic, 1.0)


def calibrate(r: np.ndarray, constants: Calibration = CALIBRATION, locus: np.ndarray | None = None) -> np.ndarray:
    """The quality (float64, 0-MAX_Q, ``Q_DECIMALS`` decimals) of the model's phred scores r and locus dispersions
    D (``locus``; None: 1): -10 log10 ``calibrated_error(r, D)`` rounded, within [0, MAX_Q]; non-decreasing in r,
    non-increasing in D."""
    with np.errstate(divide="ignore"):
        q = -10.0 * np.log10(calibrated_error(r, constants, locus))
    return np.round(np.clip(q, 0.0, MAX_Q), Q_DECIMALS)


def _phred_log(log_error: np.ndarray, locus: np.ndarray | None = None) -> np.ndarray:
    """The calibrated quality of the natural log of the model's error probability."""
    return calibrate(model_phred(log_error), locus=locus)


def _cnv_qualities(result, cnvs: pd.DataFrame, evidence: Evidence, raw: bool = False) -> tuple[Qualities, list]:
    """(qualities, direction) of each CNV of ``cnvs`` (its own windows and sample); ``raw``: the model's phred
    scores r instead of qualities."""
    main = main_cn(result)
    stat = "median" if result.params.get("useMedian", False) else "mean"
    directions, classes, signs = [], [], []
    for label, v in zip(cnvs["CN"], cnvs[stat].to_numpy(float)):
        d = direction(cn_value(label), float(v), main)
        directions.append(d)
        # the CNV's own call: its direction, else (normal integer copy number) the sign of its statistic
        signs.append({"loss": -1, "gain": 1}.get(d or direction(None, float(v), None), 0))
        classes.append(evidence.class_idx.get(str(label), -1) if d is not None else -1)
    return evidence.cnv_qualities(cnvs, np.array(classes, np.int64), np.array(signs, np.int64), raw), directions


def _cnv_evidence(result) -> tuple[Qualities, list]:
    """``_cnv_qualities`` of ``result.cnvs`` (in its order), computed once per result."""
    cnvs = result.cnvs
    # keyed by the frame, which the value holds: another frame cannot take its id while it is cached
    return _derived(result, f"quality.cnv_qualities.{id(cnvs)}",
                    lambda: (cnvs, *_cnv_qualities(result, cnvs, Evidence(result))))[1:]


def call_qualities(result) -> tuple[np.ndarray, list]:
    """(call quality, direction) of each CNV of ``result.cnvs`` (in its order; the BEDs, filters and QUAL)."""
    q, directions = _cnv_evidence(result)
    return q.call, directions


def call_phred(result) -> np.ndarray:
    """(len(cnvs),) float64 the model's phred score r of each CNV's call (before ``calibrate``: what
    ``benchmarks/spikein.py`` fits the calibration on)."""
    return call_scores(result)[0]


def call_scores(result) -> tuple[np.ndarray, np.ndarray]:
    """(r, D) (len(cnvs),) float64 each CNV's model phred score r and locus dispersion D (``locus_dispersion``):
    what ``calibrate`` maps to its call quality."""
    q = _cnv_qualities(result, result.cnvs, Evidence(result), raw=True)[0]
    return q.call, q.genotype


def genotype_qualities(result) -> np.ndarray:
    """(len(cnvs),) genotype quality of each CNV of ``result.cnvs`` (its sample's CNQ in the per-sample VCF)."""
    return _cnv_evidence(result)[0].genotype
