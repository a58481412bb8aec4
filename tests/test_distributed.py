"""gcnmops.distributed: cn.mops on Dask equals the single-process run, bit for bit.

A LocalCluster of 2 worker processes (1 thread each, a memory limit per worker) runs every golden case (small
chunks: each block of whole chromosomes stored in several row chunks and sample groups), every method and norm
on a cohort of several chromosomes, and a matrix larger than a worker's memory limit; normalizeChromosomes is
checked for every normType x sizeFactor and its warnings and errors. No run leaves its temporary store behind.
The GPU test needs dask-cuda and a GPU (``-m gpu``).
"""
from __future__ import annotations

import os
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

dask = pytest.importorskip("dask")
pytest.importorskip("distributed")
pytest.importorskip("zarr")

import gcnmops  # noqa: E402
from gcnmops import distributed as gd  # noqa: E402
from gcnmops.errors import InputError  # noqa: E402
from gcnmops.example import example_cohort  # noqa: E402
from golden import GOLDEN_DIR, array, case_names, manifest  # noqa: E402

METHOD = {"cn.mops": "cn.mops", "exomecn.mops": "exome", "haplocn.mops": "haplo", "referencecn.mops": "reference",
          "singlecn.mops": "single"}
#: per worker; an idle worker with the engine loaded takes ~340 MB (Python, numpy, pandas, numba, dask)
MEMORY_LIMIT = 640 * 10**6
#: the big matrix: regions x samples of float64 counts (676 MB > MEMORY_LIMIT)
BIG_SHAPE = (int(os.environ.get("GCNMOPS_BIG_ROWS", 1_760_000)), 48)


def _compile_kernels_first() -> None:
    """Run each method's first golden case once on a cluster of workers without a memory limit, so numba's
    on-disk cache holds every kernel the workers run before the limited cluster starts: compiling needs more
    memory than MEMORY_LIMIT leaves a worker (in a fresh checkout the workers were killed while compiling)."""
    import test_golden as tg
    from distributed import Client, LocalCluster

    from gcnmops.pipeline.batch import python_children_env

    seen, runs = set(), []
    for case in _golden_cases():
        method = METHOD[tg.entry_point(case)]
        if method in seen:
            continue
        seen.add(method)
        data = tg.input_frame(case, "input_counts", manifest(case)["sampleNames"])
        extra = {}
        if method == "reference":
            info = manifest(case)["arrays"]["controls_counts"]
            names = (info.get("dimnames") or [None, None])[1] or [f"Control_{k + 1}" for k in range(info["shape"][1])]
            extra["controls"] = tg.input_frame(case, "controls_counts", names)
        runs.append((data, method, extra, tg.call_kwargs(case)))
    with python_children_env(), LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=0,
                                             dashboard_address=None) as cluster, Client(cluster) as c:
        for data, method, extra, kwargs in runs:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                res = gd.cn_mops(data, c, method=method, backend="cpu", rows_per_chunk=700, samples_per_chunk=3,
                                 chunk_bytes=50_000, **extra, **kwargs)
                if len(res.compute().cnvr):
                    res.calc_integer_copy_numbers()


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    from gcnmops.pipeline.batch import python_children_env

    # The limit is enforced: a worker above 95% of it is killed (and restarted) by its nanny; nothing is
    # spilled or paused (tasks return small results; the matrices live in the Zarr store).
    # python_children_env: earlier tests may have embedded R here (rpy2), whose LD_LIBRARY_PATH would give
    # the worker processes the system's libpython.
    _compile_kernels_first()
    with python_children_env(), dask.config.set({
            "distributed.worker.memory.target": False, "distributed.worker.memory.spill": False,
            "distributed.worker.memory.pause": False, "distributed.worker.memory.terminate": 0.95}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=MEMORY_LIMIT,
                               dashboard_address=None)
        c = Client(cluster)
        try:
            yield c
        finally:
            c.close()
            cluster.close()


