"""Host passes of the fast segmentation shared by the CPU driver (segmentation/cpu.py) and the GPU driver's host
side (segmentation/gpu.py): numba-compiled CPU code on one vector at a time.

- before the statistic: ``clean`` (+-Inf, NaN), ``vector_constants`` (eps, merge thresholds, variance V);
- after it: ``segment_ends_from_stat`` (local maxima, breakpoints, merging into final segment ends) and
  ``fill_segments`` (start, end, mean and median of every final segment);
- selection helpers (``kth_pair``, ``quantile7_select``, ``median_of``) and the scratch of the window loop
  (``window_scratch``).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba.extending import register_jitable

from ..exact.rstats import ld_mean, mean_of_two, median_inplace, quantile7_low_index, quantile7_sorted, select_kth
from .kernels import window_constants, window_count

#: floor of the global variance
VAR_FLOOR = 1e-15
#: vectors at least this long are selected through a sample: two pivots bracketing the wanted rank leave a
#: small middle part for the exact selection (about three times faster than quickselect on everything)
SAMPLED_SELECT_MIN = 4096
SELECT_SAMPLE = 512
#: ``clean``'s return value: bit 1 = Inf replaced, bit 2 = NaN replaced
DIRTY_INF = 1
DIRTY_NAN = 2


# ---------------------------------------------------------------------------------------------------------
# small shared formulas
# ---------------------------------------------------------------------------------------------------------

@register_jitable
def task_rows(task, N, firsts, ends):
    """(sample, first row, end row) of (block, sample) vector ``task`` = block * N + sample."""
    b = task // N
    return task % N, firsts[b], ends[b]


@register_jitable
def local_half_width(min_seg):
    """h: a local maximum of the statistic is taken over positions i-h..i+h (0 = no neighbourhood)."""
    return min_seg // 2 if min_seg > 2 else 0


@register_jitable
def has_neighbourhood(i, h, m):
    """Whether position i of m is compared with neighbours i-h..i+h (else it is its own local maximum)."""
    return h > 0 and i - h > 0 and i + h < m


@register_jitable
def breakpoint_count(alpha, m):
    """alpha >= 1: the number of breakpoints taken, floor(alpha) capped at m."""
    k = int(math.floor(alpha))
    if k > m:
        k = m
    return k


@njit(cache=True, error_model="numpy")
def window_scratch(min_seg, max_int, w):
    """(jinv, jnn, jc, ybuf, ebuf, qbuf): the window constants (``window_constants``) and the scratch of one
    position's window loop."""
    nwin = window_count(min_seg, max_int)
    jinv = np.empty(nwin)
    jnn = np.empty(nwin)
    jc = np.empty(nwin)
    window_constants(min_seg, nwin, w, jinv, jnn, jc)
    return jinv, jnn, jc, np.empty(nwin), np.empty(nwin), np.empty(nwin)


# ---------------------------------------------------------------------------------------------------------
# before the statistic
# ---------------------------------------------------------------------------------------------------------

@njit(cache=True, error_model="numpy")
def clean(x):
    """In place: +Inf -> max finite, -Inf -> min finite, NaN -> 0. Returns DIRTY_INF | DIRTY_NAN as found."""
    n = x.shape[0]
    had_inf = False
    had_nan = False
    lo = math.inf
    hi = -math.inf
    for i in range(n):
        v = x[i]
        if math.isnan(v):
            had_nan = True
        elif math.isinf(v):
            had_inf = True
        else:
            if v < lo:
                lo = v
            if v > hi:
                hi = v
    if had_inf or had_nan:
        for i in range(n):
            v = x[i]
            if math.isnan(v):
                x[i] = 0.0
            elif v == math.inf:
                x[i] = hi if hi > -math.inf else 0.0
            elif v == -math.inf:
                x[i] = lo if lo < math.inf else 0.0
    return (DIRTY_INF if had_inf else 0) + (DIRTY_NAN if had_nan else 0)


@njit(cache=True, error_model="numpy")
def sample_sd(x):
    """R's sd(x) (n - 1 denominator); NaN for fewer than two values."""
    n = x.shape[0]
    if n < 2:
        return math.nan
    mu = ld_mean(x, n)
    acc = 0.0
    for r in range(n):
        dv = x[r] - mu
        acc += dv * dv
    return math.sqrt(acc / (n - 1))


@njit(cache=True, error_model="numpy")
def welford_var(x):
    """Sample variance of x by Welford's running update, floored at VAR_FLOOR."""
    mean = 0.0
    m2 = 0.0
    for r in range(x.shape[0]):
        dv = x[r] - mean
        mean += dv / (r + 1)
        m2 += dv * (x[r] - mean)
    n = x.shape[0]
    v = m2 / (n - 1) if n > 1 else 0.0
    if not v >= VAR_FLOOR:
        v = VAR_FLOOR
    return v


