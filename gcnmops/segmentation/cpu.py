"""cn.mops's fast segmentation (``segment``), for one vector and batched over a regions x samples matrix.

Behaviour: spec/20-segmentation-and-calls.md, part 1. Outline, per vector x of length m:

1. clean x (+-Inf -> largest / smallest finite value, NaN -> 0); eps (default: the 0.75 quantile of
   |diff(x)|), the merge thresholds (default +-2 sd(x)) and the global variance V (Welford);
2. per candidate position i the statistic p_i: the largest q = -log P(T_dof > t) of cyber-t tests between
   growing windows left and right of i (``position_stat_plain`` is the definition). This is the heavy part
   (about 38 windows per candidate): ``position_scan`` orders the windows' tails by a cheap vectorized
   approximation (tdist.t_tail_deviate_approx) within error bounds 100 times its measured error, and the
   exact tail (tdist.t_neglog_upper, R's pt()) is evaluated only where it decides something: near-ties,
   the best window of positions that can reach the breakpoint threshold, windows outside the
   approximation's range.
   The result is identical to evaluating every tail exactly (tests compare with ``reference=True``);
3. local maxima within floor(minSeg/2), breakpoints above the (1 - alpha) quantile (or the floor(alpha)
   largest), initial segments and their medians;
4. segments with median beyond the thresholds are merged into gain / loss runs, runs shorter than minSeg
   are dropped, the gaps between runs become segments; every final segment gets its mean and median.

The scalar kernels (``window_t``, ``window_deviates``, ``position_stat*``, ``position_scan``, ``exact_tail``
and the t tail in exact/tdist.py) are ``register_jitable``: the same source compiles for the numba CPU drivers
here and for numba.cuda kernels (callers pass every buffer). Everything else is numba-compiled CPU code,
parallel over the (chromosome block, sample) vectors.
"""
from __future__ import annotations

import logging
import math
from numbers import Real

import numpy as np
import pandas as pd
from numba import njit, prange
from numba.extending import register_jitable

from ..errors import InputError
from ..exact.rstats import ld_mean, median_inplace, quantile7_low_index, quantile7_sorted, select_kth
from ..exact.tdist import (APPROX1_ERR, APPROX1_MAX_T, APPROX1_MIN_DOF, APPROX2_ERR, APPROX2_MAX_T, APPROX2_MIN_DOF, approx_error_bound, log1p_fast, t_neglog_upper, t_tail_deviate_approx)

log = logging.getLogger("gcnmops")

#: added to the variance sum under the square root of the t statistic
T_VAR_EPS = 1e-15
#: floor of the global variance
VAR_FLOOR = 1e-15
#: floor of cyberWeight inside the statistic
CYBER_FLOOR = 0.01

INF_MESSAGE = "Infinite values were replaced by the largest / smallest finite value before segmentation."
NA_MESSAGE = "NA values were replaced by 0 before segmentation."


# ---------------------------------------------------------------------------------------------------------
# scalar kernels (single source for CPU and GPU)
# ---------------------------------------------------------------------------------------------------------

@register_jitable
def window_t(S, Q, i, j, w, V):
    """Cyber-t statistic and Welch dof between x[i-j..i] and x[i+1..i+j+1] (prefix sums S, Q of x, x^2).

    Returns (t, dof); requires i - j - 1 >= 0 and i + j + 1 < len(x).
    """
    n1 = j + 1.0
    lo = i - j - 1
    hi = i + j + 1
    ml = (S[i] - S[lo]) / n1
    mr = (S[hi] - S[i]) / n1
    sl = (Q[i] - Q[lo]) - n1 * (ml * ml)
    sr = (Q[hi] - Q[i]) - n1 * (mr * mr)
    nn = j + w - 1.0
    vl = (sl + w * V) / nn
    vr = (sr + w * V) / nn
    a = vl / (nn + 1.0)
    b = vr / (nn + 1.0)
    t = abs(ml - mr) / math.sqrt(a + b + T_VAR_EPS)
    ab = a + b
    dof = (ab * ab) / ((a * a) / nn + (b * b) / nn)
    return t, dof


