"""The statistics of calls that the call files (``gcnmops.outputs.callfiles``) and the plots show: each CNV's
direction and the phred quality of a sample's state over a set of windows, with the index of a result's windows
by chromosome that finds a call's windows.

Normal class: ``params["mainClass"]`` (CN2; haplocn.mops CN1). A CNV's direction: loss/gain by its integer
copy number against the normal class when known, else by the sign of its segment statistic (the mean, or the
median with ``useMedian``, of sINI).

Qualities (phred, integer 0-99) come from the model cn.mops fitted (``docs/qualities.md`` has the derivation).
Per window w of a set W (a CNV's windows, or a CNV region's), sample k and class i, the model's expected count
is mu = cov_k L[w, i] (``params["L"]``: lambda of each class, ``params["cov"]``), and the sample's normalized
count x (what the model saw) has the Poisson log-likelihood x log(mu) - mu. Summed over W and divided by the
sample's dispersion phi_k (``dispersion``: real counts vary more than Poisson counts; phi >= 1), it is the
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
r overstates the evidence (false calls on real counts have r of tens to hundreds). The quality is r calibrated
against the observed false-call rate of spike-ins into real counts (``benchmarks/spikein.py``):
Q = min(``MAX_Q``, round(``CALIBRATION_SCALE`` r^``CALIBRATION_POWER``)), the same map for both kinds; sets
without windows get 0. More windows, or counts further from the normal class towards the stated one, give a
higher quality (r grows with both, the map is increasing).
"""
from __future__ import annotations

import re
import threading
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..data import chromosome_blocks

_CN_LABEL = re.compile(r"^CN(\d+(?:\.\d*)?)$")
MAX_Q = 99
#: the calibration of the model's phred scores r into qualities: CALIBRATION_SCALE r^CALIBRATION_POWER (docs/qualities.md)
CALIBRATION_SCALE = 0.53
CALIBRATION_POWER = 0.57


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


#: the median of a chi-square variable of one degree of freedom: median(r^2) of Poisson residuals r
_CHI2_MEDIAN = 0.454936423119572


