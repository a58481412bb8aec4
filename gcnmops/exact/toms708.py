"""R's incomplete beta ratio on the log scale (nmath/toms708.c, ``bratio``), as R's ``pt()`` reaches it.

``pt(t, n)`` calls ``pbeta`` with one shape 1/2 (I_x(1/2, n/2) or I_x(n/2, 1/2)), so only bratio's branch for
min(a, b) <= 1 is ever taken, always with ``log_p``: the power series (bpser, fpser, apser), the finite sum
(bup) and the asymptotic expansion (bgrat with grat_r), and the helpers they call. This module follows R 4.2's
toms708.c step by step, in R's order of floating-point operations, with glibc's exp, log and log1p
(exact/libm.py) where R calls them; ``bratio_log`` returns NaN for the branch with both shapes > 1, which pt
never takes.

Everything is ``register_jitable`` scalar code (Python, numba CPU, numba.cuda). bgrat keeps its two series of
30 coefficients in a buffer (``bgrat_series_local``: np.empty on the CPU, a local array in a CUDA kernel,
registered by cuda/nofma.py), so nothing recurses and nothing else allocates.
"""
from __future__ import annotations

import math

import numpy as np
from numba.extending import overload, register_jitable

from .libm import exp_full, log1p_glibc, log_glibc

DBL_MIN = 2.2250738585072014e-308
M_LN2 = 0.693147180559945309417232121458
M_SQRT_PI = 1.772453850905516027298167483341
#: exparg(0), exparg(1): the largest arguments of exp without overflow / underflow to 0, with 0.99999 fuzz
EXPARG_0 = 1024 * 0.69314718055995 * 0.99999
EXPARG_1 = (-1021 - 1) * 0.69314718055995 * 0.99999
#: the tolerance bratio works with: max(2 DBL_EPSILON, 1e-15)
BRATIO_EPS = 1e-15
BGRAT_TERMS = 30
#: c[BGRAT_TERMS] and d[BGRAT_TERMS] of bgrat, one buffer
BGRAT_SCRATCH = 2 * BGRAT_TERMS


def bgrat_series_local(b, bm1, z, q_r, v, t2, l, eps):
    """``bgrat_series`` with its coefficient buffer: here and on the CPU heap memory, in CUDA kernels a local
    array (the overload for target "cuda" lives in cuda/nofma.py: a device function cannot return one)."""
    return bgrat_series(np.empty(BGRAT_SCRATCH), b, bm1, z, q_r, v, t2, l, eps)


@overload(bgrat_series_local, target="cpu")
def _bgrat_series_local_cpu(b, bm1, z, q_r, v, t2, l, eps):
    return lambda b, bm1, z, q_r, v, t2, l, eps: bgrat_series(np.empty(BGRAT_SCRATCH), b, bm1, z, q_r, v, t2, l,
                                                              eps)


def _pow_half_le_07() -> float:
    """The largest double v with pow(v, 0.5) <= 0.7 in the C library (R's test ``pow(x0*b0, a0) <= 0.7`` with
    a0 = 1/2, decided without pow on every target)."""
    v = 0.49
    while math.pow(v, 0.5) > 0.7:
        v = np.nextafter(v, 0.0)
    while math.pow(np.nextafter(v, 1.0), 0.5) <= 0.7:
        v = np.nextafter(v, 1.0)
    return float(v)


POW_HALF_LE_07 = _pow_half_le_07()


# ---------------------------------------------------------------------------------------------------- helpers
@register_jitable
def log1_exp(x):
    """R_Log1_Exp as toms708.c defines it: log(1 - exp(x)) for x <= 0."""
    if x > -M_LN2:
        return log_glibc(-rexpm1(x))
    return log1p_glibc(-exp_full(x))


@register_jitable
def logspace_add(lx, ly):
    """log(exp(lx) + exp(ly)) as R's pgamma.c computes it."""
    return max(lx, ly) + log1p_glibc(exp_full(-abs(lx - ly)))


@register_jitable
def rexpm1(x):
    """exp(x) - 1."""
    if abs(x) <= 0.15:
        return x * (((.0238082361044469 * x + 9.14041914819518e-10) * x + 1.) /
                    ((((5.95130811860248e-4 * x + -.0119041179760821) * x + .107141568980644) * x
                      + -.499999999085958) * x + 1.))
    w = exp_full(x)
    if x > 0.:
        return w * (0.5 - 1. / w + 0.5)
    return w - 0.5 - 0.5


