"""Host passes of the fast segmentation shared by the CPU driver (segmentation/cpu.py) and the GPU driver's host
side (segmentation/gpu.py): numba-compiled CPU code on one vector at a time.

- before the statistic: ``clean`` (+-Inf, NaN), ``vector_constants`` (eps, merge thresholds, variance V);
- after it: ``segment_ends_sparse`` (local maxima, breakpoints, merging into final segment ends; the statistic
  given on its support, the positions where it can be positive) and
  ``fill_segments`` (start, end, mean and median of every final segment);
- selection helpers (``kth_pair``, ``quantile7_select``, ``median_of``; their allocation-free source
  ``kth_pair_sampled``, ``quantile7_sampled`` also runs in CUDA kernels) and the scratch of the window loop
  (``window_scratch``).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba.extending import register_jitable

from ..exact.rstats import ld_mean, mean_of_two, median_inplace, quantile7_low_index, quantile7_pair, select_kth
from .kernels import window_constants, window_count

#: floor of the global variance
VAR_FLOOR = 1e-15
#: the default eps is this quantile of |diff(x)|
EPS_QUANTILE = 0.75
#: vectors at least this long are selected through a sample (``kth_pair_sampled``): two pivots bracketing the wanted
#: rank leave a small middle part for the exact selection (one host thread, 45,000 values: 4-6x faster than
#: quickselect on everything)
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

@register_jitable
def dirt(x):
    """DIRTY_INF | DIRTY_NAN as found in x (0: every value finite)."""
    code = 0
    for i in range(x.shape[0]):
        v = x[i]
        if not math.isfinite(v):
            code |= DIRTY_NAN if math.isnan(v) else DIRTY_INF
    return code


@njit(cache=True, error_model="numpy")
def clean(x):
    """In place: +Inf -> max finite, -Inf -> min finite, NaN -> 0. Returns ``dirt(x)`` as found."""
    code = dirt(x)
    if code == 0:
        return 0
    lo = math.inf
    hi = -math.inf
    for i in range(x.shape[0]):
        v = x[i]
        if math.isfinite(v):
            if v < lo:
                lo = v
            if v > hi:
                hi = v
    for i in range(x.shape[0]):
        v = x[i]
        if math.isnan(v):
            x[i] = 0.0
        elif v == math.inf:
            x[i] = hi if hi > -math.inf else 0.0
        elif v == -math.inf:
            x[i] = lo if lo < math.inf else 0.0
    return code


@register_jitable
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


@register_jitable
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


@register_jitable
def abs_diffs(x, work):
    """work[i] = |x[i+1] - x[i]| (i < len(x) - 1), whose EPS_QUANTILE quantile is the default eps."""
    for i in range(x.shape[0] - 1):
        work[i] = abs(x[i + 1] - x[i])


@register_jitable
def vector_scale(x, default_t, t_hi, t_lo):
    """(t_hi, t_lo, V) of one clean vector x: the merge thresholds +-2 sd(x) where ``default_t``, else as given,
    and the global variance V."""
    if default_t:
        sd = sample_sd(x)
        t_hi = 2.0 * sd
        t_lo = -2.0 * sd
    return t_hi, t_lo, welford_var(x)


@njit(cache=True, error_model="numpy")
def vector_constants(x, eps_given, eps, default_t, t_hi, t_lo, work):
    """(eps, t_hi, t_lo, V) of one clean vector x (length >= 1): eps = the EPS_QUANTILE quantile of |diff(x)|
    unless given, and ``vector_scale``. ``work``: scratch of length >= len(x) - 1."""
    if not eps_given:
        abs_diffs(x, work)
        eps = quantile7_select(work, x.shape[0] - 1, EPS_QUANTILE)
    t_hi, t_lo, V = vector_scale(x, default_t, t_hi, t_lo)
    return eps, t_hi, t_lo, V


# ---------------------------------------------------------------------------------------------------------
# selection
# ---------------------------------------------------------------------------------------------------------

@register_jitable
def pair_select(buf, n, k):
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


@register_jitable
def kth_pair_sampled(buf, n, k, sample):
    """(x_(k), x_(k+1)) of buf[0:n] (0-based order statistics; NaN where k + 1 == n); overwrites buf[0:n]
    (scratch); allocates nothing (CUDA kernels call it too). ``sample``: scratch of length >= SELECT_SAMPLE.

    From SAMPLED_SELECT_MIN values on, a regular sample of SELECT_SAMPLE of them gives two values lo_v <= hi_v
    (its order statistics a few standard deviations either side of the wanted rank); one pass counts the values
    below lo_v and within [lo_v, hi_v]; where both wanted ranks fall within, those values are moved to the front
    and selected among. Otherwise (an unlucky sample;
    buf is untouched) or for shorter buf: plain selection (``pair_select``). Order statistics are values, so
    every path gives the same two."""
    if n >= SAMPLED_SELECT_MIN:
        ns = SELECT_SAMPLE
        step = n // ns
        for r in range(ns):
            sample[r] = buf[r * step + step // 2]
        frac = k / n
        spread = 3.0 * math.sqrt(ns * frac * (1.0 - frac)) + 4.0
        ilo = int(math.floor(frac * ns - spread))
        ihi = int(math.ceil(frac * ns + spread))
        # the sample's ihi-th and ilo-th smallest (ilo < ihi): selecting ihi leaves the ihi smallest in
        # sample[0:ihi], among which the ilo-th smallest is the whole sample's
        hi_v = math.inf
        top = ns
        if ihi < ns:
            hi_v = select_kth(sample, ns, ihi)
            top = ihi
        lo_v = -math.inf
        if ilo >= 0:
            lo_v = select_kth(sample, top, ilo)
        c_lo = 0
        c_mid = 0
        for r in range(n):
            v = buf[r]
            c_lo += 1 if v < lo_v else 0
            c_mid += 1 if (v >= lo_v) & (v <= hi_v) else 0
        need = k + 2 if k + 1 < n else k + 1  # both wanted ranks must fall in the middle part
        if c_lo <= k and need <= c_lo + c_mid:
            wpos = 0
            for r in range(n):  # no branch: position wpos <= r is read already
                v = buf[r]
                buf[wpos] = v
                wpos += 1 if (v >= lo_v) & (v <= hi_v) else 0
            return pair_select(buf, c_mid, k - c_lo)
    return pair_select(buf, n, k)


@njit(cache=True, error_model="numpy")
def kth_pair(buf, n, k):
    """(x_(k), x_(k+1)) of buf[0:n] (0-based order statistics; NaN where k + 1 == n); overwrites buf[0:n]
    (``kth_pair_sampled`` with its sample allocated here)."""
    return kth_pair_sampled(buf, n, k, np.empty(SELECT_SAMPLE))


@register_jitable
def quantile7_sampled(buf, n, p, sample):
    """R's quantile(buf[0:n], p, type=7) by ``kth_pair_sampled`` (``sample``: its scratch); overwrites buf[0:n];
    allocates nothing (CUDA kernels)."""
    if n == 0:
        return math.nan
    a, b = kth_pair_sampled(buf, n, quantile7_low_index(n, p), sample)
    return quantile7_pair(n, p, a, b)


@njit(cache=True, error_model="numpy")
def quantile7_select(buf, n, p):
    """R's quantile(buf[0:n], p, type=7); overwrites buf[0:n] (selection instead of a full sort:
    ``quantile7_sampled`` with its sample allocated here)."""
    return quantile7_sampled(buf, n, p, np.empty(SELECT_SAMPLE))


@njit(cache=True, error_model="numpy")
def kth_pair_with_zeros(buf, n, zeros, k):
    """``kth_pair`` of the multiset buf[0:n] (values >= 0) plus ``zeros`` more zeros, without the zeros being
    stored: (x_(k), x_(k+1)), 0-based, NaN where k + 1 is past the end; overwrites buf[0:n]."""
    if k + 1 < zeros:
        return 0.0, 0.0
    if k < zeros:  # k == zeros - 1: the next one is buf's smallest
        if n == 0:
            return 0.0, math.nan
        b = buf[0]
        for r in range(1, n):
            if buf[r] < b:
                b = buf[r]
        return 0.0, b
    return kth_pair(buf, n, k - zeros)


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
def positive_support(p, pos, pv):
    """The positions with p > 0 (into pos) and their values (into pv), in increasing order; returns their number.
    ``pos``, ``pv``: length >= len(p)."""
    n = 0
    for i in range(p.shape[0]):
        v = p[i]
        pos[n] = i
        pv[n] = v
        n += 1 if v > 0.0 else 0
    return n


@njit(cache=True, error_model="numpy")
def segment_ends_sparse(x, pos, pv, n, flags, h, alpha, no_merge, t_hi, t_lo, min_seg, stat, work):
    """From the statistic of ``x`` (m >= 1) given on its support, pv[c] at position pos[c] (c < n, increasing
    positions; 0 everywhere else): local maxima, breakpoints and merging. Marks the final segment ends in
    ``flags`` (m, zero on entry) with 1 and returns their number. ``stat`` (n), ``work`` (m): scratch."""
    m = x.shape[0]
    local_maxima(pos, pv, n, m, h, stat)
    _mark_breakpoints(pos, stat, n, m, flags, alpha, work)
    flags[m - 1] = 2
    if no_merge:
        return _unmerged_ends(flags)
    return _merged_ends(x, flags, work, t_hi, t_lo, min_seg)


@njit(cache=True, error_model="numpy")
def local_maxima(pos, pv, n, m, h, stat):
    """stat[c] = pv[c] where no position within h of pos[c] has a larger statistic, else 0 (support as in
    ``segment_ends_sparse``; positions off the support hold 0 and never exceed a value)."""
    for c in range(n):
        v = pv[c]
        i = pos[c]
        if has_neighbourhood(i, h, m) and v > 0.0:
            r = c - 1
            while r >= 0 and pos[r] >= i - h:
                if pv[r] > v:
                    v = 0.0
                    break
                r -= 1
            r = c + 1
            while v > 0.0 and r < n and pos[r] <= i + h:
                if pv[r] > v:
                    v = 0.0
                    break
                r += 1
        stat[c] = v


@njit(cache=True, error_model="numpy")
def _mark_breakpoints(pos, stat, n, m, flags, alpha, work):
    """flags[i] = 2 ("an initial segment ends at i") where the local-maximum statistic (``stat`` on the support,
    0 elsewhere) is above the (1 - alpha) quantile of all m values (alpha < 1) or among the floor(alpha) largest
    (ties taken by position)."""
    for c in range(n):
        work[c] = stat[c]
    if alpha < 1.0:
        a, b = kth_pair_with_zeros(work, n, m - n, quantile7_low_index(m, 1.0 - alpha))
        thr = quantile7_pair(m, 1.0 - alpha, a, b)
        for c in range(n):
            if stat[c] > thr:
                flags[pos[c]] = 2
        return
    k = breakpoint_count(alpha, m)
    if k == 0:
        return
    kth = kth_pair_with_zeros(work, n, m - n, m - k)[0]  # the k-th largest value
    above = 0
    for c in range(n):
        if stat[c] > kth:
            above += 1
    ties = k - above  # ties with the k-th value are taken by position
    if kth > 0.0:  # every tie is on the support
        for c in range(n):
            if stat[c] > kth:
                flags[pos[c]] = 2
            elif stat[c] == kth and ties > 0:
                flags[pos[c]] = 2
                ties -= 1
        return
    c = 0
    for i in range(m):  # kth == 0: the zeros off the support tie too
        v = 0.0
        if c < n and pos[c] == i:
            v = stat[c]
            c += 1
        if v > kth:
            flags[i] = 2
        elif v == kth and ties > 0:
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


__all__ = ["VAR_FLOOR", "EPS_QUANTILE", "DIRTY_INF", "DIRTY_NAN", "task_rows", "local_half_width",
           "has_neighbourhood", "breakpoint_count", "window_scratch", "dirt", "clean", "sample_sd", "welford_var",
           "abs_diffs", "vector_scale", "vector_constants", "pair_select", "kth_pair_sampled", "kth_pair",
           "kth_pair_with_zeros", "quantile7_sampled", "quantile7_select", "median_of", "positive_support",
           "segment_ends_sparse", "local_maxima", "segment_bounds", "fill_segments"]
