"""Sums of a block's model over sets of windows, for the call qualities (``calls.quality``): each class's Poisson
log-likelihood of one sample's normalized counts, and the mean mixture weights. numba kernels over every set at
once, parallel over sets; each sum runs over its set's windows in their order, so a set gives the same bits in any
block of whole chromosomes that holds it.

Sets are given flat: the windows of set k are ``rows[ptr[k]:ptr[k + 1]]`` (row indices of the block).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange


@njit(parallel=True, nogil=True, cache=True)
def _logliks(x, usable, lam, log_lam, cov, log_cov, rows, pos, ptr, set_of, col_of, out):  # pragma: no cover
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
                    sxl += v * log_lam[pos[p], i]
                    sl += lam[pos[p], i]
                    sx += v
            out[j, i] = sxl - cov[c] * sl + log_cov[c] * sx


@njit(parallel=True, nogil=True, cache=True)
def _means(alpha, pos, ptr, out):  # pragma: no cover - numba
    n = alpha.shape[1]
    for k in prange(ptr.size - 1):
        a, b = ptr[k], ptr[k + 1]
        for i in range(n):
            s = 0.0
            for p in range(a, b):
                s += alpha[pos[p], i]
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


#: windows per task of ``usable_windows``: a tile's classes are read a column at a time (a model's matrices are
#: region-fastest; reading a window's classes across them is a page apart per class)
MODEL_TILE = 4096


@njit(parallel=True, nogil=True, cache=True)
def _usable(lam, usable):  # pragma: no cover - numba
    m, n = lam.shape
    for t in prange((m + MODEL_TILE - 1) // MODEL_TILE):
        a = t * MODEL_TILE
        b = min(m, a + MODEL_TILE)
        for w in range(a, b):
            usable[w] = True
        for i in range(n):
            for w in range(a, b):
                v = lam[w, i]
                if not (np.isfinite(v) and v > 0):
                    usable[w] = False


def usable_windows(lam: np.ndarray) -> np.ndarray:
    """(m,) bool: the windows where every class of ``lam`` (m, classes, any order) has a finite positive lambda.
    Tiles of windows in parallel."""
    usable = np.empty(lam.shape[0], np.bool_)
    if usable.size:
        _usable(lam, usable)
    return usable


def model_rows(lam: np.ndarray, alpha: np.ndarray, usable: np.ndarray, rows: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lambda, log lambda, alpha), each (len(rows), classes) C-ordered, of the windows ``rows`` of a block's
    ``lam`` and ``alpha`` (m, classes): lambda and its log 0 where a window is not ``usable`` (m,), a non-finite
    alpha 0; the logs by numpy's log. Made for the windows a sum reads only: the same numbers for a window
    whichever rows are asked with it."""
    ok = usable[rows][:, None]
    picked = np.ascontiguousarray(lam[rows], dtype=np.float64)
    lam_c = np.where(ok, picked, 0.0)
    log_lam = np.log(np.where(ok, picked, 1.0))  # 0 where not usable: log(1)
    a = np.ascontiguousarray(alpha[rows], dtype=np.float64)
    return lam_c, log_lam, np.where(np.isfinite(a), a, 0.0)


class RowSets(NamedTuple):
    """Sets of windows given flat (the module docstring): set k is ``rows[ptr[k]:ptr[k + 1]]``."""

    rows: np.ndarray  # int64, the sets' rows one set after the other
    ptr: np.ndarray  # int64 (sets + 1,)

    @classmethod
    def of(cls, sets: "list[np.ndarray] | RowSets") -> "RowSets":
        """The flat form of a list of int arrays of row indices (a RowSets as it is)."""
        if isinstance(sets, RowSets):
            return sets
        ptr = np.zeros(len(sets) + 1, np.int64)
        np.cumsum([len(r) for r in sets], out=ptr[1:])
        rows = np.concatenate(sets).astype(np.int64) if len(sets) else np.zeros(0, np.int64)
        return cls(rows, ptr)

    def __len__(self) -> int:
        return self.ptr.size - 1

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.ptr)

    def take(self, items: np.ndarray) -> "RowSets":
        """The sets ``items``, in that order."""
        items = np.asarray(items, np.int64)
        sizes = self.sizes[items]
        ptr = np.zeros(items.size + 1, np.int64)
        np.cumsum(sizes, out=ptr[1:])
        where = np.repeat(self.ptr[items] - ptr[:-1], sizes) + np.arange(int(ptr[-1]))
        return RowSets(self.rows[where], ptr)

    def join(self, other: "RowSets") -> "RowSets":
        """These sets, then ``other``'s."""
        return RowSets(np.concatenate([self.rows, other.rows]),
                       np.concatenate([self.ptr, other.ptr[1:] + self.ptr[-1]]))

    def split(self) -> list[np.ndarray]:
        """The sets as a list of arrays (views of ``rows``)."""
        return np.split(self.rows, self.ptr[1:-1]) if len(self) else []


def flat_sets(sets: "list[np.ndarray] | RowSets") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(rows, ptr, union, pos) of ``sets`` (int arrays of row indices, or RowSets): see the module docstring;
    ``union``: the distinct rows, ascending, and ``pos``: each entry's place in it (the row of ``model_rows``'
    arrays made for ``union``)."""
    rows, ptr = RowSets.of(sets)
    union, pos = np.unique(rows, return_inverse=True)
    return rows, ptr, union, pos.reshape(-1).astype(np.int64)


def set_logliks(x: np.ndarray, usable: np.ndarray, lam: np.ndarray, log_lam: np.ndarray, cov: np.ndarray,
                log_cov: np.ndarray, rows: np.ndarray, pos: np.ndarray, ptr: np.ndarray, set_of: np.ndarray,
                col_of: np.ndarray) -> np.ndarray:
    """(items, classes): item j's sum over the windows w of set ``set_of[j]`` of sample c = ``col_of[j]`` of
    x log(lambda) - cov_c lambda + log(cov_c) x, per class (x the normalized count (m, N), cov (N,); lambda and
    log lambda (k, classes) of the rows of ``flat_sets``' union: entry p's at ``pos[p]``); windows not ``usable``
    (m,) and cells without a finite count left out."""
    out = np.empty((len(set_of), lam.shape[1]))
    _logliks(x, usable, lam, log_lam, cov, log_cov, rows, pos, ptr, np.asarray(set_of, np.int64),
             np.asarray(col_of, np.int64), out)
    return out


def set_means(alpha: np.ndarray, pos: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """(sets, classes) the mean of ``alpha`` (k, classes: entry p's row ``pos[p]``) over each set's windows (0 for
    an empty set)."""
    out = np.empty((len(ptr) - 1, alpha.shape[1]))
    _means(alpha, pos, ptr, out)
    return out
