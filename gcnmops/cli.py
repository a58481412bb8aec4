"""Command line: ``python -m gcnmops run INPUT -o OUTDIR [options]``, ``python -m gcnmops batch MANIFEST -o OUTDIR``,
``python -m gcnmops count``, ``python -m gcnmops reference build``, ``python -m gcnmops call``,
``python -m gcnmops warmup``, ``python -m gcnmops info`` and ``python -m gcnmops gatk-sv ...`` (GATK-SV's cn.MOPS
step)."""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from .errors import InputError
from .gatksv import cli as gatksv_cli
from .cliparser import build_parser
from .outputs.formats import FORMATS, check_formats
from .params import METHODS, PARAMETERS, ModelKind
from .provenance import describe, note_command

#: sample counts whose GPU kernels ``gcnmops warmup`` compiles besides the example's 40: one per work-buffer size
#: (model.gpu.local_work_size), and one above cuda.config.EM_LOCAL_WORK_MAX (the global work buffer of larger
#: cohorts: a GATK-SV batch's first pass compiled it, ~7 s)
WARMUP_SAMPLES = (6, 15, 30, 100, 150)
#: about how long a first run compiles the CPU's and the GPU's kernels (seconds, a few cores; said when it does)
COMPILE_SECONDS = {"cpu": 60, "gpu": 30}
#: relative weights of the stages of a run, for the progress bar (measured shares of a CPU run)
STAGE_WEIGHTS = {"read": 1.0, "normalize": 1.0, "model": 4.0, "segment_call": 4.0, "integer": 0.5, "write": 2.0,
                 "plots": 2.0, "report": 0.3}


def _reference_build(args) -> int:
    gpu = _gpu_warmup(args)
    from .casemode import build_reference
    from .casemode.reference import is_reference_store
    from .files import check_target
    from .pipeline.methods import RUN_ARGS, build_params

    method = METHODS[args.method]
    kwargs = {k: v for k, v in _method_kwargs(args, method).items() if k not in RUN_ARGS}
    build_params(method.name, kwargs)  # before reading the input
    check_target(args.output, is_reference_store, "the reference")
    _set_threads(args.threads)
    t0 = time.perf_counter()
    if gpu is not None:
        gpu.wait()
    ref = build_reference(args.input, method.name, keep_counts=not args.no_counts, sex_aware=args.sex_aware,
                          sex=args.sex, genome=None if args.genome == "none" else args.genome, backend=args.backend,
                          **kwargs)
    path = ref.save(args.output)
    print(f"gcnmops reference build: {ref.n_regions:,} regions x {ref.n_samples} samples, method {ref.method}, "
          f"{'counts kept' if ref.counts is not None else 'no counts'}"
          f"{', sex-aware' if ref.sex_aware else ''} in {time.perf_counter() - t0:.2f} s -> {path}")
    if ref.cohort_sex:
        print(_sexes(ref.cohort_sex))
    return 0


def _call(args) -> int:
    cohort = _reference_cohort(args)
    gpu = _gpu_warmup(args)
    from .casemode import call_samples, load_reference
    from .cuda.probe import resolve_backend
    from .outputs.callfiles import VcfOptions
    from .io import read_counts
    from .outputs.writers import check_output_folder, write_result
    from .pipeline.family import cnvr_per_sample
    from .pipeline.selection import counts_qc

    formats = check_formats(args.formats)
    check_output_folder(args.outdir)
    vcf = VcfOptions(args.reference_fai, args.reference, args.per_sample_vcf).checked()
    _set_threads(args.threads)
    t0 = time.perf_counter()
    ref = load_reference(cohort)
    if "vcf" in formats:
        vcf.checked(ref.ranges)  # the new samples' regions are the reference's
    if gpu is not None:
        gpu.wait()
    data = read_counts(args.input, min_samples=1)
    result = call_samples(_handed_over(data), ref, args.mode, sex=args.sex, integer=not args.no_integer,
                          backend=args.backend)
    result = result.replace(sample_qc=counts_qc(result, data, ref.qc_levels(result)))
    result.provenance = describe(resolve_backend(args.backend))
    written = write_result(result.replace(cnvr=cnvr_per_sample(result)), args.outdir, formats=formats, vcf=vcf)
    s = result.summary()
    print(f"gcnmops call ({args.mode}, reference {ref.n_samples} samples, method {ref.method}): {s['regions']:,} "
          f"regions x {s['samples']} new samples\n  CNVs {s['cnvs']:,}   CNV regions {s['cnv_regions']:,}\n"
          f"  time per stage: " + ", ".join(f"{k} {v:.2f} s" for k, v in result.timings.items()) +
          f"; total {time.perf_counter() - t0:.2f} s\n  {len(written)} files written to {args.outdir}")
    for line in _qc_lines(result, Path(args.outdir)):
        print(line)
    if "sex" in result.params:
        print(_sexes(result.params["sex"]))
    return 0


