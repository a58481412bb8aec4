"""Kernels compiled without FMA contraction, so that their float64 add, mul, div and sqrt round as the CPU's.

NVVM contracts a*b + c into one fused operation by default. Where a sum nearly cancels (the EM's exponent
x log(lambda) - lgamma(x + 1) - lambda, the segmentation's window statistics) that changes results far
beyond the last bit, and near-ties then decide differently from the CPU. Kernels whose Python name
contains ``NOFMA_MARK`` are compiled with NVVM's ``-fma=0``; libdevice's functions keep their own
explicit FMAs.
"""
from __future__ import annotations

NOFMA_MARK = "_nofma_"


def install_nofma() -> None:
    """Compile kernels named with NOFMA_MARK with ``fma=False``: wraps numba-cuda's ``nvvm.compile_ir``
    once; other kernels are compiled as before."""
    from numba.cuda.cudadrv import nvvm

    if getattr(nvvm.compile_ir, "_gcnmops_nofma", False):
        return
    orig = nvvm.compile_ir

    def compile_ir(llvmir, **options):
        mods = [llvmir] if isinstance(llvmir, (str, bytes)) else list(llvmir)
        if any(NOFMA_MARK in (m.decode() if isinstance(m, bytes) else str(m)) for m in mods):
            options["fma"] = False
        return orig(llvmir, **options)

    compile_ir._gcnmops_nofma = True
    nvvm.compile_ir = compile_ir


__all__ = ["NOFMA_MARK", "install_nofma"]
