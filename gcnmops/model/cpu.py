"""CPU driver of the per-region EM: numba, parallel over blocks of regions."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .em import fit_region
from .spec import ModelOutput, ModelSpec

#: regions per parallel work item (scratch is allocated once per block)
BLOCK = 256


@njit(parallel=True, cache=True)
def _fit_all(x, cov, folds, log2_folds, alpha_init, alpha_prior, prior_sum, cyc, min_read_count,
             main_idx, keep_post, lam, alpha, sini, cn, ini, post):
    m, N = x.shape
    n = folds.shape[0]
    nblocks = (m + BLOCK - 1) // BLOCK
    for b in prange(nblocks):
        work = np.empty(max(N, n))
        a_s = np.empty(n)
        l_s = np.empty(n)
        ll_s = np.empty(n)
        acc = np.empty(n)
        p = np.empty((n, N))
        for r in range(b * BLOCK, min(m, (b + 1) * BLOCK)):
            post_r = post[r] if keep_post else post[0]
            ini[r] = fit_region(
                x[r], cov, folds, log2_folds, alpha_init, alpha_prior, prior_sum, cyc, min_read_count,
                main_idx, keep_post, True, work, a_s, l_s, ll_s, acc, p, lam[r], alpha[r], sini[r], cn[r], post_r,
            )


def fit_cpu(x: np.ndarray, cov: np.ndarray, spec: ModelSpec, keep_post: bool = False,
            out: ModelOutput | None = None) -> ModelOutput:
    """Fit every region of ``x`` (m, N) float64 on the CPU; ``cov`` (N,). Writes into ``out`` if given."""
    m, N = x.shape
    n = spec.folds.size
    if out is None:
        out = ModelOutput.allocate(m, n, N, keep_post)
    post = out.post if keep_post else np.empty((1, 1, 1), order="F")
    cov = np.ascontiguousarray(cov, dtype=np.float64)
    _fit_all(
        x, cov, spec.folds, spec.log2_folds, spec.alpha_init, spec.alpha_prior, spec.prior_sum,
        spec.cyc, spec.min_read_count, spec.main_idx, keep_post, out.lam, out.alpha, out.sini, out.cn,
        out.ini, post,
    )
    return out
