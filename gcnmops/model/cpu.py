"""CPU driver of the EM: numba, parallel over blocks of regions, each block fitted in lane groups.

Within a block the regions that need modelling (not the minReadCount short-cut) are fitted ``LANES`` at
a time by ``em.fit_lanes``, the region index fastest so that the compiler vectorizes across regions;
every sum runs in cn.mops's order per region, so the results are bit-identical to cn.mops's.

Interruptible: each slice of rows runs in a thread of its own while the calling thread waits, so that Ctrl-C
and SIGTERM (whose Python handlers run in the main thread only) are seen at once; the fit is then stopped
within one EM cycle through a flag ``em.fit_lanes`` reads, and the exception goes on (``run_interruptibly``).
"""
from __future__ import annotations

import threading

import numpy as np
from numba import njit, prange

from ..compat import keep_numba_threads
from ..exact.rstats import ld_mean
from ..progress import tick
from .em import all_at_most, fit_lanes, last_estep_outputs, prior_answer
from .spec import ModelOutput, ModelSpec

#: regions per parallel work item (scratch is allocated once per block)
BLOCK = 1024
#: the fit is run in at most this many slices of rows (a progress bar moves between them) ...
PROGRESS_STEPS = 20
#: ... of at least this many rows each (enough blocks for every core)
PROGRESS_ROWS = 64 * BLOCK
#: regions fitted side by side (measured best on AVX2: 32-64; the loops vectorize 4 wide, unrolled)
LANES = 64


@njit(parallel=True, cache=True, nogil=True)
def _fit_all(x, cov, folds, log2_folds, alpha_init, alpha_prior, prior_sum, cyc, min_read_count,
             main_idx, keep_post, lam, alpha, sini, cn, ini, post, r_lo, r_hi, stop):
    """Fit rows r_lo..r_hi-1 of ``x``; returns early, unfinished, once ``stop[0]`` is set."""
    N = x.shape[1]
    n = folds.shape[0]
    unit_cov = True
    for k in range(N):
        if cov[k] != 1.0:
            unit_cov = False
    nblocks = (r_hi - r_lo + BLOCK - 1) // BLOCK
    for b in prange(nblocks):
        lo = r_lo + b * BLOCK
        hi = min(r_hi, lo + BLOCK)
        rows = np.empty(hi - lo, np.int64)
        nrows = 0
        for r in range(lo, hi):
            post_r = post[r] if keep_post else post[0]
            if all_at_most(x[r], min_read_count):
                ini[r] = prior_answer(main_idx, keep_post, lam[r], alpha[r], sini[r], cn[r], post_r)
            else:
                rows[nrows] = r
                nrows += 1
        lanes = max(1, min(LANES, nrows))  # a block of few regions: scratch of as many lanes (N may be large)
        xb = np.empty((N, lanes))
        work = np.empty(max(N, n))
        g = np.empty((N, lanes))
        s = np.empty((N, lanes))
        lam_b = np.empty((n, lanes))
        alpha_b = np.empty((n, lanes))
        log_lam = np.empty((n, lanes))
        acc = np.empty((n, lanes))
        p = np.empty((n, N, lanes))
        lane = np.empty((6, lanes))  # total, t, e, r, tail, head
        kb = np.empty(lanes, np.int64)
        pc = np.empty((n, N))
        for j in range(0, nrows, LANES):
            nl = min(LANES, nrows - j)
            for l in range(nl):
                for k in range(N):
                    xb[k, l] = x[rows[j + l], k]
            fit_lanes(xb, nl, cov, unit_cov, folds, alpha_init, alpha_prior, prior_sum, cyc, work, g,
                      lane[0], lam_b, alpha_b, log_lam, p, s, acc, lane[1], lane[2], lane[3], lane[4], lane[5], kb,
                      stop)
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


def fit_cpu(x: np.ndarray, cov: np.ndarray, spec: ModelSpec, keep_post: bool = False,
            out: ModelOutput | None = None) -> ModelOutput:
    """Fit every region of ``x`` (m, N) float64 on the CPU; ``cov`` (N,). Writes into ``out`` if given."""
    m, N = x.shape
    n = spec.folds.size
    if out is None:
        out = ModelOutput.allocate(m, n, N, keep_post)
    post = out.post_argument()
    cov = np.ascontiguousarray(cov, dtype=np.float64)
    step = max(PROGRESS_ROWS, -(-m // PROGRESS_STEPS))
    stop = np.zeros(1, dtype=np.int64)
    for r0 in range(0, m, step):  # slices of rows, so that a progress bar moves; regions are independent
        run_interruptibly(
            _fit_all, stop, x, cov, spec.folds, spec.log2_folds, spec.alpha_init, spec.alpha_prior, spec.prior_sum,
            spec.cyc, spec.min_read_count, spec.main_idx, keep_post, out.lam, out.alpha, out.sini, out.cn,
            out.ini, post, r0, min(m, r0 + step), stop,
        )
        tick(min(m, r0 + step), m)
    return out


def run_interruptibly(kernel, stop: np.ndarray, *args) -> None:
    """``kernel(*args)`` (compiled ``nogil``, returning soon after ``stop[0]`` is set) in a thread of its own
    while this one waits: an exception raised here meanwhile (KeyboardInterrupt, the CLI's SIGTERM) sets
    ``stop``, waits for the kernel to return and goes on; the kernel's own exception is re-raised here. The
    kernel's thread uses this thread's numba thread count."""
    failed: list[BaseException] = []
    same_threads = keep_numba_threads()

    def target() -> None:
        try:
            same_threads()
            kernel(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            failed.append(exc)

    worker = threading.Thread(target=target, name="gcnmops-fit", daemon=True)
    worker.start()
    try:
        worker.join()
    except BaseException:
        stop[0] = 1
        worker.join()
        raise
    if failed:
        raise failed[0]
