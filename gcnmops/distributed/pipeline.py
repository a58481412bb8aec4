"""cn_mops on a Dask cluster: read -> normalize -> model -> segment -> call, the matrix in chunks.

Stages (each a list of tasks; matrices pass through the working Zarr store, tasks return small things):

1. read (row chunks): the input's rows are checked (cn.mops's count checks) and staged in the store,
   with the per-row / per-sample flags normalization needs;
2. normalize (statistics): see ``distributed/normalize.py`` (per chromosome and sample, exactly);
3. model (row chunks; regions are independent): each task normalizes its rows and fits them with the
   engine's model (``model.fit`` on the CPU or the worker's GPU; the one-step model of referencecn.mops /
   singlecn.mops), writing normalized data, lambda, alpha, sINI, CN, INI (and posteriors);
4. segment (sample groups; whole chromosomes per sample): ``segment.segment_columns`` (or the GPU
   segmentation) on the group's sINI columns, individual calls written back;
5. call (client): the segment tables of all groups, in the single-process order, through
   ``calls.calls_from_segments`` (segmentation, CNVs, CNV regions).
"""
from __future__ import annotations

import dataclasses
import logging
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..calls.cnvs import MIN_REGIONS_TO_SEGMENT, calls_from_segments, fill_by_segment
from ..cuda.probe import BACKENDS, resolve_backend
from ..data import chromosome_blocks
from ..errors import InputError
from ..model import fit, fit_one_step
from ..params import CnMopsParams, Method, ModelKind, method_spec
from ..pipeline.cnmops import warn_few_regions
from ..pipeline.family import check_same_regions, log_note, read_named_counts, read_single_sample
from ..pipeline.methods import build_params
from ..pipeline.plan import method_cnvr, model_spec, reference_lambda
from ..progress import timed_stage
from ..segmentation import segment_blocks
from ..result import empty_cnvr, empty_segments
from .cluster import Runner, chunk_bytes_for, resolve_client, task_threads
from .layout import TASKS_PER_THREAD, Layout, plan_layout
from .normalize import NormArgs, RowFlags, plan_coverage, plan_normalization, read_view, scale_rows
from .result import DistributedResult
from .store import Matrix, WorkStore, open_matrix, read_source_rows, work_store

log = logging.getLogger("gcnmops")
#: the temporary stores of normalize_chromosomes' arrays, removed at exit
_UNTIL_EXIT: list[WorkStore] = []


# ------------------------------------------------------------------------------------------------ tasks
def stage_rows(store: WorkStore, name: str, a: int, b: int, block, source: tuple | None = None) -> dict:
    """Rows a:b of matrix ``name`` (``block``, or read from ``source``, a Zarr/npy file; both None: already in
    the store): checked (finite, non-negative), written to the store as float64, and their normalization
    flags (see normalize.RowFlags)."""
    if source is not None:
        block = read_source_rows(source, a, b)
    if block is None:
        y = store.read(name, (slice(a, b), slice(None)))
    else:
        y = np.asarray(block)
        if not (np.issubdtype(y.dtype, np.number) or y.dtype == bool):
            raise InputError(f"The read count matrix contains non-numeric values (rows {a + 1}-{b}); every "
                             "count must be a number.")
        y = np.asfortranarray(y, dtype=np.float64)
        store.write(name, (slice(a, b), slice(None)), y)
    out = {"below_one": (y < 1).all(axis=1), "nonzero": (y != 0).any(axis=1), "col_nonzero": (y != 0).any(axis=0)}
    for key, bad in (("nonfinite", ~np.isfinite(y)), ("negative", y < 0)):
        if bad.any():
            r, c = np.argwhere(bad)[0]
            out[key] = (int(bad.sum()), a + int(r), int(c))
    return out


