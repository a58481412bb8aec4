"""CPU driver of the EM: numba, parallel over blocks of regions, each block fitted in lane groups.

Within a block the regions that need modelling (not the minReadCount short-cut) are fitted ``LANES`` at
a time by ``em.fit_lanes``, the region index fastest so that the compiler vectorizes across regions;
every sum runs in cn.mops's order per region, so the results are bit-identical to cn.mops's.

The blocks are taken one at a time by the cores (``dynamic``: blocks with and without modelling cost
different times) in one kernel call that runs in a thread of its own while the calling thread moves the
progress bar and waits, so that Ctrl-C and SIGTERM (whose Python handlers run in the main thread only) are
seen at once; the fit is then stopped within one EM cycle through a flag ``em.fit_lanes`` reads, and the
exception goes on (``dynamic.run_queue``).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..dynamic import counter, run_queue, take, workers
from ..exact.rstats import ld_mean
from ..progress import tick
from .em import all_at_most, fit_lanes, last_estep_outputs, prior_answer
from .spec import ModelOutput, ModelSpec

#: regions per work item
BLOCK = 1024
#: regions fitted side by side (measured best on AVX2: 32-64; the loops vectorize 4 wide, unrolled)
LANES = 64


@njit(parallel=True, cache=True, nogil=True)
def _fit_all(x, cov, folds, log2_folds, alpha_init, alpha_prior, prior_sum, cyc, min_read_count,
             main_idx, keep_post, lam, alpha, sini, cn, ini, post, next_block, nworkers, stop):
    """Fit every row of ``x``, blocks of BLOCK rows taken from ``next_block`` by ``nworkers`` threads; returns early,
    unfinished, once ``stop[0]`` is set."""
    m, N = x.shape
    n = folds.shape[0]
    unit_cov = True
    for k in range(N):
        if cov[k] != 1.0:
            unit_cov = False
    nblocks = (m + BLOCK - 1) // BLOCK
    lanes = max(1, min(LANES, m))  # few regions: scratch of as many lanes (N may be large)
    for _ in prange(nworkers):
        rows = np.empty(BLOCK, np.int64)
        xb = np.empty((N, lanes))
        work = np.empty(max(N, n))
        g = np.empty((N, lanes))
        s = np.empty((N, lanes))
        lam_b = np.empty((n, lanes))
        alpha_b = np.empty((n, lanes))
        log_lam = np.empty((n, lanes))
        acc = np.empty((n, lanes))
        p = np.empty((n, N, lanes))
        lane = np.empty((3, lanes))  # total, t, e
        pc = np.empty((n, N))
        b = take(next_block, nblocks)
        while b >= 0:
            lo = b * BLOCK
            hi = min(m, lo + BLOCK)
            nrows = 0
            for r in range(lo, hi):
                post_r = post[r] if keep_post else post[0]
                if all_at_most(x[r], min_read_count):
                    ini[r] = prior_answer(main_idx, keep_post, lam[r], alpha[r], sini[r], cn[r], post_r)
                else:
                    rows[nrows] = r
                    nrows += 1
            for j in range(0, nrows, lanes):
                nl = min(lanes, nrows - j)
                for l in range(nl):
                    for k in range(N):
                        xb[k, l] = x[rows[j + l], k]
                fit_lanes(xb, nl, cov, unit_cov, folds, alpha_init, alpha_prior, prior_sum, cyc, work, g,
                          lane[0], lam_b, alpha_b, log_lam, p, s, acc, lane[1], lane[2], stop)
                for l in range(nl):
                    r = rows[j + l]
                    post_r = post[r] if keep_post else post[0]
                    for i in range(n):
                        lam[r, i] = lam_b[i, l]
                        alpha[r, i] = alpha_b[i, l]
                        for k in range(N):
                            pc[i, k] = p[i, k, l]
                    for k in range(N):
                        work[k] = last_estep_outputs(pc, k, log2_folds, keep_post, sini[r], cn[r], post_r, k)
                    ini[r] = ld_mean(work, N)  # R's mean()
            b = take(next_block, nblocks)


def fit_cpu(x: np.ndarray, cov: np.ndarray, spec: ModelSpec, keep_post: bool = False,
            out: ModelOutput | None = None) -> ModelOutput:
    """Fit every region of ``x`` (m, N) float64 on the CPU; ``cov`` (N,). Writes into ``out`` if given."""
    m, N = x.shape
    n = spec.folds.size
    if out is None:
        out = ModelOutput.allocate(m, n, N, keep_post)
    cov = np.ascontiguousarray(cov, dtype=np.float64)
    blocks = -(-m // BLOCK)
    next_block, stop = counter(), np.zeros(1, dtype=np.int64)
    run_queue(_fit_all, (x, cov, spec.folds, spec.log2_folds, spec.alpha_init, spec.alpha_prior, spec.prior_sum,
                         spec.cyc, spec.min_read_count, spec.main_idx, keep_post, out.lam, out.alpha, out.sini, out.cn,
                         out.ini, out.post_argument(), next_block, workers(blocks), stop),
              next_block, blocks, stop=stop, progress=lambda taken: tick(min(m, taken * BLOCK), m))
    tick(m, m)
    return out
