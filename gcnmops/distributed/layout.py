"""Where the work is cut: blocks of whole chromosomes (the unit every task runs through the stage order), row
ranges and groups of whole sample columns for the first pass, and the chunks of the stored matrices."""
from __future__ import annotations

from dataclasses import dataclass

#: tasks per worker thread the blocks are cut into at least, where chromosomes are small enough: load balance
TASKS_PER_THREAD = 4
#: the same per worker where the workers run the blocks on their GPUs: a block pays the device stages' fixed
#: costs once, and two per worker let the largest-first order balance several GPUs
TASKS_PER_GPU_WORKER = 2
#: rows x samples of a stored matrix's chunks by default: about 16 MB, at most 256 samples
DEFAULT_CHUNK_BYTES = 16 << 20
MAX_CHUNK_SAMPLES = 256


@dataclass(frozen=True)
class Layout:
    """``m`` regions and ``blocks`` (first row, end row) of whole chromosomes, in row order; ``order``: the
    blocks' indices largest first (the order their tasks are given to the scheduler); ``rows`` x ``samples``:
    the chunks of the stored matrices."""

    m: int
    blocks: list[tuple[int, int]]
    rows: int
    samples: int

    @property
    def order(self) -> list[int]:
        return sorted(range(len(self.blocks)), key=lambda k: self.blocks[k][0] - self.blocks[k][1])

    def row_ranges(self, rows: int) -> list[tuple[int, int]]:
        """Rows in ranges of at most ``rows`` (the first pass over row-chunked inputs)."""
        return [(a, min(self.m, a + rows)) for a in range(0, self.m, max(1, rows))]

    def row_chunks(self) -> tuple[int, ...]:
        """The row chunks of a stored matrix: each block in chunks of ``rows``."""
        return tuple(min(self.rows, b1 - a) for b0, b1 in self.blocks for a in range(b0, b1, self.rows))


def plan_layout(chromosomes: list[tuple[str, int, int]], n_columns: int, n_samples: int, *, chunk_bytes: int,
                tasks: int, rows_per_chunk: int | None = None, samples_per_chunk: int | None = None) -> Layout:
    """Blocks of whole chromosomes: consecutive chromosomes merged while a block's counts (8 bytes x
    ``n_columns`` per region: the cases, and referencecn.mops's controls) stay within ``chunk_bytes`` and its
    regions within an even share of the work (``tasks`` blocks at least: TASKS_PER_THREAD per worker thread,
    TASKS_PER_GPU_WORKER per GPU worker); a chromosome larger than that is a block alone, never cut (cn.mops
    normalizes and segments per chromosome).
    ``rows_per_chunk`` x ``samples_per_chunk``: the stored matrices' chunks (default about
    DEFAULT_CHUNK_BYTES, at most MAX_CHUNK_SAMPLES samples)."""
    m = chromosomes[-1][2]
    share = -(-m // max(1, tasks))
    limit = max(1, min(share, chunk_bytes // (8 * max(1, n_columns))))
    blocks: list[tuple[int, int]] = []
    for _, b0, b1 in chromosomes:
        if blocks and b1 - blocks[-1][0] <= limit:
            blocks[-1] = (blocks[-1][0], b1)
        else:
            blocks.append((b0, b1))
    k = max(1, min(n_samples, samples_per_chunk or MAX_CHUNK_SAMPLES))
    rows = rows_per_chunk or max(1024, DEFAULT_CHUNK_BYTES // (8 * k))
    return Layout(m, blocks, max(1, int(rows)), k)


def column_groups(m: int, n: int, chunk_bytes: int, samples: int | None = None) -> list[tuple[int, int]]:
    """Groups of whole sample columns of about ``chunk_bytes`` of float64 each (``samples`` per group if given;
    one sample at least)."""
    k = samples or max(1, chunk_bytes // (8 * max(1, m)))
    k = max(1, min(n, int(k)))
    return [(c, min(n, c + k)) for c in range(0, n, k)]


__all__ = ["Layout", "plan_layout", "column_groups", "TASKS_PER_THREAD", "TASKS_PER_GPU_WORKER"]
