"""cn_mops(): read -> the run's plan -> the stage order (stages.run_block) -> result; the checks every method
shares (its segmentation arguments, cn.mops's small-input warning)."""
from __future__ import annotations

import difflib
import inspect
import logging
import warnings
from dataclasses import fields

from ..cuda.probe import Backend, device_ids
from ..data import CountData
from ..errors import InputError
from ..io import read_counts
from ..params import METHODS, CnMopsParams, Method, method_spec, parameter_name
from ..progress import timed_stage
from ..result import CNVDetectionResult
from .docs import documented
from .plan import RunPlan
from .stages import run_block

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
    from ..segmentation import segment

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


def run_mops(data: CountData, params: CnMopsParams, backend: str | Backend = "auto", timings: dict | None = None,
             method: Method | None = None, out=None, **fit_options) -> CNVDetectionResult:
    """A cohort method (``method``, default the row of ``params.method``: cn.mops, exome or haplo) on validated
    data and parameters: the plan built once (the backend resolved here), then the stage order on the whole
    matrix (stages.run_block).

    ``out``: optional preallocated ModelOutput the model writes into (the R bridge passes views of R-allocated
    matrices); ``fit_options`` go to the model (e.g. ``devices``). On the GPU backend the normalization and the
    model are device-resident where they fit (resident_gpu.py). Several ``devices`` (ids, or "all" where the
    machine has several GPUs) run groups of whole chromosomes each through every stage (pipeline.multigpu);
    the rows of a single chromosome (or into ``out``) are shared among them by the model only. The sub-stage
    seconds and counts are the result's ``gpu_stats``."""
    check_segment_args(params)
    warn_few_regions(data.n_regions, stacklevel=3)
    plan = RunPlan.build(method or method_spec(params.method), params, backend, data.n_regions)
    if plan.backend is Backend.GPU and out is None and set(fit_options) == {"devices"} and len(data.blocks()) > 1:
        ids = device_ids(fit_options["devices"])
        if len(ids) > 1:
            from .multigpu import run_on_devices

            return run_on_devices(plan, data, ids, {} if timings is None else timings)
    return run_block(plan, data, timings=timings, out=out, evidence=False, **fit_options)
