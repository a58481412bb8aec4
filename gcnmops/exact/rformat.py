"""R's ``as.character(<double>)`` (R 4.2): 15 significant digits, fixed or scientific notation, whichever is
narrower, trailing zeros dropped.

R formats each element on its own (``formatReal`` with ``R_print.digits = 15``, then ``EncodeRealDrop0``):
``scientific()`` finds the fewest significant digits (<= 15) that show the value to 15 digits, from the value
scaled by a power of ten in long double (x87, 64-bit significand) and rounded to an integer; the fixed notation
is used when it is no wider than the scientific one (``scipen`` 0). The digits themselves come from C's
``sprintf`` (exact decimal rounding, as Python's ``%`` formatting). The long double steps are done here exactly
in rationals, rounded as the x87 rounds (to nearest, ties to even, 64 bits).
"""
from __future__ import annotations

import math
from fractions import Fraction

#: significant digits of as.character(<double>) (R_print.digits = DBL_DIG)
DIGITS = 15
#: R's KP_MAX: the largest exact power of ten in its table
_KP_MAX = 22


def _long_double(x: Fraction) -> Fraction:
    """``x`` rounded to the x87 extended format (64-bit significand; no overflow or subnormals in this use)."""
    if x == 0:
        return x
    sign = -1 if x < 0 else 1
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    scale = Fraction(2) ** (63 - e)  # a * scale in [2^63, 2^64)
    m = a * scale
    q, r = divmod(m.numerator, m.denominator)
    twice = 2 * r
    if twice > m.denominator or (twice == m.denominator and q % 2 == 1):
        q += 1
    return sign * Fraction(q) / scale


def _pow10_ld(k: int) -> Fraction:
    """10^k as glibc's powl returns it (correctly rounded to long double)."""
    return _long_double(Fraction(10) ** k)


#: the decided digits' distance from a rounding tie, in units of the 15th digit, beyond which the long double steps
#: (at most two roundings of a value below 10^15 < 2^50: an error below 2^-13) cannot round the other way
_TIE_MARGIN = 2.0 ** -10


def _scientific_fast(r: float) -> tuple[int, int] | None:
    """(kpower, nsig) of R's scientific() for ``r`` > 0 from the exact decimal rounding (Python's formatting), where
    that provably equals the long double steps: the value scaled to 15 integer digits is not within _TIE_MARGIN
    of a tie, and its exponent is far from the ranges where R scales in two steps; else None (the exact path)."""
    mantissa, exponent = f"{r:.{DIGITS - 1}e}".split("e")
    E = int(exponent)
    k = DIGITS - 1 - E
    if not -290 < k < 290:
        return None
    num, den = r.as_integer_ratio()  # exact: r = num / den, den a power of two
    if k >= 0:
        num *= 10 ** k
    else:
        den *= 10 ** -k
    q, rem = divmod(num, den)
    if not 10 ** (DIGITS - 1) <= q < 10 ** DIGITS:  # rounding carried into the next power of ten
        return None
    if abs(2 * rem - den) <= 2 * _TIE_MARGIN * den:
        return None
    digits = mantissa.replace(".", "")
    nsig = len(digits.rstrip("0")) or 1
    return E, nsig


def _scientific(x: float) -> tuple[bool, int, int, bool]:
    """R's scientific(): (negative, kpower (decimal exponent), nsig (significant digits), rounding widens)."""
    if x == 0.0:
        return False, 0, 1, False
    neg = x < 0
    r = -x if neg else x
    kpower, nsig = _scientific_fast(r) or _scientific_exact(r)
    rgt = min(max(DIGITS - kpower, 0), _KP_MAX)
    fuzz = 0.5 / 10.0 ** rgt
    widens = 0 < kpower <= _KP_MAX and r < 10.0 ** kpower - fuzz
    return neg, kpower, nsig, widens


def _scientific_exact(r: float) -> tuple[int, int]:
    """(kpower, nsig) of R's scientific() for ``r`` > 0: its long double steps done exactly in rationals."""
    R = DIGITS
    kp = math.floor(math.log10(r)) - R + 1
    r_prec = Fraction(r)
    if abs(kp) < 10:  # exact table values, one rounded operation
        r_prec = _long_double(r_prec / Fraction(10) ** kp) if kp > 0 else _long_double(r_prec * Fraction(10) ** -kp)
    elif kp <= -308:  # R_dec_min_exponent: (r * 1e303) / powl(10, kp + 303)
        r_prec = _long_double(_long_double(r_prec * Fraction(1e303)) / _pow10_ld(kp + 303))
    else:
        r_prec = _long_double(r_prec / _pow10_ld(kp))
    if r_prec < Fraction(10) ** (R - 1):
        r_prec = _long_double(r_prec * 10)
        kp -= 1
    alpha = float(round(r_prec))  # nearbyintl (ties to even), then to double: exact below 10^15
    nsig = R
    for _ in range(R):
        alpha /= 10.0
        if alpha == math.floor(alpha):
            nsig -= 1
        else:
            break
    if nsig == 0:
        nsig = 1
        kp += 1
    return kp + R - 1, nsig


def as_character(x: float) -> str:
    """``as.character(x)`` of one R double, as R 4.2 writes it (``NA``, ``NaN``, ``Inf``, ``-Inf`` included)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Inf" if x > 0 else "-Inf"
    if x == 0.0:
        return "0"  # R drops the sign of a negative zero
    neg, kpower, nsig, widens = _scientific(x)
    left = kpower + 1
    if widens:
        left -= 1
    sleft = int(neg) + (1 if left <= 0 else left)
    rgt = max(nsig - left, 0)
    if left < 0:  # mxl < 0: a leading zero
        sleft = 1 + int(neg)
    width_fixed = sleft + rgt + (rgt != 0)
    e = 2 if kpower >= 100 or kpower <= -99 else 1
    d = nsig - 1
    width_sci = int(neg) + (d > 0) + d + 4 + e
    if width_fixed <= width_sci:
        text = f"{x:.{rgt}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return text
    text = f"{x:.{d}e}"
    mantissa, exponent = text.split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{exponent}"


__all__ = ["as_character", "DIGITS"]
