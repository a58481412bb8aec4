"""cn.mops's normalization arithmetic on the host: the one home of each formula, imported by the CPU path
(cpu.py) and the GPU path (gpu.py), so that both compute the same numbers in the same order.

Per chromosome block: the size factor of each sample (``size_factors``; from exact column sums on the GPU,
``means_of_exact_sums``), checked (``too_few_regions``, ``checked_size_factors``), turned into scaling factors
(``scaling_factors``: mean / median / quantile / mode of the size factors over each one), for normType
"poisson" divided by the density mode of the rows' variance-to-mean ratios (``ratios_mode``,
``divided_by_mode``), and replaced by ones where not finite (``finite_or_ones``). The coverages of ``norm=2``
end in ``coverage_ratios``. cn.mops's warnings are RuntimeWarnings; its errors InputErrors.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np

from ..errors import InputError
from ..exact.density import density_mode, quantiles7
from ..exact.rstats import ld_quotients, r_mean, r_median, r_quantile
from .kernels import COUNTING_RANGE, col_means, col_order_stats, nonzero_range, variance_to_mean, whole_number_mode


# --------------------------------------------------------------------------------------------
# size factors of one chromosome block Y[r0:r0 + len(keep)] (keep: the non-silent rows)


def size_factors(Y, r0, keep, n_keep, norm_type, size_factor, qu_size_factor) -> np.ndarray:
    """Per column of Y: the size factor over the kept rows (mean, median, quantile or mode); (g,). With
    normType "poisson" every size factor but "mean" is the median (cn.mops)."""
    if size_factor == "mean":
        return col_means(Y, r0, keep, n_keep)
    if size_factor == "median" or norm_type == "poisson":
        return col_order_stats(Y, r0, keep, n_keep, 0.5, True)
    if size_factor == "quant":
        return col_order_stats(Y, r0, keep, n_keep, qu_size_factor, False)
    # mode
    return np.array([most_frequent_nonzero(Y, r0, keep, k, k + 1) for k in range(Y.shape[1])])


def means_of_exact_sums(sums: np.ndarray, n_keep: int) -> np.ndarray:
    """Size factors "mean" from column sums that are exact in float64 (whole numbers below 2^52): each sum
    divided by ``n_keep`` as R's long-double colMeans rounds it (= kernels.col_means on those columns)."""
    return ld_quotients(sums, n_keep)


# --------------------------------------------------------------------------------------------
# modes: of the non-zero values (normType / sizeFactor "mode") and of the variance-to-mean ratios (poisson)


def nonzero_histogram(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct non-zero values ascending, their counts) of ``values``."""
    return np.unique(values[values != 0], return_counts=True)


def mode_of_histogram(values: np.ndarray, counts: np.ndarray) -> float:
    """The most frequent of ``values`` (ascending; ties: the smallest); NaN if there is none."""
    if values.size == 0:
        return math.nan
    return float(values[int(np.argmax(counts))])


def most_frequent_nonzero(Y, r0, keep, c0: int, c1: int) -> float:
    """Most frequent non-zero value of the kept rows of columns c0:c1 (ties: the smallest); NaN if none."""
    cnt, lo, hi, whole = nonzero_range(Y, r0, keep, c0, c1)
    if cnt == 0:
        return math.nan
    if whole and hi - lo < min(COUNTING_RANGE, 4 * cnt + 1024):
        return float(whole_number_mode(Y, r0, keep, c0, c1, lo, int(hi - lo) + 1))
    return mode_of_histogram(*nonzero_histogram(Y[r0:r0 + keep.size, c0:c1][keep].ravel()))


def block_variance_to_mean(Y, r0, keep, f) -> np.ndarray:
    """Variance-to-mean ratios of the kept rows of the block Y[r0:r0 + len(keep)] scaled by f, in row order."""
    return variance_to_mean(Y, r0 + np.flatnonzero(keep), f)


def ratios_mode(v: np.ndarray) -> float:
    """cn.mops's poisson step on a chromosome's variance-to-mean ratios (row order): NaNs dropped, R's density
    mode between 0 and their 95% quantile (type 7); NaN with fewer than two ratios."""
    v = v[~np.isnan(v)]
    if v.size < 2:
        return math.nan
    (u,) = quantiles7(v, (0.95,))
    return density_mode(v, 0.0, u, u * 100.0)


# --------------------------------------------------------------------------------------------
# checks and scaling factors of one chromosome


def too_few_regions(n_keep: int, chrom, stacklevel: int) -> bool:
    """True (with cn.mops's warning) when at most one region of the chromosome has reads: not normalized."""
    if n_keep > 1:
        return False
    warnings.warn(f"Chromosome {chrom}: not enough regions with reads (at most one) for normalization; "
                  "its read counts are not normalized.", RuntimeWarning, stacklevel=stacklevel + 1)
    return True


def checked_size_factors(sf, colsums, chrom, size_factor, stacklevel: int, sample_idx=None) -> np.ndarray:
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


def scaling_factors(sf: np.ndarray, norm_type: str, qu: float | None = None,
                    count_mode: Callable[[], float] | None = None) -> np.ndarray:
    """A chromosome's scaling factors from its (checked) size factors ``sf``: ``reference_size`` / sf. For
    "poisson", ``divided_by_mode`` follows."""
    return reference_size(sf, norm_type, qu, count_mode) / sf


def reference_size(sf: np.ndarray, norm_type: str, qu: float | None = None,
                   count_mode: Callable[[], float] | None = None) -> float:
    """The level a chromosome's samples are scaled to: R's long-double mean of the size factors ``sf`` (normType
    "mean", and "poisson" before its mode), their median, their type-7 quantile ``qu``, or (normType "mode")
    ``count_mode()``: the most frequent non-zero count of the chromosome's kept rows. (Kept by a stored
    reference cohort: new samples are scaled to it, gcnmops.casemode.)"""
    if norm_type in ("mean", "poisson"):
        return r_mean(sf)  # R: mean(sf) in long double
    if norm_type == "median":
        return r_median(sf)
    if norm_type == "quant":
        return r_quantile(sf, qu)
    if norm_type == "mode":
        return count_mode()
    raise ValueError(f"unknown normType {norm_type!r}")


def divided_by_mode(f: np.ndarray, mode: float) -> np.ndarray:
    """normType "poisson": the factors divided by the density mode of the ratios, where that is finite."""
    return f / mode if math.isfinite(mode) else f


def finite_or_ones(f, chrom, g: int, stacklevel: int) -> np.ndarray:
    """``f``, or ones (with cn.mops's warning) when a factor is not finite."""
    if np.isfinite(f).all():
        return f
    warnings.warn(f"Chromosome {chrom}: normalization factors are not finite; its read counts are not "
                  "normalized.", RuntimeWarning, stacklevel=stacklevel + 1)
    return np.ones(g)


# --------------------------------------------------------------------------------------------
# norm=2


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


__all__ = ["size_factors", "means_of_exact_sums", "nonzero_histogram", "mode_of_histogram",
           "most_frequent_nonzero", "block_variance_to_mean", "ratios_mode", "too_few_regions",
           "checked_size_factors", "scaling_factors", "reference_size", "divided_by_mode", "finite_or_ones",
           "coverage_ratios"]
