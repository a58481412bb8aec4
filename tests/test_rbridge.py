"""The R bridge: the R package gcn.mops (R CMD check --as-cran of its tarball, which runs its testthat suite
and examples through gcnmops.rbridge, in the background from the session's start: background.py;
GCNMOPS_R_CHECK=0: the testthat suite alone) and R from Python
(gcnmops.io.rsession's zero-copy views, gcnmops.outputs.robject's to_r, gcnmops.outputs.rresult's from_r, .rds results).

Skipped cleanly when R, the R packages the bridge needs, or rpy2 are missing.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import background
import gcnmops
from golden import GOLDEN_DIR, array, call_kwargs, manifest, table

pytestmark = pytest.mark.r

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "r_package" / "gcn.mops"
SHARED = Path(os.environ.get("GCNMOPS_SHARED_DIR", REPO.parent / "shared"))
R_DEPENDS = ("GenomicRanges", "IRanges", "S4Vectors", "GenomeInfoDb", "BiocGenerics", "SummarizedExperiment", "reticulate",
             "testthat", "jsonlite")


def _have_r() -> bool:
    return bool(shutil.which("R") and shutil.which("Rscript"))


@functools.lru_cache(maxsize=None)
def _missing_r_packages() -> tuple[str, ...]:
    code = ("pk <- commandArgs(TRUE); ok <- vapply(pk, requireNamespace, TRUE, quietly = TRUE); "
            "cat(pk[!ok], sep = '\\n')")
    proc = subprocess.run(["Rscript", "-e", code, *R_DEPENDS], capture_output=True, text=True, timeout=300)
    return tuple(line for line in proc.stdout.split() if line)


def _skip_without_r() -> None:
    if not _have_r():
        pytest.skip("R is not installed (scripts/setup.sh installs it)")
    missing = _missing_r_packages()
    if missing:
        pytest.skip(f"R packages missing: {', '.join(missing)}")


def _have_rpy2() -> bool:
    try:
        import rpy2.robjects  # noqa: F401
    except Exception:  # noqa: BLE001 - ImportError, or R failing to start
        return False
    return True


# cn.mops's example data and BAM files (XRanges, exomeCounts, test*.bam): the reference data's, built into the
# package from ../shared by r_package/make_data.R (scripts/setup.sh), not committed
EXAMPLE_DATA = PKG / "data" / "cn.mops.rda"


def _skip_without_example_data() -> None:
    """R CMD check runs the vignette and examples on cn.mops's example data, absent where ../shared was."""
    if not EXAMPLE_DATA.is_file():
        pytest.skip(f"the R package's example data are missing ({EXAMPLE_DATA.relative_to(REPO)}): "
                    "scripts/setup.sh builds them from ../shared, absent here")


def _skip_without_engine() -> None:
    """R's gcn.mops runs the engine in this Python: numpy < 2 (Debian's reticulate 1.28) and rpy2."""
    if int(np.__version__.split(".")[0]) >= 2:
        pytest.skip("reticulate 1.28 (Debian) needs numpy < 2 in the Python R uses (scripts/setup.sh pins it)")
    if not _have_rpy2():
        pytest.skip("rpy2 is not installed in this Python")


# The package R CMD check installed (test_r_package), which r_lib then uses instead of installing it again.
_CHECKED: dict[str, Path] = {}


def _start_r_check(items) -> background.Job | None:
    """scripts/check_r_package.sh as a background job, when test_r_package will run it: R with the packages the
    bridge needs, rpy2 (not imported here: that would embed R in the session's process) and numpy < 2."""
    if os.environ.get("GCNMOPS_R_CHECK", "1") == "0" or not _have_r() or _missing_r_packages():
        return None
    if int(np.__version__.split(".")[0]) >= 2 or importlib.util.find_spec("rpy2") is None:
        return None
    if not EXAMPLE_DATA.is_file():
        return None
    env = background.python_env(GCNMOPS_PYTHON=sys.executable)  # the engine of this checkout
    if SHARED.is_dir():
        env.setdefault("GCNMOPS_SHARED_DIR", str(SHARED))
    return background.Job(lambda out: ["bash", str(REPO / "scripts" / "check_r_package.sh"), str(out)], env,
                          prefix="rcheck")


