"""The robust spreads of calls/spreads.py on the GPU (``column_spreads_gpu``): the same doubles, column for column.

A group of columns goes to the device; each column's finite values are sorted there (a copy; its non-finite values
NaN, last), so every order statistic is an index into the sorted column: the quartiles and the median directly, and
the median of |x - c| (the MAD around the median and around each biweight location) a binary search over the two
sorted runs |x - c| makes (the values below c, read backwards, and the rest): no selection passes. The biweight's
sums run over the column in its own order, as the CPU's do: one block per column, a warp of it adds a tile of
consecutive terms in order (each of its threads making the same additions) while the block's other threads compute
the next tile's terms, so each sum is the CPU's, operation for operation (compiled without FMA contraction,
cuda/nofma.py). -0.0 is taken as 0.0 (as calls/spreads.py takes it), so that ties of equal values are ties of
equal bits.

Device memory: about four copies of a group of columns (the host's, the canonical one, the sorted one, a sort's
scratch); groups are sized from the free device memory (cuda/config.py's SPREAD_MEMORY_FRACTION).
"""
from __future__ import annotations

import math

import numpy as np
from numba.extending import register_jitable

from ..cuda.config import (SPREAD_ADDERS, SPREAD_ADDERS_SIM, SPREAD_MEMORY_FRACTION, SPREAD_THREADS_PER_BLOCK,
                           SPREAD_THREADS_PER_BLOCK_SIM, SPREAD_TILE, SPREAD_TILE_SIM)
from ..cuda.kernels import cached_kernel
from ..cuda.nofma import jit_nofma
from ..cuda.plan import is_out_of_memory
from ..cuda.runtime import device_copy, device_module, kernel_arg, make_backend, release_pool_blocks, simulating
from . import spreads
from .spreads import MAD_SCALE

try:  # module level: the kernels' ``cuda`` must be a global (the CUDA simulator swaps module globals)
    from numba import cuda, float64
except Exception:  # noqa: BLE001 - numba without its CUDA target: nothing here is called
    cuda = float64 = None

#: threads per block (one block per column) in this process
TPB = SPREAD_THREADS_PER_BLOCK_SIM if simulating() else SPREAD_THREADS_PER_BLOCK
#: consecutive values of a column whose terms a block computes before adding them in order
TILE = SPREAD_TILE_SIM if simulating() else SPREAD_TILE
#: the block's first threads, which add the terms in order (a warp: each makes the same additions); the others
#: compute the next tile's terms meanwhile
ADDERS = SPREAD_ADDERS_SIM if simulating() else SPREAD_ADDERS


@register_jitable
def _below(S, j, n, c):
    """The number of the sorted values S[j, :n] below ``c``."""
    lo = 0
    hi = n
    while lo < hi:
        mid = (lo + hi) // 2
        if S[j, mid] < c:
            lo = mid + 1
        else:
            hi = mid
    return lo


@register_jitable
def _kth_abs_dev(S, j, n, p, c, k):
    """The k-th smallest (0-based) of |S[j, i] - c| over i < n (S[j, :n] ascending; p: ``_below(S, j, n, c)``).
    The deviations of the values below c, read backwards (A), and of the rest (B) are two ascending runs; the k + 1
    smallest are A's first i and B's first k + 1 - i for the least i at which A's next is not below B's last."""
    a = p
    b = n - p
    lo = max(0, k + 1 - b)
    hi = min(k + 1, a)
    while lo < hi:
        i = (lo + hi) // 2
        if abs(S[j, p - 1 - i] - c) < abs(S[j, p + k - i] - c):  # A[i] < B[k - i]: more of A
            lo = i + 1
        else:
            hi = i
    i = lo
    v = abs(S[j, p - i] - c) if i > 0 else -1.0  # A[i - 1]
    if k + 1 - i > 0:
        v = max(v, abs(S[j, p + k - i] - c))  # B[k - i]
    return v


