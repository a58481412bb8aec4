"""Kernels compiled without FMA contraction, so that their float64 add, mul, div and sqrt round as the CPU's.

NVVM contracts a*b + c into one fused operation by default. Where a sum nearly cancels (the EM's exponent
x log(lambda) - lgamma(x + 1) - lambda, R's lgamma series, the segmentation's window statistics) that changes
results far beyond the last bit, and near-ties then decide differently from the CPU. Kernels whose Python
name contains ``NOFMA_MARK`` are compiled with NVVM's ``-fma=0`` (explicit ``fma`` calls stay fused) and
linked as PTX, whose ``.rn`` operations no later stage may fuse: numba-cuda links with LTO where nvJitLink
is installed, and nvJitLink's link-time code generation contracts again (R's lgamma was then 1 ulp off in
an LTO-linked kernel). ``jit_nofma`` does both.
"""
from __future__ import annotations

import functools
import os

from numba.extending import overload

from .. import jitcache
from ..exact.libm import fma
from ..exact.tdist import t_neglog_upper
from ..exact.tdist_cf import t_neglog_upper_cf

NOFMA_MARK = "_nofma_"


@functools.cache
def _register_cuda_fma() -> None:
    """``exact.libm.fma`` in CUDA kernels: PTX fma.rn.f64 (kept by NVVM even where contraction is switched off);
    ``exact.tdist.t_neglog_upper`` (R's route, exact): the continued fraction (exact.tdist_cf, within 3e-14), as a
    GPU statistic only needs to lie within the segmentation's TAU, which the host resolves exactly."""
    from numba import cuda

    if getattr(cuda, "fma", None) is None:  # the simulator runs the plain Python fma
        return

    @overload(fma, target="cuda")
    def _fma_cuda(a, b, c):
        return lambda a, b, c: cuda.fma(a, b, c)

    @overload(t_neglog_upper, target="cuda")
    def _t_neglog_upper_cuda(t, dof):
        return lambda t, dof: t_neglog_upper_cf(t, dof)


def _install_nofma() -> None:
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


def jit_nofma(kernel, **options):
    """``cuda.jit(kernel, cache=True, **options)`` without FMA contraction anywhere on the way to the cubin:
    NVVM's ``-fma=0`` and no LTO (the CUDA simulator: plain ``cuda.jit``). ``kernel``'s name must carry
    NOFMA_MARK. Compiled kernels are cached on disk (``gcnmops.jitcache`` says where), so a new process loads
    what an earlier one compiled on this machine; numba keys the cache by source, closure values, signature
    and device, and recompiles where an entry is stale or unreadable."""
    from numba import config, cuda

    if NOFMA_MARK not in kernel.__name__:
        raise ValueError(f"kernel {kernel.__name__!r} must have {NOFMA_MARK!r} in its name")
    _register_cuda_fma()
    if "NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS" not in os.environ:
        # launches over a handful of CNV regions are small by nature: numba's "Grid size 2 will likely result
        # in GPU under-utilization" is noise to our users (the environment variable still decides if set)
        config.CUDA_LOW_OCCUPANCY_WARNINGS = 0
    if not config.ENABLE_CUDASIM:
        _install_nofma()
        options["lto"] = False
    options.setdefault("cache", jitcache.caching())  # not where no folder can be written
    if options["cache"] and not config.ENABLE_CUDASIM:
        from numba.cuda.core.caching import IndexDataCacheFile

        jitcache.tolerate_damaged(IndexDataCacheFile)  # a damaged cache file: compiled again
    # the function form: numba-cuda 0.30's cuda.jit(**options)(kernel) drops the lto option
    return cuda.jit(kernel, **options)


__all__ = ["NOFMA_MARK", "jit_nofma"]
