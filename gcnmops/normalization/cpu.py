"""cn.mops's read-count normalization on the CPU: ``normalizeChromosomes``, ``normalizeGenome`` and the
per-sample coverage used by ``norm=2`` (spec part 1, sections 1 and 3).

Matrices are regions x samples (m, N); results are float64 in column-major order (``order="F"``,
region-fastest, the memory order of an R matrix). Work is per chromosome block and per sample
column: the loops over rows run in numba (kernels.py), the arithmetic that combines their results is
factors.py's and the input checks are checks.py's, the same code the GPU path (gpu.py) runs.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from ..progress import tick
from .checks import check_columns_have_reads, check_norm_args, check_ploidy, chromosome_rows, count_matrix
from .factors import (block_variance_to_mean, checked_size_factors, coverage_ratios, divided_by_mode,
                      finite_or_ones, most_frequent_nonzero, ratios_mode, scaling_factors, size_factors,
                      too_few_regions)
from .kernels import column_coverages, pooled_median, scale_block, silent_rows

__all__ = ["normalize_chromosomes", "normalize_genome", "sample_coverage"]


# --------------------------------------------------------------------------------------------
# one chromosome block Y[r0:r0 + len(silent)], one group of columns


def _block_factors(Y, r0, silent, chrom, sample_idx, colsums, norm_type, size_factor, qu, qu_size_factor):
    """Scaling factor per column of one chromosome block (cn.mops's per-chromosome step); (g,)."""
    keep = ~silent
    n_keep = int(np.count_nonzero(keep))
    g = Y.shape[1]
    if too_few_regions(n_keep, chrom, stacklevel=5):
        return np.ones(g)
    sf = size_factors(Y, r0, keep, n_keep, norm_type, size_factor, qu_size_factor)
    sf = checked_size_factors(sf, colsums, chrom, size_factor, stacklevel=5, sample_idx=sample_idx)
    f = scaling_factors(sf, norm_type, qu, count_mode=lambda: most_frequent_nonzero(Y, r0, keep, 0, g))
    if norm_type == "poisson":
        f = divided_by_mode(f, ratios_mode(block_variance_to_mean(Y, r0, keep, f)))
    return finite_or_ones(f, chrom, g, stacklevel=5)


def _normalize_group(out, cols, blocks, colsums, norm_type, size_factor, qu, qu_size_factor, silent_state):
    """Normalize columns ``cols`` of ``out`` in place, chromosome by chromosome.

    Returns the silent-row mask (over that chromosome's rows) of the last chromosome processed, or
    ``silent_state`` if no chromosome was processed (every block all zero).
    """
    all_cols = cols.size == out.shape[1]
    for k, (chrom, rows) in enumerate(blocks):
        tick(k, len(blocks))  # chromosomes done
        in_place = isinstance(rows, slice) and all_cols
        if in_place:  # work on the output matrix itself
            Y, r0, r1 = out, rows.start, rows.stop
        else:
            Y = np.asfortranarray(out[rows][:, cols] if isinstance(rows, slice) else out[np.ix_(rows, cols)])
            r0, r1 = 0, Y.shape[0]
        silent, any_nonzero = silent_rows(Y, r0, r1)
        if not any_nonzero:
            continue
        f = _block_factors(Y, r0, silent, chrom, cols, colsums[cols], norm_type, size_factor, qu, qu_size_factor)
        scale_block(Y, r0, f, silent)
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
    return float(pooled_median(out, keep, n_keep, cols.astype(np.int64)))


# --------------------------------------------------------------------------------------------
# public API


def normalize_chromosomes(X, chr=None, norm_type: str = "poisson", size_factor: str = "mean", qu: float = 0.25,
                          qu_size_factor: float = 0.75, ploidy=None, colsums=None) -> np.ndarray:
    """cn.mops ``normalizeChromosomes``: scale each sample's read counts to a common coverage.

    ``X``: read counts, (m regions, N samples), any numeric dtype. ``chr``: chromosome name per row
    (m,), default all "undef"; rows of one chromosome need not be contiguous. ``norm_type``: mean,
    median, poisson, mode or quant; ``size_factor``: mean, median, quant or mode; ``qu``: quantile of
    the size factors for ``norm_type="quant"``; ``qu_size_factor``: per-sample quantile for
    ``size_factor="quant"``. ``ploidy``: whole number per sample (default 2). ``colsums``: (N,) the
    samples' total counts over the whole genome when ``X`` holds only some of its chromosomes (the streamed
    pipeline: the zero-column check and the size factors' fall-back are genome-wide); default ``X``'s own
    column sums. Returns a new float64
    (m, N) matrix in column-major order. cn.mops's warnings are RuntimeWarnings; bad input raises
    InputError.
    """
    norm_type, size_factor, qu, qu_size_factor = check_norm_args(norm_type, size_factor, qu, qu_size_factor)
    out = count_matrix(X)
    m, n = out.shape
    blocks = chromosome_rows(chr, m)
    ploidy_v = check_ploidy(ploidy, n)
    colsums = out.sum(axis=0) if colsums is None else np.asarray(colsums, dtype=np.float64)
    check_columns_have_reads(colsums != 0)
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
    return coverage_ratios(column_coverages(count_matrix(X)))

