"""The segmentation's host pass after the GPU statistic (segmentation/gpu.py): from the GPU's p at the candidate
positions, each standing for the interval p (1 -+ TAU), the breakpoints and merging of every vector, recomputing
on the CPU, exactly, the positions whose intervals leave a decision open (gpu.py's docstring says which and why);
then the final segments' bounds, means and medians where the vectors are on the host only. numba, parallel over
vectors.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from ..exact.rstats import quantile7_low_index
from ..exact.tdist import t_neglog_upper
from .host import (breakpoint_count, fill_segments, has_neighbourhood, kth_pair_with_zeros, local_half_width,
                   segment_bounds, segment_ends_sparse, window_scratch)
from .kernels import candidate_range, jump_exceeds, prefix_sums, scan_position, window_t


@njit(cache=True, error_model="numpy")
def _exact_p(S, Q, i, m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf, qbuf, js, full, memo):
    """The CPU's p_i: the CPU's exact tail of the GPU's best window ``js`` (the window arithmetic is
    IEEE-identical, so this is the CPU's own maximum unless two of the position's windows have tails within
    rounding of each other), or with ``full`` (or js < 0) the whole CPU scan (cpu._final_ends). ``memo``:
    (t, dof, tail) of the last tail computed here, reused for the same (t, dof): the two sides of a one-region
    spike often have the same window statistic."""
    if js >= 0 and not full:
        t, dof = window_t(S, Q, i, js, w, V)
        if not (t == memo[0] and dof == memo[1]):
            memo[0] = t
            memo[1] = dof
            memo[2] = t_neglog_upper(t, dof)
        return memo[2]
    return scan_position(S, Q, i, m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf, qbuf)[0]


@njit(cache=True, error_model="numpy")
def _statuses(pos, p, js, n, m, exact, tau, h, S, Q, w, V, ties, keys, status, slo, sup):
    """Local-maximum status of every candidate c (position pos[c], statistic p[c]; the others are 0) from the
    intervals (exact values: points) and the bounds of its statistic: status 0 = surely a local maximum
    (stat = p), 1 = surely not (stat = 0), 2 = undecided (stat = 0 or p: bounds [0, p_up]). Only candidates can
    be neighbours that decide: a 0 is never above a positive value. With ``ties``, a neighbour whose interval
    overlaps c's but which has c's GPU value and (t, dof) (``same_tail``; ``keys``: its cache, NaN on entry) is
    decided: its exact value is c's, and ``_mark_tie_partners`` keeps the two values equal."""
    for c in range(n):
        v = p[c]
        i = pos[c]
        vlo = v if exact[c] else v * (1.0 - tau)
        vup = v if exact[c] else v * (1.0 + tau)
        st = 0
        if has_neighbourhood(i, h, m) and v > 0.0:
            for r in range(max(c - h, 0), min(c + h + 1, n)):  # candidates within h positions are within h entries
                if r == c or abs(pos[r] - i) > h:
                    continue
                nst = _neighbour_status(p[r], exact[r], tau, vlo, vup, st)
                if nst == 2 and st != 2 and ties and p[r] == v and same_tail(S, Q, pos, js, c, r, w, V, keys):
                    nst = st
                st = nst
        status[c] = st
        if st == 0:
            slo[c] = vlo
            sup[c] = vup
        elif st == 1:
            slo[c] = 0.0
            sup[c] = 0.0
        else:
            slo[c] = 0.0
            sup[c] = vup


@register_jitable
def same_tail(S, Q, pos, js, c, r, w, V, keys):
    """Whether the best windows of candidates c and r (``js``, the GPU's) give bit-identical (t, dof): their
    exact values, the exact tails of those windows, are then equal, neither above the other. ``keys`` (n, 2):
    each candidate's (t, dof) once computed, NaN before."""
    if js[c] < 0 or js[r] < 0:
        return False
    for k in (c, r):
        if keys[k, 0] != keys[k, 0]:
            keys[k, 0], keys[k, 1] = window_t(S, Q, pos[k], js[k], w, V)
    return keys[c, 0] == keys[r, 0] and keys[c, 1] == keys[r, 1]


@register_jitable
def _neighbour_status(pr, exact_r, tau, vlo, vup, st):
    """The status so far (``_statuses``) after one more neighbour with statistic pr: 1 once a neighbour is surely
    larger, 2 while one may be larger."""
    if st == 1:
        return 1
    rlo = pr if exact_r else pr * (1.0 - tau)
    rup = pr if exact_r else pr * (1.0 + tau)
    if rlo > vup:  # surely p_r > p_i
        return 1
    if not rup <= vlo:  # p_r > p_i possible: undecided (unless another neighbour decides)
        return 2
    return st