@njit(cache=True, error_model="numpy")
def vector_constants(x, eps_given, eps, default_t, t_hi, t_lo, work):
    """(eps, t_hi, t_lo, V) of one clean vector x (length >= 1): eps = the 0.75 quantile of |diff(x)| unless
    given, the merge thresholds +-2 sd(x) where ``default_t``, else as given, and the global variance V.
    ``work``: scratch of length >= len(x) - 1."""
    m = x.shape[0]
    if not eps_given:
        for i in range(m - 1):
            work[i] = abs(x[i + 1] - x[i])
        eps = quantile7_select(work, m - 1, 0.75)
    if default_t:
        sd = sample_sd(x)
        t_hi = 2.0 * sd
        t_lo = -2.0 * sd
    return eps, t_hi, t_lo, welford_var(x)


# ---------------------------------------------------------------------------------------------------------
# selection
# ---------------------------------------------------------------------------------------------------------

@njit(cache=True, error_model="numpy")
def _pair_select(buf, n, k):
    """(x_(k), x_(k+1)): the k-th and (k+1)-th smallest (0-based) of buf[0:n], NaN for a missing second."""
    a = select_kth(buf, n, k)
    if k + 1 >= n:
        return a, math.nan
    # after the selection everything right of k is >= x_(k): x_(k+1) is their minimum
    b = buf[k + 1]
    for r in range(k + 2, n):
        if buf[r] < b:
            b = buf[r]
    return a, b


