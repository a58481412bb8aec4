"""The CUDA kernels of the GPU segmentation (segmentation/gpu.py drives them), each from the CPU's
``register_jitable`` source and compiled without FMA contraction (cuda/nofma.py), built once through cuda.kernels'
cache:

- ``_nofma_prepare``: the per-vector constants of vectors already on the device (``gpu.device_prepare``);
- ``_nofma_prefix``, ``_nofma_mask``, ``_nofma_stat`` (``kernels``): prefix sums, the candidate mask and the
  per-position statistic (``gpu.gpu_statistic``);
- ``_nofma_segment_means``, ``_nofma_segment_medians``: R's mean() and median() of the final segments
  (``gpu.device_segment_values``).
"""
from __future__ import annotations

import numpy as np
from numba import float64, int32, int64
from numba.extending import register_jitable

from ..cuda.kernels import cached_kernel
from ..cuda.nofma import jit_nofma
from ..exact.rstats import ld_mean, mean_of_two
from .host import EPS_QUANTILE, SELECT_SAMPLE, abs_diffs, dirt, quantile7_sampled, vector_scale
from .kernels import candidate_count, is_candidate, prefix_sums, scan_position

try:  # module level: the kernels' ``cuda`` must be a global (the CUDA simulator swaps module globals)
    from numba import cuda
except Exception:  # noqa: BLE001 - numba without its CUDA target
    cuda = None


# ---------------------------------------------------------------------------------------------------------
# the per-vector constants on the device
# ---------------------------------------------------------------------------------------------------------

def _nofma_prepare(x, offs, eps_given, eps, default_t, t_hi, t_lo, min_seg, work, sample, dirty, vec_eps, vec_V,
                   vec_thi, vec_tlo, ncand):
    """``_prepare_all`` on the device, one thread per vector, for vectors that need no cleaning (dirty[v] != 0:
    the others are left as they are); ``work``: scratch like x; ``sample``: SELECT_SAMPLE values of scratch per
    vector (the eps selection's sample). The host's formulas and selection, so the values are the host's bit for
    bit."""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for v in range(start, offs.shape[0] - 1, stride):
        o = offs[v]
        m = offs[v + 1] - o
        xv = x[o:o + m]
        d = dirt(xv)
        dirty[v] = d
        if d != 0 or m == 0:
            continue
        ve = eps
        if not eps_given:
            wv = work[o:o + m]
            abs_diffs(xv, wv)
            ve = quantile7_sampled(wv, m - 1, EPS_QUANTILE, sample[v * SELECT_SAMPLE:(v + 1) * SELECT_SAMPLE])
        th, tl, V = vector_scale(xv, default_t, t_hi, t_lo)
        ncand[v] = candidate_count(xv, min_seg, ve)
        vec_eps[v] = ve
        vec_V[v] = V
        vec_thi[v] = th
        vec_tlo[v] = tl


def prepare_kernel():
    """The kernel of ``_nofma_prepare``, built once (cuda.kernels' cache)."""
    return cached_kernel(jit_nofma, _nofma_prepare)


# ---------------------------------------------------------------------------------------------------------
# the statistic (the CPU's source: kernels.prefix_sums, kernels.is_candidate, kernels.scan_position)
# ---------------------------------------------------------------------------------------------------------

@register_jitable
def locate(offs, k):
    """(task, o, m, i): the vector holding flat position k of the layout (binary search in
    ``offs``), its offset and length, and k's position in it."""
    lo = 0
    hi = offs.shape[0] - 2
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if offs[mid] <= k:
            lo = mid
        else:
            hi = mid - 1
    o = offs[lo]
    return lo, o, offs[lo + 1] - o, k - o


def kernels(nw: int):
    """(prefix, mask, stat) kernels; ``nw`` = window count (local scratch size), built once per value (cuda.kernels'
    cache)."""
    return cached_kernel(_build_kernels, nw)


