"""Scale-out: gcnmops.distributed (Dask) against the number of workers / GPUs, the batch runner against the
number of worker processes, and a cohort larger than a worker's memory.

Usage:
  python benchmarks/bench_scale.py cpu   [--regions 400000] [--samples 50] [--workers 1,2] [--repeat 2]
  python benchmarks/bench_scale.py big   [--regions 5000000] [--samples 50] [--memory-limit 1GB] [--workers 2]
                                         [--no-verify] [--store DIR]
  python benchmarks/bench_scale.py gpu   [--regions 5000000] [--samples 50] [--gpus 1,2,4] [--threads 1]
                                         [--repeat 2] [--no-verify]
  python benchmarks/bench_scale.py devices [--regions 5000000] [--samples 50] [--gpus 1,2,4] [--repeat 2]
                                         [--per-device 1,2] [--one-gpu 1000000x400]
  python benchmarks/bench_scale.py batch [--experiments 20] [--regions 20000] [--samples 20] [--workers 1,2]
  python benchmarks/bench_scale.py gpu-stream [--regions 1000000] [--samples 400] [--backend gpu|cpu]
                                              [--stream-devices all|IDS]
                                         [--keep local_assessments] [--verify-rows 200000] [--input STORE]
                                         [--store DIR]      (issue 18's second shape: --regions 3000000 --samples 1000)
  common: [--json PATH] [--seed 11]

The cohort (``--cohort``): Poisson counts on 22 chromosomes of 25-kb windows (1-kb ones above 220,000 regions),
simulated chunk by chunk (seeded per chunk) into a count store (``gcnmops convert``'s layout: int32 counts with
chunk checksums), so a cohort larger than memory never exists as one array except for the single-process
reference. ``heterogeneous`` (default; ``heterogeneous_chunk``): gamma region means (shape 2), 2% of the regions
without a read, sample coverages 0.7-1.3, a gain or loss of 3-40 windows every ~2,000 regions per sample.
``simple`` (the figures before 2026-11-29; ``cohort_chunk``): gamma region means (shape 8), coverages 0.8-1.2,
one 0.5x / 1.5x block of 5-40 windows per 2,000 regions (the EM runs on every region).

- ``cpu``: LocalCluster of 1..k worker processes with one thread each (numba: one thread per worker, so k
  workers use k cores), against the single-process ``gcnmops.cn_mops`` on all cores. Throughput =
  regions x samples / seconds, for the whole pipeline and for the model stage; best of ``--repeat``.
- ``big``: the cohort (default 5M x 50 = 2 GB of float64) on ``--workers`` workers with ``--memory-limit``
  each (enforced: a worker above 95% of it is restarted, which the run reports); then the single-process
  run on the same matrix and a bit-for-bit comparison of every matrix and table (``--no-verify`` skips it).
- ``gpu``: the single-process ``gcnmops.cn_mops(backend="gpu")`` on GPU 0, then dask-cuda LocalCUDACluster
  on the first g GPUs (one worker per GPU with t task threads, backend "gpu"), g in ``--gpus``, t in
  ``--threads``; each run compared with the single-process result. Needs GPUs and ``pip install dask-cuda``.
  The single-process rows also give ``evidence_s``: the seconds the calls' evidence for their qualities takes
  after ``cn_mops`` (made when a result's files are written; each Dask block makes its own, "evidence").
  ``cpu`` and ``gpu``: the Dask runs make no sample QC, as the single-process ``cn_mops`` (``--sample-qc``: they do).
- ``devices``: one process, on a heterogeneous cohort in memory (``heterogeneous_chunk``: gamma region means, 2%
  empty regions, coverages 0.7-1.3, a CNV every ~2,000 regions per sample): ``gcnmops.cn_mops(backend="gpu")`` on
  one GPU, then whole chromosomes on GPUs 0..g-1 (``pipeline.multigpu.run_on_devices``) for g in ``--gpus`` with
  k worker threads per GPU for k in ``--per-device``, each compared with the one-GPU result, best of ``--repeat``
  after a warm-up on every device; with ``--one-gpu MxN``, then ``cn_mops`` on one GPU on such a cohort of M x N.
  Prints a table and the one-GPU runs' segmentation sub-stages (seg_*).
- ``batch``: ``gcnmops batch`` on ``--experiments`` count files with 1..k CPU worker processes.
- ``gpu-stream``: ``gcnmops.run_streaming`` (one process, the CPU or GPUs: ``--backend``, ``--stream-devices``) from
  a count store on disk (the cohort simulated into it chunk by chunk as int32, ``--input`` an existing one) to an
  output folder on disk (call tables, BED/VCF/SEG, integer_copy_number and the ``--keep`` matrices in
  matrices.zarr), after a warm-up run on a 3,000-row store. Reports the seconds per stage (each stage's own: reading
  and writing run on their own threads beside the compute, so they add up to more than the wall; and how long the
  compute waited for them), the wall, the peak host RSS of the streamed run (a thread reading /proc/self/status
  every 20 ms; VmHWM too), the device memory pool's peak (GPU), and checks the result against the in-memory
  ``cn_mops`` + integer copy numbers on the first whole chromosomes of about ``--verify-rows`` regions (each
  chromosome's answer depends on the others only through the samples' totals and, norm=2, coverages); a short table
  at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gcnmops  # noqa: E402
from gcnmops import distributed as gd  # noqa: E402

N_CHROM = 22
#: the heterogeneous cohort's regions without a read
EMPTY_FRACTION = 0.02


# ------------------------------------------------------------------------------------------------ data
def cohort_chunk(a: int, b: int, n: int, seed: int) -> np.ndarray:
    """Rows a:b (float64, order F) of the simulated cohort (see the module docstring)."""
    coverage = np.random.default_rng([seed, 0]).uniform(0.8, 1.2, size=n)
    rng = np.random.default_rng([seed, 1, a])
    mu = rng.gamma(8.0, 12.0, size=b - a)[:, None] * coverage[None, :]
    dosage = np.ones((b - a, n))
    for _ in range(max(1, (b - a) // 2000)):
        s, k = rng.integers(0, max(1, b - a - 40)), rng.integers(0, n)
        dosage[s:s + rng.integers(5, 40), k] = rng.choice([0.5, 1.5])
    return np.asfortranarray(rng.poisson(mu * dosage).astype(np.float64))


def cohort_ranges(m: int) -> pd.DataFrame:
    """25-kb windows, or 1-kb windows where 25-kb ones would make chromosomes longer than chr1 (3M regions: a
    1,000-genomes cohort of 1-kb bins; VCF positions must stay below 2^31)."""
    per = -(-m // N_CHROM)
    width = 25_000 if per * 25_000 <= 250_000_000 else 1_000
    chrom = np.repeat([f"chr{i}" for i in range(1, N_CHROM + 1)], per)[:m]
    start = (np.arange(m) % per) * width + 1
    return pd.DataFrame({"seqnames": chrom, "start": start, "end": start + width - 1})


def read_cohort(path: Path) -> gcnmops.CountData:
    """The count store at ``path`` in memory (float64, order F: the matrix a user's in-memory run takes)."""
    from gcnmops.io.store import open_count_store

    store = open_count_store(path)
    counts = np.asfortranarray(store.rows(0, store.shape[0]), dtype=np.float64)
    return gcnmops.CountData(counts, list(store.sample_names), store.ranges)


# ------------------------------------------------------------------------------------------------ helpers
def local_cluster(workers: int, memory_limit="auto", enforce: bool = False):
    import dask
    from distributed import Client, LocalCluster

    settings = {}
    if enforce:  # the limit is a hard one: above 95% the nanny restarts the worker
        settings = {"distributed.worker.memory.target": False, "distributed.worker.memory.spill": False,
                    "distributed.worker.memory.pause": False, "distributed.worker.memory.terminate": 0.95}
    with dask.config.set(settings):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                               dashboard_address=None)
    return cluster, Client(cluster)


