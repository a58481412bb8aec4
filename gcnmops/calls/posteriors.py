"""The log error probabilities of the call qualities (``calls.quality``) from the items' log-likelihoods: one
numba kernel over every (item, sample) at once, parallel over items, with no (items, classes, samples)
temporaries (those were most of a VCF's time). Each log-sum-exp is log(sum_i exp(v_i - t)) + t, t the largest
finite v_i (0 where there is none), the classes summed in their order; exp and log are glibc's (numba calls
libm), the same on every machine."""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..compat import parallel_region


@njit(inline="always")
def _lse(v, c):  # pragma: no cover - numba
    top = v[0]
    nan = top != top
    for i in range(1, c):
        if v[i] != v[i]:
            nan = True
        elif v[i] > top or top != top:
            top = v[i]
    safe = top if (not nan and math.isfinite(top)) else 0.0
    s = 0.0
    for i in range(c):
        s += math.exp(v[i] - safe)
    return safe + (math.log(s) if s > 0.0 else (-math.inf if s == 0.0 else math.nan))


@njit(parallel=True, nogil=True, cache=True)
def _log_errors(loglik, log_prior, phi, sign, cls, side, err_call, err_cls):  # pragma: no cover - numba
    n, c, k = loglik.shape
    for a in prange(n):
        lp = np.empty(c)
        masked = np.empty(c)
        for j in range(k):
            for i in range(c):
                lp[i] = log_prior[a, i] + loglik[a, i, j] / phi[a, j]
            total = _lse(lp, c)
            for i in range(c):
                lp[i] = lp[i] - total
            s = sign[a, j]
            for i in range(c):  # not the state's side: a normal state -> not normal; loss/gain -> normal or other
                wrong = side[i] != 0 if s == 0 else side[i] != s
                masked[i] = lp[i] if wrong else -math.inf
            err_call[a, j] = _lse(masked, c)
            own = max(cls[a, j], 0)
            for i in range(c):
                masked[i] = lp[i] if i != own else -math.inf
            err_cls[a, j] = _lse(masked, c)


def log_errors(loglik: np.ndarray, log_prior: np.ndarray, phi: np.ndarray, sign: np.ndarray, cls: np.ndarray,
               side: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log P(not the state's side), log P(not the state's class)), each (n, k) float64, of n items x k samples:
    the classes' log posteriors lp_i = log_prior[i] + loglik[i] / phi normalized by their log-sum-exp; a state
    of ``sign`` 0 (normal) is wrong on a class of ``side`` (classes,) != 0, a loss / gain (-1 / +1) on a class
    of another side; its class ``cls`` (-1 unknown: the first). ``loglik`` (n, classes, k), ``log_prior``
    (n, classes), ``phi`` (n, k) the samples' dispersions, ``sign`` / ``cls`` (n, k)."""
    loglik = np.ascontiguousarray(loglik, dtype=np.float64)
    n, _, k = loglik.shape
    shape = (n, k)
    err_call, err_cls = np.empty(shape), np.empty(shape)
    if n and k:
        with parallel_region():  # the call files' threads ask at once
            _log_errors(loglik, np.ascontiguousarray(log_prior, dtype=np.float64),
                        np.ascontiguousarray(np.broadcast_to(phi, shape), dtype=np.float64),
                        np.ascontiguousarray(np.broadcast_to(sign, shape), dtype=np.int64),
                        np.ascontiguousarray(np.broadcast_to(cls, shape), dtype=np.int64),
                        np.ascontiguousarray(side, dtype=np.int64), err_call, err_cls)
    return err_call, err_cls
