"""cn.mops's fast segmentation (``segment``), for one vector and batched over a regions x samples matrix.

Behaviour: spec/20-segmentation-and-calls.md, part 1. Outline, per vector x of length m:

1. clean x (+-Inf -> largest / smallest finite value, NaN -> 0); eps (default: the 0.75 quantile of
   |diff(x)|), the merge thresholds (default +-2 sd(x)) and the global variance V (Welford);
2. per candidate position i the statistic p_i: the largest q = -log P(T_dof > t) of cyber-t tests between
   growing windows left and right of i (``position_stat_plain`` is the definition). This is the heavy part
   (about 38 windows per candidate): ``screen_windows`` orders the windows' tails by cheap vectorized
   approximations of their normal deviates within error bounds far above their measured errors (Hill's,
   and for small t the tail's series at 0, exact/tdist.py), and the exact tail (tdist.t_neglog_upper, R's
   pt()) is evaluated only where it decides something: the best window of positions that can reach the
   breakpoint threshold; the whole window loop (``position_stat``) of positions whose approximations leave
   open where the windows stop or which is the largest, if their interval can reach it; positions with a
   window outside the approximations' range. The result is identical to evaluating every tail exactly
   (tests compare with ``reference=True``);
3. local maxima within floor(minSeg/2), breakpoints above the (1 - alpha) quantile (or the floor(alpha)
   largest), initial segments and their medians;
4. segments with median beyond the thresholds are merged into gain / loss runs, runs shorter than minSeg
   are dropped, the gaps between runs become segments; every final segment gets its mean and median.

The per-position arithmetic (prefix sums, the candidate test, ``window_t`` .. ``position_scan``, and the t
tail in exact/tdist.py) is ``register_jitable`` in segmentation/kernels.py: the same source compiles for the
numba CPU driver here and for the numba.cuda kernels of segmentation/gpu.py. The passes before and after the
statistic are segmentation/host.py's, shared with the GPU driver's host side. Everything here is numba-compiled
CPU code, parallel over the (chromosome block, sample) vectors.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from numba import get_num_threads, njit, prange

from ..dynamic import counter, run_queue, take_from, workers
from ..errors import InputError
from ..progress import tick
from .host import (clean, fill_segments, has_neighbourhood, kth_pair, local_half_width, positive_support,
                   segment_ends_sparse, task_rows, vector_constants, window_scratch)
from .interface import (checked_columns, label_tasks, output_arrays, report_cleaning, resolve_params,
                        segment_frame)
from .kernels import (DECIDED, UNBOUNDED, exact_tail, is_candidate, position_stat, position_stat_plain, prefix_sums,
                      screen_windows)

#: positions per band of a vector split over the cores (``_final_ends_split``)
SPLIT_BAND = 4096
#: share of a vector's time that its split form (``_final_ends_split``) still spends on one core (the passes
#: before and after the statistic; measured on 313,852-position sINI vectors: 0.066 s on one core, 0.051 s on two)
SPLIT_SERIAL = 0.55
#: ``_screen_positions``'s codes of candidate positions besides their best window (> 0): p_i exact, or deferred
EXACT = -1
DEFERRED = -2


@njit(cache=True, inline="always")
def _has_interval(c):
    """Whether a position of code ``c`` holds an interval yv -+ ev of its deviate (screened or deferred) rather
    than nothing (no candidate) or its exact p."""
    return c != 0 and c != EXACT


# ---------------------------------------------------------------------------------------------------------
# one vector
# ---------------------------------------------------------------------------------------------------------

@njit(cache=True, error_model="numpy")
def _final_ends(x, alpha, t_hi, t_lo, default_t, no_merge, min_seg, eps, eps_given, delta, max_int, w,
                reference, flags, code, S, Q, p, work, yv, ev, jinv, jnn, jc, ybuf, ebuf, qbuf):
    """Segment one clean vector x: flags[i] = 1 where a final segment ends at i (0-based). Returns the count.

    ``code``: int64 work space, ``S``, ``Q``, ``p``, ``work``, ``yv``, ``ev``: float64 work spaces, each of length
    >= len(x), six arrays (slices of one buffer kept the compiler from vectorizing the screen: it cannot
    tell them apart), reused from vector to vector (fresh ones fault their pages in again); ``ybuf``, ``ebuf``,
    ``qbuf``: float64 of length >= max_int - min_seg + 1; ``jinv``, ``jnn``, ``jc`` from ``window_constants``.
    ``reference``: evaluate every tail exactly (``position_stat_plain``; slow, for verification).
    """
    m = x.shape[0]
    for i in range(m):
        flags[i] = 0
    if m == 0:
        return 0
    code = code[:m]
    S = S[:m]
    Q = Q[:m]
    p = p[:m]
    work = work[:m]
    yv = yv[:m]
    ev = ev[:m]
    eps, t_hi, t_lo, V = vector_constants(x, eps_given, eps, default_t, t_hi, t_lo, work)
    prefix_sums(x, S, Q)
    _screen_positions(x, S, Q, eps, min_seg, delta, max_int, w, V, reference, jinv, jnn, jc, ybuf, ebuf, qbuf,
                      p, code, yv, ev, 0, m)
    h = local_half_width(min_seg)
    lower = _exact_lower(alpha, h, code, yv, ev, work)
    _exact_where_needed(S, Q, m, min_seg, delta, max_int, w, V, lower, code, yv, ev, p, ybuf, ebuf, qbuf, 0, m)
    return _segment_ends(x, p, code, yv, ev, work, flags, h, alpha, no_merge, t_hi, t_lo, min_seg)


@njit(cache=True, error_model="numpy")
def _segment_ends(x, p, code, yv, ev, work, flags, h, alpha, no_merge, t_hi, t_lo, min_seg):
    """Local maxima, breakpoints, merging on the statistic's support (code, yv, ev are free from here on)."""
    n = positive_support(p, code, yv)
    return segment_ends_sparse(x, code, yv, n, flags, h, alpha, no_merge, t_hi, t_lo, min_seg, ev, work)


