"""Upper tail of Student's t on the log scale by the continued fraction: -log P(T_dof > t) within 3e-14 relative
of R's ``-pt(t, dof, lower.tail=FALSE, log.p=TRUE)``, several times cheaper than R's own route (tdist.py).

The GPU's segmentation statistic uses it (cuda/nofma.py puts it in place of ``tdist.t_neglog_upper`` in CUDA
kernels): a GPU value stands for an interval of relative width TAU (segmentation/gpu.py, 1e-9), and the host
recomputes with R's exact tail wherever a decision falls inside it.

P(T_dof > t) = I_z(dof/2, 1/2) / 2 for t >= 0, with z = dof / (dof + t^2) and I the regularized incomplete beta
function, evaluated by its continued fraction (DLMF 8.17.22, modified Lentz) with the power prefactor taken in
logs, so the result stays accurate far beyond double underflow of the tail; where the fraction converges slowly
the symmetry I_z(a, b) = 1 - I_{1-z}(b, a) is used instead. Scalar ``register_jitable`` code (``math`` only, no
allocation): plain Python, ``numba.njit`` and ``numba.cuda`` kernels.
"""
from __future__ import annotations

import math

from numba.extending import register_jitable

LN2 = 0.6931471805599453
#: log(sqrt(pi)) = lgamma(1/2)
LGAMMA_HALF = 0.5723649429247001
#: relative convergence tolerance of the continued fraction
CF_TOL = 1e-16
#: guard against exact zeros in the Lentz recursion
CF_TINY = 1e-300
CF_MAX_ITER = 10000
#: above this dof / 2 the difference lgamma(a + 1/2) - lgamma(a) uses its asymptotic series
LGAMMA_RATIO_SERIES_MIN = 12.0


@register_jitable
def _lentz_step(num, d, c):
    """One step of the modified Lentz algorithm for the coefficient ``num``: the new (1/D, C)."""
    d = 1.0 + num * d
    if abs(d) < CF_TINY:
        d = CF_TINY
    c = 1.0 + num / c
    if abs(c) < CF_TINY:
        c = CF_TINY
    return 1.0 / d, c


@register_jitable
def lgamma_half_ratio(a):
    """log(Gamma(a + 1/2) / Gamma(a)) for a > 0, without the cancellation of two large lgamma values."""
    if a < LGAMMA_RATIO_SERIES_MIN:
        return math.lgamma(a + 0.5) - math.lgamma(a)
    # asymptotic series in 1/a (truncation error below 1e-16 for a >= 12)
    r = 1.0 / a
    r2 = r * r
    s = r2 * (1.0 / 192.0 + r2 * (-1.0 / 640.0 + r2 * (17.0 / 14336.0 + r2 * (-31.0 / 18432.0
                                                                             + r2 * (691.0 / 180224.0)))))
    return 0.5 * math.log(a) - r * (0.125 - s)


@register_jitable
def log_beta_half(a):
    """log B(a, 1/2) for a > 0."""
    return LGAMMA_HALF - lgamma_half_ratio(a)


@register_jitable
def ibeta_cf(x, a, b):
    """The continued-fraction factor F of I_x(a, b) = x^a (1-x)^b / (a B(a, b)) * F (modified Lentz).

    Converges quickly for x < (a + 1) / (a + b + 2).
    """
    apb = a + b
    c = 1.0
    d = 1.0 - apb * x / (a + 1.0)
    if abs(d) < CF_TINY:
        d = CF_TINY
    d = 1.0 / d
    f = d
    for m in range(1, CF_MAX_ITER):
        m2 = 2.0 * m
        # even coefficient d_{2m}
        d, c = _lentz_step(m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)), d, c)
        f *= d * c
        # odd coefficient d_{2m+1}
        d, c = _lentz_step(-(a + m) * (apb + m) * x / ((a + m2) * (a + m2 + 1.0)), d, c)
        step = d * c
        f *= step
        if abs(step - 1.0) < CF_TOL:
            break
    return f


@register_jitable
def log_ibeta_t(h, ln_z, ln_y, z, y):
    """log I_z(h, 1/2) with y = 1 - z given separately (ln_z = log z, ln_y = log y, both exact-ish).

    Used for the t tail: h = dof / 2, z = dof / (dof + t^2), y = t^2 / (dof + t^2).
    """
    lb = log_beta_half(h)
    if z < (h + 1.0) / (h + 2.5):
        # direct fraction: log of the prefactor z^h y^(1/2) / (h B(h, 1/2)) plus log of the fraction
        return h * ln_z + 0.5 * ln_y - math.log(h) - lb + math.log(ibeta_cf(z, h, 0.5))
    # symmetric branch: I_z(h, 1/2) = 1 - I_y(1/2, h)
    log_j = 0.5 * ln_y + h * ln_z + LN2 - lb + math.log(ibeta_cf(y, 0.5, h))
    return math.log1p(-math.exp(log_j))


@register_jitable
def t_neglog_upper_cf(t, dof):
    """-log P(T_dof > t) for Student's t with ``dof`` > 0 degrees of freedom, within 3e-14 relative of R's
    -pt(t, dof, FALSE, TRUE)."""
    if math.isnan(t) or math.isnan(dof) or dof <= 0.0:
        return math.nan
    if math.isinf(t):
        return math.inf if t > 0.0 else 0.0
    if t == 0.0:
        return LN2
    at = abs(t)
    if math.isinf(dof):
        # the normal limit: P(Z > t) = erfc(t / sqrt 2) / 2 (only reached for dof = Inf)
        p = 0.5 * math.erfc(t / 1.4142135623730951)
        return -math.log(p)
    h = 0.5 * dof
    nx = 1.0 + (at / dof) * at
    if nx > 1e100:
        # t^2 > 1e100 dof: the leading term of the tail is exact to double precision
        log_i = -h * (2.0 * math.log(at) - math.log(dof)) - log_beta_half(h) - math.log(h)
    else:
        # z = dof / (dof + t^2) and y = t^2 / (dof + t^2) without cancellation
        r = at * at / dof
        ln_z = -math.log1p(r)
        ln_y = math.log(r) + ln_z
        z = 1.0 / nx
        y = r / nx
        log_i = log_ibeta_t(h, ln_z, ln_y, z, y)
    if t > 0.0:
        return LN2 - log_i
    # t < 0: P(T > t) = 1 - I / 2
    return -math.log1p(-0.5 * math.exp(log_i))


__all__ = ["t_neglog_upper_cf"]
