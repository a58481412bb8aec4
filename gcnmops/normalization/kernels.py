"""The numba kernels of cn.mops's normalization (host, CPU): order statistics, means, modes, variance-to-mean
ratios and scaling of a chromosome block, the coverages of ``norm=2``. The CPU path (cpu.py) calls these (and
the streamed and Dask runs' first passes, for the coverages); factors.py combines their results.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from ..exact.rstats import (ld_add_ld, ld_div, ld_mean, mean_deviation_add, mean_finish, mean_of_two, quantile7_low_index,
                            quantile7_sorted, select_kth, squared_deviation_add)

#: rows whose every value is below this are "silent" (no reads)
SILENT_BELOW = 1.0
#: whole-number data (read counts) spanning fewer values than this (and not many more than their
#: number) get order statistics and modes by counting instead of selection
COUNTING_RANGE = 1 << 22


# --------------------------------------------------------------------------------------------
# numba kernels. A chromosome block is Y[r0:r0 + len(keep), :] of an F-ordered matrix Y (the whole
# output matrix, or a copy of the block): every kernel sees one memory layout, so it compiles once.
# keep[i]: row r0 + i is used. Sums run in row order, so results do not depend on the thread count.


#: rows per task of ``silent_rows``
SILENT_BAND = 1 << 15


@njit(cache=True, parallel=True)
def silent_rows(Y, r0, r1):
    """(silent, any_nonzero) of rows r0:r1: silent[i] iff every Y[r0+i, k] < 1; any_nonzero iff some != 0. Bands
    of SILENT_BAND rows in parallel."""
    g = Y.shape[1]
    n = r1 - r0
    silent = np.ones(n, dtype=np.bool_)
    bands = (n + SILENT_BAND - 1) // SILENT_BAND
    nonzero = np.zeros(bands, dtype=np.bool_)
    for b in prange(bands):
        a = b * SILENT_BAND
        e = min(n, a + SILENT_BAND)
        seen = False
        for k in range(g):
            for i in range(a, e):
                y = Y[r0 + i, k]
                if y != 0.0:
                    seen = True
                    if y >= SILENT_BELOW:
                        silent[i] = False
        nonzero[b] = seen
    return silent, nonzero.any()


@njit(cache=True, parallel=True)
def col_means(Y, r0, keep, n_keep):
    """Per-column mean of the kept rows, rounded once as R's long-double colMeans; (g,); the columns in
    parallel."""
    g = Y.shape[1]
    out = np.empty(g)
    for k in prange(g):
        hi = 0.0
        lo = 0.0
        for i in range(keep.shape[0]):
            if keep[i]:
                hi, lo = ld_add_ld(hi, lo, Y[r0 + i, k], 0.0)
        out[k] = ld_div(hi, lo, float(n_keep))[0]
    return out


@njit(cache=True)
def _order_stats(buf, n, ranks, out):
    """out[j] = the ranks[j]-th smallest (0-based) of buf[0:n]; ranks ascending. May reorder buf.

    Whole numbers in a modest range (read counts) are counted; anything else is selected.
    """
    lo = np.inf
    hi = -np.inf
    whole = True
    for i in range(n):
        v = buf[i]
        lo = min(lo, v)
        hi = max(hi, v)
        if whole and v != math.floor(v):
            whole = False
    if whole and hi - lo < min(COUNTING_RANGE, 4 * n + 1024):
        counts = np.zeros(int(hi - lo) + 1, dtype=np.int64)
        for i in range(n):
            counts[int(buf[i] - lo)] += 1
        seen = 0
        b = 0
        for j in range(ranks.shape[0]):
            while seen + counts[b] <= ranks[j]:
                seen += counts[b]
                b += 1
            out[j] = lo + b
    else:
        for j in range(ranks.shape[0]):
            out[j] = select_kth(buf, n, ranks[j])


@njit(cache=True)
def _median_of(buf, n):
    """R's median of buf[0:n] (for even n R's mean() of the two middle values); may reorder buf."""
    half = n // 2
    v = np.empty(2)
    if n % 2 == 1:
        _order_stats(buf, n, np.array([half]), v)
        return v[0]
    _order_stats(buf, n, np.array([half - 1, half]), v)
    return mean_of_two(v[0], v[1])


@njit(cache=True)
def _quantile7_of(buf, n, p):
    """R's type-7 quantile p of buf[0:n]; may reorder buf (its values stay the same multiset)."""
    lo = quantile7_low_index(n, p)
    hi = min(lo + 1, n - 1)
    v = np.empty(2)
    _order_stats(buf, n, np.array([lo, hi]), v)
    keep_lo = buf[lo]
    keep_hi = buf[hi]
    buf[lo] = v[0]  # quantile7_sorted reads only these two positions
    buf[hi] = v[1]
    q = quantile7_sorted(buf, n, p)
    buf[hi] = keep_hi
    buf[lo] = keep_lo
    return q


@njit(cache=True, parallel=True)
def col_order_stats(Y, r0, keep, n_keep, p, median):
    """Per column over the kept rows: R's median (median=True) or type-7 quantile p; (g,)."""
    g = Y.shape[1]
    out = np.empty(g)
    for k in prange(g):
        buf = np.empty(n_keep)
        j = 0
        for i in range(keep.shape[0]):
            if keep[i]:
                buf[j] = Y[r0 + i, k]
                j += 1
        if median:
            out[k] = _median_of(buf, n_keep)
        else:
            out[k] = _quantile7_of(buf, n_keep, p)
    return out


