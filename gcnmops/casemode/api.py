"""Case mode: ``build_reference`` (a cohort's fit, stored) and ``call_samples`` (new samples against it).

- ``mode="frozen"``: the new samples alone, each normalized against the reference cohort (normalize.py) and scored
  by the EM's E-step with the reference's per-region lambda and alpha (model/estep.py); then cn.mops's
  segmentation and calls. No refit: the time is one pass over regions x classes per sample.
- ``mode="refit"``: the cohort's stored counts and the new samples together through cn_mops (the sex-aware parts
  when the reference is sex-aware); the result is the new samples' part of that run, which equals ``cn_mops`` on
  the combined matrix for them.
"""
from __future__ import annotations

import math
import os
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd

from ..calls.integer import calc_integer_copy_numbers
from ..cuda.probe import Backend, resolve_backend
from ..data import CountData
from ..errors import InputError
from ..io import read_counts
from ..params import METHODS, ModelKind, method_spec
from ..progress import timed_stage
from ..result import CNVDetectionResult
from ..pipeline.cnmops import check_segment_args, run_mops, warn_few_regions
from ..pipeline.plan import RunPlan, method_cnvr
from ..pipeline.blocks import Normalized, Regions
from ..pipeline.stages import finish_block
from .integer import integer_copy_numbers
from .normalize import coverage_against, coverage_median
from .parts import fit_parts, plan_parts, score_parts
from .reference import Reference, load_reference
from .sex import check_genome, sample_sexes

MODES = ("frozen", "refit")


def build_reference(counts, method: str = "cn.mops", *, keep_counts: bool = True, sex_aware: bool = False, sex=None,
                    genome: str | None = "hg38", backend: str = "auto", **params) -> Reference:
    """Fit a reference cohort once, to call new samples against it later (:func:`call_samples`).

    Parameters
    ----------
    counts : array, DataFrame, CountData or path
        The cohort's read counts, regions x samples (as for :func:`gcnmops.cn_mops`), at least two samples.
    method : {"cn.mops", "exome", "haplo"}
        The cn.mops method whose model and defaults the reference has (``params`` override its defaults).
    keep_counts : bool
        Store the cohort's counts (m x N float64), needed by ``call_samples(mode="refit")``.
    sex_aware : bool
        Model chrX/chrY outside the pseudo-autosomal regions per sex (casemode/parts.py): a male's single X is his
        normal; off by default (cn.mops's model everywhere).
    sex : list or dict, optional
        female/male per sample (sex_aware only); default inferred from chrX/chrY coverage (casemode/sex.py).
    genome : {"hg38", "hg19", None}
        The build whose pseudo-autosomal regions are excluded (None: none).
    backend : {"auto", "cpu", "gpu"}
        Where the EM runs.
    **params
        cn.mops's parameters (snake_case: prior_impact, I, classes, norm, ...) and the segmentation's arguments;
        they are stored and used for every call.

    Returns
    -------
    Reference
        per-region lambda and alpha, the normalization state, the method and its parameters, the cohort's sexes
        (sex-aware) and, with ``keep_counts``, its counts; ``.save(path)`` stores it (``load_reference``).
    """
    m = method_spec(method)
    if m.model is not ModelKind.EM:
        cohort = ", ".join(k for k, v in METHODS.items() if v.model is ModelKind.EM)
        raise InputError(f"A reference is built with a cohort method ({cohort}); {m.name} has no per-region cohort "
                         "fit.")
    if sex is not None and not sex_aware:
        raise InputError("sex= is used with sex_aware=True only.")
    plan, genome, data, parts, info = _cohort_plan(m, params, counts, sex_aware, genome, sex, backend)
    p = plan.params
    sexes = None if info is None else [s["sex"] for s in info]
    _, _, _, fits = fit_parts(data, replace(plan, params=replace(p, return_posterior=False)), parts, sexes)
    return Reference(method=m.name, params=p, sample_names=list(data.sample_names), ranges=data.ranges,
                     n_regions=data.n_regions, fits=fits,
                     coverage_median=coverage_median(data.counts) if plan.uses_coverage else math.nan,
                     sex_aware=len(parts) > 1, genome=genome, cohort_sex=info,
                     counts=data.counts if keep_counts else None)