@register_jitable
def _threshold_ranks(alpha, m):
    """(r_lo, r_hi): the 0-based ranks of the order statistics the breakpoint threshold is made of (-1: none)."""
    if alpha < 1.0:
        r_lo = quantile7_low_index(m, 1.0 - alpha)
        return r_lo, r_lo + 1 if r_lo + 1 < m else r_lo
    k = breakpoint_count(alpha, m)
    if k > 0:
        return m - k, m - k
    return -1, -1


@njit(cache=True, error_model="numpy")
def _mark_open(pos, p, js, n, m, exact, tau, h, r_lo, r_hi, S, Q, w, V, ties, keys, status, slo, sup, wk):
    """Mark (status bit 4) the candidates that must be exact: those whose statistic's bounds overlap [T_lo, T_up]
    (the span of the order statistics r_lo, r_hi of all m positions) and their undecided neighbours (``_statuses``
    with S, Q, w, V, ``ties``, ``keys``). Returns the number of marks. ``wk``: scratch (n)."""
    _statuses(pos, p, js, n, m, exact, tau, h, S, Q, w, V, ties, keys, status, slo, sup)
    for c in range(n):
        wk[c] = slo[c]
    t_low = kth_pair_with_zeros(wk, n, m - n, r_lo)[0]
    for c in range(n):
        wk[c] = sup[c]
    t_up = kth_pair_with_zeros(wk, n, m - n, r_hi)[0]
    nmark = 0
    for c in range(n):
        if sup[c] >= t_low and slo[c] <= t_up and sup[c] > 0.0:
            if not exact[c]:
                status[c] |= 4
                nmark += 1
            if (status[c] & 3) == 2:
                i = pos[c]
                for r in range(c - 1, -1, -1):
                    if pos[r] < i - h:
                        break
                    if not exact[r] and p[r] > 0.0:
                        status[r] |= 4
                        nmark += 1
                for r in range(c + 1, n):
                    if pos[r] > i + h:
                        break
                    if not exact[r] and p[r] > 0.0:
                        status[r] |= 4
                        nmark += 1
    if ties and nmark:
        nmark += _mark_tie_partners(pos, p, js, n, exact, h, S, Q, w, V, keys, status)
    return nmark


@njit(cache=True, error_model="numpy")
def _mark_tie_partners(pos, p, js, n, exact, h, S, Q, w, V, keys, status):
    """Mark (status bit 4) every tie partner of a marked candidate, and theirs in turn: a neighbour within h with
    the same GPU value and the same (t, dof) (``same_tail``), whose comparison ``_statuses`` decided as a tie. Both
    then get the one exact value, so the local maxima compare them equal as they compared their GPU values.
    Returns the number of marks added."""
    added = 0
    changed = True
    while changed:
        changed = False
        for c in range(n):
            if not status[c] & 4:
                continue
            for r in range(max(c - h, 0), min(c + h + 1, n)):
                if (r != c and not status[r] & 4 and not exact[r] and p[r] == p[c] and abs(pos[r] - pos[c]) <= h
                        and same_tail(S, Q, pos, js, c, r, w, V, keys)):
                    status[r] |= 4
                    added += 1
                    changed = True
    return added


@njit(cache=True, error_model="numpy")
def _candidate_positions(x, min_seg, eps, pos):
    """pos[c] = the position of the c-th candidate of x (``is_candidate``); returns their number. ``pos``: length
    >= len(x)."""
    n = 0
    lo, hi = candidate_range(x.shape[0], min_seg)
    for i in range(lo, hi):  # no branch: a quarter of the positions are candidates, in no predictable order
        pos[n] = i
        n += jump_exceeds(x, i, eps)
    return n


