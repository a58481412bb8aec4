"""Every GPU of a machine: whole chromosomes placed on the devices, largest first, each device running its
chromosomes through the stage order (stages.run_block) on its own host thread, device-resident as on one GPU
(resident_gpu.py: the counts copied in once, the sINI read where the model left it), the results landing in place
in whole-matrix arrays.

cn.mops normalizes and segments per chromosome and fits every region on its own, so a chromosome is a block that
needs of the rest only what ``stages.Genome`` holds (each sample's total count, norm 2's coverages), computed first
on the whole matrix. A device's thread takes the largest chromosome not yet taken (the longest first, so the
devices finish together), makes it the thread's current device (cuda.runtime.on_device) and runs the stages
there: normalization, the model, the segmentation's statistic on that GPU, their host passes on the thread's
share of the cores (numba's thread count is per thread). Each device has ``per_device`` such threads, so that
while one chromosome's segmentation is finished on the host the device computes another's. The call tables are
gathered in chromosome order (blocks.BlockTables): the result is the single-GPU and the CPU result, bit for bit.

Not yet the default of ``cn_mops(devices=...)`` (which shares the model's rows among the devices): what a block
costs besides its share of the work (its counts copied out of the whole matrix, its launches, its result matrices
copied into the whole-run arrays, the host passes every device's threads share the same cores for) still outweighs
what the other GPUs save: four GPUs are slower than one on 5,000,000 x 50 (benchmarks/RESULTS.md, "Fourth session").
"""
from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numba
import numpy as np

from ..cuda.probe import Backend
from ..cuda.runtime import in_threads, make_backend, on_device
from ..data import CountData
from ..model.spec import ModelOutput
from ..normalization.checks import count_matrix
from ..normalization.kernels import column_coverages
from ..progress import timed_stage
from ..result import CNVDetectionResult
from .blocks import BlockTables, Genome, Normalized, Regions, genome_of
from .plan import RunPlan
from .stages import MODEL_DONE, model_result, run_block

#: the stages whose seconds each device adds up (the run's timings take the slowest device's)
_STAGES = ("normalize", "model", "segment_call")
#: worker threads per device: while one chromosome's segmentation finishes on the host, the next one's stages run
#: on the device
PER_DEVICE = 2