@dataclass(frozen=True)
class ModelJob:
    """What every model row task does. ``kind``: the method's model (params.Method.model): "em" (cn.mops,
    exome, haplo), "reference", "single"; ``view``: the matrices normalized together [(name, columns)]
    (empty: no normalization); ``model_cov`` (N,): the coverages the model sees; ``result_cov``: the result's
    ``params['cov']`` (haplocn.mops records the coverages, the model sees 1); ``controls_cov``:
    referencecn.mops norm=2 divides the controls by these; ``backend``: as given ("auto" too), resolved by
    each task on its worker."""

    kind: ModelKind
    norm: int
    n_cases: int
    view: tuple
    spec: object
    model_cov: np.ndarray
    result_cov: np.ndarray
    controls_cov: np.ndarray | None
    keep_post: bool
    backend: str
    write_normalized: bool


def model_rows(store: WorkStore, job: ModelJob, a: int, b: int, pieces: list, factors: dict, silent_rows,
               lam_rows) -> int:
    """Rows a:b: normalize, fit, write normalized data and the model's outputs to the store. The job's backend
    ("auto" too) is resolved here, once per task, on the worker that runs it (dask-cuda: its GPU)."""
    backend = resolve_backend(job.backend)
    rows = slice(a, b)
    with task_threads():
        counts = store.read("counts", (rows, slice(None))) if not job.view or job.norm != 1 else None
        normalized, controls = counts, None
        if job.view:
            y = scale_rows(read_view(store, list(job.view), a, b), pieces, factors, silent_rows)
            normalized = np.asfortranarray(y[:, :job.n_cases])
            if job.kind is ModelKind.REFERENCE and job.norm == 1:
                controls = y[:, job.n_cases:]
        if job.write_normalized:
            store.write("normalized", (rows, slice(None)), normalized)
        model_input = normalized if job.norm == 1 else counts
        if job.kind is ModelKind.EM:
            out = fit(model_input, job.model_cov, job.spec, keep_post=job.keep_post, backend=backend)
        elif job.kind is ModelKind.REFERENCE:
            if controls is None:
                controls = store.read("controls", (rows, slice(None)))
                if job.controls_cov is not None:
                    controls = controls / job.controls_cov
            lam = reference_lambda(controls)
            out = fit_one_step(model_input, job.model_cov, lam, job.spec, job.keep_post, backend)
        else:
            out = fit_one_step(counts, job.model_cov, lam_rows, job.spec, job.keep_post, backend)
    for name, value in (("lam", out.lam), ("alpha", out.alpha), ("sini", out.sini), ("cn", out.cn),
                        ("ini", out.ini), ("post", out.post)):
        if value is not None:
            store.write(name, rows, value)
    return b - a


def segment_block(store: WorkStore, r0: int, r1: int, blocks: list, c0: int, c1: int, min_width: int,
                  segment_args: dict, backend: str) -> pd.DataFrame:
    """sINI of samples c0:c1 on the whole chromosomes ``blocks`` [(block index, first, end)] within rows
    r0:r1, segmented by the engine (CPU or GPU: ``backend`` resolved here, once per task, on the worker); the
    segment table (block, sample, start, end, mean, median) with global block and sample indices, ordered by
    block, sample, start."""
    values = store.read("sini", (slice(r0, r1), slice(c0, c1)))
    with task_threads():
        seg = segment_blocks(values, [(b0 - r0, b1 - r0) for _, b0, b1 in blocks], backend=resolve_backend(backend),
                             min_seg=min_width, **segment_args)
    index = np.array([bi for bi, _, _ in blocks], dtype=np.int64)
    return seg.assign(block=index[seg["block"].to_numpy()], sample=seg["sample"].to_numpy() + c0)


def individual_calls(store: WorkStore, c0: int, c1: int, seg: pd.DataFrame | None, firsts: np.ndarray, m: int,
                     use_median: bool) -> int:
    """Individual calls of samples c0:c1 (every row: the mean, or median, of the sample's segment covering
    it; calls.calls_from_segments's fill) written to the store; ``seg`` None: fewer regions than cn.mops
    segments, the individual calls are sINI."""
    if seg is None:
        store.write("individual_call", (slice(None), slice(c0, c1)), store.read("sini", (slice(None), slice(c0, c1))))
        return c1 - c0
    first = firsts[seg["block"].to_numpy()]
    stat = seg["median" if use_median else "mean"].to_numpy(dtype=np.float64)
    with task_threads():
        values = fill_by_segment(stat, seg["sample"].to_numpy() - c0, first + seg["start"].to_numpy() - 1,
                                 first + seg["end"].to_numpy() - 1, m, c1 - c0)
    store.write("individual_call", (slice(None), slice(c0, c1)), values)
    return c1 - c0


