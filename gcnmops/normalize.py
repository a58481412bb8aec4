"""cn.mops's read-count normalization: ``normalizeChromosomes``, ``normalizeGenome`` and the
per-sample coverage used by ``norm=2`` (spec part 1, sections 1 and 3).

Matrices are regions x samples (m, N); results are float64 in column-major order (``order="F"``,
region-fastest, the memory order of an R matrix). The work is vectorized per sample column and
per chromosome; the few loops over rows run in numba.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from numba import njit

from .density import density_mode
from .errors import InputError
from .rstats import median_inplace, quantile7_sorted, r_median, r_quantile, select_kth

__all__ = ["NORM_TYPES", "SIZE_FACTORS", "normalize_chromosomes", "normalize_genome", "sample_coverage"]

NORM_TYPES = ("mean", "median", "poisson", "mode", "quant")
SIZE_FACTORS = ("mean", "median", "quant", "mode")

UNDEF_CHROMOSOME = "undef"
#: values below this count as "no reads": rows with every value below it are silent
_SILENT_BELOW = 1.0
#: ploidy 0 is replaced by this (cn.mops)
_PLOIDY_ZERO = 0.05


# --------------------------------------------------------------------------------------------
# numba kernels (Y is a regions x samples block of any memory layout)


@njit(cache=True)
def _silent_rows(Y):
    """(silent, any_nonzero): silent[i] iff every Y[i, k] < 1; any_nonzero iff some Y != 0."""
    r, g = Y.shape
    silent = np.ones(r, dtype=np.bool_)
    any_nonzero = False
    for k in range(g):
        for i in range(r):
            y = Y[i, k]
            if y != 0.0:
                any_nonzero = True
                if y >= _SILENT_BELOW:
                    silent[i] = False
    return silent, any_nonzero


@njit(cache=True)
def _col_means(Y, keep, n_keep):
    """Per-column mean of the rows with keep[i]; shape (g,)."""
    r, g = Y.shape
    out = np.empty(g)
    for k in range(g):
        s = 0.0
        for i in range(r):
            if keep[i]:
                s += Y[i, k]
        out[k] = s / n_keep
    return out


@njit(cache=True)
def _gather(Y, keep, n_keep, k, buf):
    j = 0
    for i in range(Y.shape[0]):
        if keep[i]:
            buf[j] = Y[i, k]
            j += 1
    return j


@njit(cache=True)
def _col_medians(Y, keep, n_keep):
    """R's median of every column over the rows with keep[i]; shape (g,)."""
    g = Y.shape[1]
    out = np.empty(g)
    buf = np.empty(n_keep)
    for k in range(g):
        _gather(Y, keep, n_keep, k, buf)
        out[k] = median_inplace(buf, n_keep)
    return out


@njit(cache=True)
def _quantile7_select(buf, n, p):
    """R's type-7 quantile of buf[0:n] by selection (reorders buf)."""
    lo = int(math.floor((n - 1) * p))
    select_kth(buf, n, lo)
    if lo + 1 < n:
        nxt = lo + 1
        for i in range(lo + 2, n):  # after selection every value right of lo is >= buf[lo]
            if buf[i] < buf[nxt]:
                nxt = i
        t = buf[lo + 1]
        buf[lo + 1] = buf[nxt]
        buf[nxt] = t
    return quantile7_sorted(buf, n, p)


@njit(cache=True)
def _col_quantiles(Y, keep, n_keep, p):
    """R's type-7 quantile p of every column over the rows with keep[i]; shape (g,)."""
    g = Y.shape[1]
    out = np.empty(g)
    buf = np.empty(n_keep)
    for k in range(g):
        _gather(Y, keep, n_keep, k, buf)
        out[k] = _quantile7_select(buf, n_keep, p)
    return out


