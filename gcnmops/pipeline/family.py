"""The cn.mops family's other entry points: exomecn.mops, haplocn.mops, referencecn.mops, singlecn.mops.

- ``exome_cn_mops``: cn_mops with other defaults.
- ``haplo_cn_mops``: the same EM with the normal class CN1 (cov reset to 1 inside the model, as cn.mops).
- ``reference_cn_mops(cases, controls)`` and ``single_cn_mops(x)``: no EM; lambda per region is given (the
  controls' mean / the chromosome's median positive count) and the one-step model of model/onestep.py
  gives the posteriors. Each builds its RunPlan and runs the stage order (stages.run_block).

Each method's defaults, model, normal class and note are its row of params.METHODS; the inputs of
referencecn.mops and singlecn.mops are read and checked here (``read_named_counts``, ``check_same_regions``,
``read_single_sample``), for the distributed pipeline too.
"""
from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd

from ..data import CountData
from ..errors import InputError
from ..io import read_counts
from ..params import METHODS, Method
from ..result import CNVDetectionResult, cnvr_frame
from ..progress import timed_stage
from .cnmops import check_segment_args, cn_mops, run_mops, warn_few_regions
from .docs import documented
from .plan import RunPlan, method_cnvr
from .stages import run_block

log = logging.getLogger("gcnmops")

#: each entry point's defaults (the method table's)
_EXOME = METHODS["exome"].parameter_defaults()
_HAPLO = METHODS["haplo"].parameter_defaults()
_REFERENCE = METHODS["reference"].parameter_defaults()
_SINGLE = METHODS["single"].parameter_defaults()


@documented("exome")
def exome_cn_mops(input, prior_impact: float = _EXOME["prior_impact"],
                  lower_threshold: float = _EXOME["lower_threshold"], min_width: int = _EXOME["min_width"],
                  min_read_count: float = _EXOME["min_read_count"], **kwargs) -> CNVDetectionResult:
    """``exomecn.mops()``: :func:`gcnmops.cn_mops` with defaults tuned for exome targets (the result says method
    "cn.mops", as in cn.mops).

    Parameters
    ----------
    input : array, DataFrame, CountData or path
        Read counts per target, regions x samples (see :func:`gcnmops.cn_mops`).
    {parameters}

    {returns}
    """
    return cn_mops(input, prior_impact=prior_impact, lower_threshold=lower_threshold, min_width=min_width,
                   min_read_count=min_read_count, **kwargs)


@documented("haplo")
def haplo_cn_mops(
    input,
    I=_HAPLO["I"],  # noqa: E741 - cn.mops's name
    classes=_HAPLO["classes"],
    prior_impact: float = _HAPLO["prior_impact"],
    cyc: int = _HAPLO["cyc"],
    norm: int = _HAPLO["norm"],
    norm_type: str = _HAPLO["norm_type"],
    size_factor: str = _HAPLO["size_factor"],
    norm_qu: float = _HAPLO["norm_qu"],
    qu_size_factor: float = _HAPLO["qu_size_factor"],
    upper_threshold: float = _HAPLO["upper_threshold"],
    lower_threshold: float = _HAPLO["lower_threshold"],
    min_width: int = _HAPLO["min_width"],
    seg_algorithm: str = _HAPLO["seg_algorithm"],
    min_read_count: float = _HAPLO["min_read_count"],
    return_posterior: bool = _HAPLO["return_posterior"],
    backend: str = "auto",
    **segment_args,
) -> CNVDetectionResult:
    """``haplocn.mops()``: CNVs in haploid genomes (normal class CN1), cn.mops's defaults for it.

    The model is cn.mops's EM with the initial/prior weight on CN1; as in cn.mops the coverages are reset
    to 1 inside the model (``norm=2``'s coverages are recorded in ``params['cov']`` only). Segment means
    (no ``use_median``). ``cnvr`` columns are named ``CN.<sample>`` before integer copy numbers, as in
    cn.mops. Runs on the CPU or the GPU backend.

    Parameters
    ----------
    input : array, DataFrame, CountData or path
        Read counts, regions x samples (see :func:`gcnmops.cn_mops`).
    {parameters}

    {returns}
    """
    method = METHODS["haplo"]
    params = method.params(
        I=I, classes=classes, prior_impact=prior_impact, cyc=cyc, norm=norm, norm_type=norm_type,
        size_factor=size_factor, norm_qu=norm_qu, qu_size_factor=qu_size_factor,
        upper_threshold=upper_threshold, lower_threshold=lower_threshold, min_width=min_width,
        seg_algorithm=seg_algorithm, min_read_count=min_read_count, return_posterior=return_posterior,
        segment_args=segment_args)
    timings: dict = {}
    with timed_stage(timings, "read"):
        data = read_counts(input)
    result = run_mops(data, params, backend=backend, timings=timings, method=method)
    return result.replace(cnvr=method_cnvr(method, result.cnvr, result.cnvs, result.sample_names))


