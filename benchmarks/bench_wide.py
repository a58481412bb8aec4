"""Wide cohorts: ``gcnmops run`` on 2 regions x n samples (a TSV of Poisson counts), for several n; prints the
wall seconds, each stage's seconds (the run's own summary) and the peak resident memory of the run, and the
ratios between consecutive sizes (linear: the ratio of the sizes).

Usage: python benchmarks/bench_wide.py [--samples 10000,40000,160000] [--regions 2] [--formats ...] [--dir DIR]
"""
from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def cohort(path: Path, m: int, n: int, seed: int = 1) -> Path:
    """A TSV of m regions x n samples of Poisson(60) counts (written as text directly: pandas' to_csv of a frame of
    a million columns takes minutes)."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(60, size=(m, n))
    with open(path, "w") as fh:
        fh.write("\t".join(["seqnames", "start", "end"] + [f"S{k + 1}" for k in range(n)]) + "\n")
        for i in range(m):
            fh.write(f"chr1\t{i * 1000 + 1}\t{(i + 1) * 1000}\t" + "\t".join(map(str, counts[i].tolist())) + "\n")
    return path


def run(table: Path, out: Path, formats: str | None) -> dict:
    """One run in a child process: wall seconds, the stages' seconds, the child's peak RSS (bytes)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    command = [sys.executable, "-m", "gcnmops", "run", str(table), "-o", str(out), "--quiet", "--backend", "cpu"]
    t0 = time.perf_counter()
    done = subprocess.run(command + (["--formats", formats] if formats else []), capture_output=True, text=True,
                          cwd=REPO, check=True)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    stages = {k: float(v) for k, v in re.findall(r"(\w+) ([0-9.]+) s", done.stdout.split("time per stage:")[1])}
    return {"wall": wall, "stages": stages, "peak_rss": peak * 1024 if peak > before else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", default="10000,40000,160000")
    ap.add_argument("--regions", type=int, default=2)
    ap.add_argument("--formats")
    ap.add_argument("--dir")
    args = ap.parse_args()
    folder = Path(args.dir or tempfile.mkdtemp(prefix="bench-wide-"))
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in (int(v) for v in args.samples.split(",")):
        table = cohort(folder / f"w{n}.tsv", args.regions, n)
        r = run(table, folder / f"out{n}", args.formats)
        rows.append((n, r))
        rss = f"{r['peak_rss'] / 2**30:.2f} GiB" if r["peak_rss"] else "n/a"
        print(f"{args.regions} x {n:,}: wall {r['wall']:.1f} s, peak RSS {rss}; "
              + ", ".join(f"{k} {v:.2f} s" for k, v in r["stages"].items()), flush=True)
    for (n0, a), (n1, b) in zip(rows, rows[1:]):
        ratios = {k: b["stages"][k] / a["stages"][k] for k in a["stages"] if a["stages"][k] > 0.05}
        print(f"x{n1 / n0:g} samples ({n0:,} -> {n1:,}): wall x{b['wall'] / a['wall']:.1f}; "
              + ", ".join(f"{k} x{v:.1f}" for k, v in ratios.items()))


if __name__ == "__main__":
    main()
