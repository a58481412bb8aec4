"""Plot speed: seconds per figure of gcnmops.report.plots and regions per second of a whole-genome segplot.

    python benchmarks/bench_plots.py [--regions 480000] [--samples 15]

Runs cn_mops + integer copy numbers on a simulated cohort (gcnmops.example), then times plot_overview, plot_cnvr,
segplot (every chromosome of one sample) and write_plots (overview + 12 CNV regions + 6 segplots) to PNG.
"""
from __future__ import annotations

import argparse
import tempfile
import time

import gcnmops
from gcnmops.example import example_cohort
from gcnmops.report.plots import plot_cnvr, plot_overview, segplot, write_plots


def timed(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--regions", type=int, default=480_000)
    ap.add_argument("--samples", type=int, default=15)
    args = ap.parse_args()
    data, _ = example_cohort(n_regions=args.regions, n_samples=args.samples, n_cnvs=max(20, args.regions // 2000))
    result = gcnmops.calc_integer_copy_numbers(gcnmops.cn_mops(data, backend="cpu"))
    print(f"{args.regions:,} regions x {args.samples} samples, {len(result.cnvs)} CNVs, {len(result.cnvr)} CNV regions")
    with tempfile.TemporaryDirectory() as out:
        seg = timed(lambda: segplot(result, 1, path=f"{out}/s.png"))
        print(f"overview      {timed(lambda: plot_overview(result, path=f'{out}/o.png')):.2f} s")
        print(f"plot_cnvr     {timed(lambda: plot_cnvr(result, 1, path=f'{out}/c.png')):.2f} s")
        print(f"segplot       {seg:.2f} s  ({args.regions / seg:,.0f} regions/s)")
        t0 = time.perf_counter()
        n = len(write_plots(result, out))
        total = time.perf_counter() - t0
        print(f"write_plots   {total:.2f} s for {n} figures ({n / total:.1f} figures/s)")


if __name__ == "__main__":
    main()