def _reference_cohort(args) -> str:
    """call's reference cohort folder (--reference-cohort); InputError where none is given, or where --reference
    names one (--reference is the FASTA of the VCF's REF bases, as in run)."""
    from .casemode.reference import MANIFEST

    if args.reference is not None and (Path(args.reference) / MANIFEST).is_file():
        raise InputError(f"--reference {args.reference} is a reference cohort (gcnmops reference build): give it as "
                         f"--reference-cohort {args.reference}. --reference is the FASTA of the VCF's REF bases, as in "
                         "gcnmops run.")
    if args.reference_cohort is None:
        raise InputError("give the reference cohort to call against: --reference-cohort REF (a folder written by "
                         "gcnmops reference build)")
    return args.reference_cohort


def _sexes(info: list[dict]) -> str:
    """One line per sample: its sex, given or inferred, with its chrX/chrY to autosome coverage ratios."""
    ratio = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    return "  sex: " + "; ".join(f"{d['sample']} {d['sex']} ({'given' if d['given'] else 'inferred'}, x "
                                  f"{ratio(d['x_ratio'])}, y {ratio(d['y_ratio'])})" for d in info)


def _gpu_warmup(args):
    """For a command that may run on a GPU (--backend auto or gpu): the CUDA driver and the devices' contexts
    started on a background thread while the command imports its modules and reads its input
    (cuda.probe.warm_up_gpu), or None. The command waits for it before its first GPU work."""
    from .cuda.probe import warm_up_for

    return warm_up_for(args.backend, getattr(args, "devices", None))


def _run(args) -> int:
    method = METHODS[args.method]
    gpu = _gpu_warmup(args)
    if args.stream or (args.input and _is_store(args.input)):
        return _run_streaming(args, method, gpu)
    from .outputs.callfiles import VcfOptions
    from .outputs.writers import check_output_folder
    from .pipeline.methods import RUN_ARGS, build_params
    from .pipeline.run import run_and_write
    from .progress import Progress

    if args.keep is not None:
        raise InputError("--keep applies with --stream only")
    if args.example == bool(args.input or args.samples):
        raise InputError("give either an INPUT file (or --samples SHEET) or --example")
    is_reference = method.model is ModelKind.REFERENCE
    if is_reference != bool(args.controls) and not (args.example and is_reference):
        reference = " and ".join(m.name for m in METHODS.values() if m.model is ModelKind.REFERENCE)
        raise InputError(f"--controls FILE is needed by --method {reference} (and only by it)")
    kwargs = _method_kwargs(args, method)
    import warnings

    with warnings.catch_warnings():  # checked before reading the input; the run warns, once
        warnings.simplefilter("ignore")
        build_params(method.name, {k: v for k, v in kwargs.items() if k not in RUN_ARGS})
    sex_kwargs = _sex_kwargs(args, method)
    formats = tuple(dict.fromkeys(check_formats(args.formats) + (("tracks",) if args.tracks else ())))
    selection = {"exclude": args.exclude, "exclude_samples": args.exclude_samples, "min_length": args.min_length,
                 "min_quality": args.min_quality}
    check_output_folder(args.outdir)
    vcf = VcfOptions(args.reference_fai, args.reference, args.per_sample_vcf).checked()
    _set_threads(args.threads)
    skipped = {"integer"} if args.no_integer else set()
    skipped |= set() if args.plots or args.report else {"plots"}
    skipped |= set() if args.report else {"report"}
    _announce_compiling(args, gpu)
    with Progress({k: w for k, w in STAGE_WEIGHTS.items() if k not in skipped}, disable=args.quiet) as progress:
        t0 = time.perf_counter()
        data, controls = _read_input(args, method)
        if "vcf" in formats:
            vcf.checked(data.genomic_ranges())  # a VCF holds the regions, the reference every chromosome
        read_s = time.perf_counter() - t0
        progress.advance("read")
        if gpu is not None:
            gpu.wait()
        data, controls = _handed_over(data), _handed_over(controls)
        if sex_kwargs is not None:
            result, written = _sex_aware_run(args, method, data, kwargs, sex_kwargs, formats, vcf, progress, read_s)
        else:
            result, written = run_and_write(method.name, data, args.outdir, controls=controls, backend=args.backend,
                                            integer=not args.no_integer, formats=formats, timings={"read": read_s},
                                            extra=_figures(args, progress), vcf=vcf, **selection, **kwargs)
    print(_summary(result, Path(args.outdir), len(written)))
    if "sex" in result.params:
        print(_sexes(result.params["sex"]))
    return 0


