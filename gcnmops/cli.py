"""Command line: ``python -m gcnmops run INPUT -o OUTDIR [options]``, ``python -m gcnmops batch MANIFEST -o OUTDIR``,
``python -m gcnmops count``, ``python -m gcnmops reference build``, ``python -m gcnmops call``,
``python -m gcnmops warmup``, ``python -m gcnmops info`` and ``python -m gcnmops gatk-sv ...`` (GATK-SV's cn.MOPS
step)."""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from .errors import InputError
from .gatksv import cli as gatksv_cli
from .outputs.formats import DEFAULT_FORMATS, FORMATS, check_formats
from .params import KINDS, METHODS, PARAMETERS, ModelKind
from .params import comma_strings as _strings
from .provenance import describe, note_command

#: sample counts whose GPU kernels ``gcnmops warmup`` compiles besides the example's 40 (one per work-buffer size)
WARMUP_SAMPLES = (6, 15, 30, 100)
#: about how long a first run compiles the CPU's and the GPU's kernels (seconds, a few cores; said when it does)
COMPILE_SECONDS = {"cpu": 60, "gpu": 30}
#: relative weights of the stages of a run, for the progress bar (measured shares of a CPU run)
STAGE_WEIGHTS = {"read": 1.0, "normalize": 1.0, "model": 4.0, "segment_call": 4.0, "integer": 0.5, "write": 2.0,
                 "plots": 2.0, "report": 0.3}


def _devices(text: str):
    return "all" if text == "all" else [int(v) for v in text.split(",")]


