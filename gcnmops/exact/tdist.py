"""Upper tail of Student's t on the log scale as R computes it: ``-pt(t, dof, lower.tail=FALSE, log.p=TRUE)``,
bit for bit, and a cheap approximation for ordering tail values.

``pt_log`` follows R 4.2's nmath/pt.c: pbeta(t^2 / (dof + t^2), 1/2, dof/2) or pbeta(1 / (1 + t^2/dof), dof/2,
1/2) through TOMS 708's bratio (exact/toms708.py), or for t^2 > 1e100 dof the leading term with R's lbeta; the
fast segmentation compares these values with each other and with their quantile, so only R's bits decide its
ties. (Infinite dof, where R calls pnorm, is not reproduced: the normal tail there comes from math.erfc.)

Every function is ``register_jitable`` scalar code (no allocation but bgrat's scratch, see exact/toms708.py) so
it runs in plain Python, inside ``numba.njit`` and inside ``numba.cuda`` kernels.
"""
from __future__ import annotations

import math

from numba.extending import register_jitable

from .libm import exp_full, log1p_glibc, log_glibc
from .rmath import lbeta_half
from .toms708 import bratio_log

LN2 = 0.6931471805599453


@register_jitable
def pbeta_log(x, a, b, lower):
    """R's pbeta(x, a, b, lower, log.p = TRUE) for min(a, b) <= 1 (pbeta_raw's limit cases, then bratio)."""
    if math.isnan(x) or math.isnan(a) or math.isnan(b):
        return x + a + b
    if a < 0 or b < 0:
        return math.nan
    lo = -math.inf if lower else 0.0  # R_DT_0
    hi = 0.0 if lower else -math.inf  # R_DT_1
    if x <= 0:
        return lo
    if a == 0 or b == 0 or math.isinf(a) or math.isinf(b):
        if a == 0 and b == 0:
            return -LN2
        if a == 0 or a / b == 0:
            return hi
        if b == 0 or b / a == 0:
            return lo
        return lo if x < 0.5 else hi
    if x >= 1:
        return hi
    return bratio_log(a, b, x, 0.5 - x + 0.5, lower)


@register_jitable
def pt_log(x, n, lower):
    """R's pt(x, n, lower.tail = lower, log.p = TRUE)."""
    if math.isnan(x) or math.isnan(n):
        return x + n
    if n <= 0.0:
        return math.nan
    if math.isinf(x):
        if x < 0:
            return -math.inf if lower else 0.0
        return 0.0 if lower else -math.inf
    if math.isinf(n):
        p = 0.5 * math.erfc((x if lower else -x) / -1.4142135623730951)
        return math.log(p)
    nx = 1 + (x / n) * x
    if nx > 1e100:
        val = -0.5 * n * (2 * log_glibc(abs(x)) - log_glibc(n)) - lbeta_half(0.5 * n) - log_glibc(0.5 * n)
    elif n > x * x:
        val = pbeta_log(x * x / (n + x * x), 0.5, n / 2., False)
    else:
        val = pbeta_log(1. / nx, n / 2., 0.5, True)
    if x <= 0.:
        lower = not lower
    if lower:
        return log1p_glibc(-0.5 * exp_full(val))
    return val - LN2


@register_jitable
def t_neglog_upper(t, dof):
    """-log P(T_dof > t) for Student's t with ``dof`` > 0 degrees of freedom: R's -pt(t, dof, FALSE, TRUE)."""
    return -pt_log(t, dof, False)


# --- a cheap approximation for ordering tail values -------------------------------------------------------
#: ``t_tail_deviate_approx`` is used in two validity regions, each with a bound on its absolute error in
#: normal-deviate units: dof >= 30 and t <= 10 (measured maximum 2e-8 over dof up to 1e6) ...
APPROX1_MIN_DOF = 30.0
APPROX1_MAX_T = 10.0
APPROX1_ERR = 2e-6
#: ... and dof >= 50, t <= 25 (measured maximum 1.5e-6); both bounds carry a safety factor of 100
#: (tests/test_segmentation.py re-measures them)
APPROX2_MIN_DOF = 50.0
APPROX2_MAX_T = 25.0
APPROX2_ERR = 1.5e-4
#: ... and for small t (t <= SMALL_T_MAX, dof >= SMALL_MIN_DOF) ``t_tail_deviate_small``, the tail's series at t = 0,
#: within SMALL_REL_ERR t + SMALL_ABS_ERR of the deviate of R's rounded tail: series terms left out below 1e-13
#: relative, R's roundings of -log P near log 2 (~2e-16 in the deviate, absolute)
SMALL_MIN_DOF = 50.0
SMALL_T_MAX = 1e-3
SMALL_REL_ERR = 1e-11
SMALL_ABS_ERR = 4e-15
#: log(A sqrt(2 pi)), A the t density at 0, as a series in 1/dof: -1/(4 dof) + 1/(24 dof^3) - 1/(20 dof^5) +
#: 17/(112 dof^7) (from Stirling's series of lgamma((dof + 1)/2) - lgamma(dof / 2)); the next term is below 1e-15
#: for dof >= SMALL_MIN_DOF
_LOGA1 = -0.25
_LOGA3 = 1.0 / 24.0
_LOGA5 = -0.05
_LOGA7 = 17.0 / 112.0