def _announce_compiling(args, gpu) -> None:
    """One line on stderr when the kernels a run needs are not compiled on this machine yet (the run then
    compiles them first, once): the CPU's always, the GPU's too where the GPU may be used (``gpu``: the warm-up
    _gpu_warmup started). Not with --quiet."""
    from .jitcache import kernels_cached

    if args.quiet:
        return
    cold = [s for s, gpu_kernels in ((COMPILE_SECONDS["cpu"], False), (COMPILE_SECONDS["gpu"], True))
            if (gpu is not None or not gpu_kernels) and not kernels_cached(gpu=gpu_kernels)]
    if cold:
        print(f"compiling kernels (once per machine, ~{sum(cold)} s; `gcnmops warmup` does it ahead of runs)",
              file=sys.stderr, flush=True)


def _sex_kwargs(args, method) -> dict | None:
    """run --sex-aware's arguments of sex_aware_cn_mops (sex, genome), checked before any work; None without
    --sex-aware (then --sex and --genome are refused)."""
    if not args.sex_aware:
        given = [o for o, v in (("--sex", args.sex), ("--genome", args.genome)) if v is not None]
        if given:
            raise InputError(f"{' and '.join(given)} appl{'y' if len(given) > 1 else 'ies'} with --sex-aware only")
        return None
    given = [o for o in _selection_given(args) if o != "--tracks"]
    if given:
        raise InputError(f"{', '.join(given)}: not available with --sex-aware")
    from .casemode.api import check_sex_aware_method
    from .casemode.sex import sex_value

    check_sex_aware_method(method.name)
    if args.devices is not None:
        raise InputError("--devices does not apply with --sex-aware (the model runs on one device)")
    for k, v in enumerate(args.sex or ()):
        sex_value(v, f"number {k + 1}")
    return {"sex": args.sex, "genome": None if args.genome == "none" else args.genome or "hg38"}


def _selection_given(args) -> list[str]:
    """The options of _add_selection_options given on the command line."""
    return [f for f, v in (("--exclude", args.exclude), ("--exclude-samples", args.exclude_samples),
                           ("--min-length", args.min_length), ("--min-quality", args.min_quality),
                           ("--tracks", args.tracks or None)) if v is not None]


def _sex_aware_run(args, method, data, kwargs: dict, sex_kwargs: dict, formats, vcf, progress, read_s: float):
    """(result, paths written) of sex_aware_cn_mops on ``data`` (its integer copy numbers its own: against the
    fitted parameters of each sex), written as run_and_write writes a run."""
    from .casemode import sex_aware_cn_mops
    from .data import Validated
    from .cuda.probe import resolve_backend
    from .outputs.writers import write_result
    from .pipeline.selection import counts_qc
    from .pipeline.family import cnvr_per_sample
    from .progress import timed_stage

    result = sex_aware_cn_mops(data, method.name, integer=not args.no_integer, backend=args.backend, **sex_kwargs,
                               **kwargs)
    result.timings["read"] = read_s
    counts = data.data if isinstance(data, Validated) else data
    result = result.replace(sample_qc=counts_qc(result, counts))
    result.provenance = describe(resolve_backend(args.backend))
    figures = _figures(args, progress)
    with timed_stage(result.timings, "write"):
        written = write_result(result.replace(cnvr=cnvr_per_sample(result)), args.outdir, formats=formats, vcf=vcf,
                               extra=None if figures is None else (lambda sizes: figures(result, sizes)))
    for stage in ("plots", "report"):  # timed inside the write: not counted twice
        result.timings["write"] -= result.timings.get(stage, 0.0)
    return result, written


def _set_threads(n: int | None) -> None:
    """numba's thread count for the CPU stages (None: all it has)."""
    if n is None:
        return
    import numba

    if not 1 <= n <= numba.config.NUMBA_NUM_THREADS:
        raise InputError(f"--threads must be between 1 and {numba.config.NUMBA_NUM_THREADS} (the CPUs numba may use), "
                         f"not {n}")
    numba.set_num_threads(n)


