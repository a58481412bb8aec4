"""cn.mops's read-count normalization: ``normalizeChromosomes``, ``normalizeGenome`` and the
per-sample coverage used by ``norm=2`` (spec part 1, sections 1 and 3).

Matrices are regions x samples (m, N); results are float64 in column-major order (``order="F"``,
region-fastest, the memory order of an R matrix). Work is per chromosome block and per sample
column; the loops over rows run in numba (in parallel where it pays: order statistics per
column, variance-to-mean ratios per row).
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from numba import njit, prange

from ..exact.density import density_mode, quantiles7
from ..errors import InputError
from ..exact.rstats import (ld_add_ld, ld_div, ld_mean, quantile7_low_index, quantile7_sorted, r_median, r_quantile, select_kth)

__all__ = ["NORM_TYPES", "SIZE_FACTORS", "normalize_chromosomes", "normalize_genome", "sample_coverage", "coverage_ratios"]

NORM_TYPES = ("mean", "median", "poisson", "mode", "quant")
SIZE_FACTORS = ("mean", "median", "quant", "mode")

UNDEF_CHROMOSOME = "undef"
#: rows whose every value is below this are "silent" (no reads)
_SILENT_BELOW = 1.0
#: ploidy 0 is replaced by this (cn.mops)
_PLOIDY_ZERO = 0.05
#: whole-number data (read counts) spanning fewer values than this (and not many more than their
#: number) get order statistics and modes by counting instead of selection
_COUNTING_RANGE = 1 << 22


# --------------------------------------------------------------------------------------------
# numba kernels. A chromosome block is Y[r0:r0 + len(keep), :] of an F-ordered matrix Y (the whole
# output matrix, or a copy of the block): every kernel sees one memory layout, so it compiles once.
# keep[i]: row r0 + i is used. Sums run in row order, so results do not depend on the thread count.


@njit(cache=True)
def _silent_rows(Y, r0, r1):
    """(silent, any_nonzero) of rows r0:r1: silent[i] iff every Y[r0+i, k] < 1; any_nonzero iff some != 0."""
    g = Y.shape[1]
    silent = np.ones(r1 - r0, dtype=np.bool_)
    any_nonzero = False
    for k in range(g):
        for i in range(r0, r1):
            y = Y[i, k]
            if y != 0.0:
                any_nonzero = True
                if y >= _SILENT_BELOW:
                    silent[i - r0] = False
    return silent, any_nonzero


@njit(cache=True)
def _col_means(Y, r0, keep, n_keep):
    """Per-column mean of the kept rows, rounded once as R's long-double colMeans; (g,)."""
    g = Y.shape[1]
    out = np.empty(g)
    for k in range(g):
        hi = 0.0
        lo = 0.0
        for i in range(keep.shape[0]):
            if keep[i]:
                hi, lo = ld_add_ld(hi, lo, Y[r0 + i, k], 0.0)
        out[k] = ld_div(hi, lo, float(n_keep))[0]
    return out


@njit(cache=True)
def _order_stats(buf, n, ranks, out):
    """out[j] = the ranks[j]-th smallest (0-based) of buf[0:n]; ranks ascending. May reorder buf.

    Whole numbers in a modest range (read counts) are counted; anything else is selected.
    """
    lo = np.inf
    hi = -np.inf
    whole = True
    for i in range(n):
        v = buf[i]
        lo = min(lo, v)
        hi = max(hi, v)
        if whole and v != math.floor(v):
            whole = False
    if whole and hi - lo < min(_COUNTING_RANGE, 4 * n + 1024):
        counts = np.zeros(int(hi - lo) + 1, dtype=np.int64)
        for i in range(n):
            counts[int(buf[i] - lo)] += 1
        seen = 0
        b = 0
        for j in range(ranks.shape[0]):
            while seen + counts[b] <= ranks[j]:
                seen += counts[b]
                b += 1
            out[j] = lo + b
    else:
        for j in range(ranks.shape[0]):
            out[j] = select_kth(buf, n, ranks[j])


@njit(cache=True)
def _median_of(buf, n):
    """R's median of buf[0:n] (mean of the two middle values for even n); may reorder buf."""
    half = n // 2
    v = np.empty(2)
    if n % 2 == 1:
        _order_stats(buf, n, np.array([half]), v)
        return v[0]
    _order_stats(buf, n, np.array([half - 1, half]), v)
    return (v[0] + v[1]) / 2.0


