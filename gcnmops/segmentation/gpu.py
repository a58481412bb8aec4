"""cn.mops's fast segmentation with the per-position statistic on a CUDA GPU; segments identical to segmentation/cpu.py.

The heavy part of ``cpu.segment_columns_arrays`` is p_i, the largest -log t tail over ~38 growing
windows, for every candidate position of every (chromosome, sample) vector. Here it runs on the GPU, one
thread per candidate position, from the same ``register_jitable`` source as the CPU (segmentation/kernels.py:
``prefix_sums``, ``is_candidate``, ``scan_position``; exact/tdist.py) compiled by numba.cuda. The segments' means
(R's long double mean(), exact/rstats.py; one thread per segment) and medians (R's median(); one block per
segment, radix select on the values' bits) are computed on the GPU too, from the vectors the statistic ran on. The rest stays on the host (numba, parallel over
vectors; segmentation/host.py's passes, as the CPU's): cleaning, eps (0.75 quantile of |diff|), the merge thresholds
and the variance before the GPU pass; local maxima, the breakpoint threshold and merging after it.

Identical segments. The kernels ask NVVM for no FMA contraction (cuda/nofma.py; checked in the PTX
locally) and the prefix sums run in the CPU's order, so the window arithmetic follows the CPU's; the t tail
is R's pt() with glibc's exp, log and log1p (exact/tdist.py), as on the CPU. Measured on an H100: GPU p_i within 2.2e-13 relative of the CPU's at BM-A
scale (2.5e-14 at BM-B, <= 8e-15 on the golden cases), the same best window everywhere. Each GPU value stands
for the interval p (1 -+ TAU), TAU = 1e-9. The breakpoints depend on p only through comparisons (local maxima:
p_r > p_i among neighbours; the type-7 quantile of the local-maximum statistic; stat > threshold), so the
host recomputes with the CPU code, exactly, only the positions whose intervals leave one of those
decisions open: neighbours whose comparison is undecided, and local maxima whose interval overlaps the
span [T_lo, T_up] that holds the order statistics the threshold is made of (T_lo = the lo-th order statistic
of the lower ends, T_up = the (lo+1)-th of the upper ends). Every other position lies surely below or above
both order statistics with its GPU value as with its exact one, so the counts below/above them, the
threshold and every decision equal those of the all-exact statistic, which segmentation/cpu.py's result equals by
construction (its own screening keeps the same invariant). The recomputation is one CPU tail per position
(the exact tail of the GPU's best window, ``_exact_p``); sINI near zero gives many exact ties between
neighbours, so up to ~17% of the candidates are recomputed (BM-A: 4.5M of 25.9M, ~0.2 s on 16 cores).

Residual assumption: the GPU value is within TAU of the CPU's. It holds unless two windows of one position
have tails within rounding of each other and that decides the window loop's stop or its maximum; then the
GPU's best window can differ from the CPU's (``full_recompute=True`` re-runs the whole CPU scan instead of the
tail of the GPU's window for every recomputed position).

Layout: the (block, sample) vectors one after the other in the column-major order of the matrix's columns cut
at the blocks (vector v = sample * nblocks + block; ``HostVectors``), which is the (m, N) column-major matrix
itself where the blocks cover its rows in order. With the sINI already on the device (the device-resident
pipeline) and no vector to clean, the per-vector constants are computed there too (``device_prepare``, one
thread per vector) and nothing is copied in or rearranged; otherwise the host cleans the vectors into that layout
(``prepare_vectors``) and it is copied in once. p comes back in the same order; the segments are reported in
the output order (task = block * N + sample).
"""
from __future__ import annotations

import math
import threading
import time
from functools import partial
from typing import NamedTuple

import numpy as np
import pandas as pd
from numba import float64, int32, int64, njit, prange
from numba.extending import register_jitable

from ..cuda.nofma import jit_nofma
from ..cuda.runtime import Landing, device_copy, device_module, kernel_arg, make_backend
from ..errors import InputError
from ..exact.rstats import ld_mean, mean_of_two, quantile7_low_index
from .host import (EPS_QUANTILE, SELECT_SAMPLE, abs_diffs, breakpoint_count, clean, dirt, fill_segments,
                   has_neighbourhood, kth_pair_with_zeros, local_half_width, quantile7_sampled, segment_bounds,
                   segment_ends_sparse, vector_constants, vector_scale, window_scratch)
from .interface import (checked_columns, label_tasks, output_arrays, report_cleaning, resolve_params,
                        segment_frame)
from ..exact.tdist import t_neglog_upper
from .kernels import (candidate_range, is_candidate, jump_exceeds, prefix_sums, scan_position, window_count,
                      window_t)

try:  # module level: the kernels' ``cuda`` must be a global (the CUDA simulator swaps module globals)
    from numba import cuda
except Exception:  # noqa: BLE001 - numba without its CUDA target
    cuda = None

#: a GPU p stands for [p (1 - TAU), p (1 + TAU)]; measured GPU/CPU differences are ~1e-14 relative
TAU = 1e-9
THREADS_PER_BLOCK = 128
#: kernels with one thread per vector or per segment (few threads, long sequential loops) use small blocks, so that
#: they spread over every multiprocessor
SPREAD_THREADS_PER_BLOCK = 32
#: the statistic comes back in this many parts (the host finishes one while the GPU computes the next) ...
STATISTIC_GROUPS = 4
#: ... where there are at least this many candidate positions
GROUPED_MIN_CANDIDATES = 1_000_000
#: the best window's half-width (max_int is checked against its range)
JSTAR_DTYPE = np.int16