# ------------------------------------------------------------------------------------------------ client
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
    **params,
) -> DistributedResult:
    """cn.mops (or a family member) on a Dask cluster; the same result as the single-process run.

    ``input``: a Dask array (regions x samples; any chunks; rows of a chromosome contiguous), a Zarr
    array/group path (see :func:`save_counts`), an ``.npy`` path, or anything :func:`gcnmops.read_counts`
    reads. ``client``: a ``distributed.Client`` (LocalCluster, dask-jobqueue, dask-cuda); None: the current
    client, else this process; False: this process. ``method``: cn.mops, exome, haplo, reference
    (``controls`` = the control samples, same regions), single. ``sample_names``, ``ranges`` (seqnames,
    start, end): for a Dask array / bare matrix. ``store``: folder for the run's Zarr arrays, visible to every worker (default: a new
    temporary folder, which suits a LocalCluster only, removed when the run fails, once its result is no longer
    referenced, or at exit; ``keep_work=True`` keeps it). ``backend``: "cpu", "gpu" or "auto", resolved on each
    worker (dask-cuda: one GPU per worker). ``chunk_bytes`` (input bytes per task; default from the workers'
    memory limit), ``rows_per_chunk``, ``samples_per_chunk``: task sizes. ``numba_threads``: numba threads
    per task ("auto": each host's cores shared among its workers). ``params``: the method's keyword
    arguments (cn.mops's, snake_case), as for the single-process functions.

    Returns a :class:`DistributedResult` (Dask arrays over the store + pandas tables).
    """
    method_row, cparams, extra = _run_params(method, backend, params)
    log_note(method_row, extra.get("verbose", 1))
    runner = Runner(resolve_client(client))
    runner.set_numba_threads(numba_threads)
    work = work_store(store, keep_work)
    try:
        return _run(runner, work, method_row, cparams, input, controls, sample_names, ranges, backend, chunk_bytes,
                    rows_per_chunk, samples_per_chunk)
    except BaseException:
        work.discard()
        raise


def _run(runner: Runner, work: WorkStore, method_row: Method, cparams: CnMopsParams, input, controls, sample_names,
         ranges, backend: str, chunk_bytes: int | None, rows_per_chunk, samples_per_chunk) -> DistributedResult:
    """``cn_mops``'s stages, in the working store ``work``."""
    timings: dict = {}
    with timed_stage(timings, "read"):
        cases, ctrl = _open_inputs(method_row, input, controls, sample_names, ranges)
        warn_few_regions(cases.shape[0], stacklevel=3)
        if chunk_bytes is None:
            chunk_bytes = chunk_bytes_for(*runner.worker_memory())
        layout, flags = _stage_inputs(runner, work, cases, ctrl, cparams, chunk_bytes, rows_per_chunk,
                                      samples_per_chunk)
    N = cases.shape[1]
    columns = {"counts": N} | ({"controls": ctrl.shape[1]} if ctrl is not None else {})
    with timed_stage(timings, "normalize"):
        job, norm, lam_blocks = _plan_model(runner, work, layout, method_row, cparams, flags, N, columns, backend)
    with timed_stage(timings, "model"):
        _fit_rows(runner, work, layout, job, norm, lam_blocks, len(cparams.classes))
    with timed_stage(timings, "segment_call"):
        seg = _segment(runner, work, layout, N, cparams, backend, chunk_bytes)
        gr = cases.count_data_stub().genomic_ranges()
        names = list(cases.sample_names)
        segmentation, cnvs, cnvr = _calls(seg, gr, layout, names, cparams)
    return _result(work, job, cparams, gr, segmentation, cnvs, method_cnvr(method_row, cnvr, cnvs, names), names,
                   ranged=cases.ranges is not None, timings=timings)


