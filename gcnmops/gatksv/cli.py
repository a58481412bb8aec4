"""``gcnmops gatk-sv ...``: the command line of GATK-SV's cn.MOPS step (parsing only; the work is in this
package's modules, imported when a step runs)."""
from __future__ import annotations

import argparse
import sys
import time

from ..cuda.probe import BACKENDS
from ..params import device_list


def add_parser(sub) -> None:
    """``gatk-sv workflow|runcnmops|clean|cnmops``: GATK-SV's cn.MOPS step, same interfaces, same files
    (gcnmops.gatksv; docs/gatk-sv.md)."""
    gsv = sub.add_parser("gatk-sv", help="drop-in for GATK-SV's cn.MOPS step (CNMOPS.wdl and its scripts)")
    cmds = gsv.add_subparsers(dest="gatksv_command", required=True, help="the step to run")
    backend = argparse.ArgumentParser(add_help=False)
    backend.add_argument("--backend", choices=BACKENDS, default="auto",
                         help="where cn.mops runs: auto (a usable GPU, else the CPU; default), cpu or gpu")
    wf = cmds.add_parser("workflow", parents=[backend], help="cnMOPS_workflow.sh: rebin, exclude, cn.mops, GFF")
    wf.add_argument("bincovs", nargs="?", metavar="BINCOVS", help="sample IDs and binCov paths, tab-separated (the "
                                                                   "matrix is built from them unless -M is given)")
    wf.add_argument("-r", dest="rebin", type=int, default=1, metavar="REBIN", help="bin compression ratio (default 1)")
    wf.add_argument("-o", dest="outdir", metavar="OUTDIR", help="output directory (default: the current one)")
    wf.add_argument("-p", dest="prefix", default="cnMOPS", metavar="PREFIX", help="file name prefix (default cnMOPS)")
    wf.add_argument("-f", dest="format_calls", action="store_true", help="format the calls per sample "
                                                                          "(cleancnMOPS.sh)")
    wf.add_argument("-c", dest="cleanup", action="store_true", help="delete the intermediate files")
    wf.add_argument("-x", dest="blacklist", metavar="BLACKLIST", help="intervals whose bins are removed")
    wf.add_argument("-S", dest="subtract", metavar="SUBTRACT", help="intervals subtracted from the calls (-f)")
    wf.add_argument("-M", dest="matrix", metavar="MATRIX", help="the depth matrix (#Chr Start End samples...)")
    rc = cmds.add_parser("runcnmops", parents=[backend], help="runcnMOPS.R: cn.mops on a coverage table -> GFF3")
    rc.add_argument("-I", "--ID", dest="ID", default="CNMOPS", help="sample group ID (file names; default CNMOPS)")
    rc.add_argument("matrix", metavar="covMatrix", help="coverage table (#Chr Start End samples...)")
    rc.add_argument("outdir", metavar="OUTDIR", help="output directory (exists)")
    cl = cmds.add_parser("clean", help="cleancnMOPS.sh: per-sample DEL/DUP BEDs merged across GFFs")
    cl.add_argument("samples", metavar="SAMPLES", help="list of sample IDs")
    cl.add_argument("gffs", metavar="GFFS", help="list of GFF paths")
    cl.add_argument("-o", dest="outdir", default=".", metavar="OUTDIR", help="output directory (default .)")
    cl.add_argument("-z", dest="gz", action="store_true", help="gzip the output files")
    cl.add_argument("-S", dest="subtract", metavar="SUBTRACT", help="intervals subtracted from the calls")
    cm = cmds.add_parser("cnmops", parents=[backend], help="a whole CNMOPS.wdl call: every pass, then CleanCNMops")
    cm.add_argument("--bincov-matrix", required=True, help="the batch's bincov matrix (bgzipped, 0-based)")
    cm.add_argument("--chrom-file", required=True, help="autosomes: contig<TAB>length (mode normal)")
    cm.add_argument("--allo-file", required=True, help="allosomes: contig<TAB>length (mode 1; chrX also mode 2)")
    cm.add_argument("--ped-file", required=True, help="ped: family, sample, father, mother, sex (1 male, 2 female)")
    cm.add_argument("--exclude-list", required=True, help="BED of intervals excluded from bins and calls")
    cm.add_argument("--r1", required=True, type=int, help="first rebin factor (GatherBatchEvidence: 3, or 1000)")
    cm.add_argument("--r2", required=True, type=int, help="second rebin factor (10, or 100)")
    cm.add_argument("--batch", required=True, help="batch name (call names <batch>_DEL_<n>)")
    cm.add_argument("--prefix", required=True, help="output infix: <batch>.DEL.<prefix>.bed.gz (header, large)")
    cm.add_argument("--min-size", type=int, help="large call: fewest bp of a kept call (default 1000000)")
    cm.add_argument("--stitch-and-clean-large-events", action="store_true",
                    help="the large call's clean step (rdtest2vcf, stitch, vcf2bed, --min-size)")
    cm.add_argument("-o", "--outdir", required=True, help="output folder: passes/<contig>.<mode>.r<r>/ and the BEDs")
    cm.add_argument("--devices", type=device_list,
                    help="GPU backend: the GPUs the passes run on, one pass per GPU at a time: ids comma separated or "
                         "'all' (default 0)")
    cm.add_argument("--timings", metavar="JSON", help="also write the seconds of each stage to this JSON file (read, "
                                                      "passes, each pass group MR2..FR1, tables, cn.mops, clean, "
                                                      "total)")