@njit(cache=True)
def _quantile7_of(buf, n, p):
    """R's type-7 quantile p of buf[0:n]; may reorder buf (its values stay the same multiset)."""
    lo = quantile7_low_index(n, p)
    hi = min(lo + 1, n - 1)
    v = np.empty(2)
    _order_stats(buf, n, np.array([lo, hi]), v)
    keep_lo = buf[lo]
    keep_hi = buf[hi]
    buf[lo] = v[0]  # quantile7_sorted reads only these two positions
    buf[hi] = v[1]
    q = quantile7_sorted(buf, n, p)
    buf[hi] = keep_hi
    buf[lo] = keep_lo
    return q


@njit(cache=True, parallel=True)
def _col_order_stats(Y, r0, keep, n_keep, p, median):
    """Per column over the kept rows: R's median (median=True) or type-7 quantile p; (g,)."""
    g = Y.shape[1]
    out = np.empty(g)
    for k in prange(g):
        buf = np.empty(n_keep)
        j = 0
        for i in range(keep.shape[0]):
            if keep[i]:
                buf[j] = Y[r0 + i, k]
                j += 1
        if median:
            out[k] = _median_of(buf, n_keep)
        else:
            out[k] = _quantile7_of(buf, n_keep, p)
    return out


@njit(cache=True)
def _pooled_median(X, keep, n_keep, cols):
    """R's median of all values X[keep rows, cols]."""
    buf = np.empty(n_keep * cols.shape[0])
    j = 0
    for c in range(cols.shape[0]):
        k = cols[c]
        for i in range(X.shape[0]):
            if keep[i]:
                buf[j] = X[i, k]
                j += 1
    return _median_of(buf, j)


@njit(cache=True)
def _nonzero_range(Y, r0, keep, c0, c1):
    """Over the kept rows of columns c0:c1: (number of non-zero values, their min, max, all whole numbers)."""
    lo = np.inf
    hi = -np.inf
    whole = True
    cnt = 0
    for k in range(c0, c1):
        for i in range(keep.shape[0]):
            if keep[i]:
                y = Y[r0 + i, k]
                if y != 0.0:
                    cnt += 1
                    lo = min(lo, y)
                    hi = max(hi, y)
                    if whole and y != math.floor(y):
                        whole = False
    return cnt, lo, hi, whole


@njit(cache=True)
def _whole_number_mode(Y, r0, keep, c0, c1, lo, size):
    """Most frequent non-zero whole number in the kept rows of columns c0:c1 (ties: the smallest)."""
    counts = np.zeros(size, dtype=np.int64)
    for k in range(c0, c1):
        for i in range(keep.shape[0]):
            if keep[i]:
                y = Y[r0 + i, k]
                if y != 0.0:
                    counts[int(y - lo)] += 1
    best = 0
    for j in range(size):
        if counts[j] > counts[best]:
            best = j
    return lo + best


