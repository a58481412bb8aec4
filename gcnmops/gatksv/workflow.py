"""``cnMOPS_workflow.sh [-r REBIN] [-o OUTDIR] [-p PREFIX] [-f] [-c] [-x BLACKLIST] [-S SUBTRACT] [-M MATRIX]
[BINCOVS]``: the same files, in the same order of steps, with the same status lines.

Files in OUTDIR: ``PREFIX.raw_matrix.bed.gz`` (the matrix, bgzipped), ``PREFIX.compressed_matrix.bed.gz``
(+ ``.tbi``; rebinned and excluded), ``calls/PREFIX.cnMOPS.gff``, ``samples.list`` (column 1 of BINCOVS),
``GFFs.list``; with ``-f`` cleancnMOPS.sh's ``calls/<ID>/<ID>.cnMOPS.{DEL,DUP}.bed.gz``; ``-c`` removes the
matrices and lists. When cn.mops finds no CNV region the run stops as runcnMOPS.R does (status 1, the
message on stderr; the WDL then leaves an empty GFF). Without ``-M`` the matrix is built from the BINCOVS list
of per-sample binCov files as ``makeMatrix.sh -z [-r BLACKLIST]`` builds it (:mod:`.makematrix`; then
``PREFIX.raw_matrix.bed.gz`` has its ``.tbi``).
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from ..errors import InputError
from .clean import clean_cnmops
from .files import bgzip, bgzip_file
from .intervals import read_bed
from .makematrix import make_matrix
from .matrix import read_depth_matrix
from .rebin import compress_cov, exclude, raw_table
from .runcnmops import NO_CNV_REGIONS, EmptyResult, call_gff


def _status(text: str, out) -> None:
    out.write(f"STATUS | {time.strftime('%H:%M:%S (%m-%d-%y)')} | {text}\n")
    out.flush()


def _gzipped(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def workflow(bincovs: str | None = None, *, rebin: int = 1, outdir: str | os.PathLike | None = None,
             prefix: str = "cnMOPS", format_calls: bool = False, cleanup: bool = False,
             blacklist: str | None = None, subtract: str | None = None, matrix: str | None = None,
             backend: str = "auto", out=None, err=None) -> int:
    """cnMOPS_workflow.sh; returns its exit status (0, or 1 when cn.mops finds no CNV region)."""
    out, err = out or sys.stdout, err or sys.stderr
    outdir = Path(outdir) if outdir is not None else Path.cwd()
    if not bincovs and not matrix:
        raise InputError("Either BINCOVS or -M MATRIX is required.")
    for d in (outdir, outdir / "calls"):
        if not d.exists():
            d.mkdir()
    raw = outdir / f"{prefix}.raw_matrix.bed.gz"
    if not matrix:
        _status("GENERATING COVERAGE MATRIX...", out)
        m = make_matrix(bincovs, restrict=blacklist)
        bgzip(raw, m.lines())
        matrix = raw
    else:
        _status("USING PRECOMPUTED BINCOV MATRIX, AS SPECIFIED...", out)
        src = Path(matrix)
        if not src.is_file():
            raise InputError(f"Matrix not found: {matrix}")
        if _gzipped(src):
            shutil.copyfile(src, raw)
        else:
            bgzip_file(src, raw)
        m = read_depth_matrix(raw)
    compressed = outdir / f"{prefix}.compressed_matrix.bed.gz"
    if rebin > 1:
        _status("REBINNING COVERAGE MATRIX...", out)
        table = compress_cov(m, rebin, str(matrix))
        bgzip(compressed, table.lines())
    else:
        table = raw_table(m)
        raw.replace(compressed)
    if blacklist:
        table = exclude(table, read_bed(blacklist))
        bgzip(compressed, table.lines())
    _status("RUNNING cn.MOPS...", out)
    try:
        text = call_gff(table, backend=backend, out=out)
    except EmptyResult:
        err.write(f"Error in calcIntegerCopyNumbers(res) : \n  {NO_CNV_REGIONS}\n")
        return 1
    gff = Path(f"{outdir}/calls/{prefix}.cnMOPS.gff")
    gff.write_text(text, encoding="utf-8", errors="surrogateescape")
    ids = []
    if bincovs:
        ids = [line.split("\t")[0] for line in Path(bincovs).read_text(encoding="utf-8").splitlines()]
    (outdir / "samples.list").write_text("".join(i + "\n" for i in ids), encoding="utf-8")
    (outdir / "GFFs.list").write_text(f"{outdir}/calls/{prefix}.cnMOPS.gff\n", encoding="utf-8")
    if format_calls:
        _status("FORMATTING cn.MOPS CALLS...", out)
        clean_cnmops(outdir / "samples.list", outdir / "GFFs.list", f"{outdir}/calls/", subtract_bed=subtract,
                     gz=True)
    if cleanup:
        for f in (raw, compressed, outdir / "samples.list", outdir / "GFFs.list"):
            f.unlink(missing_ok=True)
    return 0


__all__ = ["workflow"]
