"""Every path gives the same answer: one cohort (three chromosomes, planted CNVs) with cn.mops's norm 0, 1 and 2 and
haplocn.mops, posteriors kept, through the in-memory CPU run, the GPU backend (numba's CUDA simulator, in the
session's simulator child: cudasim.py), streaming from a count store, Dask, the batch runner, case mode's refit
(a reference of part of the cohort, the rest called against it) and the R package's gcn.mops (R embedded through
rpy2, in a background job: background.py). Each answer must equal the in-memory CPU run's bit for bit: normalized
data, sINI, individual calls, INI, class indices and CN labels, the model's L, A and cov, the posteriors; the
segmentation, CNV and CNV-region tables (DataFrame.equals over the same columns); the integer copy numbers where
the path computes them.

The call qualities (QUAL, CNQ, the BED scores: calls.quality) too: each path gathers the model's evidence for
its calls block by block; the qualities of every CNV and of every sample over every CNV region must be the
in-memory run's, and a streamed run's BED and VCF records the files of the in-memory result.

The simulator runs each GPU thread as a Python thread (about half a CPU-minute per case here, whatever the size):
it runs every case, on the three chromosomes with posteriors: norm 0 (no normalization), norm 1 (the device
normalization), norm 2 (and coverages in the model) and haplocn.mops (the model without coverages).
"""
from __future__ import annotations

import importlib.util
import pickle
import shutil
import sys
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import background
import cudasim
import gcnmops
from gcnmops.data import CountData, make_count_data
from gcnmops.example import example_cohort
from gcnmops.params import PARAMETERS
from gcnmops.pipeline.methods import run_method

REPO = Path(__file__).resolve().parents[1]
#: regions per chromosome (chr1, chr2, chr3) and samples of the cohort
SIZES = (250, 200, 150)
N_SAMPLES = 8
#: case -> (method, parameters)
CASES = {
    "norm1": ("cn.mops", {"return_posterior": True}),
    "norm0": ("cn.mops", {"norm": 0, "return_posterior": True}),
    "norm2": ("cn.mops", {"norm": 2, "return_posterior": True}),
    "haplo": ("haplo", {"return_posterior": True}),
}
#: the cases the GPU backend runs in the simulator
SIM_CASES = tuple(CASES)
MATRICES = ("normalized_data", "local_assessments", "individual_call", "ini_call", "cn_index")
TABLES = ("gr", "segmentation", "cnvs", "cnvr")


@lru_cache(maxsize=None)
def cohort() -> CountData:
    """example_cohort's counts on three chromosomes of SIZES windows each, the samples in reverse order (the last
    three, case mode's new samples, carry CNVs in every case)."""
    data, _ = example_cohort(n_regions=sum(SIZES), n_samples=N_SAMPLES, seed=11, n_cnvs=10)
    names = np.concatenate([np.full(s, f"chr{k + 1}", dtype=object) for k, s in enumerate(SIZES)])
    start = np.concatenate([np.arange(s) for s in SIZES]) * 25_000 + 1
    ranges = pd.DataFrame({"seqnames": names, "start": start, "end": start + 24_999})
    return make_count_data(np.asfortranarray(data.counts[:, ::-1]), data.sample_names[::-1], ranges)


def run_in_memory(case: str, backend: str):
    """(result, result with integer copy numbers) of ``case`` in memory on ``backend``."""
    method, params = CASES[case]
    raw = run_method(method, cohort(), backend=backend, **params)
    return raw, gcnmops.calc_integer_copy_numbers(raw, backend=backend)


def assert_same(got, ref, path: str, *, posteriors: bool = True) -> None:
    """``got`` (the answer of ``path``) equals ``ref`` bit for bit, slot by slot."""
    assert list(got.sample_names) == list(ref.sample_names), path
    for name in MATRICES:
        a, b = np.asarray(getattr(got, name)), np.asarray(getattr(ref, name))
        assert a.dtype == b.dtype and a.shape == b.shape, (path, name, a.dtype, b.dtype, a.shape, b.shape)
        assert np.array_equal(a, b, equal_nan=True), (path, name)
    assert np.array_equal(got.integer_copy_number, ref.integer_copy_number), (path, "CN labels")
    for key in ("L", "A", "cov"):
        a, b = np.asarray(got.params[key]), np.asarray(ref.params[key])
        assert a.shape == b.shape and np.array_equal(a, b, equal_nan=True), (path, key)
    if posteriors:
        assert ref.posterior_probs is not None and got.posterior_probs is not None, path
        assert np.array_equal(got.posterior_probs, ref.posterior_probs, equal_nan=True), (path, "posteriors")
    for name in TABLES:
        a, b = getattr(got, name), getattr(ref, name)
        assert set(a.columns) == set(b.columns), (path, name, list(a.columns), list(b.columns))
        a, b = a[list(b.columns)].reset_index(drop=True), b.reset_index(drop=True)
        if not a.equals(b):
            pd.testing.assert_frame_equal(a, b, check_exact=True, obj=f"{path}: {name}")  # names the difference
            raise AssertionError(f"{path}: {name} differs (not DataFrame.equals)")


