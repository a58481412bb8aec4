"""THE per-region cn.MOPS EM, written once as plain scalar code.

Every function here is ``register_jitable``: it runs in plain Python (tests, CUDA simulator), inside
``numba.njit`` drivers (model/cpu.py) and inside ``numba.cuda`` kernels (model/gpu.py). No
allocation: callers hand in every scratch buffer.

Two loop orders over the same formulas, both with every sum in cn.mops's order: ``fit_region`` fits one
region (one GPU thread), streaming over the samples with O(N) scratch and no posterior matrix;
``fit_lanes`` fits a group of regions side by side, the region index fastest, so that the CPU vectorizes
across regions (SIMD lanes). With glibc's exp inlined (exact/libm.py) the two are bit-identical.

Conventions: one region; ``x`` its N (normalized) counts; ``n`` classes with fold changes
``folds``; class labels are indices (int8) into the classes vector.
"""
from __future__ import annotations

from numba.extending import register_jitable

from ..exact.libm import exp_finish, exp_glibc, exp_reduce, exp_table, log_glibc
from ..exact.rmath import lgamma_r
from ..exact.rstats import ld_mean, median_inplace

#: floor of an unnormalized class likelihood (cn.mops applies it before normalizing)
LIKELIHOOD_FLOOR = 1e-100
#: exponents below this give alpha * exp(e) < LIKELIHOOD_FLOOR for any alpha <= 1: the exp is skipped
EXP_CUTOFF = -236.0
#: initial scale below which the median is replaced by the mean (at least 1)
SCALE_FLOOR = 1e-10


@register_jitable
def prior_answer(main_idx, keep_post, lam_out, alpha_out, sini_out, cn_out, post_out):
    """Write the short-cut answer of an unmodelled region (all counts <= minReadCount); returns INI = 0."""
    for i in range(lam_out.shape[0]):
        lam_out[i] = 0.0
    return main_class_answer(main_idx, keep_post, alpha_out, sini_out, cn_out, post_out)


@register_jitable
def main_class_answer(main_idx, keep_post, alpha_out, sini_out, cn_out, post_out):
    """Every sample in the main class for certain: alpha 1 there, sINI 0, posteriors 1/0; returns INI = 0.
    The short-cut answer of the EM and of the one-step model."""
    n = alpha_out.shape[0]
    N = sini_out.shape[0]
    for i in range(n):
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
def region_start(x, cov, work):
    """(total, scale) of a region: the summed counts (via their mean, as cn.mops) and the initial scale,
    R's median of x/cov (R's mean, at least 1, when the median is ~0); reorders ``work`` (>= N)."""
    N = x.shape[0]
    total = 0.0
    for k in range(N):
        work[k] = x[k] / cov[k]
        total += x[k]
    total = (total / N) * N  # cn.mops works with the mean count
    scale = median_inplace(work, N)
    if scale < SCALE_FLOOR:
        for k in range(N):  # in order again: R's mean() of x/cov
            work[k] = x[k] / cov[k]
        scale = max(ld_mean(work, N), 1.0)
    return total, scale


@register_jitable
def floored(e, a):
    """A class's unnormalized posterior a = alpha exp(e), floored at 1e-100 (also where e < EXP_CUTOFF,
    whose exp the callers may skip or clamp)."""
    return a if (e > EXP_CUTOFF and a >= LIKELIHOOD_FLOOR) else LIKELIHOOD_FLOOR


@register_jitable
def alpha_update(prior, acc, N, prior_sum):
    """M-step of one class's weight: (prior + mean posterior) / (1 + sum of priors)."""
    return (prior + acc / N) / (1.0 + prior_sum)


@register_jitable
def unnormalized_posterior(xk, ck, g, alpha_i, lam_i, log_lam_i, tables):
    """Class i's unnormalized posterior of sample k: a_ik = alpha_i exp(x_k log(cov_k lambda_i) - g - cov_k
    lambda_i), g = lgamma(x_k + 1), floored at 1e-100. ``log_lam_i`` = log(lambda_i), used where cov_k == 1
    (the same value, one log per class and cycle instead of one per sample). ``tables``: libm.TABLES or copies."""
    lc = log_lam_i if ck == 1.0 else log_glibc(ck * lam_i, tables[2], tables[3])
    e = xk * lc - g - ck * lam_i
    return floored(e, alpha_i * exp_glibc(e, tables[0], tables[1]) if e > EXP_CUTOFF else 0.0)