def _figures(args, progress):
    """``run_and_write``'s ``extra``: the --plots and --report files, written in the batch of the other result
    files (all renamed together, or none left), or None."""
    if not (args.plots or args.report):
        return None
    from .report.plots import plot_files
    from .report import report_html

    def files(result, sizes: dict):
        progress.advance("write")  # the other files are complete: the bar moves per figure from here
        t0 = time.perf_counter()
        plots = []
        for name, draw in plot_files(result):
            yield name, draw
            plots.append(Path(args.outdir) / name)
        result.timings["plots"] = time.perf_counter() - t0
        progress.advance("plots")
        if args.report:
            t0 = time.perf_counter()
            yield "report.html", lambda t: t.write_text(report_html(result, args.outdir, files=sizes, plots=plots),
                                                         encoding="utf-8")
            result.timings["report"] = time.perf_counter() - t0
            progress.advance("report")

    return files


def _method_kwargs(args, method) -> dict:
    """The method's keyword arguments from the options given (None: the method's default)."""
    kwargs = {k: v for k, v in ((p, getattr(args, p)) for p in (*PARAMETERS, "devices")) if v is not None}
    if "devices" in kwargs and not method.devices:
        raise InputError("--devices applies to --method " + " and ".join(m.name for m in METHODS.values() if m.devices))
    if not method.use_median and kwargs.pop("use_median", False):  # these methods always use segment means
        raise InputError(f"--use-median is not available with --method {method.name} "
                         "(cn.mops uses segment means there)")
    return kwargs


def _read_input(args, method):
    """(counts, controls) of the method: INPUT and --controls, or the example cohort (the reference method
    takes its first 5 samples as cases, the others as controls; single the first)."""
    from .data import make_count_data
    from .example import example_cohort
    from .io import read_counts

    if not args.example and method.model is ModelKind.SINGLE:  # one sample: checked as it is read
        from .pipeline.family import read_single_sample

        source = _sheet_cohort(args, 1) if args.samples else args.input
        return read_single_sample(source, coordinates=args.coordinates, depth_to_counts=args.depth_to_counts), None
    if args.samples:
        return _sheet_cohort(args, method.min_samples), args.controls
    if not args.example:
        return read_counts(args.input, min_samples=method.min_samples, coordinates=args.coordinates,
                           depth_to_counts=args.depth_to_counts), args.controls
    data = example_cohort()[0]
    if method.model is ModelKind.REFERENCE:
        cases = make_count_data(data.counts[:, :5], data.sample_names[:5], data.ranges, min_samples=1)
        controls = make_count_data(data.counts[:, 5:], data.sample_names[5:], data.ranges, min_samples=1)
        return cases, controls
    if method.model is ModelKind.SINGLE:
        data = make_count_data(data.counts[:, :1], data.sample_names[:1], data.ranges, min_samples=1)
    return data, None


def _sheet_cohort(args, min_samples: int):
    """The cohort of --samples SHEET (gcnmops.io.samplesheet)."""
    from .io.samplesheet import read_sample_sheet

    if args.input:
        raise InputError("give either INPUT or --samples SHEET, not both")
    return read_sample_sheet(args.samples, min_samples=min_samples, coordinates=args.coordinates,
                             depth_to_counts=args.depth_to_counts)


def _handed_over(obj):
    """``obj`` (what ``_read_input`` returned) for the method's entry point: a CountData it read, and so validated,
    is handed over as such (``data.Validated``: not validated a second time); a path or None as it is."""
    from .data import CountData, Validated

    return Validated(obj) if isinstance(obj, CountData) else obj


def _summary(result, outdir: Path, n_files: int) -> str:
    s = result.summary()
    lines = [
        f"gcnmops {result.params['method']}: {s['regions']:,} regions x {s['samples']} samples "
        f"on {s['chromosomes']} chromosome(s)",
        f"  segments {s['segments']:,}   CNVs {s['cnvs']:,}   CNV regions {s['cnv_regions']:,}",
        "  time per stage: " + ", ".join(f"{k} {v:.2f} s" for k, v in result.timings.items()),
        f"  {n_files} files written to {outdir}",
    ]
    return "\n".join(lines + _qc_lines(result, outdir))


