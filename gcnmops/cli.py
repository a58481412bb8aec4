"""Command line: ``python -m gcnmops run INPUT -o OUTDIR [options]``, ``python -m gcnmops batch MANIFEST -o OUTDIR``
and ``python -m gcnmops info``."""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from .errors import InputError

#: --method choices
METHODS = ("cn.mops", "exome", "haplo", "reference", "single")


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",")]


def _devices(text: str):
    return "all" if text == "all" else [int(v) for v in text.split(",")]


def _strings(text: str) -> list[str]:
    return [v.strip() for v in text.split(",")]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gcnmops", description="cn.MOPS copy-number detection, CPU or GPU.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="detect CNVs in a read-count matrix and write every result file")
    run.add_argument("input", nargs="?", help="counts: .rds, .tsv/.csv (seqnames,start,end + samples), "
                                              ".parquet or .npz")
    run.add_argument("--example", action="store_true", help="run on the built-in simulated cohort")
    run.add_argument("-o", "--outdir", required=True, help="output folder (created)")
    run.add_argument("--method", choices=list(METHODS), default="cn.mops",
                     help="cn.mops (cohort), exome, haplo (haploid), reference (cases vs --controls), single")
    run.add_argument("--controls", help="reference method: the control samples' counts (same regions as INPUT)")
    run.add_argument("--backend", choices=["auto", "cpu", "gpu"], default="auto")
    run.add_argument("--devices", type=_devices, help="GPU backend: device ids, comma separated, or 'all'")
    run.add_argument("--I", type=_floats, help="fold changes, comma separated (default: the method's)")
    run.add_argument("--classes", type=_strings, help="labels, comma separated (default: the method's)")
    run.add_argument("--prior-impact", type=float)
    run.add_argument("--cyc", type=int)
    run.add_argument("--norm", type=int, choices=[0, 1, 2], default=1)
    run.add_argument("--norm-type", default="poisson")
    run.add_argument("--size-factor", default="mean")
    run.add_argument("--norm-qu", type=float, default=0.25)
    run.add_argument("--qu-size-factor", type=float, default=0.75)
    run.add_argument("--upper-threshold", type=float)
    run.add_argument("--lower-threshold", type=float)
    run.add_argument("--min-width", type=int)
    run.add_argument("--seg-algorithm")
    run.add_argument("--min-read-count", type=float)
    run.add_argument("--use-median", action="store_true")
    run.add_argument("--return-posterior", action="store_true")
    run.add_argument("--no-integer", action="store_true", help="skip integer copy numbers")
    run.add_argument("--formats", type=_strings, default=None, help="tsv,bed,vcf,seg (default: all)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--plots", action="store_true", help="write PNG plots (CNV regions, segments, overview)")
    run.add_argument("--report", action="store_true", help="write report.html (summary, plots, output files)")
    sub.add_parser("info", help="show versions and whether a GPU backend is usable")
    count = sub.add_parser("count", help="count reads of BAM files in windows or regions (a count TSV for run)")
    count.add_argument("bams", nargs="+", metavar="BAM", help="BAM files (same reference genome)")
    count.add_argument("-o", "--output", required=True, help="count table to write (.tsv, or .tsv.gz)")
    count.add_argument("--window", type=int, default=25000, help="window length in bp (default 25000)")
    count.add_argument("--regions", help="count in these regions instead: BED (0-based) or a seqnames/start/end table")
    count.add_argument("--ref-seq-names", type=_strings, help="references to count, comma separated (default all)")
    count.add_argument("--sample-names", type=_strings, help="sample names, comma separated (default file names)")
    count.add_argument("--min-mapq", type=int, default=1)
    count.add_argument("--workers", type=int, help="threads (default: all CPUs)")
    count.add_argument("--quiet", action="store_true", help="no progress bar")
    batch = sub.add_parser("batch", help="run many experiments listed in a manifest on GPUs or CPU worker processes "
                                         "(resumable; see docs/scaling.md)")
    batch.add_argument("manifest", help="TSV (id, input, method, parameter columns) or YAML list of experiments")
    batch.add_argument("-o", "--outdir", required=True, help="output folder: one subfolder per experiment")
    batch.add_argument("--devices", type=_devices, help="one worker per GPU: device ids, comma separated, or 'all'")
    batch.add_argument("--workers", type=int, help="CPU worker processes (default 1, or the GPUs when one is usable)")
    batch.add_argument("--formats", type=_strings, default=None, help="tsv,bed,vcf,seg (default: all)")
    batch.add_argument("--no-integer", action="store_true", help="skip integer copy numbers")
    batch.add_argument("--force", action="store_true", help="run again the experiments already done")
    batch.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser


def _run(args) -> int:
    from . import calc_integer_copy_numbers
    from .example import example_cohort
    from .io import read_counts
    from .progress import Progress

    if args.example == bool(args.input):
        raise InputError("give either an INPUT file or --example")
    if (args.method == "reference") != bool(args.controls) and not (args.example and args.method == "reference"):
        raise InputError("--controls FILE is needed by --method reference (and only by it)")
    stages = ["read", "normalize+model+calls"] + ([] if args.no_integer else ["integer"]) + ["write"]
    with Progress(stages, disable=args.quiet) as progress:
        t0 = time.perf_counter()
        data = example_cohort()[0] if args.example else read_counts(
            args.input, min_samples=1 if args.method in ("reference", "single") else 2)
        read_s = time.perf_counter() - t0
        progress.advance("read")
        kwargs = {k: v for k, v in dict(
            I=args.I, classes=args.classes, prior_impact=args.prior_impact, cyc=args.cyc, norm=args.norm,
            norm_type=args.norm_type, size_factor=args.size_factor, norm_qu=args.norm_qu,
            qu_size_factor=args.qu_size_factor, upper_threshold=args.upper_threshold,
            lower_threshold=args.lower_threshold, min_width=args.min_width, seg_algorithm=args.seg_algorithm,
            min_read_count=args.min_read_count, use_median=args.use_median,
            return_posterior=args.return_posterior, backend=args.backend, devices=args.devices).items()
            if v is not None}
        if "devices" in kwargs and args.method not in ("cn.mops", "exome"):
            raise InputError("--devices applies to --method cn.mops and exome")
        if args.method in ("haplo", "reference", "single"):  # these methods always use segment means
            if kwargs.pop("use_median", False):
                raise InputError(f"--use-median is not available with --method {args.method} "
                                 "(cn.mops uses segment means there)")
        result = _call_method(args, data, kwargs)
        result.timings["read"] = read_s
        progress.advance("normalize+model+calls")
        if not args.no_integer and len(result.cnvr):
            t0 = time.perf_counter()
            result = calc_integer_copy_numbers(result, backend=args.backend)
            result.timings["integer"] = time.perf_counter() - t0
        if not args.no_integer:
            progress.advance("integer")
        t0 = time.perf_counter()
        from .pipeline.family import cnvr_per_sample

        # files want one CN column per sample in cnvr (haplo/single keep cn.mops's own cnvr shape until integer CNs)
        written = result.replace(cnvr=cnvr_per_sample(result)).write(args.outdir, formats=args.formats)
        result.timings["write"] = time.perf_counter() - t0
        progress.advance("write")
    if args.plots or args.report:
        from .plots import write_plots

        t0 = time.perf_counter()
        written += write_plots(result, args.outdir)
        result.timings["plots"] = time.perf_counter() - t0
    if args.report:
        from .report import write_report

        t0 = time.perf_counter()
        written.append(write_report(result, args.outdir, files=written))
        result.timings["report"] = time.perf_counter() - t0
    print(_summary(result, Path(args.outdir), len(written)))
    return 0


def _call_method(args, data, kwargs):
    """The family member of ``--method`` on ``data`` (controls from ``--controls``; with --example the
    reference method takes the first 5 samples as cases, the others as controls, single the first)."""
    from .pipeline import family
    from .pipeline.cnmops import cn_mops

    if args.method == "reference":
        if args.example:
            from .data import make_count_data

            cases = make_count_data(data.counts[:, :5], data.sample_names[:5], data.ranges, min_samples=1)
            controls = make_count_data(data.counts[:, 5:], data.sample_names[5:], data.ranges, min_samples=1)
            return family.reference_cn_mops(cases, controls, **kwargs)
        return family.reference_cn_mops(data, args.controls, **kwargs)
    if args.method == "single" and args.example:
        from .data import make_count_data

        data = make_count_data(data.counts[:, :1], data.sample_names[:1], data.ranges, min_samples=1)
    fn = {"cn.mops": cn_mops, "exome": family.exome_cn_mops, "haplo": family.haplo_cn_mops,
          "single": family.single_cn_mops}[args.method]
    return fn(data, **kwargs)


def _summary(result, outdir: Path, n_files: int) -> str:
    s = result.summary()
    lines = [
        f"gcnmops {result.params['method']}: {s['regions']:,} regions x {s['samples']} samples "
        f"on {s['chromosomes']} chromosome(s)",
        f"  segments {s['segments']:,}   CNVs {s['cnvs']:,}   CNV regions {s['cnv_regions']:,}",
        "  time per stage: " + ", ".join(f"{k} {v:.2f} s" for k, v in result.timings.items()),
        f"  {n_files} files written to {outdir}",
    ]
    return "\n".join(lines)


def _count(args) -> int:
    from .io.counting import count_reads, write_counts

    t0 = time.perf_counter()
    data = count_reads(args.bams, sample_names=args.sample_names, ref_seq_names=args.ref_seq_names,
                       window=args.window, regions=args.regions, min_mapq=args.min_mapq, workers=args.workers,
                       progress=not args.quiet)
    write_counts(data, args.output)
    print(f"gcnmops count: {data.n_regions:,} regions x {data.n_samples} samples, "
          f"{int(data.counts.sum()):,} reads counted in {time.perf_counter() - t0:.2f} s -> {args.output}")
    return 0


def _batch(args) -> int:
    """Exit status 0 when every experiment is done, 1 when some failed, 130 when interrupted."""
    from .batch import format_summary, read_manifest, run_batch

    if args.devices is not None and args.workers is not None:
        raise InputError("give --devices (GPU workers) or --workers (CPU workers), not both")
    experiments = read_manifest(args.manifest)
    try:
        summary = run_batch(experiments, args.outdir, devices=args.devices, workers=args.workers,
                            formats=args.formats, integer=not args.no_integer, force=args.force,
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

    from .cuda.probe import gpu_available

    print(f"gcnmops {__import__('gcnmops').__version__}; numpy {numpy.__version__}; numba {numba.__version__}")
    print(f"GPU backend usable: {gpu_available()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.command == "count":
            return _count(args)
        if args.command == "batch":
            return _batch(args)
        return _run(args) if args.command == "run" else _info()
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