@register_jitable
def alnrel(a):
    """log(1 + a)."""
    if abs(a) > 0.375:
        return log_glibc(1. + a)
    t = a / (a + 2.)
    t2 = t * t
    w = (((-.0178874546012214 * t2 + .405303492862024) * t2 + -1.29418923021993) * t2 + 1.) / \
        (((-.0845104217945565 * t2 + .747811014037616) * t2 + -1.62752256355323) * t2 + 1.)
    return t * 2. * w


@register_jitable
def esum(mu, x, give_log):
    """exp(mu + x) (log scale: mu + x)."""
    if give_log:
        return x + float(mu)
    if x > 0.:
        if mu > 0:
            return exp_full(float(mu)) * exp_full(x)
        w = mu + x
        if w < 0.:
            return exp_full(float(mu)) * exp_full(x)
    else:
        if mu < 0:
            return exp_full(float(mu)) * exp_full(x)
        w = mu + x
        if w > 0.:
            return exp_full(float(mu)) * exp_full(x)
    return exp_full(w)


@register_jitable
def gam1(a):
    """1/Gamma(a + 1) - 1 for -1/2 <= a <= 3/2."""
    t = a
    d = a - 0.5
    if d > 0.:
        t = d - 0.5
    if t < 0.:
        top = (((((((-1.32674909766242e-4 * t + 2.66505979058923e-4) * t + .00223047661158249) * t
                   + -.0118290993445146) * t + 9.30357293360349e-4) * t + .118378989872749) * t
                + -.244757765222226) * t + -.771330383816272) * t + -.422784335098468
        bot = (.0559398236957378 * t + .273076135303957) * t + 1.
        w = top / bot
        if d > 0.:
            return t * w / a
        return a * (w + 0.5 + 0.5)
    if t == 0:
        return 0.
    top = (((((5.89597428611429e-4 * t + -.00514889771323592) * t + .0076696818164949) * t
             + .0597275330452234) * t + -.230975380857675) * t + -.409078193005776) * t + .577215664901533
    bot = (((.00423244297896961 * t + .0261132021441447) * t + .158451672430138) * t + .427569613095214) * t + 1.
    w = top / bot
    if d > 0.:
        return t / a * (w - 0.5 - 0.5)
    return a * w


@register_jitable
def gamln1(a):
    """log(Gamma(1 + a)) for -0.2 <= a <= 1.25."""
    if a < 0.6:
        w = ((((((-.00271935708322958 * a + -.0673562214325671) * a + -.402055799310489) * a
                + -.780427615533591) * a + -.168860593646662) * a + .844203922187225) * a + .577215664901533) / \
            ((((((6.67465618796164e-4 * a + .0325038868253937) * a + .361951990101499) * a + 1.56875193295039) * a
               + 3.12755088914843) * a + 2.88743195473681) * a + 1.)
        return -a * w
    x = a - 0.5 - 0.5
    w = (((((4.97958207639485e-4 * x + .017050248402265) * x + .156513060486551) * x + .565221050691933) * x
          + .848044614534529) * x + .422784335098467) / \
        (((((1.16165475989616e-4 * x + .00713309612391) * x + .10155218743983) * x + .548042109832463) * x
          + 1.24313399877507) * x + 1.)
    return x * w


@register_jitable
def psi_half_up(x):
    """The digamma function for x >= 1/2 (toms708's psi without its reflection branch, which pt never needs:
    apser calls it with the larger shape, 1/2)."""
    xmax1 = 2147483647.0
    d2 = 4503599627370496.0  # 0.5 / d1mach(3) = 2^52
    if xmax1 > d2:
        xmax1 = d2
    if x <= 3.:
        den = x
        upper = .0089538502298197 * x
        p1 = (4.77762828042627, 142.441585084029, 1186.45200713425, 3633.51846806499, 4138.10161269013)
        q1 = (44.8452573429826, 520.752771467162, 2210.0079924783, 3641.27349079381, 1908.310765963)
        for i in range(5):
            den = (den + q1[i]) * x
            upper = (upper + p1[i]) * x
        den = (upper + 1305.60269827897) / (den + 6.91091682714533e-6)
        return den * (x - 1.461632144968362341262659542325721325)
    aug = 0.
    if x < xmax1:
        w = 1. / (x * x)
        den = w
        upper = -2.12940445131011 * w
        p2 = (-7.01677227766759, -4.48616543918019, -.648157123766197)
        q2 = (32.2703493791143, 89.2920700481861, 54.6117738103215)
        for i in range(3):
            den = (den + q2[i]) * w
            upper = (upper + p2[i]) * w
        aug = upper / (den + 7.77788548522962) - 0.5 / x + aug
    return aug + log_glibc(x)


