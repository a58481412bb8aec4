"""R's ``fft(z)`` and ``fft(z, inverse=TRUE)`` (stats 4.2) bit for bit, for lengths 1 and powers of two.

R's fft() is Richard Singleton's mixed-radix algorithm (1969) as R's stats/src/fft.c runs it: an in-place
decimation in frequency over the factors R's factorization gives, then a digit-reversal permutation (which
only moves values). For n = 2^p the factors are 4 (once per factor 16 of n, at both ends), and in the middle
nothing (n = 16^q), 4 (4 * 16^q), 2 (2 * 16^q) or 2, 2, 2 (8 * 16^q). A pass over span S (S = n, then S / f
each pass) splits every block of S values into f sub-blocks; the offset j (0 <= j < S / f) of a sub-block is
rotated by w^(j d) (d: the sub-block's number, w = exp(-+2 pi i / S), sign - forward, + inverse), and the
rotation factors are what must be R's to the last bit: R takes cos and sin of the angle j * (8 / S) * (pi / 4)
only every 32nd j and steps the others by the recurrence c' = c - (cd c + sd s), s' = (sd c - cd s) + s with
cd = 2 sin(pi / S)^2 and sd = sin(2 pi / S) (sin, cos: the C library's, glibc's on Linux, which numba calls
too). A radix-2 pass starts that recurrence at (1 - cd, sd) and rotates the offset S/2 - j by (-c, s) (for
j < S/4); a radix-4 pass starts at (1, 0), rotates the sub-blocks 1, 2 and 3 by (c, s), its square
(c^2 - s^2, 2 c s) and cube, and multiplies nothing where s == 0. Each value is written by one butterfly per
pass, so the loops may run in any order (here: blocks outer, offsets inner, or the reverse for short blocks,
with the rotations precomputed per pass); every sum and product is R's, in R's order, with no FMA (numba on
x86 does not contract: none in the machine code on an FMA-capable CPU). The inverse is unnormalized, like R's.

Verified by ``tests/test_rfft_vs_r.py``: R's ``fft`` itself (through rpy2) on random complex and real vectors of
every length 2^0..2^21, forward and inverse, bit for bit (and R's density() built on it). Other lengths raise ValueError (R's factors 3, 5 and
larger odd ones, with their rotation pass and square-free permutation, are not reproduced).

Arrays: complex128 (n,) in and out (1-D, any layout); the njit kernel works on separate float64 real and
imaginary arrays, in place.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["r_fft", "fft_inplace", "fft_passes", "unscramble", "r_factors"]

#: R's pi / 4 (M_PI_4)
_PI_4 = 0.785398163397448309615660845819875721
#: R evaluates cos and sin exactly every this many offsets and steps the others by its recurrence
_EXACT_EVERY = 32
#: radix-4 passes with fewer offsets per block than this loop over blocks inside (their per-block overhead)
_FEW_OFFSETS = 16


@njit(cache=True, nogil=True)
def r_factors(n: int) -> np.ndarray:
    """R's factors of n = 2^p (fft_factor's order): 4 per factor 16 of n, the rest (1, 2, 4 or 8: none, 2, 4,
    or 2, 2, 2) in the middle, 4 per factor 16 again. Empty for n = 1."""
    q = 0
    k = n
    while k % 16 == 0:
        q += 1
        k //= 16
    if k == 1:
        mid = 0
    elif k == 2 or k == 4:
        mid = 1
    else:
        mid = 3
    out = np.empty(2 * q + mid, dtype=np.int64)
    out[:q] = 4
    out[q + mid:] = 4
    if mid == 1:
        out[q] = k
    elif mid == 3:
        out[q:q + 3] = 2
    return out


@njit(cache=True, nogil=True)
def _pass_constants(span, sign):
    """(dr, rad, cd, sd) of a pass over blocks of ``span`` complex values: dr = 8 jc / kspan with R's strides
    (jc = 2, kspan = 2 span), rad = sign * pi / 4, cd = 2 sin(dr rad / 2)^2, sd = sin(dr rad)."""
    dr = (8.0 * 2.0) / float(2 * span)
    rad = sign * _PI_4
    cd = math.sin(0.5 * dr * rad)
    cd = 2.0 * cd * cd
    sd = math.sin(dr * rad)
    return dr, rad, cd, sd


@njit(cache=True, nogil=True)
def _step(c, s, cd, sd):
    """R's recurrence from the rotation (c, s) of offset j to that of offset j + 1."""
    return c - (cd * c + sd * s), (sd * c - cd * s) + s


