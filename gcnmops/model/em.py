"""THE per-region cn.MOPS EM, written once as plain scalar code.

Every function here is ``register_jitable``: it runs in plain Python (CUDA simulator), inside
``numba.njit`` drivers (model/cpu.py) and inside ``numba.cuda`` kernels (model/gpu.py). No
allocation, no CPU-only constructs: callers hand in every scratch buffer.

Conventions: one region; ``x`` its N (normalized) counts; ``n`` classes with fold changes
``folds``; class labels are indices (int8) into the classes vector.
"""
from __future__ import annotations

import math

from numba.extending import register_jitable

from ..rstats import median_inplace

#: floor of an unnormalized class likelihood (cn.mops applies it before normalizing)
LIKELIHOOD_FLOOR = 1e-100
#: initial scale below which the median is replaced by the mean (at least 1)
SCALE_FLOOR = 1e-10


@register_jitable
def prior_answer(main_idx, keep_post, lam_out, alpha_out, sini_out, cn_out, post_out):
    """Write the short-cut answer of an unmodelled region (all counts <= minReadCount); returns INI = 0."""
    n = lam_out.shape[0]
    N = sini_out.shape[0]
    for i in range(n):
        lam_out[i] = 0.0
        alpha_out[i] = 1.0 if i == main_idx else 0.0
    for k in range(N):
        sini_out[k] = 0.0
        cn_out[k] = main_idx
    if keep_post:
        for k in range(N):
            for i in range(n):
                post_out[i, k] = 1.0 if i == main_idx else 0.0
    return 0.0


@register_jitable
def all_at_most(x, limit):
    """True iff every x[k] <= limit (the minReadCount short-cut)."""
    for k in range(x.shape[0]):
        if x[k] > limit:
            return False
    return True


@register_jitable
def posterior_column(xk, ck, log_ck, g, alpha, lam, log_lam, pk):
    """E-step of one sample: pk[i] = P(class i | x_k); returns nothing (pk normalized in place).

    Unnormalized a_i = alpha_i * Poisson(x_k; cov_k * lambda_i), floored at 1e-100 before normalizing.
    """
    n = pk.shape[0]
    s = 0.0
    for i in range(n):
        a = alpha[i] * math.exp(xk * (log_ck + log_lam[i]) - g - ck * lam[i])
        if a < LIKELIHOOD_FLOOR:
            a = LIKELIHOOD_FLOOR
        pk[i] = a
        s += a
    for i in range(n):
        pk[i] = pk[i] / s


@register_jitable
def fit_region(
    x, cov, log_cov, folds, log2_folds, alpha_init, alpha_prior, prior_sum, cyc, min_read_count, main_idx,
    keep_post, work, alpha, lam, log_lam, acc, pk, lam_out, alpha_out, sini_out, cn_out, post_out,
):
    """cn.mops's model of one region; returns INI and writes the other outputs.

    Inputs: ``x`` (N) counts, ``cov`` (N) coverages and ``log_cov`` their logs, ``folds`` (n) and
    ``log2_folds`` (n), ``alpha_init``/``alpha_prior`` (n), ``prior_sum`` = sum(alpha_prior).
    Scratch: ``work`` (>= N), ``alpha``, ``lam``, ``log_lam``, ``acc``, ``pk`` (n each).
    Outputs: ``lam_out``, ``alpha_out`` (n) after the last M-step; from the last E-step ``sini_out`` (N)
    sum_i log2(I_i) p_ik, ``cn_out`` (N) first class of maximal posterior, ``post_out`` (n, N) if
    ``keep_post``.
    """
    N = x.shape[0]
    n = folds.shape[0]
    if all_at_most(x, min_read_count):
        return prior_answer(main_idx, keep_post, lam_out, alpha_out, sini_out, cn_out, post_out)

    total = 0.0
    for k in range(N):
        work[k] = x[k] / cov[k]
        total += x[k]
    scale = median_inplace(work, N)
    if scale < SCALE_FLOOR:
        m = 0.0
        for k in range(N):
            m += x[k] / cov[k]
        scale = max(m / N, 1.0)
    for i in range(n):
        alpha[i] = alpha_init[i]
        lam[i] = scale * folds[i] * folds[i]

    ini = 0.0
    for c in range(cyc):
        last = c == cyc - 1
        for i in range(n):
            log_lam[i] = math.log(lam[i])
            acc[i] = 0.0
        t = 0.0
        for k in range(N):
            xk = x[k]
            ck = cov[k]
            posterior_column(xk, ck, log_cov[k], math.lgamma(xk + 1.0), alpha, lam, log_lam, pk)
            for i in range(n):
                acc[i] += pk[i]
                t += folds[i] * pk[i] * ck
            if last:
                sini = 0.0
                best = pk[0]
                arg = 0
                for i in range(n):
                    p = pk[i]
                    sini += log2_folds[i] * p
                    ini += abs(log2_folds[i]) * p
                    if p > best:
                        best = p
                        arg = i
                    if keep_post:
                        post_out[i, k] = p
                sini_out[k] = sini
                cn_out[k] = arg
        ratio = total / t
        for i in range(n):
            lam[i] = ratio * folds[i]
            alpha[i] = (alpha_prior[i] + acc[i] / N) / (1.0 + prior_sum)
    for i in range(n):
        lam_out[i] = lam[i]
        alpha_out[i] = alpha[i]
    return ini / N