@njit(cache=True, error_model="numpy")
def kth_pair(buf, n, k):
    """(x_(k), x_(k+1)) of buf[0:n] (0-based order statistics; NaN where k + 1 == n); reorders ``buf``."""
    if n >= SAMPLED_SELECT_MIN:
        ns = SELECT_SAMPLE
        step = n // ns
        sample = np.empty(ns)
        for r in range(ns):
            sample[r] = buf[r * step + step // 2]
        sample.sort()
        frac = k / n
        spread = 3.0 * math.sqrt(ns * frac * (1.0 - frac)) + 4.0
        ilo = int(math.floor(frac * ns - spread))
        ihi = int(math.ceil(frac * ns + spread))
        lo_v = sample[ilo] if ilo >= 0 else -math.inf
        hi_v = sample[ihi] if ihi < ns else math.inf
        c_lo = 0
        c_mid = 0
        for r in range(n):
            v = buf[r]
            c_lo += 1 if v < lo_v else 0
            c_mid += 1 if (v >= lo_v) & (v <= hi_v) else 0
        need = k + 2 if k + 1 < n else k + 1  # both wanted ranks must fall in the middle part
        if c_lo <= k and need <= c_lo + c_mid:
            wpos = 0
            for r in range(n):
                v = buf[r]
                if v >= lo_v and v <= hi_v:
                    buf[wpos] = v
                    wpos += 1
            return _pair_select(buf, c_mid, k - c_lo)
        # an unlucky sample (buf is untouched): plain selection
    return _pair_select(buf, n, k)


@njit(cache=True, error_model="numpy")
def quantile7_select(buf, n, p):
    """R's quantile(buf[0:n], p, type=7); reorders ``buf`` (selection instead of a full sort)."""
    if n == 0:
        return math.nan
    lo = quantile7_low_index(n, p)
    a, b = kth_pair(buf, n, lo)
    # quantile7_sorted reads the two order statistics at lo and lo + 1
    buf[lo] = a
    if lo + 1 < n:
        buf[lo + 1] = b
    return quantile7_sorted(buf, n, p)


@njit(cache=True, error_model="numpy")
def median_of(x, s, e, buf):
    """R's median of x[s:e] (``buf``: scratch of length >= e - s)."""
    n = e - s
    for r in range(n):
        buf[r] = x[s + r]
    if n < SAMPLED_SELECT_MIN:
        return median_inplace(buf, n)
    if n % 2 == 1:
        return kth_pair(buf, n, n // 2)[0]
    a, b = kth_pair(buf, n, n // 2 - 1)
    return mean_of_two(a, b)  # as median_inplace: R's mean() of the two middle values


# ---------------------------------------------------------------------------------------------------------
# after the statistic: local maxima, breakpoints, merging, segment values
# ---------------------------------------------------------------------------------------------------------

@njit(cache=True, error_model="numpy")
def segment_ends_from_stat(x, p, stat, work, flags, h, alpha, no_merge, t_hi, t_lo, min_seg):
    """From the per-position statistic ``p`` (m) of ``x`` (m >= 1): local maxima (into ``stat``), breakpoints
    and merging; marks the final segment ends in ``flags`` (1) and returns their number. ``stat``, ``work``:
    scratch (m)."""
    m = x.shape[0]
    local_maxima(p, h, stat)
    _mark_breakpoints(stat, work, flags, alpha)
    flags[m - 1] = 2
    if no_merge:
        return _unmerged_ends(flags)
    return _merged_ends(x, flags, work, t_hi, t_lo, min_seg)


@njit(cache=True, error_model="numpy")
def local_maxima(p, h, stat):
    """stat[i] = p[i] where no neighbour within h has a larger p, else 0."""
    m = p.shape[0]
    for i in range(m):
        v = p[i]
        if has_neighbourhood(i, h, m) and v > 0.0:
            for r in range(i - h, i + h + 1):
                if p[r] > v:
                    v = 0.0
                    break
        stat[i] = v


@njit(cache=True, error_model="numpy")
def _mark_breakpoints(stat, work, flags, alpha):
    """flags[i] = 2 ("an initial segment ends at i") where stat is above the (1 - alpha) quantile (alpha < 1)
    or among the floor(alpha) largest (ties taken by position)."""
    m = stat.shape[0]
    if alpha < 1.0:
        for i in range(m):
            work[i] = stat[i]
        thr = quantile7_select(work, m, 1.0 - alpha)
        for i in range(m):
            if stat[i] > thr:
                flags[i] = 2
        return
    k = breakpoint_count(alpha, m)
    if k > 0:
        for i in range(m):
            work[i] = -stat[i]
        kth = -select_kth(work, m, k - 1)  # the k-th largest value
        above = 0
        for i in range(m):
            if stat[i] > kth:
                above += 1
        ties = k - above  # ties with the k-th value are taken by position
        for i in range(m):
            if stat[i] > kth:
                flags[i] = 2
            elif stat[i] == kth and ties > 0:
                flags[i] = 2
                ties -= 1


@njit(cache=True, error_model="numpy")
def _unmerged_ends(flags):
    """No merging: every initial segment is final (flags 2 -> 1, else 0). Returns the count."""
    count = 0
    for i in range(flags.shape[0]):
        if flags[i] == 2:
            flags[i] = 1
            count += 1
        else:
            flags[i] = 0
    return count


@njit(cache=True, error_model="numpy")
def _merged_ends(x, flags, work, t_hi, t_lo, min_seg):
    """Merging: runs of consecutive initial segments (flags 2) with median > t_hi (gains) or < t_lo (losses);
    runs of width >= min_seg are kept, the gaps between them become segments. Returns the count of ends."""
    m = x.shape[0]
    seg_start = 0
    run_kind = 0  # 1 gain, -1 loss, 0 none
    run_start = 0
    for i in range(m):
        if flags[i] != 2:
            continue
        flags[i] = 0
        kind = _median_side(x, seg_start, i + 1, t_hi, t_lo, work)
        if kind != run_kind:
            if run_kind != 0:
                _close_run(flags, run_start, seg_start - 1, min_seg)
            run_kind = kind
            run_start = seg_start
        seg_start = i + 1
    if run_kind != 0:
        _close_run(flags, run_start, m - 1, min_seg)
    flags[m - 1] = 1
    count = 0
    for i in range(m):
        count += flags[i]
    return count


@njit(cache=True, error_model="numpy")
def _median_side(x, s, e, t_hi, t_lo, buf):
    """1 if median(x[s:e]) > t_hi, -1 if it is < t_lo, else 0; by counting where that decides."""
    n = e - s
    c_hi = 0
    c_lo = 0
    for r in range(s, e):
        c_hi += 1 if x[r] > t_hi else 0
        c_lo += 1 if x[r] < t_lo else 0
    h = n // 2
    # odd n: the median is x_(h) (0-based), above t iff at least h + 1 values are; even n: the mean of
    # x_(h-1) and x_(h), decided by the count unless exactly h values are above (then compute it)
    if n % 2 == 1:
        if c_hi >= h + 1:
            return 1
        return -1 if c_lo >= h + 1 else 0
    if c_hi == h or c_lo == h:
        med = median_of(x, s, e, buf)
        return 1 if med > t_hi else (-1 if med < t_lo else 0)
    if c_hi >= h + 1:
        return 1
    return -1 if c_lo >= h + 1 else 0


@njit(cache=True, error_model="numpy")
def _close_run(flags, s, e, min_seg):
    """Mark the boundaries of a kept run x[s..e] (0-based, inclusive) if it is at least min_seg long."""
    if e - s + 1 >= min_seg:
        if s > 0:
            flags[s - 1] = 1
        flags[e] = 1


@njit(cache=True, error_model="numpy")
def segment_bounds(flags, o, out_start, out_end):
    """Start and end (1-based) of every final segment of one vector (flags != 0 at its end) into out_*[o:];
    returns the position after its last segment."""
    start = 0
    for i in range(flags.shape[0]):
        if flags[i] != 0:
            out_start[o] = start + 1
            out_end[o] = i + 1
            o += 1
            start = i + 1
    return o


@njit(cache=True, error_model="numpy")
def fill_segments(x, flags, o, out_start, out_end, out_mean, out_median):
    """Start, end (1-based), mean (R's long-double mean) and median of every final segment of x (flags != 0 at
    its end) into out_*[o:]."""
    buf = np.empty(x.shape[0])
    for k in range(o, segment_bounds(flags, o, out_start, out_end)):
        s = out_start[k] - 1
        e = out_end[k]
        out_mean[k] = ld_mean(x[s:e], e - s)
        out_median[k] = median_of(x, s, e, buf)


__all__ = ["VAR_FLOOR", "DIRTY_INF", "DIRTY_NAN", "task_rows", "local_half_width",
           "has_neighbourhood",
           "breakpoint_count", "window_scratch", "clean", "sample_sd", "welford_var", "vector_constants",
           "kth_pair", "quantile7_select", "median_of", "segment_ends_from_stat", "local_maxima", "segment_bounds",
           "fill_segments"]
