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
is the continued fraction of exact/tdist_cf.py (within 3e-14 of R's pt(), which the host's exact recomputation
uses, exact/tdist.py), with libdevice's log/exp/lgamma: GPU p_i within ~1e-13 relative of the CPU's, the same
best window everywhere (benchmarks/RESULTS.md has the measurements). Each GPU value stands
for the interval p (1 -+ TAU), TAU = 1e-9. The breakpoints depend on p only through comparisons (local maxima:
p_r > p_i among neighbours; the type-7 quantile of the local-maximum statistic; stat > threshold), so the
host recomputes with the CPU code, exactly, only the positions whose intervals leave one of those
decisions open: neighbours whose comparison is undecided, and local maxima whose interval overlaps the
span [T_lo, T_up] that holds the order statistics the threshold is made of (T_lo = the lo-th order statistic
of the lower ends, T_up = the (lo+1)-th of the upper ends). Every other position lies surely below or above
both order statistics with its GPU value as with its exact one, so the counts below/above them, the
threshold and every decision equal those of the all-exact statistic, which segmentation/cpu.py's result equals by
construction (its own screening keeps the same invariant). The recomputation is one CPU tail per position
(the exact tail of the GPU's best window, ``_exact_p``). sINI near zero gives many exact ties between
neighbours: where two neighbours have the same GPU value and their best windows the same (t, dof), their exact
values are equal too, so that comparison is decided without recomputing either (and where one of them is
recomputed, so is the other: the local maxima compare them equal as before; finish.py).

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

This module drives; the CUDA kernels are in segmentation/device_kernels.py, the host pass after the statistic
(breakpoints, recomputation, merging) in segmentation/finish.py.
"""
from __future__ import annotations

import time
from functools import partial
from typing import NamedTuple

import numpy as np
import pandas as pd
from numba import njit, prange
from numba.extending import register_jitable

from ..cuda.config import (DEVICE_PREPARE_MAX_ROWS, SEGMENT_MASK_MAX_BLOCKS, SEGMENT_MEDIAN_MAX_BLOCKS,
                           SEGMENT_MEDIAN_THREADS_PER_BLOCK, SEGMENT_MEDIAN_THREADS_PER_BLOCK_SIM, SEGMENT_PREFIX_MAX_BLOCKS,
                           SEGMENT_PREFIX_THREADS_PER_BLOCK, SEGMENT_SPREAD_MAX_BLOCKS,
                           SEGMENT_SPREAD_THREADS_PER_BLOCK, SEGMENT_STAT_MAX_BLOCKS, SEGMENT_THREADS_PER_BLOCK,
                           SEGMENT_THREADS_PER_BLOCK_SIM)
from ..cuda.runtime import Landing, device_copy, device_module, kernel_arg, make_backend
from ..errors import InputError
from .device_kernels import _segment_values_kernels, kernels, prepare_kernel
from .finish import _bounds_all, _fill_all, _finish_all
from .host import SELECT_SAMPLE, clean, dirt, vector_constants, window_scratch
from .interface import (checked_columns, label_tasks, output_arrays, report_cleaning, resolve_params,
                        segment_frame)
from .kernels import candidate_count, is_candidate, prefix_sums, scan_position, window_count

try:  # module level: the kernels' ``cuda`` must be a global (the CUDA simulator swaps module globals)
    from numba import cuda
except Exception:  # noqa: BLE001 - numba without its CUDA target
    cuda = None

#: a GPU p stands for [p (1 - TAU), p (1 + TAU)]; measured GPU/CPU differences are ~1e-14 relative
TAU = 1e-9
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


@njit(parallel=True, cache=True, error_model="numpy", nogil=True)
def _prepare_all(values, firsts, ends, offs, eps_given, eps, default_t, t_hi, t_lo, min_seg, xt, vec_eps,
                 vec_V, vec_thi, vec_tlo, dirty, ncand, in_place):
    """Per vector: the cleaned copy into xt[offs[v]:], eps, merge thresholds, variance (as cpu._final_ends
    computes them) and the number of candidate positions. ``in_place``: xt is ``values`` itself (column-major,
    its blocks tiling the rows), read, not written: a vector that needs cleaning is only marked dirty (the
    caller then copies)."""
    nb = firsts.shape[0]
    for v in prange(offs.shape[0] - 1):
        s, f, e = vector_rows(v, nb, firsts, ends)
        m = e - f
        o = offs[v]
        x = xt[o:o + m]
        if in_place:
            dirty[v] = dirt(x)
            if dirty[v]:
                continue
        else:
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
    """Clean every (block, sample) vector of the (m, N) ``values`` (order F, or rows of an order-F matrix) into the
    layout of ``HostVectors``, with its eps, merge thresholds, variance and candidate count (``params``:
    interface.resolve_params's). Where ``values`` is column-major, its blocks tile its rows and no value needs
    cleaning, ``xt`` is ``values`` itself (read only), not a copy."""
    N = values.shape[1]
    nv = firsts.size * N
    offs = task_offsets(np.tile(ends - firsts, N))
    vec_eps, vec_V, vec_thi, vec_tlo = (np.empty(nv) for _ in range(4))
    dirty = np.zeros(nv, dtype=np.int8)
    ncand = np.zeros(nv, dtype=np.int64)
    if nv and values.flags.f_contiguous and values.flags.writeable and _tiles(firsts, ends, values.shape[0]):
        # the matrix is the layout already: read in place where no vector needs cleaning (no copy of it)
        xt = values.reshape(-1, order="F")
        _prepare_all(values, firsts, ends, offs, params["eps_given"], params["eps"], params["default_t"],
                     params["t_hi"], params["t_lo"], params["min_seg"], xt, vec_eps, vec_V, vec_thi, vec_tlo, dirty,
                     ncand, True)
        if not dirty.any():
            return HostVectors(xt, offs, task_offsets(ncand), vec_eps, vec_V, vec_thi, vec_tlo, dirty)
    # pageable on purpose: page-locked xt made the host passes over it several times slower for little saved on
    # the copy (benchmarks/RESULTS.md)
    xt = np.empty(int(offs[-1]))
    if nv:
        _prepare_all(values, firsts, ends, offs, params["eps_given"], params["eps"], params["default_t"],
                     params["t_hi"], params["t_lo"], params["min_seg"], xt, vec_eps, vec_V, vec_thi, vec_tlo, dirty,
                     ncand, False)
    return HostVectors(xt, offs, task_offsets(ncand), vec_eps, vec_V, vec_thi, vec_tlo, dirty)




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
    if not _tiles(firsts, ends, M) or int((ends - firsts).max()) > DEVICE_PREPARE_MAX_ROWS:
        return None
    nv = firsts.size * N
    offs = task_offsets(np.tile(ends - firsts, N))
    xp = device_module()
    d_x = device_layout(device_values, firsts, ends)
    out = [np.zeros(nv, dtype=np.int8)] + [np.zeros(nv) for _ in range(4)] + [np.zeros(nv, dtype=np.int64)]
    d_out = [xp.asarray(a) for a in out]
    tpb = SEGMENT_SPREAD_THREADS_PER_BLOCK
    prepare_kernel()[_blocks_for(nv, tpb, SEGMENT_SPREAD_MAX_BLOCKS), tpb](
        kernel_arg(d_x), kernel_arg(xp.asarray(offs)), params["eps_given"], params["eps"], params["default_t"],
        params["t_hi"], params["t_lo"], params["min_seg"], kernel_arg(xp.empty(d_x.size)),
        kernel_arg(xp.empty(nv * SELECT_SAMPLE)), *(kernel_arg(d) for d in d_out))
    dirty, vec_eps, vec_V, vec_thi, vec_tlo, ncand = (a if xp is np else xp.asnumpy(a) for a in d_out)
    if dirty.any():
        return None
    xt = np.asfortranarray(values).reshape(-1, order="F")  # a copy only of rows of a larger matrix
    return HostVectors(xt, offs, task_offsets(ncand), vec_eps, vec_V, vec_thi, vec_tlo, dirty), d_x


# ---------------------------------------------------------------------------------------------------------
# the statistic on the GPU (the kernels: device_kernels.py)
# ---------------------------------------------------------------------------------------------------------

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
    tpb = SEGMENT_THREADS_PER_BLOCK_SIM if simulating() else SEGMENT_THREADS_PER_BLOCK
    ptb = SEGMENT_PREFIX_THREADS_PER_BLOCK
    prefix[_blocks_for(offs.size - 1, ptb, SEGMENT_PREFIX_MAX_BLOCKS), ptb](d_x, d_offs, d_S, d_Q)
    mask_k[_blocks_for(total, tpb, SEGMENT_MASK_MAX_BLOCKS), tpb](d_x, d_offs, d_eps, min_seg, d_mask)
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
                stat_k[_blocks_for(b - a, tpb, SEGMENT_STAT_MAX_BLOCKS), tpb](
                    d_idx[a:b], b - a, d_x, d_S, d_Q, d_offs, d_V, min_seg, delta, max_int, w, *tables, d_p[a:b],
                    d_j[a:b])
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
                stat_k[_blocks_for(b - a, tpb, SEGMENT_STAT_MAX_BLOCKS), tpb](
                    kernel_arg(d_idx[a:b]), b - a, *args, min_seg, delta, max_int, w, *tables, kernel_arg(d_p[a:b]),
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
# the final segments' means and medians on the GPU (the host pass before them: finish.py)
# ---------------------------------------------------------------------------------------------------------

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
    tpb = SEGMENT_SPREAD_THREADS_PER_BLOCK
    means[_blocks_for(n, tpb, SEGMENT_SPREAD_MAX_BLOCKS), tpb](d_x, d_first, d_len, d_mean)
    tpb = SEGMENT_MEDIAN_THREADS_PER_BLOCK_SIM if simulating() else SEGMENT_MEDIAN_THREADS_PER_BLOCK
    medians[min(n, SEGMENT_MEDIAN_MAX_BLOCKS), tpb](d_x, _bits(d_x), d_first, d_len, d_median)
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
    values, firsts, ends = checked_columns(values, blocks, keep_rows=True)  # rows of a larger matrix: read in place
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
