"""The C library's ``exp`` and ``log``, reproduced to the last bit for numba's CPU and CUDA targets.

cn.mops's likelihoods go through the platform's ``exp`` (glibc's on Linux), and our CPU results are
bit-identical to cn.mops's only with that exact function. A call into libm can be neither inlined nor
vectorized by LLVM, so the CPU model reimplements glibc's algorithm (since glibc 2.28; Szabolcs Nagy's
design from Arm's optimized-routines, as built for x86-64 CPUs with FMA): x = k ln2/128 + r with k
rounded to nearest, exp(x) = 2^(k/128) (1 + tail) exp(r) from a 128-entry table of 2^(i/128) (head
rounded to double plus the relative rounding error ``tail``, computed here) and a degree-5 polynomial for
exp(r) - 1. ``tests/test_exact_libm.py`` checks it against ``math.exp`` on tens of millions of arguments.

The exp is split in three steps so that array code can keep the table lookups out of its vector loops:
``exp_reduce`` (arithmetic), ``exp_table`` (two loads), ``exp_finish`` (integer and float arithmetic). Valid for
|x| < 512, which the model guarantees (it clamps exponents to [EXP_CUTOFF, 0]-ish ranges); glibc's
special cases (|x| >= 512, tiny x) are not reproduced beyond that range.

``log_glibc`` is glibc's log (same design, same builds): x = 2^k z, log(x) = k ln2 + log(c) + log1p(z/c - 1)
with c from a 128-entry table, a degree-5 polynomial for log1p(r) - r, and a degree-11 one (with a
double-double head) for x within ~6% of 1. Its table (1/c and log(c), chosen by a search in the glibc
sources, not derivable the way exp's is) is read from the C library loaded in this process, where it
lies next to ln2's two parts and the polynomials; without it (not glibc nor musl, or glibc < 2.28)
``log_glibc`` is the platform's ``math.log`` (on a GPU: libdevice's, within an ulp) and ``GLIBC_LOG``
is False. The GPU needs both functions so that its likelihoods round as the CPU's (libdevice's exp and
log differ from glibc's in about one call in ten).

Everything is ``register_jitable`` (plain Python too: there ``fma`` is exact integer arithmetic); on the
GPU ``fma`` is the hardware's fused multiply-add (lowered by ``cuda.nofma``, which builds every exact kernel), which rounds once as IEEE requires.
"""
from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload, register_jitable

TABLE_BITS = 7
TABLE_SIZE = 1 << TABLE_BITS


def _table() -> tuple[np.ndarray, np.ndarray]:
    """2^(i/128) for i < 128 as head (rounded to double) and tail = 2^(i/128) / head - 1 (rounded)."""
    head = np.empty(TABLE_SIZE)
    tail = np.empty(TABLE_SIZE)
    with localcontext() as ctx:
        ctx.prec = 60
        ln2 = Decimal(2).ln()
        for i in range(TABLE_SIZE):
            exact = (ln2 * i / TABLE_SIZE).exp()
            head[i] = float(exact)
            tail[i] = float(exact / Decimal(head[i]) - 1)
    return head, tail


HEAD, TAIL = _table()
INV_LN2_N = float.fromhex("0x1.71547652b82fep0") * TABLE_SIZE  # 128 / ln 2
SHIFT = float.fromhex("0x1.8p52")  # adding it rounds to an integer
NEG_LN2_HI_N = -float.fromhex("0x1.62e42fefa0000p-8")  # -ln2/128, high bits (exact products with k)
NEG_LN2_LO_N = -float.fromhex("0x1.cf79abc9e3b3ap-47")  # -ln2/128, the rest
C2 = float.fromhex("0x1.ffffffffffdbdp-2")
C3 = float.fromhex("0x1.555555555543cp-3")
C4 = float.fromhex("0x1.55555cf172b91p-5")
C5 = float.fromhex("0x1.1111167a4d017p-7")


def fma(a: float, b: float, c: float) -> float:
    """a * b + c with one rounding (IEEE fused multiply-add); exact integer arithmetic in Python."""
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c
    na, da = a.as_integer_ratio()
    nb, db = b.as_integer_ratio()
    nc, dc = c.as_integer_ratio()
    num = na * nb * dc + nc * da * db
    if num == 0:
        return a * b + c
    return num / (da * db * dc)  # int / int is correctly rounded


@intrinsic
def _llvm_fma(typingctx, a, b, c):
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        d = ir.DoubleType()
        fn = builder.module.declare_intrinsic("llvm.fma", [d], ir.FunctionType(d, [d, d, d]))
        return builder.call(fn, args)

    return sig, codegen


@overload(fma, target="cpu")
def _fma_cpu(a, b, c):
    return lambda a, b, c: _llvm_fma(a, b, c)