def qualities(result) -> dict:
    """The call qualities of ``result`` as its call files write them: each CNV's call and genotype quality, and
    per CNV region (VCF record) its QUAL and every sample's CNQ."""
    from gcnmops.calls import quality
    from gcnmops.outputs.callfiles import vcf_table
    from gcnmops.pipeline.family import cnvr_per_sample

    table = vcf_table(result.replace(cnvr=cnvr_per_sample(result)))
    return {"cnv call": quality.call_qualities(result)[0], "cnv genotype": quality.genotype_qualities(result),
            "region QUAL": table.fixed["QUAL"].to_numpy(), "region CNQ": table.cells["CNQ"]}


def assert_same_qualities(got, ref, path: str) -> None:
    """``got``'s call qualities (``qualities``) are ``ref``'s."""
    a, b = qualities(got), qualities(ref)
    assert len(b["cnv call"]) and b["region CNQ"].size, path
    for key in b:
        assert a[key].shape == b[key].shape and np.array_equal(a[key], b[key]), (path, key, a[key], b[key])


def call_records(folder: Path) -> dict:
    """The BED lines and VCF records (without the header) of the call files in ``folder``."""
    import gzip

    files = {name: (folder / name).read_text().splitlines() for name in ("cnvs.bed", "cnvr.bed")}
    files["cnvr.vcf.gz"] = [x for x in gzip.open(folder / "cnvr.vcf.gz", "rt").read().splitlines()
                            if not x.startswith("#")]
    return files


@pytest.fixture(scope="module")
def in_memory() -> dict:
    """case -> (result, integer result) of the in-memory CPU run: the answer every path must give."""
    return {case: run_in_memory(case, "cpu") for case in CASES}


def test_the_cohort_has_calls_in_every_case(in_memory):
    assert len(set(cohort().chromosomes)) == 3
    for case, (raw, integer) in in_memory.items():
        assert len(raw.cnvs) > 0 and len(raw.cnvr) > 0 and raw.posterior_probs is not None, case
        assert integer.has_integer_copy_numbers(), case
    assert not np.array_equal(in_memory["norm0"][0].local_assessments, in_memory["norm1"][0].local_assessments)