def run(args) -> int:
    """gatk-sv workflow|runcnmops|clean|cnmops: the arguments to gcnmops.gatksv."""
    if args.gatksv_command == "workflow":
        from .workflow import workflow

        return workflow(args.bincovs, rebin=args.rebin, outdir=args.outdir, prefix=args.prefix,
                        format_calls=args.format_calls, cleanup=args.cleanup, blacklist=args.blacklist,
                        subtract=args.subtract, matrix=args.matrix, backend=args.backend)
    if args.gatksv_command == "runcnmops":
        from .runcnmops import NO_CNV_REGIONS, EmptyResult, run_cnmops

        try:
            run_cnmops(args.matrix, args.outdir, args.ID, backend=args.backend)
        except EmptyResult:
            print(f"Error in calcIntegerCopyNumbers(res) : \n  {NO_CNV_REGIONS}", file=sys.stderr)
            return 1
        return 0
    if args.gatksv_command == "clean":
        from .clean import clean_cnmops

        clean_cnmops(args.samples, args.gffs, args.outdir, subtract_bed=args.subtract, gz=args.gz)
        return 0
    from ..cuda.probe import warm_up_for
    from .cnmops import run_call

    t0 = time.perf_counter()
    timings: dict = {}
    gpu = warm_up_for(args.backend, args.devices)  # the driver and contexts start while the matrix is read
    written = run_call(args.bincov_matrix, args.chrom_file, args.allo_file, args.ped_file, args.exclude_list,
                       r1=args.r1, r2=args.r2, batch=args.batch, prefix=args.prefix, outdir=args.outdir,
                       min_size=args.min_size, stitch_and_clean_large_events=args.stitch_and_clean_large_events,
                       backend=args.backend, devices=args.devices, timings=timings, gpu_warmup=gpu)
    if args.timings:
        import json
        from pathlib import Path

        timings["total"] = time.perf_counter() - t0
        Path(args.timings).write_text(json.dumps({k: round(v, 4) for k, v in timings.items()}, indent=1) + "\n")
    print(f"gcnmops gatk-sv cnmops: {', '.join(str(p) for p in written if not str(p).endswith('.tbi'))} "
          f"in {time.perf_counter() - t0:.1f} s")
    return 0


__all__ = ["add_parser", "run"]
