"""The stage order, written once: normalize -> model -> segment and call, applied to a block of regions (the whole
matrix, or some of its chromosomes) under a RunPlan. Every path runs its blocks through ``run_block``; a path only
chooses the blocks, where they run and where the results go.

- ``normalize``: the normalizedData slot, the matrix the model sees and the coverages (plan's norm rules);
  referencecn.mops normalizes its cases with its controls;
- ``fit``: the plan's model step (cn.mops's EM, or the one-step model with lambda from the controls / per
  chromosome) on the plan's backend;
- ``normalize_and_fit``: both, placed: on the GPU backend with the whole matrix, device-resident where it fits
  (resident_gpu.py), else the two stages from host memory;
- ``model_result``: the result before the calls (MODEL_DONE listeners get it: the writers stage its matrices);
- ``segment_and_call``: segmentation and calls (calls.call_cnvs) on the plan's backend;
- ``run_block``: all of them, timed ("normalize", "model", "segment_call").

What a block carries between the stages is in blocks.py (``Genome``: what crosses chromosomes when a block is not
the whole matrix, which a streamed run computes first; ``Normalized``; ``Regions``).
"""
from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

import numpy as np

from ..calls.cnvs import Calls, call_cnvs
from ..calls.quality import CallEvidence, block_evidence
from ..cuda.probe import Backend
from ..data import CountData
from ..model import fit as fit_em
from ..model import fit_one_step
from ..model.spec import ModelOutput
from ..normalization import normalize as normalize_counts
from ..normalization import sample_coverage
from ..params import ModelKind
from ..progress import timed_stage
from ..result import CNVDetectionResult, empty_cnvr, empty_segments
from .blocks import BlockOut, Genome, Normalized, Regions
from .plan import RunPlan, reference_lambda, single_lambda

#: called with the model's part of a result (regions, normalized data, sINI, INI, parameters; no calls yet) just
#: before the segmentation: ``pipeline.run.run_and_write`` starts writing those matrices then
MODEL_DONE: ContextVar[Callable[[CNVDetectionResult], None] | None] = ContextVar("gcnmops_model_done", default=None)


def normalize(plan: RunPlan, data: CountData, controls: CountData | None = None, genome: Genome | None = None,
              gpu_stats: dict | None = None) -> Normalized:
    """The block ``data`` normalized as the plan says (``controls``: referencecn.mops's, normalized with it)."""
    p = plan.params
    x = data.counts
    N = x.shape[1]

    def normalized(y: np.ndarray) -> np.ndarray:  # y: the cases' columns, then (referencecn.mops) the controls'
        return normalize_counts(y, data.chromosomes, norm_type=p.norm_type, size_factor=p.size_factor,
                                qu=p.norm_qu, qu_size_factor=p.qu_size_factor, backend=plan.backend,
                                colsums=None if genome is None else genome.colsums[:y.shape[1]], timings=gpu_stats)

    if plan.kind is ModelKind.REFERENCE:
        return _normalize_reference(plan, x, controls.counts, normalized, genome)
    if not plan.normalizes:
        return Normalized(x, x, np.ones(N))
    y = normalized(x)
    if not plan.uses_coverage:
        cov = np.ones(N)
    else:
        cov = sample_coverage(x) if genome is None else genome.cov
    return Normalized(y, plan.model_input(x, y), cov)


def _normalize_reference(plan: RunPlan, x: np.ndarray, r: np.ndarray, normalized,
                         genome: Genome | None) -> Normalized:
    """referencecn.mops: norm 1 normalizes cases and controls together; norm 2 takes the coverages of both (the
    genome's, when the block is some chromosomes), divides the controls by theirs and lets the model see the
    cases' raw counts with theirs."""
    N = x.shape[1]
    if not plan.normalizes:
        return Normalized(x, x, np.ones(N), r)
    if not plan.uses_coverage:
        both = normalized(np.column_stack([x, r]))
        cases = np.asfortranarray(both[:, :N])
        return Normalized(cases, cases, np.ones(N), both[:, N:])
    cov_all = sample_coverage(np.column_stack([x, r])) if genome is None else genome.cov
    return Normalized(normalized(x), x, cov_all[:N].copy(), r / cov_all[N:])


