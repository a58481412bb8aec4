"""A method of the family by name, then integer copy numbers, then the result files: the sequence the command
line (``gcnmops run``) and the batch runner (``gcnmops batch``) share."""
from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..calls.filters import call_filters
from ..calls.integer import calc_integer_copy_numbers
from ..calls.qc import sample_spreads
from ..calls.quality import call_evidence, has_matrices, model_residuals
from ..compat import InThisThread, keep_numba_threads, run_threads, threadsafe_parallel
from ..cuda.config import SPREAD_BESIDE_FRACTION
from ..cuda.probe import resolve_backend
from ..outputs.callfiles import VcfOptions
from ..outputs.writers import CALL_MATRICES, MODEL_MATRICES, ResultWriter
from ..result import CNVDetectionResult
from ..progress import timed_stage
from ..provenance import describe
from .stages import MODEL_DONE
from .family import cnvr_per_sample
from .methods import RUN_ARGS, build_params, run_method
from .selection import select

#: the stages ``run_and_write`` reports to its ``on_stage`` callback, in order ("integer" only with integer=True)
STAGES = ("normalize+model+calls", "integer", "write")


def run_and_write(method, input, outdir, *, controls=None, backend: str = "auto", integer: bool = True,
                  formats: list[str] | None = None, timings: dict | None = None,
                  on_stage: Callable[[str], None] | None = None,
                  extra: Callable[[CNVDetectionResult, dict], Iterable[tuple[str, Callable]]] | None = None,
                  vcf: VcfOptions | None = None, exclude=None, exclude_samples=None,
                  min_length: int | None = None, min_quality: int | None = None,
                  **params) -> tuple[CNVDetectionResult, list[Path]]:
    """Run ``method`` (see methods.run_method), label its CNVs with integer copy numbers (``integer``; when there
    are CNV regions) and write every result file under ``outdir`` (``formats``: default all). ``backend`` is
    resolved once, here, for the run and the integer copy numbers. ``timings``: seconds of stages the caller
    ran before (e.g. its own read), put into the result's timings; ``on_stage(name)`` is called after each of
    STAGES. ``extra(result, sizes)``: more files of the same all-or-nothing batch (plots, a report), see
    ``writers.write_result``; ``vcf``: how the VCFs are written (``callfiles.VcfOptions``). ``exclude`` (a BED)
    and ``exclude_samples`` ("auto" or names): windows and samples left out before the model (``selection``);
    ``min_length`` (bp) and ``min_quality`` (phred): the calls' filters, marked in the call files
    (``calls.filters``). The result carries its ``sample_qc`` and ``selection``. The parameters are checked
    before anything else (before the GPU is probed).
    Returns (the result, as written; the paths written); the result's timings gain "integer" and "write"."""
    with warnings.catch_warnings():  # the method warns itself, once
        warnings.simplefilter("ignore")
        build_params(method, {k: v for k, v in params.items() if k not in RUN_ARGS})
    filters = call_filters(min_length, min_quality)
    backend = resolve_backend(backend)
    report = on_stage or (lambda stage: None)
    input, controls, selection = select(method, input, controls, exclude=exclude, exclude_samples=exclude_samples)
    writer = ResultWriter(outdir, formats)
    # beside the pipeline: the qualities' residual counts and the sample QC's spreads (once the model has run;
    # the spreads where the run has more than one thread), the rest of the calls' evidence (beside integer CNs)
    # (one thread asked for, or a threading layer that takes one parallel region at a time: everything in turn,
    # on this thread)
    beside = run_threads() > 1 and threadsafe_parallel()
    side = ThreadPoolExecutor(2, initializer=keep_numba_threads()) if beside else InThisThread()
    try:
        spreads: list = []  # (the model's part, its spreads' future)
        residuals: list = []  # (the model's part, its residual counts' future)

        def model_done(part: CNVDetectionResult) -> None:
            # the model's matrices are written and the QC's spreads made while the segmentation runs (the cores
            # and the device shared with it: the spreads take a smaller share of the device's free memory)
            writer.stage_matrices(part, MODEL_MATRICES)
            if has_matrices(part):
                residuals.append((part, side.submit(model_residuals, part.params, part.normalized_data)))
            if beside:
                spreads.append((part, side.submit(sample_spreads, part, backend=backend,
                                                  memory_fraction=SPREAD_BESIDE_FRACTION)))

        token = MODEL_DONE.set(model_done)
        try:
            result = run_method(method, input, controls, backend=backend, **params)
        finally:
            MODEL_DONE.reset(token)
        writer.stage_matrices(result, CALL_MATRICES)
        result.timings.update(timings or {})
        result.provenance = describe(backend, params.get("devices"), inputs=_paths(input, controls))
        report("normalize+model+calls")
        # the calls' qualities need the model's evidence for them: gathered beside integer CNs and the sample QC
        evidence = side.submit(call_evidence, result, _residuals_of(residuals, result)) if len(result.cnvs) else None
        if integer:
            if len(result.cnvr):
                with timed_stage(result.timings, "integer"):
                    result = calc_integer_copy_numbers(result, backend=backend)
            report("integer")
        with timed_stage(result.timings, "qc"):  # what is left of it: waiting for the spreads, the table
            sample_qc = selection.qc(result, backend=backend, spreads=_spreads_of(spreads, result))
        # the evidence as a Future while it is made: the files that need it wait for it, the others do not
        result = result.replace(sample_qc=sample_qc, selection={**selection.entries(), **filters})
        if evidence is not None:
            result = result.replace(call_evidence=evidence)
    except BaseException:
        side.shutdown(wait=True, cancel_futures=True)
        writer.abort()
        raise
    try:
        with timed_stage(result.timings, "write"):
            # files want one CN column per sample in cnvr (haplo/single keep cn.mops's own cnvr shape until integer
            # CNs)
            files = None if extra is None else (lambda sizes: extra(result, sizes))
            written = writer.finish(result.replace(cnvr=cnvr_per_sample(result)), extra=files, vcf=vcf)
        if evidence is not None:
            result = result.replace(call_evidence=evidence.result())
    finally:
        side.shutdown(wait=True)
    for stage in ("plots", "report"):  # timed by ``extra`` inside the batch: not counted twice
        result.timings["write"] -= result.timings.get(stage, 0.0)
    report("write")
    return result, written