@njit(cache=True)
def _variance_to_mean(Y, keep, n_keep, f):
    """var(row)/mean(row) (var with denominator g-1) of every kept row of Y scaled by f; (n_keep,)."""
    r, g = Y.shape
    out = np.empty(n_keep)
    z = np.empty(g)
    j = 0
    for i in range(r):
        if not keep[i]:
            continue
        s = 0.0
        for k in range(g):
            z[k] = Y[i, k] * f[k]
            s += z[k]
        mean = s / g
        c = 0.0
        for k in range(g):  # R's mean(): second pass corrects the first
            c += z[k] - mean
        mean += c / g
        ss = 0.0
        for k in range(g):
            d = z[k] - mean
            ss += d * d
        out[j] = (ss / (g - 1)) / mean
        j += 1
    return out


@njit(cache=True)
def _scale_block(Y, f, silent):
    """In place: Y[:, k] *= f[k]; silent rows set to 0."""
    r, g = Y.shape
    for k in range(g):
        fk = f[k]
        for i in range(r):
            Y[i, k] = 0.0 if silent[i] else Y[i, k] * fk


@njit(cache=True)
def _coverage_mean(x, lo, hi):
    """Mean of the x strictly between lo and hi (NaN if none)."""
    s = 0.0
    n = 0
    for i in range(x.shape[0]):
        v = x[i]
        if lo < v < hi:
            s += v
            n += 1
    return s / n if n > 0 else np.nan


# --------------------------------------------------------------------------------------------
# input checks


def _count_matrix(X, what: str = "read count matrix") -> np.ndarray:
    """X as a new float64 (m, N) order-F matrix; InputError for non-numeric, NA or infinite values."""
    arr = np.asarray(X)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise InputError(f"The {what} contains non-numeric values; every read count must be a number.")
    if arr.ndim != 2:
        raise InputError(f"The {what} must be two-dimensional (regions x samples), got {arr.ndim} dimension(s).")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InputError(f"The {what} is empty ({arr.shape[0]} regions x {arr.shape[1]} samples).")
    out = np.array(arr, dtype=np.float64, order="F", copy=True)
    if np.isnan(out).any():
        k = int(np.flatnonzero(np.isnan(out).any(axis=0))[0])
        raise InputError(f"NAs in readcount matrix. Sample {k + 1} (and maybe others) has missing read counts; "
                         "remove or fill them before normalizing.")
    if np.isinf(out).any():
        k = int(np.flatnonzero(np.isinf(out).any(axis=0))[0])
        raise InputError(f"Infinite values in readcount matrix (sample {k + 1}); read counts must be finite.")
    return out


