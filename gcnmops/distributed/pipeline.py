"""cn_mops on a Dask cluster: blocks of whole chromosomes through the stage order (pipeline.stages.run_block).

This package only chooses the blocks and where they run; the stages and the rules between them are the
pipeline's (RunPlan, run_block), as in every other path:

1. first pass (genome.py): every count checked, and what crosses chromosomes (pipeline.blocks.Genome: each
   sample's total count, norm=2's coverages; referencecn.mops: the controls' too) from the whole input;
2. blocks (layout.py): whole chromosomes, small consecutive ones merged, given to the scheduler largest first;
   each task reads its rows, builds the run's plan on its worker (the backend resolved there: a dask-cuda
   worker's GPU) and runs ``run_block`` with the genome, its matrices written into the run's store (the model's
   while the segmentation runs) and returns its call tables (and their qualities' evidence, calls.quality.CallEvidence);
3. client: the call tables of the blocks (and the evidence) joined in row order (cn.mops's CNVs and CNV regions
   never cross a chromosome), the result's matrices read from the store.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..calls.qc import sample_qc, window_medians
from ..compat import keep_numba_threads
from ..cuda.probe import BACKENDS, Backend, resolve_backend
from ..cuda.runtime import thread_memory_pool
from ..data import CountData, validate_counts
from ..errors import InputError
from ..normalization import normalize
from ..normalization.checks import check_norm_args
from ..params import CnMopsParams, Method, ModelKind, method_spec
from ..pipeline.blocks import BlockTables, Genome, genome_of
from ..pipeline.cnmops import check_segment_args, warn_few_regions
from ..pipeline.family import check_same_regions, log_note, read_named_counts, read_single_sample
from ..pipeline.methods import build_params
from ..pipeline.plan import RunPlan
from ..pipeline.stages import MODEL_DONE, evidence_of, run_block
from ..pipeline.streamqc import CoverageTally, column_stats
from .cluster import Runner, chunk_bytes_for, resolve_client, task_threads
from .genome import first_pass
from .layout import TASKS_PER_GPU_WORKER, TASKS_PER_THREAD, Layout, plan_layout
from .result import DistributedResult, matrices_of
from .store import Matrix, WorkStore, open_matrix, read_part, work_store

log = logging.getLogger("gcnmops")


@dataclass(frozen=True)
class BlockJob:
    """What every block task of a run does: the run's ``method``, ``params`` and ``n_regions`` (its plan is built
    on the worker, ``backend`` resolved there), the ``genome``, the names, where the matrices go (``store``) and
    their ``chunks`` (rows, samples); ``sample_qc``: each block gives what the sample QC needs of it (its counts'
    tally, its windows' medians)."""

    method: Method
    params: CnMopsParams
    backend: str
    n_regions: int
    genome: Genome
    sample_names: list
    control_names: list | None
    store: WorkStore
    chunks: tuple[int, int]
    sample_qc: bool = False


def run_chromosomes(job: BlockJob, block: int, counts, controls, ranges: pd.DataFrame | None) -> dict:
    """One block of whole chromosomes through the stage order (``counts``/``controls``: its rows, see
    store.read_part; ``ranges``: its regions): the matrices written into the store as block ``block``; returns
    the call tables and their qualities' evidence, the coverages the result records, the stages' seconds, the
    GPU's statistics and, for the sample QC (``job.sample_qc``), the windows' medians and the tally of its counts."""
    plan = RunPlan.build(job.method, job.params, job.backend, job.n_regions)
    held = [CountData(validate_counts(read_part(counts), sample_names=job.sample_names, ranges=ranges),
                      list(job.sample_names), ranges)]
    ctrl = None if controls is None else CountData(validate_counts(read_part(controls)), list(job.control_names),
                                                   ranges)
    timings: dict = {}
    tally = CoverageTally.of_block(held[0].counts) if job.sample_qc else None  # before run_block empties ``held``
    gpu = plan.backend is Backend.GPU  # a worker's task threads share its GPU: each task its own memory pool
    rows, k = job.chunks
    staged: dict[str, tuple[object, Future]] = {}  # matrix name -> (its array, its write)
    with ThreadPoolExecutor(1, thread_name_prefix="gcnmops-block-write") as behind:

        def model_done(part) -> None:  # the model's matrices are written while the segmentation runs
            for name, spec in matrices_of(part, rows, k).items():
                staged[name] = (spec[0], behind.submit(job.store.write, name, block, *spec))

        token = MODEL_DONE.set(model_done)
        try:
            with task_threads(), thread_memory_pool() if gpu else contextlib.nullcontext():
                result = run_block(plan, held, controls=ctrl, genome=job.genome, timings=timings, evidence=False)
                # the calls' evidence for their qualities made while the block's last matrices are written
                aside = ThreadPoolExecutor(1, thread_name_prefix="gcnmops-block-evidence",
                                           initializer=keep_numba_threads())
        finally:
            MODEL_DONE.reset(token)
        del ctrl
        with aside:
            evidence = aside.submit(evidence_of, result, timings)
            for name, spec in matrices_of(result, rows, k).items():
                if staged.get(name, (None,))[0] is not spec[0]:
                    job.store.write(name, block, *spec)
            for _, write in staged.values():
                write.result()
            call_evidence = evidence.result()
    return {"segmentation": result.segmentation, "cnvs": result.cnvs, "cnvr": result.cnvr,
            "call_evidence": call_evidence, "cov": result.params["cov"], "timings": timings,
            "gpu_stats": result.gpu_stats, "tally": tally,
            "window_medians": window_medians(result.normalized_data) if job.sample_qc else None}


def cn_mops(
    input,
    client=None,
    *,
    method: str = "cn.mops",
    controls=None,
    sample_names=None,
    ranges=None,
    store=None,
    keep_work: bool = False,
    backend: str = "auto",
    chunk_bytes: int | None = None,
    rows_per_chunk: int | None = None,
    samples_per_chunk: int | None = None,
    numba_threads="auto",
    sample_qc: bool = True,
    **params,
) -> DistributedResult:
    """cn.mops (or a family member) on a Dask cluster; the same result as the single-process run, bit for bit.

    ``input``: a Dask array (regions x samples; any chunks; rows of a chromosome contiguous), a Zarr
    array/group path (see :func:`save_counts`), an ``.npy`` path, or anything :func:`gcnmops.read_counts`
    reads. ``client``: a ``distributed.Client`` (LocalCluster, dask-jobqueue, dask-kubernetes, dask-cuda, or a
    scheduler's address); None: the current client, else this process; False: this process. ``method``:
    cn.mops, exome, haplo, reference (``controls`` = the control samples, same regions), single.
    ``sample_names``, ``ranges`` (seqnames, start, end): for a Dask array / bare matrix. ``store``: folder the
    workers write the result's matrices into, visible to every worker and kept (the result reads it); default a
    new temporary ``gcnmops-dask-*`` folder (a LocalCluster's), read into this process and removed at the end of
    the run (``keep_work=True``: kept, the result reading it). ``backend``: "cpu", "gpu" or "auto", resolved on
    each worker (dask-cuda: its GPU). ``chunk_bytes``: counts per task where small chromosomes are merged into
    one block and per column group of the first pass (default from the workers' memory limit);
    ``rows_per_chunk`` (also the rows per task of the first pass) x ``samples_per_chunk``: the stored matrices'
    chunks. ``numba_threads``: numba threads per task ("auto": each host's cores shared among its workers).
    ``sample_qc``: the result carries the per-sample QC (``calls.qc.sample_qc``, as ``gcnmops run`` writes it:
    sample_qc.tsv), made here from the counts and the stored matrices a group of sample columns at a time.
    ``params``: the method's keyword arguments (cn.mops's, snake_case), as for the single-process functions.

    Every task holds whole chromosomes (cn.mops normalizes and segments per chromosome): a worker needs memory
    for its largest chromosome's counts and results at once.

    Returns a :class:`DistributedResult` (Dask arrays over the matrices + pandas tables).
    """
    t_start = time.perf_counter()
    timings: dict = {}
    method_row, cparams, extra = _run_params(method, backend, params)
    log_note(method_row, extra.get("verbose", 1))
    runner = Runner(resolve_client(client))
    runner.set_numba_threads(numba_threads)
    t0 = time.perf_counter()
    cases, ctrl = _open_inputs(method_row, input, controls, sample_names, ranges)
    m, N = cases.shape
    warn_few_regions(m, stacklevel=2)
    # the rules on the client (what crosses chromosomes, cnvr's shape); each block's plan is built on its worker
    plan = RunPlan.build(method_row, cparams, Backend.CPU, m)
    gpu = runner.all_on_gpu(backend)
    if chunk_bytes is None:
        chunk_bytes = chunk_bytes_for(*runner.worker_memory(), gpu=gpu)
    n_columns = N + (ctrl.shape[1] if ctrl is not None else 0)
    tasks = runner.workers() * TASKS_PER_GPU_WORKER if gpu else runner.total_threads() * TASKS_PER_THREAD
    layout = plan_layout(cases.count_data_stub().blocks(), n_columns, N, chunk_bytes=chunk_bytes,
                         tasks=tasks, rows_per_chunk=rows_per_chunk,
                         samples_per_chunk=samples_per_chunk or (
                             _qc_width(m, N, chunk_bytes) if sample_qc else None))
    genome = _genome(runner, plan, [cases] + ([ctrl] if ctrl is not None else []),
                     rows_per_chunk or max(1024, chunk_bytes // (8 * n_columns)), chunk_bytes, samples_per_chunk)
    timings["read"] = time.perf_counter() - t0
    log.info(f"gcnmops distributed: {m:,} regions x {N} samples in {len(layout.blocks)} blocks of whole "
             "chromosomes")
    work = work_store(store, keep_work)
    try:
        job = BlockJob(method_row, cparams, backend, m, genome, list(cases.sample_names),
                       None if ctrl is None else list(ctrl.sample_names), work, (layout.rows, layout.samples),
                       sample_qc)
        names = list(cases.sample_names)
        gathered = BlockTables(len(layout.blocks), names, plan.segments)
        t0 = time.perf_counter()
        with gathered:  # the blocks' "No CNVs" messages held back while they run here
            parts = _run_blocks(runner, job, layout, cases, ctrl)
        timings["blocks"] = time.perf_counter() - t0
        for stage in ("normalize", "model", "segment_call", "evidence"):  # seconds of every task together
            timings[stage] = sum(p["timings"].get(stage, 0.0) for p in parts)
        for k, p in enumerate(parts):
            gathered.put_tables(k, p["segmentation"], p["cnvs"], p["cnvr"], p["call_evidence"])
        segmentation, cnvs, cnvr = gathered.tables()
        result_params = cparams.r_params()
        result_params["cov"] = parts[0]["cov"]
        t0 = time.perf_counter()
        result = DistributedResult.of_store(
            work, layout, gr=cases.count_data_stub().genomic_ranges(), params=result_params,
            segmentation=segmentation, cnvs=cnvs, cnvr=plan.method_cnvr(cnvr, cnvs, names), sample_names=names,
            ranged=cases.ranges is not None, posteriors=cparams.return_posterior, timings=timings,
            call_evidence=gathered.call_evidence())
        timings["collect"] = time.perf_counter() - t0
        if sample_qc:
            t0 = time.perf_counter()
            counts = CoverageTally(m, N)
            for (b0, b1), p in zip(layout.blocks, parts):
                counts.merge(b0, b1 - b0, p["tally"])
            result.sample_qc = _sample_qc(runner, job, layout, result, cases,
                                          np.concatenate([p["window_medians"] for p in parts]), chunk_bytes,
                                          counts.coverage(names))
            timings["qc"] = time.perf_counter() - t0
    finally:
        if work.temporary:
            work.remove()
    timings["total"] = time.perf_counter() - t_start
    return result


def _sample_qc(runner: Runner, job: BlockJob, layout: Layout, result: DistributedResult, cases: Matrix,
               medians: np.ndarray, chunk_bytes: int, coverage: pd.DataFrame | None) -> pd.DataFrame:
    """The run's sample QC (calls.qc.sample_qc): each group of sample columns (``chunk_bytes`` of float64 a
    matrix, whole chunks of the store where that holds one) summarized by a task (``qc_columns``) on a worker,
    only the statistics sent back. ``coverage``: the samples' coverage where the blocks' tallies give it (the
    tasks then do not read the counts)."""
    names = list(cases.sample_names)
    step = _qc_width(layout.m, len(names), chunk_bytes)
    if step >= layout.samples:
        step -= step % layout.samples
    groups = [(c, min(len(names), c + step)) for c in range(0, len(names), step)]
    placed = runner.place(medians)
    tasks = [QCGroup(c0, c1, names[c0:c1], coverage=coverage.iloc[c0:c1].reset_index(drop=True))
             if coverage is not None else
             QCGroup(c0, c1, names[c0:c1], counts=_placed(runner, cases, slice(None), slice(c0, c1)))
             for c0, c1 in groups]
    parts = runner.run(qc_columns, [(job.store, len(layout.blocks), job.backend, group, placed) for group in tasks])
    return sample_qc(result, pd.concat([c for c, _ in parts], ignore_index=True), (),
                     np.concatenate([s for _, s in parts]))


def _qc_width(m: int, n: int, chunk_bytes: int) -> int:
    """Samples per sample-QC task: ``chunk_bytes`` of float64 columns of ``m`` regions (within 1..``n``); the
    store's sample chunks are as wide unless given, so that each task reads whole chunks, each chunk once."""
    return max(1, min(n, chunk_bytes // (8 * max(1, m))))


@dataclass(frozen=True)
class QCGroup:
    """A sample-QC task's samples: columns c0:c1, named ``names``, with their read counts (``counts``: those
    columns as store.read_part takes them) or, where the blocks' tallies give it, their ``coverage`` (a table)."""

    c0: int
    c1: int
    names: list
    counts: object = None
    coverage: pd.DataFrame | None = None


def qc_columns(store: WorkStore, blocks: int, backend: str, group: QCGroup, medians: np.ndarray
               ) -> tuple[pd.DataFrame, np.ndarray]:
    """The ``group``'s part of the sample QC (pipeline.streamqc.column_stats: their coverage and spreads) from
    its counts or coverage and the normalized data and sINI of the store's first ``blocks`` blocks, the log2
    ratios against ``medians`` (m,); the spreads on the worker's ``backend``."""
    on = resolve_backend(backend)
    c0, c1 = group.c0, group.c1
    with task_threads(), thread_memory_pool() if on is Backend.GPU else contextlib.nullcontext():
        return column_stats(group.names, len(group.names), medians, lambda a, b: read_part(group.counts),
                            lambda a, b: store.columns("normalized_data", blocks, c0, c1),
                            lambda a, b: store.columns("local_assessments", blocks, c0, c1), on, group.coverage)


def _run_params(method, backend: str, params: dict) -> tuple[Method, CnMopsParams, dict]:
    """(the method's row of the table, its validated parameters, its options such as ``verbose``); the
    distributed pipeline segments with the fast algorithm only (a warning for any other: DNAcopy's random
    jitter runs across chromosomes)."""
    method_row = method_spec(method)
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}.")
    cparams, extra = build_params(method_row.name, params)
    if cparams.seg_algorithm != "fast":
        warnings.warn(f"segAlgorithm {cparams.seg_algorithm!r} is not available in the distributed pipeline: "
                      'using the fast segmentation (seg_algorithm="fast").', RuntimeWarning, stacklevel=3)
        cparams = dataclasses.replace(cparams, seg_algorithm="fast")
    check_segment_args(cparams)
    return method_row, cparams, extra


def _genome(runner: Runner, plan: RunPlan, matrices: list[Matrix], rows: int, chunk_bytes: int,
            samples: int | None) -> Genome:
    """Every count checked (``rows`` per task); the Genome of the run (its columns: the cases', then the
    controls')."""
    sums, stats = [], []
    for matrix in matrices:
        s, c = first_pass(runner, matrix, sums=plan.normalizes, coverage=plan.uses_coverage, rows=rows,
                          chunk_bytes=chunk_bytes, samples=samples)
        sums.append(s)
        stats.append(c)
    n = sum(matrix.shape[1] for matrix in matrices)
    return genome_of(plan.normalizes, plan.uses_coverage, n, np.concatenate(sums) if plan.normalizes else None,
                     np.concatenate(stats) if plan.uses_coverage else None)


def _run_blocks(runner: Runner, job: BlockJob, layout: Layout, cases: Matrix, ctrl: Matrix | None) -> list[dict]:
    """Every block through ``run_chromosomes``, the largest first; their answers in row order."""
    calls, sizes = [], []
    for k, (b0, b1) in enumerate(layout.blocks):
        rows = slice(b0, b1)
        ranges = None if cases.ranges is None else runner.place(cases.ranges.iloc[rows].reset_index(drop=True))
        calls.append((job, k, _placed(runner, cases, rows), None if ctrl is None else _placed(runner, ctrl, rows),
                      ranges))
        sizes.append(b1 - b0)
    return runner.run(run_chromosomes, calls, priorities=sizes)


def _placed(runner: Runner, matrix: Matrix, rows: slice, cols: slice = slice(None)):
    """Rows and columns of ``matrix`` as a task takes them: a file's selection, a Dask array's part, or the part
    of a matrix in this process sent to the workers."""
    part = matrix.part(rows, cols)
    return runner.place(np.asfortranarray(part)) if matrix.in_memory else part


def normalize_chromosomes(input, client=None, *, chromosomes=None, norm_type: str = "poisson",
                          size_factor: str = "mean", qu: float = 0.25, qu_size_factor: float = 0.75, store=None,
                          keep_work: bool = False, chunk_bytes: int | None = None, rows_per_chunk: int | None = None,
                          samples_per_chunk: int | None = None, numba_threads="auto"):
    """cn.mops ``normalizeChromosomes`` on a Dask cluster: :func:`gcnmops.normalize_chromosomes`'s result (bit for
    bit) as a Dask array (regions x samples, float64), each block of whole chromosomes normalized on a worker with
    the samples' totals over the whole matrix (``normalization.normalize``). ``input``: as for :func:`cn_mops` (one
    sample or more); ``chromosomes``: the chromosome of every row (rows of a chromosome contiguous), default one
    chromosome. ``store``, ``keep_work``: as for :func:`cn_mops` (the array reads a kept store; else it is in
    this process). Other arguments as :func:`cn_mops` and :func:`gcnmops.normalize_chromosomes`."""
    args = dict(zip(("norm_type", "size_factor", "qu", "qu_size_factor"),
                    check_norm_args(norm_type, size_factor, qu, qu_size_factor)))
    runner = Runner(resolve_client(client))
    runner.set_numba_threads(numba_threads)
    ranges = None
    if chromosomes is not None:
        chrom = np.asarray(chromosomes, dtype=object).ravel()
        idx = np.arange(1, chrom.size + 1)
        ranges = pd.DataFrame({"seqnames": chrom, "start": idx, "end": idx})
    matrix = open_matrix(input, ranges=ranges, min_samples=1)
    m, n = matrix.shape
    if chunk_bytes is None:
        chunk_bytes = chunk_bytes_for(*runner.worker_memory())
    layout = plan_layout(matrix.count_data_stub().blocks(), n, n, chunk_bytes=chunk_bytes,
                         tasks=runner.total_threads() * TASKS_PER_THREAD, rows_per_chunk=rows_per_chunk,
                         samples_per_chunk=samples_per_chunk)
    colsums, _ = first_pass(runner, matrix, sums=True, coverage=False,
                            rows=rows_per_chunk or max(1024, chunk_bytes // (8 * n)), chunk_bytes=chunk_bytes,
                            samples=samples_per_chunk)
    work = work_store(store, keep_work)
    try:
        chrom = matrix.count_data_stub().chromosomes
        calls = [(work, k, _placed(runner, matrix, slice(b0, b1)), chrom[b0:b1], colsums, args,
                  (layout.rows, layout.samples)) for k, (b0, b1) in enumerate(layout.blocks)]
        runner.run(normalize_block, calls, priorities=[b1 - b0 for b0, b1 in layout.blocks])
        return DistributedResult.matrix_of_store(work, layout, "normalized_data")
    finally:
        if work.temporary:
            work.remove()


def normalize_block(store: WorkStore, block: int, counts, chrom: np.ndarray, colsums: np.ndarray, args: dict,
                    chunks: tuple[int, int]) -> None:
    """One block of whole chromosomes normalized (the genome's ``colsums``) into the store as block ``block``."""
    with task_threads():
        y = normalize(validate_counts(read_part(counts)), chrom, colsums=colsums, **args)
    store.write("normalized_data", block, y, chunks, compress=False)


def _open_inputs(method_row: Method, input, controls, sample_names, ranges) -> tuple[Matrix, Matrix | None]:
    """The cases (or the one sample) and the controls of the method, read and checked as its entry point
    does (pipeline.family's readers)."""
    if method_row.model is ModelKind.REFERENCE:
        if controls is None:
            raise InputError("method 'reference' needs controls= (the control samples' counts, same regions).")
        cases = open_matrix(input, sample_names=_names_or(sample_names, input, "Case"), ranges=ranges,
                            min_samples=1, reader=lambda o: read_named_counts(o, "Case", "cases"), what="cases")
        ctrl = open_matrix(controls, sample_names=_names_or(None, controls, "Control"), ranges=ranges,
                           min_samples=1, reader=lambda o: read_named_counts(o, "Control", "controls"),
                           what="controls")
        check_same_regions(cases.count_data_stub(), ctrl.count_data_stub())
        return cases, ctrl
    if controls is not None:
        raise InputError("controls= is only for method 'reference'.")
    if method_row.model is ModelKind.SINGLE:
        single = open_matrix(input, sample_names=sample_names, ranges=ranges, min_samples=1,
                             reader=read_single_sample)
        if single.shape[1] != 1:
            raise InputError(f"More than one sample detected ({single.shape[1]} sample columns). Use standard "
                             "cn.mops (method 'cn.mops') for a cohort.")
        return single, None
    return open_matrix(input, sample_names=sample_names, ranges=ranges), None


def _names_or(names, obj, prefix):
    """Sample names for a Dask array without names: <prefix>_1, ... (as the family names them)."""
    if names is not None or not (hasattr(obj, "chunks") or isinstance(obj, np.ndarray)):
        return names
    if getattr(obj, "ndim", 0) == 1:
        return [f"{prefix}_1"]
    return [f"{prefix}_{k + 1}" for k in range(int(obj.shape[1]))]


__all__ = ["cn_mops", "normalize_chromosomes", "run_chromosomes", "normalize_block", "qc_columns", "QCGroup",
           "BlockJob"]
