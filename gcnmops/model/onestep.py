"""The one-step model of referencecn.mops and singlecn.mops: no EM, lambda given per region.

Per region, with lambda (the controls' mean for referencecn.mops, the chromosome's median positive count
for singlecn.mops), for every sample k and class i:

    a_ik = max(exp(x_k log(lambda cov_k I_i) - lgamma(x_k + 1) - lambda cov_k I_i), floor) * w
    p_ik = a_ik / sum_i a_ik

alpha_i = mean_k p_ik; sINI_k = sum_i log2(I_i) p_ik; the label is the first class of maximal p_ik;
INI = mean_k sum_i |log2 I_i| p_ik; lambda output = lambda * I. Short-cut (every x_k <= minReadCount and
lambda <= minReadCount): alpha 1 at the main class, labels main, sINI 0, INI 0.

The prior weight ``w`` reproduces an R quirk of cn.mops bit for bit: the weights (1 per class, 1 + priorImpact
at CN2, divided by their sum) multiply the N x n matrix of the a_ik with R's recycling in column-major order,
so a_ik gets ``prior[(i * N + k) % n]``: the weight of class i only when N == 1 (singlecn.mops, and integer
refits of one-sample results). The golden referencecn.mops case (N = 5, n = 13) confirms the recycled form;
the per-class form misses its alpha by up to 5e-2.

Every function here is ``register_jitable`` and allocation-free (callers hand in scratch), so it runs in
plain Python, in ``numba.njit`` (the CPU driver below) and in ``numba.cuda`` kernels. The samples are
streamed: one posterior column (n) at a time, the per-class sums accumulated in sample order, so no (n, N)
scratch is needed; exp and log are glibc's (exact/libm.py), on the GPU too. Sums follow R exactly: the
column normalizer is R's ``rowSums``/``sum`` and alpha R's ``rowMeans`` (x87 long double accumulation,
emulated bit for bit below), sINI and the INI terms R's ``%*%`` (reference BLAS dgemv: sequential double sums
in class order), INI R's two-pass long double ``mean()``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from ..dynamic import counter, run_queue, take, workers
from ..errors import InputError
from ..exact.libm import TABLES, exp_glibc, log_glibc
from ..exact.rmath import lgamma_r
from ..exact.rstats import ld_add, ld_add_ld, ld_div, ld_mean
from .em import EXP_CUTOFF, all_at_most, main_class_answer
from .spec import ModelOutput

#: likelihood floors: referencecn.mops (and every integer refit of a referencecn.mops result) / singlecn.mops
REFERENCE_FLOOR = 1e-100
SINGLE_FLOOR = 1e-15
#: referencecn.mops floors the controls' mean at this value
LAMBDA_FLOOR = 1e-5
#: regions per parallel work item of the CPU driver
BLOCK = 256


@register_jitable
def onestep_column(xk, ck, lam, folds, prior, floor, N, k, col, tables):
    """Posterior column of sample k (of N) into ``col`` (n): cn.mops's floored, prior-weighted, normalized
    Poisson likelihoods of every class. ``tables``: libm.TABLES or copies (glibc's exp and log)."""
    n = folds.shape[0]
    g = lgamma_r(xk + 1.0)
    lc = lam * ck
    s_hi = 0.0
    s_lo = 0.0
    for i in range(n):
        t = lc * folds[i]
        e = xk * log_glibc(t, tables[2], tables[3]) - g - t
        # glibc's exp wherever the likelihood can exceed the floor (>= 1e-100 > exp(EXP_CUTOFF))
        a = exp_glibc(e, tables[0], tables[1]) if EXP_CUTOFF < e < 512.0 else math.exp(e)
        if a < floor:
            a = floor
        a = a * prior[(i * N + k) % n]  # R's column-major recycling of the prior vector
        col[i] = a
        s_hi, s_lo = ld_add(s_hi, s_lo, a)  # R's rowSums / sum: a long double sum
    s = s_hi
    for i in range(n):
        col[i] = col[i] / s


@register_jitable
def onestep_region(x, cov, lam, folds, log2_folds, prior, floor, min_read_count, main_idx, keep_post,
                   col, acc_hi, acc_lo, work, lam_out, alpha_out, sini_out, cn_out, post_out, tables):
    """The one-step model of one region; returns INI and writes the other outputs.

    Inputs: ``x`` (N) counts, ``cov`` (N) coverages, ``lam`` the region's lambda, ``folds``/``log2_folds``/
    ``prior`` (n), ``floor`` (1e-100 reference, 1e-15 single), ``main_idx`` (index of CN2).
    Scratch: ``col``, ``acc_hi``, ``acc_lo`` (n each), ``work`` (N). Outputs: ``lam_out``, ``alpha_out`` (n),
    ``sini_out`` (N), ``cn_out`` (N) class indices, ``post_out`` (n, N) if ``keep_post``. ``tables``:
    libm.TABLES or copies of them (a GPU block's shared memory).
    """
    N = x.shape[0]
    n = folds.shape[0]
    for i in range(n):
        lam_out[i] = lam * folds[i]
    if lam <= min_read_count and all_at_most(x, min_read_count):
        return main_class_answer(main_idx, keep_post, alpha_out, sini_out, cn_out, post_out)

    for i in range(n):
        acc_hi[i] = 0.0
        acc_lo[i] = 0.0
    for k in range(N):
        onestep_column(x[k], cov[k], lam, folds, prior, floor, N, k, col, tables)
        sini = 0.0
        gain = 0.0
        best = col[0]
        arg = 0
        for i in range(n):
            pik = col[i]
            sini += log2_folds[i] * pik
            gain += abs(log2_folds[i]) * pik
            if pik > best:
                best = pik
                arg = i
            acc_hi[i], acc_lo[i] = ld_add(acc_hi[i], acc_lo[i], pik)
            if keep_post:
                post_out[i, k] = pik
        sini_out[k] = sini
        cn_out[k] = arg
        work[k] = gain
    for i in range(n):  # R's rowMeans: the long double sum divided by N in long double
        alpha_out[i] = ld_div(acc_hi[i], acc_lo[i], float(N))[0]
    return ld_mean(work, N)  # R's mean()


# ------------------------------------------------------------------------------------------ host side
@dataclass(frozen=True)
class OneStepSpec:
    """Per-run constants of the one-step model (arrays of shape (n,), float64)."""

    folds: np.ndarray
    log2_folds: np.ndarray
    prior: np.ndarray
    floor: float
    main_idx: int
    min_read_count: float

    @classmethod
    def build(cls, folds, classes, prior_impact: float, floor: float, min_read_count: float) -> "OneStepSpec":
        """cn.mops's prior: 1 for every class, 1 + priorImpact for CN2, divided by their (long-double) sum."""
        folds = np.ascontiguousarray(folds, dtype=np.float64)
        classes = list(classes)
        if "CN2" not in classes:
            raise InputError("One element of classes must be CN2.")
        main_idx = classes.index("CN2")
        prior = np.ones(folds.size)
        prior[main_idx] = 1.0 + prior_impact
        prior = prior / math.fsum(prior)
        return cls(folds=folds, log2_folds=np.log2(folds), prior=prior, floor=float(floor), main_idx=main_idx,
                   min_read_count=float(min_read_count))


def _onestep_all_py(x, cov, lam, folds, log2_folds, prior, floor, min_read_count, main_idx, keep_post,
                    lam_out, alpha_out, sini, cn, ini, post, next_block, nworkers):
    """Every region, blocks of BLOCK rows taken from ``next_block`` by ``nworkers`` threads (``dynamic``)."""
    m = x.shape[0]
    n = folds.shape[0]
    nblocks = (m + BLOCK - 1) // BLOCK
    for _ in prange(nworkers):
        col = np.empty(n)
        acc_hi = np.empty(n)
        acc_lo = np.empty(n)
        work = np.empty(x.shape[1])
        b = take(next_block, nblocks)
        while b >= 0:
            for r in range(b * BLOCK, min(m, (b + 1) * BLOCK)):
                post_r = post[r] if keep_post else post[0]
                ini[r] = onestep_region(x[r], cov, lam[r], folds, log2_folds, prior, floor, min_read_count, main_idx,
                                        keep_post, col, acc_hi, acc_lo, work, lam_out[r], alpha_out[r], sini[r], cn[r],
                                        post_r, TABLES)
            b = take(next_block, nblocks)


#: one compiled specialization for every shape: a 1-column or 1-row matrix is both C- and F-contiguous, which
#: would otherwise make numba compile (and cache) one variant per memory layout
_SIGNATURE = ("void(float64[:, :], float64[:], float64[:], float64[:], float64[:], float64[:], float64, float64, "
              "int64, boolean, float64[:, :], float64[:, :], float64[:, :], int8[:, :], float64[:], float64[:, :, :], "
              "int64[:], int64)")
_DRIVER = None


def _onestep_all(*args):
    """The CPU driver, compiled on first use (not at import) for ``_SIGNATURE``."""
    global _DRIVER
    if _DRIVER is None:
        _DRIVER = njit(_SIGNATURE, parallel=True, cache=True, nogil=True)(_onestep_all_py)
    return _DRIVER(*args)


def fit_onestep(x: np.ndarray, cov: np.ndarray, lam: np.ndarray, spec: OneStepSpec,
                keep_post: bool = False) -> ModelOutput:
    """The one-step model of every region of ``x`` (m, N) with coverages ``cov`` (N,) and ``lam`` (m,), CPU."""
    x = _plain(np.asarray(x, dtype=np.float64, order="F"))
    m, N = x.shape
    n = spec.folds.size
    out = ModelOutput.allocate(m, n, N, keep_post)
    blocks = -(-m // BLOCK)
    next_block = counter()
    run_queue(_onestep_all, (x, _plain(np.ascontiguousarray(cov, dtype=np.float64)),
                             _plain(np.ascontiguousarray(lam, dtype=np.float64)), spec.folds, spec.log2_folds,
                             spec.prior, float(spec.floor), float(spec.min_read_count), int(spec.main_idx),
                             bool(keep_post), out.lam, out.alpha, out.sini, out.cn, out.ini, out.post_argument(),
                             next_block, workers(blocks)), next_block, blocks)
    return out


def _plain(a: np.ndarray) -> np.ndarray:
    """``a`` itself, or a writable copy of a read-only array (the compiled signature takes writable arrays)."""
    return a if a.flags.writeable else a.copy(order="K")


@njit(cache=True)
def row_means(x):
    """(m,) R ``rowMeans`` of a non-negative (m, M) matrix: long double sums divided by M in long double."""
    m, M = x.shape
    out = np.empty(m)
    for r in range(m):
        hi = 0.0
        lo = 0.0
        for j in range(M):
            hi, lo = ld_add(hi, lo, x[r, j])
        out[r] = ld_div(hi, lo, float(M))[0]
    return out


__all__ = ["onestep_column", "onestep_region", "OneStepSpec", "fit_onestep", "row_means",
           "ld_add", "ld_add_ld", "ld_div", "ld_mean", "REFERENCE_FLOOR", "SINGLE_FLOOR", "LAMBDA_FLOOR"]
