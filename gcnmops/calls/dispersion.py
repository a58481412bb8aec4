"""How much read counts vary beyond Poisson, for the qualities (calls.quality): each sample's dispersion phi from
the binned squared Pearson residuals of its windows (``residual_counts``, ``dispersion``: exact integer bin counts
that add up over blocks of windows), and a call's locus dispersion D from the other samples' residuals at its
windows (``locus_medians``, ``set_locus_sums``, ``locus_dispersion``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

#: the median of a chi-square variable of one degree of freedom: median(r^2) of Poisson residuals r
_CHI2_MEDIAN = 0.454936423119572
#: the dispersion's grid: squared residuals are counted in bins of their float64 bits (sign, exponent and the
#: first DISPERSION_BITS bits of the mantissa: 2^DISPERSION_BITS bins per doubling, each 0.4-0.8% wide), exact
#: integer counts that add up over blocks of windows on any machine
DISPERSION_BITS = 7
_SHIFT = 52 - DISPERSION_BITS
#: the bins counted: from the one holding _CHI2_MEDIAN (phi 1; smaller residuals fall into it) to the one holding
#: DISPERSION_MAX x _CHI2_MEDIAN (larger ones fall into it)
DISPERSION_MAX = 1e4
_FIRST_BIN = int(np.float64(_CHI2_MEDIAN).view(np.int64) >> _SHIFT)
_LAST_BIN = int(np.float64(_CHI2_MEDIAN * DISPERSION_MAX).view(np.int64) >> _SHIFT)
N_DISPERSION_BINS = _LAST_BIN - _FIRST_BIN + 1
#: cells of a block binned at once (bounds the temporary arrays)
_CELLS = 1 << 20


@dataclass(frozen=True)
class ResidualCounts:
    """Per sample, how many windows' squared Pearson residual falls into each bin of the dispersion's grid, held
    sparse (a sample has at most as many bins as windows): ``keys`` (sorted, unique) sample x N_DISPERSION_BINS +
    bin of each bin that holds any, ``counts`` (> 0) how many; ``samples`` N. The counts of blocks of windows add
    up (``+``) to those of all of them."""

    samples: int
    keys: np.ndarray
    counts: np.ndarray

    def __add__(self, other: "ResidualCounts") -> "ResidualCounts":
        keys = np.concatenate([self.keys, other.keys])
        counts = np.concatenate([self.counts, other.counts])
        if keys.size == 0:
            return self
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
        first = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
        return ResidualCounts(self.samples, keys[first], np.add.reduceat(counts, first))


def residual_counts(x: np.ndarray, mu: np.ndarray, scale: np.ndarray | None = None) -> ResidualCounts:
    """Per sample, how many windows' squared Pearson residual (x - mu)^2 / mu falls into each bin of the
    dispersion's grid (``DISPERSION_BITS``); windows with NaN, or mu <= 0, are left out. ``x`` (m, N), ``mu``
    (m, N) or (m, 1), times ``scale`` (N,) per sample where given. Counted densely for a group of samples at a
    time (at most _CELLS bins; ``setsums.residual_bins``), kept sparse."""
    from .setsums import residual_bins

    m, N = x.shape
    x = np.asfortranarray(x, dtype=np.float64)
    mu = np.asfortranarray(mu, dtype=np.float64)
    scale = np.ones(N) if scale is None else np.ascontiguousarray(scale, dtype=np.float64)
    group = max(1, _CELLS // N_DISPERSION_BINS)
    keys, counts = [], []
    for c in range(0, N, group):
        dense = np.zeros((min(group, N - c), N_DISPERSION_BINS), np.int64)
        residual_bins(x, mu, scale, c, _SHIFT, _FIRST_BIN, _LAST_BIN, dense)
        held = np.flatnonzero(dense)
        keys.append(held + c * N_DISPERSION_BINS)
        counts.append(dense.reshape(-1)[held])
    return ResidualCounts(N, np.concatenate(keys) if keys else np.zeros(0, np.int64),
                          np.concatenate(counts) if counts else np.zeros(0, np.int64))


def dispersion(counts: ResidualCounts) -> np.ndarray:
    """(N,) each sample's dispersion phi >= 1 from its ``residual_counts``: the lower edge of the bin of the
    median squared Pearson residual (the lower one of the two middle windows of an even count) over that median
    for Poisson counts (``_CHI2_MEDIAN``), at least 1 (1 without a usable window)."""
    N = counts.samples
    sample = counts.keys // N_DISPERSION_BINS
    bins = counts.keys - sample * N_DISPERSION_BINS
    bounds = np.searchsorted(sample, np.arange(N + 1))  # each sample's bins: [bounds[k], bounds[k + 1])
    cumulative = np.concatenate([[0], np.cumsum(counts.counts)])
    total = cumulative[bounds[1:]] - cumulative[bounds[:-1]]
    middle = (total - 1) // 2  # 0-based rank of the (lower) median window
    # the median's bin: the sample's first bin whose running count exceeds the median's rank
    running = cumulative[1:] - cumulative[bounds[:-1]][sample]
    before = np.bincount(sample[running <= middle[sample]], minlength=N)
    at = bins[np.minimum(bounds[:-1] + before, max(bins.size - 1, 0))] if bins.size else np.zeros(N, np.int64)
    edge = ((at + _FIRST_BIN).astype(np.int64) << _SHIFT).view(np.float64)
    return np.where(total > 0, np.maximum(edge / _CHI2_MEDIAN, 1.0), 1.0)


#: windows per task of ``locus_medians`` (each task's scratch made once)
LOCUS_TILE = 1024


@njit(parallel=True, nogil=True, cache=True)
def _locus_medians(x, mu, out):  # pragma: no cover - numba
    m, n = x.shape
    for t in prange((m + LOCUS_TILE - 1) // LOCUS_TILE):
        z = np.empty(n)
        s = np.empty(n)
        for w in range(t * LOCUS_TILE, min(m, (t + 1) * LOCUS_TILE)):
            held = 0
            for j in range(n):
                v = np.nan
                if mu[w, j] > 0:
                    d = x[w, j] - mu[w, j]
                    v = d * d / mu[w, j]
                z[j] = v
                if np.isfinite(v):
                    s[held] = v
                    held += 1
            s[:held].sort()
            # without a sample of finite residual: held - 1 values, the lower median the (held - 2) // 2-th of
            # them; it is s[t] where the sample's own value is above it, else s[t + 1] (equal values: either)
            k = max(held - 2, 0) // 2
            low = s[k] if k < held else np.nan
            high = s[k + 1] if k + 1 < held else np.nan
            r = max(held - 1, 0) // 2
            rest = s[r] if r < held else np.nan  # a sample without a finite residual: of all held values
            for j in range(n):
                if np.isfinite(z[j]):
                    out[w, j] = (high if z[j] <= low else low) if held > 1 else np.nan
                else:
                    out[w, j] = rest if held > 0 else np.nan


def locus_medians(x: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """(m, N) for each window w and sample k: the lower median of the squared Pearson residuals (x - mu)^2 / mu
    of the *other* samples of window w (NaN where no other sample has a finite count and mu > 0): how much the
    window's counts vary around the normal class's expected counts ``mu``, without the sample's own count (so a
    sample's reads never change its own locus dispersion). ``x``, ``mu`` (m, N). Tiles of windows in parallel."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    mu = np.ascontiguousarray(np.broadcast_to(mu, x.shape), dtype=np.float64)
    out = np.empty(x.shape)
    if out.size:
        _locus_medians(x, mu, out)
    return out