@documented("reference")
def reference_cn_mops(
    cases,
    controls,
    I=_REFERENCE["I"],  # noqa: E741 - cn.mops's name
    classes=_REFERENCE["classes"],
    prior_impact: float = _REFERENCE["prior_impact"],
    cyc: int = _REFERENCE["cyc"],
    norm: int = _REFERENCE["norm"],
    norm_type: str = _REFERENCE["norm_type"],
    size_factor: str = _REFERENCE["size_factor"],
    norm_qu: float = _REFERENCE["norm_qu"],
    qu_size_factor: float = _REFERENCE["qu_size_factor"],
    upper_threshold: float = _REFERENCE["upper_threshold"],
    lower_threshold: float = _REFERENCE["lower_threshold"],
    min_width: int = _REFERENCE["min_width"],
    seg_algorithm: str = _REFERENCE["seg_algorithm"],
    min_read_count: float = _REFERENCE["min_read_count"],
    return_posterior: bool = _REFERENCE["return_posterior"],
    backend: str = "auto",
    verbose: int = 1,
    **segment_args,
) -> CNVDetectionResult:
    """``referencecn.mops(cases, controls)``: CNVs of case samples against control samples (tumour vs normal).

    ``cases``, ``controls``: count tables as for :func:`gcnmops.cn_mops` (matrix, DataFrame with or
    without ``seqnames, start, end``, CountData, file path); a 1-D array is one sample. Both ranged with
    identical ranges, or both plain matrices with the same number of rows. Missing sample names become
    Case_1.. / Control_1... Normalization: ``norm=1`` normalizes cases and controls together; ``norm=2``
    estimates coverages on both, divides the controls by theirs and models the cases' raw counts with
    theirs. Per region lambda = mean of the normalized controls (floored at 1e-5) and the one-step model
    (model/onestep.py) gives the cases' posteriors; the results are for the cases. ``seg_algorithm``
    defaults to cn.mops's "DNAcopy" (the fast segmentation is used, with a warning, where gcnmops has no
    DNAcopy backend). ``cyc`` is recorded only (there is no EM).

    Parameters
    ----------
    cases, controls : array, DataFrame, CountData or path
        Read counts of the cases and of the controls, regions x samples (see :func:`gcnmops.cn_mops`).
    {parameters}

    {returns}
    """
    method = METHODS["reference"]
    params = method.params(
        I=I, classes=classes, prior_impact=prior_impact, cyc=cyc, norm=norm, norm_type=norm_type,
        size_factor=size_factor, norm_qu=norm_qu, qu_size_factor=qu_size_factor,
        upper_threshold=upper_threshold, lower_threshold=lower_threshold, min_width=min_width,
        seg_algorithm=_segmentation_available(seg_algorithm), min_read_count=min_read_count,
        return_posterior=return_posterior, segment_args=segment_args)
    check_segment_args(params)
    timings: dict = {}
    with timed_stage(timings, "read"):
        x = read_named_counts(cases, "Case", "cases")
        r = read_named_counts(controls, "Control", "controls")
    check_same_regions(x, r)
    plan = RunPlan.build(method, params, backend, x.n_regions)
    log_note(method, verbose)
    warn_few_regions(x.n_regions, stacklevel=2)
    return run_block(plan, x, controls=r, timings=timings)