def simulating() -> bool:
    from ..cuda.runtime import simulating as _sim

    return _sim()


# ---------------------------------------------------------------------------------------------------------
# host, before the GPU pass
# ---------------------------------------------------------------------------------------------------------

class HostVectors(NamedTuple):
    """Every cleaned (block, sample) vector one after the other in the column-major order of the matrix's columns
    cut at the blocks (vector v = sample * nblocks + block), and the per-vector constants."""
    xt: np.ndarray        #: the vectors, one after the other
    offs: np.ndarray      #: vector v is xt[offs[v]:offs[v + 1]]
    coffs: np.ndarray     #: its candidate positions are entries coffs[v]:coffs[v + 1] of p
    vec_eps: np.ndarray
    vec_V: np.ndarray
    vec_thi: np.ndarray
    vec_tlo: np.ndarray
    dirty: np.ndarray     #: host.clean's code per vector


@register_jitable
def vector_rows(v, nb, firsts, ends):
    """(sample, first row, end row) of vector v = sample * nb + block."""
    b = v % nb
    return v // nb, firsts[b], ends[b]


def vector_of_task(nb: int, N: int) -> np.ndarray:
    """v[task]: the vector (sample * nb + block) of output task = block * N + sample."""
    task = np.arange(nb * N, dtype=np.int64)
    return (task % N) * nb + task // N


@register_jitable
def candidate_count(x, min_seg, eps):
    """The number of candidate positions of x (``is_candidate``, without a branch)."""
    nc = 0
    lo, hi = candidate_range(x.shape[0], min_seg)
    for i in range(lo, hi):
        nc += jump_exceeds(x, i, eps)
    return nc


@njit(parallel=True, cache=True, error_model="numpy", nogil=True)
def _prepare_all(values, firsts, ends, offs, eps_given, eps, default_t, t_hi, t_lo, min_seg, xt, vec_eps,
                 vec_V, vec_thi, vec_tlo, dirty, ncand):
    """Per vector: the cleaned copy into xt[offs[v]:], eps, merge thresholds, variance (as cpu._final_ends
    computes them) and the number of candidate positions."""
    nb = firsts.shape[0]
    for v in prange(offs.shape[0] - 1):
        s, f, e = vector_rows(v, nb, firsts, ends)
        m = e - f
        o = offs[v]
        x = xt[o:o + m]
        for i in range(m):
            x[i] = values[f + i, s]
        dirty[v] = clean(x)
        ve, th, tl, V = eps, t_hi, t_lo, 0.0
        if m > 0:
            ve, th, tl, V = vector_constants(x, eps_given, eps, default_t, t_hi, t_lo, np.empty(m))
        ncand[v] = candidate_count(x, min_seg, ve)
        vec_eps[v] = ve
        vec_V[v] = V
        vec_thi[v] = th
        vec_tlo[v] = tl


def task_offsets(counts: np.ndarray) -> np.ndarray:
    """offsets[task] = the sum of counts before task (offsets[-1]: the total)."""
    offs = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offs[1:])
    return offs


def prepare_vectors(values: np.ndarray, firsts: np.ndarray, ends: np.ndarray, params: dict) -> HostVectors:
    """Clean every (block, sample) vector of the (m, N) order-F ``values`` into the layout of ``HostVectors``, with
    its eps, merge thresholds, variance and candidate count (``params``: interface.resolve_params's)."""
    N = values.shape[1]
    nv = firsts.size * N
    offs = task_offsets(np.tile(ends - firsts, N))
    # pageable on purpose: page-locked xt made the host passes over it 4-5x slower on the H100 machine
    # (prepare 0.25 -> 0.85 s, fill 0.16 -> 0.83 s at BM-A) for 0.1 s saved on the copy
    xt = np.empty(int(offs[-1]))
    vec_eps, vec_V, vec_thi, vec_tlo = (np.empty(nv) for _ in range(4))
    dirty = np.zeros(nv, dtype=np.int8)
    ncand = np.zeros(nv, dtype=np.int64)
    if nv:
        _prepare_all(values, firsts, ends, offs, params["eps_given"], params["eps"], params["default_t"],
                     params["t_hi"], params["t_lo"], params["min_seg"], xt, vec_eps, vec_V, vec_thi, vec_tlo, dirty,
                     ncand)
    return HostVectors(xt, offs, task_offsets(ncand), vec_eps, vec_V, vec_thi, vec_tlo, dirty)


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


_PREPARE_KERNEL: list = []

#: vectors up to this long are prepared on the GPU, one thread each; longer ones on the host, whose cores run the
#: sequential sums (R's mean, Welford's variance) several times faster than one GPU thread
DEVICE_PREPARE_MAX_ROWS = 200_000


def _tiles(firsts: np.ndarray, ends: np.ndarray, m: int) -> bool:
    """Whether the blocks cover rows 0..m-1 in order, each row once."""
    return firsts.size > 0 and firsts[0] == 0 and ends[-1] == m and bool((firsts[1:] == ends[:-1]).all())