def dispersion(x: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """(N,) each sample's dispersion phi >= 1: the median over windows of its squared Pearson residuals
    (x - mu)^2 / mu against the normal class's expected count ``mu``, over that median for Poisson counts
    (``_CHI2_MEDIAN``); windows with NaN or mu <= 0 are left out (no usable window: 1). ``x``, ``mu`` (m, N)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        r2 = (x - mu) ** 2 / mu
    r2 = np.where(np.isfinite(r2) & (mu > 0), r2, np.nan)
    phi = np.ones(x.shape[1])
    usable = np.isfinite(r2).any(axis=0)
    if usable.any():
        phi[usable] = np.nanmedian(r2[:, usable], axis=0) / _CHI2_MEDIAN
    return np.maximum(phi, 1.0)


class Qualities(NamedTuple):
    """Call and genotype qualities (the module docstring), each (n, k) int64."""

    call: np.ndarray
    genotype: np.ndarray


class Evidence:
    """The model's evidence for a sample's state over a set of windows: the posteriors and qualities of the
    module docstring."""

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
        x = np.asarray(result.normalized_data, dtype=np.float64)
        lam = np.asarray(p["L"], dtype=np.float64).reshape(x.shape[0], n)
        alpha = np.asarray(p["A"], dtype=np.float64).reshape(x.shape[0], n)
        self.cov = np.asarray(p.get("cov", np.ones(x.shape[1])), dtype=np.float64).reshape(-1)
        if self.cov.size != x.shape[1]:
            self.cov = np.ones(x.shape[1])
        # a window is evidence where every class has a positive lambda; a cell where its count is finite
        usable = np.all(np.isfinite(lam) & (lam > 0), axis=1)
        self.lam = np.where(usable[:, None], lam, 0.0)
        with np.errstate(divide="ignore"):
            self.log_lam = np.where(usable[:, None], np.log(np.where(usable[:, None], lam, 1.0)), 0.0)
        self.ok = (np.isfinite(x) & usable[:, None]).astype(np.float64)
        self.x = np.where(self.ok > 0, x, 0.0)
        self.alpha = np.where(np.isfinite(alpha), alpha, 0.0)
        self.phi = (dispersion(np.where(self.ok > 0, x, np.nan), self.cov * self.lam[:, [self.main_idx]])
                    if self.main_idx >= 0 else np.ones(x.shape[1]))

    def log_posteriors(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """(classes, k) log posterior of each class for samples ``cols`` over windows ``rows``."""
        n_samples = self.x.shape[1]
        x, ok = self.x[rows][:, cols], self.ok[rows][:, cols]
        cov = self.cov[cols]
        with np.errstate(divide="ignore"):
            log_cov = np.log(cov)
        loglik = (self.log_lam[rows].T @ x + log_cov * x.sum(axis=0) - cov * (self.lam[rows].T @ ok)) / self.phi[cols]
        prior = np.maximum(self.alpha[rows].mean(axis=0), 1.0 / n_samples)
        log_post = np.log(prior / prior.sum())[:, None] + loglik
        return log_post - _logsumexp(log_post)

    def qualities(self, row_sets: list, cols: np.ndarray, cls: np.ndarray, sign: np.ndarray) -> Qualities:
        """Call and genotype Q of n items: item i's samples ``cols[i]`` over its windows ``row_sets[i]`` (Q 0
        without windows); ``sign`` -1/+1 non-normal (of class index ``cls``, -1 unknown), 0 normal; ``cols``,
        ``cls``, ``sign`` (n, k)."""
        cols, cls, sign = np.asarray(cols), np.asarray(cls), np.asarray(sign)
        call = np.zeros(cls.shape, np.int64)
        genotype = np.zeros(cls.shape, np.int64)
        if self.main_idx < 0:
            return Qualities(call, genotype)
        for i, rows in enumerate(row_sets):
            if rows.size == 0 or cls.shape[1] == 0:
                continue
            lp = self.log_posteriors(rows, cols[i])  # (classes, k)
            # log P(not the state's side): normal state -> not normal; loss/gain -> normal or the other side
            wrong_side = np.where(sign[i][None, :] == 0, self.side[:, None] != 0,
                                  self.side[:, None] != sign[i][None, :])
            log_err_call = _logsumexp(np.where(wrong_side, lp, -np.inf))
            log_err_cls = _logsumexp(np.where(np.arange(lp.shape[0])[:, None] != np.maximum(cls[i], 0)[None, :],
                                              lp, -np.inf))
            call[i] = _phred_log(log_err_call)
            genotype[i] = _phred_log(np.where((sign[i] != 0) & (cls[i] >= 0), log_err_cls, log_err_call))
        return Qualities(call, genotype)


def _logsumexp(a: np.ndarray) -> np.ndarray:
    """log(sum(exp(a), axis=0)), -inf where every value is -inf."""
    top = np.max(a, axis=0)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return safe + np.log(np.exp(a - safe).sum(axis=0))


def _phred_log(log_error: np.ndarray) -> np.ndarray:
    """The calibrated quality of the natural log of the model's error probability (module docstring): the
    model's phred score r = -10 log10(error), then min(MAX_Q, round(CALIBRATION_SCALE r^CALIBRATION_POWER))."""
    raw = np.maximum(np.nan_to_num(-10.0 / np.log(10.0) * np.asarray(log_error, dtype=np.float64), nan=0.0,
                                   posinf=np.finfo(np.float64).max), 0.0)
    with np.errstate(over="ignore"):
        q = CALIBRATION_SCALE * raw ** CALIBRATION_POWER
    return np.minimum(MAX_Q, np.rint(np.minimum(q, MAX_Q))).astype(np.int64)


def _cnv_qualities(result, cnvs: pd.DataFrame, windows: _Windows, evidence: Evidence) -> tuple[Qualities, list]:
    """(qualities, direction) of each CNV of ``cnvs`` (its own windows and sample)."""
    main = main_cn(result)
    stat = "median" if result.params.get("useMedian", False) else "mean"
    sample_col = pd.Index(result.sample_names).get_indexer(cnvs["sampleName"].to_numpy())
    q = Qualities(np.zeros(len(cnvs), np.int64), np.zeros(len(cnvs), np.int64))
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
        both = evidence.qualities(list(row_sets), np.array(cols, np.int64)[:, None],
                                  np.array(classes, np.int64)[:, None], np.array(signs, np.int64)[:, None])
        q.call[list(at)], q.genotype[list(at)] = both.call[:, 0], both.genotype[:, 0]
    return q, directions


def _cnv_evidence(result) -> tuple[Qualities, list]:
    """``_cnv_qualities`` of ``result.cnvs`` (in its order), computed once per result."""
    cnvs = result.cnvs
    # keyed by the frame, which the value holds: another frame cannot take its id while it is cached
    return _derived(result, f"quality.cnv_qualities.{id(cnvs)}",
                    lambda: (cnvs, *_cnv_qualities(result, cnvs, window_index(result), Evidence(result))))[1:]


def call_qualities(result) -> tuple[np.ndarray, list]:
    """(call quality, direction) of each CNV of ``result.cnvs`` (in its order; the BEDs, filters and QUAL)."""
    q, directions = _cnv_evidence(result)
    return q.call, directions


def genotype_qualities(result) -> np.ndarray:
    """(len(cnvs),) genotype quality of each CNV of ``result.cnvs`` (its sample's CNQ in the per-sample VCF)."""
    return _cnv_evidence(result)[0].genotype