def assert_same_result(ours: gcnmops.CNVDetectionResult, ref: gcnmops.CNVDetectionResult, what: str) -> None:
    """Every matrix bit for bit (NaN where NaN), every table equal, the params too."""
    for name in ("normalized_data", "local_assessments", "individual_call", "ini_call", "cn_index",
                 "posterior_probs"):
        a, b = getattr(ours, name), getattr(ref, name)
        if b is None:
            assert a is None, f"{what}: {name}"
            continue
        assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {name} {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
        same = (a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind == "f" else a == b
        assert same.all(), f"{what}: {name} differs in {int((~same).sum())} values"
    for key in ("L", "A", "cov"):
        assert np.array_equal(np.asarray(ours.params[key]), np.asarray(ref.params[key])), f"{what}: params {key}"
    assert {k: v for k, v in ours.params.items() if k not in ("L", "A", "cov")} == \
        {k: v for k, v in ref.params.items() if k not in ("L", "A", "cov")}
    for name in ("gr", "segmentation", "cnvs", "cnvr"):
        pd.testing.assert_frame_equal(getattr(ours, name).reset_index(drop=True),
                                      getattr(ref, name).reset_index(drop=True), check_exact=True, obj=f"{what}.{name}")
    assert ours.sample_names == ref.sample_names and ours.ranged == ref.ranged


# ------------------------------------------------------------------------------------------------ beyond memory
def big_chunk(a: int, b: int, n: int, seed: int = 7) -> np.ndarray:
    """Rows a:b of the big test matrix: Poisson(2) counts (below minReadCount 20: the model's short-cut),
    every 100,000 rows 30 well-covered regions, every 200,000 rows with a loss in samples 0-2 and a gain
    in samples 3-5."""
    rng = np.random.default_rng([seed, a])
    x = rng.poisson(2.0, size=(b - a, n)).astype(np.float64)
    r = np.arange(a, b)
    covered = (r % 100_000) < 30
    x[covered] = rng.poisson(40.0, size=(int(covered.sum()), n))
    cnv = covered & ((r % 200_000) < 30)
    x[np.ix_(cnv, np.arange(n) < 3)] = rng.poisson(1.0, size=(int(cnv.sum()), 3))
    x[np.ix_(cnv, (np.arange(n) >= 3) & (np.arange(n) < 6))] = rng.poisson(90.0, size=(int(cnv.sum()), 3))
    return np.asfortranarray(x)


def _start_peak_sampler():  # on each worker: its process memory, sampled every 20 ms (kept on ``sys``)
    import sys

    import psutil

    proc, state = psutil.Process(), {"peak": 0}

    def loop():
        while True:
            state["peak"] = max(state["peak"], proc.memory_info().rss)
            time.sleep(0.02)

    threading.Thread(target=loop, daemon=True, name="gcnmops-peak").start()
    sys.gcnmops_test_peak = state


def _peak():
    import sys

    return sys.gcnmops_test_peak["peak"]


def test_matrix_larger_than_a_workers_memory(client, tmp_path):
    """A 1.76M x 48 matrix (676 MB of float64, in a Zarr store on disk; 32 chromosomes of 55,000 regions, each
    block a task) on 2 workers of 640 MB each (of which ~350 MB is the worker itself with the engine loaded): no
    worker is killed, none exceeds its limit, and the result equals the single-process one bit for bit. (First
    in the module: the workers are fresh.)"""
    m, n = BIG_SHAPE
    rows = 20_000
    import zarr

    z = tmp_path / "big.zarr"
    arr = zarr.open_array(str(z), mode="w", shape=(m, n), chunks=(rows, n), dtype="f8")
    full = np.empty((m, n), order="F")
    for a in range(0, m, rows):
        full[a:a + rows] = arr[a:a + rows] = big_chunk(a, min(m, a + rows), n)
    ranges = pd.DataFrame({"seqnames": np.repeat([f"chr{k + 1}" for k in range(32)], m // 32),
                           "start": np.arange(m) * 1000 + 1, "end": np.arange(m) * 1000 + 1000})
    assert full.nbytes > MEMORY_LIMIT
    workers = set(client.scheduler_info()["workers"])
    client.run(_start_peak_sampler)
    res = gd.cn_mops(str(z), client, ranges=ranges, sample_names=[f"S{k}" for k in range(n)], backend="cpu",
                     min_read_count=20, store=str(tmp_path / "store"))
    peaks = client.run(_peak)
    print("peak resident memory per worker (MB):", {w: round(p / 1e6) for w, p in peaks.items()})
    assert set(client.scheduler_info()["workers"]) == workers, "a worker was restarted"
    assert max(peaks.values()) < 0.95 * MEMORY_LIMIT, peaks
    ours = res.compute()
    ref = gcnmops.cn_mops(gcnmops.CountData(full, [f"S{k}" for k in range(n)], ranges), backend="cpu",
                          min_read_count=20)
    assert len(ref.cnvs) > 0
    assert_same_result(ours, ref, "big matrix")
    integer, want = res.calc_integer_copy_numbers(), gcnmops.calc_integer_copy_numbers(ref)
    for name in ("segmentation", "cnvs", "cnvr"):
        pd.testing.assert_frame_equal(getattr(integer, name), getattr(want, name), check_exact=True)


# ------------------------------------------------------------------------------------------------ golden cases
def _golden_cases():
    import test_golden as tg

    if not GOLDEN_DIR.is_dir():
        return []
    return [c for c in case_names() if c not in tg.ELSEWHERE and tg.entry_point(c) in tg.ENTRY_POINTS]


@pytest.mark.parametrize("case", _golden_cases())
def test_golden_case_on_cluster(client, case):
    """Each golden case on the cluster (its chromosomes in blocks, stored in chunks of 700 rows x 3 samples)
    equals the single-process result (itself bit-identical to cn.mops), integer copy numbers included."""
    import test_golden as tg

    ref, ref_integer = tg.run_case(case)
    data = tg.input_frame(case, "input_counts", manifest(case)["sampleNames"])
    extra = {}
    if tg.entry_point(case) == "referencecn.mops":
        info = manifest(case)["arrays"]["controls_counts"]
        names = (info.get("dimnames") or [None, None])[1] or [f"Control_{k + 1}" for k in range(info["shape"][1])]
        extra["controls"] = tg.input_frame(case, "controls_counts", names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = gd.cn_mops(data, client, method=METHOD[tg.entry_point(case)], backend="cpu", rows_per_chunk=700,
                         samples_per_chunk=3, chunk_bytes=50_000, **extra, **tg.call_kwargs(case))
    assert len(set(res.local_assessments.chunks[0])) >= 1 and len(res.local_assessments.chunks[0]) >= 2
    assert_same_result(res.compute(), ref, case)
    if len(ref.cnvr):
        ours = res.calc_integer_copy_numbers()
        want = ref_integer if ref_integer is not None else gcnmops.calc_integer_copy_numbers(ref)
        for name in ("segmentation", "cnvs", "cnvr"):
            pd.testing.assert_frame_equal(getattr(ours, name).reset_index(drop=True),
                                          getattr(want, name).reset_index(drop=True), check_exact=True)


# ------------------------------------------------------------------------------------------------ normalization
@pytest.mark.skipif(not (GOLDEN_DIR / "normalize").is_dir(), reason="golden case 'normalize' not found")
def test_normalize_every_norm_type_and_size_factor():
    """normalizeChromosomes in chunks (here, in this process) for the 20 normType x sizeFactor pairs."""
    x, chrom = array("normalize", "input_counts"), array("normalize", "chr")
    for norm_type in ("poisson", "mean", "median", "quant", "mode"):
        for size_factor in ("mean", "median", "quant", "mode"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                ref = gcnmops.normalize_chromosomes(x, chrom, norm_type=norm_type, size_factor=size_factor)
                ours = gd.normalize_chromosomes(x, False, chromosomes=chrom, norm_type=norm_type,
                                                size_factor=size_factor, rows_per_chunk=400,
                                                samples_per_chunk=5).compute()
            assert (ours == ref).all(), (norm_type, size_factor)


def _edge_matrix() -> tuple[np.ndarray, np.ndarray]:
    """chr A: ordinary; B: all zero (left as is); C: one row with reads (not normalized, a warning);
    D: sample 3 without reads (sizeFactor mode: column sums instead, a warning; mean: an error)."""
    rng = np.random.default_rng(5)
    a = rng.poisson(20, (300, 6)).astype(float)
    b = np.zeros((50, 6))
    c = np.zeros((40, 6))
    c[7] = rng.poisson(20, 6) + 1
    c[9, 2] = 0.5  # a silent row (all < 1) is set to 0
    d = rng.poisson(5, (200, 6)).astype(float)
    d[:, 2] = 0
    x = np.asfortranarray(np.vstack([a, b, c, d]))
    chrom = np.repeat(np.array(["A", "B", "C", "D"], dtype=object), [300, 50, 40, 200])
    return x, chrom


@pytest.mark.parametrize("norm_type,size_factor", [("poisson", "mode"), ("mode", "mode"), ("mean", "mean")])
@pytest.mark.parametrize("where", ["here", "cluster"])
def test_normalize_warnings_and_errors_as_single_process(request, where, norm_type, size_factor):
    """The single-process warnings, in chromosome order, and its error (chromosome D's), whether the blocks run in
    this process or on the workers (their warnings and errors raised again in the client, in block order)."""
    client = request.getfixturevalue("client") if where == "cluster" else False
    x, chrom = _edge_matrix()

    def run(fn):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = fn()
            except InputError as err:
                out = str(err)
        return out, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]

    ref, ref_warn = run(lambda: gcnmops.normalize_chromosomes(x, chrom, norm_type=norm_type, size_factor=size_factor))
    ours, our_warn = run(lambda: gd.normalize_chromosomes(x, client, chromosomes=chrom, norm_type=norm_type,
                                                          size_factor=size_factor, rows_per_chunk=64,
                                                          samples_per_chunk=2).compute())
    assert our_warn == ref_warn and ref_warn
    if isinstance(ref, str):
        assert ours == ref and "Some normalization factors are zero" in ref
    else:
        assert (ours == ref).all()


@pytest.mark.parametrize("change,message", [
    (lambda x: x.__setitem__((5, 1), np.nan), "Read counts must be finite: the read count matrix holds 1 NaN/Inf"),
    (lambda x: (x.__setitem__((7, 2), -1.0), x.__setitem__((300, 4), -2.0)), "the first at region 8 (A:8-8), sample 3"),
    (lambda x: x.__setitem__((slice(None), 4), 0.0), "Zero columns in readcount matrix. Sample(s) [5]"),
])
def test_bad_counts_are_reported(change, message):
    """The in-memory run's error for the whole matrix (how many bad values, the first one), though the first
    pass reads the matrix in row ranges of 64 regions."""
    x, chrom = _edge_matrix()
    change(x)
    ranges = pd.DataFrame({"seqnames": chrom, "start": np.arange(1, 591), "end": np.arange(1, 591)})
    with pytest.raises(InputError) as err:
        gd.cn_mops(dask.array.from_array(x, chunks=(100, 6)), False, ranges=ranges, backend="cpu",
                   rows_per_chunk=64)
    with pytest.raises(InputError) as ref:
        gcnmops.cn_mops(gcnmops.CountData(x, [f"Sample_{k + 1}" for k in range(6)], ranges), backend="cpu")
    assert message in str(err.value) and str(err.value) == str(ref.value)


def _chromosomes_cohort() -> tuple[gcnmops.CountData, gcnmops.CountData]:
    """(cases, controls): 10 + 6 samples on 6 chromosomes of 120 to 900 regions, one of them without reads."""
    data, _ = example_cohort(n_regions=2700, n_samples=16, seed=8, n_cnvs=30)
    sizes = [900, 120, 600, 450, 330, 300]
    names = np.repeat([f"chr{k + 1}" for k in range(len(sizes))], sizes)
    start = np.concatenate([np.arange(n) * 25_000 + 1 for n in sizes])
    ranges = pd.DataFrame({"seqnames": names, "start": start, "end": start + 24_999})
    counts = np.array(data.counts, order="F")
    counts[900:1020] = 0  # chr2: no reads (left as it is by the normalization)
    cases = gcnmops.CountData(np.asfortranarray(counts[:, :10]), data.sample_names[:10], ranges)
    controls = gcnmops.CountData(np.asfortranarray(counts[:, 10:]), data.sample_names[10:], ranges)
    return cases, controls


def _temporary_stores(folder) -> list:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("gcnmops-dask-"))


@pytest.mark.parametrize("method,options", [
    ("cn.mops", {"norm": 0, "return_posterior": True}), ("cn.mops", {"norm": 1, "return_posterior": True}),
    ("cn.mops", {"norm": 2, "return_posterior": True}), ("haplo", {"norm": 2}), ("reference", {"norm": 1}),
    ("reference", {"norm": 2, "return_posterior": True}), ("single", {}),
])
def test_blocks_equal_in_memory_run(client, tmp_path, monkeypatch, method, options):
    """Blocks of whole chromosomes on the cluster (small ones merged into one block, the in-memory input sent
    to the workers by blocks) give the in-memory result of every method bit for bit, every matrix and table
    (the genome's column sums and coverages, referencecn.mops's controls' too, taken by the first pass), and the
    sample QC of the run in memory (written as sample_qc.tsv); the run's temporary store is gone at its end, or
    kept on request and read by the result."""
    from gcnmops.pipeline.selection import counts_qc

    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cases, controls = _chromosomes_cohort()
    kwargs = dict(backend="cpu", min_width=3, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if method == "reference":
            ref = gcnmops.reference_cn_mops(cases, controls, seg_algorithm="fast", **kwargs)
            res = gd.cn_mops(cases, client, method=method, controls=controls, chunk_bytes=400 * 16 * 8,
                             seg_algorithm="fast", **kwargs)
        elif method == "single":
            one = gcnmops.CountData(np.asfortranarray(cases.counts[:, :1]), cases.sample_names[:1], cases.ranges)
            ref = gcnmops.single_cn_mops(one, seg_algorithm="fast", **kwargs)
            res = gd.cn_mops(one, client, method=method, chunk_bytes=400 * 8, seg_algorithm="fast", **kwargs)
        else:
            ref = (gcnmops.haplo_cn_mops if method == "haplo" else gcnmops.cn_mops)(cases, **kwargs)
            res = gd.cn_mops(cases, client, method=method, chunk_bytes=400 * 10 * 8, rows_per_chunk=256,
                             samples_per_chunk=4, **kwargs)
    assert len(ref.cnvs) > 0
    assert _temporary_stores(tmp_path) == [], "a temporary store was left behind"
    assert res.store == "" and len(res.local_assessments.chunks[0]) >= 6
    assert_same_result(res.compute(), ref, f"{method} {options}")
    # the sample QC as gcnmops run makes it in memory, from the counts, the stored matrices and the calls
    pd.testing.assert_frame_equal(res.sample_qc, counts_qc(ref, one if method == "single" else cases),
                                  check_exact=True)
    if method == "cn.mops" and options["norm"] == 1:
        kept = gd.cn_mops(cases, client, method=method, chunk_bytes=400 * 10 * 8, keep_work=True, **kwargs)
        assert _temporary_stores(tmp_path) == [Path(kept.store).name]
        assert_same_result(kept.compute(), ref, "kept store")
        pd.testing.assert_frame_equal(kept.sample_qc, res.sample_qc, check_exact=True)
        assert "sample_qc.tsv" in [p.name for p in kept.compute().write(tmp_path / "out", formats=["tsv"])]
        ours, want = kept.calc_integer_copy_numbers(), gcnmops.calc_integer_copy_numbers(ref)
        for name in ("segmentation", "cnvs", "cnvr"):
            pd.testing.assert_frame_equal(getattr(ours, name), getattr(want, name), check_exact=True)


def test_inputs_and_arguments(tmp_path):
    """A Zarr group (save_counts), an .npy file and a Dask array with ranges give the in-memory result;
    unknown parameters, controls without the reference method, unsorted chromosomes are InputErrors."""
    data, _ = example_cohort(n_regions=1200, n_samples=10, seed=3)
    ref = gcnmops.cn_mops(data, backend="cpu", min_width=4)
    z = gd.save_counts(data, tmp_path / "counts.zarr", rows_per_chunk=500)
    from_zarr = gd.cn_mops(str(z), False, backend="cpu", min_width=4, rows_per_chunk=300)
    assert_same_result(from_zarr.compute(), ref, "zarr")
    np.save(tmp_path / "counts.npy", data.counts)
    from_npy = gd.cn_mops(tmp_path / "counts.npy", False, backend="cpu", min_width=4, ranges=data.ranges,
                          sample_names=data.sample_names, rows_per_chunk=256, samples_per_chunk=4)
    assert_same_result(from_npy.compute(), ref, "npy")
    from_dask = gd.cn_mops(dask.array.from_array(data.counts, chunks=(333, 7)), False, backend="cpu", min_width=4,
                           ranges=data.ranges, sample_names=data.sample_names, rows_per_chunk=500)
    assert_same_result(from_dask.compute(), ref, "dask")
    with pytest.raises(InputError, match="did you mean 'min_width'"):
        gd.cn_mops(data, False, min_widht=4)
    with pytest.raises(InputError, match="only for method 'reference'"):
        gd.cn_mops(data, False, controls=data)
    shuffled = data.ranges.iloc[np.r_[700:1200, 0:700]].reset_index(drop=True)
    shuffled.loc[shuffled.index[-10:], "seqnames"] = "chr2"
    with pytest.raises(InputError, match="must be contiguous"):
        gd.cn_mops(dask.array.from_array(data.counts), False, ranges=shuffled)
    with pytest.warns(RuntimeWarning, match="fast segmentation"):
        gd.cn_mops(data, False, seg_algorithm="DNAcopy", backend="cpu")


# ------------------------------------------------------------------------------------------------ GPUs
@pytest.mark.gpu
@pytest.mark.parametrize("threads", [1, 4, 8])
def test_dask_cuda_workers_equal_single_gpu_run(tmp_path, threads):
    """One dask-cuda worker per GPU, the model and the segmentation statistic on the workers' GPUs (with
    ``threads`` tasks at a time sharing each GPU): the single-process GPU result."""
    dask_cuda = pytest.importorskip("dask_cuda")
    from distributed import Client

    data, _ = example_cohort(n_regions=20_000, n_samples=30, seed=4)
    ref = gcnmops.cn_mops(data, backend="gpu")
    with dask_cuda.LocalCUDACluster(threads_per_worker=threads) as cluster, Client(cluster) as c:
        res = gd.cn_mops(data, c, backend="gpu", rows_per_chunk=4096, samples_per_chunk=8,
                         store=str(tmp_path / "store"))
        assert_same_result(res.compute(), ref, "dask-cuda")


def test_a_task_lost_with_its_worker_is_an_error_that_says_so():
    """A worker killed mid-run takes the data only it held: the cancelled futures become an error naming the
    cause and what to change, not distributed's "already forgotten"."""
    from distributed.client import FutureCancelledError

    from gcnmops.distributed.cluster import Runner

    class LostWorker:
        def compute(self, task, priority=0):
            return task

        def gather(self, futures):
            raise FutureCancelledError("on_worker-1", reason="already forgotten")

    with pytest.raises(InputError, match="a worker died or was restarted .*more memory"):
        Runner(LostWorker()).run(abs, [(-1,), (2,)])


def test_gpu_workers_take_larger_blocks():
    """Blocks of counts per task: the workers' memory share within [4, 64] MiB on CPU workers; GPU workers (each
    block pays the device's fixed costs once) up to 512 MiB, as their memory allows."""
    from gcnmops.distributed.cluster import MAX_CHUNK, MAX_GPU_CHUNK, MIN_CHUNK, WORKER_BASELINE, chunk_bytes_for

    assert chunk_bytes_for(None, 1) == MAX_CHUNK and chunk_bytes_for(None, 1, gpu=True) == MAX_GPU_CHUNK
    big = 128 << 30
    assert chunk_bytes_for(big, 1) == MAX_CHUNK and chunk_bytes_for(big, 1, gpu=True) == MAX_GPU_CHUNK
    small = WORKER_BASELINE + (256 << 20)
    assert chunk_bytes_for(small, 1, gpu=True) == chunk_bytes_for(small, 1) == (256 << 20) // 8
    assert chunk_bytes_for(WORKER_BASELINE, 4, gpu=True) == MIN_CHUNK
    assert gd.pipeline.Runner(None).all_on_gpu("cpu") is False


@pytest.mark.parametrize("halves", [False, True])
def test_sample_qc_tasks_take_the_blocks_tallies(monkeypatch, halves):
    """The blocks tally their counts, so the sample QC's tasks (several groups of samples) take each sample's
    coverage from the tallies and do not read the counts again; counts the tally cannot hold (halves) are read
    by the tasks. Either way the table is the in-memory run's."""
    from gcnmops.pipeline.selection import counts_qc

    data, _ = example_cohort(n_regions=1200, n_samples=10, seed=3)
    data = gcnmops.CountData(data.counts / 2 if halves else data.counts, data.sample_names, data.ranges)
    seen, real = [], gd.pipeline.qc_columns

    def spy(store, blocks, backend, group, *rest):
        seen.append(group.coverage is not None and group.counts is None)
        return real(store, blocks, backend, group, *rest)

    monkeypatch.setattr(gd.pipeline, "qc_columns", spy)
    res = gd.cn_mops(data, False, backend="cpu", min_width=4, chunk_bytes=1200 * 3 * 8)
    ref = gcnmops.cn_mops(data, backend="cpu", min_width=4)
    pd.testing.assert_frame_equal(res.sample_qc, counts_qc(ref, data), check_exact=True)
    assert len(seen) > 1 and seen == [not halves] * len(seen)


def test_blocks_write_the_models_matrices_during_the_segmentation(tmp_path, monkeypatch):
    """A block's model matrices are written by its writer thread once the model has run, before the
    segmentation ends; every matrix once, in bands of row chunks; the stored result equals the in-memory run's."""
    from gcnmops.io import store as io_store
    from gcnmops.pipeline import stages

    monkeypatch.setattr(io_store, "usable_cores", lambda: 3)
    data, _ = example_cohort(n_regions=3000, n_samples=8, seed=4)
    events, lock = [], threading.Lock()
    real_write, real_segment = gd.store.WorkStore.write, stages.segment_and_call

    def write(self, name, block, *rest):
        real_write(self, name, block, *rest)
        with lock:
            events.append(("write", name, block, threading.current_thread().name))

    def segment(*args, **kwargs):
        out = real_segment(*args, **kwargs)
        time.sleep(0.3)  # the model's writes end meanwhile
        with lock:
            events.append(("segmented", None, None, threading.current_thread().name))
        return out

    monkeypatch.setattr(gd.store.WorkStore, "write", write)
    monkeypatch.setattr(stages, "segment_and_call", segment)
    res = gd.cn_mops(data, False, backend="cpu", min_width=4, rows_per_chunk=100, store=str(tmp_path / "w"))
    ref = gcnmops.cn_mops(data, backend="cpu", min_width=4)
    np.testing.assert_array_equal(np.asarray(res.local_assessments), ref.local_assessments)
    np.testing.assert_array_equal(np.asarray(res.individual_call), ref.individual_call)
    np.testing.assert_array_equal(np.asarray(res.normalized_data), ref.normalized_data)
    writes = [e for e in events if e[0] == "write"]
    assert len(writes) == len({(name, block) for _, name, block, _ in writes})  # every matrix of a block once
    blocks = {block for _, _, block, _ in writes}
    assert len(blocks) > 1

    def segmented_before(name, block):  # blocks run one after another here: the segmentations ended before
        k = next(k for k, e in enumerate(events) if e[1:3] == (name, block))
        return sum(e[0] == "segmented" for e in events[:k]), events[k][3]

    for block in blocks:
        model, thread = segmented_before("normalized_data", block)
        calls, _ = segmented_before("individual_call", block)
        assert thread.startswith("gcnmops-block-write") and model < calls  # before its own segmentation ended


def test_gpu_workers_get_fewer_larger_blocks(monkeypatch):
    """Blocks are cut for balance: TASKS_PER_THREAD per task thread on CPU workers, TASKS_PER_GPU_WORKER per
    worker where the workers run the blocks on GPUs (each block pays the device's fixed costs); whole
    chromosomes, merged in order, either way."""
    from gcnmops.distributed.layout import TASKS_PER_GPU_WORKER, TASKS_PER_THREAD, plan_layout

    chromosomes = [(f"chr{k + 1}", 1000 * k, 1000 * (k + 1)) for k in range(22)]
    for tasks in (1, 2, 4, 8, 44):
        layout = plan_layout(chromosomes, 10, 10, chunk_bytes=1 << 30, tasks=tasks)
        assert len(layout.blocks) >= min(tasks, 22) and layout.blocks[0][0] == 0 and layout.blocks[-1][1] == 22000
        assert all(b0 % 1000 == 0 and b1 % 1000 == 0 for b0, b1 in layout.blocks)
        assert len(layout.blocks) <= 2 * max(tasks, 1)
    seen, real = [], gd.pipeline.plan_layout
    monkeypatch.setattr(gd.pipeline, "plan_layout", lambda *a, **k: seen.append(k["tasks"]) or real(*a, **k))
    data, _ = example_cohort(n_regions=1200, n_samples=6, seed=2)
    for gpu in (False, True):
        monkeypatch.setattr(gd.pipeline.Runner, "all_on_gpu", lambda self, backend, gpu=gpu: gpu)
        gd.cn_mops(data, False, backend="cpu", min_width=4, sample_qc=False)
    assert seen == [TASKS_PER_THREAD, TASKS_PER_GPU_WORKER]
