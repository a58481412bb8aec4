"""GATK-SV's cn.MOPS step on a GATK-SV-shaped batch: both CNMOPS.wdl calls of GatherBatchEvidence (r1/r2 = 3/10,
prefix "header"; 1000/100, prefix "large", stitched) through ``gcnmops gatk-sv cnmops``'s engine, from the bgzipped
bincov matrix to the clean BEDs.

The batch (made once per size and seed, in --workdir): a bgzipped bincov matrix of 100-bp bins (``#Chr Start End
<samples>``, 0-based) on a chr1-sized contig (2,489,565 bins by default), chrX and chrY (their lengths scaled with
--bins), --samples samples (500) of mixed sexes in a ped (males: one X outside the PARs, one Y; females: no Y but
mismapped reads), planted deletions and duplications (one per 500,000 bins x samples: 1 kb to 2 Mb), an
exclude list; counts Poisson(bin mean x copies / 2 x sample depth).

Prints wall time (both calls, each reading the matrix), the seconds of each stage summed over both calls (read the
matrix; tables: sex columns, rebinning, exclusion; cn.mops: cn.mops, integer copy numbers, GFF; clean), peak RSS of
the process that ran them, and the same as a markdown table row. The full size is for a GPU machine;
``--bins 50000 --samples 40`` runs in about a minute on two cores.

    python benchmarks/bench_gatksv.py [--bins N] [--samples N] [--backend auto|cpu|gpu] [--workdir DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

CHR1_BINS, CHRX_BINS, CHRY_BINS = 2_489_565, 1_560_409, 572_275  # GRCh38 lengths / 100 bp
PAR1_BINS, PAR2_BINS = 26_995, 3_299  # chrX:10,001-2,781,479 and 155,701,383-156,030,895, in 100-bp bins
BIN = 100
CALLS = (dict(r1=3, r2=10, prefix="header", stitch_and_clean_large_events=False),
         dict(r1=1000, r2=100, prefix="large", stitch_and_clean_large_events=True))


def contig_bins(bins: int) -> dict[str, int]:
    """Bins per contig: chr1 ``bins``, chrX and chrY scaled as in GRCh38."""
    return {"chr1": bins, "chrX": max(2000, round(bins * CHRX_BINS / CHR1_BINS)),
            "chrY": max(1000, round(bins * CHRY_BINS / CHR1_BINS))}


def _sexes(n: int) -> np.ndarray:
    """1 (male) or 2 (female) per sample, alternating (half each)."""
    return np.where(np.arange(n) % 2 == 0, 1, 2)


def _copies(contig: str, m: int, sexes: np.ndarray, rng) -> np.ndarray:
    """Copy numbers (m, n): 2 on autosomes; chrX males 1 outside the PARs; chrY males 1, females 0.01 (mismapping);
    with planted deletions and duplications (about one per 5 Mb per 10 samples)."""
    n = len(sexes)
    cn = np.full((m, n), 2.0, dtype=np.float32)
    male = sexes == 1
    if contig == "chrX":
        par1, par2 = min(PAR1_BINS * m // CHRX_BINS, m), min(PAR2_BINS * m // CHRX_BINS, m)
        cn[par1:m - par2, male] = 1.0
    elif contig == "chrY":
        cn[:, male] = 1.0
        cn[:, ~male] = 0.01
    for _ in range(max(1, m * n // 500_000)):
        k = int(rng.integers(n))
        width = int(min(m // 4, np.exp(rng.uniform(np.log(10), np.log(20_000)))))  # 1 kb .. 2 Mb
        a = int(rng.integers(0, m - width))
        cn[a:a + width, k] *= float(rng.choice([0.0, 0.5, 1.5, 2.0]))
    return cn


def _text_rows(contig: str, first: int, counts: np.ndarray) -> bytes:
    """Rows of the matrix (bins first.., ``counts`` (rows, n) int32) as tab-separated text."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    start = (np.arange(first, first + counts.shape[0], dtype=np.int64) * BIN)
    cols = {"c": pa.array(np.full(counts.shape[0], contig)), "s": pa.array(start), "e": pa.array(start + BIN)}
    cols.update({f"v{k}": pa.array(counts[:, k]) for k in range(counts.shape[1])})
    sink = pa.BufferOutputStream()
    pacsv.write_csv(pa.table(cols), sink, pacsv.WriteOptions(include_header=False, delimiter="\t",
                                                             quoting_style="none"))
    return sink.getvalue().to_pybytes()


def batch_paths(folder: Path) -> dict[str, Path]:
    """The inputs of a CNMOPS.wdl call in a batch folder, by run_call's argument names."""
    return {"bincov_matrix": folder / "batch.bincov.bed.gz", "chrom_file": folder / "chrom_file.fai",
            "allo_file": folder / "allo_file.fai", "ped_file": folder / "batch.ped",
            "exclude_list": folder / "exclude_list.bed"}


