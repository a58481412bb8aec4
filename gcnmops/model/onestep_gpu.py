"""The one-step model (onestep.py) on a CUDA device: the same ``onestep_region`` source compiled by numba.cuda,
one thread per region. Kept apart from onestep.py so that CPU runs never import numba.cuda (~0.4 s)."""
from __future__ import annotations

import numpy as np
from numba import cuda  # module level: a kernel's ``cuda`` must be a global (the CUDA simulator swaps globals)

from ..cuda.config import ONESTEP_BLOCKS_PER_SM, ONESTEP_LOCAL_WORK_MAX, ONESTEP_THREADS_PER_BLOCK
from ..cuda.kernels import cached_kernel
from .onestep import OneStepSpec, onestep_region
from .spec import ModelOutput


def _gpu_kernel(NC: int, NW: int, KEEP: bool):
    """The kernel for NC classes, a local INI buffer of NW samples (0: a thread-fastest global scratch), posteriors
    kept or not (cuda.kernels' cache)."""
    return cached_kernel(_build_gpu_kernel, NC, NW, KEEP)


def _build_gpu_kernel(NC: int, NW: int, KEEP: bool):
    """cuda.jit kernel for NC classes (compile-time: the per-thread state is local arrays), a local INI
    buffer of NW samples (0: a thread-fastest global scratch), posteriors kept or not."""
    from numba import float64

    from ..cuda.nofma import jit_nofma
    from ..cuda.tables import TABLE_SIZE, copy_tables

    LOCAL_WORK = NW > 0

    def _nofma_onestep_kernel(x, cov, lam, folds, log2_folds, prior, floor, min_read_count, main_idx, work_g,
                              lam_out, alpha_out, sini, cn, ini, post):
        head = cuda.shared.array(TABLE_SIZE, float64)  # glibc's exp/log tables (shared_tables.py)
        tail = cuda.shared.array(TABLE_SIZE, float64)
        invc = cuda.shared.array(TABLE_SIZE, float64)
        logc = cuda.shared.array(TABLE_SIZE, float64)
        copy_tables(head, tail, invc, logc)
        tabs = (head, tail, invc, logc)
        col = cuda.local.array(NC, float64)
        acc_hi = cuda.local.array(NC, float64)
        acc_lo = cuda.local.array(NC, float64)
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        if LOCAL_WORK:
            work = cuda.local.array(NW, float64)
        else:
            work = work_g[:, start]
        for r in range(start, x.shape[0], stride):
            post_r = post[r] if KEEP else post[0]
            ini[r] = onestep_region(x[r], cov, lam[r], folds, log2_folds, prior, floor, min_read_count, main_idx,
                                    KEEP, col, acc_hi, acc_lo, work, lam_out[r], alpha_out[r], sini[r], cn[r],
                                    post_r, tabs)

    # no contraction: R's long-double sums are emulated with error-free transformations, which a fused
    # multiply-add would break, and the likelihoods must round as the CPU's
    return jit_nofma(_nofma_onestep_kernel)


def fit_onestep_gpu(x: np.ndarray, cov: np.ndarray, lam: np.ndarray, spec: OneStepSpec,
                    keep_post: bool = False, device_id: int = 0) -> ModelOutput:
    """:func:`fit_onestep` on a CUDA device: one thread per region (grid-stride), the whole matrix at once
    (the model is one pass over the data, so copies dominate; no chunking). The arithmetic is the CPU's, bit
    for bit: glibc's exp and log, no FMA contraction."""
    x = np.asarray(x, dtype=np.float64, order="F")
    m, N = x.shape
    n = spec.folds.size
    out = ModelOutput.allocate(m, n, N, keep_post)
    with cuda.gpus[device_id]:
        tpb = min(ONESTEP_THREADS_PER_BLOCK, 32 * ((m + 31) // 32))  # (a tiny matrix needs no full block)
        sms = getattr(cuda.gpus[device_id], "MULTIPROCESSOR_COUNT", 1)  # (absent in the simulator)
        blocks = max(1, min((m + tpb - 1) // tpb, ONESTEP_BLOCKS_PER_SM * sms))
        nw = N if N <= ONESTEP_LOCAL_WORK_MAX else 0
        work = cuda.device_array((N if nw == 0 else 1, blocks * tpb if nw == 0 else 1), order="F")
        d = {k: cuda.to_device(v) for k, v in dict(
            x=x, cov=np.ascontiguousarray(cov, dtype=np.float64), lam=np.ascontiguousarray(lam, dtype=np.float64),
            folds=spec.folds, log2=spec.log2_folds, prior=spec.prior).items()}
        outs = [cuda.device_array_like(a) for a in (out.lam, out.alpha, out.sini, out.cn, out.ini)]
        post = cuda.device_array_like(out.post) if keep_post else cuda.device_array((1, 1, 1), order="F")
        _gpu_kernel(n, nw, keep_post)[blocks, tpb](
            d["x"], d["cov"], d["lam"], d["folds"], d["log2"], d["prior"], spec.floor, spec.min_read_count,
            spec.main_idx, work, *outs, post)
        for host, dev in zip((out.lam, out.alpha, out.sini, out.cn, out.ini), outs):
            dev.copy_to_host(host)
        if keep_post:
            post.copy_to_host(out.post)
    return out


__all__ = ["fit_onestep_gpu"]