background.register("r_check", _start_r_check)


@pytest.fixture(scope="module")
def r_check(background_jobs) -> background.Job | None:
    """The R CMD check started in the background when the tests were collected (None: not started)."""
    return background_jobs.get("r_check")


@pytest.fixture(scope="session")
def r_lib(tmp_path_factory) -> Path:
    """A temporary R library holding the freshly installed gcn.mops: the one test_r_package's R CMD check
    installed when it ran in this session, else one installed here."""
    _skip_without_r()
    checked = _CHECKED.get("lib")
    if checked is not None and (checked / "gcn.mops" / "R").is_dir():
        return checked
    lib = tmp_path_factory.mktemp("rlib")
    proc = subprocess.run(["R", "CMD", "INSTALL", "--no-test-load", "-l", str(lib), str(PKG)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"R CMD INSTALL failed:\n{proc.stdout}\n{proc.stderr}"
    return lib


def _r_env(r_lib: Path) -> dict:
    env = background.python_env()  # the engine of this checkout
    env["R_LIBS"] = os.pathsep.join(p for p in (str(r_lib), os.environ.get("R_LIBS", "")) if p)
    env["GCNMOPS_PYTHON"] = sys.executable
    if SHARED.is_dir():
        env.setdefault("GCNMOPS_SHARED_DIR", str(SHARED))
    env.setdefault("GCNMOPS_GOLDEN_DIR", str(GOLDEN_DIR))
    return env


def test_r_package(request, r_check):
    """The R package's own tests: golden cases slot by slot, cn.mops's vignette workflow, messages, accessors,
    the thesis script, one class across cn.mops/gcn.mops sessions, zero copy, SummarizedExperiment and HDF5Array
    inputs. By default inside ``R CMD check --as-cran`` of the built tarball with the engine and the golden data
    reachable (scripts/check_r_package.sh: the vignette built and rebuilt, no ERROR, no WARNING, every test and
    runnable example run; then BiocCheck without ERROR or WARNING where it is installed; run in the background
    from the session's start); with GCNMOPS_R_CHECK=0 the testthat suite alone against an installed package."""
    _skip_without_r()
    _skip_without_engine()
    if os.environ.get("GCNMOPS_R_CHECK", "1") != "0":
        _skip_without_example_data()
        assert r_check is not None, "the R CMD check was not started with the session (see _start_r_check)"
        returncode = r_check.wait(1800)
        _CHECKED["lib"] = r_check.folder / "gcn.mops.Rcheck"
        text = r_check.output()
        assert returncode == 0, text[-8000:]
        assert "R CMD check passed" in text, text[-4000:]
        assert re.search(r"checking re-building of vignette outputs \.\.\. (\[[^]]*\] )?OK", text), text[-4000:]
        summary = re.findall(r"\[ FAIL (\d+) \| WARN \d+ \| SKIP (\d+) \| PASS (\d+) \]", text)
        assert summary and int(summary[-1][0]) == 0 and int(summary[-1][2]) > 0, text[-4000:]
        if "BiocCheck: not installed" not in text:
            assert re.search(r"BiocCheck passed: 0 ERRORS \| 0 WARNINGS", text), text[-4000:]
        return
    r_lib = request.getfixturevalue("r_lib")
    code = (
        "res <- as.data.frame(testthat::test_dir('tests/testthat', package = 'gcn.mops', "
        "load_package = 'installed', reporter = 'summary', stop_on_failure = FALSE)); "
        "cat('\\nRESULT', jsonlite::toJSON(list(passed = sum(res$passed), failed = sum(res$failed), "
        "skipped = sum(res$skipped), error = sum(res$error)), auto_unbox = TRUE), '\\n')"
    )
    proc = subprocess.run(["Rscript", "-e", code], cwd=PKG, env=_r_env(r_lib), capture_output=True, text=True,
                          timeout=900)
    out = proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"testthat did not complete:\n{out[-6000:]}"
    res = json.loads(lines[-1].split(" ", 1)[1])
    assert res["failed"] == 0 and res["error"] == 0, f"R tests failed: {res}\n{out[-6000:]}"
    assert res["passed"] > 0, out[-3000:]
    if GOLDEN_DIR.is_dir() and (SHARED / "data" / "cn.mops.RData").exists():
        assert res["skipped"] == 0, f"R tests skipped (engine or data not found): {res}\n{out[-4000:]}"


# ---------------------------------------------------------------------------------------------
# R from Python (rpy2 embeds R in this process)
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ro(r_lib):
    if not _have_rpy2():
        pytest.skip("rpy2 is not installed in this Python")
    import rpy2.robjects as robjects

    robjects.r(f'.libPaths(c("{r_lib.as_posix()}", .libPaths()))')
    return robjects


def test_r_array_is_a_view_of_r_memory(ro):
    from gcnmops.io.rsession import r_address, r_array

    m = ro.r("matrix(as.double(1:12), 4, 3)")
    v = r_array(m)
    assert v.shape == (4, 3) and v.dtype == np.float64 and v.flags.f_contiguous and v.flags.writeable
    assert v.ctypes.data == r_address(m)
    np.testing.assert_array_equal(v, np.arange(1, 13, dtype=float).reshape(4, 3, order="F"))
    v[1, 2] = -7.5                                  # R sees the write: same memory
    assert ro.r("function(x) x[2, 3]")(m)[0] == -7.5
    i = r_array(ro.r("matrix(1:6, 2)"))
    assert i.dtype == np.int32 and i[1, 2] == 6
    raw = r_array(ro.r("as.raw(c(0, 3, 255))"))
    assert raw.dtype == np.uint8 and list(raw) == [0, 3, 255]
    arr = r_array(ro.r("array(as.double(1:24), c(2, 3, 4))"))
    assert arr.shape == (2, 3, 4) and arr[1, 2, 3] == 24
    # the view keeps the R object alive
    w = r_array(ro.r("rnorm(1000)"))
    first = float(w[0])
    del m
    ro.r("invisible(gc())")
    assert float(w[0]) == first


@pytest.fixture(scope="module")
def posterior_result():
    case = "xranges_norm0_posterior"
    if not (GOLDEN_DIR / case).is_dir():
        pytest.skip(f"golden case {case} not found")
    counts = np.asarray(array(case, "input_counts"), dtype=np.float64)
    frame = pd.DataFrame(counts, columns=manifest(case)["sampleNames"])
    return gcnmops.cn_mops(frame, backend="cpu", **call_kwargs(case))


@pytest.fixture(scope="module")
def ranged_result():
    case = "synth3chr_default"
    if not (GOLDEN_DIR / case).is_dir():
        pytest.skip(f"golden case {case} not found")
    frame = table(case, "input_ranges")
    counts = array(case, "input_counts")
    for k, s in enumerate(manifest(case)["sampleNames"]):
        frame[s] = counts[:, k]
    return gcnmops.cn_mops(frame, backend="cpu")


def _assert_same(a, b, integer: bool = False):
    for name in ("normalized_data", "local_assessments", "individual_call", "ini_call"):
        np.testing.assert_array_equal(np.asarray(getattr(a, name)), np.asarray(getattr(b, name)), err_msg=name)
    np.testing.assert_array_equal(a.cn_index, b.cn_index)
    for key in ("L", "A", "cov"):
        np.testing.assert_array_equal(np.asarray(a.params[key]), np.asarray(b.params[key]), err_msg=key)
    if a.posterior_probs is None:
        assert b.posterior_probs is None
    else:
        np.testing.assert_array_equal(a.posterior_probs, b.posterior_probs)
    assert a.sample_names == b.sample_names
    pd.testing.assert_frame_equal(a.gr.reset_index(drop=True), b.gr.reset_index(drop=True), check_dtype=False)
    for t in ("segmentation", "cnvs", "cnvr"):
        x, y = getattr(a, t).reset_index(drop=True), getattr(b, t).reset_index(drop=True)
        assert list(x.columns) == list(y.columns), t
        assert len(x) == len(y), t
        for col in x.columns:
            if col in ("median", "mean"):
                np.testing.assert_array_equal(x[col].to_numpy(float), y[col].to_numpy(float), err_msg=f"{t}.{col}")
            else:
                fx = x[col].map(lambda v: None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v))
                fy = y[col].map(lambda v: None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v))
                assert fx.tolist() == fy.tolist(), f"{t}.{col}"