@register_jitable
def algdiv(a, b):
    """log(Gamma(b) / Gamma(a + b)) for b >= 8."""
    if a > b:
        h = b / a
        c = 1. / (h + 1.)
        x = h / (h + 1.)
        d = a + (b - 0.5)
    else:
        h = a / b
        c = h / (h + 1.)
        x = 1. / (h + 1.)
        d = b + (a - 0.5)
    x2 = x * x
    s3 = x + x2 + 1.
    s5 = x + x2 * s3 + 1.
    s7 = x + x2 * s5 + 1.
    s9 = x + x2 * s7 + 1.
    s11 = x + x2 * s9 + 1.
    t = 1. / (b * b)
    w = ((((-.00165322962780713 * s11 * t + 8.37308034031215e-4 * s9) * t + -5.9520293135187e-4 * s7) * t
          + 7.9365066682539e-4 * s5) * t + -.00277777777760991 * s3) * t + .0833333333333333
    w *= c / b
    u = d * alnrel(a / b)
    v = a * (log_glibc(b) - 1.)
    if u > v:
        return w - v - u
    return w - u - v


# ----------------------------------------------------------------------------------------------- erf, erfc
_ERF_A = (7.7105849500132e-5, -.00133733772997339, .0323076579225834, .0479137145607681, .128379167095513)
_ERF_B = (.00301048631703895, .0538971687740286, .375795757275549)
_ERF_P = (-1.36864857382717e-7, .564195517478974, 7.21175825088309, 43.1622272220567, 152.98928504694,
          339.320816734344, 451.918953711873, 300.459261020162)
_ERF_Q = (1., 12.7827273196294, 77.0001529352295, 277.585444743988, 638.980264465631, 931.35409485061,
          790.950925327898, 300.459260956983)
_ERF_R = (2.10144126479064, 26.2370141675169, 21.3688200555087, 4.6580782871847, .282094791773523)
_ERF_S = (94.153775055546, 187.11481179959, 99.0191814623914, 18.0124575948747)
_ERF_C = .564189583547756


@register_jitable
def _erf_small(t):
    """(top, bot) of erf's rational approximation for |x| <= 1/2 (t = x^2)."""
    a = _ERF_A
    b = _ERF_B
    top = (((a[0] * t + a[1]) * t + a[2]) * t + a[3]) * t + a[4] + 1.
    bot = ((b[0] * t + b[1]) * t + b[2]) * t + 1.
    return top, bot


@register_jitable
def _erf_mid(ax):
    """top / bot of erfc's rational approximation for 1/2 < |x| <= 4."""
    p = _ERF_P
    q = _ERF_Q
    top = ((((((p[0] * ax + p[1]) * ax + p[2]) * ax + p[3]) * ax + p[4]) * ax + p[5]) * ax + p[6]) * ax + p[7]
    bot = ((((((q[0] * ax + q[1]) * ax + q[2]) * ax + q[3]) * ax + q[4]) * ax + q[5]) * ax + q[6]) * ax + q[7]
    return top, bot


@register_jitable
def _erf_large(t):
    """(top, bot) of erfc's rational approximation for |x| > 4 (t = 1/x^2)."""
    r = _ERF_R
    s = _ERF_S
    top = (((r[0] * t + r[1]) * t + r[2]) * t + r[3]) * t + r[4]
    bot = (((s[0] * t + s[1]) * t + s[2]) * t + s[3]) * t + 1.
    return top, bot


