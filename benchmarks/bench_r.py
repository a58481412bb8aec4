"""The R path: overhead of ``gcn.mops()`` (R) over the Python engine, and host memory, on a BM-B-shaped cohort.

Usage: python benchmarks/bench_r.py [--regions 481299] [--samples 15] [--backend cpu] [--repeat 3]
                                    [--r-lib DIR] [--no-cnmops-sim] [--json PATH]

Same simulated counts (benchmarks/bench_pipeline.py's cohort: 22 chromosomes of 25-kb windows, planted
0.5x/1.5x blocks) for both sides:

* Python engine: ``gcnmops.cn_mops(CountData)`` (float64 counts), wall time, median of ``--repeat`` runs after
  a warm-up on a small matrix (compiled kernels).
* R: ``gcn.mops(GRanges)`` in Rscript (the GRanges holds integer counts, as cn.mops's data sets do), same
  backend, median of ``--repeat`` runs after a warm-up call (starts Python, loads the kernels); also
  ``gcn.mops(matrix)`` on a double matrix (the zero-copy input). R's own stage times come from
  ``gcn.mops:::.state$last_run``: R before the engine (input, checks, allocation), the engine call (bridge in,
  pipeline, bridge out) and R after it (labels, GRanges, the S4 object); R's garbage collections inside each
  call from ``gc.time()``.
  Overhead = R wall - Python wall, as a share of the Python wall.
* Host memory: peak resident set (VmHWM) of a fresh R process (R + the embedded Python engine) over the
  engine's start-up and one run, against
  (a) a plain R baseline: the same R process state without the run (GenomicRanges loaded, the GRanges
  built), and (b) unless ``--no-cnmops-sim``, a pure-R lower bound of cn.mops's peak: the same input, its
  double matrix and normalized copy, and cn.mops's per-region result list (``res``, one list of lambda,
  alpha, labels, sINI, INI per region, as ``apply(..., .cn.mopsCE)`` builds it) turned into the result
  matrices as cn.mops does (``t(sapply(res, .subset2, i))``). cn.mops itself is not installed here.

The R package is installed into a temporary library first unless ``--r-lib`` names one that holds it.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import gcnmops

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "r_package" / "gcn.mops"


def _cohort(m: int, n: int, seed: int = 11):
    spec = importlib.util.spec_from_file_location("bench_pipeline", REPO / "benchmarks" / "bench_pipeline.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.simulated_cohort(m, n, seed=seed)


def _write_inputs(data, folder: Path) -> None:
    np.asarray(data.counts, dtype=np.int32).ravel(order="F").tofile(folder / "counts.i32")
    r = data.ranges
    chrom_levels = list(dict.fromkeys(r["seqnames"]))
    codes = np.asarray([chrom_levels.index(c) for c in r["seqnames"]], dtype=np.int32) + 1
    codes.tofile(folder / "chr.i32")
    np.asarray(r["start"], dtype=np.int32).tofile(folder / "start.i32")
    (folder / "meta.json").write_text(json.dumps({"m": data.n_regions, "n": data.n_samples,
                                                  "levels": chrom_levels, "samples": data.sample_names}))


_R_COMMON = r"""
args <- commandArgs(TRUE)
dir <- args[1]
hwm <- function() {
  s <- readLines("/proc/self/status")
  kb <- function(key) as.numeric(gsub("[^0-9]", "", grep(paste0("^", key, ":"), s, value = TRUE)))
  c(hwm_mb = kb("VmHWM") / 1024, rss_mb = kb("VmRSS") / 1024)
}
meta <- jsonlite::fromJSON(file.path(dir, "meta.json"))
m <- meta$m; n <- meta$n
read_i32 <- function(f, k) readBin(file.path(dir, f), "integer", n = k, size = 4)
suppressPackageStartupMessages(library(GenomicRanges))
counts <- read_i32("counts.i32", m * n)
dim(counts) <- c(m, n)
colnames(counts) <- meta$samples
chr <- meta$levels[read_i32("chr.i32", m)]
start <- read_i32("start.i32", m)
gr <- GRanges(chr, IRanges(start, start + 24999L))
mcols(gr) <- DataFrame(counts, check.names = FALSE)
rm(chr, start)
invisible(gc())
base <- hwm()
"""

# Host memory of one run in a fresh R process: the engine started (warm-up on 3,000 rows), then one run.
_R_GCNMOPS_MEMORY = _R_COMMON + r"""
backend <- args[2]
suppressPackageStartupMessages(library(gcn.mops))
invisible(suppressMessages(gcn.mops(gr[1:3000], backend = backend)))
invisible(gc())
before <- hwm()
r <- suppressMessages(gcn.mops(gr, backend = backend))
peak <- hwm()
invisible(gc())
cat("JSON", jsonlite::toJSON(list(base = as.list(base), before = as.list(before), peak = as.list(peak),
    after_gc = as.list(hwm()), result_mb = as.numeric(object.size(r)) / 2^20), auto_unbox = TRUE, digits = NA), "\n")
