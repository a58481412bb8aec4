"""The cn.MOPS pipeline on the GPU backend, device-resident: the counts are copied in once, the normalized
data and sINI stay on the device between the stages, and only results come back.

``normalize_and_fit_gpu`` (cnmops.run_mops routes backend "gpu" here):

1. the counts (m, N) float64 column-major go to the device in one copy;
2. normalization on the device in place (normalization.gpu.normalize_on_device; the CPU code where it decides),
   then the normalized matrix is copied back (it is a result) on a copy stream while the model runs;
3. the model on the device-resident matrix (model.gpu.fit_gpu_device): launches of ~m/8 rows, each one's
   outputs copied into pinned host arrays while the next computes;
4. ``call_cnvs_gpu``: the segmentation's statistic on the device-resident sINI (segmentation/gpu.py; the host
   passes read the host copy), then the calls as calls.call_cnvs makes them.

Where the resident stage does not fit the device (plan.resident_bytes over the memory budget), or several
devices are asked for, the model runs chunked from host memory instead (fit_gpu's pinned double buffers):
normalization.gpu's host-to-host path, then fit_gpu; the segmentation copies its input in (its own device buffers,
~5 x 8 bytes per value, are not chunked in either path). Integer copy numbers:
integer.calc_integer_copy_numbers(result, backend="gpu") refits every CNV in one launch.
benchmarks/RESULTS.md, "Whole pipeline on the GPU", has the measurements.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..calls.cnvs import Calls, call_cnvs
from ..data import CountData
from ..cuda import plan as _plan
from ..model.gpu import fit_gpu, fit_gpu_device
from ..cuda.runtime import Landing, device_copy, device_module, simulating
from ..model.spec import ModelOutput, ModelSpec
from ..normalization.cpu import sample_coverage
from ..progress import timed_stage
from ..params import CnMopsParams
from ..segmentation.gpu import segment_columns_gpu

@dataclass
class DeviceModel:
    """What the model leaves on the device for the next stage: ``sini`` (m, N) float64 column-major (cupy;
    numpy in the CUDA simulator), equal to the host ModelOutput.sini."""

    sini: object


def normalize_and_fit_gpu(data: CountData, params: CnMopsParams, spec: ModelSpec, timings: dict,
                          model_cov_is_one: bool = False, out: ModelOutput | None = None, devices=None,
                          max_device_memory: int | None = None, gpu_stats: dict | None = None, **fit_options
                          ) -> tuple[np.ndarray, np.ndarray, ModelOutput, DeviceModel | None]:
    """Normalization and model of run_mops on the GPU: (normalizedData, cov, host ModelOutput, DeviceModel or
    None when the model ran from host memory). Stage seconds go into ``timings`` ("normalize", "model"), the
    sub-stage seconds and counts into ``gpu_stats`` (norm_* of the normalization, model_resident,
    model_launches, model_store_posteriors; the result's ``gpu_stats``).

    ``out``: host arrays the model's results are copied into; ``devices``, ``max_device_memory`` and
    ``fit_options`` as in fit_gpu (several devices: the chunked host path; the resident model takes
    ``chunk_rows`` (rows per launch), ``config`` and ``stats`` of them).
    """
    gpu_stats = {} if gpu_stats is None else gpu_stats
    xp = device_module()
    counts = data.counts
    m, N = counts.shape
    n = spec.folds.size
    copies = 2 if params.norm == 2 else 1
    free = xp.cuda.Device().mem_info[0] + xp.get_default_memory_pool().free_bytes() if xp is not np else 1 << 40
    need = _plan.resident_bytes(m, N, n, params.return_posterior, input_copies=copies)
    if devices not in (None, 0, [0]) or need > _plan.memory_budget(free, max_device_memory):
        return _normalize_and_fit_host(data, params, spec, timings, model_cov_is_one, out, gpu_stats,
                                       devices=devices, max_device_memory=max_device_memory, **fit_options)
    copier = None
    with Landing() as landing:
        try:
            with timed_stage(timings, "normalize"):
                t0 = time.perf_counter()
                d_counts = device_copy(counts)
                gpu_stats["norm_h2d"] = time.perf_counter() - t0
                cov = np.ones(N)
                normalized, d_model = counts, d_counts
                if params.norm != 0:
                    from ..normalization.gpu import normalize_on_device

                    d_norm = d_counts if params.norm == 1 else d_counts.copy(order="F")
                    normalized = normalize_on_device(d_norm, counts, data.blocks(), norm_type=params.norm_type,
                                                     size_factor=params.size_factor, qu=params.norm_qu,
                                                     qu_size_factor=params.qu_size_factor, timings=gpu_stats)
                    if normalized is None:  # normalized on the device: copied back while the model runs
                        normalized, copier = _copy_back(d_norm, landing)
                    if params.norm == 2:
                        cov = sample_coverage(counts)
                    else:
                        d_model = d_norm
            with timed_stage(timings, "model"):
                model_cov = np.ones(N) if model_cov_is_one else cov
                stats = fit_options.get("stats", {})
                options = {k: v for k, v in fit_options.items() if k in ("chunk_rows", "config")}
                out, resident = fit_gpu_device(d_model, model_cov, spec, keep_post=params.return_posterior, out=out,
                                               stats=stats, **options)
                gpu_stats.update(model_resident=True, model_launches=stats["n_chunks"],
                                 model_store_posteriors=stats["store_posteriors"])
        finally:  # the normalized matrix has landed (or failed) before it is unlocked
            if copier is not None:
                copier.synchronize()
    return normalized, cov, out, DeviceModel(sini=resident.sini)


def _copy_back(d, landing: Landing):
    """(host array, stream) with the device matrix ``d`` being copied into it on its own stream after the work
    enqueued so far; the array comes from ``landing`` (page-locked until it is closed); synchronize the stream
    before reading the array. Synchronous in the simulator."""
    if simulating():
        return np.asfortranarray(d).copy(order="F"), None
    import cupy as cp

    host = landing.empty(d.shape)
    stream = cp.cuda.Stream(non_blocking=True)
    stream.wait_event(cp.cuda.get_current_stream().record())
    d.get(out=host, stream=stream, blocking=False)
    return host, stream


def _normalize_and_fit_host(data: CountData, params: CnMopsParams, spec: ModelSpec, timings: dict,
                            model_cov_is_one: bool, out: ModelOutput | None, gpu_stats: dict, **fit_options):
    """The GPU stages from host memory (the device cannot hold the resident stage, or several devices)."""
    from ..normalization.gpu import normalize_chromosomes_gpu

    counts = data.counts
    with timed_stage(timings, "normalize"):
        cov = np.ones(data.n_samples)
        if params.norm == 0:
            normalized = model_input = counts
        else:
            normalized = normalize_chromosomes_gpu(counts, data.chromosomes, norm_type=params.norm_type,
                                                   size_factor=params.size_factor, qu=params.norm_qu,
                                                   qu_size_factor=params.qu_size_factor, timings=gpu_stats)
            model_input = normalized
            if params.norm == 2:
                cov = sample_coverage(counts)
                model_input = counts
    with timed_stage(timings, "model"):
        model_cov = np.ones(data.n_samples) if model_cov_is_one else cov
        stats = fit_options.pop("stats", {})
        out = fit_gpu(model_input, model_cov, spec, keep_post=params.return_posterior, out=out, stats=stats,
                      **fit_options)
        gpu_stats.update(model_resident=False, model_launches=stats["n_chunks"],
                         model_store_posteriors=stats["store_posteriors"])
    return normalized, cov, out, None


def call_cnvs_gpu(sini: np.ndarray, gr: pd.DataFrame, blocks: list[tuple[str, int, int]], sample_names: list[str],
                  upper_threshold: float, lower_threshold: float, min_width: int, use_median: bool,
                  segment_args: dict | None = None, device: DeviceModel | None = None,
                  gpu_stats: dict | None = None) -> Calls:
    """``calls.call_cnvs`` with the segmentation's statistic on the GPU (identical result); ``device``: the
    model's device-resident sINI, which the GPU reads instead of a copy of ``sini``; ``gpu_stats``: receives
    the segmentation's sub-stage seconds and counts (seg_*)."""
    stats: dict = {}
    d_sini = None if device is None else device.sini

    def segmenter(values, blocks, **kwargs):
        return segment_columns_gpu(values, blocks, timings=stats, device_values=d_sini, **kwargs)

    calls = call_cnvs(sini, gr, blocks, sample_names, upper_threshold, lower_threshold, min_width, use_median,
                      segment_args, segmenter=segmenter)
    if gpu_stats is not None:
        gpu_stats.update(stats)
    return calls


__all__ = ["normalize_and_fit_gpu", "call_cnvs_gpu", "DeviceModel"]
