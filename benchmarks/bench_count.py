"""Read counting from BAM: gcnmops.count_reads vs Rsamtools-based counting in R, on a simulated BAM.

Usage: python benchmarks/bench_count.py [--reads 3000000] [--window 25000] [--repeat 3] [--workers 1,0]
                                        [--bam existing.bam] [--keep DIR] [--no-r]

Simulates a coordinate-sorted, indexed BAM (see simulate_bam: 100-bp Illumina-like reads copied
from a random genome of three references, binned qualities) unless --bam is given. The R side is our own script doing what getReadCountsFromBAM
does (cn.mops's windows; per reference Rsamtools::scanBam of pos and mapq, mapq >= 1,
IRanges::countOverlaps of 1-bp reads with the windows), timed inside R after the packages are
loaded (best of --repeat). gcnmops is timed in this process: the first call (numba's cached
kernels loaded) and the best of --repeat, for each --workers value (0 = all CPUs). The counts of
both sides must be identical.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from gcnmops.alignments.counting import count_reads
from gcnmops.alignments.bam import INFLATER_NAME, default_threads

REFS = (("chrA", 60_000_000), ("chrB", 40_000_000), ("chrC", 20_000_000))

R_SCRIPT = r"""
suppressMessages({library(Rsamtools); library(GenomicRanges)})
a <- commandArgs(TRUE); f <- a[1]; WL <- as.integer(a[2]); repeats <- as.integer(a[3]); out <- a[4]
count_bam <- function() {
  tg <- scanBamHeader(f)[[1]]$targets
  res <- list()
  for (chr in names(tg)) {
    L <- tg[[chr]]
    if (WL >= L) { st <- 0L; en <- L } else {
      if (L %% WL == 0) L <- L - 1L
      st <- seq(1L, L, by = WL); en <- c(st[-1] - 1L, L) }
    x <- scanBam(f, param = ScanBamParam(what = c("pos", "mapq"), which = GRanges(chr, IRanges(1, tg[[chr]]))))[[1]]
    keep <- which(x$mapq >= 1L)
    res[[chr]] <- data.frame(seqnames = chr, start = st, end = en,
                             count = countOverlaps(IRanges(st, en), IRanges(x$pos[keep], width = 1L)))
  }
  do.call(rbind, res)
}
best <- Inf; best_cpu <- Inf
for (i in seq_len(repeats)) {
  t0 <- proc.time(); r <- count_bam(); dt <- proc.time() - t0
  best <- min(best, dt[["elapsed"]]); best_cpu <- min(best_cpu, dt[["user.self"]] + dt[["sys.self"]])
}
write.table(r, out, sep = "\t", quote = FALSE, row.names = FALSE)
cat(sprintf("R_SECONDS %.4f %.4f\n", best, best_cpu))
"""


def simulate_bam(path: Path, n_reads: int, seed: int = 1, read_len: int = 100, threads: int = 2) -> Path:
    """A sorted, indexed BAM of ``n_reads`` Illumina-like reads (SAM text written here, converted by samtools).

    Reads are exact copies of a random reference genome at their position (so overlapping reads
    share sequence, as in real sorted BAMs), with NovaSeq-style binned qualities (F : , #) and
    instrument-style names; 5% mapq 0, 1% mapq 255, 1% unmapped, 3% duplicates, 1% secondary.
    """
    import pysam

    rng = np.random.default_rng(seed)
    lens = np.array([length for _, length in REFS])
    genome = [np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, ln, dtype=np.uint8)].tobytes().decode()
              for _, ln in REFS]
    ref = rng.choice(len(REFS), n_reads, p=lens / lens.sum())
    pos = (rng.random(n_reads) * (lens[ref] - read_len)).astype(np.int64) + 1
    order = np.lexsort((pos, ref))
    ref, pos = ref[order], pos[order]
    mapq = rng.choice([0, 1, 20, 60, 255], n_reads, p=[0.05, 0.02, 0.1, 0.82, 0.01])
    flag = (np.where(rng.random(n_reads) < 0.5, 16, 0) | np.where(rng.random(n_reads) < 0.03, 1024, 0)
            | np.where(rng.random(n_reads) < 0.01, 256, 0))
    unmapped = rng.random(n_reads) < 0.01
    flag = np.where(unmapped, 4, flag)
    mapq = np.where(unmapped, 0, mapq)
    tile = rng.integers(1101, 2678, n_reads)
    xy = rng.integers(1000, 40000, (n_reads, 2))
    names = [name for name, _ in REFS]
    sam = path.with_suffix(".sam")
    with open(sam, "w") as fh:
        fh.write("@HD\tVN:1.6\tSO:coordinate\n" + "".join(f"@SQ\tSN:{n}\tLN:{ln}\n" for n, ln in REFS))
        for a in range(0, n_reads, 200_000):
            b = min(a + 200_000, n_reads)
            qual = np.frombuffer(b"F:,#", np.uint8)[
                rng.choice(4, (b - a, read_len), p=[0.85, 0.08, 0.05, 0.02]).astype(np.uint8)].tobytes().decode()
            fh.write("".join(
                f"A00123:8:H5KJVDSXY:1:{tile[i]}:{xy[i, 0]}:{xy[i, 1]}\t{flag[i]}\t{names[ref[i]]}\t{pos[i]}"
                f"\t{mapq[i]}\t{'*' if unmapped[i] else f'{read_len}M'}\t*\t0\t0"
                f"\t{genome[ref[i]][pos[i] - 1:pos[i] - 1 + read_len]}"
                f"\t{qual[(i - a) * read_len:(i - a + 1) * read_len]}\n" for i in range(a, b)))
    pysam.view("-b", "-@", str(threads), "-o", str(path), str(sam), catch_stdout=False)
    pysam.index(str(path))
    sam.unlink()
    return path


def time_r(bam: Path, window: int, repeat: int, workdir: Path) -> tuple[float, float, pd.DataFrame] | None:
    """(best wall seconds, best CPU seconds, counts table) of the R script, None without R."""
    if shutil.which("Rscript") is None:
        print("Rscript not found: R side skipped")
        return None
    script = workdir / "count.R"
    script.write_text(R_SCRIPT)
    out = workdir / "r_counts.tsv"
    proc = subprocess.run(["Rscript", str(script), str(bam), str(window), str(repeat), str(out)],
                          capture_output=True, text=True)
    if proc.returncode:
        print("R side failed:", proc.stderr[-2000:])
        return None
    line = next(line for line in proc.stdout.splitlines() if line.startswith("R_SECONDS")).split()
    return float(line[1]), float(line[2]), pd.read_csv(out, sep="\t", dtype={"seqnames": str})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reads", type=int, default=3_000_000)
    ap.add_argument("--window", type=int, default=25_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", default="1,0", help="comma separated; 0 = all CPUs")
    ap.add_argument("--bam", help="count this BAM instead of simulating one")
    ap.add_argument("--keep", help="simulate into this folder and keep the BAM")
    ap.add_argument("--no-r", action="store_true")
    args = ap.parse_args()

    workdir = Path(args.keep or tempfile.mkdtemp(prefix="gcnmops-bench-count-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        if args.bam:
            bam = Path(args.bam)
        else:
            bam = workdir / f"sim_{args.reads}.bam"
            if not bam.exists():
                t0 = time.perf_counter()
                simulate_bam(bam, args.reads)
                print(f"simulated {args.reads:,} reads -> {bam} in {time.perf_counter() - t0:.1f} s")
        size = bam.stat().st_size
        print(f"BAM {bam.name}: {size / 1e6:.1f} MB; window {args.window}; {default_threads()} CPUs; "
              f"inflater {INFLATER_NAME}")

        rows = []
        ours = None
        for w in [int(x) for x in args.workers.split(",")]:
            workers = None if w == 0 else w
            t0 = time.perf_counter()
            data = count_reads(bam, window=args.window, threads=workers, progress=False)
            first = time.perf_counter() - t0
            best, best_cpu = first, float("inf")
            for _ in range(args.repeat):
                t0, c0 = time.perf_counter(), time.process_time()
                data = count_reads(bam, window=args.window, threads=workers, progress=False)
                best = min(best, time.perf_counter() - t0)
                best_cpu = min(best_cpu, time.process_time() - c0)
            if ours is not None:
                assert np.array_equal(ours.counts, data.counts), "counts differ between worker counts"
            ours = data
            rows.append((workers or default_threads(), first, best, best_cpu))
        total = int(ours.counts.sum())
        print(f"{ours.n_regions:,} windows, {total:,} reads counted")

        r = None if args.no_r else time_r(bam, args.window, args.repeat, workdir)
        if r is not None:
            r_secs, r_cpu, r_table = r
            same = (np.array_equal(r_table[["start", "end"]].to_numpy(), ours.ranges[["start", "end"]].to_numpy())
                    and np.array_equal(r_table["count"].to_numpy(np.float64), ours.counts[:, 0]))
            print(f"R (Rsamtools scanBam + countOverlaps), best of {args.repeat}: {r_secs:.3f} s wall, "
                  f"{r_cpu:.3f} s CPU; counts identical: {same}")
            if not same:
                raise SystemExit("counts differ from the R side")
        print(f"{'gcnmops workers':<16}{'first call (s)':>15}{'best (s)':>10}{'CPU (s)':>9}{'MB/s':>8}"
              f"{'x R wall':>10}{'x R CPU':>9}")
        for workers, first, best, cpu in rows:
            ratio = f"{r[0] / best:10.1f}{r[1] / cpu:9.1f}" if r is not None else f"{'-':>10}{'-':>9}"
            print(f"{workers:<16}{first:>15.3f}{best:>10.3f}{cpu:>9.3f}{size / 1e6 / best:>8.0f}{ratio}")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
