"""R-exact statistics shared by every stage: order statistics (median, quantile type 7) and the long double
arithmetic of R's mean(), colMeans/rowMeans and var(), emulated in double-double.

The scalar kernels are ``register_jitable`` so the same source runs in plain Python,
inside ``numba.njit`` code and inside ``numba.cuda`` kernels. On an x86-64 CPU the long double functions are
bound, for numba's CPU target only, to the x87 unit's own arithmetic (exact/x87.py: the hardware R itself uses,
~20x faster than the emulation; the end of this file); numba.cuda and plain Python run the emulation, which equals
it for every value within the double range.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba.extending import overload, register_jitable

from . import x87


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
    """R's ``median`` of ``buf[0:n]``: the middle value, for even n R's ``mean()`` of the two middle values
    (:func:`mean_of_two`); reorders ``buf``."""
    half = n // 2
    upper = select_kth(buf, n, half)
    if n % 2 == 1:
        return upper
    # after selecting ``half``, every value left of it is <= upper: the lower middle is their maximum
    lower = buf[0]
    for i in range(1, half):
        if buf[i] > lower:
            lower = buf[i]
    return mean_of_two(lower, upper)


@register_jitable
def quantile7_low_index(n, p):
    """0-based position of the lower order statistic R's type-7 quantile p of n values interpolates from
    (R: index = 1 + (n - 1) p, lo = floor(index)); the upper one is the next position."""
    return int(math.floor(1.0 + (n - 1) * p)) - 1


@register_jitable
def quantile7_sorted(xs, n, p):
    """R's ``quantile(x, p, type=7)`` of ``xs[0:n]``, whose positions ``quantile7_low_index`` and the next
    hold the right order statistics (e.g. sorted); R's 1-based index arithmetic, bit for bit."""
    lo = quantile7_low_index(n, p)
    return quantile7_pair(n, p, xs[lo], xs[lo + 1] if lo + 1 < n else math.nan)


@register_jitable
def quantile7_pair(n, p, low, high):
    """R's ``quantile(x, p, type=7)`` of n values from ``low`` and ``high``, their order statistics at
    ``quantile7_low_index(n, p)`` and the next position (``high`` unused where there is none); R's 1-based index
    arithmetic, bit for bit."""
    index = 1.0 + (n - 1) * p
    lo = quantile7_low_index(n, p)
    h = index - (lo + 1)
    q = low
    if h > 0.0 and lo + 1 < n and high != q:
        q = (1.0 - h) * q + h * high
    return q


# ------------------------------------------------------------------- R's long double (x87, 64-bit significand)
# cn.mops's one-step model normalizes with R's rowSums/sum and averages with rowMeans, which accumulate in
# long double: each partial sum is rounded to a 64-bit significand, and that rounding (then the rounding to
# double) decides the last bit of about 1 value in 1000. A long double is held exactly as a double-double
# (hi, lo) with hi = the value rounded to double.
@register_jitable
def _two_sum(a, b):
    s = a + b
    bp = s - a
    return s, (a - (s - bp)) + (b - bp)


