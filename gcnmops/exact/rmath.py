"""R's ``lgamma`` (nmath ``lgammafn``) reproduced to the last bit for positive arguments.

cn.mops evaluates Poisson likelihoods with R's log-gamma; the platform's ``lgamma`` differs from it
by an ulp or so, which shifts posteriors enough to move near-tied segment boundaries. This is the
published Fullerton (SLATEC) algorithm that R uses: a Chebyshev series for Gamma on [1, 2] with
upward recursion for x <= 10, and Stirling's formula with a Chebyshev correction above.
``register_jitable``: runs in Python, numba CPU and numba.cuda code.
"""
from __future__ import annotations

from numba.extending import register_jitable

from .libm import exp_full, log1p_glibc, log_glibc

LN_SQRT_2PI = 0.918938533204672741780329736406  # log(sqrt(2*pi))

# Chebyshev coefficients (SLATEC GAMCS, the 22 that double precision needs)
_G = (
    +.8571195590989331421920062399942e-2, +.4415381324841006757191315771652e-2,
    +.5685043681599363378632664588789e-1, -.4219835396418560501012500186624e-2,
    +.1326808181212460220584006796352e-2, -.1893024529798880432523947023886e-3,
    +.3606925327441245256578082217225e-4, -.6056761904460864218485548290365e-5,
    +.1055829546302283344731823509093e-5, -.1811967365542384048291855891166e-6,
    +.3117724964715322277790254593169e-7, -.5354219639019687140874081024347e-8,
    +.9193275519859588946887786825940e-9, -.1577941280288339761767423273953e-9,
    +.2707980622934954543266540433089e-10, -.4646818653825730144081661058933e-11,
    +.7973350192007419656460767175359e-12, -.1368078209830916025799499172309e-12,
    +.2347319486563800657233471771688e-13, -.4027432614949066932766570534699e-14,
    +.6910051747372100912138336975257e-15, -.1185584500221992907052387126192e-15,
)
# Chebyshev coefficients of the Stirling correction (SLATEC ALGMCS, the 5 that double precision needs)
_A = (
    +.1666389480451863247205729650822e+0, -.1384948176067563840732986059135e-4,
    +.9810825646924729426157171547487e-8, -.1809129475572494194263306266719e-10,
    +.6221098041892605227126015543416e-13,
)
_XBIG_COR = 94906265.62425156  # above: the correction is 1/(12 x)


@register_jitable
def _chebyshev(x, coefs):
    """Chebyshev series sum_i coefs[i] T_i(x) at x in [-1, 1] as R's chebyshev_eval: Clenshaw's recurrence
    from the last coefficient down, halved (coefs[0] counts half)."""
    twox = x * 2.0
    b0 = 0.0
    b1 = 0.0
    b2 = 0.0
    for i in range(len(coefs) - 1, -1, -1):
        b2 = b1
        b1 = b0
        b0 = twox * b1 - b2 + coefs[i]
    return (b0 - b2) * 0.5


@register_jitable
def lgammacor(x):
    """R's lgammacor(x) for x >= 10: lgamma(x) - ((x - 1/2) log(x) - x + log(sqrt(2 pi)))."""
    if x < _XBIG_COR:
        tmp = 10.0 / x
        return _chebyshev(tmp * tmp * 2.0 - 1.0, _A) / x
    return 1.0 / (x * 12.0)


@register_jitable
def gamma_upto10(x):
    """R's gammafn(x) for 0 < x <= 10: the Chebyshev series on [1, 2], recursed up (or divided once by x)."""
    n = int(x)
    y = x - n
    n -= 1
    value = _chebyshev(y * 2.0 - 1.0, _G) + 0.9375
    if n < 0:  # 0 < x < 1
        return value / x
    for i in range(1, n + 1):
        value *= y + i
    return value


@register_jitable
def lgamma_r(x):
    """log(Gamma(x)) for x > 0, bit-identical to R's ``lgamma(x)``."""
    if x < 1e-306:
        return -log_glibc(x)
    if x <= 10.0:
        return log_glibc(abs(gamma_upto10(x)))
    if x > 1e17:
        return x * (log_glibc(x) - 1.0)
    if x > 4934720.0:
        return LN_SQRT_2PI + (x - 0.5) * log_glibc(x) - x
    return LN_SQRT_2PI + (x - 0.5) * log_glibc(x) - x + lgammacor(x)


@register_jitable
def lbeta_half(a):
    """R's lbeta(a, 1/2) for a > 0 (every branch lbeta takes with one argument 1/2; gammafn's arguments stay
    below 10.5 there, where R computes it from the series or from exp(... + lgammacor))."""
    p = min(a, 0.5)
    q = max(a, 0.5)
    if q >= 10.0:
        corr = lgammacor(q) - lgammacor(p + q)
        return lgamma_r(p) + corr + p - p * log_glibc(p + q) + (q - 0.5) * log1p_glibc(-p / (p + q))
    if p < 1e-306:
        return lgamma_r(p) + (lgamma_r(q) - lgamma_r(p + q))
    pq = p + q
    if pq <= 10.0:
        gpq = gamma_upto10(pq)
    else:
        gpq = exp_full((pq - 0.5) * log_glibc(pq) - pq + LN_SQRT_2PI + lgammacor(pq))
    return log_glibc(gamma_upto10(p) * (gamma_upto10(q) / gpq))