@register_jitable
def posterior_column(xk, ck, g, alpha, lam, log_lam, p, tables):
    """E-step of one sample: p[i, 0] = P(class i | x_k) for every class i (``p``: (n, 1)), the a_ik of
    ``unnormalized_posterior`` (g = lgamma(x_k + 1)) over their sum; returns that sum (the normalizer s_k)."""
    n = lam.shape[0]
    for i in range(n):
        p[i, 0] = unnormalized_posterior(xk, ck, g, alpha[i], lam[i], log_lam[i], tables)
    s = 0.0
    for i in range(n):
        s += p[i, 0]
    for i in range(n):
        p[i, 0] = p[i, 0] / s
    return s


@register_jitable
def last_estep_outputs(p, c, log2_folds, keep_post, sini_out, cn_out, post_out, k):
    """From column c of the posteriors ``p`` (sample k of the last E-step): sINI_k, the label (first class
    of maximal posterior) and the posterior column; returns sum_i |log2 I_i| p_ik (for INI)."""
    n = log2_folds.shape[0]
    sini = 0.0
    gain = 0.0
    best = p[0, c]
    arg = 0
    for i in range(n):
        pik = p[i, c]
        sini += log2_folds[i] * pik
        gain += abs(log2_folds[i]) * pik
        if pik > best:
            best = pik
            arg = i
        if keep_post:
            post_out[i, k] = pik
    sini_out[k] = sini
    cn_out[k] = arg
    return gain


@register_jitable
def fit_region(
    x, cov, folds, log2_folds, alpha_init, alpha_prior, prior_sum, cyc, min_read_count, main_idx,
    keep_post, work, norm, terms, pst, alpha, lam, log_lam, acc, p, lam_out, alpha_out, sini_out, cn_out,
    post_out, tables,
):
    """cn.mops's model of one region, streaming over the samples; returns INI and writes the other outputs.
    Every sum runs in cn.mops's order, so that the results are bit-identical to cn.mops's (R's lgamma, glibc's
    exp and log) and to ``fit_lanes``; the GPU kernel runs it (one region per thread).

    Each cycle makes two passes over the n x N posteriors: pass 1, sample by sample, computes sample k's
    posterior column and adds it to the per-class sums of the M-step; pass 2, class by class, sums
    T = sum_i sum_k I_i p_ik cov_k in cn.mops's class-major order. Where ``pst`` holds n x N values, pass 1
    stores the cycle's posteriors there (class-major) and pass 2 reads them back; where it is shorter
    (no device memory for it), pass 1 keeps the normalizers s_k in ``norm`` and pass 2 recomputes each
    p_ik = a_ik / s_k (``unnormalized_posterior``, the same roundings): twice the transcendental work.
    The outputs of the last E-step are written in the last cycle's pass 1, the INI terms into a buffer of
    their own (``work`` still holds the lgammas).

    Inputs: ``x`` (N) counts, ``cov`` (N) coverages, ``folds`` and ``log2_folds`` (n),
    ``alpha_init``/``alpha_prior`` (n), ``prior_sum`` = sum(alpha_prior).
    Scratch: ``work`` (>= N; the median's buffer, then lgamma(x_k + 1)), ``norm`` (>= N; the normalizers
    s_k), ``terms`` (>= N; the last E-step's INI terms), ``pst`` (n x N, or any shorter length: recompute),
    ``alpha``, ``lam``, ``log_lam``, ``acc`` (n each) and ``p`` (n, 1), one posterior column.
    ``tables``: libm.TABLES, or copies of them where loads from them are faster (a GPU block's shared memory).
    Outputs: ``lam_out``, ``alpha_out`` (n) after the last M-step; from the last E-step ``sini_out`` (N)
    sum_i log2(I_i) p_ik, ``cn_out`` (N) first class of maximal posterior, ``post_out`` (n, N) if
    ``keep_post``.
    """
    N = x.shape[0]
    n = folds.shape[0]
    if all_at_most(x, min_read_count):
        return prior_answer(main_idx, keep_post, lam_out, alpha_out, sini_out, cn_out, post_out)
    store = pst.shape[0] >= n * N

    total, scale = region_start(x, cov, work)
    for i in range(n):
        alpha[i] = alpha_init[i]
        lam[i] = scale * folds[i] * folds[i]
    for k in range(N):  # work now holds lgamma(x_k + 1), R's
        work[k] = lgamma_r(x[k] + 1.0)

    for c in range(cyc):
        last = c == cyc - 1
        for i in range(n):
            log_lam[i] = log_glibc(lam[i], tables[2], tables[3])
            acc[i] = 0.0
        for k in range(N):  # pass 1, sample-major: posterior column, per-class sums
            s_k = posterior_column(x[k], cov[k], work[k], alpha, lam, log_lam, p, tables)
            for i in range(n):
                acc[i] += p[i, 0]
                if store:
                    pst[i * N + k] = p[i, 0]
            if not store:
                norm[k] = s_k
            if last:
                terms[k] = last_estep_outputs(p, 0, log2_folds, keep_post, sini_out, cn_out, post_out, k)
        t = 0.0
        for i in range(n):  # pass 2, class-major: T in cn.mops's order
            for k in range(N):
                if store:
                    pik = pst[i * N + k]
                else:
                    a = unnormalized_posterior(x[k], cov[k], work[k], alpha[i], lam[i], log_lam[i], tables)
                    pik = a / norm[k]
                t += folds[i] * pik * cov[k]
        ratio = total / t
        for i in range(n):
            lam[i] = ratio * folds[i]
            alpha[i] = alpha_update(alpha_prior[i], acc[i], N, prior_sum)
    for i in range(n):
        lam_out[i] = lam[i]
        alpha_out[i] = alpha[i]
    return ld_mean(terms, N)  # R's mean()


