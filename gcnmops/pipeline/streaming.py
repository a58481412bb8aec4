"""cn.mops on a count matrix larger than memory: a chunked store on disk, streamed chromosome by chromosome.

``run_streaming(store, outdir)`` gives the result :func:`gcnmops.cn_mops` (and ``run_and_write``) gives on
the whole matrix, bit for bit, holding one chromosome's counts and results at a time (plus the call tables, the
regions and a float per region for the sample QC). cn.mops normalizes per chromosome, fits every region on its own and segments each sample per
chromosome; what crosses chromosomes is taken from the whole store first:

- each sample's total count (the zero-column check and the size factors' fall-back of
  ``normalize_chromosomes``): stored by ``gcnmops convert`` / ``save_counts``, else one pass over the store;
- ``norm=2``: the per-sample coverages (``sample_coverage``), one pass over the store by groups of whole
  sample columns (each group as large as the largest chromosome);
- whether cn.mops segments at all (six regions or more in the whole matrix), and its "No CNVs" message.

Per chromosome the counts (stored dtype, often int32) are read (the chunks in threads), validated and converted
to float64 (``CountStore.chromosome``), then normalized (``normalization.cpu.normalize_chromosomes`` with the
genome's column sums; on the GPU backend ``normalization.gpu.normalize_chromosomes_gpu`` where its answer cannot
depend on them), fitted (``model.fit``), segmented and called (``calls.cnvs.calls_from_segments``; the GPU
segmentation on the GPU backend), labelled with integer copy numbers (``calls.integer.calc_integer_copy_numbers``:
every CNV lies in one chromosome) and its matrices written into the result store (outputs.resultstore.ResultStore).

Reading, computing and writing overlap: while chromosome k is computed (in the calling thread), chromosome k + 1
is read on a read-ahead thread and chromosome k - 1's matrices are written by the result store's background
writer (``ResultStore.write_behind``). Memory: the counts of two chromosomes (k and k + 1), the result of k and
the kept matrices of k - 1. A failure of either thread is the run's error; the clean-up waits for the writer.
On several GPUs (``devices``) a thread per GPU takes the largest chromosome not yet taken, reads it and runs it
there, and hands its matrices to the same writer (a chromosome per GPU in memory, plus the one written).

The call tables are written at the end as by ``gcnmops run`` (``outputs.writers.ResultWriter``; the BED/VCF
qualities from the evidence each chromosome gathered for its calls, ``calls.quality.CallEvidence``), with the
sample QC (``sample_qc.tsv``, ``pipeline.streamqc``: each chromosome's counts tallied as they are read, the
columns it needs read back a group of samples at a time).
All or nothing, as the other writers.

Out of scope: a single chromosome larger than memory (its counts and results are held at once); the
methods without a cohort EM (referencecn.mops, singlecn.mops) and the DNAcopy segmentation (its random
jitter runs across chromosomes).
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numba
import numpy as np
import pandas as pd

from ..calls.integer import calc_integer_copy_numbers, segment_labels
from ..calls.quality import CallEvidence
from ..cuda.probe import Backend, device_ids, resolve_backend
from ..cuda.runtime import in_threads, on_device, thread_memory_pool
from ..errors import InputError
from ..io.atomic import output_error, signals_held
from ..io.store import CountStore, open_count_store
from ..outputs.callfiles import VcfOptions
from ..outputs.resultstore import ALWAYS_KEPT, MATRIX_STORE, STREAM_MATRICES, ResultStore, StoredResult
from ..outputs.writers import ResultWriter, check_formats
from ..normalization.kernels import column_coverages
from ..params import ModelKind, method_spec
from ..progress import tick
from ..provenance import describe
from ..result import CNVDetectionResult
from ..data import CountData, validate_counts
from .cnmops import check_segment_args, warn_few_regions
from .methods import build_params
from .plan import RunPlan, method_cnvr
from .blocks import BlockTables, Genome, genome_of
from .stages import run_block
from .streamqc import QC_MATRICES, StreamQC, qc_width

log = logging.getLogger("gcnmops")

#: formats a streamed run writes besides matrices.zarr (the matrix formats hold every matrix in one file)
STREAM_FORMATS = ("bed", "vcf", "seg")
#: the stages of a streamed run's timings, in order: each one's own seconds (read and write on their threads,
#: overlapping the others)
STAGES = ("prepare", "read", "normalize", "model", "segment_call", "evidence", "integer", "write", "sample_qc",
          "finish")
#: the seconds the computing thread waited for the read-ahead and spent handing a chromosome to the background
#: writer (waiting for the one before, copying the rows around the CNVs): in the wall time
WAITS = ("read_wait", "write_wait")
#: what a chromosome reports to ``on_chromosome``
@dataclass(frozen=True)
class ChromosomeDone:
    """One chromosome streamed: its name, its index (from 0) of ``total``, its regions, the regions done so
    far of ``regions`` in all, and its seconds (waiting for its counts, computing it; its matrices are then
    written in the background)."""

    name: str
    index: int
    total: int
    rows: int
    rows_done: int
    regions: int
    seconds: float


def kept_matrices(keep, return_posterior: bool = False) -> list[str]:
    """The matrices a streamed run keeps: ``keep`` None/"all" (every one), "none" (only those always kept), or
    names of STREAM_MATRICES (comma-separated text or a list); ``integer_copy_number`` always."""
    names = [n for n in STREAM_MATRICES if n != "posterior_probs" or return_posterior]
    if keep is None or keep == "all" or keep == ["all"]:
        return names
    wanted = [k.strip() for k in (keep.split(",") if isinstance(keep, str) else keep) if k.strip()]
    wanted = [] if wanted == ["none"] else wanted
    unknown = [k for k in wanted if k not in STREAM_MATRICES]
    if unknown:
        import difflib

        hints = [f"{u!r}" + (f" (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(u, STREAM_MATRICES, n=1))
                             else "") for u in unknown]
        raise InputError(f"Unknown matrix {', '.join(hints)} to keep; choose from {', '.join(STREAM_MATRICES)}, "
                         "'all' or 'none'.")
    if "posterior_probs" in wanted and not return_posterior:
        raise InputError("posterior_probs can be kept only with return_posterior=True (--return-posterior).")
    return [n for n in names if n in wanted or n in ALWAYS_KEPT]


def stream_formats(formats) -> tuple[str, ...]:
    """The formats of a streamed run (default STREAM_FORMATS): the matrix formats and rds are refused."""
    formats = check_formats(STREAM_FORMATS if formats is None else formats)
    bad = [f for f in formats if f not in STREAM_FORMATS]
    if bad:
        raise InputError(f"A streamed run writes its matrices into {MATRIX_STORE} (choose them with --keep); "
                         f"format(s) {', '.join(bad)} need the whole result in memory: choose from "
                         f"{', '.join(STREAM_FORMATS)}.")
    return formats


def run_streaming(input, outdir, *, method: str = "cn.mops", keep=None, integer: bool = True, formats=None,
                  backend: str = "auto", devices=None, vcf: VcfOptions | None = None,
                  on_chromosome: Callable[[ChromosomeDone], None] | None = None, **params) -> StoredResult:
    """cn.mops on a chunked count store, chromosome by chromosome, with bounded memory; the result files under
    ``outdir`` (as ``gcnmops run``; the matrices in ``outdir/matrices.zarr``).

    Parameters
    ----------
    input : path
        a count store: a Zarr group written by ``gcnmops convert`` / :func:`gcnmops.distributed.save_counts`,
        or a Parquet table (seqnames, start, end + one column per sample); rows grouped by chromosome and
        sorted by start. Other inputs: ``gcnmops convert INPUT -o STORE`` first.
    outdir : path
        output folder: segmentation.tsv, cnvs.tsv, cnvr.tsv, sample_qc.tsv, params.json, the ``formats`` and
        matrices.zarr.
    method : {"cn.mops", "exome", "haplo"}
        the cohort method (its defaults).
    keep : None, "all", "none" or names
        the matrices kept in matrices.zarr (normalized_data, local_assessments, individual_call, ini_call,
        params_L, params_A, posterior_probs); integer_copy_number always. Default every one. (normalized_data
        and local_assessments are written during the run all the same, for the sample QC, and removed at its
        end where not kept.)
    integer : bool
        label CNVs with integer copy numbers (as ``gcnmops run``; default True).
    formats : list of str
        of bed, vcf, seg (default all three); the call tables and params.json are always written.
    backend : {"auto", "cpu", "gpu"}
        where every chromosome runs (the same answer).
    devices : None, "all", int or list of int
        on the GPU backend, the GPUs (default: device 0); with several, one thread per GPU takes the largest
        chromosome not yet taken, reads it and runs it there (the same answer; memory: a chromosome per GPU).
    vcf : VcfOptions
        how the VCF is written (contig lengths, reference, per-sample files).
    on_chromosome : callable
        called with a :class:`ChromosomeDone` after each chromosome (the CLI prints a progress line).
    **params
        the method's parameters, as for :func:`gcnmops.cn_mops` (seg_algorithm "fast" only).

    Returns
    -------
    StoredResult
        the tables (``sample_qc`` too) in memory, the matrices in the store (``matrix(name)``, ``compute()``);
        ``timings``: the seconds of each of STAGES (its own: read and write run beside the others), the
        computing thread's waits (WAITS) and ``total``, the wall time.

    Raises
    ------
    InputError
        bad parameters or input, before any work where they can be seen then.
    """
    t_start = time.perf_counter()
    timings = {stage: 0.0 for stage in STAGES + WAITS}
    row = method_spec(method)
    if row.model is not ModelKind.EM:
        raise InputError(f"Streaming runs the cohort methods (cn.mops, exome, haplo), not {row.name}: run "
                         f"--method {row.name} in memory (without --stream).")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cparams, _ = build_params(row.name, params)
    if cparams.seg_algorithm != "fast":
        raise InputError('A streamed run segments with seg_algorithm="fast" only (DNAcopy\'s random jitter runs across '
                         "chromosomes): run in memory for DNAcopy.")
    check_segment_args(cparams)
    formats = stream_formats(formats)
    kept = kept_matrices(keep, cparams.return_posterior)
    backend = resolve_backend(backend)
    store = open_count_store(input)
    m, N = store.shape
    warn_few_regions(m, stacklevel=2)
    gr = store.genomic_ranges()
    if "vcf" in formats:  # before the store is read: a VCF holds the regions, the reference every chromosome
        vcf = (vcf or VcfOptions()).checked(gr)
    budget = max(64 << 20, max(b1 - b0 for _, b0, b1 in store.blocks) * N * 8)
    plan = RunPlan.build(row, cparams, backend, m)
    genome = _genome(store, plan, budget)
    timings["prepare"] = time.perf_counter() - t_start

    writer = ResultWriter(outdir, formats)
    n = len(cparams.classes)
    scratch = [name for name in QC_MATRICES if name not in kept]  # written for the sample QC only
    shapes = _shapes(kept + scratch, m, N, n)
    attrs = {"sample_names": list(store.sample_names), "classes": list(cparams.classes), "kept": kept,
             "ranged": store.ranges is not None}
    rstore = None
    max_rows = max(b1 - b0 for _, b0, b1 in store.blocks)
    qc = StreamQC(m, N)
    qc_samples = qc_width(m, N, max_rows * N * 8)  # the sample QC's column groups: about the largest chromosome
    try:
        rstore = ResultStore(Path(outdir), shapes, attrs, gr, max_rows=max_rows, scratch=scratch, columns=qc_samples)
        tables = _stream(store, plan, genome, list(shapes), rstore, qc, integer, timings, on_chromosome, Path(outdir),
                         _devices(backend, devices))
        t0 = time.perf_counter()
        segmentation, cnvs, cnvr, evidence = tables
        result_params = cparams.r_params()
        result_params.update(cov=genome.cov, matrixStore=MATRIX_STORE)
        written = CNVDetectionResult(
            gr=gr, normalized_data=np.empty((0, 0)), local_assessments=np.empty((0, 0)),
            individual_call=np.empty((0, 0)), ini_call=np.empty(0), cn_index=np.empty((0, 0), np.int8),
            posterior_probs=None, params=dict(result_params, L=None, A=None),
            segmentation=segmentation, cnvs=cnvs, cnvr=cnvr, sample_names=list(store.sample_names),
            ranged=store.ranges is not None, call_evidence=evidence,
            provenance=describe(backend, inputs=[input] if isinstance(input, (str, os.PathLike)) else None))
        written.sample_qc = qc.table(written, store, rstore, qc_samples, backend)
        timings["sample_qc"] = time.perf_counter() - t0
        t0 = time.perf_counter()

        def publish(sizes):
            rstore.publish()
            return ()

        try:
            writer.finish(written, extra=publish, vcf=vcf)
        except BaseException:
            rstore.unpublish()
            raise
        rstore.drop_old()
        timings["finish"] = time.perf_counter() - t0
    except BaseException:
        with signals_held():  # a second Ctrl-C / SIGTERM would leave files behind
            if rstore is not None:
                rstore.abort()  # once its background writer has stopped
            writer.abort()  # last: the folder this run made goes too, left empty
        raise
    timings["total"] = time.perf_counter() - t_start
    if not integer or not len(cnvr):
        cnvr = method_cnvr(row, cnvr, cnvs, list(store.sample_names))
    return StoredResult.of_store(str(Path(outdir) / MATRIX_STORE), kept, gr=gr, params=result_params,
                                 segmentation=segmentation, cnvs=cnvs, cnvr=cnvr,
                                 sample_names=list(store.sample_names), ranged=store.ranges is not None,
                                 timings=timings, sample_qc=written.sample_qc)


def _devices(backend: Backend, devices) -> list[int] | None:
    """The GPU ids ``devices`` names on the GPU backend (cuda.probe.device_ids); None on the CPU or when not given."""
    return device_ids(devices) if backend is Backend.GPU and devices is not None else None


def _genome(store: CountStore, plan: RunPlan, budget: int) -> Genome:
    """The cross-chromosome quantities: the genome's column sums (normalization), the coverages (norm=2)."""
    N = store.shape[1]
    colsums = store.exact_col_sums(budget) if plan.normalizes else None
    stats = None
    if plan.uses_coverage:
        parts = []
        for c0, c1 in store.column_groups(budget):
            x = validate_counts(store.columns(c0, c1), sample_names=store.sample_names[c0:c1], ranges=store.ranges)
            parts.append(column_coverages(x))
            tick(c1, N)
        stats = np.concatenate(parts)
    return genome_of(plan.normalizes, plan.uses_coverage, N, colsums, stats)


