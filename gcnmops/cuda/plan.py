"""Chunk planning for the GPU model: rows per chunk from free device memory, a user cap, OOM retry.

Everything here is plain arithmetic on byte counts (no CUDA import), so it is tested anywhere.

A chunk of ``rows`` regions needs, on the device, per pipeline slot: the input (rows x N float64) and
every output (lambda and alpha rows x n, sINI rows x N float64, labels rows x N int8, INI rows, and the
posteriors rows x n x N when kept). Per-thread scratch (the EM's per-sample work buffers when they live in
global memory) and the run constants are ``fixed_bytes``, paid once per device.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

#: fraction of the free device memory a plan may use (the rest is left to the driver and other users)
FREE_FRACTION = 0.85
#: bytes always left free on the device, whatever the fraction gives
RESERVE_BYTES = 256 << 20
#: a chunk smaller than this cannot fill an H100 (132 SMs x 2048 resident threads ~ 270k)
MIN_FILL_ROWS = 1 << 18
#: aim for at least this many chunks per device so copies overlap the kernel (when rows allow)
TARGET_CHUNKS = 8


def row_bytes(N: int, n: int, keep_post: bool) -> int:
    """Device bytes one region needs in one pipeline slot (input + all outputs)."""
    b = 8 * N          # input counts
    b += 2 * 8 * n     # lambda, alpha
    b += 8 * N + N     # sINI (float64), labels (int8)
    b += 8             # INI
    if keep_post:
        b += 8 * n * N
    return b


@dataclass(frozen=True)
class ChunkPlan:
    """How one device runs its share: ``rows`` per chunk, ``slots`` buffers in flight."""

    rows: int
    slots: int
    row_bytes: int
    fixed_bytes: int
    budget_bytes: int

    @property
    def device_bytes(self) -> int:
        """Bytes the plan allocates on the device."""
        return self.slots * self.rows * self.row_bytes + self.fixed_bytes

    def n_chunks(self, m: int) -> int:
        return max(1, math.ceil(m / self.rows))


def resident_bytes(m: int, N: int, n: int, keep_post: bool, input_copies: int = 1) -> int:
    """Device bytes of the device-resident model stage: ``input_copies`` (m, N) float64 input matrices (the
    counts, and their normalized copy for norm=2) and every output for all m rows at once."""
    return m * (row_bytes(N, n, keep_post) + 8 * N * (input_copies - 1))


def launch_rows(m: int, max_rows: int | None = None, target_chunks: int = TARGET_CHUNKS,
                min_fill_rows: int = MIN_FILL_ROWS) -> int:
    """Rows per kernel launch of the device-resident model: about ``target_chunks`` launches (each one's
    results are copied back while the next computes), each still filling the GPU, and at least two, so that
    every launch gets strided row views of the (m, K) arrays and one kernel specialization serves every m
    (a single launch over all rows would pass contiguous arrays: a second compilation); ``max_rows`` caps it."""
    rows = min(math.ceil(m / 2), max(math.ceil(m / max(1, target_chunks)), min_fill_rows))
    if max_rows is not None:
        rows = min(rows, max(1, int(max_rows)))
    return max(1, rows)


def memory_budget(free_bytes: int, max_device_memory: int | None = None) -> int:
    """Bytes a plan may use: a fraction of the free memory less a reserve, capped by the user's limit."""
    budget = int(free_bytes * FREE_FRACTION) - RESERVE_BYTES
    budget = max(budget, int(free_bytes * 0.5))
    if max_device_memory is not None:
        if max_device_memory <= 0:
            raise ValueError("max_device_memory must be a positive number of bytes.")
        budget = min(budget, int(max_device_memory))
    return budget


def plan_chunks(m: int, N: int, n: int, keep_post: bool, free_bytes: int, max_device_memory: int | None = None,
                slots: int = 2, fixed_bytes: int = 0, max_rows: int | None = None,
                target_chunks: int = TARGET_CHUNKS, min_fill_rows: int = MIN_FILL_ROWS) -> ChunkPlan:
    """Rows per chunk for ``m`` regions of N samples and n classes on a device with ``free_bytes`` free.

    The largest chunk that fits ``slots`` buffers in the budget, but no larger than needed to give about
    ``target_chunks`` chunks (overlap of copies and kernel) as long as each chunk still fills the GPU
    (``min_fill_rows``); ``max_rows`` caps it (tests force tiny chunks with it). Raises MemoryError when
    not even one row fits.
    """
    if m <= 0:
        raise ValueError("nothing to plan: no regions")
    rb = row_bytes(N, n, keep_post)
    budget = memory_budget(free_bytes, max_device_memory)
    rows_mem = (budget - fixed_bytes) // (slots * rb)
    if rows_mem < 1:
        raise MemoryError(
            f"the GPU model needs at least {slots * rb + fixed_bytes} bytes of device memory for one region "
            f"but only {budget} may be used (free {free_bytes}, cap {max_device_memory})")
    rows_overlap = max(math.ceil(m / max(1, target_chunks)), min_fill_rows)
    rows = min(rows_mem, rows_overlap, m)
    if max_rows is not None:
        rows = min(rows, max(1, int(max_rows)))
    rows = max(1, rows)
    return ChunkPlan(rows=rows, slots=slots, row_bytes=rb, fixed_bytes=fixed_bytes, budget_bytes=budget)


def shrink(plan: ChunkPlan, min_rows: int = 1) -> ChunkPlan | None:
    """The plan to retry with after an out-of-memory error: half the rows, or None at ``min_rows``."""
    if plan.rows <= max(1, min_rows):
        return None
    return ChunkPlan(rows=max(min_rows, plan.rows // 2, 1), slots=plan.slots, row_bytes=plan.row_bytes,
                     fixed_bytes=plan.fixed_bytes, budget_bytes=plan.budget_bytes)


def chunk_bounds(m: int, rows: int, start: int = 0) -> list[tuple[int, int]]:
    """[(start, stop), ...] covering start..m in chunks of ``rows``."""
    if rows <= 0:
        raise ValueError("rows per chunk must be positive")
    return [(a, min(m, a + rows)) for a in range(start, m, rows)]


def split_rows(m: int, weights) -> list[tuple[int, int]]:
    """Split rows 0..m into consecutive ranges proportional to ``weights`` (e.g. devices' speeds)."""
    w = [float(v) for v in weights]
    if not w or any(v < 0 for v in w) or sum(w) <= 0:
        raise ValueError("weights must be non-negative with a positive sum")
    total = sum(w)
    bounds = []
    acc = 0.0
    start = 0
    for i, v in enumerate(w):
        acc += v
        stop = m if i == len(w) - 1 else int(round(m * acc / total))
        bounds.append((start, stop))
        start = stop
    return bounds


def is_out_of_memory(exc: BaseException) -> bool:
    """True for the out-of-memory errors of cupy, numba.cuda and the host (MemoryError)."""
    if isinstance(exc, MemoryError):
        return True
    name = type(exc).__name__
    text = str(exc)
    return name == "OutOfMemoryError" or "CUDA_ERROR_OUT_OF_MEMORY" in text or "out of memory" in text.lower()