def _build_kernels(NW: int):
    def _nofma_prefix(xt, offs, St, Qt):
        """S, Q = running sums of x, x^2 per vector, in the CPU's order (one thread per vector)."""
        task = cuda.grid(1)
        if task < offs.shape[0] - 1:
            o = offs[task]
            e = offs[task + 1]
            prefix_sums(xt[o:e], St[o:e], Qt[o:e])

    def _nofma_mask(xt, offs, vec_eps, min_seg, mask):
        """mask[k] = 1 where position k is a candidate (the CPU's test)."""
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        total = offs[offs.shape[0] - 1]
        for k in range(start, total, stride):
            task, o, m, i = locate(offs, k)
            mask[k] = 1 if is_candidate(xt[o:o + m], i, min_seg, vec_eps[task]) else 0

    def _nofma_stat(idx, n_idx, xt, St, Qt, offs, vec_V, min_seg, delta, max_int, w, jinv, jnn, jc, p, jstar):
        """p[r], jstar[r] = scan_position of candidate position idx[r] (r-th candidate, in layout order)."""
        ybuf = cuda.local.array(NW, float64)
        ebuf = cuda.local.array(NW, float64)
        qbuf = cuda.local.array(NW, float64)
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for r in range(start, n_idx, stride):
            task, o, m, i = locate(offs, idx[r])
            val, js = scan_position(St[o:o + m], Qt[o:o + m], i, m, min_seg, delta, max_int, w, vec_V[task], jinv,
                                    jnn, jc, ybuf, ebuf, qbuf)
            p[r] = val
            jstar[r] = js

    return (jit_nofma(_nofma_prefix), jit_nofma(_nofma_mask), jit_nofma(_nofma_stat))


# ---------------------------------------------------------------------------------------------------------
# the final segments' means and medians
# ---------------------------------------------------------------------------------------------------------

#: the sign bit of an int64 (ordered_key)
_SIGN_BIT = np.int64(-(2 ** 63))
#: bins of the segment medians' radix select: one digit of 8 bits, 8 passes over a 64-bit key
RADIX_BINS = 256


@register_jitable
def ordered_key(b):
    """The int64 whose bits, read as an unsigned number, order as the float64 of bits ``b`` does (any non-NaN;
    -0.0 just below +0.0): the sign bit flipped for non-negative values, every bit for negative ones."""
    return b ^ _SIGN_BIT if b >= 0 else ~b


def _nofma_segment_means(xt, seg_first, seg_len, out_mean):
    """R's long double mean() of every final segment (host.fill_segments's formula, bit for bit), one thread per
    segment (the sums run in order): segment k is xt[seg_first[k]:seg_first[k] + seg_len[k]]."""
    for k in range(cuda.grid(1), seg_first.shape[0], cuda.gridsize(1)):
        a = seg_first[k]
        out_mean[k] = ld_mean(xt[a:a + seg_len[k]], seg_len[k])


def _nofma_segment_medians(xt, keys, seg_first, seg_len, out_median):
    """R's median() of every final segment (``median_inplace``'s values: the middle order statistic, for even
    lengths mean_of_two of the two middle ones), one block per segment. Each order statistic is found by radix
    select on the values' ordered keys (``keys``: xt's bits as int64): 8 passes, each counting the next 8 bits
    of the keys that share the bits chosen so far in a shared histogram, so nothing is copied or reordered;
    then a thread holding that key reads its value."""
    hist = cuda.shared.array(RADIX_BINS, int32)
    state = cuda.shared.array(2, int64)
    found = cuda.shared.array(2, float64)
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    for k in range(cuda.blockIdx.x, seg_first.shape[0], cuda.gridDim.x):
        a = seg_first[k]
        n = seg_len[k]
        for j in range(2 - n % 2):  # the upper middle (j = 0; rank n // 2), for even n the lower one too
            rank = n // 2 - j
            target = 0
            for pss in range(8):
                shift = 56 - 8 * pss
                for b in range(tid, RADIX_BINS, nt):
                    hist[b] = 0
                cuda.syncthreads()
                for i in range(tid, n, nt):
                    v = ordered_key(keys[a + i])
                    if pss == 0 or ((v ^ target) >> min(shift + 8, 63)) == 0:
                        cuda.atomic.add(hist, (v >> shift) & (RADIX_BINS - 1), 1)
                cuda.syncthreads()
                if tid == 0:
                    below = 0
                    d = 0
                    while below + hist[d] <= rank:
                        below += hist[d]
                        d += 1
                    state[0] = target | (np.int64(d) << shift)
                    state[1] = rank - below
                cuda.syncthreads()
                target = state[0]
                rank = state[1]
                cuda.syncthreads()
            for i in range(tid, n, nt):
                if ordered_key(keys[a + i]) == target:
                    found[j] = xt[a + i]  # equal keys: equal values, whichever thread writes
            cuda.syncthreads()
        if tid == 0:
            out_median[k] = found[0] if n % 2 == 1 else mean_of_two(found[1], found[0])
        cuda.syncthreads()


def _segment_values_kernels():
    """(means kernel, medians kernel), built once (cuda.kernels' cache)."""
    return cached_kernel(jit_nofma, _nofma_segment_means), cached_kernel(jit_nofma, _nofma_segment_medians)


__all__ = ["prepare_kernel", "kernels", "locate", "ordered_key", "RADIX_BINS"]
