"""Time to result as a user meets it: wall time of fresh ``gcnmops run`` processes, per stage, and output bytes.

For each shape and backend, fresh processes run on the same input with the default outputs: "cold", with an
empty kernel cache (``NUMBA_CACHE_DIR`` pointed at a new folder: every CPU and GPU kernel compiled in the run);
"after install", in a second new cache filled only by ``gcnmops warmup`` (what scripts/setup.sh runs at install;
its time is shown as its own row); "later", again in that cache (what every later run sees). Shapes: ``example`` (the built-in
5,000 x 40 cohort, ``run --example``), ``bmb`` (481,299 x 15) and ``bma`` (6,904,726 x 15), simulated Poisson
counts (mean 60, 24 chromosomes, a few planted CNVs), written once as ``.npz`` (int32 counts).

    python benchmarks/bench_cli.py --shapes example,bmb --backends cpu
    python benchmarks/bench_cli.py --shapes bma --backends gpu --keep-cache   # on a GPU machine

``--keep-cache`` uses the machine's normal cache throughout (no cold run). Prints one row per process: wall
(process start to exit), the stage times the run reports, bytes written.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHAPES = {"example": None, "bmb": (481_299, 15), "bma": (6_904_726, 15)}


def simulate(path: Path, m: int, n: int, seed: int = 7) -> None:
    """Poisson counts (m regions x n samples, 24 chromosomes of 1-kb bins) with planted losses and gains."""
    rng = np.random.default_rng(seed)
    lam = np.full((m, n), 60.0)
    for k in range(max(4, m // 20_000)):
        s, w, j = rng.integers(0, m - 50), int(rng.integers(5, 40)), int(rng.integers(0, n))
        lam[s:s + w, j] *= (0.5, 0.0, 1.5, 2.0)[k % 4]
    counts = rng.poisson(lam).astype(np.int32)
    chrom = np.repeat(np.arange(1, 25), -(-m // 24))[:m]
    start = np.zeros(m, dtype=np.int64)
    for c in np.unique(chrom):
        rows = np.flatnonzero(chrom == c)
        start[rows] = np.arange(rows.size) * 1000 + 1
    np.savez(path, counts=counts, seqnames=np.char.add("chr", chrom.astype(str)), start=start, end=start + 999,
             sample_names=np.array([f"S{k + 1}" for k in range(n)]))


def run_once(args: list[str], cache: str | None, command: str = "run") -> tuple[float, str, int]:
    env = dict(os.environ)
    if cache:
        env["NUMBA_CACHE_DIR"] = cache
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "gcnmops", command, *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"gcnmops {command} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    size = 0
    if "-o" in args:
        size = sum(p.stat().st_size for p in Path(args[args.index("-o") + 1]).rglob("*") if p.is_file())
    return wall, proc.stdout + proc.stderr, size


def stages(text: str) -> str:
    m = re.search(r"time per stage: (.*)", text)
    return m.group(1).strip() if m else "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="example,bmb")
    ap.add_argument("--backends", default="cpu")
    ap.add_argument("--keep-cache", action="store_true", help="first run with the machine's kernel cache")
    ap.add_argument("--workdir", default=None)
    opts = ap.parse_args()
    work = Path(opts.workdir or tempfile.mkdtemp(prefix="bench_cli_"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for shape in opts.shapes.split(","):
        if SHAPES[shape] is None:
            source = ["--example"]
        else:
            path = work / f"{shape}.npz"
            if not path.exists():
                t0 = time.perf_counter()
                simulate(path, *SHAPES[shape])
                print(f"simulated {shape} {SHAPES[shape]} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            source = [str(path)]
        for backend in opts.backends.split(","):
            plan = [("later", None)] if opts.keep_cache else [
                ("cold", tempfile.mkdtemp(prefix="cache_", dir=work)), ("warmup", tempfile.mkdtemp(prefix="cache_", dir=work))]
            for label, cache in plan:
                if label == "warmup":
                    wall, text, _ = run_once(["--backend", backend], cache, command="warmup")
                    rows.append((shape, backend, "gcnmops warmup", wall, 0, "-"))
                    runs = ["after install", "later"]
                else:
                    runs = [label]
                for run in runs:
                    out = work / f"out_{shape}_{backend}_{run.replace(' ', '_')}"
                    wall, text, size = run_once([*source, "-o", str(out), "--backend", backend], cache)
                    rows.append((shape, backend, run, wall, size, stages(text)))
                    print(f"{shape:8s} {backend:4s} {run:14s} wall {wall:7.2f} s  output {size / 1e6:9.2f} MB  "
                          f"{stages(text)}", file=sys.stderr)
    print("\n| shape | backend | run | wall (s) | output (MB) | stages (s) |\n| --- | --- | --- | --- | --- | --- |")
    for shape, backend, label, wall, size, st in rows:
        print(f"| {shape} | {backend} | {label} | {wall:.2f} | {size / 1e6:.2f} | {st} |")


if __name__ == "__main__":
    main()