def _shapes(kept: list[str], m: int, N: int, n: int) -> dict:
    every = {"normalized_data": ((m, N), "f8"), "local_assessments": ((m, N), "f8"), "individual_call": ((m, N), "f8"),
             "integer_copy_number": ((m, N), "i1"), "ini_call": ((m,), "f8"), "params_L": ((m, n), "f8"),
             "params_A": ((m, n), "f8"), "posterior_probs": ((m, n, N), "f8")}
    return {name: every[name] for name in kept}


def _stream(store: CountStore, plan: RunPlan, genome: Genome, stored: list[str], rstore: ResultStore, qc: StreamQC,
            integer: bool, timings: dict, on_chromosome, outdir: Path, devices: list[int] | None = None
            ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, CallEvidence | None]:
    """Every chromosome through the pipeline, its matrices ``stored`` written behind (see the module docstring),
    its window medians put into ``qc``; the call tables (integer labels where asked) and their qualities'
    evidence. One device (``devices`` None or one id): in this thread, the next chromosome read ahead. Several:
    one thread per device taking the largest chromosome not yet taken, its next one read ahead (``_on_devices``)."""
    blocks = store.blocks
    m = store.shape[0]
    labelled = [False] * len(blocks)
    hand = threading.Lock()  # one chromosome at a time handed to the writer, the tables and the progress
    done = [0]

    def compute(held: list, own: dict, **fit_options) -> CNVDetectionResult:
        result = run_block(plan, held, genome=genome, timings=own, **fit_options)
        if integer and len(result.cnvr):
            t1 = time.perf_counter()
            result = calc_integer_copy_numbers(result, backend=plan.backend)
            own["integer"] += time.perf_counter() - t1
        return result

    def finish(k: int, result: CNVDetectionResult, t0: float) -> None:
        name, a, b = blocks[k]
        qc.put(a, b, result)
        with hand:
            t1 = time.perf_counter()  # the writer holds the kept matrices only, not the whole result
            matrices = {key: _matrix(result, key) for key in stored}
            rstore.write_behind(partial(_write, rstore, matrices, a, b, timings, outdir))
            del matrices
            timings["write_wait"] += time.perf_counter() - t1
            gathered.put(k, result)
            labelled[k] = integer and len(result.cnvr) > 0
            done[0] += b - a
            tick(done[0], m)
            if on_chromosome is not None:
                on_chromosome(ChromosomeDone(name, k, len(blocks), b - a, done[0], m, time.perf_counter() - t0))

    gathered = BlockTables(len(blocks), list(store.sample_names), plan.segments).__enter__()
    try:
        if devices is not None and len(devices) > 1:
            _on_devices(store, plan, devices, compute, finish, timings, qc)
        elif devices is None:
            _in_order(store, compute, finish, timings, {}, qc)
        else:  # one GPU named: made the thread's current device, as a device thread of several does
            with on_device(devices[0]):
                _in_order(store, compute, finish, timings, {"devices": devices}, qc)
        t1 = time.perf_counter()
        rstore.wait()
        timings["write_wait"] += time.perf_counter() - t1
    finally:
        gathered.__exit__()
    if integer and any(labelled):  # chromosomes without CNVs: their segments labelled as calc_integer_copy_numbers does
        rparams = plan.params.r_params()
        gathered.segmentation = [s if done_ else segment_labels(s, rparams)
                                 for s, done_ in zip(gathered.segmentation, labelled)]
    return (*gathered.tables(), gathered.call_evidence())