@register_jitable
def window_limit(i, m, max_int):
    """The largest window half-width j that fits around position i (j <= max_int, i-j-1 >= 0, i+j+1 < m)."""
    jl = max_int
    if i - 1 < jl:
        jl = i - 1
    if m - i - 2 < jl:
        jl = m - i - 2
    return jl


#: the screening approximation is not used where a window's sum of squares exceeds this multiple of its
#: (prior-augmented) sum of squared deviations: there the cancellation in the latter would amplify the
#: rounding differences between ``window_deviates`` and ``window_t`` beyond ~1e-10
CANCELLATION_LIMIT = 1e5


@register_jitable
def window_constants(min_seg, nwin, w, jinv, jnn, jc):
    """Per window half-width j = min_seg + r (r < nwin): jinv[r] = 1 / (j + 1), jnn[r] = nn = j + w - 1
    and jc[r] = 1 / (nn (nn + 1)), the constants of ``window_deviates``."""
    for r in range(nwin):
        j = min_seg + r
        nn = j + w - 1.0
        jinv[r] = 1.0 / (j + 1.0)
        jnn[r] = nn
        jc[r] = 1.0 / (nn * (nn + 1.0))


@register_jitable
def window_deviates(S, Q, i, j0, nj, w, V, jinv, jnn, jc, ybuf, ebuf):
    """For the windows j = j0 + r (r < nj) at position i: ybuf[r] = the approximate normal deviate
    (``t_tail_deviate_approx``) of the tail, ebuf[r] = its error bound (``approx_error_bound``; inf where
    the approximation is not valid and the exact tail must be used).

    The same t and dof as ``window_t`` up to rounding: divisions by constants are replaced by products with
    the tables of ``window_constants(j0, ...)`` (element r belongs to j = j0 + r), which changes t^2 by a
    relative 1e-9 at most (CANCELLATION_LIMIT), far below the error bounds. Branch-free arithmetic only:
    the loop vectorizes on the CPU (keep the tables 1-D: a 2-D table makes it three times slower).
    """
    wv = w * V
    lim = CANCELLATION_LIMIT
    t1 = APPROX1_MAX_T * APPROX1_MAX_T
    t2 = APPROX2_MAX_T * APPROX2_MAX_T
    for r in range(nj):
        j = j0 + r
        n1 = j + 1.0
        # unsigned indices (never negative here) spare numba's wraparound select: contiguous vector loads
        lo = np.uint64(i - j - 1)
        hi = np.uint64(i + j + 1)
        inv1 = jinv[r]
        ml = (S[i] - S[lo]) * inv1
        mr = (S[hi] - S[i]) * inv1
        ql = Q[i] - Q[lo]
        qr = Q[hi] - Q[i]
        vl = (ql - n1 * (ml * ml)) + wv
        vr = (qr - n1 * (mr * mr)) + wv
        nn = jnn[r]
        c = jc[r]
        a = vl * c
        b = vr * c
        ab = a + b
        a2b2 = a * a + b * b
        dd = ml - mr
        dd2 = dd * dd
        den = ab + T_VAR_EPS
        # t^2 / dof and dof of window_t
        rr = (dd2 * a2b2) / (den * nn * (ab * ab))
        dof = nn * (ab * ab) / a2b2
        # Hill's deviate (t_tail_deviate_approx) with its two divisions merged
        ah = dof - 0.5
        bh = 48.0 * ah * ah
        y = ah * log1p_fast(rr)
        dn = 0.8 * y * y + 100.0 + bh
        num = (((-0.4 * y - 3.3) * y - 24.0) * y - 85.5) + (y + 3.0) * dn
        yd = (num / (dn * bh) + 1.0) * math.sqrt(y)
        ok = (ql <= lim * vl) & (qr <= lim * vr) & (yd == yd)
        e = APPROX2_ERR if ((dof >= APPROX2_MIN_DOF) & (dd2 <= t2 * den)) else math.inf
        e = APPROX1_ERR if ((dof >= APPROX1_MIN_DOF) & (dd2 <= t1 * den)) else e
        ybuf[r] = yd
        ebuf[r] = e if ok else math.inf


