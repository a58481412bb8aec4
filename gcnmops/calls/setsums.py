"""Sums of a block's model over sets of windows, for the call qualities (``calls.quality``): each class's Poisson
log-likelihood of one sample's normalized counts, and the mean mixture weights. numba kernels over every set at
once, parallel over sets; each sum runs over its set's windows in their order, so a set gives the same bits in any
block of whole chromosomes that holds it.

Sets are given flat: the windows of set k are ``rows[ptr[k]:ptr[k + 1]]`` (row indices of the block).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(parallel=True, nogil=True, cache=True)
def _logliks(x, usable, lam, log_lam, cov, log_cov, rows, ptr, set_of, col_of, out):  # pragma: no cover - numba
    n = lam.shape[1]
    for j in prange(set_of.size):
        k, c = set_of[j], col_of[j]
        for i in range(n):
            sxl = 0.0
            sl = 0.0
            sx = 0.0
            for p in range(ptr[k], ptr[k + 1]):
                w = rows[p]
                v = x[w, c]
                if usable[w] and np.isfinite(v):
                    sxl += v * log_lam[w, i]
                    sl += lam[w, i]
                    sx += v
            out[j, i] = sxl - cov[c] * sl + log_cov[c] * sx


@njit(parallel=True, nogil=True, cache=True)
def _means(alpha, rows, ptr, out):  # pragma: no cover - numba
    n = alpha.shape[1]
    for k in prange(ptr.size - 1):
        a, b = ptr[k], ptr[k + 1]
        for i in range(n):
            s = 0.0
            for p in range(a, b):
                s += alpha[rows[p], i]
            out[k, i] = s / (b - a) if b > a else 0.0


@njit(parallel=True, nogil=True, cache=True)
def _residual_bins(x, mu, scale, c0, shift, first, last, out):  # pragma: no cover - numba
    wide = mu.shape[1] > 1
    for j in prange(out.shape[0]):
        c = c0 + j
        bits = np.empty(1, np.int64)
        value = bits.view(np.float64)
        for w in range(x.shape[0]):
            e = mu[w, c if wide else 0] * scale[c]
            if e > 0:
                d = x[w, c] - e
                r2 = d * d / e
                if np.isfinite(r2):
                    value[0] = r2
                    b = min(max(bits[0] >> shift, first), last)
                    out[j, b - first] += 1


def residual_bins(x: np.ndarray, mu: np.ndarray, scale: np.ndarray, c0: int, shift: int, first: int, last: int,
                  out: np.ndarray) -> None:
    """Adds to ``out`` (k, bins) int64, for samples c0 .. c0 + k - 1 of ``x`` (m, N), how many windows' squared
    Pearson residual (x - e)^2 / e, e = ``mu``[w, c] (or ``mu``[w, 0] where ``mu`` is (m, 1)) x ``scale``[c], has
    its float64 bits >> ``shift`` in each bin ``first`` .. ``last`` (clipped to them); windows with e <= 0 or a
    residual that is not finite left out. The samples in parallel."""
    _residual_bins(x, mu, scale, c0, shift, first, last, out)


@njit(parallel=True, nogil=True, cache=True)
def _model_arrays(lam, alpha, usable, lam_c, log_in, alpha_c):  # pragma: no cover - numba
    m, n = lam.shape
    for w in prange(m):
        ok = True
        for i in range(n):
            v = lam[w, i]
            if not (np.isfinite(v) and v > 0):
                ok = False
        usable[w] = ok
        for i in range(n):
            lam_c[w, i] = lam[w, i] if ok else 0.0
            log_in[w, i] = lam[w, i] if ok else 1.0
            a = alpha[w, i]
            alpha_c[w, i] = a if np.isfinite(a) else 0.0


def model_arrays(lam: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(usable (m,), lambda, log lambda, alpha), each (m, classes) C-ordered, of a block's ``lam`` and ``alpha``
    (m, classes): a window is usable where every class has a finite positive lambda (elsewhere lambda and its log
    are 0), a non-finite alpha is 0. The windows in parallel; the logs by numpy's log."""
    m, n = lam.shape
    usable = np.empty(m, np.bool_)
    lam_c, log_lam, alpha_c = np.empty((m, n)), np.empty((m, n)), np.empty((m, n))
    if m:
        _model_arrays(lam, alpha, usable, lam_c, log_lam, alpha_c)
        np.log(log_lam, out=log_lam)  # 0 where not usable: log(1)
    return usable, lam_c, log_lam, alpha_c


def flat_sets(sets: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(rows, ptr) of ``sets`` (each an int array of row indices): see the module docstring."""
    ptr = np.zeros(len(sets) + 1, np.int64)
    np.cumsum([len(s) for s in sets], out=ptr[1:])
    rows = np.concatenate(sets).astype(np.int64) if sets else np.zeros(0, np.int64)
    return rows, ptr


def set_logliks(x: np.ndarray, usable: np.ndarray, lam: np.ndarray, log_lam: np.ndarray, cov: np.ndarray,
                log_cov: np.ndarray, rows: np.ndarray, ptr: np.ndarray, set_of: np.ndarray,
                col_of: np.ndarray) -> np.ndarray:
    """(items, classes): item j's sum over the windows w of set ``set_of[j]`` of sample c = ``col_of[j]`` of
    x log(lambda) - cov_c lambda + log(cov_c) x, per class (x the normalized count (m, N), lambda, log lambda
    (m, classes), cov (N,)); windows not ``usable`` (m,) and cells without a finite count left out."""
    out = np.empty((len(set_of), lam.shape[1]))
    _logliks(x, usable, lam, log_lam, cov, log_cov, rows, ptr, np.asarray(set_of, np.int64),
             np.asarray(col_of, np.int64), out)
    return out


def set_means(alpha: np.ndarray, rows: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """(sets, classes) the mean of ``alpha`` (m, classes) over each set's windows (0 for an empty set)."""
    out = np.empty((len(ptr) - 1, alpha.shape[1]))
    _means(alpha, rows, ptr, out)
    return out