def test_a_difference_of_one_ulp_is_found(in_memory):
    """The comparison sees the last bit of a matrix and of a table."""
    raw = in_memory["norm1"][0]
    sini = raw.local_assessments.copy(order="F")
    sini[7, 3] = np.nextafter(sini[7, 3], np.inf)
    cnvs = raw.cnvs.copy()
    cnvs.loc[0, "mean"] = np.nextafter(cnvs.loc[0, "mean"], np.inf)
    for changed in (dict(local_assessments=sini), dict(cnvs=cnvs)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            other = raw.replace(**changed)
        with pytest.raises(AssertionError):
            assert_same(other, raw, "changed")
    assert_same(raw.replace(), raw, "unchanged")


# ------------------------------------------------------------------------------------------------- the GPU
GPU_CHILD = r'''
    import pickle, sys
    from gcnmops.cuda import probe
    from test_paths_agree import SIM_CASES, run_in_memory
    probe.gpu_available = lambda: True  # the simulator is no usable GPU to the probe
    for case in SIM_CASES:
        with open(f"{sys.argv[1]}/{case}.pkl", "wb") as fh:
            pickle.dump(run_in_memory(case, "gpu"), fh)
'''
GPU_SCENARIO = cudasim.register(__name__, GPU_CHILD)


@pytest.mark.parametrize("case", SIM_CASES)
def test_gpu_backend(case, in_memory, cuda_simulator):
    """The GPU backend (device-resident normalization and model, GPU segmentation, integer copy numbers) in numba's
    CUDA simulator."""
    with open(cuda_simulator.wait(GPU_SCENARIO) / f"{case}.pkl", "rb") as fh:
        raw, integer = pickle.load(fh)
    assert_same(raw, in_memory[case][0], f"gpu {case}")
    assert_same(integer, in_memory[case][1], f"gpu {case} integer")
    assert_same_qualities(integer, in_memory[case][1], f"gpu {case}")


# ------------------------------------------------------------------------------------ streaming, Dask, batch
@pytest.mark.parametrize("case", CASES)
def test_streaming(case, in_memory, tmp_path):
    pytest.importorskip("zarr")
    from gcnmops.io.store import save_count_data
    from gcnmops.pipeline.streaming import run_streaming

    method, params = CASES[case]
    store = save_count_data(cohort(), tmp_path / "c.zarr", rows_per_chunk=300, samples_per_chunk=3)
    got = run_streaming(store, tmp_path / "out", method=method, backend="cpu", formats=["bed", "vcf"], **params)
    assert_same(got.compute(), in_memory[case][1], f"streaming {case}")
    # the one integer routine on a result in a Zarr store: the regions around the CNVs read from it
    raw = run_streaming(store, tmp_path / "raw", method=method, backend="cpu", integer=False, **params)
    assert not raw.has_integer_copy_numbers()
    integer = gcnmops.calc_integer_copy_numbers(raw)
    assert type(integer).__name__ == "StoredResult", type(integer)
    assert_same(integer.compute(), in_memory[case][1], f"streaming {case}, integer from the store")

    pytest.importorskip("pysam")
    from gcnmops.outputs.writers import write_result
    from gcnmops.pipeline.family import cnvr_per_sample

    ref = in_memory[case][1]
    write_result(ref.replace(cnvr=cnvr_per_sample(ref)), tmp_path / "ref", formats=["bed", "vcf"])
    streamed, written = call_records(tmp_path / "out"), call_records(tmp_path / "ref")
    assert len(written["cnvr.vcf.gz"]) > 0
    for name in written:
        assert streamed[name] == written[name], (case, name)


@pytest.mark.parametrize("case", CASES)
def test_dask(case, in_memory):
    pytest.importorskip("dask")
    pytest.importorskip("zarr")
    from gcnmops.distributed import cn_mops

    method, params = CASES[case]
    got = cn_mops(cohort(), client=False, method=method, backend="cpu", rows_per_chunk=350, samples_per_chunk=3,
                  **params)
    assert_same(got.compute(), in_memory[case][0], f"dask {case}")
    integer = got.calc_integer_copy_numbers().compute()
    assert_same(integer, in_memory[case][1], f"dask {case} integer")
    assert integer.call_evidence is not None  # the blocks' evidence, joined
    assert_same_qualities(integer, in_memory[case][1], f"dask {case}")


@pytest.fixture(scope="module")
def batch_folder(tmp_path_factory) -> Path:
    """Every case as an experiment of one batch (a manifest with cn.mops's parameter names), in a worker
    process."""
    from gcnmops.pipeline.batch import run_batch

    folder = tmp_path_factory.mktemp("batch")
    data = cohort()
    pd.concat([data.ranges, pd.DataFrame(data.counts, columns=data.sample_names)], axis=1).to_parquet(
        folder / "cohort.parquet")
    lines = ["id\tinput\tmethod\tparams"]
    for case, (method, params) in CASES.items():
        pairs = " ".join(f"{PARAMETERS[k].r_name}={str(v).upper() if isinstance(v, bool) else v}"
                         for k, v in params.items())
        lines.append(f"{case}\tcohort.parquet\t{method}\t{pairs}")
    (folder / "manifest.tsv").write_text("\n".join(lines) + "\n")
    summary = run_batch(folder / "manifest.tsv", folder / "out", workers=1, formats=["parquet"],
                        echo=lambda line: None)
    assert (summary["status"] == "done").all(), summary.to_string()
    return folder / "out"


@pytest.mark.parametrize("case", CASES)
def test_batch(case, in_memory, batch_folder):
    """The batch's files read back (posteriors are not written)."""
    got = gcnmops.read_result(batch_folder / case)
    assert_same(got, in_memory[case][1], f"batch {case}", posteriors=False)
    assert_same_qualities(got, in_memory[case][1], f"batch {case}")


# ---------------------------------------------------------------------------------------------- case mode
@pytest.mark.parametrize("case", CASES)
def test_case_mode_refit(case, in_memory, tmp_path):
    """A reference of the first five samples (stored with its counts, read back), the other three called with
    mode="refit": cn.mops on the whole cohort, the new samples' part of it (casemode.select_samples)."""
    from gcnmops.casemode import build_reference, call_samples, load_reference
    from gcnmops.casemode.api import select_samples

    method, params = CASES[case]
    data = cohort()
    first = make_count_data(data.counts[:, :5], data.sample_names[:5], data.ranges)
    rest = make_count_data(data.counts[:, 5:], data.sample_names[5:], data.ranges)
    build_reference(first, method, keep_counts=True, backend="cpu", **params).save(tmp_path / "ref")
    got = call_samples(rest, load_reference(tmp_path / "ref"), "refit", integer=True, backend="cpu")
    ref = select_samples(in_memory[case][1], data.sample_names[5:])
    assert len(ref.cnvs) > 0, case
    assert_same(got, ref, f"refit {case}")
    assert_same_qualities(got, ref, f"refit {case}")


# ---------------------------------------------------------------------------------------------- the R package
R_CHILD = r'''
import pickle, subprocess, sys
from pathlib import Path

folder, repo = Path(sys.argv[1]), Path(sys.argv[2])
need = ("GenomicRanges", "IRanges", "S4Vectors", "GenomeInfoDb", "BiocGenerics", "reticulate")
check = subprocess.run(["Rscript", "-e", "pk <- commandArgs(TRUE); cat(pk[!vapply(pk, requireNamespace, TRUE, "
                        "quietly = TRUE)], sep = ' ')", *need], capture_output=True, text=True)
if check.stdout.strip():
    (folder / "skip.txt").write_text(f"R packages missing: {check.stdout.strip()}")
    sys.exit(0)
lib = folder / "lib"
lib.mkdir()
install = subprocess.run(["R", "CMD", "INSTALL", "--no-test-load", "-l", str(lib),
                          str(repo / "r_package" / "gcn.mops")], capture_output=True, text=True)
if install.returncode:
    sys.exit("R CMD INSTALL failed:\n" + install.stdout[-3000:] + install.stderr[-3000:])
import rpy2.robjects as ro
from gcnmops.outputs.rresult import from_r
from gcnmops.params import PARAMETERS
from gcnmops.rbridge import attach
from test_paths_agree import CASES, cohort

ro.r(f'suppressPackageStartupMessages(library(gcn.mops, lib.loc = "{lib.as_posix()}"))')
attach()
data = cohort()
granges = ro.r("""function(seqnames, start, end, counts, names) {
  gr <- GenomicRanges::GRanges(seqnames, IRanges::IRanges(start, end))
  m <- matrix(counts, ncol = length(names), dimnames = list(NULL, names))
  S4Vectors::mcols(gr) <- S4Vectors::DataFrame(m, check.names = FALSE)
  gr
}""")(ro.StrVector(list(map(str, data.ranges["seqnames"]))), ro.IntVector(data.ranges["start"].tolist()),
      ro.IntVector(data.ranges["end"].tolist()), ro.FloatVector(data.counts.ravel(order="F").tolist()),
      ro.StrVector(data.sample_names))
functions = {"cn.mops": "gcn.mops", "haplo": "haplogcn.mops"}
integer = ro.r("gcn.mops::calcIntegerCopyNumbers")
for case, (method, params) in CASES.items():
    fn = ro.r(f'function(gr, ...) gcn.mops::{functions[method]}(gr, backend = "cpu", ...)')
    res = fn(granges, **{PARAMETERS[k].r_name: v for k, v in params.items()})
    with open(folder / f"{case}.pkl", "wb") as fh:
        pickle.dump((from_r(res), from_r(integer(res))), fh)
(folder / "done").touch()
'''


def _start_r_bridge(items) -> background.Job | None:
    """The R package's runs as a background job, where R and rpy2 are installed (else None: the test skips)."""
    if not (shutil.which("R") and shutil.which("Rscript")) or importlib.util.find_spec("rpy2") is None:
        return None
    return background.Job(lambda folder: [sys.executable, "-c", R_CHILD, str(folder), str(REPO)],
                          background.python_env(), prefix="rpaths")


background.register("r_bridge_runs", _start_r_bridge)


@pytest.fixture(scope="module")
def r_bridge_runs(background_jobs) -> Path:
    """The folder of the R package's results (skips where R, its packages or rpy2 are missing)."""
    job = background_jobs.get("r_bridge_runs")
    if job is None:
        pytest.skip("R or rpy2 is not installed")
    returncode = job.wait(1500)
    if (job.folder / "skip.txt").exists():
        pytest.skip((job.folder / "skip.txt").read_text())
    assert returncode == 0 and (job.folder / "done").exists(), job.output()[-6000:]
    return job.folder


@pytest.mark.parametrize("case", CASES)
def test_r_package(case, in_memory, r_bridge_runs):
    """R's gcn.mops() / haplogcn.mops() on a GRanges (the engine through the R bridge), and R's
    calcIntegerCopyNumbers(), read back with from_r."""
    with open(r_bridge_runs / f"{case}.pkl", "rb") as fh:
        raw, integer = pickle.load(fh)
    assert_same(raw, in_memory[case][0], f"R {case}")
    assert_same(integer, in_memory[case][1], f"R {case} integer")