def set_locus_sums(medians, sets, cols: np.ndarray | None, n_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """(sums, counts) of the finite ``medians(rows)`` (``locus_medians`` of those windows) over each set of
    windows (``sets``: a list of int arrays or ``setsums.RowSets``; each set's rows in their order): of the sample
    ``cols[i]`` of set i, each (n,); ``cols`` None: of every sample, each (n, N). The windows of a group of sets
    at a time (at most _CELLS cells; a larger set in parts of its windows)."""
    from .setsums import RowSets

    flat, ptr = RowSets.of(sets)
    n = ptr.size - 1
    shape = (n,) if cols is not None else (n, n_samples)
    sums, counts = np.zeros(shape), np.zeros(shape, np.int64)
    sizes = np.diff(ptr)
    width = max(n_samples, 1)  # every sample of a window is read for its median
    i = 0
    while i < n:
        j, cells = i, 0
        while j < n and (j == i or cells + sizes[j] * width <= _CELLS):
            cells += sizes[j] * width
            j += 1
        rows = flat[ptr[i]:ptr[j]]
        if j == i + 1 and cells > _CELLS:  # one set larger than the bound: its windows a part at a time
            step = max(1, _CELLS // width)
            for a in range(0, rows.size, step):
                med = medians(rows[a:a + step])
                if cols is not None:
                    med = med[:, int(cols[i])]
                ok = np.isfinite(med)
                sums[i] += np.where(ok, med, 0.0).sum(axis=0)
                counts[i] += ok.sum(axis=0)
        elif rows.size:
            unique, local = np.unique(rows, return_inverse=True)
            med = medians(unique)[local.reshape(-1)]  # (rows, N), in the sets' order
            if cols is not None:
                med = med[np.arange(rows.size), np.repeat(np.asarray(cols[i:j], np.int64), sizes[i:j])]
            ok = np.isfinite(med)
            values = np.where(ok, med, 0.0)
            starts = ptr[i:j] - ptr[i]
            has = sizes[i:j] > 0
            part_sums = np.add.reduceat(values, starts[has], axis=0)
            part_counts = np.add.reduceat(ok.astype(np.int64), starts[has], axis=0)
            sums[i:j][has], counts[i:j][has] = part_sums, part_counts
        i = j
    return sums, counts


def locus_dispersion(sums: np.ndarray, counts: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """The locus dispersion D >= 1 of calls: the mean over the call's windows of their ``locus_medians`` (the
    other samples' median squared residual), over the chi-square median (Poisson counts: 1), over the sample's
    own dispersion ``phi`` (already in its log-likelihoods), at least 1; 1 without such a window."""
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(counts > 0, sums / np.maximum(counts, 1) / _CHI2_MEDIAN / phi, 1.0)
    return np.maximum(np.nan_to_num(d, nan=1.0, posinf=np.finfo(np.float64).max), 1.0)