@njit(cache=True, nogil=True)
def _exact_rotation(j, dr, rad):
    """R's cos and sin of the angle of offset j, evaluated directly."""
    a = (float(j) * dr) * rad
    return math.cos(a), math.sin(a)


@njit(cache=True, nogil=True)
def _radix2(re, im, span, sign):
    """One radix-2 pass (with its rotations) over blocks of ``span`` values."""
    n = re.shape[0]
    h = span // 2
    dr, rad, cd, sd = _pass_constants(span, sign)
    # the rotation of offsets 1 .. h - 1: (c_j, s_j) for j <= h/2, (-c_(h-j), s_(h-j)) above
    c = np.empty(h)
    s = np.empty(h)
    cj = 1.0 - cd
    sj = sd
    for j in range(1, h // 2 + 1):
        if j > 1:
            if j % _EXACT_EVERY == 0:
                cj, sj = _exact_rotation(j, dr, rad)
            else:
                cj, sj = _step(cj, sj, cd, sd)
        c[j] = cj
        s[j] = sj
        if h - j > j:
            c[h - j] = -cj
            s[h - j] = sj
    for base in range(0, n, span):
        k1 = base
        k2 = base + h
        ak = re[k2]
        bk = im[k2]
        re[k2] = re[k1] - ak
        im[k2] = im[k1] - bk
        re[k1] = re[k1] + ak
        im[k1] = im[k1] + bk
        for j in range(1, h):
            k1 = base + j
            k2 = k1 + h
            ak = re[k1] - re[k2]
            bk = im[k1] - im[k2]
            re[k1] = re[k1] + re[k2]
            im[k1] = im[k1] + im[k2]
            re[k2] = c[j] * ak - s[j] * bk
            im[k2] = s[j] * ak + c[j] * bk


@njit(cache=True, nogil=True)
def _radix4(re, im, span, sign):
    """One radix-4 pass (with its rotations) over blocks of ``span`` values."""
    n = re.shape[0]
    q = span // 4
    dr, rad, cd, sd = _pass_constants(span, sign)
    c1 = np.empty(q)
    s1 = np.empty(q)
    c2 = np.empty(q)
    s2 = np.empty(q)
    c3 = np.empty(q)
    s3 = np.empty(q)
    cj = 1.0
    sj = 0.0
    for j in range(q):
        if j > 0:
            if j % _EXACT_EVERY == 0:
                cj, sj = _exact_rotation(j, dr, rad)
            else:
                cj, sj = _step(cj, sj, cd, sd)
        c1[j] = cj
        s1[j] = sj
        cc = cj * cj - sj * sj
        ss = cj * sj * 2.0
        c2[j] = cc
        s2[j] = ss
        c3[j] = cc * cj - ss * sj
        s3[j] = cc * sj + ss * cj
    # the rotation by -+i inside the butterfly: forward adds bjm to akm and subtracts ajm from bkm, inverse the
    # reverse (x - y is x + (-y) in IEEE arithmetic, so the sign flip below is exact)
    rot = 1.0 if sign < 0 else -1.0
    if q < _FEW_OFFSETS:  # many short blocks: each offset's rotation once, its butterflies in all blocks
        for j in range(q):
            if s1[j] == 0.0:
                for i0 in range(j, n, span):
                    _butterfly4_plain(re, im, i0, q, rot)
            else:
                for i0 in range(j, n, span):
                    _butterfly4(re, im, i0, q, rot, c1[j], s1[j], c2[j], s2[j], c3[j], s3[j])
        return
    # runs of offsets [runs[r], runs[r + 1]) that R rotates (s != 0) or leaves unmultiplied (s == 0): branch-free
    # inner loops (in practice offset 0 alone is unmultiplied)
    runs = np.empty(q + 1, dtype=np.int64)
    nruns = 0
    for j in range(q):
        if j == 0 or (s1[j] == 0.0) != (s1[j - 1] == 0.0):
            runs[nruns] = j
            nruns += 1
    runs[nruns] = q
    for base in range(0, n, span):
        for r in range(nruns):
            if s1[runs[r]] == 0.0:
                for j in range(runs[r], runs[r + 1]):
                    _butterfly4_plain(re, im, base + j, q, rot)
            else:
                for j in range(runs[r], runs[r + 1]):
                    _butterfly4(re, im, base + j, q, rot, c1[j], s1[j], c2[j], s2[j], c3[j], s3[j])


@njit(cache=True, nogil=True, inline="always")
def _butterfly4_sums(re, im, i0, q):
    """What both radix-4 butterflies start from on i0, i0 + q, i0 + 2q, i0 + 3q: R's sums and differences of the
    four points; the first output (at i0) is written. Returns (i1, i2, i3, akp, akm, ajp, ajm, bkp, bkm, bjp, bjm)."""
    i1 = i0 + q
    i2 = i1 + q
    i3 = i2 + q
    akp = re[i0] + re[i2]
    akm = re[i0] - re[i2]
    ajp = re[i1] + re[i3]
    ajm = re[i1] - re[i3]
    bkp = im[i0] + im[i2]
    bkm = im[i0] - im[i2]
    bjp = im[i1] + im[i3]
    bjm = im[i1] - im[i3]
    re[i0] = akp + ajp
    im[i0] = bkp + bjp
    return i1, i2, i3, akp, akm, ajp, ajm, bkp, bkm, bjp, bjm


@njit(cache=True, nogil=True, inline="always")
def _butterfly4(re, im, i0, q, rot, c1, s1, c2, s2, c3, s3):
    """R's radix-4 butterfly on i0, i0 + q, i0 + 2q, i0 + 3q, the last three rotated by (c1, s1), (c2, s2),
    (c3, s3)."""
    i1, i2, i3, akp, akm, ajp, ajm, bkp, bkm, bjp, bjm = _butterfly4_sums(re, im, i0, q)
    ajp = akp - ajp
    bjp = bkp - bjp
    u = rot * bjm
    v = rot * ajm
    akp = akm + u
    akm = akm - u
    bkp = bkm - v
    bkm = bkm + v
    re[i1] = akp * c1 - bkp * s1
    im[i1] = akp * s1 + bkp * c1
    re[i2] = ajp * c2 - bjp * s2
    im[i2] = ajp * s2 + bjp * c2
    re[i3] = akm * c3 - bkm * s3
    im[i3] = akm * s3 + bkm * c3


@njit(cache=True, nogil=True, inline="always")
def _butterfly4_plain(re, im, i0, q, rot):
    """_butterfly4 where R multiplies nothing (s == 0)."""
    i1, i2, i3, akp, akm, ajp, ajm, bkp, bkm, bjp, bjm = _butterfly4_sums(re, im, i0, q)
    u = rot * bjm
    v = rot * ajm
    re[i1] = akm + u
    im[i1] = bkm - v
    re[i2] = akp - ajp
    im[i2] = bkp - bjp
    re[i3] = akm - u
    im[i3] = bkm + v


@njit(cache=True, nogil=True)
def _reversal(factors):
    """The digit reversal of the factors' mixed radix: src[k] = d0 n/f0 + d1 n/(f0 f1) + ... for k = d0 + f0 d1 +
    f0 f1 d2 + ... (n: the factors' product), built from the last factor to the first."""
    n = 1
    for f in factors:
        n *= f
    src = np.zeros(n, dtype=np.int64)
    tmp = np.empty(n, dtype=np.int64)
    size = 1
    for i in range(factors.shape[0] - 1, -1, -1):
        f = factors[i]
        for k in range(size):
            for d in range(f):
                tmp[d + f * k] = d * size + src[k]
        size *= f
        src, tmp = tmp, src
    return src


@njit(cache=True, nogil=True)
def unscramble(re: np.ndarray, im: np.ndarray) -> None:
    """Natural order, in place, from the passes' digit-reversed one (moves values only): frequency k = d0 + f0 d1
    + ... lies at d0 n/f0 + d1 n/(f0 f1) + ... . R's factor lists are palindromes, so with A the product of
    the first t factors (= of the last t), k = a + A (c + M b) lies at (n/A) rev_a(a) + A rev_c(c) + rev_b(b)
    (each the reversal over its own factors): A x A blocks, read and written a cache line at a time."""
    n = re.shape[0]
    factors = r_factors(n)
    m = factors.shape[0]
    t = min(2, m // 2)
    rev_a = _reversal(factors[:t])
    rev_c = _reversal(factors[t:m - t])
    rev_b = _reversal(factors[m - t:])
    A = rev_a.shape[0]
    M = rev_c.shape[0]
    stride = n // A
    out_re = np.empty(n)
    out_im = np.empty(n)
    for c in range(M):
        src0 = A * c
        dst0 = A * rev_c[c]
        for b in range(A):
            src = src0 + A * M * b
            dst = dst0 + rev_b[b]
            for a in range(A):
                out_re[dst + stride * rev_a[a]] = re[src + a]
                out_im[dst + stride * rev_a[a]] = im[src + a]
    re[:] = out_re
    im[:] = out_im


@njit(cache=True, nogil=True)
def fft_passes(re: np.ndarray, im: np.ndarray, inverse: bool) -> None:
    """R's fft passes (all the arithmetic) on ``re``/``im`` in place, leaving the transform in digit-reversed
    order (``unscramble`` puts it in natural order). float64 (n,), n a power of two or 1."""
    n = re.shape[0]
    if im.shape[0] != n:
        raise ValueError("real and imaginary parts differ in length")
    if n < 1 or (n & (n - 1)) != 0:
        raise ValueError("fft: only lengths that are powers of two are reproduced")
    sign = 1.0 if inverse else -1.0
    span = n
    for f in r_factors(n):
        if f == 4:
            _radix4(re, im, span, sign)
        else:
            _radix2(re, im, span, sign)
        span //= f


@njit(cache=True, nogil=True)
def fft_inplace(re: np.ndarray, im: np.ndarray, inverse: bool) -> None:
    """R's ``fft(complex(real = re, imaginary = im), inverse)`` into ``re``/``im`` (float64 (n,), n a power of
    two or 1; the inverse unnormalized)."""
    fft_passes(re, im, inverse)
    unscramble(re, im)


def r_fft(z, inverse: bool = False) -> np.ndarray:
    """R's ``fft(z, inverse=inverse)`` of a 1-D numeric or complex vector whose length is 1 or a power of two
    (a real vector is taken with imaginary parts +0, as R coerces it). Returns a new complex128 (n,) array."""
    z = np.asarray(z)
    if z.ndim != 1:
        raise ValueError(f"fft: expected a vector, got an array of shape {z.shape}")
    n = z.shape[0]
    if n < 1 or (n & (n - 1)) != 0:
        raise ValueError(f"fft: length {n} is not a power of two (only those are reproduced)")
    z = z.astype(np.complex128)
    re = np.ascontiguousarray(z.real)
    im = np.ascontiguousarray(z.imag)
    fft_inplace(re, im, bool(inverse))
    out = np.empty(n, dtype=np.complex128)
    out.real = re
    out.imag = im
    return out
