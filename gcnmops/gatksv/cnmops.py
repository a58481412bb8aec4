"""A whole ``CNMOPS.wdl`` call in one process: every contig x mode x rebin pass (the ``CNSampleNormal`` tasks)
from one read of the bincov matrix, then ``CleanCNMops``.

Passes, as the WDL scatters them: for each allosome (``allo_file``) mode "1" (males) at r2 and r1; for each
autosome (``chrom_file``) mode "normal" (every sample) at r2 and r1; chrX mode "2" (females) at r2 and r1. Each
writes ``OUT/passes/<contig>.<mode>.r<r>/cnMOPS.cnMOPS.gff`` (0 bytes when cn.mops finds no CNV region, as the
task does); CleanCNMops writes ``OUT/<batch>.DEL.<prefix>.bed.gz`` and ``OUT/<batch>.DUP.<prefix>.bed.gz``
(+ ``.tbi``) from the GFFs in the task's order (NR1, NR2, MR1, MR2, FR1, FR2).
"""
from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from .clean import clean_batch
from .files import require_pysam
from .intervals import read_bed
from .matrix import DepthMatrix, ped_samples, print_sv_evidence, read_depth_matrix, sex_columns
from .rebin import compress_cov, exclude, raw_table
from .runcnmops import EmptyResult, call_gff

log = logging.getLogger("gcnmops")


@dataclass(frozen=True)
class Pass:
    """One CNSampleNormal task: contig, mode ("normal", "1" males, "2" females), rebin factor r."""

    contig: str
    mode: str
    r: int

    @property
    def name(self) -> str:
        return f"{self.contig}.{self.mode}.r{self.r}"


def read_contigs(path: str | os.PathLike) -> list[str]:
    """Column 1 of a contig file (WDL ``read_tsv``: tab-separated rows; blank lines skipped)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"Contig file not found: {path}")
    return [line.split("\t")[0] for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


def call_passes(chroms: list[str], allos: list[str], r1: int, r2: int) -> dict[str, list[Pass]]:
    """The call's passes by the task names of the WDL (MaleR2/MaleR1/NormalR2/NormalR1/FemaleR2/FemaleR1)."""
    return {"MR2": [Pass(a, "1", r2) for a in allos], "MR1": [Pass(a, "1", r1) for a in allos],
            "NR2": [Pass(c, "normal", r2) for c in chroms], "NR1": [Pass(c, "normal", r1) for c in chroms],
            "FR2": [Pass("chrX", "2", r2)], "FR1": [Pass("chrX", "2", r1)]}


def pass_table(matrix: DepthMatrix, p: Pass, ped: str | os.PathLike, bed):
    """The table runcnMOPS.R reads in pass ``p``: PrintSVEvidence, the sex columns, compressCov.sh, the exclusion."""
    m = print_sv_evidence(matrix, p.contig)
    if m.n_rows == 0:
        raise InputError(f"Pass {p.name}: the bincov matrix has no bins on {p.contig}.")
    if p.mode != "normal":
        m = sex_columns(m, ped_samples(ped, p.mode), f"Pass {p.name}")
    if p.r > 1:
        return compress_cov(m, p.r, f"Pass {p.name}", bed=bed)
    return exclude(raw_table(m), bed) if bed is not None else raw_table(m)


def _add(timings: dict | None, stage: str, seconds: float) -> None:
    if timings is not None:
        timings[stage] = timings.get(stage, 0.0) + seconds


def run_pass(matrix: DepthMatrix, p: Pass, ped, bed, outdir: Path, *, backend: str = "auto",
             date: str | None = None, timings: dict | None = None) -> Path:
    """One pass's GFF, written to ``outdir/passes/<pass>/cnMOPS.cnMOPS.gff`` (empty on the empty-result rule).
    ``timings``: seconds added to its "tables" (selection, rebinning, exclusion) and "cn.mops" (cn.mops, integer
    copy numbers, the GFF) entries."""
    folder = outdir / "passes" / p.name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "cnMOPS.cnMOPS.gff"
    t0 = time.perf_counter()
    table = pass_table(matrix, p, ped, bed)
    t1 = time.perf_counter()
    try:
        text = call_gff(table, backend=backend, date=date, out=sys.stderr)
    except EmptyResult:
        text = ""
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    t2 = time.perf_counter()
    _add(timings, "tables", t1 - t0)
    _add(timings, "cn.mops", t2 - t1)
    log.info(f"gatk-sv cnmops: pass {p.name}: {max(0, text.count(chr(10)) - 3)} calls in {t2 - t0:.2f} s")
    return path


def run_call(bincov_matrix, chrom_file, allo_file, ped_file, exclude_list, *, r1: int, r2: int, batch: str,
             prefix: str, outdir, min_size: int | None = None, stitch_and_clean_large_events: bool = False,
             backend: str = "auto", timings: dict | None = None, gpu_warmup=None) -> list[Path]:
    """A CNMOPS.wdl call (see the module docstring); returns the clean outputs (DEL, DEL index, DUP, DUP index).
    ``gpu_warmup``: a started :func:`..cuda.probe.warm_up_gpu`, waited for after the read, before the passes.
    ``timings``: seconds added to its "read", "tables", "cn.mops" and "clean" entries, and to one entry per pass
    group ("MR2", "MR1", "NR2", "NR1", "FR2", "FR1": its passes' tables and cn.mops)."""
    require_pysam()  # the clean outputs are bgzipped and indexed: say so before the passes, not after them
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    chroms, allos = read_contigs(chrom_file), read_contigs(allo_file)
    bed = read_bed(exclude_list)
    t0 = time.perf_counter()
    matrix = read_depth_matrix(bincov_matrix)
    _add(timings, "read", time.perf_counter() - t0)
    log.info(f"gatk-sv cnmops: {matrix.n_rows:,} bins x {len(matrix.samples)} samples read in "
             f"{time.perf_counter() - t0:.2f} s")
    groups = call_passes(chroms, allos, int(r1), int(r2))
    if gpu_warmup is not None:
        gpu_warmup.wait()
    gff: dict[Pass, Path] = {}
    for name in ("MR2", "MR1", "NR2", "NR1", "FR2", "FR1"):
        t0 = time.perf_counter()
        for p in groups[name]:
            if p not in gff:
                gff[p] = run_pass(matrix, p, ped_file, bed, out, backend=backend, timings=timings)
        _add(timings, name, time.perf_counter() - t0)
    del matrix
    ordered = [gff[p] for name in ("NR1", "NR2", "MR1", "MR2", "FR1", "FR2") for p in groups[name]]
    t0 = time.perf_counter()
    written = clean_batch(ordered, ped_file, exclude_list, batch, prefix, out, stitch=stitch_and_clean_large_events,
                          min_size=1000000 if min_size is None else int(min_size),
                          contig_files=(chrom_file, allo_file))
    _add(timings, "clean", time.perf_counter() - t0)
    log.info(f"gatk-sv cnmops: CleanCNMops in {time.perf_counter() - t0:.2f} s")
    return written


__all__ = ["Pass", "read_contigs", "call_passes", "pass_table", "run_pass", "run_call"]