def _made_for(made: list, result: CNVDetectionResult, names: tuple[str, ...], params: tuple[str, ...] = ()):
    """What was made beside the segmentation from the model's part (``made``: (part, future) pairs, the last one
    taken), where the part's arrays ``names`` and params ``params`` are ``result``'s; None (made from ``result``
    then) where no part came or a method changed them after the model."""
    if not made:
        return None
    part, value = made[-1]
    same = all(getattr(part, n) is getattr(result, n) for n in names) and all(
        part.params.get(k) is result.params.get(k) for k in params)
    return value.result() if same else None


def _spreads_of(made: list, result: CNVDetectionResult):
    """The sample QC's spreads (``calls.qc.sample_spreads``) made from the model's part, or None."""
    return _made_for(made, result, ("normalized_data", "local_assessments"))


def _residuals_of(made: list, result: CNVDetectionResult):
    """The qualities' residual counts (``calls.quality.model_residuals``) made from the model's part, or None."""
    return _made_for(made, result, ("normalized_data",), ("L", "cov", "classes", "mainClass"))


def _paths(*inputs) -> list | None:
    """The file paths among a run's inputs (a CountData or matrix has none); None (the noted command's inputs,
    ``provenance.describe``) where no input is a path."""
    paths = [i for i in inputs if isinstance(i, (str, os.PathLike))]
    return paths or None


__all__ = ["run_and_write", "STAGES"]