@register_jitable
def fit_lanes(xb, nl, cov, unit_cov, folds, alpha_init, alpha_prior, prior_sum, cyc, work, g, total, lam, alpha,
              log_lam, p, s, acc, t, e, stop):
    """cn.mops's model of ``nl`` regions side by side (lane l = one region), each in cn.mops's order.

    ``xb`` (N, >= nl) the regions' counts, lane-fastest (C order); ``cov`` (N); ``unit_cov``: every
    cov_k is 1 (then log(cov_k lambda) = log(lambda): one log per class, not per sample).
    Scratch: ``work`` (>= N), ``g`` (N, L) lgamma(x + 1), ``total``, ``t``, ``e`` (L) float64, ``log_lam``,
    ``acc`` (n, L), ``s`` (N, L). Leaves ``lam``/``alpha`` (n, L) after the last M-step and ``p`` (n, N, L) the
    posteriors of the last E-step (callers read the outputs from them with ``last_estep_outputs``). The innermost
    loops run over the lanes: the compiler vectorizes them, glibc's exp inlined with its table loads. A cycle runs
    sample by sample (each sample's posteriors made, normalized and added to the classes' sums while they are in
    the cache), then T class by class, as cn.mops sums it. ``stop`` (1,) int64, read before each cycle: once it
    is set (Ctrl-C, see ``model.cpu``) the fit returns at once and its outputs are unfinished.
    """
    N = xb.shape[0]
    n = folds.shape[0]
    for l in range(nl):
        tot, sc = region_start(xb[:, l], cov, work)
        total[l] = tot
        for i in range(n):
            alpha[i, l] = alpha_init[i]
            lam[i, l] = sc * folds[i] * folds[i]
        for k in range(N):
            g[k, l] = lgamma_r(xb[k, l] + 1.0)
    for _ in range(cyc):
        if stop[0]:
            return
        for i in range(n):
            for l in range(nl):
                log_lam[i, l] = log_glibc(lam[i, l])
                acc[i, l] = 0.0
        for k in range(N):  # E-step, sample by sample: unnormalized posteriors, their sum over the classes in order
            for i in range(n):
                if unit_cov:
                    for l in range(nl):
                        e[l] = xb[k, l] * log_lam[i, l] - g[k, l] - lam[i, l]
                else:
                    ck = cov[k]
                    for l in range(nl):
                        cl = ck * lam[i, l]
                        e[l] = xb[k, l] * log_glibc(cl) - g[k, l] - cl
                for l in range(nl):
                    kb, r = exp_reduce(max(e[l], EXP_CUTOFF))
                    tail, head = exp_table(kb)
                    p[i, k, l] = floored(e[l], alpha[i, l] * exp_finish(kb, r, tail, head))
            for l in range(nl):
                s[k, l] = p[0, k, l]
            for i in range(1, n):
                for l in range(nl):
                    s[k, l] += p[i, k, l]
            for i in range(n):  # normalized; the classes' posterior sums over the samples in order
                for l in range(nl):
                    q = p[i, k, l] / s[k, l]
                    p[i, k, l] = q
                    acc[i, l] += q
        for l in range(nl):
            t[l] = 0.0
        for i in range(n):  # M-step: T class-major, then sample
            fi = folds[i]
            for k in range(N):
                ck = cov[k]
                for l in range(nl):
                    t[l] += fi * p[i, k, l] * ck
        for i in range(n):
            for l in range(nl):
                lam[i, l] = (total[l] / t[l]) * folds[i]
                alpha[i, l] = alpha_update(alpha_prior[i], acc[i, l], N, prior_sum)