def start_peak_sampler():  # on a worker: its process memory, sampled every 20 ms (state kept on ``sys``:
    import sys            # these functions travel by value, each with its own globals)
    import threading
    import time

    import psutil

    proc, state = psutil.Process(), {"peak": 0}

    def loop():
        while True:
            state["peak"] = max(state["peak"], proc.memory_info().rss)
            time.sleep(0.02)

    threading.Thread(target=loop, daemon=True).start()
    sys.gcnmops_peak = state


def worker_peak():
    import sys

    return sys.gcnmops_peak["peak"]


def throughput(cells: int, seconds: float) -> float:
    return cells / seconds / 1e6


def _differ(a: np.ndarray, b: np.ndarray) -> int:
    if a.dtype.kind == "f":
        return int(np.count_nonzero(~((a == b) | (np.isnan(a) & np.isnan(b)))))
    return int(np.count_nonzero(a != b))


def compare(ours, ref: gcnmops.CNVDetectionResult, rows: int = 250_000) -> dict:
    """Per matrix the number of values that differ in some bit (``ours`` a CNVDetectionResult or a
    DistributedResult, read from its store ``rows`` rows at a time); per table whether it is equal."""
    out = {}
    matrices = {name: (getattr(ours, name), getattr(ref, name)) for name in
                ("normalized_data", "local_assessments", "individual_call", "ini_call", "cn_index")}
    matrices.update({f"params_{k}": (ours.params[k], ref.params[k]) for k in ("L", "A", "cov")})
    for name, (a, b) in matrices.items():
        b = np.asarray(b)
        if not hasattr(a, "chunks"):
            out[name] = _differ(np.asarray(a), b)
            continue
        out[name] = sum(_differ(np.asarray(a[r:r + rows].compute(scheduler="threads")), b[r:r + rows])
                        for r in range(0, b.shape[0], rows))
    for name in ("segmentation", "cnvs", "cnvr"):
        try:
            pd.testing.assert_frame_equal(getattr(ours, name), getattr(ref, name), check_exact=True)
            out[name] = "equal"
        except AssertionError as err:
            out[name] = f"DIFFERENT: {str(err)[:200]}"
    return out


