"""The robust spreads of calls/spreads.py on the GPU (``column_spreads_gpu``): the same doubles, column for column.

A group of columns goes to the device; each column's finite values are sorted there (a copy; its non-finite values
NaN, last), so every order statistic is an index into the sorted column: the quartiles and the median directly, and
the median of |x - c| (the MAD around the median and around each biweight location) a binary search over the two
sorted runs |x - c| makes (the values below c, read backwards, and the rest): no selection passes. The biweight's
sums run over the column in its own order, as the CPU's do: one block per column, its threads compute a tile of
consecutive terms and every thread adds the tile's terms in order, so each sum is the CPU's, operation for operation
(compiled without FMA contraction, cuda/nofma.py). -0.0 is taken as 0.0 (as calls/spreads.py takes it), so that
ties of equal values are ties of equal bits.

Device memory: about three copies of a group of columns (the group, its sorted copy, a sort's scratch); groups are
sized from the free device memory (cuda/config.py's SPREAD_MEMORY_FRACTION).
"""
from __future__ import annotations

import math

import numpy as np
from numba.extending import register_jitable

from ..cuda.config import (SPREAD_MEMORY_FRACTION, SPREAD_THREADS_PER_BLOCK, SPREAD_THREADS_PER_BLOCK_SIM,
                           SPREAD_TILE, SPREAD_TILE_SIM)
from ..cuda.kernels import cached_kernel
from ..cuda.nofma import jit_nofma
from ..cuda.runtime import device_copy, device_module, kernel_arg, make_backend, simulating
from .spreads import MAD_SCALE

try:  # module level: the kernels' ``cuda`` must be a global (the CUDA simulator swaps module globals)
    from numba import cuda, float64, int32
except Exception:  # noqa: BLE001 - numba without its CUDA target: nothing here is called
    cuda = float64 = int32 = None

#: threads per block (one block per column) in this process
TPB = SPREAD_THREADS_PER_BLOCK_SIM if simulating() else SPREAD_THREADS_PER_BLOCK
#: consecutive values of a column whose terms a block computes before adding them in order (a multiple of TPB)
TILE = SPREAD_TILE_SIM if simulating() else SPREAD_TILE


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
def _add_in_order(a, b, k, x, y):
    """(x + a[0] + ... + a[k - 1], y + b[0] + ... + b[k - 1]), each added in that order (four loads ahead)."""
    r = 0
    while r + 4 <= k:
        a0, a1, a2, a3 = a[r], a[r + 1], a[r + 2], a[r + 3]
        b0, b1, b2, b3 = b[r], b[r + 1], b[r + 2], b[r + 3]
        x = (((x + a0) + a1) + a2) + a3
        y = (((y + b0) + b1) + b2) + b3
        r += 4
    while r < k:
        x += a[r]
        y += b[r]
        r += 1
    return x, y


@register_jitable
def _add3_in_order(a, b, c, k, x, y, z):
    """``_add_in_order`` of three arrays."""
    r = 0
    while r + 4 <= k:
        a0, a1, a2, a3 = a[r], a[r + 1], a[r + 2], a[r + 3]
        b0, b1, b2, b3 = b[r], b[r + 1], b[r + 2], b[r + 3]
        c0, c1, c2, c3 = c[r], c[r + 1], c[r + 2], c[r + 3]
        x = (((x + a0) + a1) + a2) + a3
        y = (((y + b0) + b1) + b2) + b3
        z = (((z + c0) + c1) + c2) + c3
        r += 4
    while r < k:
        x += a[r]
        y += b[r]
        z += c[r]
        r += 1
    return x, y, z


