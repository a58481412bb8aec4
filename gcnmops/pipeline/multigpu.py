"""Every GPU of a machine: the chromosomes split, in order, into as many runs of consecutive whole chromosomes as
there are worker threads, of rows as even as such a split allows (``chromosome_groups``), each device running its
groups through the stage order (stages.run_block) on its own host thread, device-resident as on one GPU
(resident_gpu.py: the counts copied in once, the sINI read where the model left it), the results landing in place
in whole-matrix arrays: each group's counts are copied to its GPU straight from their rows of the input matrix, and
its normalized data, model outputs and individual calls are written by the stages into their rows of the whole
run's matrices (``BlockOut``; no per-group host copies), the input page-locked once for the run, the results'
fresh pages supplied by every core but not locked (cuda.runtime.touched_empty says why).

cn.mops normalizes and segments per chromosome and fits every region on its own, so whole chromosomes are a block
that needs of the rest only what ``stages.Genome`` holds (each sample's total count, norm 2's coverages), computed
first on the whole matrix. A group of many chromosomes runs as the whole matrix does on one GPU (the device's
stages pipelined with the host's over its chromosomes); one chromosome a block paid each stage's fixed costs and
left the device idle during the host passes (one GPU: 2.97 s whole, 6.07 s in chromosome blocks; RESULTS.md,
"Seventh session"). A device's thread takes the largest group not yet taken, makes it the thread's current device
(cuda.runtime.on_device) and runs the stages there: normalization, the model, the segmentation's statistic on that
GPU, their host passes on the thread's share of the cores (numba's thread count is per thread) and a cupy memory
pool of its own (cuda.runtime.thread_memory_pool). Each device may have ``per_device`` such threads (one by
default: cuda/config.py BLOCKS_PER_DEVICE says why). The call tables are gathered in chromosome order
(blocks.BlockTables): the result is the single-GPU and the CPU result, bit for bit.

``cn_mops(devices=...)`` with several GPUs runs here (pipeline.cnmops.run_mops); a single chromosome's rows are
shared among the devices by the model only.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from ..cuda.config import BLOCKS_PER_DEVICE
from ..cuda.probe import Backend
from ..cuda.runtime import Landing, in_threads, make_backend, on_device, thread_memory_pool, touched_empty
from ..data import CountData
from ..model.spec import ModelOutput
from ..normalization.checks import count_matrix
from ..normalization.kernels import column_coverages
from ..progress import timed_stage
from ..result import CNVDetectionResult
from .blocks import BlockOut, BlockTables, Genome, Normalized, Regions, column_totals, genome_of
from .plan import RunPlan
from .stages import MODEL_DONE, model_result, run_block

#: the stages whose seconds each device adds up (the run's timings take the slowest device's)
_STAGES = ("normalize", "model", "segment_call")


def run_on_devices(plan: RunPlan, data: CountData, devices: Sequence[int], timings: dict,
                   per_device: int = BLOCKS_PER_DEVICE, groups: int | None = None) -> CNVDetectionResult:
    """The run on every device of ``devices`` (ids), groups of consecutive whole chromosomes placed largest first
    (``chromosome_groups``: one per worker thread); the result of ``stages.run_block`` on the whole matrix.
    ``per_device``: worker threads per device, each taking groups (with two, one group's host passes overlap
    another's GPU stages); ``groups``: how many groups the chromosomes are split into (default one per thread).
    ``timings`` gain "genome" (the whole-matrix sums), "landing" (the whole-run arrays made), "devices" (the
    workers' wall time), and per stage the slowest device's seconds (its threads' seconds added up);
    ``gpu_stats`` holds each device's wall time (``device_<id>_seconds``: its slowest thread's), chromosome and
    group counts, how many groups ran device-resident (``device_<id>_resident``), and its groups' stage and
    sub-stage seconds added up (``device_<id>_segment_call``, ``device_<id>_seg_finish``, ...)."""
    if per_device < 1:
        raise ValueError("per_device must be at least 1")
    regions = Regions.of(data)
    blocks = chromosome_groups(regions.blocks, groups or len(devices) * per_device)
    with timed_stage(timings, "genome"):
        counts = data.counts  # the whole matrix's sums, as normalize_chromosomes and sample_coverage take them
        genome = genome_of(plan.normalizes, plan.uses_coverage, data.n_samples,
                           column_totals(counts, numba.get_num_threads()) if plan.normalizes else None,
                           column_coverages(count_matrix(counts)) if plan.uses_coverage else None)
    locks = Landing()  # on GPUs the input page-locked once: each group's rows cross at DMA speed
    gpu = plan.backend is Backend.GPU
    with timed_stage(timings, "landing"), ThreadPoolExecutor(1) as helper:
        # the results' pages supplied on every core while the driver locks the input's
        made = helper.submit(_Landing, data.n_regions, data.n_samples, len(plan.params.classes),
                             plan.params.return_posterior, touched_empty if gpu else _empty)
        if gpu and counts.flags.f_contiguous:
            locks.lock(counts)
        landing = made.result()
    order = sorted(range(len(blocks)), key=lambda k: blocks[k][0] - blocks[k][1])  # largest first, stable
    taken = iter(order)
    take = threading.Lock()
    failed = threading.Event()  # a device failed: the others take no more groups
    stats_of: dict[int, dict] = {d: {"chromosomes": 0, "groups": 0, "resident": 0, "copied": 0, "seconds": 0.0}
                                 for d in devices}
    share = max(1, numba.get_num_threads() // (len(devices) * per_device))
    listener = MODEL_DONE.get()
    models_left = [len(blocks)]
    wake = threading.Event()  # every group's model has landed, or a device failed
    if not blocks:
        wake.set()

    def model_done(b0: int, b1: int, stats: dict, part: CNVDetectionResult) -> None:
        """A group's model has run (in its worker, before its segmentation): what did not land in place is
        copied in; once every group's has, the listener gets the whole run's model part."""
        copied = landing.put(b0, b1, part)
        with take:
            stats["copied"] += copied
            models_left[0] -= 1
            if models_left[0] == 0:
                wake.set()

    def stage_model() -> None:  # the listener (the writers) starts on the model's matrices beside the segmentation
        wake.wait()
        if not failed.is_set():
            try:
                listener(landing.result(plan, regions, genome, timings, {}, calls=False))
            except BaseException:
                failed.set()
                raise

    def work(device: int) -> None:
        stats = stats_of[device]
        t0 = time.perf_counter()
        try:
            numba.set_num_threads(share)  # this thread's parallel loops: its share of the cores
            with on_device(device), thread_memory_pool() if gpu else contextlib.nullcontext():
                limit = {}  # the device's memory shared among its threads
                if gpu and per_device > 1:
                    limit["max_device_memory"] = make_backend(device).mem_info()[1] // per_device
                while not failed.is_set():
                    with take:
                        k = next(taken, None)
                    if k is None:
                        break
                    b0, b1, chromosomes = blocks[k]
                    block_timings: dict = {}
                    token = MODEL_DONE.set(functools.partial(model_done, b0, b1, stats))
                    try:
                        result = run_block(plan, [data.rows(b0, b1, copy=not gpu)], genome=genome,
                                           timings=block_timings, devices=[device], evidence=False,
                                           out=landing.into(b0, b1), **limit)
                    finally:
                        MODEL_DONE.reset(token)
                    copied = landing.put(b0, b1, result, calls=True)
                    gathered.put(k, result)
                    with take:
                        stats["chromosomes"] += chromosomes
                        stats["groups"] += 1
                        stats["copied"] += copied
                        stats["resident"] += bool(result.gpu_stats.get("model_resident"))
                        for name, value in {**block_timings, **result.gpu_stats}.items():
                            if isinstance(value, (int, float)) and not isinstance(value, bool):
                                stats[name] = stats.get(name, 0) + value
        except BaseException:
            failed.set()
            wake.set()
            raise
        finally:
            with take:
                stats["seconds"] = max(stats["seconds"], time.perf_counter() - t0)

    try:
        with BlockTables(len(blocks), regions.sample_names, plan.segments) as gathered, \
                timed_stage(timings, "devices"):
            threads = {f"gcnmops-gpu{d}-{k}": (lambda d=d: work(d)) for d in devices for k in range(per_device)}
            if listener is not None:
                threads["gcnmops-stage-model"] = stage_model
            in_threads(threads)
    finally:
        locks.close()
    for stage in _STAGES:
        timings[stage] = timings.get(stage, 0.0) + max(s.get(stage, 0.0) for s in stats_of.values())
    gpu_stats = {f"device_{d}_{key}": value for d, s in stats_of.items() for key, value in s.items()}
    result = landing.result(plan, regions, genome, timings, gpu_stats)
    segmentation, cnvs, cnvr = gathered.tables()
    # the qualities' evidence is made from the landed matrices when first asked for, as for a run on one device
    return result.replace(segmentation=segmentation, cnvs=cnvs, cnvr=cnvr)


def chromosome_groups(blocks: Sequence[tuple[str, int, int]], parts: int) -> list[tuple[int, int, int]]:
    """The chromosome blocks (name, first row, end row; consecutive) split in order into at most ``parts`` runs of
    whole chromosomes, the largest run's rows as few as such a split allows: (first row, end row, chromosomes)
    of each run."""
    sizes = [b1 - b0 for _, b0, b1 in blocks]
    if not sizes:
        return []

    def runs(cap: int) -> list[tuple[int, int]]:  # greedy: each run as long as fits ``cap`` rows
        out, first, rows = [], 0, 0
        for k, size in enumerate(sizes):
            if k > first and rows + size > cap:
                out.append((first, k))
                first, rows = k, 0
            rows += size
        out.append((first, len(sizes)))
        return out

    lo, hi = max(sizes), sum(sizes)
    while lo < hi:  # the least cap whose greedy split takes at most ``parts`` runs
        mid = (lo + hi) // 2
        if len(runs(mid)) <= max(parts, 1):
            hi = mid
        else:
            lo = mid + 1
    return [(blocks[i][1], blocks[j - 1][2], j - i) for i, j in runs(lo)]


def _empty(shape, dtype=np.float64) -> np.ndarray:
    return np.empty(shape, dtype=dtype, order="F")


class _Landing:
    """The whole run's matrices (column-major, from ``empty(shape, dtype)``: touched ones on a GPU), which
    every block's results land in, rows b0:b1: written there by the stages (``into``), else copied (``put``)."""

    def __init__(self, m: int, N: int, n: int, post: bool, empty):
        self.normalized = empty((m, N))
        self.sini = empty((m, N))
        self.individual = empty((m, N))
        self.cn = empty((m, N), np.int8)
        self.ini = empty((m,))
        self.lam = empty((m, n))
        self.alpha = empty((m, n))
        self.post = empty((m, n, N)) if post else None

    def into(self, b0: int, b1: int) -> BlockOut:
        """Rows b0:b1 of the matrices, for the stages to write the block's results into."""
        model = ModelOutput(lam=self.lam[b0:b1], alpha=self.alpha[b0:b1], sini=self.sini[b0:b1],
                            cn=self.cn[b0:b1], ini=self.ini[b0:b1],
                            post=None if self.post is None else self.post[b0:b1])
        return BlockOut(model=model, normalized=self.normalized[b0:b1], individual=self.individual[b0:b1])

    def put(self, b0: int, b1: int, r: CNVDetectionResult, calls: bool = False) -> int:
        """The block's model results (``calls``: its individual calls) that did not land in place (a path that
        made arrays of its own) copied in; how many were."""
        copied = 0
        pairs = [(self.individual, r.individual_call)] if calls else [
            (self.normalized, r.normalized_data), (self.sini, r.local_assessments), (self.cn, r.cn_index),
            (self.ini, r.ini_call), (self.lam, r.params["L"]), (self.alpha, r.params["A"]),
            (self.post, r.posterior_probs)]
        for whole, part in pairs:
            if whole is not None and not np.may_share_memory(whole, part):
                whole[b0:b1] = part
                copied += 1
        return copied

    def result(self, plan: RunPlan, regions: Regions, genome: Genome, timings: dict,
               gpu_stats: dict, calls: bool = True) -> CNVDetectionResult:
        """The whole run's result with empty call tables (they come from BlockTables); without the individual
        calls where not ``calls`` (the model's part)."""
        model = ModelOutput(lam=self.lam, alpha=self.alpha, sini=self.sini, cn=self.cn, ini=self.ini, post=self.post)
        cov = genome.cov if plan.uses_coverage else np.ones(len(regions.sample_names))
        part = model_result(plan, regions, Normalized(self.normalized, None, cov), model, timings, gpu_stats)
        return part.replace(individual_call=self.individual) if calls else part


__all__ = ["run_on_devices", "chromosome_groups"]
