"""The run's first pass over the whole input, before any block: every count checked (cn.mops's checks, with the
messages of the whole matrix) and what crosses chromosomes (pipeline.blocks.Genome): each sample's total count
and, for norm=2, each sample's coverage statistic.

- rows (row ranges of all samples): the checks, and the column sums where every count is a whole number (then
  exact in any order: the sums normalize_chromosomes takes over the whole matrix);
- columns (groups of whole sample columns), only where needed: norm=2's trimmed means (type-7 quantiles need
  whole columns), and the column sums of counts that are not whole numbers (summed as numpy sums a whole column).

A matrix in this process is checked and summed here, as the in-memory run does; a count group written by
``save_counts`` carries its checked totals.
"""
from __future__ import annotations

import numpy as np

from ..data import count_error, count_problems, merge_count_problems, validate_counts
from ..errors import InputError
from ..normalization.kernels import column_coverages
from .cluster import Runner, task_threads
from .layout import column_groups
from .store import Matrix, read_part


def rows_task(part, sums: bool) -> dict:
    """Rows of all samples: their ``problems`` (data.count_problems) and, if ``sums``, whether every count is a
    whole number (``whole``) and the column sums (``sums``)."""
    x = read_part(part)
    try:
        y = validate_counts(x)
    except InputError:
        return {"problems": count_problems(np.asarray(x))}
    out: dict = {"problems": {}}
    if sums:
        out["whole"] = bool((np.floor(y) == y).all())
        out["sums"] = y.sum(axis=0)
    return out


def columns_task(part, sums: bool, coverage: bool) -> dict:
    """Whole sample columns (checked by the rows pass): numpy's column sums (``sums``) and the coverage
    statistic of norm=2 (``coverage``: normalization.kernels.column_coverages)."""
    y = np.asfortranarray(read_part(part), dtype=np.float64)
    out: dict = {}
    if sums:
        out["sums"] = y.sum(axis=0)
    if coverage:
        with task_threads():
            out["coverage"] = column_coverages(y)
    return out


def first_pass(runner: Runner, matrix: Matrix, *, sums: bool, coverage: bool, rows: int,
               chunk_bytes: int, samples: int | None = None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``matrix``'s counts checked (InputError as ``validate_counts`` raises it for the whole matrix); (column sums
    or None, coverage statistics or None) as asked. A matrix in this process is replaced by its checked float64
    copy (column-major). ``rows``: regions per task of the rows pass; ``chunk_bytes`` / ``samples``: the size of
    a column group."""
    m, n = matrix.shape
    if matrix.in_memory:
        y = validate_counts(matrix.values, matrix.what, sample_names=matrix.sample_names, ranges=matrix.ranges)
        matrix.values = y
        return (y.sum(axis=0) if sums else None), (column_coverages(y) if coverage else None)
    col_sums = matrix.col_sums
    if col_sums is None:
        ranges = [(a, min(m, a + rows)) for a in range(0, m, max(1, rows))]
        parts = runner.run(rows_task, [(matrix.part(slice(a, b)), sums) for a, b in ranges])
        problems = merge_count_problems([(a, 0, p["problems"]) for (a, _), p in zip(ranges, parts)])
        if problems:
            raise count_error(problems, matrix.what, matrix.sample_names, matrix.ranges)
        if sums and all(p["whole"] for p in parts):
            col_sums = np.sum([p["sums"] for p in parts], axis=0)
    sum_columns = sums and col_sums is None
    if not (sum_columns or coverage):
        return (col_sums if sums else None), None
    groups = column_groups(m, n, chunk_bytes, samples)
    parts = runner.run(columns_task, [(matrix.part(cols=slice(c0, c1)), sum_columns, coverage) for c0, c1 in groups])
    if sum_columns:
        col_sums = np.concatenate([p["sums"] for p in parts])
    return (col_sums if sums else None), (np.concatenate([p["coverage"] for p in parts]) if coverage else None)


__all__ = ["first_pass", "rows_task", "columns_task"]