@documented("single")
def single_cn_mops(
    x,
    I=_SINGLE["I"],  # noqa: E741 - cn.mops's name
    classes=_SINGLE["classes"],
    prior_impact: float = _SINGLE["prior_impact"],
    cyc: int = _SINGLE["cyc"],
    norm: int = _SINGLE["norm"],
    norm_type: str = _SINGLE["norm_type"],
    size_factor: str = _SINGLE["size_factor"],
    norm_qu: float = _SINGLE["norm_qu"],
    qu_size_factor: float = _SINGLE["qu_size_factor"],
    upper_threshold: float = _SINGLE["upper_threshold"],
    lower_threshold: float = _SINGLE["lower_threshold"],
    min_width: int = _SINGLE["min_width"],
    seg_algorithm: str = _SINGLE["seg_algorithm"],
    min_read_count: float = _SINGLE["min_read_count"],
    return_posterior: bool = _SINGLE["return_posterior"],
    backend: str = "auto",
    **segment_args,
) -> CNVDetectionResult:
    """``singlecn.mops(x)``: CNVs of one sample without a cohort.

    ``x``: a 1-D array (regions on the pseudo-chromosome "undef", coordinates = indices), a one-column
    matrix, or a table / CountData / file with exactly one sample column. No normalization (the
    normalization arguments are dummies, as in cn.mops); cov = 1. Per chromosome lambda = the median of
    its positive counts (0 for a chromosome without reads: its regions take the short-cut answer); then the
    one-step model with likelihood floor 1e-15. As in cn.mops the result says method "referencecn.mops"
    (so calc_integer_copy_numbers refits with the reference model) and ``cnvr`` holds the CNVs themselves.

    Parameters
    ----------
    x : array, DataFrame, CountData or path
        One sample's read counts per region.
    {parameters}

    {returns}
    """
    method = METHODS["single"]
    params = method.params(
        I=I, classes=classes, prior_impact=prior_impact, cyc=cyc, norm=norm, norm_type=norm_type,
        size_factor=size_factor, norm_qu=norm_qu, qu_size_factor=qu_size_factor,
        upper_threshold=upper_threshold, lower_threshold=lower_threshold, min_width=min_width,
        seg_algorithm=_segmentation_available(seg_algorithm), min_read_count=min_read_count,
        return_posterior=return_posterior, segment_args=segment_args)
    check_segment_args(params)
    timings: dict = {}
    with timed_stage(timings, "read"):
        data = read_single_sample(x)
    plan = RunPlan.build(method, params, backend, data.n_regions)
    log_note(method)
    result = run_block(plan, data, timings=timings)
    return result.replace(cnvr=method_cnvr(method, result.cnvr, result.cnvs, result.sample_names))


def cnvr_per_sample(result: CNVDetectionResult) -> pd.DataFrame:
    """``result.cnvr`` as seqnames, start, end + one label column per sample, whatever cn.mops's shape of it:
    haplocn.mops names its columns ``CN.<sample>`` before integer copy numbers, and singlecn.mops returns the
    CNVs themselves (sampleName, median, mean, CN) as CNV regions."""
    cnvr = result.cnvr.reset_index(drop=True)
    names = list(result.sample_names)
    if all(s in cnvr.columns for s in names):
        return cnvr
    if all(f"CN.{s}" in cnvr.columns for s in names):
        labels = [cnvr[f"CN.{s}"].to_numpy() for s in names]
    else:  # CNVs as regions: each row is one sample's CNV
        own = cnvr["sampleName"].astype(str).to_numpy() if "sampleName" in cnvr else np.full(len(cnvr), None)
        label = cnvr["CN"].to_numpy(dtype=object) if "CN" in cnvr else np.full(len(cnvr), None, dtype=object)
        labels = [np.where(own == str(s), label, None) for s in names]
    return cnvr_frame(cnvr["seqnames"], cnvr["start"], cnvr["end"], names, labels)


def log_note(method: Method, verbose: int = 1) -> None:
    """The method's message (referencecn.mops: tumour-vs-normal defaults; singlecn.mops: no normalization)."""
    if method.note and verbose > 0:
        log.info(method.note)


