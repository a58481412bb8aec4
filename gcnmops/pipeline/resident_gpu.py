"""The cn.MOPS pipeline's normalization and model on the GPU backend, device-resident: the counts are copied in
once, the normalized data and sINI stay on the device between the stages, and only results come back.

``normalize_and_fit_resident`` (stages.normalize_and_fit routes the EM on the GPU backend here):

1. the counts (m, N) float64 column-major go to the device in one copy;
2. normalization on the device in place (normalization.gpu.normalize_on_device; the CPU code where it decides),
   then the normalized matrix is copied back (it is a result) on a copy stream while the model runs;
3. the model on the device-resident matrix (model.gpu.fit_gpu_device): launches of ~m/8 rows, each one's
   outputs copied into pinned host arrays while the next computes;
4. the segmentation's statistic then reads the device-resident sINI (``DeviceModel``; stages.segment_and_call).

Where the resident stage does not fit the device (plan.resident_bytes over the memory budget), or several
devices are asked for, it answers None and the stages run from host memory instead (normalization.gpu's
host-to-host path, then model.gpu.fit_gpu's pinned double buffers); the segmentation copies its input in (its own
device buffers, ~5 x 8 bytes per value, are not chunked in either path). Integer copy numbers:
integer.calc_integer_copy_numbers(result, backend=Backend.GPU) refits every CNV in one launch.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..cuda import plan as memory_plan
from ..cuda.runtime import (Landing, copy_to_host_async, device_copy, device_module, ordered_stream,
                             pool_free_bytes, simulating)
from ..data import CountData
from ..model import fit_on_device
from ..model.spec import ModelOutput
from ..normalization import normalize_in_place_on_device, sample_coverage
from ..progress import timed_stage
from .plan import RunPlan
from .blocks import Genome, Normalized


@dataclass
class DeviceModel:
    """What the model leaves on the device for the next stage: ``sini`` (m, N) float64 column-major (cupy;
    numpy in the CUDA simulator), equal to the host ModelOutput.sini."""

    sini: object


def normalize_and_fit_resident(plan: RunPlan, data: CountData, timings: dict, out: ModelOutput | None = None,
                               devices=None, max_device_memory: int | None = None, gpu_stats: dict | None = None,
                               genome: Genome | None = None, normalized_out: np.ndarray | None = None,
                               **fit_options) -> tuple[Normalized, ModelOutput, DeviceModel] | None:
    """Normalization and model of the block ``data`` on the current GPU, device-resident: (Normalized with the
    host's normalizedData, host ModelOutput, DeviceModel); None where it does not fit the device or ``devices``
    names another device or several (the caller runs the stages from host memory). ``genome``: what the block
    needs of the rest of the matrix when it is some chromosomes (their totals and coverages; blocks.Genome).
    Stage seconds go into ``timings`` ("normalize", "model"), the sub-stage seconds and counts into
    ``gpu_stats`` (norm_* of the normalization, model_resident, model_launches, model_store_posteriors; the
    result's ``gpu_stats``).

    ``out``: host arrays the model's results are copied into, ``normalized_out`` the host array the normalized
    matrix is (both may be rows of whole-run arrays: ``cuda.runtime.rows_of_column_major``); ``fit_options``:
    ``chunk_rows`` (rows per launch), ``config`` and ``stats`` of model.gpu.fit_gpu_device.
    """
    gpu_stats = {} if gpu_stats is None else gpu_stats
    params = plan.params
    xp = device_module()
    counts = data.counts
    m, N = counts.shape
    n = plan.spec.folds.size
    copies = 2 if plan.uses_coverage else 1
    current = 0 if xp is np else xp.cuda.Device().id
    free = xp.cuda.Device().mem_info[0] + pool_free_bytes() if xp is not np else 1 << 40
    need = memory_plan.resident_bytes(m, N, n, params.return_posterior, input_copies=copies)
    if devices not in (None, current, [current]) or need > memory_plan.memory_budget(free, max_device_memory):
        return None
    copier = None
    with Landing() as landing:
        try:
            with timed_stage(timings, "normalize"):
                t0 = time.perf_counter()
                d_counts = device_copy(counts)
                gpu_stats["norm_h2d"] = time.perf_counter() - t0
                cov = np.ones(N)
                normalized, d_norm = counts, d_counts
                if plan.normalizes:
                    d_norm = d_counts.copy(order="F") if plan.uses_coverage else d_counts
                    normalized = normalize_in_place_on_device(
                        d_norm, counts, data.blocks(), norm_type=params.norm_type, size_factor=params.size_factor,
                        qu=params.norm_qu, qu_size_factor=params.qu_size_factor, timings=gpu_stats,
                        colsums=None if genome is None else genome.colsums)
                    if normalized is None:  # normalized on the device: copied back while the model runs
                        normalized, copier = _copy_back(d_norm, landing, normalized_out)
                    if plan.uses_coverage:
                        cov = sample_coverage(counts) if genome is None else genome.cov
            with timed_stage(timings, "model"):
                stats = fit_options.get("stats", {})
                options = {k: v for k, v in fit_options.items() if k in ("chunk_rows", "config")}
                fitted, resident = fit_on_device(plan.model_input(d_counts, d_norm), plan.model_cov(cov), plan.spec,
                                                 keep_post=params.return_posterior, out=out, stats=stats, **options)
                gpu_stats.update(model_resident=True, model_launches=stats["n_chunks"],
                                 model_store_posteriors=stats["store_posteriors"])
        finally:  # the normalized matrix has landed (or failed) before it is unlocked
            if copier is not None:
                copier.synchronize()
    return Normalized(normalized, None, cov), fitted, DeviceModel(sini=resident.sini)


def _copy_back(d, landing: Landing, into: np.ndarray | None = None):
    """(host array, stream) with the device matrix ``d`` being copied into it on its own stream after the work
    enqueued so far; the array is ``into`` (e.g. the block's rows of the whole run's matrix) or one from
    ``landing`` (page-locked until it is closed); synchronize the stream before reading the array. Synchronous
    in the simulator."""
    host = landing.empty(d.shape) if into is None else into
    if simulating():
        copy_to_host_async(host, d, None)
        return host, None
    stream = ordered_stream()
    copy_to_host_async(host, d, stream)
    return host, stream


__all__ = ["normalize_and_fit_resident", "DeviceModel"]
