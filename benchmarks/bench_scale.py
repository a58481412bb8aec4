"""Scale-out: gcnmops.distributed (Dask) against the number of workers / GPUs, the batch runner against the
number of worker processes, and a cohort larger than a worker's memory.

Usage:
  python benchmarks/bench_scale.py cpu   [--regions 400000] [--samples 50] [--workers 1,2] [--repeat 2]
  python benchmarks/bench_scale.py big   [--regions 5000000] [--samples 50] [--memory-limit 1GB] [--workers 2]
                                         [--no-verify] [--store DIR]
  python benchmarks/bench_scale.py gpu   [--regions 5000000] [--samples 50] [--gpus 1,2,4] [--threads 1]
                                         [--repeat 2] [--no-verify]
  python benchmarks/bench_scale.py batch [--experiments 20] [--regions 20000] [--samples 20] [--workers 1,2]
  common: [--json PATH] [--seed 11]

The cohort: Poisson counts on 22 chromosomes of 25-kb windows (gamma-distributed region means, sample
coverages 0.8-1.2, 0.5x / 1.5x dosage blocks of 5-40 windows: the EM runs on every region), simulated chunk
by chunk (seeded per chunk) into a Zarr store, so a cohort larger than memory never exists as one array
except for the single-process reference.

- ``cpu``: LocalCluster of 1..k worker processes with one thread each (numba: one thread per worker, so k
  workers use k cores), against the single-process ``gcnmops.cn_mops`` on all cores. Throughput =
  regions x samples / seconds, for the whole pipeline and for the model stage; best of ``--repeat``.
- ``big``: the cohort (default 5M x 50 = 2 GB of float64) on ``--workers`` workers with ``--memory-limit``
  each (enforced: a worker above 95% of it is restarted, which the run reports); then the single-process
  run on the same matrix and a bit-for-bit comparison of every matrix and table (``--no-verify`` skips it).
- ``gpu``: the single-process ``gcnmops.cn_mops(backend="gpu")`` on GPU 0, then dask-cuda LocalCUDACluster
  on the first g GPUs (one worker per GPU with t task threads, backend "gpu"), g in ``--gpus``, t in
  ``--threads``; each run compared with the single-process result. Needs GPUs and ``pip install dask-cuda``.
- ``batch``: ``gcnmops batch`` on ``--experiments`` count files with 1..k CPU worker processes.
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
    per = -(-m // N_CHROM)
    chrom = np.repeat([f"chr{i}" for i in range(1, N_CHROM + 1)], per)[:m]
    start = (np.arange(m) % per) * 25_000 + 1
    return pd.DataFrame({"seqnames": chrom, "start": start, "end": start + 24_999})


def write_cohort(path: Path, m: int, n: int, seed: int, rows: int = 100_000) -> Path:
    """The cohort as a Zarr group (save_counts's layout), written chunk by chunk."""
    import zarr

    group = zarr.open_group(str(path), mode="w")
    arr = zarr.open_array(str(path / "counts"), mode="w", shape=(m, n), chunks=(rows, n), dtype="f8")
    for a in range(0, m, rows):
        arr[a:a + rows] = cohort_chunk(a, min(m, a + rows), n, seed)
    group.attrs["sample_names"] = [f"S{k + 1}" for k in range(n)]
    cohort_ranges(m).to_parquet(path / "ranges.parquet", index=False)
    return path


def read_cohort(path: Path) -> gcnmops.CountData:
    import zarr

    counts = np.asfortranarray(zarr.open_array(str(path / "counts"), mode="r")[:])
    names = list(zarr.open_group(str(path), mode="r").attrs["sample_names"])
    return gcnmops.CountData(counts, names, pd.read_parquet(path / "ranges.parquet"))


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
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = gcnmops.cn_mops(data, backend=backend)
        whole = time.perf_counter() - t0
        if best is None or whole < best[0]:
            best = (whole, res.timings["model"])
    cells = data.counts.shape[0] * data.counts.shape[1]
    return res, {"whole_s": best[0], "model_s": best[1], "whole_Mcells_s": throughput(cells, best[0]),
                 "model_Mcells_s": throughput(cells, best[1])}


def dask_runs(client, z: Path, tmp: Path, tag: str, ref, args, warm: dict | None = None, **options) -> tuple:
    """(best whole seconds, its stage timings, the last run's comparison with ``ref`` or None) of ``args.repeat``
    ``gcnmops.distributed.cn_mops`` runs on ``client`` after one warm-up run (workers compile or load the
    kernels; ``warm``: extra options of that run); each run's store is removed after it."""
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
    z = write_cohort(tmp / "cohort.zarr", m, n, args.seed)
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
    z = Path(args.input) if args.input else write_cohort(base / "cohort.zarr", m, n, args.seed)
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
    z = write_cohort(tmp / "cohort.zarr", m, n, args.seed)
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


def run_batch_bench(args) -> dict:
    from gcnmops.batch import Experiment, run_batch
    from gcnmops.io.counting import write_counts

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["cpu", "big", "gpu", "batch"])
    ap.add_argument("--regions", type=int)
    ap.add_argument("--samples", type=int)
    ap.add_argument("--workers", type=lambda s: [int(v) for v in s.split(",")])
    ap.add_argument("--gpus", type=lambda s: [int(v) for v in s.split(",")], default=[1, 2, 4])
    ap.add_argument("--threads", type=lambda s: [int(v) for v in s.split(",")], default=[1],
                    help="gpu: task threads per GPU worker (each value a run)")
    ap.add_argument("--experiments", type=int, default=20)
    ap.add_argument("--memory-limit", default="1GB")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--no-verify", dest="verify", action="store_false")
    ap.add_argument("--input", default=None, help="big: an existing cohort Zarr group (skips writing one)")
    ap.add_argument("--store", default=None, help="big: keep the input and the store here")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    defaults = {"cpu": (400_000, 50, [1, 2]), "big": (5_000_000, 50, [2]), "gpu": (5_000_000, 50, None),
                "batch": (20_000, 20, [1, 2])}[args.mode]
    args.regions = args.regions or defaults[0]
    args.samples = args.samples or defaults[1]
    if args.workers is None:
        args.workers = defaults[2]
    if args.mode == "big":
        args.workers = args.workers[0]
    result = {"cpu": run_cpu, "big": run_big, "gpu": run_gpu, "batch": run_batch_bench}[args.mode](args)
    result.update(mode=args.mode, date=time.strftime("%Y-%m-%d %H:%M"), load=os.getloadavg())
    print(json.dumps(result, indent=1, default=str))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