def call_samples(new_counts, reference, mode: str = "frozen", *, sex=None, integer: bool = False,
                 backend: str = "auto") -> CNVDetectionResult:
    """Call CNVs of new samples against a reference cohort (:func:`build_reference`).

    Parameters
    ----------
    new_counts : array, DataFrame, CountData or path
        The new samples' read counts, with the reference's regions (same seqnames, start, end; a bare matrix: as
        many rows). One sample or more.
    reference : Reference or path
        A reference, or the folder it was saved to.
    mode : {"frozen", "refit"}
        "frozen": each new sample normalized against the reference cohort and scored with its per-region
        parameters (E-step only), then segmented and called; "refit": cn_mops on the cohort's stored counts and
        the new samples together (needs a reference built with ``keep_counts=True``).
    sex : list or dict, optional
        female/male per new sample (sex-aware references); default inferred (reported in ``params['sex']``).
    integer : bool
        Also integer copy numbers (frozen and sex-aware runs against the fitted parameters, casemode/integer.py;
        refit otherwise: cn.mops's calcIntegerCopyNumbers on the combined run).
    backend : {"auto", "cpu", "gpu"}
        Where the model step and the segmentation's statistic run.

    Returns
    -------
    CNVDetectionResult
        for the new samples only; ``params['caseMode']`` says how they were called.
    """
    if mode not in MODES:
        raise InputError(f"mode must be 'frozen' or 'refit', got {mode!r}.")
    if isinstance(reference, Reference):
        ref = reference
    elif isinstance(reference, (str, os.PathLike)):
        ref = load_reference(reference)
    else:
        raise InputError("reference must be a Reference (gcnmops.build_reference) or the folder it was saved to.")
    if sex is not None and not ref.sex_aware:
        raise InputError("sex= is used with a sex-aware reference only (build_reference(..., sex_aware=True)).")
    data = read_counts(new_counts, min_samples=1)
    check_reference_regions(data, ref)
    backend = resolve_backend(backend)
    info = None
    if ref.sex_aware:
        info = sample_sexes(data.counts, data.genomic_ranges(), ref.genome, data.sample_names, sex)
    if mode == "frozen":
        result = _frozen(data, ref, info, backend, integer)
    else:
        result = _refit(data, ref, info, backend, integer)
    result.params["caseMode"] = {"mode": mode, "method": ref.method, "referenceSamples": ref.n_samples,
                                 "sexAware": ref.sex_aware}
    if info is not None:
        result.params["sex"] = info
    return result


def check_reference_regions(data: CountData, ref: Reference) -> None:
    """InputError unless the new samples have the reference's regions."""
    if (data.ranges is None) != (ref.ranges is None):
        raise InputError("The new samples and the reference must both carry genomic ranges (seqnames, start, end) "
                         "or both be plain read-count matrices.")
    if data.n_regions != ref.n_regions:
        raise InputError(f"The new samples have {data.n_regions:,} regions, the reference {ref.n_regions:,}: count "
                         "the new samples' reads in the reference's regions (same windows or targets).")
    if ref.ranges is None:
        return
    a = data.ranges[["seqnames", "start", "end"]].reset_index(drop=True)
    b = ref.ranges[["seqnames", "start", "end"]].reset_index(drop=True)
    same = (a["seqnames"].astype(str).to_numpy() == b["seqnames"].astype(str).to_numpy()) & \
           (a["start"].to_numpy() == b["start"].to_numpy()) & (a["end"].to_numpy() == b["end"].to_numpy())
    if not same.all():
        i = int(np.argmin(same))
        raise InputError(f"The new samples' regions differ from the reference's (first difference at region {i + 1}: "
                         f"{a.iloc[i, 0]}:{a.iloc[i, 1]}-{a.iloc[i, 2]} vs the reference's "
                         f"{b.iloc[i, 0]}:{b.iloc[i, 1]}-{b.iloc[i, 2]}); count the reads in the reference's regions.")