def _qc_lines(result, outdir: Path) -> list[str]:
    """The summary's lines of the result's sample QC (none without one): its outliers, the samples excluded."""
    qc = result.sample_qc
    if qc is None:
        return []
    flagged = qc[qc["outlier"]]
    lines = [f"  sample QC ({outdir / 'sample_qc.tsv'}): " + (
        "no outlier" if flagged.empty else f"{len(flagged)} outlier(s): " + "; ".join(
            f"{r.sample} ({r.reasons}{', excluded' if r.excluded else ''})" for r in flagged.itertuples(index=False)))]
    named = [s for s in result.selection.get("excludedSamples", []) if s not in set(flagged["sample"])]
    if named:
        lines.append(f"  excluded before the model: {', '.join(named)}")
    return lines


def _count(args) -> int:
    from .alignments.counting import count_format, count_reads, write_counts

    count_format(args.output)  # a name without a known format, or a missing folder: refused before counting
    t0 = time.perf_counter()
    data = count_reads(args.bams, sample_names=args.sample_names, ref_seq_names=args.ref_seq_names,
                       window=args.window, regions=args.regions, min_mapq=args.min_mapq, threads=args.threads,
                       reference=args.reference, progress=not args.quiet)
    write_counts(data, args.output)
    print(f"gcnmops count: {data.n_regions:,} regions x {data.n_samples} samples, "
          f"{int(data.counts.sum()):,} reads counted in {time.perf_counter() - t0:.2f} s -> {args.output}")
    return 0


def _is_store(path: str) -> bool:
    from .io.store import is_zarr_path

    return is_zarr_path(Path(path))


def _run_streaming(args, method, gpu) -> int:
    """run --stream: gcnmops.run_streaming with a progress line per chromosome on stderr (``gpu``: _gpu_warmup's,
    waited for before the run)."""
    from .outputs.callfiles import VcfOptions
    from .outputs.writers import check_output_folder
    from .pipeline.streaming import kept_matrices, run_streaming, stream_formats

    given = [o for o, v in (("--example", args.example), ("--controls", args.controls), ("--plots", args.plots),
                            ("--report", args.report), ("--sex-aware", getattr(args, "sex_aware", False)))
             if v] + _selection_given(args)
    if given or not args.input:
        raise InputError(f"{', '.join(given) or 'no INPUT'}: a streamed run takes a count store or Parquet INPUT "
                         "and none of --example, --controls, --plots, --report, --sex-aware, --exclude, "
                         "--exclude-samples, --min-length, --min-quality, --tracks")
    kwargs = _method_kwargs(args, method)
    devices = kwargs.pop("devices", None)
    formats = stream_formats(args.formats)
    kept_matrices(args.keep, bool(args.return_posterior))
    check_output_folder(args.outdir)
    vcf = VcfOptions(args.reference_fai, args.reference, args.per_sample_vcf).checked()
    _set_threads(args.threads)
    t0 = time.perf_counter()

    def line(done) -> None:
        if args.quiet:
            return
        elapsed = time.perf_counter() - t0
        left = elapsed * (done.regions - done.rows_done) / max(1, done.rows_done)
        print(f"gcnmops stream: {done.name} ({done.index + 1}/{done.total}) {done.rows:,} regions in "
              f"{done.seconds:.1f} s; {100 * done.rows_done / done.regions:.0f}% of regions, {elapsed:.0f} s elapsed, "
              f"~{left:.0f} s to go", file=sys.stderr, flush=True)

    _announce_compiling(args, gpu)
    if gpu is not None:
        gpu.wait()
    result = run_streaming(args.input, args.outdir, method=method.name, keep=args.keep, integer=not args.no_integer,
                           formats=formats, backend=args.backend, devices=devices, vcf=vcf, on_chromosome=line,
                           **kwargs)
    s = result.summary()
    print(f"gcnmops {result.params['method']} (streamed): {s['regions']:,} regions x {s['samples']} samples on "
          f"{s['chromosomes']} chromosome(s)\n  segments {s['segments']:,}   CNVs {s['cnvs']:,}   CNV regions "
          f"{s['cnv_regions']:,}\n  time per stage: " +
          ", ".join(f"{k} {v:.2f} s" for k, v in result.timings.items()) +
          f"\n  written to {args.outdir} (matrices in {result.store}: {', '.join(result.kept)})")
    for line in _qc_lines(result, Path(args.outdir)):
        print(line)
    return 0