@njit(cache=True)
def pooled_median(X, keep, n_keep, cols):
    """R's median of all values X[keep rows, cols]."""
    buf = np.empty(n_keep * cols.shape[0])
    j = 0
    for c in range(cols.shape[0]):
        k = cols[c]
        for i in range(X.shape[0]):
            if keep[i]:
                buf[j] = X[i, k]
                j += 1
    return _median_of(buf, j)


@njit(cache=True)
def nonzero_range(Y, r0, keep, c0, c1):
    """Over the kept rows of columns c0:c1: (number of non-zero values, their min, max, all whole numbers)."""
    lo = np.inf
    hi = -np.inf
    whole = True
    cnt = 0
    for k in range(c0, c1):
        for i in range(keep.shape[0]):
            if keep[i]:
                y = Y[r0 + i, k]
                if y != 0.0:
                    cnt += 1
                    lo = min(lo, y)
                    hi = max(hi, y)
                    if whole and y != math.floor(y):
                        whole = False
    return cnt, lo, hi, whole


@njit(cache=True)
def whole_number_mode(Y, r0, keep, c0, c1, lo, size):
    """Most frequent non-zero whole number in the kept rows of columns c0:c1 (ties: the smallest)."""
    counts = np.zeros(size, dtype=np.int64)
    for k in range(c0, c1):
        for i in range(keep.shape[0]):
            if keep[i]:
                y = Y[r0 + i, k]
                if y != 0.0:
                    counts[int(y - lo)] += 1
    best = 0
    for j in range(size):
        if counts[j] > counts[best]:
            best = j
    return lo + best


@njit(cache=True, parallel=True)
def variance_to_mean(Y, rows, f):
    """var/mean (var with denominator g-1) of each row ``rows[j]`` of Y scaled by f; (len(rows),)."""
    n = rows.shape[0]
    out = np.empty(n)
    for j in prange(n):
        out[j] = row_variance_to_mean(Y, rows[j], f)
    return out


@register_jitable
def row_variance_to_mean(Y, i, f):
    """R's ``var(z) / mean(z)`` of z = Y[i, :] * f: var with denominator g-1, both in R's long double arithmetic
    (rstats: mean(), then var()'s sum of squared deviations from that mean rounded to a double). One source for
    the CPU kernel above and the GPU's (normalization/gpu.py): the products are recomputed in each pass (the GPU
    has no per-thread buffer of run-time length), each rounded as one multiplication."""
    g = Y.shape[1]
    hi = 0.0
    lo = 0.0
    for k in range(g):
        hi, lo = ld_add_ld(hi, lo, Y[i, k] * f[k], 0.0)
    s_hi, s_lo = ld_div(hi, lo, float(g))
    mean = s_hi
    if math.isfinite(s_hi):
        t_hi = 0.0
        t_lo = 0.0
        for k in range(g):
            t_hi, t_lo = mean_deviation_add(t_hi, t_lo, Y[i, k] * f[k], s_hi, s_lo)
        mean = mean_finish(s_hi, s_lo, t_hi, t_lo, g)
    a_hi = 0.0
    a_lo = 0.0
    for k in range(g):
        a_hi, a_lo = squared_deviation_add(a_hi, a_lo, Y[i, k] * f[k], mean)
    return ld_div(a_hi, a_lo, float(g - 1))[0] / mean


@njit(cache=True, parallel=True)
def scale_block(Y, r0, f, silent):
    """In place: Y[r0 + i, k] *= f[k]; silent rows set to 0; the columns in parallel."""
    g = Y.shape[1]
    for k in prange(g):
        fk = f[k]
        for i in range(silent.shape[0]):
            Y[r0 + i, k] = 0.0 if silent[i] else Y[r0 + i, k] * fk


#: rows per task of ``copy_finite``
COPY_BAND = 1 << 16


@njit(cache=True, parallel=True, nogil=True)
def copy_finite(X, out):
    """out[:] = X (both (m, N) float64 order F; ``out`` may be ``X``); whether every value is finite. Bands of
    COPY_BAND rows of every column in parallel."""
    m, g = X.shape
    bands = (m + COPY_BAND - 1) // COPY_BAND
    ok = np.ones(bands * g, dtype=np.bool_)
    for t in prange(bands * g):
        k = t // bands
        a = (t % bands) * COPY_BAND
        good = True
        for i in range(a, min(m, a + COPY_BAND)):
            v = X[i, k]
            out[i, k] = v
            if not math.isfinite(v):
                good = False
        ok[t] = good
    return ok.all()


@njit(cache=True, parallel=True)
def column_coverages(X):
    """Per column: mean of the values strictly between its type-7 5% and 95% quantiles (NaN if none)."""
    m, g = X.shape
    out = np.empty(g)
    for k in prange(g):
        buf = X[:, k].copy()
        q05 = _quantile7_of(buf, m, 0.05)
        q95 = _quantile7_of(buf, m, 0.95)
        cnt = 0
        for i in range(m):  # buf is free again: gather the values between the quantiles
            v = X[i, k]
            if q05 < v < q95:
                buf[cnt] = v
                cnt += 1
        out[k] = ld_mean(buf, cnt) if cnt > 0 else np.nan  # R's mean()
    return out


__all__ = ["SILENT_BELOW", "COUNTING_RANGE", "silent_rows", "col_means", "col_order_stats", "pooled_median",
           "nonzero_range", "whole_number_mode", "variance_to_mean", "scale_block", "copy_finite",
           "column_coverages"]