#: bits of SHIFT >> TABLE_BITS: subtracted from (bits of k + SHIFT) >> TABLE_BITS to get floor(k / 128)
_SHIFT_BITS_HI = int(np.float64(SHIFT).view(np.int64)) >> TABLE_BITS


@register_jitable
def exp_reduce(x):
    """x = k ln2/128 + r: returns (kb, r) where kb, the bits of k + SHIFT as int64, carries k."""
    kd = fma(INV_LN2_N, x, SHIFT)
    kb = np.float64(kd).view(np.int64)
    kd -= SHIFT
    r = fma(kd, NEG_LN2_LO_N, fma(kd, NEG_LN2_HI_N, x))
    return kb, r


@register_jitable
def exp_table(kb, head=HEAD, tail=TAIL):
    """(tail, head) of 2^((k mod 128)/128): the only memory loads of the exp (from the tables given, e.g.
    copies in a GPU block's shared memory)."""
    i = kb & (TABLE_SIZE - 1)
    return tail[i], head[i]


@register_jitable
def exp_finish(kb, r, tail, head):
    """2^(k/128) exp(r), rounded as glibc rounds it (integer and float arithmetic only)."""
    two_j = np.int64(((kb >> TABLE_BITS) - _SHIFT_BITS_HI + 1023) << 52).view(np.float64)  # 2^floor(k/128)
    scale = head * two_j  # exact: a power of two
    r2 = r * r
    tmp = fma(r2 * r2, fma(r, C5, C4), fma(r2, fma(r, C3, C2), tail + r))
    return fma(scale, tmp, scale)


@register_jitable
def exp_glibc(x, head=HEAD, tail=TAIL):
    """glibc's exp(x) for |x| < 512, bit for bit; ``head``/``tail``: HEAD and TAIL or copies of them."""
    kb, r = exp_reduce(x)
    t, h = exp_table(kb, head, tail)
    return exp_finish(kb, r, t, h)


_TOP12_512 = 0x408  # top 12 bits of 512.0: from here on glibc's exp takes its special cases
_TOP12_1024 = 0x409
_TOP12_TINY = 0x3C9  # top 12 bits of 2^-54: below, exp(x) = 1 + x


@register_jitable
def exp_full(x):
    """glibc's exp(x) for every x, bit for bit: ``exp_glibc`` plus glibc's special cases (|x| >= 512: results
    near overflow, subnormal results rounded once, 0 and inf; |x| < 2^-54: 1 + x)."""
    ix = np.float64(x).view(np.int64)
    abstop = (ix >> 52) & 0x7FF
    if abstop - _TOP12_TINY < 0:
        return 1.0 + x
    if abstop < _TOP12_512:
        return exp_glibc(x)
    if abstop >= _TOP12_1024:
        if x != x or x == math.inf:
            return 1.0 + x
        return 0.0 if x < 0.0 else math.inf
    kb, r = exp_reduce(x)
    t, h = exp_table(kb, HEAD, TAIL)
    r2 = r * r
    tmp = fma(r2 * r2, fma(r, C5, C4), fma(r2, fma(r, C3, C2), t + r))
    # 2^(k/128) as glibc forms it: floor(k/128) added to the exponent bits of the table's 2^(j/128), which may
    # leave the exponent range until glibc's offsets below bring it back
    sbits = np.float64(h).view(np.int64) + (((kb >> TABLE_BITS) - _SHIFT_BITS_HI) << 52)
    if x > 0.0:
        scale = np.int64(sbits - (np.int64(1009) << 52)).view(np.float64)
        return 5.486124068793689e+303 * fma(scale, tmp, scale)  # 2^1009
    scale = np.int64(sbits + (np.int64(1022) << 52)).view(np.float64)
    y = scale + scale * tmp  # glibc's build fuses nothing here
    if y < 1.0:
        # round y to double before scaling into the subnormal range (one rounding, as glibc)
        lo = scale - y + scale * tmp
        hi = 1.0 + y
        lo = 1.0 - hi + y + lo
        y = (hi + lo) - 1.0
        if y == 0.0:
            y = 0.0
    return 2.2250738585072014e-308 * y  # 2^-1022


# ------------------------------------------------------------------------------------------------ log1p
#: glibc's log1p (sysdeps/ieee754/dbl-64/s_log1p.c, fdlibm's), as its x86-64 build for CPUs with FMA computes it
#: (the variant this machine's libm selects: the fused operations below are the compiler's contractions there)
L1P_LN2_HI = 6.93147180369123816490e-01
L1P_LN2_LO = 1.90821492927058770002e-10
L1P_1 = 6.666666666666735130e-01
L1P_2 = 3.999999999940941908e-01
L1P_3 = 2.857142874366239149e-01
L1P_4 = 2.222219843214978396e-01
L1P_5 = 1.818357216161805012e-01
L1P_6 = 1.531383769920937332e-01
L1P_7 = 1.479819860511658591e-01