@njit(cache=True, error_model="numpy")
def _screen_positions(x, S, Q, eps, min_seg, delta, max_int, w, V, reference, jinv, jnn, jc, ybuf, ebuf, qbuf,
                      p, code, yv, ev, lo, hi):
    """The statistic of positions lo..hi-1, screening: code[i] = 0 (no candidate, p[i] = 0), EXACT (p[i] exact),
    the best window j (p_i = the exact tail of window j, yv[i] = its approximate normal deviate, within ev[i]) or
    DEFERRED (p_i's deviate within yv[i] -+ ev[i], ``position_stat`` decides it if it may matter); p[i] = 0 but
    where exact."""
    m = x.shape[0]
    for i in range(lo, hi):
        p[i] = 0.0
        code[i] = 0
        if not is_candidate(x, i, min_seg, eps):
            continue
        if reference:
            p[i] = position_stat_plain(S, Q, i, m, min_seg, delta, max_int, w, V)
            code[i] = EXACT
            continue
        if delta < 0:  # no window is evaluated: p_i = 0
            code[i] = EXACT
            continue
        state, val, jb, err = screen_windows(S, Q, i, m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf)
        if state == UNBOUNDED:
            p[i] = position_stat(S, Q, i, m, min_seg, delta, max_int, w, V, ybuf, ebuf, qbuf)
            code[i] = EXACT
        else:
            yv[i] = val
            ev[i] = err
            code[i] = jb if state == DECIDED else DEFERRED


@njit(cache=True, error_model="numpy")
def _exact_lower(alpha, h, code, yv, ev, work):
    """The deviate below which a screened or deferred position's exact p_i cannot matter: with alpha < 1 a lower bound
    B of the order statistic under the threshold (positions whose p_i is surely below it cannot be breakpoints, and
    whatever they suppress is below it too); -inf otherwise. ``work``: scratch."""
    if alpha < 1.0:
        return _screened_lower_bound(alpha, h, code, yv, ev, work)
    return -math.inf