@register_jitable
def small_t(t, dof):
    """Whether (t, dof) is in the validity region of ``t_tail_deviate_small``."""
    return (dof >= SMALL_MIN_DOF) & (abs(t) <= SMALL_T_MAX)


@register_jitable
def t_tail_deviate_small(t, dof):
    """The normal deviate y with P(Z > y) = P(T_dof > |t|) for |t| <= SMALL_T_MAX, dof >= SMALL_MIN_DOF, from the
    series at t = 0: P(T > t) = 1/2 - A (t - (dof + 1) t^3 / (6 dof)) + O(t^5) with A the density at 0, so that
    y = s + s^3 / 6 + O(s^5) where s = A sqrt(2 pi) (t - (dof + 1) t^3 / (6 dof)). Branch-free, no libm call."""
    t = abs(t)
    iv = 1.0 / dof
    iv2 = iv * iv
    la = iv * (_LOGA1 + iv2 * (_LOGA3 + iv2 * (_LOGA5 + iv2 * _LOGA7)))  # |la| <= 0.005: exp by Taylor
    a = 1.0 + la * (1.0 + la * (0.5 + la * (1.0 / 6.0 + la * (1.0 / 24.0 + la * (1.0 / 120.0)))))
    s = a * (t - (1.0 + iv) * (t * t * t) / 6.0)
    return s + s * s * s / 6.0


@register_jitable
def approx_error_bound(t, dof):
    """The error bound of ``t_tail_deviate_approx(t, dof)``, or inf outside its validity regions."""
    if small_t(t, dof):
        return SMALL_REL_ERR * abs(t) + SMALL_ABS_ERR
    if dof >= APPROX1_MIN_DOF and abs(t) <= APPROX1_MAX_T:
        return APPROX1_ERR
    if dof >= APPROX2_MIN_DOF and abs(t) <= APPROX2_MAX_T:
        return APPROX2_ERR
    return math.inf


@register_jitable
def log1p_fast(r):
    """log(1 + r) for 0 <= r < 23 to ~1e-14 relative, branch-free (vectorizes; no libm call).

    1 + r = c * (1 + s) / (1 - s) with c in {1, 2, 4, 8, 16}, |s| <= 0.2, and log((1+s)/(1-s)) = 2 atanh(s).
    """
    c = 1.0
    lc = 0.0
    if r >= 0.5:
        c = 2.0
        lc = LN2
    if r >= 2.0:
        c = 4.0
        lc = 2.0 * LN2
    if r >= 5.0:
        c = 8.0
        lc = 3.0 * LN2
    if r >= 11.0:
        c = 16.0
        lc = 4.0 * LN2
    s = (r + (1.0 - c)) / (r + (1.0 + c))
    s2 = s * s
    poly = (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0 + s2 * (
        1.0 / 11.0 + s2 * (1.0 / 13.0 + s2 * (1.0 / 15.0 + s2 * (1.0 / 17.0))))))))
    return lc + 2.0 * (s + s * s2 * poly)


@register_jitable
def t_tail_deviate_approx(t, dof):
    """Approximate normal deviate y with P(Z > y) = P(T_dof > |t|) (Hill 1970, CACM algorithm 395).

    Absolute error below ``approx_error_bound(t, dof)``; no libm calls besides sqrt, so loops over it
    vectorize. -log P(T_dof > t) is a strictly increasing function of the exact deviate, so two tail values
    can be ordered by approximations that differ by more than the sum of their error bounds; closer pairs
    need the exact ``t_neglog_upper``. For small t the series of ``t_tail_deviate_small``.
    """
    if small_t(t, dof):
        return t_tail_deviate_small(t, dof)
    a = dof - 0.5
    b = 48.0 * a * a
    y = a * log1p_fast(t * t / dof)
    return (((((-0.4 * y - 3.3) * y - 24.0) * y - 85.5) / (0.8 * y * y + 100.0 + b) + y + 3.0) / b + 1.0) \
        * math.sqrt(y)