def _frozen(data: CountData, ref: Reference, info, backend: Backend, integer: bool) -> CNVDetectionResult:
    p = ref.params
    plan = RunPlan.build(METHODS[ref.method], p, backend, data.n_regions)
    sexes = None if info is None else [s["sex"] for s in info]
    timings: dict = {}
    with timed_stage(timings, "normalize"):
        cov = (coverage_against(data.counts, ref.coverage_median, data.sample_names) if plan.uses_coverage
               else np.ones(data.n_samples))
    with timed_stage(timings, "model"):
        normalized, out = score_parts(data.counts, data.sample_names, sexes, ref.fits, plan, cov,
                                      fitted_samples(ref))
    result = finish_block(plan, Regions.of(data), Normalized(normalized, None, cov), out, timings)
    result = result.replace(cnvr=plan.method_cnvr(result.cnvr, result.cnvs, result.sample_names))
    if integer:
        result = integer_copy_numbers(result, ref.fits, p, sexes)
    return result


def fitted_samples(ref: Reference) -> dict:
    """Per part of the reference's model: how many cohort samples it was fitted on."""
    sexes = [s["sex"] for s in ref.cohort_sex] if ref.cohort_sex else [None] * ref.n_samples
    return {pf.part.name: sum(pf.part.takes(s) for s in sexes) for pf in ref.fits}


def _refit(data: CountData, ref: Reference, info, backend: Backend, integer: bool) -> CNVDetectionResult:
    if ref.counts is None:
        raise InputError("This reference was built without the cohort's counts (keep_counts=False): mode='refit' "
                         "needs them. Use mode='frozen', or rebuild the reference with keep_counts=True.")
    clash = sorted(set(ref.sample_names) & set(data.sample_names))
    if clash:
        raise InputError(f"New sample name(s) {', '.join(clash[:5])} are also reference samples: rename them for "
                         "mode='refit' (the combined cohort needs unique names).")
    p = ref.params
    method = METHODS[ref.method]
    combined = CountData(np.asfortranarray(np.column_stack([ref.counts, data.counts])),
                         list(ref.sample_names) + list(data.sample_names), ref.ranges)
    if not ref.sex_aware:
        result = run_mops(combined, p, backend=backend, method=method)
        result = result.replace(cnvr=method_cnvr(method, result.cnvr, result.cnvs, result.sample_names))
        if integer and len(result.cnvs):
            result = calc_integer_copy_numbers(result, backend=backend)
        return select_samples(result, data.sample_names)
    sexes = [s["sex"] for s in ref.cohort_sex] + [s["sex"] for s in info]
    plan = RunPlan.build(method, p, backend, combined.n_regions)
    result = _parts_run(combined, plan, [pf.part for pf in ref.fits], sexes, integer)
    return select_samples(result, data.sample_names)


def _parts_run(data: CountData, plan: RunPlan, parts, sexes, integer: bool) -> CNVDetectionResult:
    """A cohort run of the model in ``parts`` (parts.py): fit, then the stages after the model
    (stages.finish_block: segmentation and calls), integer copy numbers."""
    timings: dict = {}
    with timed_stage(timings, "model"):
        normalized, cov, out, fits = fit_parts(data, plan, parts, sexes)
    result = finish_block(plan, Regions.of(data), Normalized(normalized, None, cov), out, timings)
    return integer_copy_numbers(result, fits, plan.params, sexes) if integer else result


def sex_aware_cn_mops(input, method: str = "cn.mops", *, sex=None, genome: str | None = "hg38",
                      integer: bool = False, backend: str = "auto", **params) -> CNVDetectionResult:
    """cn_mops (or exomecn.mops: ``method="exome"``) on a cohort with chrX and chrY modelled per sex
    (casemode/parts.py): a male's single X is his normal class, CNVs there are called relative to it.

    ``sex``: female/male per sample (list, or mapping sample -> sex); default inferred from chrX/chrY coverage
    (casemode/sex.py), reported in ``params['sex']``. ``genome``: "hg38", "hg19" or None, whose pseudo-autosomal
    regions stay with the autosomes. ``integer``: also integer copy numbers (against the fitted parameters,
    casemode/integer.py). Other parameters as :func:`gcnmops.cn_mops`; its results on the autosomes are cn_mops's.
    """
    m = check_sex_aware_method(method)
    plan, genome, data, parts, info = _cohort_plan(m, params, input, True, genome, sex, backend)
    result = _parts_run(data, plan, parts, None if info is None else [s["sex"] for s in info], integer)
    if info is not None:
        result.params["sex"] = info
    return result


