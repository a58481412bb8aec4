"""GATK-SV's cn.MOPS step on a GATK-SV-shaped batch: both CNMOPS.wdl calls of GatherBatchEvidence (r1/r2 = 3/10,
prefix "header"; 1000/100, prefix "large", stitched, ``--min-size`` as GatherBatchEvidence leaves it: 1000000), each
one ``gcnmops gatk-sv cnmops`` process, from the bgzipped bincov matrix to the clean BEDs.

The batch (made once per size and seed, kept in --workdir): a bgzipped bincov matrix of 100-bp bins (``#Chr Start
End <samples>``, 0-based) of a chr1-sized contig (2,489,565 bins by default), chrX and chrY, these two scaled so that
the three are a tenth of GRCh38's bins (chrX with its PARs); --samples samples (500) of mixed sexes in a ped; an
exclude list (a centromere-like gap of zero bins and a few other intervals). Counts: Poisson(bin mean x copies / 2 x
sample depth) with heterogeneous bin means (gamma, mean 20 reads per bin, some empty bins), depths 0.7-1.3, males one
X outside the PARs and one Y, females mismapped Y reads, and deletions and duplications at about 150 per genome per
sample (1 kb - 1 Mb, log-uniform), most rare, some common (carried by 2-40% of the samples). Generated in chunks on
every core: numpy's Poisson, text by a numba kernel, BGZF blocks by zlib, all releasing the GIL.

Prints the batch, each call's wall time (its process, start to exit; its output in <batch>/out/log.<prefix>.txt),
its stages (read; the pass groups MR2, MR1, NR2, NR1, FR2, FR1; clean) and its peak RSS, the total, and a markdown
table row; ``--json PATH`` writes the same (after each step). ``--warmup`` first runs both calls on a smaller batch
(700,000 bins x 300 samples: the same kernel variants), untimed, so that compiling kernels is not counted.

``--genome FRACTION``: GRCh38's 24 chromosomes instead (1: a whole genome's 30,882,698 bins; a tenth of the
genome's bins as 24 contigs, not one chr1-sized, is ``--genome 0.1``).

    python benchmarks/bench_gatksv.py [--bins N | --genome FRACTION] [--samples N] [--backend auto|cpu|gpu]
        [--workdir DIR] [--threads N] [--level 1-9] [--warmup] [--json PATH] [--devices all|IDS]
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

#: GRCh38's chromosomes (bp): the --genome batch's contigs
GRCH38 = {"chr1": 248_956_422, "chr2": 242_193_529, "chr3": 198_295_559, "chr4": 190_214_555, "chr5": 181_538_259,
          "chr6": 170_805_979, "chr7": 159_345_973, "chr8": 145_138_636, "chr9": 138_394_717, "chr10": 133_797_422,
          "chr11": 135_086_622, "chr12": 133_275_309, "chr13": 114_364_328, "chr14": 107_043_718,
          "chr15": 101_991_189, "chr16": 90_338_345, "chr17": 83_257_441, "chr18": 80_373_285, "chr19": 58_617_616,
          "chr20": 64_444_167, "chr21": 46_709_983, "chr22": 50_818_468, "chrX": 156_040_895, "chrY": 57_227_415}
CHR1_BINS = 2_489_565  # GRCh38 chr1 / 100 bp
GENOME_BINS = 30_882_698  # GRCh38 primary assembly / 100 bp
CHRX_BINS, CHRY_BINS = 1_560_409, 572_275  # their real sizes: their ratio, and the PARs' places
PAR1_BINS, PAR2_BINS = 26_995, 3_299  # chrX:10,001-2,781,479 and 155,701,383-156,030,895, in 100-bp bins
BIN = 100
MEAN_COUNT = 20.0  # reads per 100-bp bin at about 30x
CNV_PER_BIN_SAMPLE = 150 / GENOME_BINS  # about 150 depth-detectable CNVs per genome per sample
ROWS_PER_CHUNK = 8192
BGZF_BLOCK = 0xFF00  # uncompressed bytes per BGZF block, as bgzip
BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
REPO = Path(__file__).resolve().parents[1]
WARMUP_BINS, WARMUP_SAMPLES = 700_000, 300  # the --warmup batch (see main)
STAGES = ("read", "passes", "MR2", "MR1", "NR2", "NR1", "FR2", "FR1", "clean")


def calls(min_size: int) -> list[dict]:
    """GatherBatchEvidence's two CNMOPS calls as ``gatk-sv cnmops`` options."""
    return [dict(r1=3, r2=10, prefix="header", extra=[]),
            dict(r1=1000, r2=100, prefix="large",
                 extra=["--min-size", str(min_size), "--stitch-and-clean-large-events"])]