@register_jitable
def erf_r(x):
    """toms708's erf__(x)."""
    ax = abs(x)
    if ax <= 0.5:
        top, bot = _erf_small(x * x)
        return x * (top / bot)
    if ax <= 4.:
        top, bot = _erf_mid(ax)
        R = 0.5 - exp_full(-x * x) * top / bot + 0.5
        return -R if x < 0 else R
    if ax >= 5.8:
        return 1. if x > 0 else -1.
    x2 = x * x
    top, bot = _erf_large(1. / x2)
    t = (_ERF_C - top / (x2 * bot)) / ax
    R = 0.5 - exp_full(-x2) * t + 0.5
    return -R if x < 0 else R


@register_jitable
def erfc1_scaled(x):
    """toms708's erfc1(1, x) = exp(x^2) erfc(x)."""
    ax = abs(x)
    if ax <= 0.5:
        t = x * x
        top, bot = _erf_small(t)
        return exp_full(t) * (0.5 - x * (top / bot) + 0.5)
    if ax <= 4.:
        top, bot = _erf_mid(ax)
        ret = top / bot
    else:
        if x <= -5.6:
            return exp_full(x * x) * 2.
        t = 1. / (x * x)
        top, bot = _erf_large(t)
        ret = (_ERF_C - t * top / bot) / ax
    if x < 0.:
        ret = exp_full(x * x) * 2. - ret
    return ret


# ------------------------------------------------------------------------------------------------ the series
@register_jitable
def fpser_log(a, b, x, eps):
    """log I_x(a, b) for b < min(eps, eps a) and x <= 1/2."""
    ans = a * log_glibc(x)
    ans += log_glibc(b) - log_glibc(a)
    tol = eps / a
    an = a + 1.
    t = x
    s = t / an
    while True:
        an += 1.
        t = x * t
        c = t / an
        s += c
        if not abs(c) > tol:
            break
    return ans + log1p_glibc(a * s)


@register_jitable
def apser(a, b, x, eps):
    """I_{1-x}(b, a) for a <= min(eps, eps b), b x <= 1 and x <= 1/2 (b >= 1/2 here)."""
    g = .577215664901533
    bx = b * x
    t = x - bx
    if b * eps <= 0.02:
        c = log_glibc(x) + psi_half_up(b) + g + t
    else:
        c = log_glibc(bx) + g + t
    tol = eps * 5. * abs(c)
    j = 1.
    s = 0.
    while True:
        j += 1.
        t *= x - bx / j
        aj = t / j
        s += aj
        if not abs(aj) > tol:
            break
    return -a * (c + s)


@register_jitable
def _gam1_ratio(a0, b0):
    """(gam1(a0 + b0 - 1) + 1) / (a0 + b0) or gam1(a0 + b0) + 1, as bpser, brcomp and brcmp1 form it."""
    apb = a0 + b0
    if apb > 1.:
        u = a0 + b0 - 1.
        return (gam1(u) + 1.) / apb
    return gam1(apb) + 1.


@register_jitable
def bpser_log(a, b, x, eps):
    """log I_x(a, b) by its power series (b <= 1 or b x <= 0.7; here min(a, b) < 1)."""
    if x == 0.:
        return -math.inf
    a0 = min(a, b)
    if a0 >= 1.:
        return math.nan  # betaln's branch: both shapes >= 1, never reached from pt
    b0 = max(a, b)
    if b0 < 8.:
        if b0 <= 1.:
            ans = a * log_glibc(x)
            apb = a + b
            z = _gam1_ratio(a, b)
            c = (gam1(a) + 1.) * (gam1(b) + 1.) / z
            ans += log_glibc(c * (b / apb))
        else:
            u = gamln1(a0)
            m = int(b0 - 1.)
            if m >= 1:
                c = 1.
                for _ in range(m):
                    b0 += -1.
                    c *= b0 / (a0 + b0)
                u += log_glibc(c)
            z = a * log_glibc(x) - u
            b0 += -1.
            t = _gam1_ratio(a0, b0)
            ans = z + log_glibc(a0 / a) + log1p_glibc(gam1(b0)) - log_glibc(t)
    else:
        u = gamln1(a0) + algdiv(a0, b0)
        z = a * log_glibc(x) - u
        ans = z + log_glibc(a0 / a)
    if ans == -math.inf:
        return ans
    tol = eps / a
    n = 0.
    s = 0.
    c = 1.
    while True:
        n += 1.
        c *= (0.5 - b / n + 0.5) * x
        w = c / (a + n)
        s += w
        if not (n < 1e7 and abs(w) > tol):
            break
    if a * s > -1.:
        return ans + log1p_glibc(a * s)
    return -math.inf


