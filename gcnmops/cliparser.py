"""The command line's parser: every subcommand and its flags (cn.mops's parameters from ``params.PARAMETERS``);
``cli`` runs what it parses."""
from __future__ import annotations

import argparse

from .gatksv import cli as gatksv_cli
from .outputs.formats import DEFAULT_FORMATS, FORMATS
from .params import KINDS, METHODS, PARAMETERS, ModelKind
from .params import comma_strings as _strings
from .params import device_list as _devices


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
    run.add_argument("--devices", type=_devices, help="GPU backend: device ids, comma separated, or 'all' (default 0); "
                     "each takes whole chromosomes (in memory a group of consecutive ones per GPU)")
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
                                               "text, 262,144 Parquet rows), or from each file of a --samples sheet "
                                               "(default: a store chunk's rows, at most ~256 MB of counts)")
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