def _run_params(method, backend: str, params: dict) -> tuple[Method, CnMopsParams, dict]:
    """(the method's row of the table, its validated parameters, its options such as ``verbose``); the
    distributed pipeline segments with the fast algorithm only (a warning for any other)."""
    method_row = method_spec(method)
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}.")
    cparams, extra = build_params(method_row.name, params)
    if cparams.seg_algorithm != "fast":
        warnings.warn(f"segAlgorithm {cparams.seg_algorithm!r} is not available in the distributed pipeline: "
                      'using the fast segmentation (seg_algorithm="fast").', RuntimeWarning, stacklevel=3)
        cparams = dataclasses.replace(cparams, seg_algorithm="fast")
    return method_row, cparams, extra


def _stage_inputs(runner: Runner, work: WorkStore, cases: Matrix, ctrl: Matrix | None, cparams: CnMopsParams,
                  chunk_bytes: int, rows_per_chunk, samples_per_chunk) -> tuple[Layout, dict]:
    """The read stage's work: the layout of the tasks, and the cases (and controls) staged in the working store
    with their RowFlags."""
    m, N = cases.shape
    columns = {"counts": N} | ({"controls": ctrl.shape[1]} if ctrl is not None else {})
    layout = plan_layout(m, columns, chromosome_blocks(cases.chromosomes), chunk_bytes=chunk_bytes,
                         per_row_factor=1 + (len(cparams.classes) // 2 if cparams.return_posterior else 0),
                         rows_per_chunk=rows_per_chunk, samples_per_chunk=samples_per_chunk,
                         threads=runner.total_threads())
    log.info(f"gcnmops distributed: {m:,} regions x {N} samples, {len(layout.row_chunks)} row chunks of "
             f"{layout.rows:,} rows, store {work.path}")
    flags = {"counts": _stage_matrix(runner, work, layout, "counts", cases)}
    if ctrl is not None:
        flags["controls"] = _stage_matrix(runner, work, layout, "controls", ctrl)
    return layout, flags


def _result(work: WorkStore, job: "ModelJob", cparams: CnMopsParams, gr, segmentation, cnvs, cnvr, names,
            ranged: bool, timings: dict) -> DistributedResult:
    """The DistributedResult: Dask arrays over the store's matrices and the tables."""
    names_in_store = {"normalized_data": "normalized" if job.write_normalized else "counts",
                      "local_assessments": "sini", "individual_call": "individual_call", "ini_call": "ini",
                      "cn_index": "cn", "L": "lam", "A": "alpha"}
    if cparams.return_posterior:
        names_in_store["posterior_probs"] = "post"
    matrices = {slot: work.dask(name) for slot, name in names_in_store.items()}
    result_params = cparams.r_params()
    result_params.update(cov=job.result_cov, L=matrices.pop("L"), A=matrices.pop("A"))
    return DistributedResult(
        gr=gr, params=result_params, posterior_probs=matrices.pop("posterior_probs", None), **matrices,
        segmentation=segmentation, cnvs=cnvs, cnvr=cnvr, sample_names=names, ranged=ranged,
        store=work.path, timings=timings, paths={k: work.path_of(v) for k, v in names_in_store.items()}, work=work)


def _fit_rows(runner: Runner, work: WorkStore, layout: Layout, job: ModelJob, norm, lam_blocks, n_classes: int):
    """The model stage: one task per row chunk (normalize its rows, fit them, write the outputs)."""
    import dask

    _create_outputs(work, layout, job.n_cases, n_classes, job.keep_post, job.write_normalized)
    tasks = []
    for a, b in layout.row_chunks:
        pieces = layout.pieces(a, b)
        factors, silent_rows = norm.for_chunk(a, b, pieces) if norm is not None else ({}, None)
        lam_rows = None
        if lam_blocks is not None:  # singlecn.mops: lambda per chromosome, spread over its rows
            lam_rows = np.concatenate([np.full(r1 - r0, lam_blocks[bi]) for bi, r0, r1 in pieces])
        tasks.append(dask.delayed(model_rows, pure=False)(work, job, a, b, pieces, factors, silent_rows, lam_rows))
    runner.compute(tasks)


def _calls(seg: pd.DataFrame | None, gr: pd.DataFrame, layout: Layout, names: list[str], p):
    """(segmentation, cnvs, cnvr) from the merged segment table, as calls.call_cnvs makes them."""
    if seg is None:  # fewer regions than cn.mops segments
        return empty_segments(), empty_segments(), empty_cnvr(names)
    calls = calls_from_segments(seg, gr, layout.blocks, names, p.upper_threshold, p.lower_threshold, p.min_width,
                                p.use_median, m=layout.m, n_samples=len(names), fill_individual=False)
    return calls.segmentation, calls.cnvs, calls.cnvr


def scale_task(store: WorkStore, view: tuple, a: int, b: int, pieces: list, factors: dict, silent_rows) -> int:
    """Rows a:b of the view normalized into the store's ``normalized`` array."""
    with task_threads():
        y = read_view(store, list(view), a, b)
        if factors:
            scale_rows(y, pieces, factors, silent_rows)
    store.write("normalized", (slice(a, b), slice(None)), y)
    return b - a


def normalize_chromosomes(input, client=None, *, chromosomes=None, norm_type: str = "poisson",
                          size_factor: str = "mean", qu: float = 0.25, qu_size_factor: float = 0.75, store=None,
                          chunk_bytes: int | None = None, rows_per_chunk: int | None = None,
                          samples_per_chunk: int | None = None, numba_threads="auto", keep_work: bool = False):
    """cn.mops ``normalizeChromosomes`` on a Dask cluster: :func:`gcnmops.normalize_chromosomes`'s result
    (bit for bit) as a Dask array (regions x samples, float64) over the ``normalized`` Zarr array of
    ``store``. ``input``: as for :func:`cn_mops` (one sample or more); ``chromosomes``: the chromosome of
    every row (rows of a chromosome contiguous), default one chromosome. Other arguments as
    :func:`cn_mops` and :func:`gcnmops.normalize_chromosomes` (a temporary store lives until exit)."""
    import dask

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
    layout = plan_layout(m, {"counts": n}, chromosome_blocks(matrix.chromosomes), chunk_bytes=chunk_bytes,
                         rows_per_chunk=rows_per_chunk, samples_per_chunk=samples_per_chunk,
                         threads=runner.total_threads())
    work = work_store(store, keep_work)
    try:
        flags = {"counts": _stage_matrix(runner, work, layout, "counts", matrix)}
        norm = plan_normalization(runner, work, layout, [("counts", n)], flags, NormArgs(norm_type, size_factor, qu,
                                                                                          qu_size_factor))
        work.create("normalized", (m, n), layout.chunks("counts", n), "f8", compress=False)
        tasks = []
        for a, b in layout.row_chunks:
            pieces = layout.pieces(a, b)
            factors, silent_rows = norm.for_chunk(a, b, pieces) if norm is not None else ({}, None)
            tasks.append(dask.delayed(scale_task, pure=False)(work, (("counts", n),), a, b, pieces, factors,
                                                              silent_rows))
        runner.compute(tasks)
    except BaseException:
        work.discard()
        raise
    _UNTIL_EXIT.append(work)  # the array returned reads the store: a temporary one is removed at exit
    return work.dask("normalized")


def _open_inputs(method_row: Method, input, controls, sample_names, ranges) -> tuple[Matrix, Matrix | None]:
    """The cases (or the one sample) and the controls of the method, read and checked as its entry point
    does (pipeline.family's readers)."""
    if method_row.model is ModelKind.REFERENCE:
        if controls is None:
            raise InputError("method 'reference' needs controls= (the control samples' counts, same regions).")
        cases = open_matrix(input, sample_names=_names_or(sample_names, input, "Case"), ranges=ranges,
                            min_samples=1, reader=lambda o: read_named_counts(o, "Case", "cases"), what="cases")
        ctrl = open_matrix(controls, sample_names=_names_or(None, controls, "Control"),
                           ranges=ranges,
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


def _stage_matrix(runner: Runner, work: WorkStore, layout: Layout, name: str, matrix: Matrix) -> RowFlags:
    """Stage ``matrix`` in the store (float64, the layout's chunks) and gather its RowFlags; InputError with
    cn.mops's messages for NaN/Inf or negative counts."""
    import dask

    m, n = matrix.shape
    work.create(name, (m, n), layout.chunks(name, n), "f8")
    if matrix.source is not None:  # a Zarr / npy file: each task reads its rows
        tasks = [dask.delayed(stage_rows, pure=False)(work, name, a, b, None, matrix.source)
                 for a, b in layout.row_chunks]
    elif hasattr(matrix.values, "chunks"):  # a Dask array: each task computes its row chunk and stages it
        sizes = tuple(b - a for a, b in layout.row_chunks)
        blocks = matrix.values.rechunk((sizes, (n,))).to_delayed().ravel()
        tasks = [dask.delayed(stage_rows, pure=False)(work, name, a, b, blk)
                 for (a, b), blk in zip(layout.row_chunks, blocks)]
    else:  # already in this process: write it, the tasks read it back
        work.write(name, (slice(None), slice(None)), np.asarray(matrix.values, dtype=np.float64))
        tasks = [dask.delayed(stage_rows, pure=False)(work, name, a, b, None) for a, b in layout.row_chunks]
    parts = runner.compute(tasks)
    what = "read count matrix" if name == "counts" else "controls' read count matrix"
    for key, text in (("nonfinite", "finite: the {what} holds {n} NaN/Inf value(s)"),
                      ("negative", "non-negative: the {what} holds {n} negative value(s)")):
        found = [p[key] for p in parts if key in p]
        if found:
            total = sum(f[0] for f in found)
            _, r, c = found[0]
            raise InputError("Read counts must be " + text.format(what=what, n=total)
                             + f", the first at region {r + 1}, sample {c + 1}.")
    return RowFlags(below_one=np.concatenate([p["below_one"] for p in parts]),
                    nonzero=np.concatenate([p["nonzero"] for p in parts]),
                    col_nonzero=np.logical_or.reduce([p["col_nonzero"] for p in parts]))


def _plan_model(runner, work, layout, method: Method, p, flags, N, columns, backend):
    """(ModelJob, Normalization or None, singlecn.mops's lambda per chromosome or None) for the method's model
    and its normalization (cnmops._normalize, family._normalize_reference, family.single_cn_mops)."""
    args = NormArgs(p.norm_type, p.size_factor, p.norm_qu, p.qu_size_factor)
    ones = np.ones(N)
    common = dict(keep_post=p.return_posterior, backend=backend)
    if method.model is ModelKind.SINGLE:
        import dask

        spec = model_spec(method, p)
        from .normalize import column_pass

        every = [(bi, b0, b1) for bi, (_, b0, b1) in enumerate(layout.blocks)]
        (res,) = runner.compute([dask.delayed(column_pass, pure=False)(work, "counts", 0, 1, every, None, None,
                                                                       False, False, True)])
        lam = [float(res["pos_median"][bi][0]) for bi in range(len(layout.blocks))]
        job = ModelJob("single", 0, N, (), spec, ones, ones, None, write_normalized=False, **common)
        return job, None, lam
    kind = method.model
    spec = model_spec(method, p)
    if p.norm == 0:
        return ModelJob(kind, 0, N, (), spec, ones, ones, None, write_normalized=False, **common), None, None
    view = (("counts", N), ("controls", columns["controls"])) if kind is ModelKind.REFERENCE and p.norm == 1 \
        else (("counts", N),)
    norm = plan_normalization(runner, work, layout, list(view), flags, args)
    if norm is None:
        view = ()
    cov, controls_cov = ones, None
    if p.norm == 2:
        arrays = [("counts", N)] + ([("controls", columns["controls"])] if kind is ModelKind.REFERENCE else [])
        cov_all = plan_coverage(runner, work, layout, arrays)
        cov = cov_all[:N].copy()
        if kind is ModelKind.REFERENCE:
            controls_cov = cov_all[N:]
    model_cov = cov if method.cov_in_model else ones  # haplocn.mops: coverages recorded, the model sees cov = 1
    job = ModelJob(kind, p.norm, N, view, spec, model_cov, cov, controls_cov, write_normalized=bool(view), **common)
    return job, norm, None


def _create_outputs(work: WorkStore, layout: Layout, N: int, n: int, keep_post: bool, normalized: bool) -> None:
    rows = layout.chunks("counts", N)
    if normalized:
        work.create("normalized", (layout.m, N), rows, "f8", compress=False)
    work.create("sini", (layout.m, N), rows, "f8", compress=False)
    work.create("individual_call", (layout.m, N), rows, "f8")  # piecewise constant: compresses well
    work.create("cn", (layout.m, N), rows, "i1")
    work.create("lam", (layout.m, n), (rows[0], n), "f8", compress=False)
    work.create("alpha", (layout.m, n), (rows[0], n), "f8", compress=False)
    work.create("ini", (layout.m,), (rows[0],), "f8", compress=False)
    if keep_post:
        work.create("post", (layout.m, n, N), (rows[0], n, rows[1]), "f8", compress=False)


def _segment(runner, work, layout: Layout, N: int, p, backend: str, chunk_bytes: int) -> pd.DataFrame | None:
    """Segment tables of every (chromosome group, sample group), merged in the single-process order (block,
    sample, start); then the individual calls per sample group. None when cn.mops does not segment."""
    import dask

    groups = layout.column_groups("counts", N)
    if layout.m < MIN_REGIONS_TO_SEGMENT:
        runner.compute([dask.delayed(individual_calls, pure=False)(work, c0, c1, None, None, layout.m, False)
                        for c0, c1 in groups])
        return None
    k = max(c1 - c0 for c0, c1 in groups)
    want = TASKS_PER_THREAD * runner.total_threads()  # tasks: chromosome groups x sample groups
    rows = max(1, min(chunk_bytes // (8 * k), -(-layout.m * len(groups) // want)))
    tasks = [dask.delayed(segment_block, pure=False)(work, r0, r1, blocks, c0, c1, p.min_width,
                                                     dict(p.segment_args), backend)
             for r0, r1, blocks in _chromosome_groups(layout, rows) for c0, c1 in groups]
    seg = pd.concat(runner.compute(tasks), ignore_index=True)
    order = np.lexsort((seg["sample"].to_numpy(), seg["block"].to_numpy()))  # stable: starts stay in order
    seg = seg.iloc[order].reset_index(drop=True)
    firsts = np.array([b0 for _, b0, _ in layout.blocks], dtype=np.int64)
    sample = seg["sample"].to_numpy()
    runner.compute([dask.delayed(individual_calls, pure=False)(
        work, c0, c1, seg[(sample >= c0) & (sample < c1)], firsts, layout.m, p.use_median) for c0, c1 in groups])
    return seg


def _chromosome_groups(layout: Layout, rows: int) -> list[tuple[int, int, list]]:
    """Consecutive whole chromosomes gathered into groups of about ``rows`` rows (a larger chromosome alone):
    (first row, end row, [(block index, first, end)])."""
    out: list = []
    for bi, (_, b0, b1) in enumerate(layout.blocks):
        if out and out[-1][1] == b0 and b1 - out[-1][0] <= rows:
            r0, _, blocks = out[-1]
            out[-1] = (r0, b1, blocks + [(bi, b0, b1)])
        else:
            out.append((b0, b1, [(bi, b0, b1)]))
    return out


__all__ = ["cn_mops", "normalize_chromosomes", "stage_rows", "model_rows", "segment_block", "individual_calls",
           "ModelJob"]