@register_jitable
def _abs_dev_median(S, j, n, c):
    """calls/spreads.py's ``_abs_dev_median``: the median of |x - c| over the sorted column S[j, :n]."""
    p = _below(S, j, n, c)
    if n % 2:
        return _kth_abs_dev(S, j, n, p, c, n // 2)
    return (_kth_abs_dev(S, j, n, p, c, n // 2 - 1) + _kth_abs_dev(S, j, n, p, c, n // 2)) / 2.0


@register_jitable
def _quantile(S, j, n, q):
    """numpy's "linear" percentile 100 q of the sorted column S[j, :n] (calls/spreads.py's ``_lerp_quantile``)."""
    index = q * (n - 1)
    lo = int(math.floor(index))
    t = index - lo
    below = S[j, lo]
    if lo + 1 >= n:
        return below
    above = S[j, lo + 1]
    diff = above - below
    if t >= 0.5:
        return above - diff * (1.0 - t)
    return below + diff * t


@register_jitable
def _terms(Y, i, j, loc, scale, variance):
    """The terms value Y[i, j] adds to a pass's sums around ``loc`` with ``scale`` (0.0 each where it adds none:
    not finite, or |u| >= 1; x + 0.0 is x for every x but -0.0, which no sum from 0.0 reaches), and 1 where it
    is inside. The location's pass (``variance`` False): (w, d w, 0); the midvariance's: (u, d^2 w^2, (1 - u^2)
    (1 - 5 u^2)) with w = (1 - u^2)^2 (calls/spreads.py's arithmetic, operation for operation)."""
    a = 0.0
    b = 0.0
    c = 0.0
    inside = 0
    v = Y[i, j]
    if not math.isnan(v):
        d = v - loc
        u = d / scale
        if abs(u) < 1.0:
            inside = 1
            if variance:
                u2 = u * u
                w = (1.0 - u2) * (1.0 - u2)
                a = u
                b = d * d * (w * w)
                c = (1.0 - u2) * (1.0 - 5.0 * u2)
            else:
                s = 1.0 - u * u
                a = s * s
                b = d * a
    return a, b, c, inside


@register_jitable
def _fill(Y, j, m, base, loc, scale, variance, buf, inside):
    """The terms of rows base.. of column j into buf (3, TILE) (the computing threads, ADDERS.. of the block,
    share the tile); returns this thread's count of values inside."""
    t = cuda.threadIdx.x
    for r in range(t - ADDERS, TILE, TPB - ADDERS):
        i = base + r
        if i < m:
            a, b, c, k = _terms(Y, i, j, loc, scale, variance)
            buf[0, r] = a
            buf[1, r] = b
            buf[2, r] = c
            inside += k
    return inside


@register_jitable
def _add(buf, k, x, y, z):
    """(x + buf[0, 0] + ... + buf[0, k - 1], the same of y with buf[1], of z with buf[2]), each added in that
    order (four loads ahead)."""
    r = 0
    while r + 4 <= k:
        a0, a1, a2, a3 = buf[0, r], buf[0, r + 1], buf[0, r + 2], buf[0, r + 3]
        b0, b1, b2, b3 = buf[1, r], buf[1, r + 1], buf[1, r + 2], buf[1, r + 3]
        c0, c1, c2, c3 = buf[2, r], buf[2, r + 1], buf[2, r + 2], buf[2, r + 3]
        x = (((x + a0) + a1) + a2) + a3
        y = (((y + b0) + b1) + b2) + b3
        z = (((z + c0) + c1) + c2) + c3
        r += 4
    while r < k:
        x += buf[0, r]
        y += buf[1, r]
        z += buf[2, r]
        r += 1
    return x, y, z


@register_jitable
def _pass(Y, j, m, loc, scale, variance, buf0, buf1, shared):
    """The three sums of a pass over column j (``_terms``, in the values' order) and the number of values inside,
    known to every thread of the block. Pipelined by tiles of TILE values: while the adding threads (the first
    ADDERS, a warp, each making the same additions) add tile k from one buffer, the others compute tile k + 1's
    terms into the other."""
    t = cuda.threadIdx.x
    x = 0.0
    y = 0.0
    z = 0.0
    inside = 0
    if t >= ADDERS:
        inside = _fill(Y, j, m, 0, loc, scale, variance, buf0, inside)
    cuda.syncthreads()
    tiles = (m + TILE - 1) // TILE
    for k in range(tiles):
        if t < ADDERS:
            if k % 2 == 0:
                x, y, z = _add(buf0, min(TILE, m - k * TILE), x, y, z)
            else:
                x, y, z = _add(buf1, min(TILE, m - k * TILE), x, y, z)
        elif k + 1 < tiles:
            if k % 2 == 0:
                inside = _fill(Y, j, m, (k + 1) * TILE, loc, scale, variance, buf1, inside)
            else:
                inside = _fill(Y, j, m, (k + 1) * TILE, loc, scale, variance, buf0, inside)
        cuda.syncthreads()
    if t == 0:
        shared[0] = x
        shared[1] = y
        shared[2] = z
        shared[3] = 0.0
    cuda.syncthreads()
    if t >= ADDERS:  # the counts are whole numbers far below 2^53: exact in any order
        cuda.atomic.add(shared, 3, float(inside))
    cuda.syncthreads()
    x, y, z, n_inside = shared[0], shared[1], shared[2], shared[3]
    cuda.syncthreads()  # read by every thread before the next pass writes
    return x, y, z, int(n_inside)


def _nofma_column_spreads(Y, S, counts, out):
    """out[j] = (scaled MAD, IQR, biweight midvariance's root) of column j: Y[:, j] its values in order (NaN where
    not finite, no -0.0), S[j, :counts[j]] its finite values ascending; NaN where it has none. One block per
    column (a grid-stride loop over the columns)."""
    t = cuda.threadIdx.x
    m = Y.shape[0]
    buf0 = cuda.shared.array((3, TILE), float64)
    buf1 = cuda.shared.array((3, TILE), float64)
    shared = cuda.shared.array(4, float64)
    for j in range(cuda.blockIdx.x, Y.shape[1], cuda.gridDim.x):
        n = counts[j]
        if n == 0:
            if t == 0:
                out[j, 0] = math.nan
                out[j, 1] = math.nan
                out[j, 2] = math.nan
            continue
        centre = S[j, n // 2] if n % 2 else (S[j, n // 2 - 1] + S[j, n // 2]) / 2.0
        spread = _abs_dev_median(S, j, n, centre)
        # the biweight location (calls/spreads.py's biweight_location: c = 6, epsilon 1e-3, at most 5 steps)
        loc = centre
        for step_no in range(5):
            dev = spread if step_no == 0 else _abs_dev_median(S, j, n, loc)
            total, moment, _, _ = _pass(Y, j, m, loc, max(6.0 * dev, 1e-3), False, buf0, buf1, shared)
            if total == 0.0:
                break
            step = moment / total
            loc += step
            if abs(step) <= 1e-3:
                break
        # the midvariance around it (calls/spreads.py's biweight_midvariance: c = 9)
        mad = _abs_dev_median(S, j, n, loc)
        u_sum, num, den, inside = _pass(Y, j, m, loc, max(9.0 * mad, 1e-3), True, buf0, buf1, shared)
        if t == 0:
            out[j, 0] = spread * MAD_SCALE
            out[j, 1] = _quantile(S, j, n, 0.75) - _quantile(S, j, n, 0.25)
            out[j, 2] = mad * MAD_SCALE if u_sum == 0.0 else math.sqrt(inside * num / (den * den))


def _kernel():
    return cached_kernel(jit_nofma, _nofma_column_spreads)


def _group_width(m: int, total: int, fraction: float) -> int:
    """Columns per group: four (m,) float64 copies of each (the host's, the canonical one, the sorted one and a
    sort's scratch) within ``fraction`` of the free device memory; at least one."""
    free = make_backend(_current_device()).mem_info()[0]
    return max(1, min(total, int(free * fraction) // max(1, 32 * m)))


def _current_device() -> int:
    if simulating():
        return 0
    import cupy

    return int(cupy.cuda.Device().id)


def _column_parts(matrices: list[np.ndarray], c0: int, c1: int):
    """(first, end, part) of columns c0:c1 of the matrices ``matrices`` (each (m, N_i)) side by side: each matrix's
    share ``part`` (a view), which fills columns first:end of the (m, c1 - c0) block."""
    at = 0  # the first column of the matrix in hand, counted over all of them
    for a in matrices:
        lo, hi = max(c0, at), min(c1, at + a.shape[1])
        if lo < hi:
            yield lo - c0, hi - c0, a[:, lo - at:hi - at]
        at += a.shape[1]


def _columns(matrices: list[np.ndarray], c0: int, c1: int):
    """Columns c0:c1 of the matrices ``matrices`` (each (m, N_i)) side by side, on the device (m, c1 - c0)."""
    xp = device_module()
    X = xp.empty((matrices[0].shape[0], c1 - c0), order="F")
    for first, end, part in _column_parts(matrices, c0, c1):
        X[:, first:end] = device_copy(np.asfortranarray(part, dtype=np.float64))
    return X


def _spreads_of(matrices: list[np.ndarray], fraction: float) -> np.ndarray:
    """(sum of N_i, 3): the spreads of every column of the host matrices ``matrices`` (each (m, N_i)), the first's
    columns first; on the current device, a group of columns (of any of them, within ``fraction`` of the free
    device memory, ``_group_width``) per launch. A group the device has
    no memory for (other work on it) is split in halves; a single column it cannot hold is summarized on the
    CPU (calls/spreads.py: the same doubles)."""
    m = matrices[0].shape[0]
    total = sum(a.shape[1] for a in matrices)
    out = np.full((total, 3), np.nan)
    if total == 0 or m == 0:
        return out
    width = _group_width(m, total, fraction)
    c0 = 0
    while c0 < total:
        c1 = min(total, c0 + width)
        try:
            out[c0:c1] = _group_spreads(matrices, c0, c1)
        except Exception as exc:  # noqa: BLE001 - only out-of-memory errors are handled
            if not is_out_of_memory(exc):
                raise
            release_pool_blocks()
            if width > 1:
                width = max(1, width // 2)
                continue
            out[c0:c1] = spreads.column_spreads(_host_columns(matrices, c0, c1))
        c0 = c1
    return out


def _group_spreads(matrices: list[np.ndarray], c0: int, c1: int) -> np.ndarray:
    """(c1 - c0, 3): the spreads of columns c0:c1 of the matrices side by side, on the current device."""
    xp = device_module()
    X = _columns(matrices, c0, c1)
    finite = xp.isfinite(X)
    Y = xp.where(finite, X + 0.0, xp.nan)  # -0.0 + 0.0 is 0.0
    del X
    counts = finite.sum(axis=0).astype(np.int64)
    del finite
    S = Y.T.copy(order="C")  # (Y.T is C-contiguous itself: a view would be sorted in place)
    for k in range(c1 - c0):  # a 1-D sort per column: cupy sorts those by radix, NaN last
        S[k].sort()
    d_out = xp.empty((c1 - c0, 3))
    _kernel()[c1 - c0, TPB](kernel_arg(Y), kernel_arg(S), kernel_arg(counts), kernel_arg(d_out))
    return d_out if xp is np else d_out.get()


def _host_columns(matrices: list[np.ndarray], c0: int, c1: int) -> np.ndarray:
    """Columns c0:c1 of the matrices side by side, on the host (m, c1 - c0)."""
    return np.hstack([part for _, _, part in _column_parts(matrices, c0, c1)])


def column_spreads_gpu(values: np.ndarray, more: np.ndarray | None = None,
                       memory_fraction: float = SPREAD_MEMORY_FRACTION) -> np.ndarray:
    """calls/spreads.py's ``column_spreads`` on the current GPU: (N, 3) scaled MAD, IQR and biweight midvariance's
    root of each column's finite values of ``values`` (m, N) (NaN where a column has none); (N, 6) with those of
    ``more`` (m, N) after them (both matrices' columns in the same launches); ``memory_fraction``: of the free
    device memory the columns in hand may take (less where other work shares the device)."""
    values = np.asarray(values)
    if more is None:
        return _spreads_of([values], memory_fraction)
    more = np.asarray(more)
    if more.shape != values.shape:
        raise ValueError(f"column_spreads: shapes {values.shape} and {more.shape} differ")
    both = _spreads_of([values, more], memory_fraction)
    N = values.shape[1]
    return np.hstack([both[:N], both[N:]])


__all__ = ["column_spreads_gpu"]
