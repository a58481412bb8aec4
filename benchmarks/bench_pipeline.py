"""The whole cn.MOPS pipeline, stage by stage, on a BM-B-shaped cohort (481,299 regions x 15 samples).

Usage: python benchmarks/bench_pipeline.py [--regions 481299] [--samples 15] [--backend cpu|gpu|auto]
Compares with cn.mops 1.53 on this machine (one core): whole cn.mops() 85.3 s, calcIntegerCopyNumbers 0.7 s.
One warm-up run on a small matrix compiles the kernels first.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd

import gcnmops
from gcnmops.data import make_count_data

CN_MOPS_WHOLE_S = 85.3
CN_MOPS_INTEGER_S = 0.7


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--regions", type=int, default=481_299)
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--backend", default="cpu")
    args = ap.parse_args()
    data = simulated_cohort(args.regions, args.samples)
    warm = simulated_cohort(3000, args.samples, seed=1)
    gcnmops.calc_integer_copy_numbers(gcnmops.cn_mops(warm, backend=args.backend))
    t0 = time.perf_counter()
    result = gcnmops.cn_mops(data, backend=args.backend)
    t_mops = time.perf_counter() - t0
    t0 = time.perf_counter()
    integer = gcnmops.calc_integer_copy_numbers(result)
    t_int = time.perf_counter() - t0
    print(f"{args.regions:,} regions x {args.samples} samples, backend {args.backend}, {os.cpu_count()} cores; "
          f"{len(result.segmentation):,} segments, {len(integer.cnvs):,} CNVs, {len(integer.cnvr):,} CNV regions")
    print(f"{'stage':<22}{'seconds':>9}")
    for stage, secs in result.timings.items():
        print(f"{stage:<22}{secs:>9.2f}")
    print(f"{'integer copy numbers':<22}{t_int:>9.2f}")
    total = t_mops + t_int
    ref = CN_MOPS_WHOLE_S + CN_MOPS_INTEGER_S
    print(f"{'whole pipeline':<22}{total:>9.2f}   cn.mops {ref:.1f} s -> {ref / total:.1f}x faster")


if __name__ == "__main__":
    main()