# ------------------------------------------------------------------------------------------- helpers
def _segmentation_available(seg_algorithm):
    """cn.mops's "DNAcopy" where R's DNAcopy can be loaded (rpy2), else the fast segmentation (with a warning)."""
    from ..segmentation.dnacopy import dnacopy_available

    if seg_algorithm == "DNAcopy" and not dnacopy_available():
        warnings.warn('segAlgorithm "DNAcopy" needs R with the DNAcopy package (and rpy2): using the fast '
                      'segmentation (seg_algorithm="fast").', RuntimeWarning, stacklevel=3)
        return "fast"
    return seg_algorithm


def read_named_counts(obj, prefix: str, what: str) -> CountData:
    """Counts of one side of referencecn.mops; unnamed samples become <prefix>_1, <prefix>_2, ..."""
    if isinstance(obj, np.ndarray) or (isinstance(obj, (list, tuple)) and not isinstance(obj, str)):
        arr = np.asarray(obj)
        if arr.ndim == 1:
            arr = arr.reshape(-1, 1)
        if arr.ndim == 2:
            obj = pd.DataFrame(arr, columns=[f"{prefix}_{k + 1}" for k in range(arr.shape[1])])
    elif isinstance(obj, pd.Series):
        obj = obj.to_frame(name=obj.name if obj.name is not None else f"{prefix}_1")
    elif isinstance(obj, pd.DataFrame) and isinstance(obj.columns, pd.RangeIndex):
        obj = obj.set_axis([f"{prefix}_{k + 1}" for k in range(obj.shape[1])], axis=1)
    try:
        return read_counts(obj, min_samples=1)
    except InputError as err:
        raise InputError(f"{what}: {err}") from None


def check_same_regions(x: CountData, r: CountData) -> None:
    """InputError unless cases ``x`` and controls ``r`` have the same regions (both ranged alike, or both
    plain matrices of the same length)."""
    if (x.ranges is None) != (r.ranges is None):
        raise InputError("Cases and controls must both carry genomic ranges (seqnames, start, end) or both be "
                         "plain read-count matrices.")
    if x.n_regions != r.n_regions:
        raise InputError(f"Cases and controls must have the same length ({x.n_regions} case regions, "
                         f"{r.n_regions} control regions).")
    if x.ranges is not None:
        a = x.ranges[["seqnames", "start", "end"]].reset_index(drop=True)
        b = r.ranges[["seqnames", "start", "end"]].reset_index(drop=True)
        same = (a["seqnames"].astype(str).to_numpy() == b["seqnames"].astype(str).to_numpy()) & \
               (a["start"].to_numpy() == b["start"].to_numpy()) & (a["end"].to_numpy() == b["end"].to_numpy())
        if not same.all():
            i = int(np.argmin(same))
            raise InputError(f"Cases and controls must have the same ranges (first difference at region {i + 1}: "
                             f"{a.iloc[i, 0]}:{a.iloc[i, 1]}-{a.iloc[i, 2]} vs "
                             f"{b.iloc[i, 0]}:{b.iloc[i, 1]}-{b.iloc[i, 2]}).")


def read_single_sample(x, *, coordinates: str = "auto", depth_to_counts: float | None = None) -> CountData:
    """singlecn.mops's input: exactly one sample. ``coordinates`` and ``depth_to_counts``: a file's, as
    :func:`gcnmops.io.read_counts` takes them."""
    if isinstance(x, (list, tuple)) and not isinstance(x, str):
        x = np.asarray(x)
    if isinstance(x, pd.Series):
        x = x.to_frame(name=x.name if x.name is not None else "Sample_1")
    data = read_counts(x, min_samples=1, coordinates=coordinates, depth_to_counts=depth_to_counts)
    if data.n_samples != 1:
        raise InputError(f"More than one sample detected ({data.n_samples} sample columns). Use standard "
                         "cn.mops for a cohort (--method cn.mops; cn_mops() in Python, gcn.mops() in R).")
    return data


__all__ = ["exome_cn_mops", "haplo_cn_mops", "reference_cn_mops", "single_cn_mops", "cnvr_per_sample", "method_cnvr",
           "log_note", "read_named_counts", "check_same_regions", "read_single_sample"]