@register_jitable
def position_stat(S, Q, i, m, min_seg, delta, max_int, w, V, ybuf, ebuf, qbuf):
    """p_i of a candidate position i (0-based; breakpoint between i and i+1) of a vector of length m.

    The windows grow from j = min_seg while fewer than ``delta``+1 consecutive tail values failed to
    increase, j <= max_int and both windows fit; p_i is the largest q = -log P(T_dof > t) seen.

    q is evaluated exactly (``t_neglog_upper``) only where it decides something: approximate normal
    deviates (``t_tail_deviate_approx``) order two tail values that differ by more than the sum of their
    error bounds; closer pairs, the candidates for the maximum and windows outside the approximation's
    validity use the exact tail. ``ybuf``, ``ebuf``, ``qbuf``: scratch of length >= max_int - min_seg + 1.
    The result equals ``position_stat_plain`` (every q exact).
    """
    j = min_seg
    d = 0
    k = 0
    while d <= delta and j <= max_int and i + j + 1 < m and i - j - 1 >= 0:
        t, dof = window_t(S, Q, i, j, w, V)
        e = approx_error_bound(t, dof)
        ebuf[k] = e
        if e < math.inf:
            ybuf[k] = t_tail_deviate_approx(t, dof)
            qbuf[k] = math.nan
        else:
            ybuf[k] = math.nan
            qbuf[k] = t_neglog_upper(t, dof)
        if k == 0:
            up = True  # q >= log 2 > 0 = the initial "previous" value
        elif abs(ybuf[k] - ybuf[k - 1]) > ebuf[k] + ebuf[k - 1]:  # False for NaN / inf: exact below
            up = ybuf[k] > ybuf[k - 1]
        else:
            if math.isnan(qbuf[k]):
                qbuf[k] = t_neglog_upper(t, dof)
            if math.isnan(qbuf[k - 1]):
                tp, dofp = window_t(S, Q, i, j - 1, w, V)
                qbuf[k - 1] = t_neglog_upper(tp, dofp)
            up = qbuf[k] > qbuf[k - 1]
        if up:
            d = 0
        else:
            d += 1
        j += 1
        k += 1
    # the maximum: exact values where known, and the exact value of every approximation that may be it
    low = -math.inf
    for r in range(k):
        if ebuf[r] < math.inf and ybuf[r] - ebuf[r] > low:
            low = ybuf[r] - ebuf[r]
    best = 0.0
    for r in range(k):
        if ebuf[r] < math.inf and math.isnan(qbuf[r]) and ybuf[r] + ebuf[r] >= low:
            tr, dofr = window_t(S, Q, i, min_seg + r, w, V)
            qbuf[r] = t_neglog_upper(tr, dofr)
        if qbuf[r] > best:
            best = qbuf[r]
    return best


@register_jitable
def position_scan(S, Q, i, m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf, qbuf):
    """Screen candidate position i: returns (value, jbest, err, exact).

    exact == True: value is p_i itself (``position_stat``). exact == False: the windows' tail values are
    ordered unambiguously by their approximations; value is the approximate normal deviate of the largest,
    within ``err`` of the exact deviate of p_i, and p_i is the exact tail of window jbest.
    The common case evaluates no exact tail at all.
    """
    if delta < 0:
        return 0.0, min_seg, 0.0, True  # no window is evaluated at all
    nj = window_limit(i, m, max_int) - min_seg + 1
    window_deviates(S, Q, i, min_seg, nj, w, V, jinv, jnn, jc, ybuf, ebuf)
    emax = 0.0
    for r in range(nj):
        e = ebuf[r]
        emax = e if e > emax else emax
    if emax < math.inf:
        # the window loop of position_stat_plain on the approximations, written with selects (the data-
        # dependent branches mispredict); any pair closer than the bounds allow sends us to position_stat
        margin = 2.0 * emax
        d = 0
        ymax = -math.inf
        y2 = -math.inf
        yprev = -math.inf
        rb = 0
        tie = False
        for r in range(nj):
            y = ybuf[r]
            diff = y - yprev
            tie = tie | (abs(diff) <= margin)
            d = 0 if diff > 0.0 else d + 1
            big = y > ymax
            y2 = ymax if big else (y if y > y2 else y2)
            rb = r if big else rb
            ymax = y if big else ymax
            yprev = y
            if d > delta:
                break
        if not tie and y2 < ymax - margin:
            return ymax, min_seg + rb, ebuf[rb], False
    return position_stat(S, Q, i, m, min_seg, delta, max_int, w, V, ybuf, ebuf, qbuf), min_seg, 0.0, True


