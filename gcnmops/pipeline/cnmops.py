"""cn_mops(): the whole pipeline, top to bottom: read -> normalize -> model -> segment/call -> result."""
from __future__ import annotations

import logging
import time
import warnings
from contextlib import contextmanager

import numpy as np

from ..calls.cnvs import call_cnvs
from ..data import CountData
from ..io import read_counts
from ..model import fit
from ..cuda.probe import resolve_backend
from ..model.spec import ModelSpec
from ..normalization.cpu import normalize_chromosomes, sample_coverage
from ..params import DEFAULT_CLASSES, DEFAULT_FOLDS, CnMopsParams
from ..result import CNVDetectionResult

log = logging.getLogger("gcnmops")

#: fewer regions than this draw cn.mops's small-input warning
FEW_REGIONS = 100


@contextmanager
def _stage(timings: dict, name: str):
    t0 = time.perf_counter()
    yield
    timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0


def cn_mops(
    input,
    I=DEFAULT_FOLDS,  # noqa: E741 - cn.mops's name
    classes=DEFAULT_CLASSES,
    prior_impact: float = 1,
    cyc: int = 20,
    norm: int = 1,
    norm_type: str = "poisson",
    size_factor: str = "mean",
    norm_qu: float = 0.25,
    qu_size_factor: float = 0.75,
    upper_threshold: float = 0.5,
    lower_threshold: float = -0.9,
    min_width: int = 3,
    seg_algorithm: str = "fast",
    min_read_count: float = 5,
    use_median: bool = False,
    return_posterior: bool = False,
    backend: str = "auto",
    devices=None,
    **segment_args,
) -> CNVDetectionResult:
    """Detect CNVs in a cohort as Bioconductor's ``cn.mops()`` does, with its defaults.

    ``input``: a (regions x samples) numeric matrix, a pandas DataFrame (optional ``seqnames,
    start, end`` columns + one column per sample), a CountData, or a path (.rds, .tsv, .csv,
    .parquet, .npz). ``backend``: "cpu", "gpu" or "auto"; ``devices`` (GPU backend): None (device 0),
    a device id, a list of ids or "all" (rows split across GPUs). Extra keyword arguments go to the
    segmentation (as cn.mops's ``...``). Returns a CNVDetectionResult.
    """
    params = CnMopsParams(
        I=I, classes=classes, prior_impact=prior_impact, cyc=cyc, norm=norm, norm_type=norm_type,
        size_factor=size_factor, norm_qu=norm_qu, qu_size_factor=qu_size_factor,
        upper_threshold=upper_threshold, lower_threshold=lower_threshold, min_width=min_width,
        seg_algorithm=seg_algorithm, min_read_count=min_read_count, use_median=use_median,
        return_posterior=return_posterior, segment_args=segment_args,
    ).validated()
    timings: dict = {}
    with _stage(timings, "read"):
        data = input if isinstance(input, CountData) else read_counts(input)
    fit_options = {} if devices is None else {"devices": devices}
    return run_mops(data, params, backend=backend, timings=timings, **fit_options)


def run_mops(data: CountData, params: CnMopsParams, backend: str = "auto", timings: dict | None = None,
             model_cov_is_one: bool = False, out=None, **fit_options) -> CNVDetectionResult:
    """The pipeline on validated data and parameters (shared by the family's entry points).

    ``out``: optional preallocated ModelOutput the model writes into (the R bridge passes views of
    R-allocated matrices); ``fit_options`` go to ``model.fit`` (e.g. ``devices``). Backend "gpu": the
    device-resident pipeline of gpu_pipeline.py (counts copied in once; normalized data and sINI stay on the
    device between the stages)."""
    timings = {} if timings is None else timings
    if data.n_regions < FEW_REGIONS:
        warnings.warn("Normalization might not be applicable for this small number of segments.",
                      RuntimeWarning, stacklevel=3)
    backend = resolve_backend(backend)
    spec = ModelSpec.build(params.I, params.classes, params.main_class, params.prior_impact, params.cyc,
                           params.min_read_count)
    if backend == "gpu":
        from .resident_gpu import normalize_and_fit_gpu

        normalized, cov, out, device = normalize_and_fit_gpu(data, params, spec, timings, model_cov_is_one,
                                                             out=out, **fit_options)
        return assemble_result(data, params, out, normalized, cov, timings, backend=backend, device=device)
    with _stage(timings, "normalize"):
        normalized, model_input, cov = _normalize(data, data.chromosomes, params)
    with _stage(timings, "model"):
        model_cov = np.ones(data.n_samples) if model_cov_is_one else cov
        out = fit(model_input, model_cov, spec, keep_post=params.return_posterior, backend=backend, out=out,
                  **fit_options)
    return assemble_result(data, params, out, normalized, cov, timings, backend=backend)


def assemble_result(data: CountData, params: CnMopsParams, out, normalized: np.ndarray, cov: np.ndarray,
                    timings: dict, backend: str = "cpu", device=None) -> CNVDetectionResult:
    """Segmentation, calls and the result object from the per-region model's output ``out`` (a ModelOutput);
    shared by every method of the family. ``backend`` "gpu": the segmentation's statistic runs on the GPU;
    ``device``: the model's device-resident outputs (gpu_pipeline.DeviceModel), whose sINI the GPU
    segmentation reads instead of copying ``out.sini`` back in."""
    gr = data.genomic_ranges()
    with _stage(timings, "segment_call"):
        blocks = data.blocks()
        if params.seg_algorithm == "DNAcopy":
            from ..calls.cnvs import call_cnvs_dnacopy as caller
        elif backend == "gpu":
            from functools import partial

            from .resident_gpu import call_cnvs_gpu

            caller = partial(call_cnvs_gpu, device=device)
        else:
            caller = call_cnvs
        calls = caller(out.sini, gr, blocks, data.sample_names, params.upper_threshold, params.lower_threshold,
                       params.min_width, params.use_median, params.segment_args)
    result_params = params.r_params()
    result_params.update(cov=cov, L=out.lam, A=out.alpha)
    return CNVDetectionResult(
        gr=gr, normalized_data=normalized, local_assessments=out.sini, individual_call=calls.individual_call,
        ini_call=out.ini, cn_index=out.cn, posterior_probs=out.post, params=result_params,
        segmentation=calls.segmentation, cnvs=calls.cnvs, cnvr=calls.cnvr, sample_names=list(data.sample_names),
        ranged=data.ranges is not None, timings=timings,
    )


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