def _convert(args) -> int:
    from .files import check_target
    from .io.store import convert_counts, is_count_store, open_count_store

    if args.rows is not None and args.rows < 1:
        raise InputError(f"--rows must be at least 1, not {args.rows}")
    check_target(args.output, is_count_store, "the count store")  # before reading the input
    t0 = time.perf_counter()
    source = args.input
    if args.samples:
        from .io.samplesheet import convert_sample_sheet

        if args.input:
            raise InputError("give either INPUT or --samples SHEET, not both")
        path, in_parts = convert_sample_sheet(args.samples, args.output, rows=args.rows, coordinates=args.coordinates,
                                              depth_to_counts=args.depth_to_counts)
    elif not args.input:
        raise InputError("give an INPUT file or --samples SHEET")
    else:
        if args.depth_to_counts is not None or _tool_file(args.input):
            from .io import read_counts  # depths to convert, or one tool's file: read whole

            source = read_counts(args.input, coordinates=args.coordinates, depth_to_counts=args.depth_to_counts)
        path, in_parts = convert_counts(source, args.output, rows=args.rows, coordinates=args.coordinates)
    store = open_count_store(path)
    m, n = store.shape
    print(f"gcnmops convert: {m:,} regions x {n} samples ({store.dtype}, read {'in parts' if in_parts else 'whole'}) "
          f"in {time.perf_counter() - t0:.2f} s -> {path}")
    return 0


def _tool_file(path: str) -> bool:
    """Whether ``path`` is stdin or another tool's count file (gcnmops.io.toolformats), read whole."""
    from .io.toolformats import sniff

    return path == "-" or (Path(path).is_file() and sniff(Path(path)) is not None)


def _batch(args) -> int:
    """Exit status 0 when every experiment is done, 1 when some failed, 130 when interrupted."""
    from .pipeline.batch import format_summary, read_manifest, run_batch
    from .outputs.writers import check_output_folder

    if args.devices is not None and args.workers is not None:
        raise InputError("give --devices (GPU workers) or --workers (CPU workers), not both")
    formats = check_formats(args.formats)
    check_output_folder(args.outdir)
    experiments = read_manifest(args.manifest)
    try:
        summary = run_batch(experiments, args.outdir, devices=args.devices, workers=args.workers,
                            formats=formats, integer=not args.no_integer, force=args.force,
                            echo=(lambda line: None) if args.quiet else None)
    except KeyboardInterrupt:
        print(f"gcnmops batch: interrupted; summary in {Path(args.outdir) / 'summary.tsv'}", file=sys.stderr)
        return 130
    print(format_summary(summary))
    print(f"summary: {Path(args.outdir) / 'summary.tsv'}")
    return 1 if (summary["status"] == "failed").any() else 0


def _info() -> int:
    import numba
    import numpy

    from .cuda.install import report
    from .cuda.probe import gpu_available

    print(f"gcnmops {__import__('gcnmops').__version__}; numpy {numpy.__version__}; numba {numba.__version__}")
    print(f"GPU backend usable: {gpu_available()}")
    print("\n".join(report()))
    return 0


def _warmup(args) -> int:
    """Byte-compile the package, then run the example cohort through every stage (and writer) once, so that every
    kernel is compiled and cached."""
    import tempfile
    import warnings

    from .cuda.probe import Backend, resolve_backend
    from .example import example_cohort
    from .jitcache import compile_bytecode
    from .pipeline.run import run_and_write

    compile_bytecode()
    backends = list(dict.fromkeys([Backend.CPU, resolve_backend(args.backend)]))  # a GPU run uses CPU kernels too
    for backend in backends:
        t0 = time.perf_counter()
        cohorts = [example_cohort()[0]] + (_gpu_warmup_cohorts() if backend is Backend.GPU else [])
        for data in cohorts:
            with tempfile.TemporaryDirectory(prefix="gcnmops-warmup-") as folder:
                run_and_write("cn.mops", data, folder, backend=backend, formats=[f for f in FORMATS if f != "rds"])
        own, level = logging.getLogger("gcnmops"), logging.getLogger("gcnmops").level
        own.setLevel(logging.WARNING)  # cn.mops's notes and warnings about the tiny cohorts are not the point here
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for variant in _warmup_variants(backend):
                    variant()
        finally:
            own.setLevel(level)
        print(f"gcnmops warmup: {backend} kernels compiled and cached ({time.perf_counter() - t0:.1f} s)")
    return 0