def single_process(data: gcnmops.CountData, backend: str, repeat: int) -> tuple:
    """(result, figures) of the best of ``repeat`` single-process ``gcnmops.cn_mops`` runs after a 3,000-row
    warm-up (compiles the kernels)."""
    gcnmops.cn_mops(gcnmops.CountData(data.counts[:3000], data.sample_names, data.ranges.iloc[:3000]),
                    backend=backend)
    from gcnmops.calls.quality import call_evidence

    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = gcnmops.cn_mops(data, backend=backend)
        whole = time.perf_counter() - t0
        call_evidence(res)  # what a Dask block makes too: the calls' evidence for their qualities
        evidence = time.perf_counter() - t0 - whole
        if best is None or whole < best[0]:
            best = (whole, res.timings["model"], evidence)
    cells = data.counts.shape[0] * data.counts.shape[1]
    return res, {"whole_s": best[0], "model_s": best[1], "evidence_s": best[2],
                 "whole_Mcells_s": throughput(cells, best[0]), "model_Mcells_s": throughput(cells, best[1])}


def dask_runs(client, z: Path, tmp: Path, tag: str, ref, args, warm: dict | None = None, **options) -> tuple:
    """(best whole seconds, its stage timings, the last run's comparison with ``ref`` or None) of ``args.repeat``
    ``gcnmops.distributed.cn_mops`` runs on ``client`` after one warm-up run (workers compile or load the
    kernels; ``warm``: extra options of that run); each run's store is removed after it."""
    options.setdefault("sample_qc", args.sample_qc)  # the single-process cn_mops it is compared with makes none
    gd.cn_mops(str(z), client, store=str(tmp / "warm"), **options, **(warm or {}))
    best, same = None, None
    for r in range(args.repeat):
        store = tmp / f"store-{tag}-{r}"
        t0 = time.perf_counter()
        res = gd.cn_mops(str(z), client, store=str(store), **options)
        whole = time.perf_counter() - t0
        if best is None or whole < best[0]:
            best = (whole, res.timings)
        same = compare(res, ref) if args.verify else None
        shutil.rmtree(store, ignore_errors=True)
    return best[0], best[1], same


def dask_row(what: str, whole: float, timings: dict, same, cells: int, **extra) -> dict:
    """One printed and recorded row of a Dask run."""
    return {"what": what, **extra, "whole_s": whole, "model_s": timings["model"],
            "stages_s": {k: round(v, 2) for k, v in timings.items()}, "whole_Mcells_s": throughput(cells, whole),
            "model_Mcells_s": throughput(cells, timings["model"]), "identical": same}