def test_to_r_from_r_round_trip(ro, posterior_result):
    from gcnmops.outputs.robject import to_r
    from gcnmops.outputs.rresult import from_r
    from gcnmops.io.rsession import r_address

    res = posterior_result
    obj = to_r(res)
    assert list(ro.r("function(r) class(r)")(obj)) == ["CNVDetectionResult"]
    m, n_samples = res.local_assessments.shape
    assert list(ro.r("function(r) dim(r@localAssessments)")(obj)) == [m, n_samples]
    assert list(ro.r("function(r) dim(r@posteriorProbs)")(obj)) == [m, 9, n_samples]
    assert list(ro.r("function(r) class(r@integerCopyNumber[1, 1])")(obj)) == ["character"]
    assert list(ro.r("function(r) as.character(GenomeInfoDb::seqnames(r@gr)[1])")(obj)) == ["undef"]
    back = from_r(obj)
    _assert_same(res, back)
    # the Python arrays of from_r() are R's memory
    slot = ro.r("function(r) r@localAssessments")(obj)
    assert back.local_assessments.ctypes.data == r_address(slot)
    assert back.params["L"].ctypes.data == r_address(ro.r("function(r) r@params$L")(obj))


def test_from_r_result_gives_the_same_integer_copy_numbers(ro, ranged_result):
    from gcnmops.outputs.rresult import from_r
    from gcnmops.rbridge import to_r  # registers the engine callback, so R's gcn.mops functions can call the engine

    res = ranged_result
    obj = to_r(res)
    assert list(ro.r("function(r) as.character(GenomeInfoDb::seqnames(r@gr)[1])")(obj)) == [
        str(res.gr["seqnames"].iloc[0])]
    assert list(ro.r("function(r) colnames(S4Vectors::mcols(r@cnvr))")(obj)) == res.sample_names
    back = from_r(obj)
    _assert_same(res, back)
    ours = gcnmops.calc_integer_copy_numbers(res)
    theirs = gcnmops.calc_integer_copy_numbers(back)
    _assert_same(ours, theirs)
    # an integer result goes to R with character labels in cnvr, segmentation, cnvs
    obj_i = to_r(ours)
    assert list(ro.r("function(r) class(S4Vectors::mcols(r@cnvr)[[1]])")(obj_i)) == ["character"]
    assert list(ro.r("function(r) class(S4Vectors::mcols(r@cnvs)$CN)")(obj_i)) == ["character"]
    _assert_same(ours, from_r(obj_i))
    # R's own calcIntegerCopyNumbers() on the R object gives the same labels (R calls the engine)
    obj_ri = ro.r("function(r) gcn.mops::calcIntegerCopyNumbers(r)")(obj)
    _assert_same(ours, from_r(obj_ri))


