"""R-compatible order statistics (median, quantile type 7), shared by every stage.

The scalar kernels are ``register_jitable`` so the same source runs in plain Python,
inside ``numba.njit`` code and inside ``numba.cuda`` kernels.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba.extending import register_jitable


@register_jitable
def select_kth(buf, n, k):
    """Return the k-th smallest (0-based) of ``buf[0:n]``; reorders ``buf`` in place (Hoare quickselect)."""
    lo = 0
    hi = n - 1
    while lo < hi:
        pivot = buf[(lo + hi) // 2]
        i = lo
        j = hi
        while i <= j:
            while buf[i] < pivot:
                i += 1
            while buf[j] > pivot:
                j -= 1
            if i <= j:
                t = buf[i]
                buf[i] = buf[j]
                buf[j] = t
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            break
    return buf[k]


@register_jitable
def median_inplace(buf, n):
    """R's ``median`` of ``buf[0:n]`` (mean of the two middle values for even n); reorders ``buf``."""
    half = n // 2
    upper = select_kth(buf, n, half)
    if n % 2 == 1:
        return upper
    # after selecting ``half``, every value left of it is <= upper: the lower middle is their maximum
    lower = buf[0]
    for i in range(1, half):
        if buf[i] > lower:
            lower = buf[i]
    return (lower + upper) / 2.0


@register_jitable
def quantile7_low_index(n, p):
    """0-based position of the lower order statistic R's type-7 quantile p of n values interpolates from
    (R: index = 1 + (n - 1) p, lo = floor(index)); the upper one is the next position."""
    return int(math.floor(1.0 + (n - 1) * p)) - 1


@register_jitable
def quantile7_sorted(xs, n, p):
    """R's ``quantile(x, p, type=7)`` of ``xs[0:n]``, whose positions ``quantile7_low_index`` and the next
    hold the right order statistics (e.g. sorted); R's 1-based index arithmetic, bit for bit."""
    index = 1.0 + (n - 1) * p
    lo = quantile7_low_index(n, p)
    h = index - (lo + 1)
    q = xs[lo]
    if h > 0.0 and lo + 1 < n and xs[lo + 1] != q:
        q = (1.0 - h) * q + h * xs[lo + 1]
    return q


@register_jitable
def two_sum_add(hi, lo, v):
    """Add v to the double-double (hi, lo) without rounding error (Knuth's TwoSum); returns (hi, lo)."""
    t = hi + v
    bp = t - hi
    lo += (hi - (t - bp)) + (v - bp)
    return t, lo


@register_jitable
def double_double_div(hi, lo, n):
    """(hi + lo) / n rounded once to double (Dekker's exact product for the residual)."""
    q = hi / n
    split = 134217729.0 * q
    qh = split - (split - q)
    ql = q - qh
    split = 134217729.0 * n
    nh = split - (split - n)
    nl = n - nh
    prod = q * n
    err = ((qh * nh - prod) + qh * nl + ql * nh) + ql * nl
    return q + (((hi - prod) - err) + lo) / n


@register_jitable
def mean_correctly_rounded(v, n):
    """The mean of v[0:n] rounded once, which is what R's long-double ``mean()``/``colMeans()`` give."""
    hi = 0.0
    lo = 0.0
    for k in range(n):
        hi, lo = two_sum_add(hi, lo, v[k])
    return double_double_div(hi, lo, float(n))


def r_quantile(x: np.ndarray, p: float) -> float:
    """R's ``quantile(x, p, type=7)`` of a 1-D array (NaN-free)."""
    xs = np.sort(np.asarray(x, dtype=np.float64).ravel())
    if xs.size == 0:
        return math.nan
    return float(quantile7_sorted(xs, xs.size, p))


@njit(cache=True)
def _median_compiled(buf):
    return median_inplace(buf, buf.size)


def r_median(x: np.ndarray) -> float:
    """R's ``median`` of a 1-D array (NaN-free)."""
    buf = np.array(x, dtype=np.float64).ravel()
    if buf.size == 0:
        return math.nan
    return float(_median_compiled(buf))


def col_quantiles(x: np.ndarray, p: float) -> np.ndarray:
    """R's type-7 quantile of every column of an m x N matrix; returns shape (N,)."""
    xs = np.sort(np.asarray(x, dtype=np.float64), axis=0)
    return np.array([quantile7_sorted(xs[:, k], xs.shape[0], p) for k in range(xs.shape[1])])


def col_medians(x: np.ndarray) -> np.ndarray:
    """R's median of every column of an m x N matrix; returns shape (N,)."""
    return np.array([r_median(x[:, k]) for k in range(x.shape[1])])