def _in_order(store: CountStore, compute, finish, timings: dict, fit_options: dict, qc: StreamQC) -> None:
    """The chromosomes in order in this thread, the next one read ahead on a thread of its own (two chromosomes'
    counts at most)."""
    order = iter(range(len(store.blocks)))
    _read_ahead(store, lambda: next(order, None),
                lambda k, held, t0: finish(k, compute(held, timings, **fit_options), t0), timings, qc)


def _on_devices(store: CountStore, plan: RunPlan, devices: list[int], compute, finish, timings: dict,
                qc: StreamQC) -> None:
    """The chromosomes on every GPU of ``devices``: a thread per device (the thread's current device, a memory pool
    and its share of the cores, as pipeline.multigpu's) takes the largest chromosome not yet taken and runs it
    there while its reader thread reads the next one it has taken; a device's error stops the others taking
    more. Memory: per device two chromosomes' counts (the one running, the one read ahead) and a result, and the
    one being written. ``timings``: each stage and wait the slowest device's seconds."""
    blocks = store.blocks
    taken = iter(sorted(range(len(blocks)), key=lambda k: blocks[k][1] - blocks[k][2]))  # largest first, stable
    take = threading.Lock()
    failed = threading.Event()
    share = max(1, numba.get_num_threads() // len(devices))
    own_of = {d: {stage: 0.0 for stage in STAGES + WAITS} for d in devices}

    def take_next():
        with take:
            return None if failed.is_set() else next(taken, None)

    def work(device: int) -> None:
        own = own_of[device]
        try:
            numba.set_num_threads(share)
            with on_device(device), thread_memory_pool() if plan.backend is Backend.GPU else contextlib.nullcontext():
                _read_ahead(store, take_next, lambda k, held, t0: finish(k, compute(held, own, devices=[device]), t0),
                            own, qc, f"gcnmops-readahead{device}")
        except BaseException:
            failed.set()
            raise

    in_threads({f"gcnmops-stream-gpu{d}": (lambda d=d: work(d)) for d in devices})
    for stage in ("read", "normalize", "model", "segment_call", "integer", "read_wait"):
        timings[stage] += max(own[stage] for own in own_of.values())


def _read_ahead(store: CountStore, take, run, timings: dict, qc: StreamQC, name: str = "gcnmops-readahead") -> None:
    """Each chromosome ``take()`` gives (its index in ``store.blocks``; None: no more) through ``run(k, held, t0)``
    (``held``: a list holding its CountData, for run_block to empty; ``t0``: when the wait for it began), the next
    one read meanwhile on a reader thread of its own (``name``). ``timings`` gain "read" and "read_wait"."""
    reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def submit():
        k = take()
        return None if k is None else (k, reader.submit(_read, store, store.blocks[k], timings, qc))

    try:
        ahead = submit()
        while ahead is not None:
            t0 = time.perf_counter()
            k, held = ahead[0], [ahead[1].result()]  # emptied by run_block: the counts go once no stage needs them
            timings["read_wait"] += time.perf_counter() - t0
            ahead = submit()  # the done read (which holds the counts too) let go
            run(k, held, t0)
    finally:
        reader.shutdown(wait=False, cancel_futures=True)  # after a failure: a read under way is left to end


def _read(store: CountStore, block: tuple[str, int, int], timings: dict, qc: StreamQC) -> CountData:
    """One chromosome's counts (the read-ahead thread), tallied into ``qc`` (the samples' coverage)."""
    t0 = time.perf_counter()
    data = store.chromosome(*block)
    qc.tally(block[1], data.counts)
    timings["read"] += time.perf_counter() - t0
    return data


def _write(rstore: ResultStore, matrices: dict, a: int, b: int, timings: dict, outdir: Path) -> None:
    """One chromosome's kept ``matrices`` (rows a:b) into the result store (on the store's background writer); a
    full disk or an unwritable folder as the InputError saying so."""
    t0 = time.perf_counter()
    try:
        for key, value in matrices.items():
            rstore.write(key, a, b, value)
    except OSError as err:
        raise output_error(err, outdir) from None
    finally:
        timings["write"] += time.perf_counter() - t0


def _matrix(result: CNVDetectionResult, name: str) -> np.ndarray:
    if name.startswith("params_"):
        return result.params[name[len("params_"):]]
    return result.cn_index if name == "integer_copy_number" else getattr(result, name)


__all__ = ["run_streaming", "kept_matrices", "stream_formats", "ChromosomeDone", "STREAM_FORMATS", "STAGES", "WAITS"]
