"""cn_mops(): the whole pipeline, top to bottom: read -> normalize -> model -> segment/call -> result."""
from __future__ import annotations

import difflib
import inspect
import logging
import warnings
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import fields

import numpy as np

from ..calls.cnvs import call_cnvs
from ..cuda.probe import resolve_backend
from ..data import CountData
from ..errors import InputError
from ..io import read_counts
from ..model import fit
from ..model.spec import ModelSpec
from ..normalization.cpu import normalize_chromosomes, sample_coverage
from ..params import METHODS, CnMopsParams, parameter_name
from ..progress import timed_stage
from ..result import CNVDetectionResult, empty_cnvr, empty_segments
from .docs import documented

log = logging.getLogger("gcnmops")

#: fewer regions than this draw cn.mops's small-input warning
FEW_REGIONS = 100
#: cn_mops's defaults (the method table's)
_D = METHODS["cn.mops"].parameter_defaults()


def warn_few_regions(n_regions: int, stacklevel: int = 3) -> None:
    """cn.mops's warning for inputs with fewer than FEW_REGIONS regions."""
    if n_regions < FEW_REGIONS:
        warnings.warn("Normalization might not be applicable for this small number of segments.",
                      RuntimeWarning, stacklevel=stacklevel + 1)


def segment_arg_names(seg_algorithm: str = "fast") -> set[str]:
    """The extra keyword arguments (cn.mops's ``...``) the segmentation takes: DNAcopy::segment's for segAlgorithm
    "DNAcopy" (and ``seed``, of its jitter), else the fast segmentation's (minSeg is not one: cn.mops passes
    minWidth)."""
    if seg_algorithm == "DNAcopy":
        from ..segmentation.dnacopy import SEGMENT_ARGS

        return set(SEGMENT_ARGS) | {"seed"}
    from ..segmentation.cpu import segment

    return set(inspect.signature(segment).parameters) - {"x", "min_seg"}


def check_segment_args(params: CnMopsParams) -> None:
    """InputError, before any work, for an extra keyword argument that is neither a parameter of the method nor
    one the segmentation takes: with the snake_case name of a cn.mops parameter (priorImpact -> prior_impact) or
    the closest valid name."""
    known = segment_arg_names(params.seg_algorithm)
    bad = [k for k in params.segment_args if k not in known]
    if not bad:
        return
    names = {f.name for f in fields(CnMopsParams)} - {"method", "main_class", "segment_args"}
    hints = []
    for k in bad:
        snake = parameter_name(str(k))
        close = difflib.get_close_matches(snake, sorted(names | known), n=1)
        hints.append(f"{k!r}" + (f" (cn.mops's {k} is {snake} here)" if snake != k and snake in names | known else
                                 f" (did you mean {close[0]!r}?)" if close else ""))
    algorithm = "DNAcopy" if params.seg_algorithm == "DNAcopy" else "fast"
    raise InputError(f"Unknown argument(s) {', '.join(hints)}: not a parameter of the method, and the {algorithm} "
                     f"segmentation takes only {', '.join(sorted(known))}.")


@documented("cn.mops")
def cn_mops(
    input,
    I=_D["I"],  # noqa: E741 - cn.mops's name
    classes=_D["classes"],
    prior_impact: float = _D["prior_impact"],
    cyc: int = _D["cyc"],
    norm: int = _D["norm"],
    norm_type: str = _D["norm_type"],
    size_factor: str = _D["size_factor"],
    norm_qu: float = _D["norm_qu"],
    qu_size_factor: float = _D["qu_size_factor"],
    upper_threshold: float = _D["upper_threshold"],
    lower_threshold: float = _D["lower_threshold"],
    min_width: int = _D["min_width"],
    seg_algorithm: str = _D["seg_algorithm"],
    min_read_count: float = _D["min_read_count"],
    use_median: bool = _D["use_median"],
    return_posterior: bool = _D["return_posterior"],
    backend: str = "auto",
    devices=None,
    **segment_args,
) -> CNVDetectionResult:
    """Detect CNVs in a cohort as Bioconductor's ``cn.mops()`` does, with its defaults.

    Per region a mixture of Poissons is fitted by EM across the samples (the normal class CN2 holds most of
    them); each sample's local assessment (sINI, the posterior-weighted log2 fold change) is segmented and
    segments beyond the thresholds are CNVs; overlapping CNVs of all samples form CNV regions.

    Parameters
    ----------
    input : array, DataFrame, CountData or path
        Read counts, regions x samples: a numeric matrix, a DataFrame (optional ``seqnames, start, end``
        columns, 1-based closed, + one column per sample), a CountData, or a file (.tsv/.csv[.gz], .parquet,
        .npz, .rds). At least two samples.
    {parameters}

    {returns}

    Examples
    --------
    >>> result = gcnmops.calc_integer_copy_numbers(gcnmops.cn_mops("counts.tsv"))  # doctest: +SKIP
    >>> result.cnvr  # CNV regions x samples, integer copy numbers  # doctest: +SKIP
    """
    params = METHODS["cn.mops"].params(
        I=I, classes=classes, prior_impact=prior_impact, cyc=cyc, norm=norm, norm_type=norm_type,
        size_factor=size_factor, norm_qu=norm_qu, qu_size_factor=qu_size_factor,
        upper_threshold=upper_threshold, lower_threshold=lower_threshold, min_width=min_width,
        seg_algorithm=seg_algorithm, min_read_count=min_read_count, use_median=use_median,
        return_posterior=return_posterior, segment_args=segment_args)
    timings: dict = {}
    with timed_stage(timings, "read"):
        data = read_counts(input)  # a CountData too: checked again (it may have been built or changed by hand)
    fit_options = {} if devices is None else {"devices": devices}
    return run_mops(data, params, backend=backend, timings=timings, **fit_options)