@register_jitable
def _two_prod(a, b):
    """a * b = p + e exactly (Dekker; no FMA needed)."""
    p = a * b
    t = 134217729.0 * a
    ah = t - (t - a)
    al = a - ah
    t = 134217729.0 * b
    bh = t - (t - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@register_jitable
def round64(h, l, f):
    """h + l + f rounded to a 64-bit significand, ties to even, as (hi, lo). (h, l): a normalized
    double-double (h = fl(h + l)); f: a remainder far below l's last bit that only breaks ties.

    g, the last bit of a 64-bit significand at the sum's binade, and 1 / g are built from h's exponent bits
    (a power-of-two scaling is exact, so l * (1 / g) == l / g); tiny, huge or non-finite h take
    ``frexp``/``ldexp`` and the division."""
    if h == 0.0:
        return 0.0, 0.0
    bits = np.float64(h).view(np.int64)
    biased = (bits >> 52) & 0x7FF
    fast = 65 <= biased <= 2046
    if fast:
        e = biased - 1023
        power_of_two = (bits & 0xFFFFFFFFFFFFF) == 0
    else:
        m, ex = math.frexp(h)
        e = ex - 1
        power_of_two = abs(m) == 0.5
    if power_of_two:  # the sum has a smaller exponent if the rest points to zero
        rest = l if l != 0.0 else f
        if (rest < 0.0) != (h < 0.0) and rest != 0.0:
            e -= 1
    if fast:
        g = np.int64((e - 63 + 1023) << 52).view(np.float64)
        inv_g = np.int64((63 - e + 1023) << 52).view(np.float64)
        u = l * inv_g
        fg = f * inv_g
    else:
        g = math.ldexp(1.0, e - 63)
        u = l / g
        fg = f / g
    fl = math.floor(u)
    w = ((u - fl) - 0.5) + fg
    k = fl
    if w > 0.0 or (w == 0.0 and fl * 0.5 != math.floor(fl * 0.5)):
        k = fl + 1.0
    return _two_sum(h, k * g)


@register_jitable
def ld_add(hi, lo, v):
    """The long double (hi, lo) plus the double v, rounded as the x87 does (non-negative operands)."""
    s, e = _two_sum(hi, v)
    t, f = _two_sum(e, lo)
    h, l = _two_sum(s, t)
    return round64(h, l, f)


@register_jitable
def ld_add_ld(ahi, alo, bhi, blo):
    """The sum of the long doubles (ahi, alo) and (bhi, blo), rounded to a long double (any signs)."""
    s, e = _two_sum(ahi, bhi)
    t, f = _two_sum(alo, blo)
    u, g = _two_sum(e, t)
    h, l = _two_sum(s, u)
    return round64(h, l, g + f)


# R's mean() (summary.c) and the means of var() (cov.c): a long double sum divided by n; if that is finite as a
# double, the long double sum of the deviations x - mean, divided by n, is added. The steps below are that
# formula's one home; ld_mean, mean_of_two and the rows of normalization.kernels run them.
@register_jitable
def mean_deviation_add(t_hi, t_lo, x, s_hi, s_lo):
    """The long double sum (t_hi, t_lo) plus the deviation x - s (x a double, s a long double), both rounded as
    the x87 rounds them (R's second pass of mean())."""
    d_hi, d_lo = ld_add_ld(x, 0.0, -s_hi, -s_lo)
    return ld_add_ld(t_hi, t_lo, d_hi, d_lo)


@register_jitable
def mean_finish(s_hi, s_lo, t_hi, t_lo, n):
    """R's mean as a double from the first pass's quotient s (long double) and the sum t of deviations."""
    q_hi, q_lo = ld_div(t_hi, t_lo, float(n))
    return ld_add_ld(s_hi, s_lo, q_hi, q_lo)[0]


@register_jitable
def ld_sum(v, n):
    """The long double sum of v[0:n] in order, as R's ``sum()`` (its [0]: the sum as a double), ``colSums`` and
    the first pass of ``mean()`` accumulate it."""
    hi = 0.0
    lo = 0.0
    for k in range(n):
        hi, lo = ld_add_ld(hi, lo, v[k], 0.0)
    return hi, lo


@register_jitable
def ld_mean(v, n):
    """R's ``mean()`` of v[0:n] as a double: a long double sum divided by n, then corrected by the long
    double mean of the deviations (R's second pass)."""
    hi, lo = ld_sum(v, n)
    s_hi, s_lo = ld_div(hi, lo, float(n))
    if not math.isfinite(s_hi):
        return s_hi
    t_hi = 0.0
    t_lo = 0.0
    for k in range(n):
        t_hi, t_lo = mean_deviation_add(t_hi, t_lo, v[k], s_hi, s_lo)
    return mean_finish(s_hi, s_lo, t_hi, t_lo, n)


@register_jitable
def mean_of_two(a, b):
    """R's ``mean(c(a, b))`` (the median of an even number of values): ld_mean of two values, without an
    array."""
    hi, lo = ld_add_ld(a, 0.0, b, 0.0)
    s_hi, s_lo = ld_div(hi, lo, 2.0)
    if not math.isfinite(s_hi):
        return s_hi
    t_hi, t_lo = mean_deviation_add(0.0, 0.0, a, s_hi, s_lo)
    t_hi, t_lo = mean_deviation_add(t_hi, t_lo, b, s_hi, s_lo)
    return mean_finish(s_hi, s_lo, t_hi, t_lo, 2)


@register_jitable
def ld_square(hi, lo):
    """The long double (hi, lo) squared, rounded to a long double. hi's and lo's exact products (Dekker) and
    lo * lo (at most 22 bits) add up exactly: every part below the leading two is a multiple of 2^(2E-126)
    (hi in [2^E, 2^(E+1))) smaller than 2^(2E-98), so their double sum is exact (|hi| in 2^-470..2^510)."""
    p1, e1 = _two_prod(hi, hi)
    p2, e2 = _two_prod(2.0 * hi, lo)
    h, l = _two_sum(p1, p2)
    l, c = _two_sum(l, e1)
    r = (c + e2) + lo * lo
    l, f = _two_sum(l, r)
    h, l = _two_sum(h, l)
    return round64(h, l, f)


@register_jitable
def squared_deviation_add(a_hi, a_lo, x, m):
    """R's var() step (cov.c): the long double sum (a_hi, a_lo) plus (x - m)^2, x and the mean m doubles, the
    difference, the square and the sum each rounded to a long double."""
    d_hi, d_lo = ld_add_ld(x, 0.0, -m, 0.0)
    q_hi, q_lo = ld_square(d_hi, d_lo)
    return ld_add_ld(a_hi, a_lo, q_hi, q_lo)


@register_jitable
def r_var(v, n):
    """R's ``var()`` of v[0:n] (denominator n - 1; NaN for n < 2): the mean as R's mean() rounds it to a
    double, then the long double sum of squared deviations divided by n - 1."""
    if n < 2:
        return math.nan
    m = ld_mean(v, n)
    a_hi = 0.0
    a_lo = 0.0
    for k in range(n):
        a_hi, a_lo = squared_deviation_add(a_hi, a_lo, v[k], m)
    return ld_div(a_hi, a_lo, float(n - 1))[0]


@register_jitable
def ld_div(hi, lo, n):
    """The long double (hi, lo) divided by n (a positive whole number), rounded to a long double."""
    q1 = hi / n
    p, pe = _two_prod(q1, n)
    r = hi - p  # exact (Sterbenz)
    c, d = _two_sum(r, -pe)
    c2, d2 = _two_sum(c, lo)
    q2 = (c2 + (d + d2)) / n
    h, l = _two_sum(q1, q2)
    return round64(h, l, 0.0)


# ------------------------------------------------------------------- the same functions in the x87 unit (CPU)
# Each is the emulation's formula with every long double operation done by the x87 unit: R's own rounding.
# (hi, lo) pairs are the emulation's representation, kept at the functions' boundaries. They call only the
# module's public functions (a CPU form that fails to compile would silently leave the emulation in place:
# tests/test_x87.py checks that each one is the form compiled).
def _ld_add_x87(hi, lo, v):
    return x87.split(x87.add(x87.join(hi, lo), x87.ld(v)))


def _ld_add_ld_x87(ahi, alo, bhi, blo):
    return x87.split(x87.add(x87.join(ahi, alo), x87.join(bhi, blo)))


def _mean_deviation_add_x87(t_hi, t_lo, x, s_hi, s_lo):
    return x87.split(x87.add(x87.join(t_hi, t_lo), x87.sub(x87.ld(x), x87.join(s_hi, s_lo))))


def _mean_finish_x87(s_hi, s_lo, t_hi, t_lo, n):
    return x87.to_double(x87.add(x87.join(s_hi, s_lo), x87.div(x87.join(t_hi, t_lo), x87.ld(float(n)))))


def _ld_sum_x87(v, n):
    s = x87.ld(0.0)
    for k in range(n):
        s = x87.add(s, x87.ld(v[k]))
    return x87.split(s)


def _ld_mean_x87(v, n):
    s = x87.ld(0.0)
    for k in range(n):
        s = x87.add(s, x87.ld(v[k]))
    s = x87.div(s, x87.ld(float(n)))
    if not math.isfinite(x87.to_double(s)):
        return x87.to_double(s)
    t = x87.ld(0.0)
    for k in range(n):
        t = x87.add(t, x87.sub(x87.ld(v[k]), s))
    return x87.to_double(x87.add(s, x87.div(t, x87.ld(float(n)))))


def _mean_of_two_x87(a, b):
    s = x87.div(x87.add(x87.ld(a), x87.ld(b)), x87.ld(2.0))
    if not math.isfinite(x87.to_double(s)):
        return x87.to_double(s)
    t = x87.add(x87.sub(x87.ld(a), s), x87.sub(x87.ld(b), s))
    return x87.to_double(x87.add(s, x87.div(t, x87.ld(2.0))))


def _ld_square_x87(hi, lo):
    a = x87.join(hi, lo)
    return x87.split(x87.mul(a, a))


def _squared_deviation_add_x87(a_hi, a_lo, x, m):
    d = x87.sub(x87.ld(x), x87.ld(m))
    return x87.split(x87.add(x87.join(a_hi, a_lo), x87.mul(d, d)))


def _r_var_x87(v, n):
    if n < 2:
        return math.nan
    m = x87.ld(ld_mean(v, n))
    a = x87.ld(0.0)
    for k in range(n):
        d = x87.sub(x87.ld(v[k]), m)
        a = x87.add(a, x87.mul(d, d))
    return x87.to_double(x87.div(a, x87.ld(float(n - 1))))


def _ld_div_x87(hi, lo, n):
    return x87.split(x87.div(x87.join(hi, lo), x87.ld(float(n))))


#: emulated function -> its x87 form, bound for numba's CPU target where the x87 unit is usable
X87_FORMS = {ld_add: _ld_add_x87, ld_add_ld: _ld_add_ld_x87, mean_deviation_add: _mean_deviation_add_x87,
             mean_finish: _mean_finish_x87, ld_sum: _ld_sum_x87, ld_mean: _ld_mean_x87, mean_of_two: _mean_of_two_x87,
             ld_square: _ld_square_x87, squared_deviation_add: _squared_deviation_add_x87, r_var: _r_var_x87,
             ld_div: _ld_div_x87}

if x87.AVAILABLE:
    for _emulated, _hardware in X87_FORMS.items():
        overload(_emulated, target="cpu", strict=False)(lambda *args, _impl=_hardware: _impl)


def r_quantile(x: np.ndarray, p: float) -> float:
    """R's ``quantile(x, p, type=7)`` of a 1-D array (NaN-free)."""
    xs = np.sort(np.asarray(x, dtype=np.float64).ravel())
    if xs.size == 0:
        return math.nan
    return float(quantile7_sorted(xs, xs.size, p))


@njit(cache=True, nogil=True)
def _median_compiled(buf):
    return median_inplace(buf, buf.size)


@njit(cache=True, nogil=True)
def _mean_compiled(v):
    return ld_mean(v, v.size)


@njit(cache=True, nogil=True)
def _var_compiled(v):
    return r_var(v, v.size)


@njit(cache=True, nogil=True)
def _quotients_compiled(v, n):
    out = np.empty(v.size)
    for k in range(v.size):
        out[k] = ld_div(v[k], 0.0, n)[0]
    return out


def ld_quotients(v: np.ndarray, n: float) -> np.ndarray:
    """Each of the doubles ``v`` divided by ``n`` (a positive whole number) as R's long double division rounds it,
    then rounded to a double ((len(v),) float64)."""
    return _quotients_compiled(np.ascontiguousarray(v, dtype=np.float64).ravel(), float(n))


def r_variance(x: np.ndarray) -> float:
    """R's ``var()`` of a 1-D array (NaN-free)."""
    return float(_var_compiled(np.ascontiguousarray(x, dtype=np.float64).ravel()))


def r_mean(x: np.ndarray) -> float:
    """R's ``mean()`` of a 1-D array (NaN-free; NaN when empty)."""
    v = np.ascontiguousarray(x, dtype=np.float64).ravel()
    return float(_mean_compiled(v)) if v.size else math.nan


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
