"""How a regions x samples matrix is cut into tasks: row chunks (whole rows, all samples) and sample
groups (whole columns, all rows), and where the chromosomes fall in the row chunks."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Layout:
    """``m`` regions in row chunks of ``rows`` rows; ``blocks``: (chromosome, first row, end row) in row
    order; ``sample_chunk``: samples per column group (and per Zarr chunk) of each stored matrix."""

    m: int
    rows: int
    blocks: list[tuple[str, int, int]]
    sample_chunk: dict[str, int] = field(default_factory=dict)

    @property
    def row_chunks(self) -> list[tuple[int, int]]:
        return [(a, min(self.m, a + self.rows)) for a in range(0, self.m, self.rows)]

    def pieces(self, a: int, b: int) -> list[tuple[int, int, int]]:
        """(block index, first, end) of each chromosome's rows within rows a:b, relative to a."""
        out = []
        for bi, (_, b0, b1) in enumerate(self.blocks):
            lo, hi = max(a, b0), min(b, b1)
            if lo < hi:
                out.append((bi, lo - a, hi - a))
        return out

    def column_groups(self, name: str, n_cols: int) -> list[tuple[int, int]]:
        k = self.sample_chunk.get(name, n_cols)
        return [(c, min(n_cols, c + k)) for c in range(0, n_cols, k)]

    def chunks(self, name: str, n_cols: int) -> tuple[int, int]:
        """The Zarr chunk shape of matrix ``name``."""
        return (min(self.m, self.rows), max(1, min(n_cols, self.sample_chunk.get(name, n_cols))))


#: tasks per worker thread a stage is cut into at least (when the memory allows larger ones): load balance
TASKS_PER_THREAD = 4


def plan_layout(m: int, columns: dict[str, int], blocks, *, chunk_bytes: int, per_row_factor: int = 1,
                rows_per_chunk: int | None = None, samples_per_chunk: int | None = None,
                threads: int = 1) -> Layout:
    """Rows per chunk so that a row task's input (8 bytes x all columns x ``per_row_factor``) is about
    ``chunk_bytes``; samples per group so that a column task's (8 bytes x m rows x samples) is too (at
    least one sample: a column task always holds whole columns). Both smaller where that gives the
    ``threads`` worker threads fewer than TASKS_PER_THREAD tasks each."""
    total = max(1, sum(columns.values()))
    n_max = max(columns.values()) if columns else 1
    want = TASKS_PER_THREAD * max(1, threads)
    if rows_per_chunk is None:
        rows_per_chunk = max(1024, min(chunk_bytes // (8 * total * max(1, per_row_factor)), -(-m // want)))
    rows = max(1, min(m, int(rows_per_chunk)))
    k = samples_per_chunk if samples_per_chunk is not None else \
        max(1, min(chunk_bytes // (8 * m), -(-n_max // want)))
    sample_chunk = {name: max(1, min(n, int(k))) for name, n in columns.items()}
    return Layout(m=m, rows=rows, blocks=list(blocks), sample_chunk=sample_chunk)


__all__ = ["Layout", "plan_layout"]