@njit(cache=True, error_model="numpy")
def _exact_where_needed(S, Q, m, min_seg, delta, max_int, w, V, lower, code, yv, ev, p, ybuf, ebuf, qbuf, lo, hi):
    """Exact p_i of the screened and deferred positions (code > 0, DEFERRED) among lo..hi-1 whose deviate may reach
    ``lower`` (``_exact_lower``); the others keep a placeholder 0 in their place. ``ybuf``, ``ebuf``, ``qbuf``:
    ``position_stat``'s scratch."""
    for i in range(lo, hi):
        if _has_interval(code[i]) and yv[i] + ev[i] >= lower:
            if code[i] > 0:
                p[i] = exact_tail(S, Q, i, code[i], w, V)
            else:
                p[i] = position_stat(S, Q, i, m, min_seg, delta, max_int, w, V, ybuf, ebuf, qbuf)


@njit(cache=True, error_model="numpy")
def _screened_lower_bound(alpha, h, code, yv, ev, work):
    """B: the floor((m - 1)(1 - alpha))-th order statistic of the lower deviate bounds of the screened and deferred
    positions that are surely local maxima (-inf elsewhere)."""
    m = code.shape[0]
    for i in range(m):
        low = -math.inf
        if _has_interval(code[i]):
            low = yv[i] - ev[i]
            if has_neighbourhood(i, h, m):
                for r in range(i - h, i + h + 1):
                    if r != i and code[r] != 0 and (code[r] == EXACT or yv[r] + ev[r] > low):
                        low = -math.inf
                        break
        work[i] = low
    return kth_pair(work, m, int(math.floor((m - 1) * (1.0 - alpha))))[0]


# ---------------------------------------------------------------------------------------------------------
# every (block, sample) vector
# ---------------------------------------------------------------------------------------------------------

@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def _segment_all(values, firsts, ends, alpha, t_hi, t_lo, default_t, no_merge, min_seg, eps, eps_given,
                 delta, max_int, w, reference, flags, counts, dirty, order, next_task, nworkers):
    """Phase 1: final segment ends of the (block, sample) vectors ``order`` (taken in that order from
    ``next_task`` by ``nworkers`` threads) into ``flags`` (m, N) int8."""
    N = values.shape[1]
    longest = 0
    for b in range(firsts.shape[0]):
        longest = max(longest, ends[b] - firsts[b])
    for _ in prange(nworkers):
        S, Q, p, work, yv, ev = (np.empty(longest), np.empty(longest), np.empty(longest), np.empty(longest),
                                 np.empty(longest), np.empty(longest))
        code = np.empty(longest, dtype=np.int64)
        jinv, jnn, jc, ybuf, ebuf, qbuf = window_scratch(min_seg, max_int, w)
        task = take_from(next_task, order)
        while task >= 0:
            s, f, e = task_rows(task, N, firsts, ends)
            x = values[f:e, s].copy()
            dirty[task] = clean(x)
            counts[task] = _final_ends(x, alpha, t_hi, t_lo, default_t, no_merge, min_seg, eps, eps_given, delta,
                                       max_int, w, reference, flags[f:e, s], code, S, Q, p, work, yv, ev, jinv, jnn,
                                       jc, ybuf, ebuf, qbuf)
            task = take_from(next_task, order)


