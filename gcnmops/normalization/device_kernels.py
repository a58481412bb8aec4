"""The CUDA kernels of the GPU normalization (normalization/gpu.py) and their launches: three launches for the whole
matrix, whatever the number of chromosomes.

The counts Y are the device-resident (m, N) float64 column-major matrix; the chromosomes are blocks of rows given
by ``firsts``/``ends`` (int64, covering rows 0..m-1 in order). Kernels are compiled without FMA contraction
(cuda/nofma.py) and cached on disk; ``gcnmops warmup`` compiles them by normalizing its example cohort.

- ``_nofma_block_sums``: one pass (each value read twice, no (m, N) temporary) giving what the checks and the size
  factors need: whether any count is not finite or not a whole number, and per block and column the sum of the
  counts, of their absolute values and of the kept (non-silent) rows' counts, the number of kept rows and whether
  the block has a non-zero count; the silent-row flags (m,) stay on the device. A GPU block of TPB threads sums a
  tile of TILE_ROWS rows of one chromosome block (NORMALIZE_ROWS_PER_THREAD rows per thread, cuda/config.py; tiles
  never straddle blocks), reduces in shared memory and adds its sums to the block's with one atomic addition per
  sum. For whole numbers whose column sums of absolute values stay below 2^52 every partial sum is a whole number
  below 2^52, so every order of summation gives the exact sum (the CPU's); beyond, the sums of absolute values
  still reach 2^52 in any order (rounding is monotone), so the check that decides it answers as for the exact sums.
- ``_nofma_ratios``: kernels.row_variance_to_mean of every row of the selected blocks scaled by the block's
  factors, NaN for silent rows (which factors.ratios_mode drops as it drops NaN ratios: the kept rows' ratios
  remain, in row order, as the CPU computes them); one thread per row.
- ``_nofma_scale``: rows of the selected blocks times their block's factors, silent rows 0 (kernels.scale_block's
  operations); one thread per row.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba.extending import register_jitable

from ..cuda.config import (NORMALIZE_ROW_MAX_BLOCKS, NORMALIZE_ROW_MAX_BLOCKS_SIM, NORMALIZE_ROW_THREADS_PER_BLOCK,
                           NORMALIZE_ROW_THREADS_PER_BLOCK_SIM, NORMALIZE_ROWS_PER_THREAD,
                           NORMALIZE_SUMS_THREADS_PER_BLOCK, NORMALIZE_SUMS_THREADS_PER_BLOCK_SIM)
from ..cuda.kernels import cached_kernel
from ..cuda.nofma import jit_nofma
from ..cuda.runtime import device_module, kernel_arg, simulating
from .kernels import SILENT_BELOW, row_variance_to_mean

try:  # module level: the kernels' ``cuda`` must be a global (the CUDA simulator swaps module globals)
    from numba import cuda, float64
except Exception:  # noqa: BLE001 - numba without its CUDA target: nothing here is called
    cuda = float64 = None

#: threads per GPU block of the sums kernel in this process (its shared arrays' size)
TPB = NORMALIZE_SUMS_THREADS_PER_BLOCK_SIM if simulating() else NORMALIZE_SUMS_THREADS_PER_BLOCK
#: a tile: TILE_ROWS consecutive rows of one chromosome block, NORMALIZE_ROWS_PER_THREAD for each thread
TILE_ROWS = TPB * NORMALIZE_ROWS_PER_THREAD
#: columns per round of its shared-memory reduction; the shared array's rows: the round's kept-row sums, sums and
#: sums of absolute values, then (first round) the kept-row count and the non-zero, non-finite and fractional flags
COLS_PER_ROUND = 8
SH_KEPT = 3 * COLS_PER_ROUND
SH_ROWS = SH_KEPT + 4

# columns of the sums kernel's result, one row per chromosome block ...
KEPT_ROWS = 0  #: number of kept (non-silent) rows
NONZERO = 1    #: 1.0 where the block has a count != 0
SUMS0 = 2      #: then N kept-row column sums, N column sums and N column sums of absolute values
# ... and one last row of flags over the whole matrix
NONFINITE = 0  #: 1.0 where some count is NaN or infinite
FRACTIONAL = 1  #: 1.0 where some finite count is not a whole number


@register_jitable
def _block_of(offs, j):
    """The block b of flat position j: the last b < len(offs) - 1 with offs[b] <= j (offs ascending, from 0)."""
    lo = 0
    hi = offs.shape[0] - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if offs[mid] <= j:
            lo = mid
        else:
            hi = mid
    return lo


@register_jitable
def _reduce_rows(sh):
    """Each row q of the shared (SH_ROWS, TPB) array ``sh`` summed over its entries into sh[q, 0], the block's
    threads sharing the additions. Every thread must call it, after writing its entries; it returns after a barrier
    (CUDA kernels only)."""
    t = cuda.threadIdx.x
    cuda.syncthreads()
    w = TPB // 2
    while w > 0:
        for idx in range(t, SH_ROWS * w, TPB):
            q = idx // w
            u = idx - q * w
            sh[q, u] += sh[q, u + w]
        cuda.syncthreads()
        w //= 2


def _nofma_block_sums(Y, firsts, ends, tile_offs, silent, acc):
    """GPU block = tile ``blockIdx.x`` (tiles of block b: tile_offs[b]:tile_offs[b + 1]); see the module docstring.
    ``silent`` (m,) uint8 out; ``acc`` (nb + 1, SUMS0 + 3 N) float64, zeros in. The block's sums go through shared
    memory COLS_PER_ROUND columns at a time, with the kept-row count and the flags in the first round."""
    N = Y.shape[1]
    nb = firsts.shape[0]
    t = cuda.threadIdx.x
    tile = cuda.blockIdx.x
    sh = cuda.shared.array((SH_ROWS, TPB), float64)
    b = _block_of(tile_offs, tile)
    r0 = firsts[b] + (tile - tile_offs[b]) * TILE_ROWS + t  # this thread's rows: r0, r0 + TPB, ... below r1
    r1 = ends[b]
    loud = 0  # bit r: row r0 + r * TPB has a count >= SILENT_BELOW
    nonzero = 0.0
    nonfinite = 0.0
    fractional = 0.0
    for k in range(N):
        for r in range(NORMALIZE_ROWS_PER_THREAD):
            i = r0 + r * TPB
            if i < r1:
                v = Y[i, k]
                if v != 0.0:
                    nonzero = 1.0
                if v >= SILENT_BELOW:
                    loud |= 1 << r
                if not math.isfinite(v):
                    nonfinite = 1.0
                elif v != math.floor(v):
                    fractional = 1.0
    kept = 0.0
    for r in range(NORMALIZE_ROWS_PER_THREAD):
        i = r0 + r * TPB
        if i < r1:
            if (loud >> r) & 1:
                silent[i] = 0
                kept += 1.0
            else:
                silent[i] = 1
    for k0 in range(0, N, COLS_PER_ROUND):
        for c in range(COLS_PER_ROUND):
            k = k0 + c
            s_kept = 0.0
            s_all = 0.0
            s_abs = 0.0
            if k < N:
                for r in range(NORMALIZE_ROWS_PER_THREAD):
                    i = r0 + r * TPB
                    if i < r1:
                        v = Y[i, k]
                        if (loud >> r) & 1:
                            s_kept += v
                        s_all += v
                        s_abs += abs(v)
            sh[c, t] = s_kept
            sh[COLS_PER_ROUND + c, t] = s_all
            sh[2 * COLS_PER_ROUND + c, t] = s_abs
        first = k0 == 0
        sh[SH_KEPT, t] = kept if first else 0.0
        sh[SH_KEPT + 1, t] = nonzero if first else 0.0
        sh[SH_KEPT + 2, t] = nonfinite if first else 0.0
        sh[SH_KEPT + 3, t] = fractional if first else 0.0
        _reduce_rows(sh)
        if t < SH_KEPT:  # one thread per (sum, column)
            k = k0 + t % COLS_PER_ROUND
            if k < N:
                cuda.atomic.add(acc, (b, SUMS0 + (t // COLS_PER_ROUND) * N + k), sh[t, 0])
        elif first and t == SH_KEPT:
            cuda.atomic.add(acc, (b, KEPT_ROWS), sh[t, 0])
        elif first and t == SH_KEPT + 1 and sh[t, 0] > 0.0:
            acc[b, NONZERO] = 1.0
        elif first and t == SH_KEPT + 2 and sh[t, 0] > 0.0:
            acc[nb, NONFINITE] = 1.0
        elif first and t == SH_KEPT + 3 and sh[t, 0] > 0.0:
            acc[nb, FRACTIONAL] = 1.0
        cuda.syncthreads()  # sh read before the next round writes it


def _nofma_ratios(Y, firsts, offs, F, silent, out):
    """out[j] for j < offs[-1]: row i = firsts[b] + j - offs[b] of selected block b; NaN where the row is silent,
    else kernels.row_variance_to_mean(Y, i, F[b]). One thread per row."""
    for j in range(cuda.grid(1), offs[offs.shape[0] - 1], cuda.gridsize(1)):
        b = _block_of(offs, j)
        i = firsts[b] + j - offs[b]
        out[j] = math.nan if silent[i] else row_variance_to_mean(Y, i, F[b])


def _nofma_scale(Y, firsts, offs, F, silent):
    """In place, the rows of the selected blocks (as in ``_nofma_ratios``): Y[i, k] * F[b, k], silent rows 0."""
    N = Y.shape[1]
    for j in range(cuda.grid(1), offs[offs.shape[0] - 1], cuda.gridsize(1)):
        b = _block_of(offs, j)
        i = firsts[b] + j - offs[b]
        if silent[i]:
            for k in range(N):
                Y[i, k] = 0.0
        else:
            for k in range(N):
                Y[i, k] = Y[i, k] * F[b, k]


class Kernels(NamedTuple):
    block_sums: object
    ratios: object
    scale: object


def kernels() -> Kernels:
    """The three kernels, from cuda.kernels' cache (numba compiles, or loads from its disk cache, at each first
    launch)."""
    return Kernels(*(cached_kernel(jit_nofma, k) for k in (_nofma_block_sums, _nofma_ratios, _nofma_scale)))


# --------------------------------------------------------------------------------------------------------------
# launches


class BlockSums(NamedTuple):
    """The sums kernel's result on the host; nb chromosome blocks, N columns."""
    nonfinite: bool          #: some count is NaN or infinite
    fractional: bool         #: some finite count is not a whole number
    kept_rows: np.ndarray    #: (nb,) int64: rows with a count >= SILENT_BELOW
    nonzero: np.ndarray      #: (nb,) bool: the block has a count != 0
    kept_sums: np.ndarray    #: (nb, N): column sums of the kept rows
    sums: np.ndarray         #: (nb, N): column sums
    abs_sums: np.ndarray     #: (nb, N): column sums of absolute values