def test_rds_results(ro, ranged_result, tmp_path):
    from gcnmops.outputs.writers import write_result
    from gcnmops.outputs.rresult import read_rds_result

    written = write_result(ranged_result, tmp_path / "out", formats=["rds"])
    rds = [p for p in written if p.name.endswith(".rds")]  # the call tables and params.json come with it
    assert [p.name for p in rds] == ["result.rds"]
    back = read_rds_result(rds[0])
    _assert_same(ranged_result, back)
    assert list(ro.r(f'function() class(readRDS("{rds[0].as_posix()}"))')()) == ["CNVDetectionResult"]


@pytest.mark.parametrize("fmt", ["parquet", "tsv"])
def test_r_read_result(ro, ranged_result, tmp_path, fmt):
    """R's readResult() reads a result folder into the result that was written: the Parquet matrices through the
    engine's pyarrow (no R arrow), or the TSV ones."""
    from gcnmops.outputs.rresult import from_r
    from gcnmops.outputs.writers import write_result
    from gcnmops.rbridge import attach

    _skip_without_engine()
    write_result(ranged_result, tmp_path / "out", formats=[fmt])
    attach()  # R's gcn.mops calls this Python's engine
    obj = ro.r("gcn.mops::readResult")(str(tmp_path / "out"))
    assert list(ro.r("function(r) class(r)")(obj)) == ["CNVDetectionResult"]
    _assert_same(ranged_result, from_r(obj))
    with pytest.raises(Exception, match="not a folder"):
        ro.r("gcn.mops::readResult")(str(tmp_path / "missing"))