@register_jitable
def brcmp1(mu, a, b, x, y, give_log):
    """exp(mu) x^a y^b / Beta(a, b) (its log where give_log), for min(a, b) < 1."""
    a0 = min(a, b)
    if a0 >= 1.:
        return math.nan  # both shapes >= 1: never reached from pt
    if x <= .375:
        lnx = log_glibc(x)
        lny = alnrel(-x)
    elif y > .375:
        lnx = log_glibc(x)
        lny = log_glibc(y)
    else:
        lnx = alnrel(-y)
        lny = log_glibc(y)
    z = a * lnx + b * lny
    b0 = max(a, b)
    if b0 >= 8.:
        u = gamln1(a0) + algdiv(a0, b0)
        if give_log:
            return log_glibc(a0) + esum(mu, z - u, True)
        return a0 * esum(mu, z - u, False)
    if b0 <= 1.:
        ans = esum(mu, z, give_log)
        if ans == (-math.inf if give_log else 0.):
            return ans
        z = _gam1_ratio(a, b)
        if give_log:
            c = log1p_glibc(gam1(a)) + log1p_glibc(gam1(b)) - log_glibc(z)
            return ans + log_glibc(a0) + c - log1p_glibc(a0 / b0)
        c = (gam1(a) + 1.) * (gam1(b) + 1.) / z
        return ans * (a0 * c) / (a0 / b0 + 1.)
    u = gamln1(a0)
    n = int(b0 - 1.)
    if n >= 1:
        c = 1.
        for _ in range(n):
            b0 += -1.
            c *= b0 / (a0 + b0)
        u += log_glibc(c)
    z -= u
    b0 += -1.
    apb = a0 + b0
    if apb > 1.:
        t = (gam1(apb - 1.) + 1.) / apb
    else:
        t = gam1(apb) + 1.
    if give_log:
        return log_glibc(a0) + esum(mu, z, True) + log1p_glibc(gam1(b0)) - log_glibc(t)
    return a0 * esum(mu, z, False) * (gam1(b0) + 1.) / t


@register_jitable
def bup(a, b, x, y, n, eps, give_log):
    """I_x(a, b) - I_x(a + n, b) for a positive integer n (its log where give_log)."""
    apb = a + b
    ap1 = a + 1.
    if n > 1 and a >= 1. and apb >= ap1 * 1.1:
        mu = int(abs(EXPARG_1))
        k = int(EXPARG_0)
        if mu > k:
            mu = k
        d = exp_full(-float(mu))
    else:
        mu = 0
        d = 1.
    if give_log:
        ret = brcmp1(mu, a, b, x, y, True) - log_glibc(a)
    else:
        ret = brcmp1(mu, a, b, x, y, False) / a
    if n == 1 or (give_log and ret == -math.inf) or (not give_log and ret == 0.):
        return ret
    nm1 = n - 1
    w = d
    k = 0
    if b > 1.:
        if y > 1e-4:
            r = (b - 1.) * x / y - a
            if r >= 1.:
                k = int(r) if r < nm1 else nm1
        else:
            k = nm1
        for i in range(k):
            l = float(i)
            d *= (apb + l) / (ap1 + l) * x
            w += d
    for i in range(k, nm1):
        l = float(i)
        d *= (apb + l) / (ap1 + l) * x
        w += d
        if d <= eps * w:
            break
    if give_log:
        return ret + log_glibc(w)
    return ret * w