def device_prepare(device_values, values: np.ndarray, firsts: np.ndarray, ends: np.ndarray, params: dict):
    """(HostVectors, xt on the device) as ``prepare_vectors`` makes them, from the device-resident (m, N)
    column-major ``device_values`` (equal to ``values``): the per-vector constants are computed on the device and
    the matrices themselves are the layout (vector v = sample * nb + block is a column cut at a block), so
    nothing is copied. None where this does not apply (``prepare_vectors`` then): blocks that do not cover the
    rows in order, vectors longer than DEVICE_PREPARE_MAX_ROWS, or some vector needs cleaning (Inf, NaN)."""
    M, N = values.shape
    if (not _tiles(firsts, ends, M) or int((ends - firsts).max()) > DEVICE_PREPARE_MAX_ROWS
            or not values.flags.f_contiguous):
        return None
    nv = firsts.size * N
    offs = task_offsets(np.tile(ends - firsts, N))
    with _LOCK:
        if not _PREPARE_KERNEL:
            _PREPARE_KERNEL.append(jit_nofma(_nofma_prepare))
    xp = device_module()
    d_x = device_layout(device_values, firsts, ends)
    out = [np.zeros(nv, dtype=np.int8)] + [np.zeros(nv) for _ in range(4)] + [np.zeros(nv, dtype=np.int64)]
    d_out = [xp.asarray(a) for a in out]
    tpb = SPREAD_THREADS_PER_BLOCK
    _PREPARE_KERNEL[0][_blocks_for(nv, tpb, 1 << 16), tpb](
        kernel_arg(d_x), kernel_arg(xp.asarray(offs)), params["eps_given"], params["eps"], params["default_t"],
        params["t_hi"], params["t_lo"], params["min_seg"], kernel_arg(xp.empty(d_x.size)),
        kernel_arg(xp.empty(nv * SELECT_SAMPLE)), *(kernel_arg(d) for d in d_out))
    dirty, vec_eps, vec_V, vec_thi, vec_tlo, ncand = (a if xp is np else xp.asnumpy(a) for a in d_out)
    if dirty.any():
        return None
    return HostVectors(values.reshape(-1, order="F"), offs, task_offsets(ncand), vec_eps, vec_V, vec_thi, vec_tlo,
                       dirty), d_x


# ---------------------------------------------------------------------------------------------------------
# GPU kernels (the CPU's source: kernels.prefix_sums, kernels.is_candidate, kernels.scan_position)
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


_KERNELS: dict = {}
_LOCK = threading.Lock()


def kernels(nw: int):
    """(prefix, mask, stat) kernels; ``nw`` = window count (local scratch size), compiled once per value."""
    with _LOCK:
        k = _KERNELS.get(nw)
        if k is None:
            k = _KERNELS[nw] = _build_kernels(nw)
        return k


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


def device_layout(device_values, firsts: np.ndarray, ends: np.ndarray):
    """xt (``HostVectors``'s layout) of a device-resident (m, N) column-major matrix: the matrix itself where the
    blocks cover its rows in order, else a concatenation of the vectors' column slices, made on the device."""
    if _tiles(firsts, ends, device_values.shape[0]):
        return device_values.reshape(-1, order="F")
    xp = device_module()
    N = device_values.shape[1]
    parts = [device_values[f:e, k] for k in range(N) for f, e in zip(firsts.tolist(), ends.tolist())]
    return xp.concatenate(parts) if parts else xp.empty(0)