@register_jitable
def _high_word(v):
    return np.int32(np.float64(v).view(np.int64) >> 32)


@register_jitable
def _with_high_word(v, hi):
    lo = np.float64(v).view(np.int64) & 0xFFFFFFFF
    return np.int64((np.int64(hi) << 32) | lo).view(np.float64)


@register_jitable
def log1p_glibc(x):
    """glibc's log1p(x), bit for bit (fdlibm's algorithm: 1 + x = 2^k (1 + f), log(1 + f) by a polynomial in
    s = f / (2 + f), with a correction term c for the rounding of 1 + x)."""
    hx = _high_word(x)
    ax = hx & 0x7FFFFFFF
    k = 1
    f = 0.0
    c = 0.0
    hu = 0
    if hx < 0x3FDA827A:  # x < 0.41422
        if ax >= 0x3FF00000:  # x <= -1
            if x == -1.0:
                return -math.inf
            return math.nan
        if ax < 0x3E200000:  # |x| < 2^-29
            if ax < 0x3C900000:
                return x
            return fma(x * x, -0.5, x)
        if hx > 0 or hx <= np.int32(-1076707645):  # 0xbfd2bec3 as int32: -0.2929 < x < 0.41422
            k = 0
            f = x
            hu = 1
    elif hx >= 0x7FF00000:
        return x + x
    if k != 0:
        if hx < 0x43400000:
            u = 1.0 + x
            hu = _high_word(u)
            k = (hu >> 20) - 1023
            c = 1.0 - (u - x) if k > 0 else x - (u - 1.0)
            c /= u
        else:
            u = x
            hu = _high_word(u)
            k = (hu >> 20) - 1023
            c = 0.0
        hu &= 0x000FFFFF
        if hu < 0x6A09E:
            u = _with_high_word(u, hu | 0x3FF00000)
        else:
            k += 1
            u = _with_high_word(u, hu | 0x3FE00000)
            hu = (0x00100000 - hu) >> 2
        f = u - 1.0
    hfsq = 0.5 * f * f
    kd = float(k)
    if hu == 0:  # |f| < 2^-20
        if f == 0.0:
            if k == 0:
                return 0.0
            return fma(kd, L1P_LN2_HI, fma(kd, L1P_LN2_LO, c))
        R = hfsq * fma(-0.66666666666666666, f, 1.0)
        if k == 0:
            return f - R
        return fma(kd, L1P_LN2_HI, -((R - fma(kd, L1P_LN2_LO, c)) - f))
    s = f / (2.0 + f)
    z = s * s
    z2 = z * z
    z4 = z2 * z2
    z6 = z2 * z4
    R = fma(z, L1P_1, z2 * fma(z, L1P_3, L1P_2))
    R = fma(z4, fma(z, L1P_5, L1P_4), R)
    R = fma(z6, fma(z, L1P_7, L1P_6), R)
    sr = s * (hfsq + R)
    if k == 0:
        return f - (hfsq - sr)
    return fma(kd, L1P_LN2_HI, -((hfsq - (fma(kd, L1P_LN2_LO, c) + sr)) - f))


# ------------------------------------------------------------------------------------------------ log
LN2_HI = float.fromhex("0x1.62e42fefa3800p-1")  # ln 2, high bits (k LN2_HI is exact)
LN2_LO = float.fromhex("0x1.ef35793c76730p-45")  # ln 2, the rest
_LOG_A0 = float.fromhex("-0x1.0000000000001p-1")  # first coefficient of the main polynomial
#: doubles of glibc's log data after ln2's parts: 5 + 11 polynomial coefficients, 128 (1/c, log c) pairs
_LOG_DATA_DOUBLES = 5 + 11 + 2 * TABLE_SIZE


