"""Normalization and modelling on the CPU backend on a BM-B-shaped matrix (481,299 x 15).

Usage: python benchmarks/bench_model.py [--regions 481299] [--samples 15] [--repeat 3] [--threads 1,2]
Prints the best of ``repeat`` runs per stage and thread count (after one warm-up run that compiles the
kernels), the modelling time per region per core (wall time x threads / regions) and the scaling.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from numba import set_num_threads

from gcnmops.data import chromosome_blocks
from gcnmops.model.cpu import fit_cpu
from gcnmops.model.spec import ModelSpec
from gcnmops.normalization.cpu import normalize_chromosomes
from gcnmops.params import DEFAULT_CLASSES, DEFAULT_FOLDS


def simulated_counts(m: int, n: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """Poisson counts around per-region means ~ Gamma(8, 12), 5% of cells at half or 1.5x dosage."""
    rng = np.random.default_rng(seed)
    mu = rng.gamma(8.0, 12.0, size=m)[:, None] * rng.uniform(0.8, 1.2, size=n)[None, :]
    dosage = rng.choice([0.5, 1.0, 1.5], p=[0.025, 0.95, 0.025], size=(m, n))
    x = np.asfortranarray(rng.poisson(mu * dosage).astype(np.float64))
    chrom = np.repeat([f"chr{i}" for i in range(1, 23)], -(-m // 22))[:m].astype(object)
    return x, chrom


def best_of(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--regions", type=int, default=481_299)
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", default=str(os.cpu_count()), help="comma-separated thread counts")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    x, chrom = simulated_counts(args.regions, args.samples)
    spec = ModelSpec.build(DEFAULT_FOLDS, DEFAULT_CLASSES, "CN2", 1.0, 20, 5.0)
    cov = np.ones(args.samples)
    fit_cpu(x[:1000], cov, spec)  # compile
    normalize_chromosomes(x[:1000], chrom[:1000])
    fit_cpu(np.asfortranarray(x[:1000]), cov, spec)  # the layout of the full matrix: compiled once
    print(f"matrix {args.regions:,} x {args.samples}, {len(chromosome_blocks(chrom))} chromosomes, "
          f"{os.cpu_count()} cores")
    print(f"{'stage':<12}{'threads':>8}{'gcnmops s':>10}{'us/region/core':>15}{'cn.mops s':>10}{'speed-up':>9}")
    model_times = {}
    for th in threads:
        set_num_threads(th)
        t_norm, xn = best_of(lambda: normalize_chromosomes(x, chrom), args.repeat)
        t_model, _ = best_of(lambda: fit_cpu(xn, cov, spec), args.repeat)
        model_times[th] = t_model
        for stage, ours, theirs in (("normalize", t_norm, 7.5), ("modelling", t_model, 48.5)):
            per = ours * th / args.regions * 1e6
            print(f"{stage:<12}{th:>8}{ours:>10.2f}{per:>15.2f}{theirs:>10.1f}{theirs / ours:>8.1f}x")
    if len(threads) > 1:
        lo, hi = min(threads), max(threads)
        print(f"modelling scaling {lo} -> {hi} threads: {model_times[lo] / model_times[hi]:.2f}x")


if __name__ == "__main__":
    main()