@register_jitable
def exact_tail(S, Q, i, j, w, V):
    """-log P(T_dof > t) of window j at position i."""
    t, dof = window_t(S, Q, i, j, w, V)
    return t_neglog_upper(t, dof)


@register_jitable
def position_stat_plain(S, Q, i, m, min_seg, delta, max_int, w, V):
    """The same p_i as ``position_stat`` with every tail value evaluated exactly (reference; slower)."""
    j = min_seg
    d = 0
    best = 0.0
    prev = 0.0
    while d <= delta and j <= max_int and i + j + 1 < m and i - j - 1 >= 0:
        t, dof = window_t(S, Q, i, j, w, V)
        q = t_neglog_upper(t, dof)
        if q > best:
            best = q
        if q > prev:
            d = 0
        else:
            d += 1
        prev = q
        j += 1
    return best


# ---------------------------------------------------------------------------------------------------------
# per-vector CPU stages
# ---------------------------------------------------------------------------------------------------------

@njit(cache=True, error_model="numpy")
def _clean(x):
    """In place: +Inf -> max finite, -Inf -> min finite, NaN -> 0. Returns (had_inf, had_nan)."""
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
    return had_inf, had_nan


#: vectors at least this long are selected through a sample: two pivots bracketing the wanted rank leave a
#: small middle part for the exact selection (about three times faster than quickselect on everything)
SAMPLED_SELECT_MIN = 4096
SELECT_SAMPLE = 512


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
def _kth_pair(buf, n, k):
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
def _quantile7_select(buf, n, p):
    """R's quantile(buf[0:n], p, type=7); reorders ``buf`` (selection instead of a full sort)."""
    if n == 0:
        return math.nan
    lo = quantile7_low_index(n, p)
    a, b = _kth_pair(buf, n, lo)
    # quantile7_sorted reads the two order statistics at lo and lo + 1
    buf[lo] = a
    if lo + 1 < n:
        buf[lo + 1] = b
    return quantile7_sorted(buf, n, p)


