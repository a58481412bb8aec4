"""Time to call one new sample against a large stored reference (gcnmops.call_samples, mode "frozen").

The reference: m regions (windows on 22 chromosomes) x n classes, of a cohort of ``--samples`` samples. Its
per-region parameters are made from the simulation's truth in the form the EM leaves them (lambda_i = mu_r I_i,
alpha 0.98 on CN2 and the rest spread evenly, the normalization's level per chromosome the mean of the cohort's
simulated size factors, mode 1): fitting 1,000 x 3,000,000 counts (24 GB) is not possible on a 2-core 24 GB VM,
and a frozen call reads only the parameters (m x n), the normalization state and the sample names, so its time
does not depend on how they were fitted or on the cohort's size. The new sample: Poisson counts mu_r c with three
planted CNVs. Timed: ``call_samples`` on the in-memory reference (read, normalize, E-step, segmentation and calls),
best of ``--repeat`` after one untimed run (numba compiles on first use); and loading the stored reference.

Usage: python benchmarks/bench_casemode.py [--regions 3000000] [--samples 1000] [--backend cpu|gpu] [--repeat 3]
       [--store DIR] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gcnmops  # noqa: E402
from gcnmops.casemode import Reference  # noqa: E402
from gcnmops.casemode.normalize import SCALED, ChromosomeLevel, NormState  # noqa: E402
from gcnmops.casemode.parts import ALL, Part, PartFit  # noqa: E402
from gcnmops.data import make_count_data  # noqa: E402
from gcnmops.params import METHODS  # noqa: E402


def synthetic(m: int, n_samples: int, seed: int = 1):
    """(reference, new sample CountData) of m regions (module docstring)."""
    rng = np.random.default_rng(seed)
    params = METHODS["cn.mops"].params()
    sizes = np.full(22, m // 22)
    sizes[: m - sizes.sum()] += 1
    seqnames = np.repeat(np.array([f"chr{i + 1}" for i in range(22)], dtype=object), sizes)
    pos = np.concatenate([np.arange(s, dtype=np.int64) for s in sizes])
    ranges = pd.DataFrame({"seqnames": seqnames, "start": pos * 1000 + 1, "end": (pos + 1) * 1000})
    mu = np.clip(100.0 * np.exp(0.25 * rng.standard_normal(m)), 40.0, 250.0)
    folds = np.asarray(params.I)
    lam = np.asfortranarray(mu[:, None] * folds[None, :])
    a = np.full(folds.size, 0.02 / (folds.size - 1))
    a[params.classes.index("CN2")] = 0.98
    alpha = np.asfortranarray(np.broadcast_to(a, lam.shape))
    cohort_cov = rng.uniform(0.8, 1.2, n_samples)
    ends = np.cumsum(sizes)
    levels = [ChromosomeLevel(f"chr{i + 1}", int(e - s), int(e), SCALED, float(mu[e - s:e].mean() * cohort_cov.mean()),
                              1.0) for i, (s, e) in enumerate(zip(sizes, ends))]
    state = NormState(1, params.norm_type, params.size_factor, params.qu_size_factor, levels, np.zeros(m, bool))
    ref = Reference("cn.mops", params, [f"R_{k + 1}" for k in range(n_samples)], ranges, m,
                    [PartFit(Part(ALL, None, (), "CN2"), lam, alpha, state)])
    factor = np.ones(m)
    for first, cn in ((m // 10, 1), (m // 3, 3), (m // 2, 0)):
        factor[first:first + 50] = cn / 2
    counts = rng.poisson(mu * 1.07 * np.maximum(factor, 0.005)).astype(np.float64)[:, None]
    new = make_count_data(np.asfortranarray(counts), ["new_1"], ranges, min_samples=1)
    return ref, new


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--regions", type=int, default=3_000_000)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--store", type=Path, help="folder for the stored reference (default a temporary one)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    t0 = time.perf_counter()
    ref, new = synthetic(args.regions, args.samples)
    print(f"reference {args.regions:,} regions x {args.samples} samples x {len(ref.params.classes)} classes "
          f"(parameters {2 * ref.fits[0].lam.nbytes / 2**20:.0f} MiB), made in {time.perf_counter() - t0:.1f} s")
    gcnmops.call_samples(new, ref, backend=args.backend)  # compile
    runs = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        res = gcnmops.call_samples(new, ref, backend=args.backend)
        runs.append(time.perf_counter() - t0)
        stages = dict(res.timings)
    print(f"call one new sample ({args.backend}): best {min(runs):.3f} s of {', '.join(f'{r:.3f}' for r in runs)}; "
          f"stages {', '.join(f'{k} {v:.3f}' for k, v in stages.items())}; {len(res.cnvs)} CNVs")
    with tempfile.TemporaryDirectory(dir=args.store) as tmp:
        t0 = time.perf_counter()
        ref.save(Path(tmp) / "ref")
        t_save = time.perf_counter() - t0
        t0 = time.perf_counter()
        gcnmops.load_reference(Path(tmp) / "ref")
        t_load = time.perf_counter() - t0
    print(f"store: save {t_save:.2f} s, load {t_load:.2f} s")
    if args.json:
        args.json.write_text(json.dumps({"regions": args.regions, "samples": args.samples, "backend": args.backend,
                                         "runs": runs, "stages": stages, "save": t_save, "load": t_load,
                                         "cnvs": len(res.cnvs)}, indent=1, default=lambda v: None
                                        if isinstance(v, float) and math.isnan(v) else v))


if __name__ == "__main__":
    main()