"""

_R_GCNMOPS = _R_COMMON + r"""
backend <- args[2]; repeats <- as.integer(args[3])
suppressPackageStartupMessages(library(gcn.mops))
invisible(gc.time(TRUE))   # time R's garbage collections
t0 <- proc.time()[["elapsed"]]
invisible(suppressMessages(gcn.mops(gr[1:3000], backend = backend)))   # starts Python, loads the kernels
warm <- proc.time()[["elapsed"]] - t0
invisible(gc())
before <- hwm()
runs <- list()
for (i in seq_len(repeats)) {
  r <- NULL
  invisible(gc())
  gc0 <- gc.time()[[3L]]
  t0 <- proc.time()[["elapsed"]]
  r <- suppressMessages(gcn.mops(gr, backend = backend))
  wall <- proc.time()[["elapsed"]] - t0
  lr <- gcn.mops:::.state$last_run
  runs[[i]] <- list(wall = wall, r = lr$r_timings, bridge = lr$bridge, engine = lr$timings,
                    copied = unlist(lr$copied), gc = gc.time()[[3L]] - gc0)
}
after <- hwm()
t0 <- proc.time()[["elapsed"]]
ri <- suppressMessages(calcIntegerCopyNumbers(r))
integer <- proc.time()[["elapsed"]] - t0
X <- counts * 1.0          # a double matrix: the zero-copy input
rm(r, ri); invisible(gc())
gc0 <- gc.time()[[3L]]
t0 <- proc.time()[["elapsed"]]
res_m <- suppressMessages(gcn.mops(X, backend = backend))
wall_matrix <- proc.time()[["elapsed"]] - t0
lrm <- gcn.mops:::.state$last_run
cat("JSON", jsonlite::toJSON(list(base = as.list(base), before = as.list(before), after = as.list(after),
    warmup = warm, runs = runs, integer = integer, matrix = list(wall = wall_matrix, r = lrm$r_timings,
    bridge = lrm$bridge, engine = lrm$timings, gc = gc.time()[[3L]] - gc0),
    result_mb = as.numeric(object.size(res_m)) / 2^20,
    segments = length(segmentation(res_m)), cnvs = length(cnvs(res_m))), auto_unbox = TRUE, digits = NA), "\n")
"""

_R_BASELINE = _R_COMMON + r"""
X <- as.matrix(mcols(gr)); storage.mode(X) <- "double"   # what any cn.mops-like run needs: a numeric matrix
invisible(gc())
cat("JSON", jsonlite::toJSON(list(base = as.list(base), with_matrix = as.list(hwm())), auto_unbox = TRUE,
    digits = NA), "\n")
"""

# cn.mops's memory, lower bound: its objects at the peak of cn.mops() (X, X.norm, res, then L/A/CN/sINI).
_R_CNMOPS_SIM = _R_COMMON + r"""
X <- as.matrix(mcols(gr))
rownames(X) <- paste(as.character(seqnames(gr)), start(gr), end(gr), sep = "_")
X.norm <- X * 1.0                                   # normalizeChromosomes' result (same size)
classes <- paste0("CN", 0:8); N <- ncol(X); nI <- 9L
t0 <- proc.time()[["elapsed"]]
res <- lapply(seq_len(m), function(i) list(lambda = numeric(nI) + i, alpha = numeric(nI) + i,
       expectedCN = classes[(i + seq_len(N)) %% nI + 1L], sini = numeric(N) + i, ini = i * 1.0, post = NA))
L <- t(sapply(res, .subset2, 1)); A <- t(sapply(res, .subset2, 2)); CN <- t(sapply(res, .subset2, 3))
sINI <- t(sapply(res, .subset2, 4)); INI <- sapply(res, .subset2, 5)
peak <- hwm()
rm(res); invisible(gc())
cat("JSON", jsonlite::toJSON(list(base = as.list(base), peak = as.list(peak),
    seconds = proc.time()[["elapsed"]] - t0), auto_unbox = TRUE, digits = NA), "\n")
