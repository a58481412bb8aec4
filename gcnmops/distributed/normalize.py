"""cn.mops's normalizeChromosomes (and the coverages of ``norm=2``) on a chunked matrix, bit for bit.

cn.mops normalizes per chromosome: every statistic is over all regions of a chromosome, so a row chunk
alone cannot scale its rows. The statistics are gathered in the shape the engine computes them in, with
the engine's own kernels (``gcnmops.normalization.kernels``), then combined on the client by the engine's own
arithmetic (``gcnmops.normalization.factors``), as ``normalization.cpu`` combines them:

1. staging (row chunks): per row "every value < 1" and "some value != 0"; per sample "some value != 0"
   (cn.mops's silent rows, all-zero chromosomes and zero columns);
2. column pass (groups of whole sample columns, all rows): per chromosome and sample the size factor
   (``factors.size_factors`` on the chromosome's non-silent rows: mean / median / quantile / mode,
   in the engine's summation order), the column sums (fall-back size factors), the histogram of non-zero
   values (normType "mode", merged exactly: counts add up), the coverages of ``norm=2``
   (``kernels.column_coverages``, whole columns);
3. client: per chromosome the scaling factors from the size factors (``factors.scaling_factors``,
   cn.mops's warnings and errors in chromosome order);
4. normType "poisson" (cn.mops's default): the variance-to-mean ratio of every non-silent row
   (``kernels.variance_to_mean``, row chunks), concatenated per chromosome in row order, and its
   density mode (``factors.ratios_mode``) on a worker;
5. the model's row tasks scale their rows with ``kernels.scale_block``.

Every value is computed by the same code on the same numbers in the same order as in
``normalization.cpu.normalize_chromosomes``, so the normalized matrix is identical to the single-process one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..exact.rstats import r_median
from ..normalization.checks import check_columns_have_reads, check_norm_args
from ..normalization.factors import (block_variance_to_mean, checked_size_factors, coverage_ratios, divided_by_mode,
                                     finite_or_ones, merged_histogram, mode_of_histogram, nonzero_histogram,
                                     ratios_mode, scaling_factors, size_factors, too_few_regions)
from ..normalization.kernels import column_coverages, scale_block
from .cluster import task_threads
from .layout import Layout
from .store import WorkStore


@dataclass
class RowFlags:
    """From staging one matrix: per row, every value < 1 (``below_one``) and some value != 0 (``nonzero``),
    both (m,) bool; per column, some value != 0 (``col_nonzero``, (N,) bool)."""

    below_one: np.ndarray
    nonzero: np.ndarray
    col_nonzero: np.ndarray


@dataclass
class Normalization:
    """What a row task needs to normalize its rows: ``silent`` (m,) bool and, per chromosome block, the
    scaling factors of the view's columns ((n,) float64) or None (an all-zero block, left as it is)."""

    silent: np.ndarray
    factors: list

    def for_chunk(self, a: int, b: int, pieces: list) -> tuple[dict, np.ndarray]:
        """(factors of the chromosomes in rows a:b, silent rows a:b): what that row task needs."""
        return {bi: self.factors[bi] for bi, _, _ in pieces}, self.silent[a:b]


@dataclass(frozen=True)
class NormArgs:
    norm_type: str = "poisson"
    size_factor: str = "mean"
    qu: float = 0.25
    qu_size_factor: float = 0.75

    def checked(self) -> "NormArgs":
        """cn.mops's argument checks (normalize_chromosomes's messages)."""
        return NormArgs(*check_norm_args(self.norm_type, self.size_factor, self.qu, self.qu_size_factor))