def _warmup_variants(backend) -> list:
    """Runs on small cohorts that compile, besides the example's run, every other variant of the CPU kernels (numba
    compiles one per argument types, and an array with a dimension of one is typed C-contiguous, not F): norm=2,
    the posteriors kept, the mode and median normalizations, the reference/single model and its integer copy
    numbers, one sample (single, reference and case mode with one new sample), one region, case mode's E-step, a
    streamed run's tally of the counts."""
    import numpy as np

    from .calls.integer import calc_integer_copy_numbers
    from .casemode import build_reference, call_samples
    from .cuda.probe import Backend
    from .data import make_count_data
    from .example import example_cohort
    from .pipeline.cnmops import cn_mops
    from .pipeline.family import reference_cn_mops, single_cn_mops

    data = example_cohort(n_regions=600, n_samples=6)[0]
    new = example_cohort(n_regions=600, n_samples=2, seed=2)[0]
    region = np.random.default_rng(1).poisson(60.0, size=(1, 6)).astype(np.float64)

    def case_mode() -> None:
        ref = build_reference(data, genome=None, backend=backend)
        for cases in (new, make_count_data(new.counts[:, :1], new.sample_names[:1], new.ranges, min_samples=1)):
            call_samples(cases, ref, "frozen", integer=True, backend=backend)

    def gatk_sv_tables() -> None:  # gatk-sv's rebinning and coverage-table kernels, typed as a bincov matrix
        import io
        import zlib

        from .alignments import libdeflate
        from .gatksv.matrix import DepthMatrix
        from .gatksv.rebin import compress_cov
        from .gatksv.runcnmops import count_data
        from .io.inttable import line_end, read_int_table

        read_int_table([b"#Chr\tStart\tEnd\tA\tB\n", b"chr1\t0\t100\t5\t6\n"], 2, skip=1)  # the matrix parser
        line_end(np.frombuffer(b"chr1\t0\t100\t5\t6\n", dtype=np.uint8).copy())  # its cut of inflated arrays
        if libdeflate.AVAILABLE:  # the bgzipped matrix's inflating kernel
            text = b"chr1\t0\t100\t5\t6\n"
            packed = zlib.compressobj(1, zlib.DEFLATED, -15)
            block = np.frombuffer(packed.compress(text) + packed.flush(), dtype=np.uint8)
            meta = np.array([[0], [0], [block.size], [zlib.crc32(text)], [len(text)]], dtype=np.int64)
            libdeflate.inflate_run(block, meta, np.empty(len(text), dtype=np.uint8))

        m = len(data.ranges)
        bincov = DepthMatrix("#Chr\tStart\tEnd\t" + "\t".join(data.sample_names), list(data.sample_names),
                             data.ranges["seqnames"].to_numpy(dtype=object), np.arange(m, dtype=np.int64) * 100,
                             np.arange(1, m + 1, dtype=np.int64) * 100, np.asfortranarray(data.counts))
        for cells in (np.asfortranarray(data.counts), np.asfortranarray(data.counts.astype(np.int32))):
            bincov.base = cells  # the pandas reader's float64 cells and the fast reader's int32 ones
            count_data(compress_cov(bincov, 3), out=io.StringIO())

    def chromosome_blocks() -> None:  # several GPUs' path: blocks read from and written into rows of whole matrices
        from .params import METHODS
        from .pipeline.multigpu import run_on_devices
        from .pipeline.plan import RunPlan

        row = METHODS["cn.mops"]
        run_on_devices(RunPlan.build(row, row.params(), backend, data.n_regions), data, [0], {})

    def streamed_coverage() -> None:  # a streamed run tallies each chromosome's counts as it reads them
        from .pipeline.streamqc import StreamQC

        StreamQC(data.n_regions, data.n_samples).tally(0, data.counts)

    gpu = [chromosome_blocks] if backend is Backend.GPU else []
    return gpu + [streamed_coverage, lambda: cn_mops(data, norm=2, backend=backend),
            lambda: cn_mops(data, return_posterior=True, backend=backend),
            lambda: cn_mops(data, norm_type="mode", size_factor="median", backend=backend),
            lambda: calc_integer_copy_numbers(reference_cn_mops(new, data, backend=backend), backend=backend),
            lambda: calc_integer_copy_numbers(reference_cn_mops(new.counts[:, :1], data.counts, backend=backend),
                                              backend=backend),
            lambda: single_cn_mops(data.counts[:, 0], backend=backend),
            case_mode,
            lambda: cn_mops(region, backend=backend),
            gatk_sv_tables]


def _gpu_warmup_cohorts() -> list:
    """The GPU warm-up's cohorts besides the example: one per WARMUP_SAMPLES, as GPU kernels are compiled per
    work-buffer size (model.gpu.local_work_size); the first with two chromosomes too long to be prepared on the
    device (cuda.config.DEVICE_PREPARE_MAX_ROWS), so that the segmentation's host pass is compiled too, in
    1-kb windows (a VCF holds positions below 2^31)."""
    from .example import example_cohort
    from .cuda.config import DEVICE_PREPARE_MAX_ROWS

    long = example_cohort(n_regions=2 * DEVICE_PREPARE_MAX_ROWS + 2, n_samples=WARMUP_SAMPLES[0], window=1000)[0]
    return [long] + [example_cohort(n_regions=2000, n_samples=n)[0] for n in WARMUP_SAMPLES[1:]]