# ------------------------------------------------------------------------------------------------ modes
def run_cpu(args) -> dict:
    import numba

    tmp = Path(tempfile.mkdtemp(prefix="gcnmops-bench-"))
    m, n = args.regions, args.samples
    cells = m * n
    z = write_cohort(tmp / "cohort.zarr", m, n, args.seed, args.cohort)
    out: dict = {"regions": m, "samples": n, "cores": os.cpu_count(), "runs": []}
    ref, row = single_process(read_cohort(z), "cpu", args.repeat)
    out["runs"].append({"what": f"single process, numba {numba.get_num_threads()} threads", **row})
    print(out["runs"][-1], flush=True)
    for workers in args.workers:
        cluster, client = local_cluster(workers)
        try:
            whole, timings, same = dask_runs(client, z, tmp, str(workers), ref, args, backend="cpu", numba_threads=1,
                                             warm=dict(rows_per_chunk=1000))  # small chunks: every worker loads
        finally:
            client.close()
            cluster.close()
        row = dask_row(f"dask LocalCluster, {workers} worker(s) x 1 thread", whole, timings, same, cells)
        out["runs"].append(row)
        print(row, flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def run_big(args) -> dict:
    base = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="gcnmops-big-"))
    base.mkdir(parents=True, exist_ok=True)
    m, n = args.regions, args.samples
    t0 = time.perf_counter()
    z = Path(args.input) if args.input else write_cohort(base / "cohort.zarr", m, n, args.seed, args.cohort)
    out: dict = {"regions": m, "samples": n, "matrix_GB": m * n * 8 / 1e9, "write_input_s": time.perf_counter() - t0,
                 "workers": args.workers, "memory_limit": args.memory_limit}
    print(out, flush=True)
    cluster, client = local_cluster(args.workers, args.memory_limit, enforce=True)
    try:
        limit = min(w["memory_limit"] for w in client.scheduler_info()["workers"].values())
        before = set(client.scheduler_info()["workers"])
        client.run(start_peak_sampler)
        t0 = time.perf_counter()
        res = gd.cn_mops(str(z), client, backend="cpu", store=str(base / "store"))
        out["dask_s"] = time.perf_counter() - t0
        out["dask_stages_s"] = {k: round(v, 1) for k, v in res.timings.items()}
        out["dask_Mcells_s"] = throughput(m * n, out["dask_s"])
        after = set(client.scheduler_info()["workers"])
        out["workers_restarted"] = len(before - after)
        try:
            out["worker_peak_MB"] = {k: round(v / 1e6) for k, v in client.run(worker_peak).items()}
        except Exception as err:  # noqa: BLE001 - a restarted worker has no sampler
            out["worker_peak_MB"] = f"unavailable ({err})"
        out["memory_limit_MB"] = round(limit / 1e6)
        out["summary"] = res.summary()
    finally:
        client.close()
        cluster.close()
    print(out, flush=True)
    if args.verify:
        t0 = time.perf_counter()
        data = read_cohort(z)
        ref = gcnmops.cn_mops(data, backend="cpu")
        out["single_process_s"] = time.perf_counter() - t0
        out["single_stages_s"] = {k: round(v, 1) for k, v in ref.timings.items()}
        del data
        out["differences"] = compare(res, ref)
        print(out, flush=True)
    if not args.store:
        shutil.rmtree(base, ignore_errors=True)
    return out


def run_gpu(args) -> dict:
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    tmp = Path(tempfile.mkdtemp(prefix="gcnmops-gpu-"))
    m, n = args.regions, args.samples
    cells = m * n
    z = write_cohort(tmp / "cohort.zarr", m, n, args.seed, args.cohort)
    out: dict = {"regions": m, "samples": n, "cores": os.cpu_count(), "runs": []}
    ref, row = single_process(read_cohort(z), "gpu", args.repeat)
    out["runs"].append({"what": "single process, GPU 0", **row})
    print(out["runs"][-1], flush=True)
    for g in args.gpus:
        for threads in args.threads:
            with LocalCUDACluster(CUDA_VISIBLE_DEVICES=list(range(g)), threads_per_worker=threads) as cluster, \
                    Client(cluster) as client:
                whole, timings, same = dask_runs(client, z, tmp, f"{g}-{threads}", ref, args, backend="gpu")
            row = dask_row(f"dask-cuda, {g} GPU worker(s) x {threads} thread(s)", whole, timings, same, cells,
                           gpus=g, threads=threads)
            out["runs"].append(row)
            print(row, flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def heterogeneous_chunk(a: int, b: int, n: int, seed: int) -> np.ndarray:
    """Rows a:b (float64, order F) of a heterogeneous cohort: gamma-distributed region means, EMPTY_FRACTION of
    the regions without a read, sample coverages 0.7-1.3 and, per sample, a gain or loss (0.5x / 1.5x, 3-40
    regions) every ~2,000 regions."""
    coverage = np.random.default_rng([seed, 0]).uniform(0.7, 1.3, size=n)
    rng = np.random.default_rng([seed, 2, a])
    mu = rng.gamma(2.0, 45.0, size=b - a)
    mu[rng.random(b - a) < EMPTY_FRACTION] = 0.0
    dosage = np.ones((b - a, n))
    for k in range(n):
        for s in rng.integers(0, max(1, b - a - 40), size=rng.poisson((b - a) / 2000)):
            dosage[s:s + rng.integers(3, 40), k] = rng.choice([0.5, 1.5])
    return np.asfortranarray(rng.poisson(mu[:, None] * coverage[None, :] * dosage).astype(np.float64))


def heterogeneous_cohort(m: int, n: int, seed: int, rows: int = 100_000) -> gcnmops.CountData:
    """The heterogeneous cohort in memory, its chunks simulated on every core."""
    from concurrent.futures import ThreadPoolExecutor

    counts = np.empty((m, n), order="F")

    def fill(a: int) -> None:
        counts[a:a + rows] = heterogeneous_chunk(a, min(m, a + rows), n, seed)

    with ThreadPoolExecutor(os.cpu_count()) as pool:
        list(pool.map(fill, range(0, m, rows)))
    return gcnmops.CountData(counts, [f"S{k + 1}" for k in range(n)], cohort_ranges(m))


def _seg_stats(res) -> dict:
    """The segmentation's sub-stage seconds and counts of a one-GPU run (seg_*)."""
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in res.gpu_stats.items() if k.startswith("seg_")}