# --------------------------------------------------------------------------------------------------- tasks
def column_pass(store: WorkStore, name: str, c0: int, c1: int, blocks: list, silent, args: NormArgs | None,
                mode_hist: bool, coverage: bool, positive_median: bool) -> dict:
    """Whole columns c0:c1 of matrix ``name`` (all rows): the per-column statistics asked for.

    ``blocks``: (block index, first, end) of the chromosomes that need size factors, ``silent`` (m,) bool.
    Returns ``sf`` {block: (k,)}, ``colsums`` (k,), ``hist`` {block: (values, counts)} (normType mode),
    ``coverage`` (k,) (``norm=2``), ``pos_median`` {block: (k,)} (singlecn.mops's lambda per chromosome).
    """
    y = store.read(name, (slice(None), slice(c0, c1))).astype(np.float64, copy=False)
    y = np.asfortranarray(y)
    out: dict = {"colsums": y.sum(axis=0)}  # numpy's per-column sums = normalize_chromosomes's out.sum(axis=0)
    with task_threads():
        if args is not None:
            out["sf"], out["hist"] = {}, {}
            for bi, b0, b1 in blocks:
                keep = ~silent[b0:b1]
                n_keep = int(np.count_nonzero(keep))
                out["sf"][bi] = size_factors(y, b0, keep, n_keep, args.norm_type, args.size_factor,
                                             args.qu_size_factor)
                if mode_hist:
                    out["hist"][bi] = nonzero_histogram(y[b0:b1][keep].ravel())
        if coverage:
            out["coverage"] = column_coverages(y)
        if positive_median:
            out["pos_median"] = {}
            for bi, b0, b1 in blocks:
                meds = np.empty(y.shape[1])
                for k in range(y.shape[1]):
                    col = y[b0:b1, k]
                    pos = col[col > 0]
                    meds[k] = r_median(pos) if pos.size else 0.0  # family.single_cn_mops's lambda
                out["pos_median"][bi] = meds
    return out


def variance_rows(store: WorkStore, view: list, a: int, b: int, pieces: list, factors: dict, silent_rows) -> dict:
    """Rows a:b of the view: {block: variance-to-mean ratios of the block's non-silent rows there, scaled by
    the block's factors} (factors.block_variance_to_mean)."""
    y = read_view(store, view, a, b)
    out = {}
    with task_threads():
        for bi, r0, r1 in pieces:
            if bi in factors:
                out[bi] = block_variance_to_mean(y, r0, ~silent_rows[r0:r1], factors[bi])
    return out


def poisson_mode(bi: int, *chunk_results: dict) -> float:
    """cn.mops's poisson step for one chromosome: the density mode of its rows' variance-to-mean ratios
    (the chunks' pieces concatenated in row order; factors.ratios_mode from there on)."""
    v = np.concatenate([r[bi] for r in chunk_results if bi in r]) if chunk_results else np.empty(0)
    return ratios_mode(v)


def read_view(store: WorkStore, view: list, a: int, b: int) -> np.ndarray:
    """Rows a:b of the matrices of ``view`` [(name, columns)] side by side: float64 (b - a, n) order F."""
    parts = [store.read(name, (slice(a, b), slice(None))) for name, _ in view]
    y = parts[0] if len(parts) == 1 else np.hstack(parts)
    return np.asfortranarray(y, dtype=np.float64)


def scale_rows(y: np.ndarray, pieces: list, factors: dict, silent_rows: np.ndarray) -> np.ndarray:
    """In place: a row chunk of the view normalized (kernels.scale_block per chromosome piece).

    ``pieces``: (block, first, end) relative to the chunk; ``factors``: {block: (n,) factors or None};
    ``silent_rows``: the chunk's silent rows."""
    for bi, r0, r1 in pieces:
        f = factors.get(bi)
        if f is not None:
            scale_block(y, r0, f, silent_rows[r0:r1])
    return y


