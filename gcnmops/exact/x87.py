"""R's long double in hardware: the x87 unit's 80-bit extended type for numba's CPU target (x86-64 only).

R, built by GCC on x86-64 Linux, computes its ``LDOUBLE`` sums (``sum()``, ``mean()``, ``var()``, ``rowSums``)
in the x87 unit: every result rounded to a 64-bit significand, ties to even, with a 15-bit exponent. exact/rstats.py
emulates that in double-double arithmetic (the form numba.cuda and plain Python run); here LLVM's ``x86_fp80``
type gives numba's CPU code the x87 instructions themselves, ~20x faster per operation (1.5 ns per value of a
sum against 32 ns emulated). rstats.py binds its long double functions to these for the CPU target only.

``LONGDOUBLE`` is a numba type (a value in an x87 register), made and read only through the intrinsics below:
``ld(x)`` (a double, exactly), ``add``/``sub``/``mul``/``div`` (rounded as the x87 rounds), ``to_double``
(rounded to nearest), ``split``/``join`` (the emulation's (hi, lo) pair: hi = the value rounded to double, lo = the
rest). ``AVAILABLE``: this process can use them (an x86-64 CPU whose x87 unit rounds to 64 bits, checked once).
"""
from __future__ import annotations

import math
import platform

import llvmlite.ir as ir
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model


class _Fp80(ir.Type):
    """LLVM's x86_fp80 (llvmlite names no such type)."""

    def _to_string(self) -> str:
        return "x86_fp80"

    def __eq__(self, other) -> bool:
        return isinstance(other, _Fp80)

    def __hash__(self) -> int:
        return hash("x86_fp80")


FP80 = _Fp80()
_DOUBLE = ir.DoubleType()


class LongDouble(types.Type):
    """A long double held in an x87 register (numba CPU target only)."""

    def __init__(self) -> None:
        super().__init__(name="x87_longdouble")


LONGDOUBLE = LongDouble()


@register_model(LongDouble)
class _LongDoubleModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, FP80)


@intrinsic
def ld(typingctx, x):
    """The double x as a long double (exact)."""
    if not isinstance(x, types.Float):
        return None
    return LONGDOUBLE(x), lambda context, builder, sig, args: builder.fpext(
        context.cast(builder, args[0], sig.args[0], types.float64), FP80)


@intrinsic
def to_double(typingctx, a):
    """The long double a rounded to the nearest double (ties to even)."""
    if not isinstance(a, LongDouble):
        return None
    return types.float64(a), lambda context, builder, sig, args: builder.fptrunc(args[0], _DOUBLE)


def _binary(op: str):
    def typer(typingctx, a, b):
        if not (isinstance(a, LongDouble) and isinstance(b, LongDouble)):
            return None
        return LONGDOUBLE(a, b), lambda context, builder, sig, args: getattr(builder, op)(args[0], args[1])
    typer.__name__ = op
    return intrinsic(typer)


add = _binary("fadd")
sub = _binary("fsub")
mul = _binary("fmul")
div = _binary("fdiv")


@intrinsic
def split(typingctx, a):
    """(hi, lo): hi = a rounded to double, lo = a - hi (exact; 0 where hi is not finite)."""
    if not isinstance(a, LongDouble):
        return None

    def codegen(context, builder, sig, args):
        hi = builder.fptrunc(args[0], _DOUBLE)
        rest = builder.fptrunc(builder.fsub(args[0], builder.fpext(hi, FP80)), _DOUBLE)
        finite = builder.fcmp_ordered("<", builder.call(_fabs(builder), [hi]), ir.Constant(_DOUBLE, math.inf))
        lo = builder.select(finite, rest, ir.Constant(_DOUBLE, 0.0))
        return context.make_tuple(builder, sig.return_type, (hi, lo))

    return types.UniTuple(types.float64, 2)(a), codegen


def _fabs(builder):
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(_DOUBLE, [_DOUBLE]), "llvm.fabs.f64")


@intrinsic
def join(typingctx, hi, lo):
    """The long double hi + lo of an (hi, lo) pair (exact for a pair that ``split`` made)."""
    if not (isinstance(hi, types.Float) and isinstance(lo, types.Float)):
        return None

    def codegen(context, builder, sig, args):
        h = builder.fpext(context.cast(builder, args[0], sig.args[0], types.float64), FP80)
        lo_ = builder.fpext(context.cast(builder, args[1], sig.args[1], types.float64), FP80)
        return builder.fadd(h, lo_)

    return LONGDOUBLE(hi, lo), codegen


def _available() -> bool:
    """An x86-64 CPU whose x87 unit rounds to a 64-bit significand in this process (the precision control set
    to extended, as on Linux): numpy's longdouble runs in that same unit, so it is probed without compiling
    anything. 1 + 2^-60 - 1 is kept by a 64-bit significand (lost by a 53-bit one); 1 + 2^-64 + 2^-64 ties to even
    at 64 bits (1)."""
    if platform.machine().lower() not in ("x86_64", "amd64") or np.finfo(np.longdouble).nmant != 63:
        return False
    one = np.longdouble(1.0)
    kept = (one + np.longdouble(2.0 ** -60)) - one
    tie = ((one + np.longdouble(2.0 ** -64)) + np.longdouble(2.0 ** -64)) - one
    return kept == np.longdouble(2.0 ** -60) and tie == 0


AVAILABLE = _available()

__all__ = ["AVAILABLE", "LONGDOUBLE", "LongDouble", "ld", "to_double", "add", "sub", "mul", "div", "split", "join"]