"""


def _rscript(code: str, args: list[str], env: dict) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".R", delete=False) as f:
        f.write(code)
        path = f.name
    try:
        proc = subprocess.run(["Rscript", path, *args], capture_output=True, text=True, env=env)
    finally:
        os.unlink(path)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("JSON ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"Rscript failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][5:])


def _install(lib: Path) -> None:
    proc = subprocess.run(["R", "CMD", "INSTALL", "--no-test-load", "-l", str(lib), str(PKG)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"R CMD INSTALL failed:\n{proc.stdout}\n{proc.stderr}")


def _median_run(runs: list[dict]) -> dict:
    return sorted(runs, key=lambda r: r["wall"])[len(runs) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--regions", type=int, default=481_299)
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--r-lib", default=None)
    ap.add_argument("--no-cnmops-sim", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    data = _cohort(args.regions, args.samples)
    with tempfile.TemporaryDirectory(prefix="bench_r_") as tmp:
        tmp = Path(tmp)
        _write_inputs(data, tmp)
        lib = Path(args.r_lib) if args.r_lib else tmp / "rlib"
        if not args.r_lib:
            lib.mkdir()
            _install(lib)
        env = dict(os.environ, GCNMOPS_PYTHON=sys.executable,
                   R_LIBS=os.pathsep.join(p for p in (str(lib), os.environ.get("R_LIBS", "")) if p))

        # Python engine, in this process
        warm = _cohort(3000, args.samples, seed=1)
        gcnmops.cn_mops(warm, backend=args.backend)
        py_runs = []
        for _ in range(max(args.repeat, 1)):
            result = None
            t0 = time.perf_counter()
            result = gcnmops.cn_mops(data, backend=args.backend)
            py_runs.append({"wall": time.perf_counter() - t0, "engine": dict(result.timings)})
        py = _median_run(py_runs)
        py_peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        del result

        r = _rscript(_R_GCNMOPS, [str(tmp), args.backend, str(args.repeat)], env)
        mem = _rscript(_R_GCNMOPS_MEMORY, [str(tmp), args.backend], env)
        base = _rscript(_R_BASELINE, [str(tmp)], env)
        sim = None if args.no_cnmops_sim else _rscript(_R_CNMOPS_SIM, [str(tmp)], env)

    rm = _median_run(r["runs"])
    overhead = rm["wall"] - py["wall"]
    # R's own share of each R run: the call's wall time less the engine pipeline's time inside it
    intrinsic = [x["wall"] - x["bridge"]["pipeline"] for x in r["runs"]]
    intrinsic_med = sorted(intrinsic)[len(intrinsic) // 2]
    out = {
        "shape": [args.regions, args.samples], "backend": args.backend, "cores": os.cpu_count(),
        "python": {"wall_median": py["wall"], "walls": [x["wall"] for x in py_runs], "stages": py["engine"],
                   "peak_rss_mb_process": py_peak_mb},
        "r": {"wall_median": rm["wall"], "walls": [x["wall"] for x in r["runs"]], "r_stages": rm["r"],
              "bridge": rm["bridge"], "engine_stages": rm["engine"], "copied": rm["copied"],
              "warmup": r["warmup"], "integer": r["integer"], "matrix_input": r["matrix"],
              "segments": r["segments"], "cnvs": r["cnvs"], "result_object_mb": r["result_mb"]},
        "overhead_s": overhead, "overhead_pct_of_python": 100.0 * overhead / py["wall"],
        "r_own_s": intrinsic, "r_own_s_median": intrinsic_med, "r_gc_s": [x["gc"] for x in r["runs"]],
        "r_own_pct_of_python": 100.0 * intrinsic_med / py["wall"],
        "r_own_pct_of_pipeline": 100.0 * intrinsic_med / rm["bridge"]["pipeline"],
        "r_own_matrix_s": r["matrix"]["wall"] - r["matrix"]["bridge"]["pipeline"],
        "memory_mb": {"r_baseline_gr": base["base"]["hwm_mb"], "r_baseline_gr_plus_double_matrix":
                      base["with_matrix"]["hwm_mb"], "gcnmops_engine_started": mem["before"]["hwm_mb"],
                      "gcnmops_peak_one_run": mem["peak"]["hwm_mb"], "gcnmops_after_gc": mem["after_gc"]["rss_mb"],
                      "gcnmops_peak_after_repeats": r["after"]["hwm_mb"],
                      "cnmops_lower_bound_peak": None if sim is None else sim["peak"]["hwm_mb"],
                      "cnmops_lower_bound_seconds": None if sim is None else sim["seconds"]},
    }
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