def fit(plan: RunPlan, norm: Normalized, blocks: list[tuple[str, int, int]], out: ModelOutput | None = None,
        **fit_options) -> ModelOutput:
    """The plan's model step on the block: cn.mops's EM (``out``, ``fit_options``: model.fit's), or the one-step
    model with lambda per region from the controls (referencecn.mops) or per chromosome of ``blocks`` (name,
    first row, end row) from the counts (singlecn.mops)."""
    p = plan.params
    cov = plan.model_cov(norm.cov)
    if plan.kind is ModelKind.EM:
        return fit_em(norm.model_input, cov, plan.spec, keep_post=p.return_posterior, backend=plan.backend, out=out,
                      **fit_options)
    if plan.kind is ModelKind.REFERENCE:
        lam = reference_lambda(norm.controls)
    else:
        counts = norm.model_input
        lam = np.empty(counts.shape[0])
        for _, b0, b1 in blocks:
            lam[b0:b1] = single_lambda(counts[b0:b1, 0])
    return fit_one_step(norm.model_input, cov, lam, plan.spec, p.return_posterior, plan.backend)


def normalize_and_fit(plan: RunPlan, held: list[CountData], timings: dict, *, controls: CountData | None = None,
                      genome: Genome | None = None, out: ModelOutput | None = None, gpu_stats: dict | None = None,
                      normalized_out: np.ndarray | None = None,
                      **fit_options) -> tuple[Normalized, ModelOutput, object]:
    """(Normalized, ModelOutput, the model's device-resident outputs or None) of the block in ``held`` (a list
    holding its CountData, emptied here: its counts go once no stage needs them), timed ("normalize", "model").
    The EM on the GPU backend runs device-resident where the block fits the device
    (resident_gpu.py: the counts copied in once, the normalized data and sINI left there for the next stage;
    the normalized matrix copied back into ``normalized_out`` where given)."""
    gpu_stats = {} if gpu_stats is None else gpu_stats
    data = held.pop()
    blocks = data.blocks()
    if plan.backend is Backend.GPU and plan.kind is ModelKind.EM:
        from .resident_gpu import normalize_and_fit_resident

        done = normalize_and_fit_resident(plan, data, timings, out=out, gpu_stats=gpu_stats, genome=genome,
                                          normalized_out=normalized_out, **fit_options)
        if done is not None:
            return done
    with timed_stage(timings, "normalize"):
        norm = normalize(plan, data, controls, genome, gpu_stats)
    del data, controls  # norm 1: the counts go before the model runs
    with timed_stage(timings, "model"):
        stats = fit_options.pop("stats", {})
        if plan.backend is Backend.GPU and plan.kind is ModelKind.EM:
            fit_options["stats"] = stats
        fitted = fit(plan, norm, blocks, out=out, **fit_options)
        norm.model_input = None  # norm 2: the counts go once the model has run
        if "n_chunks" in stats:
            gpu_stats.update(model_resident=False, model_launches=stats["n_chunks"],
                             model_store_posteriors=stats["store_posteriors"])
    return norm, fitted, None


def model_result(plan: RunPlan, regions: Regions, norm: Normalized, out: ModelOutput, timings: dict,
                 gpu_stats: dict | None = None) -> CNVDetectionResult:
    """The block's result before segmentation: regions, normalizedData, sINI, INI, labels, posteriors and the
    params list (cn.mops's names, with cov, L and A); empty call tables."""
    result_params = plan.params.r_params()
    result_params.update(cov=norm.cov, L=out.lam, A=out.alpha)
    names = regions.sample_names
    return CNVDetectionResult(
        gr=regions.gr, normalized_data=norm.normalized, local_assessments=out.sini, individual_call=None,
        ini_call=out.ini, cn_index=out.cn, posterior_probs=out.post, params=result_params,
        segmentation=empty_segments(), cnvs=empty_segments(), cnvr=empty_cnvr(names), sample_names=names,
        ranged=regions.ranged, timings=timings, gpu_stats={} if gpu_stats is None else gpu_stats)