@register_jitable
def grat_r(a, x, log_r, eps):
    """Q(a, x) / r with r = exp(log_r) = e^-x x^a / Gamma(a), a <= 1 (the scaled complement of the incomplete
    gamma ratio)."""
    if a * x == 0.:
        if x <= a:
            return exp_full(-log_r)
        return 0.
    if a == 0.5:
        if x < 0.25:
            p = erf_r(math.sqrt(x))
            return (0.5 - p + 0.5) * exp_full(-log_r)
        sx = math.sqrt(x)
        return erfc1_scaled(sx) / sx * M_SQRT_PI
    if x < 1.1:
        an = 3.
        c = x
        s = x / (a + 3.)
        tol = eps * 0.1 / (a + 1.)
        while True:
            an += 1.
            c *= -(x / an)
            t = c / (a + an)
            s += t
            if not abs(t) > tol:
                break
        j = a * x * ((s / 6. - 0.5 / (a + 2.)) * x + 1. / (a + 1.))
        z = a * log_glibc(x)
        h = gam1(a)
        g = h + 1.
        if (x >= 0.25 and a < x / 2.59) or z > -0.13394:
            l = rexpm1(z)
            q = ((l + 0.5 + 0.5) * j - l) * g - h
            if q <= 0.:
                return 0.
            return q * exp_full(-log_r)
        p = exp_full(z) * g * (0.5 - j + 0.5)
        return (0.5 - p + 0.5) * exp_full(-log_r)
    a2n_1 = 1.
    a2n = 1.
    b2n_1 = x
    b2n = x + (1. - a)
    c = 1.
    while True:
        a2n_1 = x * a2n + c * a2n_1
        b2n_1 = x * b2n + c * b2n_1
        am0 = a2n_1 / b2n_1
        c += 1.
        c_a = c - a
        a2n = a2n_1 + c_a * a2n
        b2n = b2n_1 + c_a * b2n
        an0 = a2n / b2n
        if not abs(an0 - am0) >= eps * an0:
            break
    return an0


@register_jitable
def bgrat_series(cd, b, bm1, z, q_r, v, t2, l, eps):
    """(sum, ierr): bgrat's series (sum <= 0: ierr 3; no convergence in BGRAT_TERMS terms: ierr 4);
    ``cd``: float64[BGRAT_SCRATCH], c[i] = cd[i] and d[i] = cd[BGRAT_TERMS + i]."""
    j = q_r
    s = j
    t = 1.
    cn = 1.
    n2 = 0.
    ierr = 0
    for n in range(1, BGRAT_TERMS + 1):
        bp2n = b + n2
        j = (bp2n * (bp2n + 1.) * j + (z + bp2n + 1.) * t) * v
        n2 += 2.
        t *= t2
        cn /= n2 * (n2 + 1.)
        nm1 = n - 1
        cd[nm1] = cn
        sd = 0.
        if n > 1:
            coef = b - n
            for i in range(1, nm1 + 1):
                sd += coef * cd[i - 1] * cd[BGRAT_TERMS + nm1 - i]
                coef += b
        dn = bm1 * cn + sd / n
        cd[BGRAT_TERMS + nm1] = dn
        dj = dn * j
        s += dj
        if s <= 0.:
            return s, 3
        if abs(dj) <= eps * (s + l):
            return s, 0
        if n == BGRAT_TERMS:
            ierr = 4
    return s, ierr


@register_jitable
def bgrat(a, b, x, y, w, eps, log_w):
    """(w + I_x(a, b), ierr) by the asymptotic expansion for a >= 15, b <= 1 (w and the result on the log scale
    where log_w); ierr != 0: the expansion cannot be computed and w is returned unchanged."""
    bm1 = b - 0.5 - 0.5
    nu = a + bm1 * 0.5
    lnx = log_glibc(x) if y > 0.375 else alnrel(-y)
    z = -nu * lnx
    if b * z == 0.:
        return w, 1
    log_r = log_glibc(b) + log1p_glibc(gam1(b)) + b * log_glibc(z) + nu * lnx
    log_u = log_r - (algdiv(b, a) + b * log_glibc(nu))
    u = exp_full(log_u)
    if log_u == -math.inf:
        return w, 2
    u_0 = u == 0.
    if log_w:
        l = 0. if w == -math.inf else exp_full(w - log_u)
    else:
        l = 0. if w == 0. else exp_full(log_glibc(w) - log_u)
    q_r = grat_r(b, z, log_r, eps)
    v = 0.25 / (nu * nu)
    t2 = lnx * 0.25 * lnx
    s, ierr = bgrat_series_local(b, bm1, z, q_r, v, t2, l, eps)
    if ierr == 3:
        return w, 3
    if log_w:
        return logspace_add(w, log_u + log_glibc(s)), ierr
    if u_0:
        return w + exp_full(log_u + log_glibc(s)), ierr
    return w + u * s, ierr


