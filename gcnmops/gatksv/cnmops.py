"""A whole ``CNMOPS.wdl`` call in one process: every contig x mode x rebin pass (the ``CNSampleNormal`` tasks)
from one read of the bincov matrix, then ``CleanCNMops``.

Passes, as the WDL scatters them: for each allosome (``allo_file``) mode "1" (males) at r2 and r1; for each
autosome (``chrom_file``) mode "normal" (every sample) at r2 and r1; chrX mode "2" (females) at r2 and r1. Each
writes ``OUT/passes/<contig>.<mode>.r<r>/cnMOPS.cnMOPS.gff`` (0 bytes when cn.mops finds no CNV region, as the
task does); the passes run largest first, which changes nothing in them. CleanCNMops writes
``OUT/<batch>.DEL.<prefix>.bed.gz`` and ``OUT/<batch>.DUP.<prefix>.bed.gz`` (+ ``.tbi``) from the GFFs in the task's
order (NR1, NR2, MR1, MR2, FR1, FR2).
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

from ..compat import threadsafe_parallel
from ..cuda.config import PASSES_PER_DEVICE
from ..cuda.runtime import in_threads
from ..errors import InputError
from .clean import clean_batch
from .files import require_pysam
from .intervals import read_bed
from .matrix import DepthMatrix, ped_samples, print_sv_evidence, read_depth_matrix, sex_columns
from .rebin import compress_cov, exclude, raw_table
from .runcnmops import EmptyResult, PassWarnings, call_gff

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


def largest_first(matrix: DepthMatrix, passes, ped) -> list[Pass]:
    """``passes`` by their work, largest first (the contig's bins / r x its samples: all, or the ped's males or
    females), ties in the given order: where passes run side by side, the longest starts first instead of last."""
    passes = list(passes)
    names, bounds = matrix.runs
    bins: dict[str, int] = {}
    for name, size in zip(names, np.diff(bounds).tolist()):
        bins[name] = bins.get(name, 0) + size
    n = len(matrix.samples)
    of_sex = {sex: min(n, len(ped_samples(ped, sex))) for sex in {p.mode for p in passes} - {"normal"}}

    def work(p: Pass) -> float:
        return bins.get(p.contig, 0) / p.r * (n if p.mode == "normal" else of_sex[p.mode])

    return sorted(passes, key=work, reverse=True)


def run_pass(matrix: DepthMatrix, p: Pass, ped, bed, outdir: Path, *, out, backend: str = "auto",
             date: str | None = None, timings: dict | None = None, **fit_options) -> Path:
    """One pass's GFF, written to ``outdir/passes/<pass>/cnMOPS.cnMOPS.gff`` (empty on the empty-result rule).
    ``out``: the pass's log, runcnMOPS.R's messages (its warnings go there through run_passes' PassWarnings);
    ``timings``: seconds added to its "tables" (selection, rebinning, exclusion) and "cn.mops" (cn.mops, integer
    copy numbers, the GFF) entries; ``fit_options`` go to the model."""
    folder = outdir / "passes" / p.name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "cnMOPS.cnMOPS.gff"
    t0 = time.perf_counter()
    table = pass_table(matrix, p, ped, bed)
    t1 = time.perf_counter()
    try:
        text = call_gff(table, backend=backend, date=date, out=out, capture_warnings=False, **fit_options)
    except EmptyResult:
        text = ""
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    t2 = time.perf_counter()
    _add(timings, "tables", t1 - t0)
    _add(timings, "cn.mops", t2 - t1)
    log.info(f"gatk-sv cnmops: pass {p.name}: {max(0, text.count(chr(10)) - 3)} calls in {t2 - t0:.2f} s")
    return path


def run_passes(matrix: DepthMatrix, passes: list[Pass], ped, bed, outdir: Path, *, backend: str = "auto",
               devices=None, per_device: int = PASSES_PER_DEVICE, timings: dict | None = None) -> dict[Pass, Path]:
    """Every pass of ``passes`` (run_pass), each GFF written as alone. On the GPU backend each device of
    ``devices`` (None: device 0; "all"; ids) runs ``per_device`` passes at a time (cuda/config.py says why one),
    each on its own host thread with its share of the cores (and, beside another pass on its device, of the
    device's memory and a cupy memory pool of its own), taking the next pass in the given order. A pass that runs
    out of device memory beside others runs again alone. On the CPU, one pass at a time. Each pass's
    log (runcnMOPS.R's messages and warnings) is written to stderr whole, when it is done. ``timings``: as
    run_pass's, plus one entry per pass name (its seconds)."""
    slots = pass_slots(backend, devices, per_device)
    queue = iter(passes)
    done: dict[Pass, Path] = {}
    lock = threading.Condition()
    state = {"running": 0, "alone": 0, "failed": False}
    share = max(1, numba.get_num_threads() // len(slots))

    def one(p: Pass, options: dict) -> None:
        buf = io.StringIO()
        warned.to(buf)
        t0 = time.perf_counter()
        part: dict = {}
        done[p] = run_pass(matrix, p, ped, bed, outdir, backend=backend, timings=part, out=buf, **options)
        with lock:
            for key, value in part.items():
                _add(timings, key, value)
            _add(timings, p.name, time.perf_counter() - t0)
            sys.stderr.write(buf.getvalue())
            sys.stderr.flush()

    def work(device) -> None:
        from ..cuda.runtime import make_backend, on_device, thread_memory_pool

        if len(slots) > 1:
            numba.set_num_threads(share)
        gpu = contextlib.ExitStack()
        if device is not None:
            gpu.enter_context(on_device(device))
            if len(slots) > 1:
                gpu.enter_context(thread_memory_pool())
        with gpu:
            options = {}
            if device is not None and len(slots) > 1:
                options["max_device_memory"] = make_backend(device).mem_info()[1] // slots.count(device)
            while True:
                with lock:
                    while state["alone"]:
                        lock.wait()
                    p = None if state["failed"] else next(queue, None)
                    if p is None:
                        return
                    state["running"] += 1
                try:
                    one(p, options)
                except Exception as exc:  # noqa: BLE001 - out of device memory beside other passes: once alone
                    if len(slots) == 1 or not _out_of_device_memory(exc):
                        state["failed"] = True  # the others take no more passes
                        raise
                    log.info(f"gatk-sv cnmops: pass {p.name} ran out of GPU memory beside other passes; "
                             "running it alone")
                    with lock:
                        state["running"] -= 1
                        state["alone"] += 1
                        while state["running"]:
                            lock.wait()
                        state["running"] += 1
                    try:
                        one(p, {})
                    finally:
                        with lock:
                            state["alone"] -= 1
                            lock.notify_all()
                finally:
                    with lock:
                        state["running"] -= 1
                        lock.notify_all()

    with PassWarnings() as warned:
        if len(slots) == 1:
            work(slots[0])
        else:
            in_threads({f"gcnmops-pass{k}": (lambda d=d: work(d)) for k, d in enumerate(slots)})
    return done


def pass_slots(backend: str, devices=None, per_device: int = PASSES_PER_DEVICE) -> list[int | None]:
    """The passes run at a time, as the device each runs on: ``per_device`` per GPU of ``devices`` on the GPU
    backend (one where numba's threading layer cannot run parallel regions from several threads), [None] (one,
    on the CPU) otherwise."""
    from ..cuda.probe import Backend, device_ids, resolve_backend

    if resolve_backend(backend) is not Backend.GPU:
        return [None]
    slots = [d for d in device_ids(devices) for _ in range(max(1, per_device))]
    return slots if len(slots) == 1 or threadsafe_parallel() else slots[:1]


def _out_of_device_memory(exc: BaseException) -> bool:
    """A device allocation that failed (cupy's OutOfMemoryError, the model's MemoryError, a CUDA out-of-memory
    error), not any other failure."""
    return (isinstance(exc, MemoryError) or "OutOfMemory" in type(exc).__name__
            or "out of memory" in str(exc).lower() or "OUT_OF_MEMORY" in str(exc))


def run_call(bincov_matrix, chrom_file, allo_file, ped_file, exclude_list, *, r1: int, r2: int, batch: str,
             prefix: str, outdir, min_size: int | None = None, stitch_and_clean_large_events: bool = False,
             backend: str = "auto", devices=None, per_device: int = PASSES_PER_DEVICE, timings: dict | None = None,
             gpu_warmup=None) -> list[Path]:
    """A CNMOPS.wdl call (see the module docstring); returns the clean outputs (DEL, DEL index, DUP, DUP index).
    ``devices``, ``per_device``: the GPUs the passes run on and how many each runs at a time (run_passes).
    ``gpu_warmup``: a started :func:`..cuda.probe.warm_up_gpu`, waited for after the read, before the passes.
    ``timings``: seconds added to its "read", "passes" (all passes, wall), "tables", "cn.mops" and "clean"
    entries, and to one entry per pass group ("MR2", "MR1", "NR2", "NR1", "FR2", "FR1": its passes' seconds,
    which overlap where passes run together)."""
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
    order = largest_first(matrix, dict.fromkeys(p for name in ("MR2", "MR1", "NR2", "NR1", "FR2", "FR1")
                                                for p in groups[name]), ped_file)
    t0 = time.perf_counter()
    passes: dict = {}
    gff = run_passes(matrix, order, ped_file, bed, out, backend=backend, devices=devices, per_device=per_device,
                     timings=passes)
    _add(timings, "passes", time.perf_counter() - t0)
    for key in ("tables", "cn.mops"):
        _add(timings, key, passes.pop(key, 0.0))
    for name, members in groups.items():  # each group's passes' seconds (they overlap where passes run together)
        _add(timings, name, sum(passes.get(p.name, 0.0) for p in dict.fromkeys(members)))
    del matrix
    ordered = [gff[p] for name in ("NR1", "NR2", "MR1", "MR2", "FR1", "FR2") for p in groups[name]]
    t0 = time.perf_counter()
    written = clean_batch(ordered, ped_file, exclude_list, batch, prefix, out, stitch=stitch_and_clean_large_events,
                          min_size=1000000 if min_size is None else int(min_size),
                          contig_files=(chrom_file, allo_file))
    _add(timings, "clean", time.perf_counter() - t0)
    log.info(f"gatk-sv cnmops: CleanCNMops in {time.perf_counter() - t0:.2f} s")
    return written


__all__ = ["Pass", "read_contigs", "call_passes", "pass_table", "largest_first", "run_pass", "run_passes",
           "pass_slots", "run_call"]