def run_on_devices(plan: RunPlan, data: CountData, devices: Sequence[int], timings: dict,
                   per_device: int = PER_DEVICE) -> CNVDetectionResult:
    """The run on every device of ``devices`` (ids), whole chromosomes placed largest first; the result of
    ``stages.run_block`` on the whole matrix. ``per_device``: worker threads per device, each taking chromosomes
    (with two, one chromosome's host passes overlap another's GPU stages). ``timings`` gain "genome" (the
    whole-matrix sums), and per stage the slowest device's seconds (its threads' seconds added up);
    ``gpu_stats`` holds each device's wall time (``device_<id>_seconds``: its slowest thread's), chromosome count
    and how many of them ran device-resident (``device_<id>_resident``)."""
    regions = Regions.of(data)
    blocks = regions.blocks
    with timed_stage(timings, "genome"):
        counts = data.counts  # the whole matrix's sums, as normalize_chromosomes and sample_coverage take them
        genome = genome_of(plan.normalizes, plan.uses_coverage, data.n_samples,
                           counts.sum(axis=0) if plan.normalizes else None,
                           column_coverages(count_matrix(counts)) if plan.uses_coverage else None)
    landing = _Landing(data.n_regions, data.n_samples, len(plan.params.classes), plan.params.return_posterior)
    order = sorted(range(len(blocks)), key=lambda k: blocks[k][1] - blocks[k][2])  # largest first, stable
    taken = iter(order)
    take = threading.Lock()
    failed = threading.Event()  # a device failed: the others take no more chromosomes
    if per_device < 1:
        raise ValueError("per_device must be at least 1")
    stats_of: dict[int, dict] = {d: {"chromosomes": 0, "resident": 0, "seconds": 0.0} for d in devices}
    share = max(1, numba.get_num_threads() // (len(devices) * per_device))

    def work(device: int) -> None:
        stats = stats_of[device]
        t0 = time.perf_counter()
        try:
            numba.set_num_threads(share)  # this thread's parallel loops: its share of the cores
            with on_device(device):
                limit = {}  # the device's memory shared among its threads
                if plan.backend is Backend.GPU and per_device > 1:
                    limit["max_device_memory"] = make_backend(device).mem_info()[1] // per_device
                while not failed.is_set():
                    with take:
                        k = next(taken, None)
                    if k is None:
                        break
                    _, b0, b1 = blocks[k]
                    block_timings: dict = {}
                    result = run_block(plan, [data.rows(b0, b1)], genome=genome, timings=block_timings,
                                       devices=[device], evidence=False, **limit)
                    landing.put(b0, b1, result)
                    gathered.put(k, result)
                    with take:
                        stats["chromosomes"] += 1
                        stats["resident"] += bool(result.gpu_stats.get("model_resident"))
                        for name, value in {**block_timings, **result.gpu_stats}.items():
                            if isinstance(value, (int, float)) and not isinstance(value, bool):
                                stats[name] = stats.get(name, 0) + value
        except BaseException:
            failed.set()
            raise
        finally:
            with take:
                stats["seconds"] = max(stats["seconds"], time.perf_counter() - t0)

    with BlockTables(len(blocks), regions.sample_names, plan.segments) as gathered:
        in_threads({f"gcnmops-gpu{d}-{k}": (lambda d=d: work(d)) for d in devices for k in range(per_device)})
    for stage in _STAGES:
        timings[stage] = timings.get(stage, 0.0) + max(s.get(stage, 0.0) for s in stats_of.values())
    gpu_stats = {f"device_{d}_{key}": s[key] for d, s in stats_of.items()
                 for key in ("seconds", "chromosomes", "resident")}
    result = landing.result(plan, regions, genome, timings, gpu_stats)
    listener = MODEL_DONE.get()
    if listener is not None:
        listener(result)
    segmentation, cnvs, cnvr = gathered.tables()
    # the qualities' evidence is made from the landed matrices when first asked for, as for a run on one device
    return result.replace(segmentation=segmentation, cnvs=cnvs, cnvr=cnvr)


class _Landing:
    """The whole run's matrices (column-major), filled block by block in place (rows b0:b1)."""

    def __init__(self, m: int, N: int, n: int, post: bool):
        self.normalized = np.empty((m, N), order="F")
        self.sini = np.empty((m, N), order="F")
        self.individual = np.empty((m, N), order="F")
        self.cn = np.empty((m, N), dtype=np.int8, order="F")
        self.ini = np.empty(m)
        self.lam = np.empty((m, n), order="F")
        self.alpha = np.empty((m, n), order="F")
        self.post = np.empty((m, n, N), order="F") if post else None

    def put(self, b0: int, b1: int, r: CNVDetectionResult) -> None:
        self.normalized[b0:b1] = r.normalized_data
        self.sini[b0:b1] = r.local_assessments
        self.individual[b0:b1] = r.individual_call
        self.cn[b0:b1] = r.cn_index
        self.ini[b0:b1] = r.ini_call
        self.lam[b0:b1] = r.params["L"]
        self.alpha[b0:b1] = r.params["A"]
        if self.post is not None:
            self.post[b0:b1] = r.posterior_probs

    def result(self, plan: RunPlan, regions: Regions, genome: Genome, timings: dict,
               gpu_stats: dict) -> CNVDetectionResult:
        """The whole run's result with empty call tables (they come from BlockTables)."""
        model = ModelOutput(lam=self.lam, alpha=self.alpha, sini=self.sini, cn=self.cn, ini=self.ini, post=self.post)
        cov = genome.cov if plan.uses_coverage else np.ones(len(regions.sample_names))
        part = model_result(plan, regions, Normalized(self.normalized, None, cov), model, timings, gpu_stats)
        return part.replace(individual_call=self.individual)


__all__ = ["run_on_devices"]