# ------------------------------------------------------------------------------------------------ bratio
@register_jitable
def _w_from_w1(w1, want_w):
    """L_end_from_w1 on the log scale: w1 = I (not log) to log(1 - I) or log(I)."""
    if want_w:
        return log1p_glibc(-w1)
    return log_glibc(w1)


@register_jitable
def bratio_log(a, b, x, y, lower):
    """log I_x(a, b) (``lower``) or log(1 - I_x(a, b)), y = 1 - x, as R's bratio(..., log_p = TRUE) gives them
    for min(a, b) <= 1 (NaN otherwise, and for invalid arguments where bratio sets ierr)."""
    if math.isnan(x) or math.isnan(y) or math.isnan(a) or math.isnan(b):
        return math.nan
    if a < 0. or b < 0. or (a == 0. and b == 0.) or x < 0. or x > 1. or y < 0. or y > 1.:
        return math.nan
    eps = 2.220446049250313e-16
    z = x + y - 0.5 - 0.5
    if abs(z) > eps * 3.:
        return -math.inf  # ierr = 5: w = w1 = log(0)
    if x == 0.:
        if a == 0.:
            return -math.inf
        return -math.inf if lower else 0.
    if y == 0.:
        if b == 0.:
            return -math.inf
        return 0. if lower else -math.inf
    if a == 0.:
        return 0. if lower else -math.inf
    if b == 0.:
        return -math.inf if lower else 0.
    eps = max(eps, BRATIO_EPS)
    a_lt_b = a < b
    if (b if a_lt_b else a) < eps * .001:
        if a_lt_b:
            return log1p_glibc(-a / (a + b)) if lower else log_glibc(a / (a + b))
        return log_glibc(b / (a + b)) if lower else log1p_glibc(-b / (a + b))
    if min(a, b) > 1.:
        return math.nan  # bfrac, basym, bup + bgrat for two shapes > 1: never reached from pt
    do_swap = x > 0.5
    if do_swap:
        a0, x0, b0, y0 = b, y, a, x
    else:
        a0, x0, b0, y0 = a, x, b, y
    want_w = lower != do_swap  # the value R swaps into the answer: w (I) or w1 (1 - I) of a0, b0, x0
    if b0 < min(eps, eps * a0):
        lw = fpser_log(a0, b0, x0, eps)
        return lw if want_w else log1_exp(lw)
    if a0 < min(eps, eps * b0) and b0 * x0 <= 1.:
        return _w_from_w1(apser(a0, b0, x0, eps), want_w)
    direct = 0  # 1: w = bpser(a0, b0, x0); 2: w1 = bpser(b0, a0, y0); 0: bup and bgrat
    if max(a0, b0) > 1.:
        if b0 <= 1.:
            direct = 1
        elif x0 >= 0.29:
            direct = 2
        elif x0 < 0.1 and (x0 * b0 <= POW_HALF_LE_07 if a0 == 0.5 else math.pow(x0 * b0, a0) <= 0.7):
            direct = 1
        elif b0 > 15.:
            direct = 3
    else:
        if a0 >= min(0.2, b0):
            direct = 1
        elif math.pow(x0, a0) <= 0.9:
            direct = 1
        elif x0 >= 0.3:
            direct = 2
    if direct == 1:
        lw = bpser_log(a0, b0, x0, eps)
        return lw if want_w else log1_exp(lw)
    if direct == 2:
        lw1 = bpser_log(b0, a0, y0, eps)
        return log1_exp(lw1) if want_w else lw1
    n = 20
    did_bup = direct == 0
    if did_bup:
        w1 = bup(b0, a0, y0, x0, n, eps, False)
        b0 += n
    else:
        w1 = 0.
    w1, ierr1 = bgrat(b0, a0, y0, x0, w1, 15 * eps, False)
    if w1 == 0 or (0 < w1 and w1 < DBL_MIN):
        # underflow: again on the log scale
        if did_bup:
            w1 = bup(b0 - n, a0, y0, x0, n, eps, True)
        else:
            w1 = -math.inf
        w1, ierr1 = bgrat(b0, a0, y0, x0, w1, 15 * eps, True)
        return log1_exp(w1) if want_w else w1
    return _w_from_w1(w1, want_w)


__all__ = ["bratio_log", "bgrat_series", "bgrat_series_local", "BGRAT_SCRATCH", "POW_HALF_LE_07"]
