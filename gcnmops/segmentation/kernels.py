"""The segmentation's per-position arithmetic, one ``register_jitable`` source for the numba CPU drivers
(segmentation/cpu.py, the host passes of segmentation/gpu.py and finish.py) and the numba.cuda kernels
(segmentation/device_kernels.py, compiled without FMA contraction by cuda/nofma.py), so that both round alike.

- ``prefix_sums``: S, Q = running sums of x and x^2, the windows' sums are differences of them;
- ``is_candidate``: whether position i is a candidate breakpoint (the only positions with p_i > 0);
  ``candidate_count``: how many x has;
- ``window_t`` .. ``position_stat_plain``: the per-position statistic p_i, the largest q = -log P(T_dof > t)
  of cyber-t tests between growing windows left and right of i (``position_stat_plain`` is the definition,
  ``position_scan`` the screened evaluation, see segmentation/cpu.py), and ``scan_position``: p_i with the
  window it is the exact tail of.

Callers pass every buffer (no allocation here); the t tail is exact/tdist.py's, register_jitable too.
"""
from __future__ import annotations

import math

import numpy as np
from numba.extending import register_jitable

from ..exact.tdist import (APPROX1_ERR, APPROX1_MAX_T, APPROX1_MIN_DOF, APPROX2_ERR, APPROX2_MAX_T, APPROX2_MIN_DOF,
                           SMALL_ABS_ERR, SMALL_REL_ERR, approx_error_bound, log1p_fast, small_t, t_neglog_upper,
                           t_tail_deviate_approx, t_tail_deviate_small)

#: added to the variance sum under the square root of the t statistic
T_VAR_EPS = 1e-15


@register_jitable
def prefix_sums(x, S, Q):
    """S, Q = running sums of x and x^2 (left to right: the order every caller relies on)."""
    acc_s = 0.0
    acc_q = 0.0
    for i in range(x.shape[0]):
        v = x[i]
        acc_s += v
        acc_q += v * v
        S[i] = acc_s
        Q[i] = acc_q


@register_jitable
def candidate_range(m, min_seg):
    """(lo, hi): the positions i with lo <= i < hi of a vector of length m have room for both min_seg-windows."""
    return min_seg + 1, m - min_seg - 1


@register_jitable
def jump_exceeds(x, i, eps):
    """Whether the jump |x[i+1] - x[i]| exceeds eps."""
    return abs(x[i + 1] - x[i]) > eps


@register_jitable
def is_candidate(x, i, min_seg, eps):
    """Whether position i of x (breakpoint between i and i+1) is a candidate: both min_seg-windows fit
    (``candidate_range``) and the jump |x[i+1] - x[i]| exceeds eps. Other positions have p_i = 0."""
    lo, hi = candidate_range(x.shape[0], min_seg)
    return i >= lo and i < hi and jump_exceeds(x, i, eps)


@register_jitable
def candidate_count(x, min_seg, eps):
    """The number of candidate positions of x (``is_candidate``, without a branch)."""
    nc = 0
    lo, hi = candidate_range(x.shape[0], min_seg)
    for i in range(lo, hi):
        nc += jump_exceeds(x, i, eps)
    return nc


@register_jitable
def window_count(min_seg, max_int):
    """Scratch length of the per-position window buffers: max_int - min_seg + 1, at least 1."""
    nwin = max_int - min_seg + 1
    if nwin < 1:
        nwin = 1
    return nwin


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
    sl = (Q[i] - Q[lo]) - n1 * ml * ml  # cn.mops: (j+1)*meanLeft*meanLeft, left to right
    sr = (Q[hi] - Q[i]) - n1 * mr * mr
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
def window_fits(i, j, m, max_int):
    """Whether window half-width j is evaluated at position i of m: j <= max_int and both windows fit."""
    return j <= max_int and i + j + 1 < m and i - j - 1 >= 0


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
    while d <= delta and window_fits(i, j, m, max_int):
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
def window_deviates_small(S, Q, i, j0, nj, w, V, ybuf, ebuf):
    """Where a window j = j0 + r (r < nj) at position i has a small t (``small_t``): ybuf[r], ebuf[r] = the series'
    deviate (``t_tail_deviate_small``) and its bound, from ``window_t``'s own t and dof (the rounding the exact
    tail sees: a tail near log 2 is decided by its last bits). Branch-free (vectorizes); other windows keep theirs.
    """
    for r in range(nj):
        t, dof = window_t(S, Q, i, j0 + r, w, V)
        small = small_t(t, dof)
        ys = t_tail_deviate_small(t, dof)
        es = SMALL_REL_ERR * t + SMALL_ABS_ERR
        ybuf[r] = ys if small else ybuf[r]
        ebuf[r] = es if small else ebuf[r]