@njit(cache=True, error_model="numpy")
def _sd(x):
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
def _welford_var(x):
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
def _median_of(x, s, e, buf):
    """R's median of x[s:e] (``buf``: scratch of length >= e - s)."""
    n = e - s
    for r in range(n):
        buf[r] = x[s + r]
    if n < SAMPLED_SELECT_MIN:
        return median_inplace(buf, n)
    if n % 2 == 1:
        return _kth_pair(buf, n, n // 2)[0]
    a, b = _kth_pair(buf, n, n // 2 - 1)
    return (a + b) / 2.0  # as median_inplace


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
        med = _median_of(x, s, e, buf)
        return 1 if med > t_hi else (-1 if med < t_lo else 0)
    if c_hi >= h + 1:
        return 1
    return -1 if c_lo >= h + 1 else 0


@njit(cache=True, error_model="numpy")
def _final_ends(x, alpha, t_hi, t_lo, default_t, no_merge, min_seg, eps, eps_given, delta, max_int, w,
                reference, flags, scratch, code, jinv, jnn, jc, ybuf, ebuf, qbuf):
    """Segment one clean vector x: flags[i] = 1 where a final segment ends at i (0-based). Returns the count.

    ``scratch``: float64 work space of length >= 6 * len(x); ``code``: int64 work space of length len(x);
    ``ybuf``, ``ebuf``, ``qbuf``: float64 of length >= max_int - min_seg + 1; ``jinv``, ``jnn``, ``jc``
    from ``window_constants``. ``reference``: evaluate every tail exactly (``position_stat_plain``; slow,
    for verification).
    """
    m = x.shape[0]
    for i in range(m):
        flags[i] = 0
    if m == 0:
        return 0
    S = scratch[0:m]
    Q = scratch[m:2 * m]
    p = scratch[2 * m:3 * m]
    work = scratch[3 * m:4 * m]
    yv = scratch[4 * m:5 * m]
    ev = scratch[5 * m:6 * m]
    # eps: the 0.75 quantile of |diff(x)| unless given
    if not eps_given:
        for i in range(m - 1):
            work[i] = abs(x[i + 1] - x[i])
        eps = _quantile7_select(work, m - 1, 0.75)
    if default_t:
        sd = _sd(x)
        t_hi = 2.0 * sd
        t_lo = -2.0 * sd
    V = _welford_var(x)
    acc_s = 0.0
    acc_q = 0.0
    for i in range(m):
        acc_s += x[i]
        acc_q += x[i] * x[i]
        S[i] = acc_s
        Q[i] = acc_q
    # the statistic, screening: code[i] = 0 (no candidate), -1 (p[i] exact), or the best window j
    # (p_i = the exact tail of window j, yv[i] = its approximate normal deviate, within ev[i])
    for i in range(m):
        p[i] = 0.0
        code[i] = 0
        if i > min_seg and i < m - min_seg - 1 and abs(x[i + 1] - x[i]) > eps:
            if reference:
                p[i] = position_stat_plain(S, Q, i, m, min_seg, delta, max_int, w, V)
                code[i] = -1
                continue
            val, jb, err, exact = position_scan(S, Q, i, m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf,
                                                ebuf, qbuf)
            if exact:
                p[i] = val
                code[i] = -1
            else:
                yv[i] = val
                ev[i] = err
                code[i] = jb
    # exact tails only where they can matter: with alpha < 1 a lower bound B of the order statistic under
    # the threshold (in deviate units) excludes positions whose p_i is surely below it (they cannot be
    # breakpoints, and whatever they suppress is below it too); a placeholder 0 keeps their place
    lower = -math.inf
    h = min_seg // 2 if min_seg > 2 else 0
    if alpha < 1.0:
        for i in range(m):
            low = -math.inf
            if code[i] > 0:
                low = yv[i] - ev[i]
                if h > 0 and i - h > 0 and i + h < m:
                    for r in range(i - h, i + h + 1):
                        if r != i and code[r] != 0 and (code[r] < 0 or yv[r] + ev[r] > low):
                            low = -math.inf
                            break
            work[i] = low
        lower = _kth_pair(work, m, int(math.floor((m - 1) * (1.0 - alpha))))[0]
    for i in range(m):
        if code[i] > 0 and yv[i] + ev[i] >= lower:
            p[i] = exact_tail(S, Q, i, code[i], w, V)
    # local maxima, breakpoints, merging (S is free from here on)
    return segment_ends_from_stat(x, p, S, work, flags, h, alpha, no_merge, t_hi, t_lo, min_seg)


@njit(cache=True, error_model="numpy")
def segment_ends_from_stat(x, p, stat, work, flags, h, alpha, no_merge, t_hi, t_lo, min_seg):
    """From the per-position statistic ``p`` (m) of ``x``: local maxima (into ``stat``), breakpoints and
    merging; marks the final segment ends in ``flags`` (1) and returns their number. ``stat``, ``work``:
    scratch (m). Shared by the CPU and the GPU segmentation."""
    m = x.shape[0]
    for i in range(m):
        v = p[i]
        if h > 0 and i - h > 0 and i + h < m and v > 0.0:
            for r in range(i - h, i + h + 1):
                if p[r] > v:
                    v = 0.0
                    break
        stat[i] = v
    # breakpoints: flags[i] = 2 marks "an initial segment ends at i"
    if alpha < 1.0:
        for i in range(m):
            work[i] = stat[i]
        thr = _quantile7_select(work, m, 1.0 - alpha)
        for i in range(m):
            if stat[i] > thr:
                flags[i] = 2
    else:
        k = int(math.floor(alpha))
        if k > m:
            k = m
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
    flags[m - 1] = 2
    if no_merge:
        count = 0
        for i in range(m):
            if flags[i] == 2:
                flags[i] = 1
                count += 1
            else:
                flags[i] = 0
        return count
    # merging: runs of consecutive initial segments with median > t_hi (gains) or < t_lo (losses);
    # runs of width >= min_seg are kept, the gaps between them become segments
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
def _close_run(flags, s, e, min_seg):
    """Mark the boundaries of a kept run x[s..e] (0-based, inclusive) if it is at least min_seg long."""
    if e - s + 1 >= min_seg:
        if s > 0:
            flags[s - 1] = 1
        flags[e] = 1


@njit(parallel=True, cache=True, error_model="numpy")
def _segment_all(values, firsts, ends, alpha, t_hi, t_lo, default_t, no_merge, min_seg, eps, eps_given,
                 delta, max_int, w, reference, flags, counts, dirty):
    """Phase 1: final segment ends of every (block, sample) vector into ``flags`` (m, N) int8."""
    nb = firsts.shape[0]
    N = values.shape[1]
    nwin = max_int - min_seg + 1
    if nwin < 1:
        nwin = 1
    for task in prange(nb * N):
        b = task // N
        s = task % N
        f = firsts[b]
        e = ends[b]
        m = e - f
        x = values[f:e, s].copy()
        had_inf, had_nan = _clean(x)
        dirty[task] = (1 if had_inf else 0) + (2 if had_nan else 0)
        scratch = np.empty(6 * m)
        code = np.empty(m, dtype=np.int64)
        ybuf = np.empty(nwin)
        ebuf = np.empty(nwin)
        qbuf = np.empty(nwin)
        jinv = np.empty(nwin)
        jnn = np.empty(nwin)
        jc = np.empty(nwin)
        window_constants(min_seg, nwin, w, jinv, jnn, jc)
        counts[task] = _final_ends(x, alpha, t_hi, t_lo, default_t, no_merge, min_seg, eps, eps_given, delta,
                                   max_int, w, reference, flags[f:e, s], scratch, code, jinv, jnn, jc, ybuf,
                                   ebuf, qbuf)


@njit(parallel=True, cache=True, error_model="numpy")
def _fill_segments(values, firsts, ends, flags, offsets, dirty, out_start, out_end, out_mean, out_median):
    """Phase 2: start, end (1-based, block-relative), mean and median of every final segment."""
    nb = firsts.shape[0]
    N = values.shape[1]
    for task in prange(nb * N):
        b = task // N
        s = task % N
        f = firsts[b]
        e = ends[b]
        m = e - f
        if dirty[task] != 0:
            x = values[f:e, s].copy()
            _clean(x)
        else:
            x = values[f:e, s]
        buf = np.empty(m)
        o = offsets[task]
        start = 0
        for i in range(m):
            if flags[f + i, s] != 0:
                out_start[o] = start + 1
                out_end[o] = i + 1
                out_mean[o] = ld_mean(x[start:i + 1], i + 1 - start)  # R's long-double mean
                out_median[o] = _median_of(x, start, i + 1, buf)
                o += 1
                start = i + 1


# ---------------------------------------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------------------------------------

def _number(value, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Real, np.number)):
        arr = np.asarray(value) if not isinstance(value, (str, bytes)) else None
        if arr is not None and arr.shape in ((), (1,)) and arr.dtype.kind in "iuf":
            return float(arr.reshape(()))
        raise InputError(f"{name} must be numeric, got {value!r}.")
    v = float(value)
    if math.isnan(v):
        raise InputError(f"{name} must be numeric, got NaN.")
    return v


def _resolve_params(alpha, seg_median_t, min_seg, eps, delta, max_int, cyber_weight) -> dict:
    """Validate and clamp as cn.mops does; returns the keyword arguments of the compiled drivers."""
    alpha = _number(alpha, "alpha")
    min_seg = _number(min_seg, "minSeg (min_seg)")
    delta = _number(delta, "delta")
    max_int = _number(max_int, "maxInt (max_int)")
    cyber_weight = _number(cyber_weight, "cyberWeight (cyber_weight)")
    if alpha <= 0.0:
        raise InputError(f"alpha must be > 0 (a quantile level in (0, 1) or a number of breakpoints >= 1), "
                         f"got {alpha!r}.")
    if math.isinf(alpha):
        raise InputError("alpha must be finite.")
    for name, v in (("min_seg", min_seg), ("delta", delta), ("max_int", max_int)):
        if math.isinf(v):
            raise InputError(f"{name} must be finite.")
    min_seg = int(min_seg)
    if min_seg < 2:
        min_seg = 2
    max_int = int(max_int)
    if max_int < min_seg + 5:
        max_int = min_seg + 5
    delta = int(delta)
    if cyber_weight < 0:
        cyber_weight = 0.0
    w = max(cyber_weight, CYBER_FLOOR)
    if eps is None:
        eps_given, eps_v = False, 0.0
    else:
        eps_given, eps_v = True, _number(eps, "eps")
    default_t, no_merge, t_hi, t_lo = False, False, 0.0, 0.0
    if seg_median_t is None:
        default_t = True
    else:
        tv = np.asarray(seg_median_t, dtype=object).ravel()
        vals = [_number(v, "segMedianT (seg_median_t)") for v in tv]
        if len(vals) == 1:
            t_hi, t_lo = abs(vals[0]), -abs(vals[0])
        elif len(vals) == 2:
            t_hi, t_lo = vals
        else:
            raise InputError(f"seg_median_t must be one number or a pair (upper, lower), got {seg_median_t!r}.")
        no_merge = t_hi == 0.0 and t_lo == 0.0
    return dict(alpha=alpha, t_hi=float(t_hi), t_lo=float(t_lo), default_t=default_t, no_merge=no_merge,
                min_seg=min_seg, eps=float(eps_v), eps_given=eps_given, delta=delta, max_int=max_int, w=float(w))


# ---------------------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------------------

def checked_columns(values, blocks) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``values`` as a float64 (m, N) order-F matrix and the blocks' first rows and end rows (int64), or
    InputError."""
    values = np.asarray(values)
    if values.ndim == 1:
        values = values.reshape(-1, 1)
    if values.ndim != 2:
        raise InputError("values must be a (regions x samples) matrix.")
    if values.dtype.kind not in "iuf":
        raise InputError("values must be numeric.")
    values = np.asarray(values, dtype=np.float64, order="F")
    blocks = list(blocks)
    firsts = np.array([int(b[0]) for b in blocks], dtype=np.int64)
    ends = np.array([int(b[1]) for b in blocks], dtype=np.int64)
    if ((firsts < 0) | (ends > values.shape[0]) | (ends < firsts)).any():
        raise InputError("blocks must be (first_row, end_row_exclusive) pairs within the matrix.")
    return values, firsts, ends


def segment_columns_arrays(values: np.ndarray, blocks, alpha=0.05, seg_median_t=None, min_seg=3, eps=None,
                           delta=20, max_int=40, cyber_weight=50, *, reference: bool = False) -> dict:
    """Like ``segment_columns`` but returns a dict of arrays (block, sample, start, end, mean, median).

    ``reference=True`` evaluates every t tail exactly instead of screening with the approximation (same
    result, several times slower; for verification).
    """
    values, firsts, ends = checked_columns(values, blocks)
    m, N = values.shape
    params = _resolve_params(alpha, seg_median_t, min_seg, eps, delta, max_int, cyber_weight)
    flags = np.zeros((m, N), dtype=np.int8, order="F")
    ntask = firsts.size * N
    counts = np.zeros(ntask, dtype=np.int64)
    dirty = np.zeros(ntask, dtype=np.int8)
    if ntask:
        _segment_all(values, firsts, ends, params["alpha"], params["t_hi"], params["t_lo"], params["default_t"],
                     params["no_merge"], params["min_seg"], params["eps"], params["eps_given"], params["delta"],
                     params["max_int"], params["w"], bool(reference), flags, counts, dirty)
    if (dirty & 1).any():
        log.info(INF_MESSAGE)
    if (dirty & 2).any():
        log.info(NA_MESSAGE)
    offsets = np.zeros(ntask + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    total = int(offsets[-1])
    out = dict(
        start=np.empty(total, dtype=np.int64), end=np.empty(total, dtype=np.int64),
        mean=np.empty(total, dtype=np.float64), median=np.empty(total, dtype=np.float64),
    )
    if total:
        _fill_segments(values, firsts, ends, flags, offsets, dirty, out["start"], out["end"], out["mean"],
                       out["median"])
    task = np.repeat(np.arange(ntask, dtype=np.int64), counts)
    out["block"] = task // N
    out["sample"] = task % N
    return out


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
    return pd.DataFrame({k: out[k] for k in ("block", "sample", "start", "end", "mean", "median")})


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
    return pd.DataFrame({k: out[k] for k in ("start", "end", "mean", "median")})


__all__ = ["segment", "segment_columns", "segment_columns_arrays", "position_stat", "position_stat_plain",
           "window_t"]