def check_sex_aware_method(method):
    """The method spec of ``method`` if sex_aware_cn_mops runs it (a diploid cohort method), else InputError."""
    m = method_spec(method)
    if m.model is not ModelKind.EM or m.main_class != "CN2":
        raise InputError(f"Sex-aware calling runs cn.mops or exomecn.mops (method 'cn.mops' or 'exome'), not "
                         f"{m.name}.")
    return m


def _cohort_plan(m, params: dict, counts, sex_aware: bool, genome, sex, backend):
    """What build_reference and sex_aware_cn_mops start with: (the run's plan (method ``m``, checked parameters,
    resolved backend), genome, the cohort's CountData, the model's parts (casemode/parts.py), the samples' sexes
    or None)."""
    defaults = m.parameter_defaults()
    segment_args = {k: params.pop(k) for k in list(params) if k not in defaults}
    p = m.params(segment_args=segment_args, **params)
    check_segment_args(p)
    genome = check_genome(genome)
    data = read_counts(counts)
    warn_few_regions(data.n_regions, stacklevel=3)
    plan = RunPlan.build(m, p, backend, data.n_regions)
    gr = data.genomic_ranges()
    parts = plan_parts(gr, p, sex_aware, genome)
    info = sample_sexes(data.counts, gr, genome, data.sample_names, sex) if len(parts) > 1 else None
    return plan, genome, data, parts, info


def select_samples(result: CNVDetectionResult, names: list[str]) -> CNVDetectionResult:
    """The part of ``result`` for the samples ``names``: their columns, segments and CNVs, and the CNV regions
    in which one of them has a CNV (with their columns); region-level values (INI, L, A) as they are."""
    idx = pd.Index(result.sample_names).get_indexer(names)
    keep = set(names)
    cnvs = result.cnvs[result.cnvs["sampleName"].isin(keep)].reset_index(drop=True)
    cnvr = result.cnvr.reset_index(drop=True)
    rows = np.zeros(len(cnvr), dtype=bool)
    for _, c in cnvs.iterrows():
        rows |= ((cnvr["seqnames"].astype(str) == str(c["seqnames"])) & (cnvr["start"] <= c["start"])
                 & (cnvr["end"] >= c["end"])).to_numpy()
    sample_cols = [c for c in cnvr.columns if c in set(result.sample_names) or
                   (c.startswith("CN.") and c[3:] in set(result.sample_names))]
    drop = [c for c in sample_cols if c not in keep and not (c.startswith("CN.") and c[3:] in keep)]
    params = dict(result.params)
    if params.get("cov") is not None and np.ndim(params["cov"]) == 1:
        params["cov"] = np.asarray(params["cov"])[idx]
    post = None if result.posterior_probs is None else np.asfortranarray(result.posterior_probs[:, :, idx])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return result.replace(
            normalized_data=np.asfortranarray(result.normalized_data[:, idx]),
            local_assessments=np.asfortranarray(result.local_assessments[:, idx]),
            individual_call=np.asfortranarray(result.individual_call[:, idx]),
            cn_index=np.asfortranarray(result.cn_index[:, idx]), posterior_probs=post, params=params,
            segmentation=result.segmentation[result.segmentation["sampleName"].isin(keep)].reset_index(drop=True),
            cnvs=cnvs, cnvr=cnvr.loc[rows].drop(columns=drop).reset_index(drop=True), sample_names=list(names))


__all__ = ["build_reference", "call_samples", "sex_aware_cn_mops", "check_sex_aware_method", "check_reference_regions",
           "select_samples", "MODES"]