@njit(parallel=True, cache=True, error_model="numpy")
def _final_ends_split(x, alpha, t_hi, t_lo, default_t, no_merge, min_seg, eps, eps_given, delta, max_int, w,
                      reference, flags, band):
    """``_final_ends`` of one clean vector with its positions' statistic and exact tails on every core (bands of
    ``band`` positions, each position computed as there: the same values): for vectors fewer than the cores."""
    m = x.shape[0]
    for i in range(m):
        flags[i] = 0
    if m == 0:
        return 0
    S, Q, p, work, yv, ev = np.empty(m), np.empty(m), np.empty(m), np.empty(m), np.empty(m), np.empty(m)
    code = np.empty(m, dtype=np.int64)
    eps, t_hi, t_lo, V = vector_constants(x, eps_given, eps, default_t, t_hi, t_lo, work)
    prefix_sums(x, S, Q)
    bands = (m + band - 1) // band
    for b in prange(bands):
        jinv, jnn, jc, ybuf, ebuf, qbuf = window_scratch(min_seg, max_int, w)
        _screen_positions(x, S, Q, eps, min_seg, delta, max_int, w, V, reference, jinv, jnn, jc, ybuf, ebuf, qbuf,
                          p, code, yv, ev, b * band, min(m, (b + 1) * band))
    h = local_half_width(min_seg)
    lower = _exact_lower(alpha, h, code, yv, ev, work)
    for b in prange(bands):
        jinv, jnn, jc, ybuf, ebuf, qbuf = window_scratch(min_seg, max_int, w)
        _exact_where_needed(S, Q, m, min_seg, delta, max_int, w, V, lower, code, yv, ev, p, ybuf, ebuf, qbuf, b * band,
                            min(m, (b + 1) * band))
    return _segment_ends(x, p, code, yv, ev, work, flags, h, alpha, no_merge, t_hi, t_lo, min_seg)


@njit(parallel=True, cache=True, error_model="numpy")
def _fill_all(values, firsts, ends, flags, offsets, dirty, order, next_task, nworkers, out_start, out_end, out_mean,
              out_median):
    """Phase 2: start, end (1-based, block-relative), mean and median of every final segment, the vectors taken in
    ``order`` from ``next_task`` by ``nworkers`` threads."""
    N = values.shape[1]
    for _ in prange(nworkers):
        task = take_from(next_task, order)
        while task >= 0:
            s, f, e = task_rows(task, N, firsts, ends)
            if dirty[task] != 0:
                x = values[f:e, s].copy()
                clean(x)
            else:
                x = values[f:e, s]
            fill_segments(x, flags[f:e, s], offsets[task], out_start, out_end, out_mean, out_median)
            task = take_from(next_task, order)


def _split_count(ntask: int, threads: int) -> int:
    """How many of the smallest vectors to run one after another, each split over every core, after the others
    were taken one per core: the round's remainder where splitting ends it sooner than a last round would."""
    rest = ntask % threads
    return rest if threads > 1 and rest * (SPLIT_SERIAL + (1 - SPLIT_SERIAL) / threads) < 1 else 0


# ---------------------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------------------

def segment_columns_arrays(values: np.ndarray, blocks, alpha=0.05, seg_median_t=None, min_seg=3, eps=None,
                           delta=20, max_int=40, cyber_weight=50, *, reference: bool = False) -> dict:
    """Like ``segment_columns`` but returns a dict of arrays (block, sample, start, end, mean, median).

    ``reference=True`` evaluates every tail exactly instead of screening with the approximation (same
    result, several times slower; for verification).
    """
    values, firsts, ends = checked_columns(values, blocks)
    m, N = values.shape
    params = resolve_params(alpha, seg_median_t, min_seg, eps, delta, max_int, cyber_weight)
    flags = np.zeros((m, N), dtype=np.int8, order="F")
    ntask = firsts.size * N
    counts = np.zeros(ntask, dtype=np.int64)
    dirty = np.zeros(ntask, dtype=np.int8)
    # largest vectors first, so that the last ones taken are short
    order = np.argsort(-np.repeat(ends - firsts, N), kind="stable").astype(np.int64)
    split = _split_count(ntask, get_num_threads())
    whole, rest = order[:ntask - split], order[ntask - split:]
    next_task = counter()
    run_queue(_segment_all, (values, firsts, ends, params["alpha"], params["t_hi"], params["t_lo"],
                             params["default_t"], params["no_merge"], params["min_seg"], params["eps"],
                             params["eps_given"], params["delta"], params["max_int"], params["w"], bool(reference),
                             flags, counts, dirty, whole, next_task, workers(whole.size)),
              next_task, whole.size, progress=lambda taken: tick(taken, ntask))
    for done, task in enumerate(rest, whole.size + 1):
        b, s = divmod(int(task), N)
        x = np.array(values[firsts[b]:ends[b], s])
        dirty[task] = clean(x)
        counts[task] = _final_ends_split(x, params["alpha"], params["t_hi"], params["t_lo"], params["default_t"],
                                         params["no_merge"], params["min_seg"], params["eps"], params["eps_given"],
                                         params["delta"], params["max_int"], params["w"], bool(reference),
                                         flags[firsts[b]:ends[b], s], SPLIT_BAND)
        tick(done, ntask)
    report_cleaning(dirty)
    offsets, out = output_arrays(counts)
    if offsets[-1]:
        _fill_all(values, firsts, ends, flags, offsets, dirty, order, counter(), workers(ntask), out["start"],
                  out["end"], out["mean"], out["median"])
    return label_tasks(out, counts, N)