def _blocks_for(n: int, tpb: int, cap: int) -> int:
    return max(1, min(cap, (n + tpb - 1) // tpb))


def _copy_in(xt: np.ndarray, device_xt):
    """xt on the device: ``device_xt`` where given, else a copy (numba's in the simulator, cupy's on a GPU)."""
    if device_xt is not None:
        return device_xt
    if simulating():
        return cuda.to_device(xt)
    return device_copy(xt)  # page-locked in place for the copy: ~5x a pageable copy's speed


def _compact(d_mask):
    """(d_idx, n_idx, d_p, d_j): the flat positions of the candidates (mask != 0) on the device, their number
    and the output buffers of the statistic kernel."""
    if simulating():
        idx_h = np.flatnonzero(d_mask.copy_to_host()).astype(np.int64)
        n_idx = idx_h.size
        return (cuda.to_device(idx_h), n_idx, cuda.device_array(max(n_idx, 1), np.float64),
                cuda.device_array(max(n_idx, 1), JSTAR_DTYPE))
    import cupy as cp

    idx = cp.flatnonzero(cp.asarray(d_mask))
    n_idx = int(idx.size)
    return idx, n_idx, cp.empty(max(n_idx, 1), dtype=cp.float64), cp.empty(max(n_idx, 1), dtype=JSTAR_DTYPE)


class Statistic:
    """The statistic of every candidate position (layout order: the candidates of vector t are entries
    coffs[t]:coffs[t + 1] of ``p`` and ``jstar``), arriving on the host group by group: tasks
    ``bounds[g]:bounds[g + 1]`` are there once ``wait(g)`` returns. ``close()`` waits for everything still in
    flight and unlocks the host arrays; call it whatever happens."""

    def __init__(self, p: np.ndarray, jstar: np.ndarray, bounds: np.ndarray, events=(), landing=None):
        self.p, self.jstar, self.bounds = p, jstar, bounds
        self._events = list(events)
        self._landing = landing

    def wait(self, g: int) -> None:
        if self._events:
            self._events[g].synchronize()

    def close(self) -> None:
        for e in self._events:
            e.synchronize()
        if self._landing is not None:
            self._landing.close()


def task_groups(coffs: np.ndarray, groups: int) -> np.ndarray:
    """Task boundaries of up to ``groups`` consecutive groups of tasks with about equal candidate counts."""
    ntask = coffs.size - 1
    want = np.searchsorted(coffs, coffs[-1] * np.arange(1, groups) / groups, side="right") - 1
    return np.unique(np.concatenate([[0], np.clip(want, 0, ntask), [ntask]])).astype(np.int64)


def gpu_statistic(xt: np.ndarray, offs: np.ndarray, coffs: np.ndarray, vec_eps: np.ndarray, vec_V: np.ndarray,
                  min_seg: int, delta: int, max_int: int, w: float, timings: dict | None = None, device_xt=None,
                  groups: int = 1) -> Statistic:
    """(p, jstar) of every candidate position in layout order (``scan_position``), on the GPU; the
    candidates of task t are entries coffs[t]:coffs[t + 1]. Only these come back (compacted), in ``groups`` parts
    of about equal size (``task_groups``) computed and copied one after another, so that the host can finish a
    part while the next is computed. ``device_xt``: xt already on the device (``device_layout``), used instead of
    copying ``xt`` in. ``timings`` (optional dict) receives the stages' seconds and the candidate count."""
    prefix, mask_k, stat_k = kernels(window_count(min_seg, max_int))
    jinv, jnn, jc = window_scratch(min_seg, max_int, w)[:3]
    total = int(offs[-1])
    t = {} if timings is None else timings
    t0 = time.perf_counter()
    d_x = _copy_in(xt, device_xt)
    be = make_backend()  # on a GPU: cupy's pool, whose frees never wait for the kernels in flight (numba's do)
    d_offs = be.to_device(offs)
    d_eps = be.to_device(vec_eps)
    d_V = be.to_device(vec_V)
    d_S = be.device_array(total, np.float64)
    d_Q = be.device_array(total, np.float64)
    d_mask = be.device_array(total, np.int8)
    sync = cuda.synchronize
    sync()
    t["seg_h2d"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    tpb = 32 if simulating() else THREADS_PER_BLOCK
    prefix[_blocks_for(offs.size - 1, 1, 1 << 20), 1](d_x, d_offs, d_S, d_Q)
    mask_k[_blocks_for(total, tpb, 4096), tpb](d_x, d_offs, d_eps, min_seg, d_mask)
    sync()
    t["seg_prefix_mask"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    d_idx, n_idx, d_p, d_j = _compact(d_mask)
    t["seg_compact"] = time.perf_counter() - t0
    if n_idx != int(coffs[-1]):
        raise RuntimeError(f"GPU candidates ({n_idx}) != host candidates ({int(coffs[-1])})")  # internal invariant
    t["seg_candidates"] = n_idx
    bounds = task_groups(coffs, groups)
    if simulating():
        tables = [cuda.to_device(a) for a in (jinv, jnn, jc)]
        p, jstar = np.empty(n_idx), np.empty(n_idx, dtype=JSTAR_DTYPE)
        for g in range(bounds.size - 1):
            a, b = int(coffs[bounds[g]]), int(coffs[bounds[g + 1]])
            if b > a:
                stat_k[_blocks_for(b - a, tpb, 1 << 20), tpb](d_idx[a:b], b - a, d_x, d_S, d_Q, d_offs, d_V, min_seg,
                                                              delta, max_int, w, *tables, d_p[a:b], d_j[a:b])
                p[a:b] = d_p[a:b].copy_to_host()
                jstar[a:b] = d_j[a:b].copy_to_host()
        return Statistic(p, jstar, bounds)
    import cupy as cp

    landing = Landing()
    p = landing.empty(n_idx)
    jstar = landing.empty(n_idx, JSTAR_DTYPE)
    events = []
    try:  # every part queued on the default stream (kernel, then its copy back), nothing waited for here
        args = [kernel_arg(a) for a in (d_x, d_S, d_Q, d_offs, d_V)]
        tables = [kernel_arg(cp.asarray(a)) for a in (jinv, jnn, jc)]
        for g in range(bounds.size - 1):
            a, b = int(coffs[bounds[g]]), int(coffs[bounds[g + 1]])
            if b > a:
                stat_k[_blocks_for(b - a, tpb, 1 << 20), tpb](kernel_arg(d_idx[a:b]), b - a, *args, min_seg, delta,
                                                              max_int, w, *tables, kernel_arg(d_p[a:b]),
                                                              kernel_arg(d_j[a:b]))
                d_p[a:b].get(out=p[a:b], blocking=False)
                d_j[a:b].get(out=jstar[a:b], blocking=False)
            e = cp.cuda.Event(disable_timing=True)
            e.record()
            events.append(e)
    except BaseException:
        cp.cuda.Device().synchronize()
        landing.close()
        raise
    return Statistic(p, jstar, bounds, events, landing)


@njit(cache=True, error_model="numpy")
def _exact_p(S, Q, i, m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf, qbuf, js, full, memo):
    """The CPU's p_i: the CPU's exact tail of the GPU's best window ``js`` (the window arithmetic is
    IEEE-identical, so this is the CPU's own maximum unless two of the position's windows have tails within
    rounding of each other), or with ``full`` (or js < 0) the whole CPU scan (cpu._final_ends). ``memo``:
    (t, dof, tail) of the last tail computed here, reused for the same (t, dof): the two sides of a one-region
    spike often have the same window statistic."""
    if js >= 0 and not full:
        t, dof = window_t(S, Q, i, js, w, V)
        if not (t == memo[0] and dof == memo[1]):
            memo[0] = t
            memo[1] = dof
            memo[2] = t_neglog_upper(t, dof)
        return memo[2]
    return scan_position(S, Q, i, m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf, qbuf)[0]


@njit(parallel=True, cache=True, error_model="numpy", nogil=True)
def cpu_statistic(xt, offs, coffs, vec_eps, vec_V, min_seg, delta, max_int, w):
    """What ``gpu_statistic`` computes, on the CPU: (p, jstar), p bit for bit the CPU's (for tests)."""
    ntask = offs.shape[0] - 1
    p = np.zeros(coffs[ntask])
    jstar = np.full(coffs[ntask], -1, dtype=np.int16)
    for task in prange(ntask):
        o = offs[task]
        m = offs[task + 1] - o
        x = xt[o:o + m]
        S = np.empty(m)
        Q = np.empty(m)
        prefix_sums(x, S, Q)
        jinv, jnn, jc, ybuf, ebuf, qbuf = window_scratch(min_seg, max_int, w)
        c = coffs[task]
        for i in range(m):
            if is_candidate(x, i, min_seg, vec_eps[task]):
                p[c], jstar[c] = scan_position(S, Q, i, m, min_seg, delta, max_int, w, vec_V[task], jinv, jnn, jc,
                                               ybuf, ebuf, qbuf)
                c += 1
    return p, jstar


# ---------------------------------------------------------------------------------------------------------
# host, after the GPU pass
# ---------------------------------------------------------------------------------------------------------

@njit(cache=True, error_model="numpy")
def _statuses(pos, p, n, m, exact, tau, h, status, slo, sup):
    """Local-maximum status of every candidate c (position pos[c], statistic p[c]; the others are 0) from the
    intervals (exact values: points) and the bounds of its statistic: status 0 = surely a local maximum
    (stat = p), 1 = surely not (stat = 0), 2 = undecided (stat = 0 or p: bounds [0, p_up]). Only candidates can
    be neighbours that decide: a 0 is never above a positive value."""
    for c in range(n):
        v = p[c]
        i = pos[c]
        vlo = v if exact[c] else v * (1.0 - tau)
        vup = v if exact[c] else v * (1.0 + tau)
        st = 0
        if has_neighbourhood(i, h, m) and v > 0.0:
            r = c - 1
            while r >= 0 and pos[r] >= i - h:
                st = _neighbour_status(p[r], exact[r], tau, vlo, vup, st)
                r -= 1
            r = c + 1
            while st != 1 and r < n and pos[r] <= i + h:
                st = _neighbour_status(p[r], exact[r], tau, vlo, vup, st)
                r += 1
        status[c] = st
        if st == 0:
            slo[c] = vlo
            sup[c] = vup
        elif st == 1:
            slo[c] = 0.0
            sup[c] = 0.0
        else:
            slo[c] = 0.0
            sup[c] = vup


@register_jitable
def _neighbour_status(pr, exact_r, tau, vlo, vup, st):
    """The status so far (``_statuses``) after one more neighbour with statistic pr: 1 once a neighbour is surely
    larger, 2 while one may be larger."""
    if st == 1:
        return 1
    rlo = pr if exact_r else pr * (1.0 - tau)
    rup = pr if exact_r else pr * (1.0 + tau)
    if rlo > vup:  # surely p_r > p_i
        return 1
    if not rup <= vlo:  # p_r > p_i possible: undecided (unless another neighbour decides)
        return 2
    return st


@register_jitable
def _threshold_ranks(alpha, m):
    """(r_lo, r_hi): the 0-based ranks of the order statistics the breakpoint threshold is made of (-1: none)."""
    if alpha < 1.0:
        r_lo = quantile7_low_index(m, 1.0 - alpha)
        return r_lo, r_lo + 1 if r_lo + 1 < m else r_lo
    k = breakpoint_count(alpha, m)
    if k > 0:
        return m - k, m - k
    return -1, -1


@njit(cache=True, error_model="numpy")
def _mark_open(pos, p, n, m, exact, tau, h, r_lo, r_hi, status, slo, sup, wk):
    """Mark (status bit 4) the candidates that must be exact: those whose statistic's bounds overlap [T_lo, T_up]
    (the span of the order statistics r_lo, r_hi of all m positions) and their undecided neighbours. Returns
    the number of marks. ``wk``: scratch (n)."""
    _statuses(pos, p, n, m, exact, tau, h, status, slo, sup)
    for c in range(n):
        wk[c] = slo[c]
    t_low = kth_pair_with_zeros(wk, n, m - n, r_lo)[0]
    for c in range(n):
        wk[c] = sup[c]
    t_up = kth_pair_with_zeros(wk, n, m - n, r_hi)[0]
    nmark = 0
    for c in range(n):
        if sup[c] >= t_low and slo[c] <= t_up and sup[c] > 0.0:
            if not exact[c]:
                status[c] |= 4
                nmark += 1
            if (status[c] & 3) == 2:
                i = pos[c]
                for r in range(c - 1, -1, -1):
                    if pos[r] < i - h:
                        break
                    if not exact[r] and p[r] > 0.0:
                        status[r] |= 4
                        nmark += 1
                for r in range(c + 1, n):
                    if pos[r] > i + h:
                        break
                    if not exact[r] and p[r] > 0.0:
                        status[r] |= 4
                        nmark += 1
    return nmark


@njit(cache=True, error_model="numpy")
def _candidate_positions(x, min_seg, eps, pos):
    """pos[c] = the position of the c-th candidate of x (``is_candidate``); returns their number. ``pos``: length
    >= len(x)."""
    n = 0
    lo, hi = candidate_range(x.shape[0], min_seg)
    for i in range(lo, hi):  # no branch: a quarter of the positions are candidates, in no predictable order
        pos[n] = i
        n += jump_exceeds(x, i, eps)
    return n


@njit(cache=True, error_model="numpy")
def _finish_one(x, pos, p, js, n, full, V, t_hi, t_lo, alpha, no_merge, min_seg, delta, max_int, w, tau, flags,
                exact, status, fscratch, work, jinv, jnn, jc, ybuf, ebuf, qbuf):
    """Breakpoints and merging of one clean vector x from its GPU statistic p[c] at the candidate positions pos[c]
    (c < n; p modified in place where recomputed). flags (zero on entry): 1 where a final segment ends. Returns
    (count, recomputed). ``fscratch``: float64 of length >= 2 len(x) + 4 n; ``work``: len(x).

    Candidates whose statistic's bounds overlap [T_lo, T_up] (the span of the order statistics the threshold
    is made of) get exact CPU values, and so do the undecided neighbours of such positions; bounds only
    shrink when values are recomputed, so one round leaves every overlapping position exact with a decided
    local-maximum status (see the module's docstring for why that fixes every decision)."""
    m = x.shape[0]
    if m == 0:
        return 0, 0
    S = fscratch[0:m]
    Q = fscratch[m:2 * m]
    slo = fscratch[2 * m:2 * m + n]
    sup = fscratch[2 * m + n:2 * m + 2 * n]
    wk = fscratch[2 * m + 2 * n:2 * m + 3 * n]
    stat = fscratch[2 * m + 3 * n:2 * m + 4 * n]
    h = local_half_width(min_seg)
    memo = np.full(3, math.nan)
    # exact where known: no window evaluated gives 0 on both sides; non-finite values (never seen) are
    # recomputed so that the intervals stay finite
    nre = 0
    for c in range(n):
        exact[c] = p[c] == 0.0
        if math.isnan(p[c]) or math.isinf(p[c]):
            if nre == 0:
                prefix_sums(x, S, Q)
            p[c] = _exact_p(S, Q, pos[c], m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf, qbuf, js[c],
                            full, memo)
            exact[c] = True
            nre += 1
    r_lo, r_hi = _threshold_ranks(alpha, m)
    if r_lo >= 0 and _mark_open(pos, p, n, m, exact, tau, h, r_lo, r_hi, status, slo, sup, wk):
        if nre == 0:
            prefix_sums(x, S, Q)
        for c in range(n):
            if status[c] & 4:
                p[c] = _exact_p(S, Q, pos[c], m, min_seg, delta, max_int, w, V, jinv, jnn, jc, ybuf, ebuf, qbuf,
                                js[c], full, memo)
                exact[c] = True
                nre += 1
    # the rest of cpu._final_ends on the (now decision-equivalent) statistic
    return segment_ends_sparse(x, pos, p, n, flags, h, alpha, no_merge, t_hi, t_lo, min_seg, stat, work), nre


@njit(parallel=True, cache=True, error_model="numpy", nogil=True)
def _finish_all(xt, offs, coffs, p_c, j_c, full, vec_eps, vec_V, vec_thi, vec_tlo, alpha, no_merge, min_seg, delta,
                max_int, w, tau, flags, counts, recomputed, first_task, end_task):
    """``_finish_one`` of vectors first_task:end_task (``HostVectors``'s order; p_c modified in place where
    recomputed; flags zero on entry)."""
    for task in prange(first_task, end_task):
        o = offs[task]
        m = offs[task + 1] - o
        x = xt[o:o + m]
        c0 = coffs[task]
        n = coffs[task + 1] - c0
        pos = np.empty(m, dtype=np.int64)
        _candidate_positions(x, min_seg, vec_eps[task], pos)
        jinv, jnn, jc, ybuf, ebuf, qbuf = window_scratch(min_seg, max_int, w)
        c, nre = _finish_one(x, pos, p_c[c0:c0 + n], j_c[c0:c0 + n], n, full, vec_V[task], vec_thi[task],
                             vec_tlo[task], alpha, no_merge, min_seg, delta, max_int, w, tau, flags[o:o + m],
                             np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.int8), np.empty(2 * m + 4 * n),
                             np.empty(m), jinv, jnn, jc, ybuf, ebuf, qbuf)
        counts[task] = c
        recomputed[task] = nre


@njit(parallel=True, cache=True, error_model="numpy", nogil=True)
def _fill_all(xt, offs, flags, out_off, out_start, out_end, out_mean, out_median):
    """Start, end (1-based, block-relative), mean and median of every final segment (host.fill_segments on
    ``HostVectors``'s layout; vector v's segments go to out_off[v]:)."""
    for task in prange(offs.shape[0] - 1):
        f = offs[task]
        e = offs[task + 1]
        fill_segments(xt[f:e], flags[f:e], out_off[task], out_start, out_end, out_mean, out_median)


@njit(parallel=True, cache=True, error_model="numpy", nogil=True)
def _bounds_all(offs, flags, out_off, out_start, out_end):
    """Start and end (1-based, block-relative) of every final segment (host.segment_bounds per vector; vector v's
    segments go to out_off[v]:)."""
    for task in prange(offs.shape[0] - 1):
        segment_bounds(flags[offs[task]:offs[task + 1]], out_off[task], out_start, out_end)


#: the sign bit of an int64 (ordered_key)
_SIGN_BIT = np.int64(-(2 ** 63))
#: bins of the segment medians' radix select: one digit of 8 bits, 8 passes over a 64-bit key
RADIX_BINS = 256
#: threads of each segment's block in the medians' kernel (the CUDA simulator runs a few: each is a Python thread)
MEDIAN_THREADS_PER_BLOCK = 256


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


_VALUES_KERNELS: list = []


def _segment_values_kernels():
    """(means kernel, medians kernel), compiled once."""
    with _LOCK:
        if not _VALUES_KERNELS:
            _VALUES_KERNELS.extend((jit_nofma(_nofma_segment_means), jit_nofma(_nofma_segment_medians)))
        return _VALUES_KERNELS


def _bits(d_x):
    """The device vector ``d_x`` (contiguous float64) read as int64, a kernel argument: a view on a GPU, a copy
    in the simulator (whose device arrays are host arrays or numba's stand-ins for device arrays)."""
    if simulating():
        host = d_x.copy_to_host() if hasattr(d_x, "copy_to_host") else np.asarray(d_x)
        return kernel_arg(np.ascontiguousarray(host).view(np.int64))
    return kernel_arg(device_module().asarray(d_x).view(np.int64))


def device_segment_values(d_x, vec: HostVectors, flags: np.ndarray, out_off_v: np.ndarray, out: dict,
                          task_first: np.ndarray, counts: np.ndarray) -> None:
    """Fill out["start"], out["end"] on the host (a scan of ``flags``; vector v's segments go to out_off_v[v]:)
    and out["mean"], out["median"] on the device from ``d_x``, the vectors already there (``HostVectors``'s
    layout). ``task_first``, ``counts``: where each output task's vector starts in that layout, and its number of
    segments."""
    _bounds_all(vec.offs, flags, out_off_v, out["start"], out["end"])
    seg_first = np.repeat(task_first, counts) + (out["start"] - 1)
    seg_len = out["end"] - out["start"] + 1
    n = seg_first.size
    be = make_backend()
    d_first, d_len = be.to_device(seg_first), be.to_device(seg_len)
    d_mean = be.device_array(n, np.float64)
    d_median = be.device_array(n, np.float64)
    means, medians = _segment_values_kernels()
    tpb = SPREAD_THREADS_PER_BLOCK
    means[_blocks_for(n, tpb, 1 << 16), tpb](d_x, d_first, d_len, d_mean)
    tpb = 8 if simulating() else MEDIAN_THREADS_PER_BLOCK
    medians[min(n, 1 << 16), tpb](d_x, _bits(d_x), d_first, d_len, d_median)
    d_mean.copy_to_host(out["mean"])
    d_median.copy_to_host(out["median"])


def statistic_difference(values, blocks, min_seg=3, delta=20, max_int=40, cyber_weight=50) -> dict:
    """The GPU's statistic against the CPU's over every candidate position of ``values`` (diagnostics)."""
    prm = resolve_params(0.05, None, min_seg, None, delta, max_int, cyber_weight)
    values = np.asarray(values, dtype=np.float64, order="F")
    firsts = np.array([b for b, _ in blocks], dtype=np.int64)
    ends = np.array([e for _, e in blocks], dtype=np.int64)
    vec = prepare_vectors(values, firsts, ends, prm)
    args = (vec.xt, vec.offs, vec.coffs, vec.vec_eps, vec.vec_V, prm["min_seg"], prm["delta"], prm["max_int"],
            prm["w"])
    t: dict = {}
    stat = gpu_statistic(*args, timings=t)
    stat.close()
    pg, jg = stat.p, stat.jstar
    t0 = time.perf_counter()
    pc, jc = cpu_statistic(*args)
    t_cpu = time.perf_counter() - t0
    ok = pc > 0
    rel = np.abs(pg[ok] - pc[ok]) / pc[ok]
    return dict(candidates=int(pc.size), zero_pattern_equal=bool(np.array_equal(pg == 0, pc == 0)),
                max_rel_p=float(rel.max()) if rel.size else 0.0,
                p_bit_equal_fraction=float(np.mean(pg == pc)) if pc.size else 1.0,
                best_window_equal_fraction=float(np.mean(jg == jc)) if pc.size else 1.0,
                cpu_statistic_s=round(t_cpu, 3))


# ---------------------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------------------

def _finish(vec: HostVectors, stat: Statistic, params: dict, full_recompute: bool, t: dict):
    """(flags, counts, recomputed) of every vector from its candidates' statistic (``_finish_one``), group by
    group as the statistic arrives (t["seg_wait"]: the seconds spent waiting for it)."""
    ntask = vec.offs.size - 1
    flags = np.zeros(vec.xt.size, dtype=np.int8)
    counts = np.zeros(ntask, dtype=np.int64)
    recomputed = np.zeros(ntask, dtype=np.int64)
    t["seg_wait"] = 0.0
    for g in range(stat.bounds.size - 1):
        t0 = time.perf_counter()
        stat.wait(g)
        t["seg_wait"] += time.perf_counter() - t0
        _finish_all(vec.xt, vec.offs, vec.coffs, stat.p, stat.jstar, bool(full_recompute), vec.vec_eps, vec.vec_V,
                    vec.vec_thi, vec.vec_tlo, params["alpha"], params["no_merge"], params["min_seg"],
                    params["delta"], params["max_int"], params["w"], TAU, flags, counts, recomputed,
                    stat.bounds[g], stat.bounds[g + 1])
    return flags, counts, recomputed


def segment_columns_arrays_gpu(values: np.ndarray, blocks, alpha=0.05, seg_median_t=None, min_seg=3, eps=None,
                               delta=20, max_int=40, cyber_weight=50, *, timings: dict | None = None,
                               statistic=None, full_recompute: bool = False, device_values=None) -> dict:
    """``cpu.segment_columns_arrays`` with the statistic on the GPU: the same dict of arrays (block,
    sample, start, end, mean, median), identical values. ``timings`` (optional dict) receives the stages'
    seconds and counts (candidates, recomputed). ``statistic``: a replacement for ``gpu_statistic`` (same
    arguments; tests pass perturbed CPU values). ``full_recompute``: positions whose decisions the GPU values
    leave open are recomputed by the whole CPU scan instead of the CPU tail of the GPU's best window.
    ``device_values``: ``values`` already on the device (cupy; numpy in the simulator), the GPU's input when
    no vector needed cleaning (no Inf/NaN), so nothing is copied in."""
    values, firsts, ends = checked_columns(values, blocks)
    N = values.shape[1]
    params = resolve_params(alpha, seg_median_t, min_seg, eps, delta, max_int, cyber_weight)
    if params["max_int"] > np.iinfo(JSTAR_DTYPE).max:
        raise InputError(f"max_int must be at most {np.iinfo(JSTAR_DTYPE).max} for the GPU segmentation.")
    t = {} if timings is None else timings
    t0 = time.perf_counter()
    prepared = None if device_values is None else device_prepare(device_values, values, firsts, ends, params)
    if prepared is not None:
        vec, d_x = prepared  # d_x: the vectors on the device, where the statistic and the segment values are computed
        t["seg_device_prepare"] = time.perf_counter() - t0
    else:
        vec = prepare_vectors(values, firsts, ends, params)
        t["seg_prepare"] = time.perf_counter() - t0
        report_cleaning(vec.dirty)
        d_x = None
        if statistic is None:
            t0 = time.perf_counter()
            if device_values is not None and not vec.dirty.any():
                d_x = device_layout(device_values, firsts, ends)
                t["seg_device_layout"] = time.perf_counter() - t0
            else:
                d_x = _copy_in(vec.xt, None)
                t["seg_copy_in"] = time.perf_counter() - t0
    if statistic is None:
        statistic = partial(gpu_statistic, device_xt=d_x,
                            groups=STATISTIC_GROUPS if vec.coffs[-1] >= GROUPED_MIN_CANDIDATES else 1)
    nv = vec.offs.size - 1
    if vec.coffs[-1]:
        stat = statistic(vec.xt, vec.offs, vec.coffs, vec.vec_eps, vec.vec_V, params["min_seg"], params["delta"],
                         params["max_int"], params["w"], timings=t)
        if not isinstance(stat, Statistic):  # a replacement gives (p, jstar)
            stat = Statistic(*stat, np.array([0, nv]))
    else:
        stat = Statistic(np.zeros(0), np.zeros(0, dtype=JSTAR_DTYPE), np.array([0, nv]))
    t0 = time.perf_counter()
    try:
        flags, counts_v, recomputed = _finish(vec, stat, params, full_recompute, t)
    finally:
        stat.close()
    t["seg_finish"] = time.perf_counter() - t0
    t["seg_recomputed"] = int(recomputed.sum())
    t0 = time.perf_counter()
    vt = vector_of_task(firsts.size, N)
    counts = counts_v[vt]  # output order: task = block * N + sample
    out_off, out = output_arrays(counts)
    out_off_v = np.empty(nv, dtype=np.int64)
    out_off_v[vt] = out_off[:-1]  # where each vector's segments go
    if out_off[-1] and d_x is not None:
        device_segment_values(d_x, vec, flags, out_off_v, out, vec.offs[:-1][vt], counts)
    elif out_off[-1]:  # a replaced statistic (tests): the vectors are on the host only
        _fill_all(vec.xt, vec.offs, flags, out_off_v, out["start"], out["end"], out["mean"], out["median"])
    label_tasks(out, counts, N)
    t["seg_fill"] = time.perf_counter() - t0
    return out


def segment_columns_gpu(values: np.ndarray, blocks, alpha=0.05, seg_median_t=None, min_seg=3, eps=None, delta=20,
                        max_int=40, cyber_weight=50, *, timings: dict | None = None,
                        device_values=None) -> pd.DataFrame:
    """``cpu.segment_columns`` with the statistic on the GPU (identical DataFrame); ``device_values`` as in
    ``segment_columns_arrays_gpu``."""
    out = segment_columns_arrays_gpu(values, blocks, alpha=alpha, seg_median_t=seg_median_t, min_seg=min_seg,
                                     eps=eps, delta=delta, max_int=max_int, cyber_weight=cyber_weight,
                                     timings=timings, device_values=device_values)
    return segment_frame(out)


__all__ = ["segment_columns_gpu", "segment_columns_arrays_gpu", "gpu_statistic", "cpu_statistic",
           "statistic_difference", "device_layout", "kernels", "simulating", "TAU"]