def run_mops(data: CountData, params: CnMopsParams, backend: str = "auto", timings: dict | None = None,
             model_cov_is_one: bool = False, out=None, **fit_options) -> CNVDetectionResult:
    """The pipeline on validated data and parameters (shared by the family's entry points).

    ``backend`` ("cpu", "gpu", "auto") is resolved here, once, and the resolved value passed down.
    ``out``: optional preallocated ModelOutput the model writes into (the R bridge passes views of
    R-allocated matrices); ``fit_options`` go to ``model.fit`` (e.g. ``devices``). Backend "gpu": the
    device-resident pipeline of resident_gpu.py (counts copied in once; normalized data and sINI stay on the
    device between the stages); its sub-stage seconds and counts are the result's ``gpu_stats``."""
    timings = {} if timings is None else timings
    check_segment_args(params)
    warn_few_regions(data.n_regions, stacklevel=3)
    backend = resolve_backend(backend)
    spec = ModelSpec.build(params.I, params.classes, params.main_class, params.prior_impact, params.cyc,
                           params.min_read_count)
    if backend == "gpu":
        from .resident_gpu import normalize_and_fit_gpu

        gpu_stats: dict = {}
        normalized, cov, out, device = normalize_and_fit_gpu(data, params, spec, timings, model_cov_is_one,
                                                             out=out, gpu_stats=gpu_stats, **fit_options)
        return assemble_result(data, params, out, normalized, cov, timings, backend=backend, device=device,
                               gpu_stats=gpu_stats)
    with timed_stage(timings, "normalize"):
        normalized, model_input, cov = _normalize(data, data.chromosomes, params)
    with timed_stage(timings, "model"):
        model_cov = np.ones(data.n_samples) if model_cov_is_one else cov
        out = fit(model_input, model_cov, spec, keep_post=params.return_posterior, backend=backend, out=out,
                  **fit_options)
    return assemble_result(data, params, out, normalized, cov, timings, backend=backend)


#: called with the model's part of a result (regions, normalized data, sINI, INI, parameters; no calls yet) just
#: before the segmentation: ``pipeline.run.run_and_write`` starts writing those matrices then
MODEL_DONE: ContextVar[Callable[[CNVDetectionResult], None] | None] = ContextVar("gcnmops_model_done", default=None)


def assemble_result(data: CountData, params: CnMopsParams, out, normalized: np.ndarray, cov: np.ndarray,
                    timings: dict, backend: str = "cpu", device=None, gpu_stats: dict | None = None
                    ) -> CNVDetectionResult:
    """Segmentation, calls and the result object from the per-region model's output ``out`` (a ModelOutput);
    shared by every method of the family. ``backend`` (resolved: "cpu" or "gpu") "gpu": the segmentation's
    statistic runs on the GPU; ``device``: the model's device-resident outputs (resident_gpu.DeviceModel),
    whose sINI the GPU segmentation reads instead of copying ``out.sini`` back in; ``gpu_stats``: the GPU
    path's sub-stage statistics (the segmentation adds its own), kept as the result's ``gpu_stats``."""
    gr = data.genomic_ranges()
    gpu_stats = {} if gpu_stats is None else gpu_stats
    result_params = params.r_params()
    result_params.update(cov=cov, L=out.lam, A=out.alpha)
    model_part = CNVDetectionResult(
        gr=gr, normalized_data=normalized, local_assessments=out.sini, individual_call=None, ini_call=out.ini,
        cn_index=out.cn, posterior_probs=out.post, params=result_params, segmentation=empty_segments(),
        cnvs=empty_segments(), cnvr=empty_cnvr(list(data.sample_names)), sample_names=list(data.sample_names),
        ranged=data.ranges is not None, timings=timings, gpu_stats=gpu_stats,
    )
    listener = MODEL_DONE.get()
    if listener is not None:
        listener(model_part)
    with timed_stage(timings, "segment_call"):
        blocks = data.blocks()
        if params.seg_algorithm == "DNAcopy":
            from ..calls.cnvs import call_cnvs_dnacopy as caller
        elif backend == "gpu":
            from functools import partial

            from .resident_gpu import call_cnvs_gpu

            caller = partial(call_cnvs_gpu, device=device, gpu_stats=gpu_stats)
        else:
            caller = call_cnvs
        calls = caller(out.sini, gr, blocks, data.sample_names, params.upper_threshold, params.lower_threshold,
                       params.min_width, params.use_median, params.segment_args)
    return model_part.replace(individual_call=calls.individual_call, segmentation=calls.segmentation,
                              cnvs=calls.cnvs, cnvr=calls.cnvr)


def _normalize(data: CountData, chrom: np.ndarray, params: CnMopsParams):
    """(normalizedData slot, matrix the model sees, per-sample coverage) for norm 0, 1 or 2, on the CPU."""
    x = data.counts
    if params.norm == 0:
        return x, x, np.ones(data.n_samples)
    normalized = normalize_chromosomes(x, chrom, norm_type=params.norm_type, size_factor=params.size_factor,
                                       qu=params.norm_qu, qu_size_factor=params.qu_size_factor)
    if params.norm == 1:
        return normalized, normalized, np.ones(data.n_samples)
    return normalized, x, sample_coverage(x)