def segment_and_call(plan: RunPlan, regions: Regions, model_part: CNVDetectionResult, device=None,
                     gpu_stats: dict | None = None, individual_out: np.ndarray | None = None) -> Calls:
    """Segmentation of every sample's sINI per chromosome and the calls, on the plan's backend (``device``: the
    model's device-resident outputs, whose sINI the GPU reads instead of a copy; ``individual_out``: where the
    individual calls are written)."""
    p = plan.params
    return call_cnvs(model_part.local_assessments, regions.gr, regions.blocks, regions.sample_names,
                     p.upper_threshold, p.lower_threshold, p.min_width, p.use_median, p.segment_args,
                     seg_algorithm=p.seg_algorithm, backend=plan.backend,
                     device_values=None if device is None else device.sini, timings=gpu_stats,
                     genome_regions=plan.n_regions, individual_out=individual_out)


def finish_block(plan: RunPlan, regions: Regions, norm: Normalized, out: ModelOutput, timings: dict,
                 device=None, gpu_stats: dict | None = None, evidence: bool = True,
                 individual_out: np.ndarray | None = None) -> CNVDetectionResult:
    """From the model's output to the block's result: ``model_result`` (handed to the MODEL_DONE listener), then
    segmentation and calls (timed "segment_call") with what their qualities need of the block's model
    (``evidence_of``: the result's ``call_evidence``). ``evidence=False`` where the block is the whole result,
    whose matrices stay: the qualities are then made from them when first asked for
    (``calls.quality.call_evidence``), not for a caller that writes none. ``individual_out``: as for
    ``segment_and_call``."""
    model_part = model_result(plan, regions, norm, out, timings, gpu_stats)
    listener = MODEL_DONE.get()
    if listener is not None:
        listener(model_part)
    with timed_stage(timings, "segment_call"):
        calls = segment_and_call(plan, regions, model_part, device, gpu_stats, individual_out)
    result = model_part.replace(individual_call=calls.individual_call, segmentation=calls.segmentation,
                                cnvs=calls.cnvs, cnvr=calls.cnvr)
    return result.replace(call_evidence=evidence_of(result, timings)) if evidence else result


def evidence_of(result: CNVDetectionResult, timings: dict) -> CallEvidence:
    """What the qualities of a block's calls need of its model (``calls.quality.block_evidence`` of the block's
    result: its regions, normalized data, params and calls), timed "evidence"."""
    with timed_stage(timings, "evidence"):
        return block_evidence(result.params, result.normalized_data, result.gr, result.sample_names, result.cnvs,
                              result.cnvr)


def run_block(plan: RunPlan, data: CountData | list[CountData], *, controls: CountData | None = None,
              genome: Genome | None = None, timings: dict | None = None, out: ModelOutput | BlockOut | None = None,
              evidence: bool = True, **fit_options) -> CNVDetectionResult:
    """The stage order on one block: normalize -> model -> segment and call; the block's CNVDetectionResult
    (cnvr one column per sample). ``data``: the block's CountData, or a list holding it (emptied: its counts go
    once no stage needs them, as a streamed run wants). ``timings`` gain "normalize", "model" and
    "segment_call"; the GPU's sub-stage statistics are the result's ``gpu_stats``. ``out``: host arrays the
    results are written into (the model's: ModelOutput; more: BlockOut); ``fit_options`` go to the model
    (model.fit); ``evidence``: as for ``finish_block``."""
    timings = {} if timings is None else timings
    into = out if isinstance(out, BlockOut) else BlockOut(model=out)
    held = data if isinstance(data, list) else [data]
    del data
    regions = Regions.of(held[0])
    gpu_stats: dict = {}
    norm, fitted, device = normalize_and_fit(plan, held, timings, controls=controls, genome=genome, out=into.model,
                                             gpu_stats=gpu_stats, normalized_out=into.normalized, **fit_options)
    return finish_block(plan, regions, norm, fitted, timings, device, gpu_stats, evidence, into.individual)


__all__ = ["BlockOut", "Genome", "Normalized", "Regions", "normalize", "fit", "normalize_and_fit", "model_result",
           "segment_and_call", "finish_block", "evidence_of", "run_block", "MODEL_DONE"]