@njit(cache=True, error_model="numpy")
def _finish_one(x, pos, p, js, n, full, V, t_hi, t_lo, alpha, no_merge, min_seg, delta, max_int, w, tau, flags,
                exact, status, fscratch, work, jinv, jnn, jc, ybuf, ebuf, qbuf):
    """Breakpoints and merging of one clean vector x from its GPU statistic p[c] at the candidate positions pos[c]
    (c < n; p modified in place where recomputed). flags (zero on entry): 1 where a final segment ends. Returns
    (count, recomputed). ``fscratch``: float64 of length >= 2 len(x) + 6 n; ``work``: len(x).

    Candidates whose statistic's bounds overlap [T_lo, T_up] (the span of the order statistics the threshold
    is made of) get exact CPU values, and so do the undecided neighbours of such positions; bounds only
    shrink when values are recomputed, so one round leaves every overlapping position exact with a decided
    local-maximum status (see the module's docstring for why that fixes every decision)."""
    m = x.shape[0]
    if m == 0:
        return 0, 0
    S = fscratch[0:m]
    Q = fscratch[m:2 * m]
    slo = fscratch[2 * m:2 * m + n]
    sup = fscratch[2 * m + n:2 * m + 2 * n]
    wk = fscratch[2 * m + 2 * n:2 * m + 3 * n]
    stat = fscratch[2 * m + 3 * n:2 * m + 4 * n]
    keys = fscratch[2 * m + 4 * n:2 * m + 6 * n].reshape((n, 2))
    keys[:] = math.nan
    h = local_half_width(min_seg)
    memo = np.full(3, math.nan)
    # exact where known: no window evaluated gives 0 on both sides; non-finite values (never seen) are
    # recomputed so that the intervals stay finite
    nre = 0
    if n > 0:
        prefix_sums(x, S, Q)
    for c in range(n):
        exact[c] = p[c] == 0.0
        if math.isnan(p[c]) or math.isinf(p[c]):
            p[c] = _exact_p(S, Q, pos[c], m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf, qbuf, js[c],
                            full, memo)
            exact[c] = True
            nre += 1
    r_lo, r_hi = _threshold_ranks(alpha, m)
    if r_lo >= 0 and _mark_open(pos, p, js, n, m, exact, tau, h, r_lo, r_hi, S, Q, w, V, not full, keys, status, slo,
                                sup, wk):
        for c in range(n):
            if status[c] & 4:
                p[c] = _exact_p(S, Q, pos[c], m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf, qbuf,
                                js[c], full, memo)
                exact[c] = True
                nre += 1
    # the rest of cpu._final_ends on the (now decision-equivalent) statistic
    return segment_ends_sparse(x, pos, p, n, flags, h, alpha, no_merge, t_hi, t_lo, min_seg, stat, work), nre


@njit(parallel=True, cache=True, error_model="numpy", nogil=True)
def _finish_all(xt, offs, coffs, p_c, j_c, full, vec_eps, vec_V, vec_thi, vec_tlo, alpha, no_merge, min_seg, delta,
                max_int, w, tau, flags, counts, recomputed, first_task, end_task):
    """``_finish_one`` of vectors first_task:end_task (``HostVectors``'s order; p_c modified in place where
    recomputed; flags zero on entry)."""
    for task in prange(first_task, end_task):
        o = offs[task]
        m = offs[task + 1] - o
        x = xt[o:o + m]
        c0 = coffs[task]
        n = coffs[task + 1] - c0
        pos = np.empty(m, dtype=np.int64)
        _candidate_positions(x, min_seg, vec_eps[task], pos)
        jinv, jnn, jc, ybuf, ebuf, qbuf = window_scratch(min_seg, max_int, w)
        c, nre = _finish_one(x, pos, p_c[c0:c0 + n], j_c[c0:c0 + n], n, full, vec_V[task], vec_thi[task],
                             vec_tlo[task], alpha, no_merge, min_seg, delta, max_int, w, tau, flags[o:o + m],
                             np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.int8), np.empty(2 * m + 6 * n),
                             np.empty(m), jinv, jnn, jc, ybuf, ebuf, qbuf)
        counts[task] = c
        recomputed[task] = nre


@njit(parallel=True, cache=True, error_model="numpy", nogil=True)
def _fill_all(xt, offs, flags, out_off, out_start, out_end, out_mean, out_median):
    """Start, end (1-based, block-relative), mean and median of every final segment (host.fill_segments on
    ``HostVectors``'s layout; vector v's segments go to out_off[v]:)."""
    for task in prange(offs.shape[0] - 1):
        f = offs[task]
        e = offs[task + 1]
        fill_segments(xt[f:e], flags[f:e], out_off[task], out_start, out_end, out_mean, out_median)


@njit(parallel=True, cache=True, error_model="numpy", nogil=True)
def _bounds_all(offs, flags, out_off, out_start, out_end):
    """Start and end (1-based, block-relative) of every final segment (host.segment_bounds per vector; vector v's
    segments go to out_off[v]:)."""
    for task in prange(offs.shape[0] - 1):
        segment_bounds(flags[offs[task]:offs[task + 1]], out_off[task], out_start, out_end)
