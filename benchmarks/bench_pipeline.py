"""The whole cn.MOPS pipeline, stage by stage, on a BM-B-shaped cohort (481,299 regions x 15 samples), a
BM-A-shaped one (6,904,726 x 15: the same simulation, 22 chromosomes of 25-kb windows) or a chr21-shaped one
(481,299 x 5, one chromosome of 100-bp bins with heterogeneous means and an unread gap).

Usage: python benchmarks/bench_pipeline.py [--shape bmb|bma|chr21] [--regions N] [--samples N] [--threads N]
                                           [--clock wall|cpu] [--backend cpu|gpu|auto] [--repeat 1] [--check]
                                           [--profile N] [--json PATH]
Per-core ratios against cn.mops 1.53 measured on this kind of 2-core VM (one core, alternating runs; stated
constants, as cn.mops is not installed here): BM-B cn.mops() + calcIntegerCopyNumbers 98 s (fastest of 98-117 s;
85.3 + 0.7 s on a quiet machine), real chr21 counts 49.2 s (fastest of 49.2-52.8 s). Two ratios: cn.mops's one-core
time over (wall x threads), and over the process's CPU seconds (every thread's; robust to other jobs' load).
``--clock cpu``: the stage table in the process's CPU seconds too (the pipeline's stage timer reads
``time.process_time``).
One warm-up run on a small matrix compiles the kernels first. Timed: ``cn_mops(CountData)`` (host arrays in,
host result out) plus ``calc_integer_copy_numbers(result, backend)``. ``--repeat``: time the whole pipeline
that many times (stage table of the run with the median whole time; every run's whole time listed). With the
GPU backend the sub-stages (the result's gpu_stats) are listed too. ``--profile N``: one more run under
cProfile, its N most expensive functions (cumulative) printed. ``--check``: the GPU segmentation of the run's
sINI against the CPU segmentation (``segment.segment_columns_arrays``; bit-identical arrays required).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import time

import numpy as np
import pandas as pd

import gcnmops
import gcnmops.progress
from gcnmops.data import make_count_data

#: shape -> ((regions, samples), cn.mops 1.53 + calcIntegerCopyNumbers on one core of this kind of VM, s; None:
#: not timed, as BM-A's 6,904,726 x 15 on one core would take cn.mops ~20 minutes)
SHAPES = {"bmb": ((481_299, 15), 98.0), "chr21": ((481_299, 5), 49.2), "bma": ((6_904_726, 15), None)}


def simulated_cohort(m: int, n: int, seed: int = 11):
    """Poisson counts on 22 chromosomes of 25-kb windows, with 0.5x/1.5x dosage blocks of 5-40 windows."""
    rng = np.random.default_rng(seed)
    mu = rng.gamma(8.0, 12.0, size=m)[:, None] * rng.uniform(0.8, 1.2, size=n)[None, :]
    dosage = np.ones((m, n))
    for _ in range(m // 2000):
        s, k = rng.integers(0, m - 40), rng.integers(0, n)
        dosage[s:s + rng.integers(5, 40), k] = rng.choice([0.5, 1.5])
    counts = rng.poisson(mu * dosage).astype(np.float64)
    per = -(-m // 22)
    chrom = np.repeat([f"chr{i}" for i in range(1, 23)], per)[:m]
    start = (np.arange(m) % per) * 25_000 + 1
    ranges = pd.DataFrame({"seqnames": chrom, "start": start, "end": start + 24_999})
    return make_count_data(counts, [f"S{k + 1}" for k in range(n)], ranges)


def chr21_cohort(m: int, n: int, seed: int = 21):
    """Poisson counts of one chromosome in 100-bp bins: region means gamma(1.5, 20) (heterogeneous, many low), the
    first 15% unread (an assembly gap: zeros), 0.5x/1.5x dosage blocks of 5-200 bins."""
    rng = np.random.default_rng(seed)
    mu = rng.gamma(1.5, 20.0, size=m)[:, None] * rng.uniform(0.7, 1.3, size=n)[None, :]
    mu[: int(0.15 * m)] = 0.0
    dosage = np.ones((m, n))
    for _ in range(m // 5000):
        s, k = rng.integers(int(0.15 * m), m - 200), rng.integers(0, n)
        dosage[s:s + rng.integers(5, 200), k] = rng.choice([0.5, 1.5])
    counts = rng.poisson(mu * dosage).astype(np.float64)
    start = np.arange(m) * 100 + 1
    ranges = pd.DataFrame({"seqnames": np.repeat("chr21", m), "start": start, "end": start + 99})
    return make_count_data(counts, [f"S{k + 1}" for k in range(n)], ranges)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="bmb")
    ap.add_argument("--regions", type=int, default=None)
    ap.add_argument("--samples", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    (m, n), _ = SHAPES[args.shape]
    args.regions = args.regions or m
    args.samples = args.samples or n
    if args.threads:
        import numba

        numba.set_num_threads(args.threads)
    if args.clock == "cpu":  # stage figures in CPU seconds of the whole process (every thread), not wall-clock
        import types

        gcnmops.progress.time = types.SimpleNamespace(perf_counter=time.process_time)
    simulate = chr21_cohort if args.shape == "chr21" else simulated_cohort
    data = simulate(args.regions, args.samples)
    warm = simulated_cohort(3000, args.samples, seed=1)
    warmed = gcnmops.cn_mops(warm, backend=args.backend)
    if len(warmed.cnvr):  # a small warm-up cohort of many samples may have no CNV region to label
        gcnmops.calc_integer_copy_numbers(warmed, backend=args.backend)
    runs = []
    for _ in range(max(args.repeat, 1)):
        result = integer = None  # results of the previous run are released first (pinned pools)
        result, integer, run = timed_run(data, args.backend)
        runs.append(run)
    report = dict(shape=args.shape, clock=args.clock, regions=args.regions, samples=args.samples, backend=args.backend,
                  cores=os.cpu_count(), threads=threads(), load=os.getloadavg(), device=device_name(args.backend),
                  runs=runs)
    if args.profile:
        import cProfile
        import io
        import pstats

        result = integer = None
        prof = cProfile.Profile()
        prof.enable()
        result, integer, run = timed_run(data, args.backend)
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(args.profile)
        report["profile"] = dict(run=run, top=text.getvalue())
        print(f"profiled run: whole {run['whole']:.3f} s")
        print("\n".join(ln[:140] for ln in text.getvalue().splitlines() if ln.strip())[-7000:])
    if args.check:
        report["check"] = check_segmentation(result)
        print("check:", report["check"])
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=1, default=str)
    print_table(args, runs)


def print_table(args, runs: list[dict]) -> None:
    """The stage table of the run with the median whole time (sub-stages indented), every run's whole time."""
    order = sorted(range(len(runs)), key=lambda r: runs[r]["whole"])
    med = runs[order[len(order) // 2]]
    print(f"{args.regions:,} regions x {args.samples} samples ({args.shape}), backend {args.backend}, "
          f"{os.cpu_count()} cores, {threads()} threads, "
          f"{device_name(args.backend)}; {med['n_segments']:,} segments, {med['n_cnvs']:,} CNVs, "
          f"{med['n_cnvr']:,} CNV regions")
    print(f"{'stage':<22}{'seconds':>9}  ({args.clock}-clock)")
    for stage, secs in med["stages"].items():
        print(f"{stage:<22}{secs:>9.3f}")
        prefix = {"segment_call": "seg_", "normalize": "norm_", "model": "model_"}.get(stage)
        sub = {k: v for k, v in med["sub"].items() if prefix and k.startswith(prefix)}
        for k, v in sub.items():
            print(f"  {k:<20}{v:>9.3f}" if isinstance(v, float) else (f"  {k:<20}{v:>9,}" if isinstance(v, int)
                                                                       else f"  {k:<20}{v}"))
    total = med["whole"]
    shape, ref = SHAPES[args.shape]
    t = threads()
    vs_cn_mops = (f"   cn.mops (one core, stated) {ref:.1f} s -> {ref / total:.1f}x; per core {ref / (total * t):.1f}x "
                  f"(wall x {t} threads), {ref / med['cpu']:.1f}x (CPU seconds {med['cpu']:.2f})"
                  if (args.regions, args.samples) == shape and ref else "   (cn.mops timed on the full BM-B and chr21 "
                  "shapes only)")
    print(f"{'whole pipeline':<22}{total:>9.3f}{vs_cn_mops}")
    if len(runs) > 1:
        print("whole pipeline, every run: " + ", ".join(f"{r['whole']:.3f}" for r in runs))
        print("CPU seconds, every run: " + ", ".join(f"{r['cpu']:.3f}" for r in runs))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


def threads() -> int:
    import numba

    return numba.get_num_threads()


def timed_run(data, backend: str):
    """(result, integer result, timings) of one whole pipeline: cn_mops, then calc_integer_copy_numbers."""
    clock = gcnmops.progress.time.perf_counter  # the stages' clock: wall, or CPU with --clock cpu
    c0 = time.process_time()
    t0, s0 = time.perf_counter(), clock()
    result = gcnmops.cn_mops(data, backend=backend)
    t_mops, s_mops = time.perf_counter() - t0, clock() - s0
    t0, s0 = time.perf_counter(), clock()
    integer = gcnmops.calc_integer_copy_numbers(result, backend=backend)
    t_int, s_int = time.perf_counter() - t0, clock() - s0
    sub = dict(result.gpu_stats)
    other = s_mops - sum(result.timings.values())  # gr, the result object
    run = dict(stages={**result.timings, "result assembly": other, "integer copy numbers": s_int}, sub=sub,
               whole=t_mops + t_int, cpu=time.process_time() - c0, n_segments=len(result.segmentation),
               n_cnvs=len(integer.cnvs), n_cnvr=len(integer.cnvr))
    return result, integer, run


def device_name(backend: str) -> str:
    """The GPU's name (device 0) for the GPU backend, else "CPU"."""
    if backend == "cpu":
        return "CPU"
    try:
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - no cupy / no device: the backend fell back to the CPU
        return "no GPU"


def check_segmentation(result) -> dict:
    """GPU segmentation of the result's sINI == CPU segmentation (arrays bit for bit), with timings."""
    from gcnmops.data import chromosome_blocks
    from gcnmops.segmentation.gpu import segment_columns_arrays_gpu, statistic_difference

    seg_cpu = importlib.import_module("gcnmops.segmentation.cpu")
    sini = result.local_assessments
    blocks = [(b, e) for _, b, e in chromosome_blocks(result.gr["seqnames"].to_numpy())]
    t0 = time.perf_counter()
    ref = seg_cpu.segment_columns_arrays(sini, blocks, min_seg=int(result.params["minWidth"]))
    t_cpu = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = segment_columns_arrays_gpu(sini, blocks, min_seg=int(result.params["minWidth"]))
    t_gpu = time.perf_counter() - t0
    same = all(ref[k].shape == out[k].shape and (ref[k] == out[k]).all() for k in ref)
    return dict(identical=bool(same), segments=int(ref["start"].size), cpu_segmentation_s=round(t_cpu, 3),
                gpu_segmentation_s=round(t_gpu, 3),
                **statistic_difference(sini, blocks, min_seg=int(result.params["minWidth"])))


if __name__ == "__main__":
    main()
