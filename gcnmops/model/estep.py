"""The EM's E-step alone, with given per-region parameters: scoring samples against a stored fit.

Per region r (lambda_ri, alpha_ri of n classes, e.g. a reference cohort's fit) and sample k, exactly the E-step
of em.py (``posterior_column``: a_ik = alpha_i exp(x_k log(cov_k lambda_i) - lgamma(x_k + 1) - cov_k lambda_i),
floored at 1e-100, normalized) and the outputs of the EM's last E-step (``last_estep_outputs``: sINI_k =
sum_i log2(I_i) p_ik, the first class of maximal p_ik, the posterior column); INI = R's mean() over the samples
of sum_i |log2 I_i| p_ik. A region whose lambda of the main class is not positive was not modelled by the fit
(cn.mops's minReadCount short-cut writes lambda 0): every sample gets the main class for certain, sINI 0.

With the parameters an EM used in its last E-step (those after cycle cyc - 1) this reproduces that EM's sINI,
labels and posteriors bit for bit (tests/test_casemode.py). New samples against a fitted cohort (``n_fit`` > 0)
first refit the class weights with the cohort, as a refit would, lambda staying the fit's (``estep_region``).

``estep_region`` is ``register_jitable`` and allocation-free: the CPU driver (numba, blocks of regions taken by the
cores as they come free, interruptible: ``dynamic.run_queue``) and the CUDA kernel (one thread per region,
grid-stride, no FMA contraction) run the same source.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from ..cuda.config import ESTEP_BLOCKS_PER_SM, ESTEP_LOCAL_WORK_MAX, ESTEP_THREADS_PER_BLOCK
from ..cuda.kernels import cached_kernel
from ..cuda.probe import Backend, as_backend
from ..dynamic import counter, run_queue, take, workers
from ..exact.libm import TABLES, log_glibc
from ..exact.rmath import lgamma_r
from ..exact.rstats import ld_mean
from .em import alpha_update, last_estep_outputs, main_class_answer, posterior_column
from .spec import ModelOutput, ModelSpec

try:  # module level: a kernel's ``cuda`` must be a global (the CUDA simulator swaps module globals)
    from numba import cuda
except Exception:  # noqa: BLE001 - numba without its CUDA target: no GPU driver
    cuda = None

#: regions per parallel work item of the CPU driver
BLOCK = 2048


@register_jitable
def estep_region(x, cov, lam, alpha, log2_folds, main_idx, keep_post, n_fit, alpha_init, alpha_prior, prior_sum, cyc,
                 log_lam, weights, acc, p, work, sini_out, cn_out, post_out, tables):
    """E-step of one region for its J samples; returns INI and writes the other outputs.

    Inputs: ``x`` (J) counts, ``cov`` (J) coverages, ``lam``/``alpha`` (n) the region's fitted parameters,
    ``log2_folds`` (n) log2 of the fold changes the parameters were fitted with, ``main_idx`` the normal class.
    ``n_fit`` 0: the plain E-step with ``alpha``. ``n_fit`` > 0: the J samples join the class weights as in a
    refit over n_fit + J samples, lambda staying the fit's: the fitted cohort enters through its mean posteriors
    (alpha (1 + P) - prior, em.alpha_update inverted), the J samples through their posteriors, and the weights
    are refitted from the EM's start ``alpha_init`` by ``cyc`` - 1 M-steps (em.alpha_update with ``alpha_prior``,
    ``prior_sum``) before the last E-step gives the outputs, as the EM's last E-step does. Starting from the
    EM's start, not from the fit's weights, matters: a class no fitted sample has (a new sample's homozygous
    deletion) holds a weight at the likelihood floor in the fit, from which no E-step lets it rise. A cycle
    whose update leaves every weight unchanged (bit for bit) is a fixed point: the later cycles would repeat it,
    so they are skipped (the same result, exactly).
    Scratch: ``log_lam``, ``weights``, ``acc`` (n), ``p`` (n, 1), ``work`` (>= J). Outputs: ``sini_out`` (J),
    ``cn_out`` (J) class indices, ``post_out`` (n, J) if ``keep_post``. ``tables``: libm.TABLES or copies.
    """
    J = x.shape[0]
    n = lam.shape[0]
    if not lam[main_idx] > 0.0:  # not modelled by the fit (the short-cut): the main class, for certain
        return main_class_answer(main_idx, keep_post, log_lam, sini_out, cn_out, post_out)
    for i in range(n):
        log_lam[i] = log_glibc(lam[i], tables[2], tables[3])
        weights[i] = alpha[i] if n_fit == 0 else alpha_init[i]
    for k in range(J):  # work holds lgamma(x_k + 1) until the last E-step overwrites it with the INI terms
        work[k] = lgamma_r(x[k] + 1.0)
    for _ in range(cyc - 1 if n_fit > 0 else 0):
        for i in range(n):
            acc[i] = max(alpha[i] * (1.0 + prior_sum) - alpha_prior[i], 0.0) * n_fit
        for k in range(J):
            posterior_column(x[k], cov[k], work[k], weights, lam, log_lam, p, tables)
            for i in range(n):
                acc[i] += p[i, 0]
        fixed_point = True
        for i in range(n):
            w = alpha_update(alpha_prior[i], acc[i], n_fit + J, prior_sum)
            fixed_point = fixed_point and w == weights[i]
            weights[i] = w
        if fixed_point:
            break
    for k in range(J):
        posterior_column(x[k], cov[k], work[k], weights, lam, log_lam, p, tables)
        work[k] = last_estep_outputs(p, 0, log2_folds, keep_post, sini_out, cn_out, post_out, k)
    return ld_mean(work, J)  # R's mean()


@njit(parallel=True, cache=True, nogil=True)
def _estep_all(x, cov, lam, alpha, log2_folds, main_idx, keep_post, n_fit, alpha_init, alpha_prior, prior_sum, cyc,
               sini, cn, ini, post, next_block, nworkers):
    """Every region, blocks of BLOCK rows taken from ``next_block`` by ``nworkers`` threads (``dynamic``)."""
    m, J = x.shape
    n = lam.shape[1]
    nblocks = (m + BLOCK - 1) // BLOCK
    for _ in prange(nworkers):
        log_lam = np.empty(n)
        weights = np.empty(n)
        acc = np.empty(n)
        p = np.empty((n, 1))
        work = np.empty(J)
        b = take(next_block, nblocks)
        while b >= 0:
            for r in range(b * BLOCK, min(m, (b + 1) * BLOCK)):
                post_r = post[r] if keep_post else post[0]
                ini[r] = estep_region(x[r], cov, lam[r], alpha[r], log2_folds, main_idx, keep_post, n_fit,
                                      alpha_init, alpha_prior, prior_sum, cyc, log_lam, weights, acc, p, work, sini[r],
                                      cn[r], post_r, TABLES)
            b = take(next_block, nblocks)


def _outputs(lam: np.ndarray, alpha: np.ndarray, J: int, keep_post: bool) -> ModelOutput:
    """A ModelOutput for J samples whose ``lam``/``alpha`` are the given parameters themselves (not copied)."""
    m, n = lam.shape
    return ModelOutput(lam=lam, alpha=alpha, sini=np.empty((m, J), order="F"),
                       cn=np.empty((m, J), dtype=np.int8, order="F"), ini=np.empty(m),
                       post=np.empty((m, n, J), order="F") if keep_post else None)


def _checked(x, cov, lam, alpha, spec: ModelSpec):
    x = np.asarray(x, dtype=np.float64, order="F")
    lam = np.asarray(lam, dtype=np.float64, order="F")
    alpha = np.asarray(alpha, dtype=np.float64, order="F")
    if x.ndim != 2 or lam.shape != alpha.shape or lam.shape[0] != x.shape[0] or lam.shape[1] != spec.folds.size:
        raise ValueError(f"E-step: counts {x.shape}, lambda {lam.shape}, alpha {alpha.shape} and "
                         f"{spec.folds.size} classes do not fit together")
    return x, np.ascontiguousarray(cov, dtype=np.float64), lam, alpha


def estep_cpu(x: np.ndarray, cov: np.ndarray, lam: np.ndarray, alpha: np.ndarray, spec: ModelSpec,
              keep_post: bool = False, n_fit: int = 0) -> ModelOutput:
    """The E-step of every region of ``x`` (m, J) float64 order F with coverages ``cov`` (J,) against the
    parameters ``lam``, ``alpha`` (m, n) order F fitted with ``spec`` (its log2 folds, main class, prior) on
    ``n_fit`` samples (``estep_region``); CPU (numba, all threads). The output's lam/alpha are the inputs."""
    x, cov, lam, alpha = _checked(x, cov, lam, alpha, spec)
    out = _outputs(lam, alpha, x.shape[1], keep_post)
    blocks = -(-x.shape[0] // BLOCK)
    next_block = counter()
    run_queue(_estep_all, (x, cov, lam, alpha, spec.log2_folds, int(spec.main_idx), bool(keep_post), int(n_fit),
                           spec.alpha_init, spec.alpha_prior, float(spec.prior_sum), int(spec.cyc), out.sini, out.cn,
                           out.ini, out.post_argument(), next_block, workers(blocks)), next_block, blocks)
    return out


# ------------------------------------------------------------------------------------------ GPU driver
def _gpu_kernel(NC: int, NW: int, KEEP: bool):
    """The kernel for NC classes, a local INI buffer of NW samples (0: a thread-fastest global scratch), posteriors
    kept or not (cuda.kernels' cache)."""
    return cached_kernel(_build_gpu_kernel, NC, NW, KEEP)


def _build_gpu_kernel(NC: int, NW: int, KEEP: bool):
    """cuda.jit kernel for NC classes (compile-time: per-thread state in local arrays), a local INI buffer of NW
    samples (0: a thread-fastest global scratch), posteriors kept or not."""
    from numba import float64

    from ..cuda.nofma import jit_nofma
    from ..cuda.tables import TABLE_SIZE, copy_tables

    LOCAL_WORK = NW > 0

    def _nofma_estep_kernel(x, cov, lam, alpha, log2_folds, main_idx, n_fit, alpha_init, alpha_prior, prior_sum, cyc,
                            work_g, sini, cn, ini, post):
        head = cuda.shared.array(TABLE_SIZE, float64)
        tail = cuda.shared.array(TABLE_SIZE, float64)
        invc = cuda.shared.array(TABLE_SIZE, float64)
        logc = cuda.shared.array(TABLE_SIZE, float64)
        copy_tables(head, tail, invc, logc)
        tabs = (head, tail, invc, logc)
        log_lam = cuda.local.array(NC, float64)
        weights = cuda.local.array(NC, float64)
        acc = cuda.local.array(NC, float64)
        p = cuda.local.array((NC, 1), float64)
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        if LOCAL_WORK:
            work = cuda.local.array(NW, float64)
        else:
            work = work_g[:, start]
        for r in range(start, x.shape[0], stride):
            post_r = post[r] if KEEP else post[0]
            ini[r] = estep_region(x[r], cov, lam[r], alpha[r], log2_folds, main_idx, KEEP, n_fit, alpha_init,
                                  alpha_prior, prior_sum, cyc, log_lam, weights, acc, p, work, sini[r], cn[r], post_r,
                                  tabs)

    # no contraction: the likelihoods round as the CPU's (R's long-double mean of the INI terms needs it too)
    return jit_nofma(_nofma_estep_kernel)


def estep_gpu(x: np.ndarray, cov: np.ndarray, lam: np.ndarray, alpha: np.ndarray, spec: ModelSpec,
              keep_post: bool = False, n_fit: int = 0, device_id: int = 0) -> ModelOutput:
    """:func:`estep_cpu` on a CUDA device, one thread per region (grid-stride), the whole matrix at once (one
    pass over the parameters: the copies dominate). Same arithmetic as the CPU, bit for bit."""
    x, cov, lam, alpha = _checked(x, cov, lam, alpha, spec)
    m, J = x.shape
    n = lam.shape[1]
    out = _outputs(lam, alpha, J, keep_post)
    with cuda.gpus[device_id]:
        tpb = min(ESTEP_THREADS_PER_BLOCK, 32 * ((m + 31) // 32))
        sms = getattr(cuda.gpus[device_id], "MULTIPROCESSOR_COUNT", 1)  # (absent in the simulator)
        blocks = max(1, min((m + tpb - 1) // tpb, ESTEP_BLOCKS_PER_SM * sms))
        nw = J if J <= ESTEP_LOCAL_WORK_MAX else 0
        work = cuda.device_array((J, blocks * tpb) if nw == 0 else (1, 1), order="F")
        d = [cuda.to_device(a) for a in (x, cov, lam, alpha, spec.log2_folds)]
        init, prior = cuda.to_device(spec.alpha_init), cuda.to_device(spec.alpha_prior)
        outs = [cuda.device_array_like(a) for a in (out.sini, out.cn, out.ini)]
        post = cuda.device_array_like(out.post) if keep_post else cuda.device_array((1, 1, 1), order="F")
        _gpu_kernel(n, nw, keep_post)[blocks, tpb](*d, int(spec.main_idx), int(n_fit), init, prior,
                                                   float(spec.prior_sum), int(spec.cyc), work, *outs, post)
        for host, dev in zip((out.sini, out.cn, out.ini), outs):
            dev.copy_to_host(host)
        if keep_post:
            post.copy_to_host(out.post)
    return out


def estep(x, cov, lam, alpha, spec: ModelSpec, keep_post: bool = False, n_fit: int = 0,
          backend: Backend = Backend.CPU) -> ModelOutput:
    """:func:`estep_cpu` or :func:`estep_gpu` by the resolved ``backend``."""
    if as_backend(backend) is Backend.GPU:
        return estep_gpu(x, cov, lam, alpha, spec, keep_post, n_fit)
    return estep_cpu(x, cov, lam, alpha, spec, keep_post, n_fit)


__all__ = ["estep_region", "estep", "estep_cpu", "estep_gpu"]