def run_devices(args) -> dict:
    m, n = args.regions, args.samples
    data = heterogeneous_cohort(m, n, args.seed)
    out: dict = {"regions": m, "samples": n, "cores": os.cpu_count(), "cohort": "heterogeneous", "runs": []}
    from gcnmops.params import METHODS
    from gcnmops.pipeline.multigpu import run_on_devices
    from gcnmops.pipeline.plan import RunPlan

    def run(counts: gcnmops.CountData, g: int, per_device: int):
        if g == 1 and per_device == 0:
            return gcnmops.cn_mops(counts, backend="gpu")
        row = METHODS["cn.mops"]
        return run_on_devices(RunPlan.build(row, row.params(), "gpu", counts.n_regions), counts, list(range(g)), {},
                              per_device=per_device)

    warm = gcnmops.CountData(data.counts[:60_000], data.sample_names, data.ranges.iloc[:60_000])
    ref = None
    configs = [(1, 0)] + [(g, k) for g in args.gpus for k in args.per_device]
    for g, per_device in configs:
        run(warm, g, per_device or 1)  # every device loads its kernels
        best = None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            res = run(data, g, per_device)
            whole = time.perf_counter() - t0
            if best is None or whole < best[0]:
                best = (whole, dict(res.timings), {k: round(v, 3) if isinstance(v, float) else v
                                                   for k, v in res.gpu_stats.items() if k.startswith("device_")})
        ref = res if ref is None else ref
        what = "cn_mops, 1 GPU" if per_device == 0 else f"chromosomes on {g} GPU(s) x {per_device} thread(s)"
        row = {"what": what, "gpus": g, "per_device": per_device, "whole_s": round(best[0], 3),
               "speedup": round(out["runs"][0]["whole_s"] / best[0], 2) if out["runs"] else 1.0,
               "stages": {k: round(v, 3) for k, v in best[1].items()},
               "same_as_1_gpu": compare(res, ref) if args.verify else None, "device_stats": best[2]}
        if per_device == 0:
            row["segmentation"] = _seg_stats(res)
        out["runs"].append(row)
        print(row, flush=True)
    del data, ref, res
    if args.one_gpu:
        m1, n1 = args.one_gpu
        data = heterogeneous_cohort(m1, n1, args.seed + 1)
        best = None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            res = gcnmops.cn_mops(data, backend="gpu")
            whole = time.perf_counter() - t0
            if best is None or whole < best[0]:
                best = (whole, dict(res.timings), _seg_stats(res))
        row = {"what": f"cn_mops, 1 GPU, {m1} x {n1}", "whole_s": round(best[0], 3),
               "stages": {k: round(v, 3) for k, v in best[1].items()}, "segmentation": best[2]}
        out["runs"].append(row)
        print(row, flush=True)
    print_devices_table(out)
    return out