def _launch_size(n: int) -> tuple[int, int]:
    """(blocks, threads per block) of a one-thread-per-row launch over n rows (its threads loop over the rows). The
    CUDA simulator, which starts a Python thread per GPU thread, gets a few small blocks."""
    tpb, most = ((NORMALIZE_ROW_THREADS_PER_BLOCK_SIM, NORMALIZE_ROW_MAX_BLOCKS_SIM) if simulating()
                 else (NORMALIZE_ROW_THREADS_PER_BLOCK, NORMALIZE_ROW_MAX_BLOCKS))
    return max(1, min(most, (n + tpb - 1) // tpb)), tpb


def _on_device(*arrays: np.ndarray) -> list:
    """The int64 host arrays ``arrays`` on the device in one copy: views of one device array, in order."""
    xp = device_module()
    flat = xp.asarray(np.concatenate([np.asarray(a, dtype=np.int64) for a in arrays]))
    ends = np.cumsum([a.size for a in arrays])
    return [flat[e - a.size:e] for a, e in zip(arrays, ends)]


def block_sums(Y, firsts: np.ndarray, ends: np.ndarray, silent) -> BlockSums:
    """The sums kernel over the device matrix Y (m, N) with chromosome blocks rows firsts[b]:ends[b] (int64, covering
    0..m-1 in order); fills the device array ``silent`` ((m,) uint8: 1 where every count of the row is below
    SILENT_BELOW) and returns the sums, copied to the host in one piece (the one wait)."""
    xp = device_module()
    nb, N = firsts.size, Y.shape[1]
    tile_offs = np.zeros(nb + 1, dtype=np.int64)
    np.cumsum((ends - firsts + TILE_ROWS - 1) // TILE_ROWS, out=tile_offs[1:])
    acc = xp.zeros((nb + 1, SUMS0 + 3 * N))
    if tile_offs[-1]:
        kernels().block_sums[int(tile_offs[-1]), TPB](
            kernel_arg(Y), *(kernel_arg(a) for a in _on_device(firsts, ends, tile_offs)), kernel_arg(silent),
            kernel_arg(acc))
    a = acc if xp is np else acc.get()
    body = a[:nb]
    return BlockSums(bool(a[nb, NONFINITE]), bool(a[nb, FRACTIONAL]), body[:, KEPT_ROWS].astype(np.int64),
                     body[:, NONZERO] != 0, body[:, SUMS0:SUMS0 + N], body[:, SUMS0 + N:SUMS0 + 2 * N],
                     body[:, SUMS0 + 2 * N:])


class Selected(NamedTuple):
    """Blocks of rows that ``ratios`` and ``scale`` run over: row j of their concatenation is row
    firsts[b] + j - offs[b] of block b (offs[b] <= j < offs[b + 1])."""
    firsts: object          #: (nsel,) int64, device
    offs: object            #: (nsel + 1,) int64, device
    host_offs: np.ndarray   #: the same offsets on the host

    @property
    def n(self) -> int:
        """Rows in all."""
        return int(self.host_offs[-1])


def selected(firsts: np.ndarray, ends: np.ndarray) -> Selected:
    """``Selected`` of the blocks rows firsts[b]:ends[b] (host arrays in)."""
    offs = np.zeros(firsts.size + 1, dtype=np.int64)
    np.cumsum(ends - firsts, out=offs[1:])
    return Selected(*_on_device(firsts, offs), offs)


def _factors(F: np.ndarray):
    """The selected blocks' factors (nsel, N) on the device, C order."""
    return device_module().asarray(np.ascontiguousarray(F, dtype=np.float64))


def ratios(Y, sel: Selected, F: np.ndarray, silent):
    """The variance-to-mean ratios of the selected rows of Y, block b's scaled by F[b] (host (nsel, N)), NaN for
    silent rows: a device array (sel.n,), filled asynchronously."""
    out = device_module().empty(sel.n)
    if sel.n:
        grid, tpb = _launch_size(sel.n)
        kernels().ratios[grid, tpb](kernel_arg(Y), kernel_arg(sel.firsts), kernel_arg(sel.offs),
                                    kernel_arg(_factors(F)), kernel_arg(silent), kernel_arg(out))
    return out


def scale(Y, sel: Selected, F: np.ndarray, silent) -> None:
    """In place, asynchronously: the selected rows of Y, block b's times F[b] (host (nsel, N)), silent rows 0."""
    if sel.n:
        grid, tpb = _launch_size(sel.n)
        kernels().scale[grid, tpb](kernel_arg(Y), kernel_arg(sel.firsts), kernel_arg(sel.offs),
                                   kernel_arg(_factors(F)), kernel_arg(silent))


__all__ = ["TPB", "TILE_ROWS", "Kernels", "kernels", "BlockSums", "block_sums", "Selected",
           "selected", "ratios", "scale"]