def contig_bins(bins: int) -> dict[str, int]:
    """Bins per contig: chr1 ``bins``; chrX and chrY in GRCh38's ratio, together what makes the three a tenth of
    the genome's bins at full size (scaled with ``bins``)."""
    xy = (GENOME_BINS / 10 - CHR1_BINS) * bins / CHR1_BINS
    return {"chr1": bins, "chrX": max(10_000, round(xy * CHRX_BINS / (CHRX_BINS + CHRY_BINS))),
            "chrY": max(5000, round(xy * CHRY_BINS / (CHRX_BINS + CHRY_BINS)))}


def genome_bins(fraction: float) -> dict[str, int]:
    """Bins per contig of the --genome batch: GRCh38's 24 chromosomes in 100-bp bins (the last one partial), times
    ``fraction``."""
    return {c: max(5000, math.ceil(length / BIN * fraction)) for c, length in GRCH38.items()}


def _events(m: int, n: int, rng) -> np.ndarray:
    """Planted CNVs on a contig of m bins: rows (first bin, end bin, sample, copy number); rare ones (one sample)
    and common ones (one locus carried by 2-40% of the samples)."""
    k = max(1, int(rng.poisson(m * n * CNV_PER_BIN_SAMPLE * 0.8)))
    width = np.minimum(m // 4, np.exp(rng.uniform(np.log(10), np.log(10_000), k))).astype(np.int64)
    a = (rng.random(k) * (m - width)).astype(np.int64)
    rows = [np.stack([a, a + width, rng.integers(0, n, k), rng.choice([0, 1, 3, 4], k, p=[.15, .45, .3, .1])], 1)]
    for _ in range(max(1, int(m * n * CNV_PER_BIN_SAMPLE * 0.2 / (0.21 * n)))):  # common loci: the rest
        w = int(min(m // 4, np.exp(rng.uniform(np.log(10), np.log(2_000)))))
        b = int(rng.integers(0, m - w))
        carriers = np.flatnonzero(rng.random(n) < rng.uniform(0.02, 0.4))
        rows.append(np.stack([np.full(len(carriers), b), np.full(len(carriers), b + w), carriers,
                              np.full(len(carriers), rng.choice([1, 3]))], 1))
    return np.concatenate(rows).astype(np.int64)


def _format_kernel():
    """A numba kernel: (contig bytes, first bin, counts (rows, n) int32) -> the rows as tab-separated text."""
    import numba

    @numba.njit(nogil=True, cache=False)
    def digits(v):
        d = 1
        while v >= 10:
            v //= 10
            d += 1
        return d

    @numba.njit(nogil=True, cache=False)
    def put(out, at, v, d):
        for i in range(d - 1, -1, -1):
            out[at + i] = 48 + v % 10
            v //= 10
        return at + d

    @numba.njit(nogil=True, cache=False)
    def rows_text(contig, first, width, counts):
        m, n = counts.shape
        size = 0
        for r in range(m):
            s = (first + r) * width
            size += len(contig) + digits(s) + digits(s + width) + 3
            for k in range(n):
                size += digits(counts[r, k]) + 1
        out = np.empty(size, np.uint8)
        at = 0
        for r in range(m):
            s = (first + r) * width
            out[at:at + len(contig)] = contig
            at += len(contig)
            out[at] = 9
            at = put(out, at + 1, s, digits(s))
            out[at] = 9
            at = put(out, at + 1, s + width, digits(s + width))
            for k in range(n):
                out[at] = 9
                v = counts[r, k]
                at = put(out, at + 1, v, digits(v))
            out[at] = 10
            at += 1
        return out

    return rows_text


def bgzf(data: bytes, level: int) -> bytes:
    """``data`` as BGZF blocks (bgzip's format, without the EOF block)."""
    view = memoryview(data)
    blocks = []
    for a in range(0, len(view), BGZF_BLOCK):
        piece = view[a:a + BGZF_BLOCK]
        c = zlib.compressobj(level, zlib.DEFLATED, -15)
        body = c.compress(piece) + c.flush()
        if len(body) > 0xFFFF - 25:
            c = zlib.compressobj(0, zlib.DEFLATED, -15)
            body = c.compress(piece) + c.flush()
        blocks += [b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff\x06\x00BC\x02\x00", struct.pack("<H", len(body) + 25),
                   body, struct.pack("<II", zlib.crc32(piece), len(piece))]
    return b"".join(blocks)


def batch_paths(folder: Path) -> dict[str, Path]:
    """The inputs of a CNMOPS.wdl call in a batch folder, by ``gatk-sv cnmops`` option."""
    return {"--bincov-matrix": folder / "batch.bincov.bed.gz", "--chrom-file": folder / "chrom_file.fai",
            "--allo-file": folder / "allo_file.fai", "--ped-file": folder / "batch.ped",
            "--exclude-list": folder / "exclude_list.bed"}


def make_batch(folder: Path, bins: int | dict, n: int, seed: int, threads: int, level: int = 1) -> dict:
    """The batch's files in ``folder`` (bincov matrix, ped, contig files, exclude list; batch.json last, returned):
    ``bins`` of the chr1-sized contig (with chrX and chrY: ``contig_bins``), or the bins of each contig (chrX and
    chrY the allosomes, the others autosomes)."""
    t0 = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    sexes = np.where(rng.random(n) < 0.48, 1, 2)
    names = [f"SAMPLE_{k + 1:04d}" for k in range(n)]  # in Java String order, as PrintSVEvidence writes them
    sizes = contig_bins(bins) if isinstance(bins, int) else dict(bins)
    paths = batch_paths(folder)
    paths["--ped-file"].write_text("".join(f"FAM{k + 1}\t{s}\t0\t0\t{sx}\t0\n"
                                           for k, (s, sx) in enumerate(zip(names, sexes))))
    autosomes = [c for c in sizes if c not in ("chrX", "chrY")]
    paths["--chrom-file"].write_text("".join(f"{c}\t{sizes[c] * BIN}\n" for c in autosomes))
    paths["--allo-file"].write_text(f"chrX\t{sizes['chrX'] * BIN}\nchrY\t{sizes['chrY'] * BIN}\n")
    gaps = {c: (0.45, 0.5) for c in sizes}  # zero bins (centromere-like)
    gaps |= {"chr1": (0.49, 0.54), "chrX": (0.37, 0.38), "chrY": (0.2, 0.4)}
    excluded = [(c, a, b) for c, (a, b) in gaps.items()] + [("chr1", 0.1, 0.1005), ("chr1", 0.8, 0.802),
                                                             ("chrX", 0.6, 0.601)]
    paths["--exclude-list"].write_text("".join(f"{c}\t{int(a * sizes[c]) * BIN}\t{int(b * sizes[c]) * BIN}\n"
                                               for c, a, b in excluded))
    depth = rng.uniform(0.7, 1.3, n)
    rows_text = _format_kernel()

    def chunk(job) -> bytes:
        contig, a, mu, half, ev, s = job
        b = a + len(mu)
        lam = mu[:, None] * depth[None, :]
        if half is not None:  # (rows, samples) with one copy, or with mismapped reads alone
            lam[half] *= 0.5 if contig == "chrX" else 0.01
        for lo, hi, k, c in ev[(ev[:, 0] < b) & (ev[:, 1] > a)]:
            lam[max(lo, a) - a:min(hi, b) - a, k] *= c / 2
        counts = np.random.default_rng(s).poisson(lam).astype(np.int32)
        return bgzf(rows_text(np.frombuffer(contig.encode(), np.uint8), a, BIN, counts).tobytes(), level)

    def jobs():
        male = sexes == 1
        for contig, m in sizes.items():
            r = np.random.default_rng([seed, len(contig), m])
            mu = r.gamma(8.0, MEAN_COUNT / 8.0, m) * (r.random(m) > 0.002)  # some unmappable bins
            g0, g1 = (int(f * m) for f in gaps[contig])
            mu[g0:g1] = 0.0
            ev = _events(m, n, r)
            for a in range(0, m, ROWS_PER_CHUNK):
                b = min(m, a + ROWS_PER_CHUNK)
                half = None
                if contig == "chrX":  # males: one copy outside the PARs
                    idx = np.arange(a, b)[:, None]
                    par1, par2 = PAR1_BINS * m // CHRX_BINS, m - PAR2_BINS * m // CHRX_BINS
                    half = male[None, :] & (idx >= par1) & (idx < par2)
                elif contig == "chrY":  # females: mismapped reads only
                    half = np.broadcast_to(~male, (b - a, n))
                yield contig, a, mu[a:b], half, ev, int(r.integers(2 ** 62))

    matrix = paths["--bincov-matrix"]
    with open(matrix, "wb") as fh, ThreadPoolExecutor(threads) as pool:
        fh.write(bgzf(("#Chr\tStart\tEnd\t" + "\t".join(names) + "\n").encode(), level))
        pending: collections.deque = collections.deque()
        for job in jobs():
            pending.append(pool.submit(chunk, job))
            if len(pending) >= 2 * threads:
                fh.write(pending.popleft().result())
        while pending:
            fh.write(pending.popleft().result())
        fh.write(BGZF_EOF)
    meta = {"bins": sizes, "samples": n, "males": int((sexes == 1).sum()), "seed": seed,
            "level": level, "matrix_mb": round(matrix.stat().st_size / 1e6, 1),
            "generation_s": round(time.perf_counter() - t0, 2)}
    (folder / "batch.json").write_text(json.dumps(meta))
    return meta


def run_call(paths: dict, outdir: Path, call: dict, backend: str, more: list[str] | None = None) -> dict:
    """One ``gcnmops gatk-sv cnmops`` process (``more``: further options): its wall seconds, stage seconds and peak
    RSS (GB)."""
    timings = outdir / f"timings.{call['prefix']}.json"
    argv = [sys.executable, "-m", "gcnmops", "gatk-sv", "cnmops"]
    argv += [str(x) for kv in paths.items() for x in kv]
    argv += ["--r1", str(call["r1"]), "--r2", str(call["r2"]), "--batch", "bench", "--prefix", call["prefix"],
             *call["extra"], *(more or []), "--backend", backend, "-o", str(outdir), "--timings", str(timings)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    outdir.mkdir(parents=True, exist_ok=True)
    log = outdir / f"log.{call['prefix']}.txt"
    with open(log, "wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.stderr.write(log.read_text(errors="replace")[-4000:])
        raise SystemExit(f"gcnmops gatk-sv cnmops exited with status {proc.returncode}: {' '.join(argv)}")
    t = json.loads(timings.read_text())
    beds = [f"bench.{kind}.{call['prefix']}.bed.gz" for kind in ("DEL", "DUP")]
    return {"r1": call["r1"], "r2": call["r2"], "prefix": call["prefix"], "wall_s": round(wall, 3),
            "stages_s": {k: t.get(k, 0.0) for k in STAGES}, "cnmops_s": t.get("cn.mops", 0.0),
            "tables_s": t.get("tables", 0.0), "peak_rss_gb": round(usage.ru_maxrss / 1e6, 3),
            "beds": {b: sum(1 for _ in _lines(outdir / b)) for b in beds}}


def _lines(path: Path):
    import gzip

    with gzip.open(path, "rt") as fh:
        yield from fh


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bins", type=int, default=CHR1_BINS, help=f"bins of the chr1-sized contig (default {CHR1_BINS})")
    ap.add_argument("--genome", type=float, metavar="FRACTION",
                    help="instead of --bins: GRCh38's 24 chromosomes, each FRACTION of its 100-bp bins (1: a genome)")
    ap.add_argument("--samples", type=int, default=500, help="samples (default 500)")
    ap.add_argument("--seed", type=int, default=1, help="simulation seed (default 1)")
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"], help="where cn.mops runs (auto)")
    ap.add_argument("--min-size", type=int, default=1_000_000,
                    help="the large call's --min-size (GatherBatchEvidence: cnmops_large_min_size, unset: 1000000)")
    ap.add_argument("--workdir", help="where batches are made and kept (default: a folder in the temp dir)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads making the batch (all CPUs)")
    ap.add_argument("--level", type=int, default=1, choices=range(1, 10), metavar="1-9",
                    help="the matrix's deflate level (default 1: made 10x faster than at bgzip's 6, 20%% larger)")
    ap.add_argument("--warmup", action="store_true", help="first run both calls on a small batch, untimed (kernels "
                                                          "compiled and cached, as in an image made with them)")
    ap.add_argument("--json", help="also write the results to this JSON file")
    ap.add_argument("--devices", help="GPUs the passes run on (gatk-sv cnmops --devices: ids or 'all')")
    args = ap.parse_args(argv)
    work = Path(args.workdir or Path(tempfile.gettempdir()) / "gcnmops-bench-gatksv")

    def batch(bins: int | float, n: int) -> tuple[Path, dict]:
        genome = isinstance(bins, float)
        folder = work / f"{'genome' if genome else 'batch'}-{bins}x{n}-s{args.seed}-l{args.level}"
        done = folder / "batch.json"
        if done.exists():
            return folder, json.loads(done.read_text()) | {"reused": True}
        meta = make_batch(folder, genome_bins(bins) if genome else bins, n, args.seed, args.threads, args.level)
        print(f"batch made in {meta['generation_s']:.1f} s: {folder} ({meta['matrix_mb']:,} MB bgzipped)",
              file=sys.stderr)
        return folder, meta

    more = ["--devices", args.devices] if args.devices else []
    if args.warmup:  # the kernels' variants of the timed batch: over 128 samples of each sex, a chromosome of over
        # 200,000 rows at rebin 3 (a smaller batch left ~70 s of compiling in the timed calls' first passes)
        folder, _ = batch(WARMUP_BINS, WARMUP_SAMPLES)
        for call in calls(args.min_size):
            run_call(batch_paths(folder), folder / "out", call, args.backend, more)
    folder, meta = batch(args.bins if args.genome is None else float(args.genome), args.samples)
    out = folder / "out"
    results: list[dict] = []
    report = {"batch": meta | {"folder": str(folder)}, "backend": args.backend, "warmup": args.warmup,
              "options": more, "calls": results}
    for call in calls(args.min_size):  # the report written after each step: what is done survives a timeout
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
        results.append(run_call(batch_paths(folder), out, call, args.backend, more))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    report |= {"wall_s": round(sum(r["wall_s"] for r in results), 3),
               "peak_rss_gb": max(r["peak_rss_gb"] for r in results)}
    bins = sum(meta["bins"].values())
    print(f"{bins:,} bins x {meta['samples']} samples ({meta['matrix_mb']:,} MB bgzipped), backend {args.backend}: "
          f"both calls in {report['wall_s']:.1f} s, peak RSS {report['peak_rss_gb']:.1f} GB")
    for r in results:
        stages = ", ".join(f"{k} {v:.1f}" for k, v in r["stages_s"].items())
        print(f"  r1 {r['r1']} / r2 {r['r2']} ({r['prefix']}): {r['wall_s']:.1f} s ({stages} s; cn.mops "
              f"{r['cnmops_s']:.1f} s, tables {r['tables_s']:.1f} s), peak RSS {r['peak_rss_gb']:.1f} GB, "
              + ", ".join(f"{b}: {c} lines" for b, c in r["beds"].items()))
    print("| bins | samples | backend | wall (s) | " + " | ".join(f"{c['prefix']} {k} (s)" for c in results
                                                                   for k in ("wall", "read", "cn.mops", "clean"))
          + " | peak RSS (GB) |")
    print(f"| {bins:,} | {meta['samples']} | {args.backend} | {report['wall_s']:.1f} | "
          + " | ".join(f"{v:.1f}" for r in results for v in (r["wall_s"], r["stages_s"]["read"], r["cnmops_s"],
                                                             r["stages_s"]["clean"]))
          + f" | {report['peak_rss_gb']:.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return report


if __name__ == "__main__":
    main()