def print_devices_table(out: dict) -> None:
    print(f"\n{out['regions']:,} x {out['samples']} (heterogeneous cohort), {out['cores']} cores")
    print("| run | whole (s) | speedup | normalize | model | segment_call | identical |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in out["runs"]:
        st = r["stages"]
        same = r.get("same_as_1_gpu")
        ok = "-" if same is None else ("yes" if all(v in (0, "equal") for v in same.values()) else "NO")
        print(f"| {r['what']} | {r['whole_s']} | {r.get('speedup', '-')} | {st.get('normalize', 0):.2f} | "
              f"{st.get('model', 0):.2f} | {st.get('segment_call', 0):.2f} | {ok} |")
    for r in out["runs"]:
        if "segmentation" in r:
            print(f"{r['what']}: {r['segmentation']}")


def run_batch_bench(args) -> dict:
    from gcnmops.pipeline.batch import Experiment, run_batch
    from gcnmops.alignments.counting import write_counts

    tmp = Path(tempfile.mkdtemp(prefix="gcnmops-batch-"))
    exps = []
    for k in range(args.experiments):
        counts = cohort_chunk(0, args.regions, args.samples, args.seed + k)
        data = gcnmops.CountData(counts, [f"S{j + 1}" for j in range(args.samples)], cohort_ranges(args.regions))
        path = write_counts(data, tmp / f"e{k:03d}.tsv")
        exps.append(Experiment(id=f"e{k:03d}", input=path, method="cn.mops"))
    out: dict = {"experiments": args.experiments, "regions": args.regions, "samples": args.samples, "runs": []}
    for workers in args.workers:
        t0 = time.perf_counter()
        summary = run_batch(exps, tmp / f"out{workers}", workers=workers, echo=lambda s: None, formats=["tsv"])
        wall = time.perf_counter() - t0
        row = {"workers": workers, "wall_s": wall, "experiments_per_min": 60 * len(exps) / wall,
               "done": int((summary["status"] == "done").sum())}
        out["runs"].append(row)
        print(row, flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return out


# ------------------------------------------------------------------------------------------------ gpu-stream
class PeakSampler:
    """Peak resident memory of this process (and of the device memory pool, when cupy is in use) from now until
    ``stop()``: a thread reading /proc/self/status every 20 ms."""

    def __init__(self, device: bool):
        import threading

        self.host = self.device = 0
        self._pool = None
        if device:
            import cupy

            self._pool = cupy.get_default_memory_pool()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    @staticmethod
    def status(key: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
        return 0

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.host = max(self.host, self.status("VmRSS"))
            if self._pool is not None:
                self.device = max(self.device, self._pool.total_bytes())
            time.sleep(0.02)

    def stop(self) -> "PeakSampler":
        self._stop.set()
        self._thread.join()
        return self


#: the simulated cohorts (``--cohort``): rows a:b of n samples from a seed, float64 order F
COHORTS = {"heterogeneous": heterogeneous_chunk, "simple": cohort_chunk}


def write_cohort(path: Path, m: int, n: int, seed: int, kind: str = "heterogeneous", rows: int = 100_000) -> Path:
    """The cohort ``kind`` (COHORTS) as a count store, as ``gcnmops convert`` writes one (int32 counts with
    chunk checksums, the samples' totals, ranges), simulated chunk by chunk in parallel processes."""
    from gcnmops.io.store import CountStoreWriter

    from concurrent.futures import ProcessPoolExecutor

    ranges = cohort_ranges(m)
    writer = CountStoreWriter(path, n, [f"S{k + 1}" for k in range(n)], m_hint=m)
    starts = list(range(0, m, rows))
    ends = [min(m, a + rows) for a in starts]
    try:  # chunks simulated in parallel processes (3e9 Poisson draws take minutes on one core), appended in order
        with ProcessPoolExecutor(max_workers=min(32, os.cpu_count() or 1)) as pool:
            for a, b, chunk in zip(starts, ends, pool.map(_int_chunk, starts, ends, [n] * len(starts),
                                                          [seed] * len(starts), [kind] * len(starts))):
                writer.append(chunk, ranges.iloc[a:b])
        return writer.close()
    except BaseException:
        writer.abort()
        raise


def _int_chunk(a: int, b: int, n: int, seed: int, kind: str) -> np.ndarray:
    """A chunk of the cohort ``kind`` as int32 (the counts are whole numbers): half the bytes sent back by each
    worker process."""
    return COHORTS[kind](a, b, n, seed).astype(np.int32)


def run_gpu_stream(args) -> dict:
    from gcnmops.io.store import open_count_store

    tmp = Path(args.store or tempfile.mkdtemp(prefix="gcnmops-stream-"))
    tmp.mkdir(parents=True, exist_ok=True)
    out: dict = {"backend": args.backend, "keep": args.keep, "devices": args.stream_devices}
    t0 = time.perf_counter()
    if args.input:
        z = Path(args.input)
    else:
        z = write_cohort(tmp / "cohort.zarr", args.regions, args.samples, args.seed, args.cohort)
        out["simulate_write_s"] = time.perf_counter() - t0
        print(f"cohort store written in {out['simulate_write_s']:.1f} s: {z}", file=sys.stderr, flush=True)
    store = open_count_store(z)
    m, n = store.shape
    out.update(regions=m, samples=n, chromosomes=len(store.blocks), store_dtype=str(store.dtype))
    warm = write_cohort(tmp / "warm.zarr", 3000, n, args.seed, args.cohort)
    t1 = time.perf_counter()
    gcnmops.run_streaming(warm, tmp / "warm-out", backend=args.backend, keep=args.keep)
    print(f"warm-up run in {time.perf_counter() - t1:.1f} s", file=sys.stderr, flush=True)
    base = PeakSampler.status("VmRSS")
    sampler = PeakSampler(device=args.backend == "gpu")
    t0 = time.perf_counter()
    res = gcnmops.run_streaming(z, tmp / "out", backend=args.backend, keep=args.keep, devices=args.stream_devices)
    whole = time.perf_counter() - t0
    sampler.stop()
    out.update(whole_s=whole, stages_s=dict(res.timings), rss_before_gb=base / 1e9, peak_rss_gb=sampler.host / 1e9,
               vmhwm_gb=PeakSampler.status("VmHWM") / 1e9, device_pool_peak_gb=sampler.device / 1e9,
               cnvs=len(res.cnvs), cnv_regions=len(res.cnvr), Mcells_s=throughput(m * n, whole))
    if args.verify_rows:
        out["verify"] = verify_slice(store, res, args.verify_rows, args.backend)
    if not args.store:
        shutil.rmtree(tmp, ignore_errors=True)
    print_stream_table(out)
    return out


def verify_slice(store, res, rows: int, backend: str) -> dict:
    """The streamed result on the first whole chromosomes of about ``rows`` regions against the in-memory run of
    that slice (cn_mops + integer copy numbers): differing values per kept matrix, equality of the tables."""
    blocks = [blk for blk in store.blocks if blk[2] <= max(rows, store.blocks[0][2])]
    end = blocks[-1][2]
    data = gcnmops.CountData(np.asfortranarray(store.rows(0, end), dtype=np.float64), store.sample_names,
                             store.ranges.iloc[:end].reset_index(drop=True))
    ref = gcnmops.cn_mops(data, backend=backend)
    if len(ref.cnvr):
        ref = gcnmops.calc_integer_copy_numbers(ref, backend=backend)
    elif len(res.cnvr):  # the streamed run labelled these CNV-free chromosomes' segments as the integer step does
        from gcnmops.calls.integer import segment_labels

        ref.segmentation = segment_labels(ref.segmentation, ref.params)
    names = {blk[0] for blk in blocks}
    out = {"rows": end, "chromosomes": len(blocks)}
    for name in res.kept:
        ours = np.asarray(res.matrix(name)[:end])
        theirs = ref.cn_index if name == "integer_copy_number" else (
            ref.params[name[7:]] if name.startswith("params_") else getattr(ref, name))
        out[name] = _differ(ours, np.asarray(theirs))
    for name in ("segmentation", "cnvs", "cnvr"):
        ours = getattr(res, name)
        ours = ours[ours["seqnames"].isin(names)].reset_index(drop=True)
        try:
            pd.testing.assert_frame_equal(ours, getattr(ref, name).reset_index(drop=True), check_dtype=False)
            out[name] = "equal"
        except AssertionError as err:
            out[name] = f"DIFFERENT: {str(err)[:200]}"
    out["identical"] = all(v in (0, "equal") for k, v in out.items() if k not in ("rows", "chromosomes"))
    return out


def print_stream_table(out: dict) -> None:
    """The short table printed at the end of gpu-stream."""
    st = out["stages_s"]
    rows = [("shape", f"{out['regions']:,} x {out['samples']:,} ({out['chromosomes']} chromosomes, "
                      f"{out['store_dtype']} store)"),
            ("backend / kept", f"{out['backend']} / integer_copy_number, {out['keep']}"),
            ("whole (store -> folder)", f"{out['whole_s']:.1f} s ({out['Mcells_s']:.2f} Mcells/s)")]
    waits = [k for k in st if k.endswith("_wait")]
    stages = [k for k in st if k != "total" and k not in waits]
    rows += [(f"  {k}", f"{st[k]:.1f} s") for k in stages]
    if waits:  # read and write run on their own threads, beside the compute: the stages add up to more than the wall
        rows += [("  stages' own seconds, summed", f"{sum(st[k] for k in stages):.1f} s (read, write overlapped)"),
                 ("  compute waited for read / write", " / ".join(f"{st[k]:.1f}" for k in waits) + " s")]
    rows += [("peak host RSS", f"{out['peak_rss_gb']:.2f} GB (before the run {out['rss_before_gb']:.2f} GB; VmHWM "
                               f"{out['vmhwm_gb']:.2f} GB)"),
             ("device pool peak", f"{out['device_pool_peak_gb']:.2f} GB"),
             ("CNVs / CNV regions", f"{out['cnvs']:,} / {out['cnv_regions']:,}")]
    if "verify" in out:
        v = out["verify"]
        rows.append(("verify (in-memory slice)", f"{'identical' if v['identical'] else 'DIFFERENT'} on "
                                                 f"{v['rows']:,} rows, {v['chromosomes']} chromosomes"))
    width = max(len(k) for k, _ in rows)
    print("\n".join(f"{k:<{width}}  {v}" for k, v in rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["cpu", "big", "gpu", "devices", "batch", "gpu-stream"])
    ap.add_argument("--regions", type=int)
    ap.add_argument("--samples", type=int)
    ap.add_argument("--workers", type=lambda s: [int(v) for v in s.split(",")])
    ap.add_argument("--gpus", type=lambda s: [int(v) for v in s.split(",")], default=[1, 2, 4])
    ap.add_argument("--threads", type=lambda s: [int(v) for v in s.split(",")], default=[1],
                    help="gpu: task threads per GPU worker (each value a run)")
    ap.add_argument("--per-device", type=lambda s: [int(v) for v in s.split(",")], default=[1, 2],
                    help="devices: worker threads per GPU (each value a run)")
    ap.add_argument("--one-gpu", type=lambda s: tuple(int(v) for v in s.lower().split("x")), default=None,
                    help="devices: then cn_mops on one GPU on a heterogeneous cohort of M x N (e.g. 1000000x400)")
    ap.add_argument("--experiments", type=int, default=20)
    ap.add_argument("--memory-limit", default="1GB")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--no-verify", dest="verify", action="store_false")
    ap.add_argument("--input", default=None, help="big: an existing cohort Zarr group (skips writing one)")
    ap.add_argument("--store", default=None, help="big: keep the input and the store here")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--sample-qc", action="store_true",
                    help="cpu, big, gpu: the Dask runs make the sample QC (gcnmops.distributed.cn_mops's default; "
                         "the single-process cn_mops they are compared with makes none)")
    ap.add_argument("--cohort", choices=sorted(COHORTS), default="heterogeneous",
                    help="the simulated cohort of cpu, big, gpu and gpu-stream (simple: the figures before "
                         "2026-11-29)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--backend", choices=["gpu", "cpu"], default="gpu", help="gpu-stream: where each chromosome runs")
    ap.add_argument("--keep", default="local_assessments", help="gpu-stream: matrices kept besides integer_copy_number")
    ap.add_argument("--stream-devices", default=None,
                    type=lambda s: s if s == "all" else [int(v) for v in s.split(",")],
                    help="gpu-stream: the GPUs the chromosomes run on ('all' or ids; default GPU 0)")
    ap.add_argument("--verify-rows", type=int, default=200_000,
                    help="gpu-stream: check the first whole chromosomes of about this many rows in memory (0: no)")
    args = ap.parse_args()
    defaults = {"cpu": (400_000, 50, [1, 2]), "big": (5_000_000, 50, [2]), "gpu": (5_000_000, 50, None),
                "devices": (5_000_000, 50, None), "batch": (20_000, 20, [1, 2]), "gpu-stream": (1_000_000, 400, None)}[args.mode]
    args.regions = args.regions or defaults[0]
    args.samples = args.samples or defaults[1]
    if args.workers is None:
        args.workers = defaults[2]
    if args.mode == "big":
        args.workers = args.workers[0]
    result = {"cpu": run_cpu, "big": run_big, "gpu": run_gpu, "devices": run_devices, "batch": run_batch_bench,
              "gpu-stream": run_gpu_stream}[args.mode](args)
    result.update(mode=args.mode, date=time.strftime("%Y-%m-%d %H:%M"), load=os.getloadavg())
    if args.mode != "gpu-stream":  # it prints its own table
        print(json.dumps(result, indent=1, default=str))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