def _check_choice(value, allowed: Sequence[str], name: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise InputError(f"{name} must be one of {', '.join(repr(a) for a in allowed)}; got {value!r}.")
    return value


def _check_prob(value, name: str) -> float:
    try:
        p = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number between 0 and 1; got {value!r}.") from None
    if not 0.0 <= p <= 1.0:
        raise InputError(f"{name} must be a number between 0 and 1; got {value!r}.")
    return p


def _chromosome_rows(chr, m: int) -> list[tuple[str, slice | np.ndarray]]:
    """(name, rows) per chromosome in order of first appearance; rows a slice when contiguous."""
    if chr is None:
        return [(UNDEF_CHROMOSOME, slice(0, m))]
    arr = np.asarray(chr, dtype=object).ravel() if not isinstance(chr, str) else np.array([chr], dtype=object)
    if arr.size != m:
        raise InputError(f"The chromosome vector has {arr.size} entries but the read count matrix has {m} rows; "
                         "give one chromosome name per region (row).")
    codes, uniques = pd.factorize(arr, use_na_sentinel=True)
    if (codes < 0).any():
        i = int(np.flatnonzero(codes < 0)[0])
        raise InputError(f"The chromosome of region {i + 1} is missing (NA); every region needs a chromosome name.")
    if len(uniques) == 1:
        return [(str(uniques[0]), slice(0, m))]
    order = np.argsort(codes, kind="stable")
    ends = np.cumsum(np.bincount(codes, minlength=len(uniques)))
    out = []
    start = 0
    for c, end in enumerate(ends):
        rows = order[start:end]
        if rows[-1] - rows[0] + 1 == rows.size:
            out.append((str(uniques[c]), slice(int(rows[0]), int(rows[-1]) + 1)))
        else:
            out.append((str(uniques[c]), rows))
        start = end
    return out


def _check_ploidy(ploidy, n_samples: int) -> np.ndarray:
    """Ploidy per sample as float64 (N,) after cn.mops's rules (all equal -> 2; 0 -> 0.05)."""
    if ploidy is None:
        return np.full(n_samples, 2.0)
    p = np.asarray(ploidy)
    if p.ndim == 0:
        p = p.reshape(1)
    p = p.ravel()
    if p.size != n_samples:
        raise InputError(f"The ploidy vector has {p.size} entries but there are {n_samples} samples; "
                         "give one ploidy (copy number of the normal genome) per sample.")
    if p.dtype == object or not (np.issubdtype(p.dtype, np.number) or p.dtype == np.bool_):
        raise InputError("Ploidy values must be whole numbers (e.g. 2 for diploid samples).")
    pf = p.astype(np.float64)
    if not np.isfinite(pf).all() or (pf != np.round(pf)).any() or (pf < 0).any():
        raise InputError(f"Ploidy values must be non-negative whole numbers; got {p.tolist()}.")
    if (pf == pf[0]).all():
        return np.full(n_samples, 2.0)
    if not (pf >= 2).any():
        raise InputError("At least one sample with ploidy 2 or more is needed to normalize samples of "
                         f"different ploidy; got {p.tolist()}.")
    if not (pf == 2).any():
        raise InputError("Samples of different ploidy are scaled against the diploid samples: at least one "
                         f"sample must have ploidy 2; got {p.tolist()}.")
    pf[pf == 0] = _PLOIDY_ZERO
    return pf


# --------------------------------------------------------------------------------------------
# size factors and scaling factors


def _most_frequent_nonzero(values: np.ndarray) -> float:
    """Most frequent non-zero value (ties: the smallest); NaN if there is none."""
    nz = values[values != 0]
    if nz.size == 0:
        return math.nan
    lo, hi = float(nz.min()), float(nz.max())
    if hi - lo < 1e7 and (nz == np.floor(nz)).all():  # whole numbers: counting is faster than sorting
        counts = np.bincount((nz - lo).astype(np.int64))
        return lo + float(np.argmax(counts))
    uniq, counts = np.unique(nz, return_counts=True)
    return float(uniq[int(np.argmax(counts))])


def _size_factors(Y, keep, n_keep, norm_type, size_factor, qu_size_factor) -> np.ndarray:
    if size_factor == "mean":
        return _col_means(Y, keep, n_keep)
    if size_factor == "median" or norm_type == "poisson":
        return _col_medians(Y, keep, n_keep)
    if size_factor == "quant":
        return _col_quantiles(Y, keep, n_keep, qu_size_factor)
    # mode
    return np.array([_most_frequent_nonzero(np.asarray(Y[:, k])[keep]) for k in range(Y.shape[1])])


def _poisson_mode(Y, keep, n_keep, f) -> float:
    """Mode of the variance-to-mean ratios of the kept rows of Y * f (R density, from 0 to their 95% quantile)."""
    v = _variance_to_mean(Y, keep, n_keep, f)
    v = v[~np.isnan(v)]
    if v.size < 2:
        return math.nan
    lo = int(math.floor((v.size - 1) * 0.95))
    part = np.partition(v, [lo, lo + 1] if lo + 1 < v.size else [lo])
    u = float(quantile7_sorted(part, v.size, 0.95))
    return density_mode(v, 0.0, u, u * 100.0)


def _block_factors(Y, silent, chrom, sample_idx, colsums, norm_type, size_factor, qu, qu_size_factor):
    """Scaling factor per column of one chromosome block (cn.mops's per-chromosome step); (g,)."""
    keep = ~silent
    n_keep = int(np.count_nonzero(keep))
    g = Y.shape[1]
    if n_keep <= 1:
        warnings.warn(f"Chromosome {chrom}: not enough regions with reads (at most one) for normalization; "
                      "its read counts are not normalized.", RuntimeWarning, stacklevel=4)
        return np.ones(g)
    sf = _size_factors(Y, keep, n_keep, norm_type, size_factor, qu_size_factor)
    if np.isnan(sf).any():
        warnings.warn(f"Chromosome {chrom}: some size factors could not be computed (a sample without non-zero "
                      "counts); the total read counts of the samples are used instead.",
                      RuntimeWarning, stacklevel=4)
        sf = colsums.copy()
    if (sf == 0).any():
        bad = [int(sample_idx[k]) + 1 for k in np.flatnonzero(sf == 0)]
        raise InputError(f"Some normalization factors are zero! Sample(s) {bad} have size factor 0 on chromosome "
                         f"{chrom} (sizeFactor={size_factor!r}). Remove samples or regions without reads, or use "
                         "another sizeFactor.")
    if norm_type == "mean":
        f = np.mean(sf) / sf
    elif norm_type == "median":
        f = r_median(sf) / sf
    elif norm_type == "quant":
        f = r_quantile(sf, qu) / sf
    elif norm_type == "mode":
        f = _most_frequent_nonzero(np.asarray(Y)[keep].ravel()) / sf
    else:  # poisson
        f = np.mean(sf) / sf
        mode = _poisson_mode(Y, keep, n_keep, f)
        if math.isfinite(mode):
            f = f / mode
    if not np.isfinite(f).all():
        warnings.warn(f"Chromosome {chrom}: normalization factors are not finite; its read counts are not "
                      "normalized.", RuntimeWarning, stacklevel=4)
        f = np.ones(g)
    return f


def _normalize_group(out, cols, blocks, colsums, norm_type, size_factor, qu, qu_size_factor, silent_state):
    """Normalize columns ``cols`` of ``out`` in place, chromosome by chromosome.

    Returns the silent-row mask (over that chromosome's rows) of the last chromosome processed, or
    ``silent_state`` if no chromosome was processed (every block all zero).
    """
    all_cols = cols.size == out.shape[1]
    for chrom, rows in blocks:
        in_place = isinstance(rows, slice) and all_cols
        if in_place:
            Y = out[rows]
        elif isinstance(rows, slice):
            Y = np.asfortranarray(out[rows][:, cols])
        else:
            Y = np.asfortranarray(out[np.ix_(rows, cols)])
        silent, any_nonzero = _silent_rows(Y)
        if not any_nonzero:
            continue
        f = _block_factors(Y, silent, chrom, cols, colsums[cols], norm_type, size_factor, qu, qu_size_factor)
        _scale_block(Y, f, silent)
        if not in_place:
            if isinstance(rows, slice):
                out[rows, cols] = Y
            else:
                out[np.ix_(rows, cols)] = Y
        silent_state = silent
    return silent_state


def _group_median(out, cols, silent_state) -> float:
    """Median of the normalized values of columns ``cols`` outside the "silent" rows.

    cn.mops quirk, reproduced: the silent-row mask is the one of the last chromosome processed,
    applied to the whole matrix by R's recycling of a short logical index.
    """
    if silent_state is None or not silent_state.any():
        return r_median(out[:, cols])
    keep = ~np.resize(silent_state, out.shape[0])
    return r_median(out[np.ix_(keep, cols)])


# --------------------------------------------------------------------------------------------
# public API


def normalize_chromosomes(X, chr=None, norm_type: str = "poisson", size_factor: str = "mean", qu: float = 0.25,
                          qu_size_factor: float = 0.75, ploidy=None) -> np.ndarray:
    """cn.mops ``normalizeChromosomes``: scale each sample's read counts to a common coverage.

    ``X``: read counts, (m regions, N samples), any numeric dtype. ``chr``: chromosome name per row
    (m,), default all "undef"; rows of one chromosome need not be contiguous. ``norm_type``: mean,
    median, poisson, mode or quant; ``size_factor``: mean, median, quant or mode; ``qu``: quantile of
    the size factors for ``norm_type="quant"``; ``qu_size_factor``: per-sample quantile for
    ``size_factor="quant"``. ``ploidy``: whole number per sample (default 2). Returns a new float64
    (m, N) matrix in column-major order. cn.mops's warnings are RuntimeWarnings; bad input raises
    InputError.
    """
    norm_type = _check_choice(norm_type, NORM_TYPES, "normType")
    size_factor = _check_choice(size_factor, SIZE_FACTORS, "sizeFactor")
    qu = _check_prob(qu, "qu (normQu)")
    qu_size_factor = _check_prob(qu_size_factor, "quSizeFactor")
    out = _count_matrix(X)
    m, n = out.shape
    blocks = _chromosome_rows(chr, m)
    ploidy_v = _check_ploidy(ploidy, n)
    colsums = out.sum(axis=0)
    if (colsums == 0).any():
        bad = [int(k) + 1 for k in np.flatnonzero(colsums == 0)]
        raise InputError(f"Zero columns in readcount matrix. Sample(s) {bad} have no reads at all; remove them.")
    groups = [2.0] + [p for p in pd.unique(ploidy_v) if p != 2.0]
    if len(groups) == 1:
        _normalize_group(out, np.arange(n), blocks, colsums, norm_type, size_factor, qu, qu_size_factor, None)
        return out
    # several ploidies: each group normalized on its own, then scaled to the diploid group's median
    silent_state = None
    ref = math.nan
    for gi, p in enumerate(groups):
        cols = np.flatnonzero(ploidy_v == p)
        if cols.size > 1:  # cn.mops leaves a group of one sample as it is
            silent_state = _normalize_group(out, cols, blocks, colsums, norm_type, size_factor, qu,
                                            qu_size_factor, silent_state)
        med = _group_median(out, cols, silent_state)
        if gi == 0:
            ref = med
            continue
        block = out[:, cols]
        if ref == 0 and med == 0:
            block = block * p / 2.0
        else:
            if med == 0:
                warnings.warn(f"Samples of ploidy {p:g} have median 0 after normalization; their values "
                              "become infinite.", RuntimeWarning, stacklevel=2)
            with np.errstate(divide="ignore", invalid="ignore"):
                block = block * ref / med * p / 2.0  # cn.mops's order of operations, bit for bit
        out[:, cols] = block
    return out


def normalize_genome(X, norm_type: str = "poisson", size_factor: str = "mean", qu: float = 0.25,
                     qu_size_factor: float = 0.75, ploidy=None) -> np.ndarray:
    """cn.mops ``normalizeGenome``: :func:`normalize_chromosomes` with all rows on one chromosome.

    Shapes and memory order as in :func:`normalize_chromosomes`.
    """
    return normalize_chromosomes(X, None, norm_type=norm_type, size_factor=size_factor, qu=qu,
                                 qu_size_factor=qu_size_factor, ploidy=ploidy)


def sample_coverage(X) -> np.ndarray:
    """Per-sample coverage of cn.mops ``norm=2``; (N,) float64.

    For each column: the mean of the values strictly between its 5% and 95% quantiles (type 7),
    divided by the median over samples of those means.
    """
    x = _count_matrix(X)
    m, n = x.shape
    lo5 = int(math.floor((m - 1) * 0.05))
    lo95 = int(math.floor((m - 1) * 0.95))
    kth = sorted({lo5, min(lo5 + 1, m - 1), lo95, min(lo95 + 1, m - 1)})
    cov = np.empty(n)
    for k in range(n):
        col = x[:, k]
        part = np.partition(col, kth)
        q05 = quantile7_sorted(part, m, 0.05)
        q95 = quantile7_sorted(part, m, 0.95)
        cov[k] = _coverage_mean(col, q05, q95)
    if np.isnan(cov).any():
        bad = [int(k) + 1 for k in np.flatnonzero(np.isnan(cov))]
        raise InputError(f"Coverage of sample(s) {bad} is undefined: no read count lies strictly between the "
                         "sample's 5% and 95% quantiles (too few regions or constant counts).")
    med = r_median(cov)
    if med == 0:
        raise InputError("Median of the coverages is zero! Most samples have (almost) no reads; check the input.")
    return cov / med