def _loaded_libm() -> str | None:
    """Path of the C math library mapped into this process (Linux), else None."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if line.strip() else ""
                name = path.rsplit("/", 1)[-1]
                if name.startswith(("libm.so", "libm-", "ld-musl", "libc.musl")):
                    return path
    except OSError:
        return None
    return None


def _glibc_log_data() -> np.ndarray | None:
    """glibc's log data (polynomials A[5], B[11], then 128 (invc, logc) pairs) read from the loaded C
    library: found by its first three doubles (ln2 high, ln2 low, A[0]); None if absent."""
    path = _loaded_libm()
    if path is None:
        return None
    try:
        with open(path, "rb") as lib:
            data = lib.read()
    except OSError:
        return None
    head = np.array([LN2_HI, LN2_LO, _LOG_A0], dtype="<f8").tobytes()
    at = data.find(head)
    if at < 0 or at + 16 + 8 * _LOG_DATA_DOUBLES > len(data):
        return None
    return np.frombuffer(data, dtype="<f8", count=_LOG_DATA_DOUBLES, offset=at + 16).astype(np.float64)


_LOG_DATA = _glibc_log_data()
GLIBC_LOG = _LOG_DATA is not None
if _LOG_DATA is None:
    _LOG_DATA = np.zeros(_LOG_DATA_DOUBLES)
LA0, LA1, LA2, LA3, LA4 = (float(v) for v in _LOG_DATA[:5])
LB0, LB1, LB2, LB3, LB4, LB5, LB6, LB7, LB8, LB9, LB10 = (float(v) for v in _LOG_DATA[5:16])
INVC = np.ascontiguousarray(_LOG_DATA[16::2])  # 1/c of each subinterval
LOGC = np.ascontiguousarray(_LOG_DATA[17::2])  # log(c), rounded
del _LOG_DATA

_LOG_OFF = 0x3FE6000000000000  # bits of 0.6875: z in [OFF, 2 OFF) after x = 2^k z
_NEAR1_LO = int(np.float64(1.0 - 2.0 ** -4).view(np.int64))  # [1 - 2^-4, 1 + 0x1.09p-4): the near-1 branch
_NEAR1_HI = int(np.float64(1.0 + float.fromhex("0x1.09p-4")).view(np.int64))
_EXP_MASK = -(1 << 52)  # the 12 high bits (sign and exponent)
_INF_BITS = int(np.float64(np.inf).view(np.int64))


@register_jitable
def _log_near1(x):
    """log(x) for x within [1 - 2^-4, 1 + 0x1.09p-4): r = x - 1, log1p(r) = r - r^2/2 + r^3 P(r) with r^2/2
    split exactly (r = rhi + rlo, rhi of 26 bits); the FMA build's fused operations."""
    r = x - 1.0
    r2 = r * r
    r3 = r * r2
    p = fma(r3, fma(r3, fma(r3, LB10, fma(r2, LB9, fma(r, LB8, LB7))), fma(r2, LB6, fma(r, LB5, LB4))),
            fma(r2, LB3, fma(r, LB2, LB1)))
    w = r * 134217728.0  # 2^27
    rhi = r + w - w
    rlo = r - rhi
    w = rhi * rhi * LB0  # exact: LB0 = -1/2
    hi = r + w
    lo = r - hi + w
    lo = fma(LB0 * rlo, rhi + r, lo)
    return fma(r3, p, lo) + hi


@register_jitable
def log_glibc(x, invc_table=INVC, logc_table=LOGC):
    """glibc's log(x), bit for bit (where GLIBC_LOG; else the platform's log); the tables: INVC and LOGC or
    copies of them."""
    if not GLIBC_LOG:
        return math.log(x)
    ix = np.float64(x).view(np.int64)
    if _NEAR1_LO <= ix < _NEAR1_HI:
        return 0.0 if x == 1.0 else _log_near1(x)
    top = (ix >> 48) & 0xFFFF
    if top < 0x0010 or top >= 0x7FF0:  # zero, subnormal, negative, inf or nan
        if ix + ix == 0 or top >= 0x8000 or top & 0x7FF0 == 0x7FF0:
            return math.log(x)  # -inf, nan, inf: IEEE's answers, equal everywhere
        ix = np.float64(x * 4503599627370496.0).view(np.int64) - (52 << 52)  # subnormal: scale by 2^52
    tmp = ix - _LOG_OFF
    i = (tmp >> (52 - TABLE_BITS)) & (TABLE_SIZE - 1)
    k = tmp >> 52
    z = np.int64(ix - (tmp & _EXP_MASK)).view(np.float64)
    invc = invc_table[i]
    logc = logc_table[i]
    r = fma(z, invc, -1.0)
    kd = float(k)
    w = fma(kd, LN2_HI, logc)
    hi = w + r
    lo = fma(kd, LN2_LO, w - hi + r)
    r2 = r * r
    return fma(r * r2, fma(r2, fma(r, LA4, LA3), fma(r, LA2, LA1)), fma(r2, LA0, lo)) + hi


#: every table of exp_glibc and log_glibc, in the order kernels take them: (HEAD, TAIL, INVC, LOGC)
TABLES = (HEAD, TAIL, INVC, LOGC)

__all__ = ["exp_glibc", "exp_full", "log1p_glibc", "exp_reduce", "exp_table", "exp_finish", "fma", "log_glibc", "GLIBC_LOG", "TABLES"]