@njit(cache=True, parallel=True)
def _variance_to_mean(Y, rows, f):
    """var/mean (var with denominator g-1) of each row ``rows[j]`` of Y scaled by f; (len(rows),)."""
    g = Y.shape[1]
    n = rows.shape[0]
    out = np.empty(n)
    chunk = 4096
    for c in prange((n + chunk - 1) // chunk):
        z = np.empty(g)
        for j in range(c * chunk, min(n, (c + 1) * chunk)):
            i = rows[j]
            s = 0.0
            for k in range(g):
                z[k] = Y[i, k] * f[k]
                s += z[k]
            mean = s / g
            corr = 0.0
            for k in range(g):  # as R's mean(): a second pass corrects the first
                corr += z[k] - mean
            mean += corr / g
            ss = 0.0
            for k in range(g):
                d = z[k] - mean
                ss += d * d
            out[j] = (ss / (g - 1)) / mean
    return out


@njit(cache=True)
def _scale_block(Y, r0, f, silent):
    """In place: Y[r0 + i, k] *= f[k]; silent rows set to 0."""
    g = Y.shape[1]
    for k in range(g):
        fk = f[k]
        for i in range(silent.shape[0]):
            Y[r0 + i, k] = 0.0 if silent[i] else Y[r0 + i, k] * fk


@njit(cache=True)
def _all_finite(X):
    r, g = X.shape
    for k in range(g):
        for i in range(r):
            if not math.isfinite(X[i, k]):
                return False
    return True


@njit(cache=True, parallel=True)
def _coverages(X):
    """Per column: mean of the values strictly between its type-7 5% and 95% quantiles (NaN if none)."""
    m, g = X.shape
    out = np.empty(g)
    for k in prange(g):
        buf = X[:, k].copy()
        q05 = _quantile7_of(buf, m, 0.05)
        q95 = _quantile7_of(buf, m, 0.95)
        cnt = 0
        for i in range(m):  # buf is free again: gather the values between the quantiles
            v = X[i, k]
            if q05 < v < q95:
                buf[cnt] = v
                cnt += 1
        out[k] = ld_mean(buf, cnt) if cnt > 0 else np.nan  # R's mean()
    return out


# --------------------------------------------------------------------------------------------
# input checks


def _count_matrix(X, what: str = "read count matrix") -> np.ndarray:
    """X as a new float64 (m, N) order-F matrix; InputError for non-numeric, NA or infinite values."""
    arr = np.asarray(X)
    if arr.dtype == object or np.iscomplexobj(arr) or not (np.issubdtype(arr.dtype, np.number)
                                                          or arr.dtype == np.bool_):
        raise InputError(f"The {what} contains non-numeric values; every read count must be a number.")
    if arr.ndim != 2:
        raise InputError(f"The {what} must be two-dimensional (regions x samples), got {arr.ndim} dimension(s).")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InputError(f"The {what} is empty ({arr.shape[0]} regions x {arr.shape[1]} samples).")
    out = np.array(arr, dtype=np.float64, order="F", copy=True)
    if np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_ or _all_finite(out):
        return out
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
# size factors and scaling factors of one chromosome block Y[r0:r0 + len(keep)]


def _most_frequent_nonzero(Y, r0, keep, c0: int, c1: int) -> float:
    """Most frequent non-zero value of the kept rows of columns c0:c1 (ties: the smallest); NaN if none."""
    cnt, lo, hi, whole = _nonzero_range(Y, r0, keep, c0, c1)
    if cnt == 0:
        return math.nan
    if whole and hi - lo < min(_COUNTING_RANGE, 4 * cnt + 1024):
        return float(_whole_number_mode(Y, r0, keep, c0, c1, lo, int(hi - lo) + 1))
    vals = Y[r0:r0 + keep.size, c0:c1][keep].ravel()
    uniq, counts = np.unique(vals[vals != 0], return_counts=True)
    return float(uniq[int(np.argmax(counts))])


def _size_factors(Y, r0, keep, n_keep, norm_type, size_factor, qu_size_factor) -> np.ndarray:
    if size_factor == "mean":
        return _col_means(Y, r0, keep, n_keep)
    if size_factor == "median" or norm_type == "poisson":
        return _col_order_stats(Y, r0, keep, n_keep, 0.5, True)
    if size_factor == "quant":
        return _col_order_stats(Y, r0, keep, n_keep, qu_size_factor, False)
    # mode
    return np.array([_most_frequent_nonzero(Y, r0, keep, k, k + 1) for k in range(Y.shape[1])])


def _poisson_mode(Y, r0, keep, f) -> float:
    """Mode of the variance-to-mean ratios of the kept rows scaled by f (R density, 0 to their 95% quantile)."""
    v = _variance_to_mean(Y, r0 + np.flatnonzero(keep), f)
    v = v[~np.isnan(v)]
    if v.size < 2:
        return math.nan
    (u,) = quantiles7(v, (0.95,))
    return density_mode(v, 0.0, u, u * 100.0)


def _too_few_regions(n_keep: int, chrom, stacklevel: int) -> bool:
    """True (with cn.mops's warning) when at most one region of the chromosome has reads: not normalized."""
    if n_keep > 1:
        return False
    warnings.warn(f"Chromosome {chrom}: not enough regions with reads (at most one) for normalization; "
                  "its read counts are not normalized.", RuntimeWarning, stacklevel=stacklevel + 1)
    return True


def _checked_size_factors(sf, colsums, chrom, size_factor, stacklevel: int, sample_idx=None) -> np.ndarray:
    """A chromosome's size factors as cn.mops uses them: the samples' total counts where one is NaN (with a
    warning); an error naming the samples where one is zero (``sample_idx``: the columns' 0-based sample
    numbers, if not 0, 1, ...)."""
    if np.isnan(sf).any():
        warnings.warn(f"Chromosome {chrom}: some size factors could not be computed (a sample without non-zero "
                      "counts); the total read counts of the samples are used instead.",
                      RuntimeWarning, stacklevel=stacklevel + 1)
        sf = colsums.copy()
    if (sf == 0).any():
        zero = np.flatnonzero(sf == 0)
        bad = [int(k) + 1 for k in (zero if sample_idx is None else np.asarray(sample_idx)[zero])]
        raise InputError(f"Some normalization factors are zero! Sample(s) {bad} have size factor 0 on chromosome "
                         f"{chrom} (sizeFactor={size_factor!r}). Remove samples or regions without reads, or use "
                         "another sizeFactor.")
    return sf


def _finite_or_ones(f, chrom, g: int, stacklevel: int) -> np.ndarray:
    """``f``, or ones (with cn.mops's warning) when a factor is not finite."""
    if np.isfinite(f).all():
        return f
    warnings.warn(f"Chromosome {chrom}: normalization factors are not finite; its read counts are not "
                  "normalized.", RuntimeWarning, stacklevel=stacklevel + 1)
    return np.ones(g)


def _block_factors(Y, r0, silent, chrom, sample_idx, colsums, norm_type, size_factor, qu, qu_size_factor):
    """Scaling factor per column of one chromosome block (cn.mops's per-chromosome step); (g,)."""
    keep = ~silent
    n_keep = int(np.count_nonzero(keep))
    g = Y.shape[1]
    if _too_few_regions(n_keep, chrom, stacklevel=5):
        return np.ones(g)
    sf = _size_factors(Y, r0, keep, n_keep, norm_type, size_factor, qu_size_factor)
    sf = _checked_size_factors(sf, colsums, chrom, size_factor, stacklevel=5, sample_idx=sample_idx)
    if norm_type == "mean":
        f = ld_mean(sf, sf.size) / sf  # R: mean(sf) in long double
    elif norm_type == "median":
        f = r_median(sf) / sf
    elif norm_type == "quant":
        f = r_quantile(sf, qu) / sf
    elif norm_type == "mode":
        f = _most_frequent_nonzero(Y, r0, keep, 0, g) / sf
    else:  # poisson
        f = ld_mean(sf, sf.size) / sf  # R: mean(sf) in long double
        mode = _poisson_mode(Y, r0, keep, f)
        if math.isfinite(mode):
            f = f / mode
    return _finite_or_ones(f, chrom, g, stacklevel=5)


def _normalize_group(out, cols, blocks, colsums, norm_type, size_factor, qu, qu_size_factor, silent_state):
    """Normalize columns ``cols`` of ``out`` in place, chromosome by chromosome.

    Returns the silent-row mask (over that chromosome's rows) of the last chromosome processed, or
    ``silent_state`` if no chromosome was processed (every block all zero).
    """
    all_cols = cols.size == out.shape[1]
    for chrom, rows in blocks:
        in_place = isinstance(rows, slice) and all_cols
        if in_place:  # work on the output matrix itself
            Y, r0, r1 = out, rows.start, rows.stop
        else:
            Y = np.asfortranarray(out[rows][:, cols] if isinstance(rows, slice) else out[np.ix_(rows, cols)])
            r0, r1 = 0, Y.shape[0]
        silent, any_nonzero = _silent_rows(Y, r0, r1)
        if not any_nonzero:
            continue
        f = _block_factors(Y, r0, silent, chrom, cols, colsums[cols], norm_type, size_factor, qu, qu_size_factor)
        _scale_block(Y, r0, f, silent)
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
    if silent_state is None:
        keep = np.ones(out.shape[0], dtype=np.bool_)
    else:
        keep = ~np.resize(silent_state, out.shape[0])
    n_keep = int(np.count_nonzero(keep))
    if n_keep == 0:
        return math.nan
    return float(_pooled_median(out, keep, n_keep, cols.astype(np.int64)))


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
        if n > 1:  # cn.mops returns a single sample unchanged
            _normalize_group(out, np.arange(n), blocks, colsums, norm_type, size_factor, qu, qu_size_factor,
                             None)
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
    return coverage_ratios(_coverages(_count_matrix(X)))


def coverage_ratios(cov: np.ndarray) -> np.ndarray:
    """Per-sample trimmed means (N,) divided by their median (cn.mops ``norm=2``'s last step), with its errors."""
    if np.isnan(cov).any():
        bad = [int(k) + 1 for k in np.flatnonzero(np.isnan(cov))]
        raise InputError(f"Coverage of sample(s) {bad} is undefined: no read count lies strictly between the "
                         "sample's 5% and 95% quantiles (too few regions or constant counts).")
    med = r_median(cov)
    if med == 0:
        raise InputError("Median of the coverages is zero! Most samples have (almost) no reads; check the input.")
    return cov / med