@register_jitable
def order_windows(ybuf, ebuf, nj, delta):
    """The window loop of ``position_stat_plain`` on approximations y -+ e of the windows' deviates (finite bounds):
    returns (decided, rb, low, high). A consecutive pair closer than their bounds allow (a tie) leaves open
    whether the tail rose, so where the windows stop: dlo counts the run of non-rises taking every tie for a rise,
    dhi taking it for a non-rise; the loop stops somewhere from the first window where dhi exceeds delta
    (``early``) to the first where dlo does. decided: the largest approximation, window rb, is one of the windows
    up to ``early`` (seen however the ties fall) and clears every other window up to the latest stop by the
    bounds, so it is p_i's window whatever the ties are. Always: p_i's deviate lies in [low, high], the largest
    lower bound of the windows up to ``early`` (position_stat evaluates them all) and the largest upper bound up
    to the latest stop. Written with selects (the data-dependent branches mispredict)."""
    dlo = 0
    dhi = 0
    early = nj - 1
    ymax = -math.inf
    eb = 0.0  # the bound of the largest
    others = -math.inf  # the largest upper bound among the others
    yprev = -math.inf
    eprev = 0.0
    rb = 0
    for r in range(nj):
        y = ybuf[r]
        e = ebuf[r]
        diff = y - yprev
        tied = abs(diff) <= e + eprev
        rise = diff > 0.0
        dlo = 0 if rise or tied else dlo + 1
        dhi = 0 if rise and not tied else dhi + 1
        early = r if dhi > delta and r < early else early
        big = y > ymax
        up = ymax + eb if big else y + e
        others = up if up > others else others
        rb = r if big else rb
        eb = e if big else eb
        ymax = y if big else ymax
        yprev = y
        eprev = e
        if dlo > delta:
            break
    low = -math.inf
    for r in range(early + 1):
        yl = ybuf[r] - ebuf[r]
        low = yl if yl > low else low
    high = ymax + eb
    high = others if others > high else high
    return rb <= early and others < ymax - eb, rb, low, high


@register_jitable
def _bounded(ebuf, nj):
    """Whether every window's approximation has a finite bound."""
    emax = 0.0
    for r in range(nj):
        e = ebuf[r]
        emax = e if e > emax else emax
    return emax < math.inf


#: ``screen_windows``'s answers: the windows' order decides p_i's window (DECIDED), it does not but every window has
#: an error bound (BOUNDED: an interval of p_i's deviate), or some window lies outside the approximations (UNBOUNDED)
DECIDED = 0
BOUNDED = 1
UNBOUNDED = 2
#: added to the half-width of a BOUNDED interval: its centre and half-width round (far below every error bound)
BOUND_SLACK = 1e-12


@register_jitable
def screen_windows(S, Q, i, m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf):
    """Screen candidate position i (delta >= 0) by the windows' approximate deviates: returns (state, value,
    jbest, err). DECIDED: the windows' tail values are ordered unambiguously by their approximations; value is
    the approximate normal deviate of the largest, within ``err`` of the exact deviate of p_i, and p_i is the
    exact tail of window jbest. BOUNDED: value -+ err contains the exact deviate of p_i (``position_stat``
    decides it). UNBOUNDED: no bound (``position_stat`` decides).

    Hill's deviates first (``window_deviates``); where they leave the order open, the windows of small t get the
    series' far tighter bounds (``window_deviates_small``: near-constant stretches, whose windows' tails all lie
    near log 2) and the order is tried again.
    """
    nj = window_limit(i, m, max_int) - min_seg + 1
    window_deviates(S, Q, i, min_seg, nj, w, V, jinv, jnn, jc, ybuf, ebuf)
    if _bounded(ebuf, nj):
        decided, rb, low, high = order_windows(ybuf, ebuf, nj, delta)
        if decided:
            return DECIDED, ybuf[rb], min_seg + rb, ebuf[rb]
    window_deviates_small(S, Q, i, min_seg, nj, w, V, ybuf, ebuf)
    if not _bounded(ebuf, nj):
        return UNBOUNDED, 0.0, min_seg, 0.0
    decided, rb, low, high = order_windows(ybuf, ebuf, nj, delta)
    if decided:
        return DECIDED, ybuf[rb], min_seg + rb, ebuf[rb]
    return BOUNDED, 0.5 * (high + low), min_seg, 0.5 * (high - low) + BOUND_SLACK


@register_jitable
def position_scan(S, Q, i, m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf, qbuf):
    """Screen candidate position i: returns (value, jbest, err, exact).

    exact == True: value is p_i itself (``position_stat``). exact == False: the windows' tail values are
    ordered unambiguously by their approximations (``screen_windows``: DECIDED); value is the approximate normal
    deviate of the largest, within ``err`` of the exact deviate of p_i, and p_i is the exact tail of window
    jbest. The common case evaluates no exact tail at all.
    """
    if delta < 0:
        return 0.0, min_seg, 0.0, True  # no window is evaluated at all
    state, val, jb, err = screen_windows(S, Q, i, m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf)
    if state == DECIDED:
        return val, jb, err, False
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
    while d <= delta and window_fits(i, j, m, max_int):
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

@register_jitable
def scan_position(S, Q, i, m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf, qbuf):
    """(p_i, j*): the statistic of candidate position i as segmentation/cpu.py computes it (``position_scan``;
    a screened maximum gets its exact tail) and the window j* whose exact tail it is (-1: none, p_i = 0).
    ``qbuf`` must hold NaN beyond the windows position_stat evaluates: the argmax is read off it."""
    for r in range(qbuf.shape[0]):
        qbuf[r] = math.nan
    val, jb, err, exact = position_scan(S, Q, i, m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf,
                                        qbuf)
    if not exact:
        return exact_tail(S, Q, i, jb, w, V), jb
    js = -1
    for r in range(qbuf.shape[0]):
        if qbuf[r] == val:
            js = min_seg + r
            break
    return val, js


__all__ = ["T_VAR_EPS", "CANCELLATION_LIMIT", "prefix_sums", "candidate_range", "jump_exceeds", "is_candidate",
           "window_count", "window_t", "window_fits", "window_limit", "window_constants", "window_deviates",
           "position_stat", "DECIDED", "BOUNDED", "UNBOUNDED", "window_deviates_small", "order_windows",
           "screen_windows", "position_scan", "exact_tail",
           "position_stat_plain", "scan_position"]