def segment_columns(values: np.ndarray, blocks, alpha=0.05, seg_median_t=None, min_seg=3, eps=None, delta=20,
                    max_int=40, cyber_weight=50) -> pd.DataFrame:
    """Segment every (chromosome block, sample) vector of ``values`` as cn.mops's ``segment()`` does.

    ``values``: (m, N) float64 matrix (sINI: regions x samples); ``blocks``: (first_row, end_row_exclusive)
    per chromosome. The other arguments are ``segment``'s and apply to every vector (eps=None: each
    vector's own 0.75 quantile of |diff|; seg_median_t=None: each vector's own +-2 sd).
    Returns a DataFrame (block, sample, start, end, mean, median) ordered by block, sample, start; start
    and end are 1-based rows relative to the block.
    """
    out = segment_columns_arrays(values, blocks, alpha=alpha, seg_median_t=seg_median_t, min_seg=min_seg,
                                 eps=eps, delta=delta, max_int=max_int, cyber_weight=cyber_weight)
    return segment_frame(out)


def segment(x, alpha=0.05, seg_median_t=None, min_seg=3, eps=None, delta=20, max_int=40,
            cyber_weight=50) -> pd.DataFrame:
    """cn.mops's ``segment(x, alpha, segMedianT, minSeg, eps, delta, maxInt, cyberWeight)``.

    ``x``: numeric vector. ``alpha`` in (0, 1): breakpoints above the (1 - alpha) quantile of the
    statistic; alpha >= 1: the floor(alpha) strongest breakpoints. ``seg_median_t``: None (+-2 sd(x)), one
    number t (+-|t|) or a pair (upper, lower) of median thresholds for merging; (0, 0) disables merging.
    ``eps``: None means "not passed" (the 0.75 quantile of |diff(x)|); a number is used as is.
    Returns a DataFrame with columns start, end (1-based, covering 1..len(x)), mean, median.
    """
    if isinstance(x, (str, bytes)):
        raise InputError("x must be a numeric vector.")
    arr = np.asarray(x)
    if arr.dtype == object:
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise InputError("x must be a numeric vector.") from None
    if arr.dtype.kind not in "iuf":
        raise InputError("x must be a numeric vector.")
    arr = np.ascontiguousarray(arr, dtype=np.float64).ravel()
    out = segment_columns_arrays(arr.reshape(-1, 1, order="F"), [(0, arr.size)], alpha=alpha,
                                 seg_median_t=seg_median_t, min_seg=min_seg, eps=eps, delta=delta,
                                 max_int=max_int, cyber_weight=cyber_weight)
    return segment_frame(out, ("start", "end", "mean", "median"))


__all__ = ["segment", "segment_columns", "segment_columns_arrays"]