def make_batch(folder: Path, bins: int, n: int, seed: int, threads: int) -> None:
    """The batch's files in ``folder`` (bincov matrix, ped, contig files, exclude list; batch.json last)."""
    folder.mkdir(parents=True, exist_ok=True)
    sexes = _sexes(n)
    names = [f"SAMPLE_{k + 1:04d}" for k in range(n)]
    sizes = contig_bins(bins)
    (folder / "batch.ped").write_text("".join(f"FAM{k + 1}\t{s}\t0\t0\t{sx}\t0\n"
                                              for k, (s, sx) in enumerate(zip(names, sexes))))
    (folder / "chrom_file.fai").write_text(f"chr1\t{sizes['chr1'] * BIN}\n")
    (folder / "allo_file.fai").write_text(f"chrX\t{sizes['chrX'] * BIN}\nchrY\t{sizes['chrY'] * BIN}\n")
    gaps = [("chr1", 0.48, 0.50), ("chr1", 0.70, 0.701), ("chrX", 0.38, 0.39), ("chrY", 0.20, 0.40)]
    (folder / "exclude_list.bed").write_text("".join(f"{c}\t{int(a * sizes[c]) * BIN}\t{int(b * sizes[c]) * BIN}\n"
                                                     for c, a, b in gaps))
    rng = np.random.default_rng(seed)
    depth = rng.uniform(0.85, 1.2, n).astype(np.float32)
    matrix = batch_paths(folder)["bincov_matrix"]
    plain = folder / "batch.bincov.bed"
    bgzip = shutil.which("bgzip")  # htslib's, multithreaded; else pysam's (one thread) afterwards
    if bgzip:
        with open(matrix, "wb") as fh:
            out = subprocess.Popen([bgzip, "-@", str(threads), "-c"], stdin=subprocess.PIPE, stdout=fh)
    else:
        out = None
    sink = out.stdin if out else open(plain, "wb")
    sink.write(("#Chr\tStart\tEnd\t" + "\t".join(names) + "\n").encode())
    step = 50_000

    def rows(job):
        contig, a, mu, cn, s = job
        r = np.random.default_rng(s)
        lam = mu[a:a + step, None] * cn[a:a + step] / 2 * depth[None, :]
        return _text_rows(contig, a, r.poisson(lam).astype(np.int32))

    with ThreadPoolExecutor(threads) as pool:
        for contig, m in sizes.items():
            mu = rng.gamma(20.0, 45.0 / 20.0, m).astype(np.float32)  # reads per 100-bp bin
            mu[rng.random(m) < 0.003] = 0.0
            cn = _copies(contig, m, sexes, rng)
            jobs = [(contig, a, mu, cn, int(rng.integers(2 ** 62))) for a in range(0, m, step)]
            for text in pool.map(rows, jobs):
                sink.write(text)
    sink.close()
    if out:
        if out.wait() != 0:
            raise SystemExit("bgzip failed")
    else:
        import pysam

        pysam.tabix_compress(str(plain), str(matrix), force=True)
        plain.unlink()
    (folder / "batch.json").write_text(json.dumps({"bins": sum(sizes.values()), "samples": n, "seed": seed}))


def run_calls(paths: dict, outdir: Path, backend: str) -> dict:
    """Both calls; the seconds of each stage (summed), the wall time, and this process's peak RSS."""
    from gcnmops.gatksv.cnmops import run_call

    timings: dict = {}
    t0 = time.perf_counter()
    for call in CALLS:
        run_call(**paths, batch="bench", outdir=outdir, backend=backend, timings=timings, **call)
    timings["wall"] = time.perf_counter() - t0
    timings["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    return timings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bins", type=int, default=CHR1_BINS, help=f"bins of the chr1-sized contig (default {CHR1_BINS})")
    ap.add_argument("--samples", type=int, default=500, help="samples (default 500)")
    ap.add_argument("--seed", type=int, default=1, help="simulation seed (default 1)")
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"], help="where cn.mops runs (auto)")
    ap.add_argument("--workdir", help="where the batch is made and kept (default: a folder in the temp dir)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads making the batch (all CPUs)")
    ap.add_argument("--run-only", help=argparse.SUPPRESS)  # internal: run the calls on this batch, print JSON
    args = ap.parse_args()
    if args.run_only:
        paths = json.loads(args.run_only)
        out = Path(paths.pop("outdir"))
        print(json.dumps(run_calls(paths, out, args.backend)))
        return
    work = Path(args.workdir or Path(tempfile.gettempdir()) / "gcnmops-bench-gatksv")
    folder = work / f"batch-{args.bins}x{args.samples}-s{args.seed}"
    done = folder / "batch.json"
    t0 = time.perf_counter()
    if not done.exists():
        make_batch(folder, args.bins, args.samples, args.seed, args.threads)
        print(f"batch made in {time.perf_counter() - t0:.1f} s: {folder}", file=sys.stderr)
    meta = json.loads(done.read_text())
    paths = batch_paths(folder)
    out = folder / "out"
    shutil.rmtree(out, ignore_errors=True)
    job = {k: str(v) for k, v in paths.items()} | {"outdir": str(out)}
    r = subprocess.run([sys.executable, __file__, "--backend", args.backend, "--run-only", json.dumps(job)],
                       stdout=subprocess.PIPE, text=True, check=True)  # a fresh process: its own peak RSS
    t = json.loads(r.stdout.strip().splitlines()[-1])
    mb = paths["bincov_matrix"].stat().st_size / 1e6
    beds = sorted(p.name for p in out.glob("bench.*.bed.gz"))
    print(f"{meta['bins']:,} bins x {meta['samples']} samples ({mb:,.0f} MB bgzipped), backend {args.backend}: "
          f"{len(beds)} clean BEDs in {t['wall']:.1f} s; read {t['read']:.1f} s, tables {t['tables']:.1f} s, "
          f"cn.mops {t['cn.mops']:.1f} s, clean {t['clean']:.1f} s; peak RSS {t['peak_rss_gb']:.1f} GB")
    print("| bins | samples | backend | wall (s) | read (s) | tables (s) | cn.mops (s) | clean (s) | peak RSS (GB) |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(f"| {meta['bins']:,} | {meta['samples']} | {args.backend} | {t['wall']:.1f} | {t['read']:.1f} | "
          f"{t['tables']:.1f} | {t['cn.mops']:.1f} | {t['clean']:.1f} | {t['peak_rss_gb']:.1f} |")


if __name__ == "__main__":
    main()