def _nofma_column_spreads(Y, S, counts, out):
    """out[j] = (scaled MAD, IQR, biweight midvariance's root) of column j: Y[:, j] its values in order (NaN where
    not finite, no -0.0), S[j, :counts[j]] its finite values ascending; NaN where it has none. One block per
    column (a grid-stride loop over the columns); the tiles' terms go through shared memory, 0.0 for the values
    a sum leaves out (x + 0.0 is x for every x but -0.0, which no sum from 0.0 reaches)."""
    t = cuda.threadIdx.x
    m = Y.shape[0]
    sh_in = cuda.shared.array(TPB, int32)
    sh_a = cuda.shared.array(TILE, float64)
    sh_b = cuda.shared.array(TILE, float64)
    sh_c = cuda.shared.array(TILE, float64)
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
            scale = max(6.0 * dev, 1e-3)
            total = 0.0
            moment = 0.0
            for base in range(0, m, TILE):
                for r in range(t, TILE, TPB):
                    i = base + r
                    w = 0.0
                    dw = 0.0
                    if i < m:
                        v = Y[i, j]
                        if not math.isnan(v):
                            d = v - loc
                            u = d / scale
                            if abs(u) < 1.0:
                                s = 1.0 - u * u
                                w = s * s
                                dw = d * w
                    sh_a[r] = w
                    sh_b[r] = dw
                cuda.syncthreads()
                total, moment = _add_in_order(sh_a, sh_b, min(TILE, m - base), total, moment)
                cuda.syncthreads()
            if total == 0.0:
                break
            step = moment / total
            loc += step
            if abs(step) <= 1e-3:
                break
        # the midvariance around it (calls/spreads.py's biweight_midvariance: c = 9)
        mad = _abs_dev_median(S, j, n, loc)
        scale = max(9.0 * mad, 1e-3)
        inside_n = 0
        u_sum = 0.0
        num = 0.0
        den = 0.0
        for base in range(0, m, TILE):
            for r in range(t, TILE, TPB):
                i = base + r
                uu = 0.0
                nn = 0.0
                dd = 0.0
                if i < m:
                    v = Y[i, j]
                    if not math.isnan(v):
                        d = v - loc
                        u = d / scale
                        if abs(u) < 1.0:
                            inside_n += 1
                            uu = u
                            u2 = u * u
                            w = (1.0 - u2) * (1.0 - u2)
                            nn = d * d * (w * w)
                            dd = (1.0 - u2) * (1.0 - 5.0 * u2)
                sh_a[r] = uu
                sh_b[r] = nn
                sh_c[r] = dd
            cuda.syncthreads()
            u_sum, num, den = _add3_in_order(sh_a, sh_b, sh_c, min(TILE, m - base), u_sum, num, den)
            cuda.syncthreads()
        sh_in[t] = inside_n  # the threads' counts of the values inside, summed
        cuda.syncthreads()
        if t == 0:
            for r in range(1, TPB):
                inside_n += sh_in[r]
        cuda.syncthreads()
        if t == 0:
            out[j, 0] = spread * MAD_SCALE
            out[j, 1] = _quantile(S, j, n, 0.75) - _quantile(S, j, n, 0.25)
            out[j, 2] = mad * MAD_SCALE if u_sum == 0.0 else math.sqrt(inside_n * num / (den * den))


def _kernel():
    return cached_kernel(jit_nofma, _nofma_column_spreads)


def _group_width(m: int, total: int) -> int:
    """Columns per group: four (m,) float64 copies of each (the host's, the canonical one, the sorted one and a
    sort's scratch) within SPREAD_MEMORY_FRACTION of the free device memory; at least one."""
    free = make_backend(_current_device()).mem_info()[0]
    return max(1, min(total, int(free * SPREAD_MEMORY_FRACTION) // max(1, 32 * m)))


def _current_device() -> int:
    if simulating():
        return 0
    import cupy

    return int(cupy.cuda.Device().id)


def _columns(matrices: list[np.ndarray], c0: int, c1: int):
    """Columns c0:c1 of the matrices ``matrices`` (each (m, N_i)) side by side, on the device (m, c1 - c0)."""
    xp = device_module()
    m = matrices[0].shape[0]
    X = xp.empty((m, c1 - c0), order="F")
    at = 0  # the first column of the matrix in hand, counted over all of them
    for a in matrices:
        lo, hi = max(c0, at), min(c1, at + a.shape[1])
        if lo < hi:
            X[:, lo - c0:hi - c0] = device_copy(np.asfortranarray(a[:, lo - at:hi - at], dtype=np.float64))
        at += a.shape[1]
    return X


def _spreads_of(matrices: list[np.ndarray]) -> np.ndarray:
    """(sum of N_i, 3): the spreads of every column of the host matrices ``matrices`` (each (m, N_i)), the first's
    columns first; on the current device, a group of columns (of any of them) per launch."""
    xp = device_module()
    m = matrices[0].shape[0]
    total = sum(a.shape[1] for a in matrices)
    out = np.full((total, 3), np.nan)
    if total == 0 or m == 0:
        return out
    width = _group_width(m, total)
    kernel = _kernel()
    for c0 in range(0, total, width):
        c1 = min(total, c0 + width)
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
        kernel[c1 - c0, TPB](kernel_arg(Y), kernel_arg(S), kernel_arg(counts), kernel_arg(d_out))
        out[c0:c1] = d_out if xp is np else d_out.get()
        del Y, S, counts, d_out
    return out


def column_spreads_gpu(values: np.ndarray, more: np.ndarray | None = None) -> np.ndarray:
    """calls/spreads.py's ``column_spreads`` on the current GPU: (N, 3) scaled MAD, IQR and biweight midvariance's
    root of each column's finite values of ``values`` (m, N) (NaN where a column has none); (N, 6) with those of
    ``more`` (m, N) after them (both matrices' columns in the same launches)."""
    values = np.asarray(values)
    if more is None:
        return _spreads_of([values])
    more = np.asarray(more)
    if more.shape != values.shape:
        raise ValueError(f"column_spreads: shapes {values.shape} and {more.shape} differ")
    both = _spreads_of([values, more])
    N = values.shape[1]
    return np.hstack([both[:N], both[N:]])


__all__ = ["column_spreads_gpu"]