def _configure_logging(verbose: bool) -> None:
    """gcnmops's own messages (INFO) on stderr, other libraries' only from WARNING (everything with -v)."""
    own = logging.getLogger("gcnmops")
    own.setLevel(logging.DEBUG if verbose else logging.INFO)
    if not any(getattr(h, "gcnmops_cli", False) for h in own.handlers):  # once per process, however often main runs
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler.gcnmops_cli = True
        own.addHandler(handler)
    own.propagate = False
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(name)s: %(message)s")
    if not verbose:
        import warnings

        warnings.filterwarnings("ignore", module=r"(numba|numba_cuda|rpy2|cupy|llvmlite)(\.|$)")
        warnings.formatwarning = lambda message, *args, **kwargs: f"warning: {message}\n"  # no source lines


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like Ctrl-C, so that files being written are removed (nothing half-written)."""


def _terminate(signum, frame) -> None:
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    import signal

    from .compat import limit_malloc_arenas

    limit_malloc_arenas()

    parser = build_parser()
    args = parser.parse_args(argv)
    note_command(sys.argv[1:] if argv is None else argv, [getattr(args, a, None) for a in ("input", "controls",
                                                                                            "samples")])
    _configure_logging(getattr(args, "verbose", False))
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        if args.command == "count":
            return _count(args)
        if args.command == "convert":
            return _convert(args)
        if args.command == "batch":
            return _batch(args)
        if args.command == "reference":
            return _reference_build(args)
        if args.command == "call":
            return _call(args)
        if args.command == "warmup":
            return _warmup(args)
        if args.command == "gatk-sv":
            return gatksv_cli.run(args)
        return _run(args) if args.command == "run" else _info()
    except BrokenPipeError:  # the reader of the summary went away (| head): the files are complete
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Terminated) as stop:
        what = "terminated (SIGTERM)" if isinstance(stop, Terminated) else "interrupted"
        print(f"error: {what}; files being written were removed, earlier results left as they were", file=sys.stderr)
        return 143 if isinstance(stop, Terminated) else 130


class _GuardedStdout:
    """Standard output that turns a failed write (a full disk, /dev/full, an I/O error) into an InputError, so
    that the command ends with ``error:`` and exit 2; a reader gone away (BrokenPipeError) is left to ``main``."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def _guarded(self, call, *args):
        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as err:
            raise InputError(f"Cannot write to standard output: {err.strerror or err}. Send it elsewhere (e.g. "
                             "> summary.txt or > /dev/null); files written before this are complete.") from None

    def write(self, text: str) -> int:
        return self._guarded(self._stream.write, text)

    def flush(self) -> None:
        self._guarded(self._stream.flush)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _guard_standard_streams() -> None:
    """Standard descriptors the command can rely on: a closed one (``>&-``) is opened on /dev/null (else the
    next file opened would take its number and receive what is printed); text that the streams' encoding cannot
    hold (``PYTHONIOENCODING=ascii`` and a non-ASCII path) is written with backslash escapes; standard output is
    flushed line by line and guarded (``_GuardedStdout``)."""
    import os

    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # takes the lowest free number: this one
    if sys.stdout is None:
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - the process's standard output
    if sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace", line_buffering=True)
        except (AttributeError, ValueError, OSError):  # not a text stream of the io module
            pass
    sys.stdout = _GuardedStdout(sys.stdout)


def entry() -> None:
    """The ``gcnmops`` command (and ``python -m gcnmops``): ``main``, then the process ends at once.

    Every file is complete and renamed by then; what is left is tearing down the GPU's pinned host memory and
    context, and freeing the result's arrays one by one, a noticeable part of a large run (benchmarks/RESULTS.md):
    the operating system reclaims all of it at once instead (``os._exit`` after flushing the output streams)."""
    import os

    _guard_standard_streams()
    try:
        code = main()
    except InputError as err:  # standard output failing while argparse writes (--help, --version)
        print(f"error: {err}", file=sys.stderr)
        code = 2
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            pass
    from .jitcache import remove_temporary

    remove_temporary()  # os._exit runs no exit handlers
    os._exit(code)


if __name__ == "__main__":
    entry()