def _add_input_options(p: argparse.ArgumentParser) -> None:
    """How INPUT's coordinates are read (gcnmops.io.coordinates)."""
    side = p.add_mutually_exclusive_group()
    side.add_argument("--zero-based", dest="coordinates", action="store_const", const="0-based",
                      help="INPUT's starts are 0-based, half-open (BED style): converted to cn.mops's 1-based ranges "
                           "(default: BED-style files, with a '#' header, .bed or a tool's format, are 0-based, other "
                           "tables 1-based; a file whose bins contradict that is refused)")
    side.add_argument("--one-based", dest="coordinates", action="store_const", const="1-based",
                      help="INPUT's starts are 1-based, closed (cn.mops's convention): read as they are")
    p.set_defaults(coordinates="auto")
    p.add_argument("--samples", metavar="SHEET", help="instead of INPUT: a cohort of per-sample count files (GATK "
                   "CollectReadCounts .tsv/.hdf5, GATK-SV .RD.txt.gz, mosdepth .regions.bed.gz, CNVkit .cnn, bedGraph, "
                   "one-sample tables) listed in a TSV of name<TAB>path lines; every sample must have the same bins (default: "
                   "INPUT)")
    p.add_argument("--depth-to-counts", type=float, metavar="READ_LENGTH",
                   help="the files hold mean depths (mosdepth, CNVkit, a bedGraph of depths): converted to read counts "
                        "as depth x region width / READ_LENGTH, rounded (default: depths are refused)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gcnmops", description="cn.MOPS copy-number detection, CPU or GPU.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"gcnmops {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="detect CNVs in a read-count matrix and write every result file")
    run.add_argument("input", nargs="?", help="counts: .rds, .tsv/.csv (seqnames,start,end + samples), "
                                              ".parquet, .npz, one sample's count file of a tool (--method single) "
                                              "or - (stdin)")
    run.add_argument("--example", action="store_true", help="run on the built-in simulated cohort")
    _add_input_options(run)
    run.add_argument("-o", "--outdir", required=True, help="output folder (created)")
    run.add_argument("--method", choices=list(METHODS), default="cn.mops",
                     help="cn.mops (cohort; default), exome, haplo (haploid), reference (cases vs --controls), single")
    run.add_argument("--controls", help="reference method: the control samples' counts (same regions as INPUT; "
                                        "default none)")
    run.add_argument("--backend", choices=["auto", "cpu", "gpu"], default="auto",
                     help="where the model runs: auto (a usable GPU, else the CPU; default), cpu or gpu")
    run.add_argument("--devices", type=_devices, help="GPU backend: device ids, comma separated, or 'all' (default 0)")
    _add_parameter_flags(run)
    run.add_argument("--no-integer", action="store_true", help="skip integer copy numbers")
    run.add_argument("--formats", type=_strings, default=None,
                     help=f"output formats, comma separated, from {','.join(FORMATS)} (default: "
                          f"{','.join(DEFAULT_FORMATS)}; the call tables and params.json are always written)")
    _add_vcf_options(run)
    _add_selection_options(run)
    run.add_argument("--threads", type=int, help="threads of the CPU stages (numba; default: all CPUs)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("-v", "--verbose", action="store_true", help="also log the libraries' messages")
    run.add_argument("--sex-aware", action="store_true", help="model chrX/chrY outside the pseudo-autosomal regions "
                     "per sex (a male's single X is his normal; cn.mops and exome only; default off: cn.mops's model)")
    run.add_argument("--sex", type=_strings, help="--sex-aware: female/male per sample, comma separated, in sample "
                                                  "order (default: inferred from chrX/chrY coverage)")
    run.add_argument("--genome", choices=["hg38", "hg19", "none"], help="--sex-aware: the build whose "
                     "pseudo-autosomal regions stay with the autosomes (default hg38)")
    run.add_argument("--plots", action="store_true", help="write PNG plots (CNV regions, segments, overview)")
    run.add_argument("--report", action="store_true", help="write report.html (summary, plots, output files)")
    run.add_argument("--stream", action="store_true",
                     help="chromosome by chromosome with bounded memory (automatic for a Zarr count store INPUT): "
                          "INPUT a count store (gcnmops convert) or a Parquet table; matrices into "
                          "OUTDIR/matrices.zarr as they are made; formats bed, vcf, seg")
    run.add_argument("--keep", type=_strings, help="--stream: the matrices kept in matrices.zarr, comma separated, of "
                                                   "normalized_data, local_assessments, individual_call, ini_call, "
                                                   "params_L, params_A, posterior_probs; 'all' (default) or 'none' "
                                                   "(integer_copy_number and the call tables always)")
    sub.add_parser("info", help="show versions, whether a GPU backend is usable, the CUDA driver, CuPy and numba-cuda "
                   "found, and what to install when they disagree")
    warm = sub.add_parser("warmup", help="compile and cache every kernel of a run (once per machine and install; "
                                         "scripts/setup.sh does it)")
    warm.add_argument("--backend", choices=["auto", "cpu", "gpu"], default="auto",
                      help="auto (default): the CPU kernels, and the GPU kernels where a GPU is usable")
    count = sub.add_parser("count", help="count reads of BAM/CRAM files in windows or regions (a count table for run)")
    count.add_argument("bams", nargs="+", metavar="BAM", help="BAM or CRAM files (same reference genome)")
    count.add_argument("-o", "--output", required=True, help="count table to write, format by extension: .tsv, "
                                                             ".tsv.gz, .parquet or .npz (gcnmops run reads each)")
    count.add_argument("--reference", metavar="FASTA", help="the reference FASTA the CRAM files were written with "
                                                            "(needed by CRAM input; default none)")
    count.add_argument("--window", type=int, default=25000, help="window length in bp (default 25000)")
    count.add_argument("--regions", help="count in these regions instead: BED (0-based) or a seqnames/start/end table "
                                          "(default: windows)")
    count.add_argument("--ref-seq-names", type=_strings, help="references to count, comma separated (default all)")
    count.add_argument("--sample-names", type=_strings, help="sample names, comma separated (default file names)")
    count.add_argument("--min-mapq", type=int, default=1, help="reads below this mapping quality are not counted "
                                                                "(default 1)")
    count.add_argument("--threads", type=int, help="threads decompressing the files (default: all CPUs)")
    count.add_argument("--workers", type=int, dest="threads", help=argparse.SUPPRESS)  # the former name of --threads
    count.add_argument("--quiet", action="store_true", help="no progress bar")
    batch = sub.add_parser("batch", help="run many experiments listed in a manifest on GPUs or CPU worker processes "
                                         "(resumable; see docs/scaling.md)")
    batch.add_argument("manifest", help="TSV (id, input, method, parameter columns) or YAML list of experiments")
    batch.add_argument("-o", "--outdir", required=True, help="output folder: one subfolder per experiment")
    batch.add_argument("--devices", type=_devices, help="one worker per GPU: device ids, comma separated, or 'all' "
                                                        "(default: CPU workers)")
    batch.add_argument("--workers", type=int, help="CPU worker processes (default 1, or the GPUs when one is usable)")
    batch.add_argument("--formats", type=_strings, default=None,
                       help=f"output formats from {','.join(FORMATS)} (default: {','.join(DEFAULT_FORMATS)})")
    batch.add_argument("--no-integer", action="store_true", help="skip integer copy numbers")
    batch.add_argument("--force", action="store_true", help="run again the experiments already done")
    batch.add_argument("--quiet", action="store_true", help="no progress lines")
    conv = sub.add_parser("convert", help="a count table (TSV/CSV, Parquet, .rds, .npz, gcnmops count's output) as "
                                          "a chunked count store for run --stream (whole-number counts as integers)")
    conv.add_argument("input", nargs="?", help="counts, as for run (text and Parquet tables are read in parts of "
                                               "rows)")
    _add_input_options(conv)
    conv.add_argument("-o", "--output", required=True, help="the Zarr store to write (a folder, e.g. counts.zarr; "
                                                             "a count store there is replaced)")
    conv.add_argument("--rows", type=int, help="rows per part read from a text or Parquet table (default: ~64 MB of "
                                               "text, 262,144 Parquet rows)")
    _add_casemode(sub)
    gatksv_cli.add_parser(sub)
    return parser


def _add_parameter_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per cn.mops parameter, made from the parameter table (params.PARAMETERS): ``--prior-impact`` for
    ``prior_impact``, its value read by the row's parser (a switch for a logical), its help cn.mops's name and
    meaning with each method's default; not given (None): the method's default."""
    for p in PARAMETERS.values():
        parse = KINDS[p.kind][1]
        text = f"cn.mops {p.r_name}: {p.described.replace('``', '').rstrip('.')}".replace("%", "%%")
        if parse is None:
            parser.add_argument(p.flag, dest=p.name, action="store_true", default=None,
                                help=f"{text} (default off)")
        else:
            listed = "comma separated; " if p.kind in ("floats", "strings") else ""
            parser.add_argument(p.flag, dest=p.name, type=parse,
                                help=f"{text} ({listed}default {_method_defaults(p)})")


def _method_defaults(p) -> str:
    """The defaults of parameter ``p`` as --help shows them: cn.mops's, then each method's that differs."""
    def shown(value) -> str:
        return ",".join(str(v) for v in value) if isinstance(value, (tuple, list)) else str(value)

    base = METHODS["cn.mops"].parameter_defaults()[p.name]
    other = [f"{m.name} {shown(m.defaults[p.name])}" for m in METHODS.values()
             if p.name in m.defaults and m.defaults[p.name] != base]
    return "; ".join([shown(base), *other])


def _add_vcf_options(parser: argparse.ArgumentParser) -> None:
    """How the VCFs are written (outputs.callfiles.VcfOptions), the same options for run and call."""
    parser.add_argument("--reference-fai", metavar="FAI", help="VCF contig lengths from this FASTA index (samtools "
                                                            "faidx; default: each chromosome's last window end)")
    parser.add_argument("--reference", metavar="FASTA", help="REF bases of the VCF (and its contig lengths, without "
                                                          "--reference-fai) from this FASTA (default: REF N)")
    parser.add_argument("--per-sample-vcf", action="store_true", help="also one VCF per sample, cnvr.<sample>.vcf.gz "
                                                                   "+ index, with its own CNVs (POS/END those of its "
                                                                   "calls; INFO CNVR the cohort's region)")


def _add_selection_options(parser: argparse.ArgumentParser) -> None:
    """What a run leaves out before the model (pipeline.selection), how its calls are filtered (calls.filters)
    and its per-window tracks."""
    parser.add_argument("--exclude", metavar="BED", help="remove the windows overlapping these regions (BED, 0-based) "
                                                         "before the model, as GATK-SV's -x (default: none)")
    parser.add_argument("--exclude-samples", metavar="auto|LIST",
                        help="remove samples before the model: 'auto' those whose read counts make them outliers "
                             "(median count 0, far more empty windows than the cohort: see sample_qc.tsv), or names, "
                             "comma separated (default: none)")
    parser.add_argument("--min-length", type=int, metavar="BP", help="mark calls shorter than BP bases: FILTER Short "
                                                                      "in the VCFs, a filter column in the BEDs and "
                                                                      "TSVs (default: none)")
    parser.add_argument("--min-quality", type=int, metavar="Q", help="mark calls of quality below Q (phred): FILTER "
                                                                      "LowQual, as --min-length (default: none)")
    parser.add_argument("--tracks", action="store_true", help="also per-window tracks for IGV/UCSC: per sample "
                                                              "bgzipped, indexed bedGraphs of the log2 ratios and "
                                                              "sINI under tracks/ (default off)")


def _add_casemode(sub) -> None:
    """``reference build COHORT -o REF`` and ``call NEW --reference-cohort REF -o OUT`` (gcnmops.casemode)."""
    ref = sub.add_parser("reference", help="a stored reference cohort to call new samples against")
    build = ref.add_subparsers(dest="reference_command", required=True, help="build: a reference from a cohort").add_parser(
        "build", help="fit a cohort once and store it (per-region parameters, normalization, settings)")
    build.add_argument("input", help="the cohort's counts (as for run)")
    build.add_argument("-o", "--output", required=True, help="the reference folder to write (replaced if it is one)")
    build.add_argument("--method", choices=[m.name for m in METHODS.values() if m.model is ModelKind.EM],
                       default="cn.mops",
                       help="the cohort method whose model and defaults the reference has (default cn.mops)")
    _add_parameter_flags(build)
    build.add_argument("--no-counts", action="store_true", help="do not store the cohort's counts (smaller; "
                                                                "call --mode refit then impossible)")
    build.set_defaults(devices=None)
    call = sub.add_parser("call", help="call CNVs of new samples against a stored reference (gcnmops reference build)")
    call.add_argument("input", help="the new samples' counts, in the reference's regions")
    call.add_argument("--reference-cohort", metavar="REF", help="the reference cohort's folder (gcnmops reference "
                                                                "build; required, no default)")
    call.add_argument("-o", "--outdir", required=True, help="output folder (created)")
    call.add_argument("--mode", choices=["frozen", "refit"], default="frozen",
                      help="frozen: the reference's per-region parameters, E-step only (default); refit: cn.mops on "
                           "the reference cohort and the new samples together")
    call.add_argument("--no-integer", action="store_true", help="skip integer copy numbers")
    call.add_argument("--formats", type=_strings, default=None,
                      help=f"output formats from {','.join(FORMATS)} (default: {','.join(DEFAULT_FORMATS)})")
    _add_vcf_options(call)
    for p in (build, call):
        if p is build:
            p.add_argument("--sex-aware", action="store_true", help="model chrX/chrY outside the pseudo-autosomal "
                                                                    "regions per sex (a male's single X is normal)")
            p.add_argument("--genome", choices=["hg38", "hg19", "none"], default="hg38",
                           help="the build whose pseudo-autosomal regions stay with the autosomes (default hg38)")
        p.add_argument("--sex", type=_strings, help="sex-aware: female/male per sample, comma separated, in sample "
                                                    "order (default: inferred from chrX/chrY coverage)")
        p.add_argument("--backend", choices=["auto", "cpu", "gpu"], default="auto", help="auto (default), cpu or gpu")
        p.add_argument("--threads", type=int, help="threads of the CPU stages (numba; default: all CPUs)")
        p.add_argument("--quiet", action="store_true", help="no progress messages")
        p.add_argument("-v", "--verbose", action="store_true", help="also log the libraries' messages")


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
    from .outputs.writers import check_output_folder, write_result
    from .pipeline.family import cnvr_per_sample

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
    result = call_samples(args.input, ref, args.mode, sex=args.sex, integer=not args.no_integer, backend=args.backend)
    result.provenance = describe(resolve_backend(args.backend))
    written = write_result(result.replace(cnvr=cnvr_per_sample(result)), args.outdir, formats=formats, vcf=vcf)
    s = result.summary()
    print(f"gcnmops call ({args.mode}, reference {ref.n_samples} samples, method {ref.method}): {s['regions']:,} "
          f"regions x {s['samples']} new samples\n  CNVs {s['cnvs']:,}   CNV regions {s['cnv_regions']:,}\n"
          f"  time per stage: " + ", ".join(f"{k} {v:.2f} s" for k, v in result.timings.items()) +
          f"; total {time.perf_counter() - t0:.2f} s\n  {len(written)} files written to {args.outdir}")
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
    from .cuda.probe import may_use_gpu, warm_up_gpu

    if not may_use_gpu(args.backend):
        return None

    return warm_up_gpu(getattr(args, "devices", None))


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
    from .calls.qc import coverage_qc
    from .casemode import sex_aware_cn_mops
    from .data import Validated
    from .cuda.probe import resolve_backend
    from .outputs.writers import write_result
    from .pipeline.selection import Selection
    from .pipeline.family import cnvr_per_sample
    from .progress import timed_stage

    result = sex_aware_cn_mops(data, method.name, integer=not args.no_integer, backend=args.backend, **sex_kwargs,
                               **kwargs)
    result.timings["read"] = read_s
    counts = data.data if isinstance(data, Validated) else data
    result = result.replace(sample_qc=Selection(coverage_qc(counts.counts, counts.sample_names)).qc(result))
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
    from .plots import plot_files
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
    qc = result.sample_qc
    if qc is not None:
        flagged = qc[qc["outlier"]]
        lines.append(f"  sample QC ({outdir / 'sample_qc.tsv'}): " + (
            "no outlier" if flagged.empty else f"{len(flagged)} outlier(s): " + "; ".join(
                f"{r.sample} ({r.reasons}{', excluded' if r.excluded else ''})"
                for r in flagged.itertuples(index=False))))
        named = [s for s in result.selection.get("excludedSamples", []) if s not in set(flagged["sample"])]
        if named:
            lines.append(f"  excluded before the model: {', '.join(named)}")
    return "\n".join(lines)


def _count(args) -> int:
    from .io.counting import count_format, count_reads, write_counts

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
    kwargs.pop("devices", None)
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
                           formats=formats, backend=args.backend, vcf=vcf, on_chromosome=line, **kwargs)
    s = result.summary()
    print(f"gcnmops {result.params['method']} (streamed): {s['regions']:,} regions x {s['samples']} samples on "
          f"{s['chromosomes']} chromosome(s)\n  segments {s['segments']:,}   CNVs {s['cnvs']:,}   CNV regions "
          f"{s['cnv_regions']:,}\n  time per stage: " +
          ", ".join(f"{k} {v:.2f} s" for k, v in result.timings.items()) +
          f"\n  written to {args.outdir} (matrices in {result.store}: {', '.join(result.kept)})")
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
        source = _sheet_cohort(args, 2)
    elif not args.input:
        raise InputError("give an INPUT file or --samples SHEET")
    elif args.coordinates != "auto" or args.depth_to_counts is not None or _tool_file(args.input):
        from .io import read_counts  # a convention said, or a tool's file: read whole

        source = read_counts(args.input, coordinates=args.coordinates, depth_to_counts=args.depth_to_counts)
    path, in_parts = convert_counts(source, args.output, rows=args.rows)
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
    from .batch import format_summary, read_manifest, run_batch
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
    the mode and median normalizations, the reference/single model and its integer copy numbers, one sample
    (single, reference and case mode with one new sample), one region, case mode's E-step."""
    import warnings

    import numpy as np

    from .calls.integer import calc_integer_copy_numbers
    from .casemode import build_reference, call_samples
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

    return [lambda: cn_mops(data, norm=2, backend=backend),
            lambda: cn_mops(data, norm_type="mode", size_factor="median", backend=backend),
            lambda: calc_integer_copy_numbers(reference_cn_mops(new, data, backend=backend), backend=backend),
            lambda: calc_integer_copy_numbers(reference_cn_mops(new.counts[:, :1], data.counts, backend=backend),
                                              backend=backend),
            lambda: single_cn_mops(data.counts[:, 0], backend=backend),
            case_mode,
            lambda: cn_mops(region, backend=backend)]


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


def entry() -> None:
    """The ``gcnmops`` command (and ``python -m gcnmops``): ``main``, then the process ends at once.

    Every file is complete and renamed by then; what is left is tearing down the GPU's pinned host memory and
    context, and freeing the result's arrays one by one, a noticeable part of a large run (benchmarks/RESULTS.md):
    the operating system reclaims all of it at once instead (``os._exit`` after flushing the output streams)."""
    import os

    code = main()
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