# --------------------------------------------------------------------------------------------------- client
def plan_normalization(runner, store: WorkStore, layout: Layout, view: list, flags: dict, args: NormArgs):
    """The Normalization of the columns of ``view`` [(matrix name, columns)] normalized together, or None
    when there is nothing to do (one sample: cn.mops returns it unchanged)."""
    import dask

    args = args.checked()
    col_nonzero = np.concatenate([flags[name].col_nonzero for name, _ in view])
    check_columns_have_reads(col_nonzero)
    n = col_nonzero.size
    if n <= 1:
        return None
    silent = np.logical_and.reduce([flags[name].below_one for name, _ in view])
    nonzero = np.logical_or.reduce([flags[name].nonzero for name, _ in view])
    blocks = layout.blocks
    any_nonzero = [bool(nonzero[b0:b1].any()) for _, b0, b1 in blocks]
    n_keep = [int(np.count_nonzero(~silent[b0:b1])) for _, b0, b1 in blocks]
    active = [(bi, b0, b1) for bi, (_, b0, b1) in enumerate(blocks) if any_nonzero[bi] and n_keep[bi] > 1]

    stats: list = []
    if active:
        silent_f = runner.scatter(silent)
        tasks, where = [], []
        offset = 0
        for name, ncols in view:
            for c0, c1 in layout.column_groups(name, ncols):
                tasks.append(dask.delayed(column_pass, pure=False)(
                    store, name, c0, c1, active, silent_f, args, args.norm_type == "mode", False, False))
                where.append((offset + c0, offset + c1))
            offset += ncols
        stats = list(zip(where, runner.compute(tasks)))
    colsums = np.empty(n)
    for (c0, c1), st in stats:
        colsums[c0:c1] = st["colsums"]

    factors: list = [None] * len(blocks)
    pending: dict = {}
    for bi, (chrom, b0, b1) in enumerate(blocks):
        if not any_nonzero[bi]:
            continue  # normalization.cpu leaves an all-zero chromosome as it is
        factors[bi], poisson = _block_factors(bi, chrom, n_keep[bi], stats, colsums, n, args)
        if poisson:
            pending[bi] = factors[bi]
    if pending:
        modes = _poisson_modes(runner, store, layout, view, silent, pending)
        for bi, mode in modes.items():
            factors[bi] = finite_or_ones(divided_by_mode(pending[bi], mode), blocks[bi][0], n, stacklevel=2)
    return Normalization(silent=silent, factors=factors)


def _block_factors(bi, chrom, n_keep, stats, colsums, n, args: NormArgs):
    """normalization.cpu's per-chromosome step from gathered statistics: (factors, True if the poisson mode is
    still to come). Same warnings and errors, same arithmetic (normalization.factors). normType "mode": the most
    frequent non-zero value over every column, from the column groups' histograms added up."""
    if too_few_regions(n_keep, chrom, stacklevel=3):
        return np.ones(n), False
    sf = np.empty(n)
    for (c0, c1), st in stats:
        sf[c0:c1] = st["sf"][bi]
    sf = checked_size_factors(sf, colsums, chrom, args.size_factor, stacklevel=3)
    f = scaling_factors(sf, args.norm_type, args.qu,
                        count_mode=lambda: mode_of_histogram(*merged_histogram([st["hist"][bi] for _, st in stats])))
    if args.norm_type == "poisson":  # the mode of the variance-to-mean ratios divides these
        return f, True
    return finite_or_ones(f, chrom, n, stacklevel=2), False


def _poisson_modes(runner, store, layout: Layout, view, silent, pending: dict) -> dict:
    """{block: density mode of its variance-to-mean ratios}: row tasks, then one reduction per chromosome."""
    import dask

    per_block: dict = {bi: [] for bi in pending}
    for a, b in layout.row_chunks:
        pieces = [p for p in layout.pieces(a, b) if p[0] in pending]
        if not pieces:
            continue
        fs = {bi: pending[bi] for bi, _, _ in pieces}
        task = dask.delayed(variance_rows, pure=False)(store, view, a, b, pieces, fs, silent[a:b])
        for bi, _, _ in pieces:
            per_block[bi].append(task)
    order = sorted(per_block)
    modes = runner.compute([dask.delayed(poisson_mode, pure=False)(bi, *per_block[bi]) for bi in order])
    return dict(zip(order, modes))


def plan_coverage(runner, store: WorkStore, layout: Layout, arrays: list) -> np.ndarray:
    """cn.mops's per-sample coverage (``norm=2``) of the columns of ``arrays`` [(name, columns)] side by side
    (normalize.sample_coverage: the engine's per-column kernel on whole columns, the median on the client)."""
    import dask

    tasks = []
    for name, ncols in arrays:
        for c0, c1 in layout.column_groups(name, ncols):
            tasks.append(dask.delayed(column_pass, pure=False)(store, name, c0, c1, [], None, None, False, True,
                                                               False))
    return coverage_ratios(np.concatenate([r["coverage"] for r in runner.compute(tasks)]))


__all__ = ["RowFlags", "Normalization", "NormArgs", "plan_normalization", "plan_coverage", "column_pass",
           "variance_rows", "poisson_mode", "read_view", "scale_rows"]
