"""The C library's ``exp``, reproduced to the last bit so that numba can inline and vectorize it.

cn.mops's likelihoods go through the platform's ``exp`` (glibc's on Linux), and our CPU results are
bit-identical to cn.mops's only with that exact function. A call into libm can be neither inlined nor
vectorized by LLVM, so the CPU model reimplements glibc's algorithm (since glibc 2.28; Szabolcs Nagy's
design from Arm's optimized-routines, as built for x86-64 CPUs with FMA): x = k ln2/128 + r with k
rounded to nearest, exp(x) = 2^(k/128) (1 + tail) exp(r) from a 128-entry table of 2^(i/128) (head
rounded to double plus the relative rounding error ``tail``, computed here) and a degree-5 polynomial for
exp(r) - 1. ``tests/test_libm.py`` checks it against ``math.exp`` on tens of millions of arguments.

The exp is split in three steps so that array code can keep the table lookups out of its vector loops:
``exp_reduce`` (arithmetic), ``exp_table`` (two loads), ``exp_finish`` (integer and float arithmetic). Valid for
|x| < 512, which the model guarantees (it clamps exponents to [EXP_CUTOFF, 0]-ish ranges); glibc's
special cases (|x| >= 512, tiny x) are not reproduced beyond that range.

Everything is ``register_jitable`` (plain Python too: there ``fma`` is exact integer arithmetic).
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
def exp_table(kb):
    """(tail, head) of 2^((k mod 128)/128): the only memory loads of the exp."""
    i = kb & (TABLE_SIZE - 1)
    return TAIL[i], HEAD[i]


@register_jitable
def exp_finish(kb, r, tail, head):
    """2^(k/128) exp(r), rounded as glibc rounds it (integer and float arithmetic only)."""
    two_j = np.int64(((kb >> TABLE_BITS) - _SHIFT_BITS_HI + 1023) << 52).view(np.float64)  # 2^floor(k/128)
    scale = head * two_j  # exact: a power of two
    r2 = r * r
    tmp = fma(r2 * r2, fma(r, C5, C4), fma(r2, fma(r, C3, C2), tail + r))
    return fma(scale, tmp, scale)


@register_jitable
def exp_glibc(x):
    """glibc's exp(x) for |x| < 512, bit for bit."""
    kb, r = exp_reduce(x)
    tail, head = exp_table(kb)
    return exp_finish(kb, r, tail, head)


__all__ = ["exp_glibc", "exp_reduce", "exp_table", "exp_finish", "fma"]
