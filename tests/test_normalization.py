"""normalizeChromosomes / normalizeGenome / norm=2 coverage against cn.mops's golden outputs,
R's density() against our port, and the input errors."""
from __future__ import annotations

import shutil
import subprocess
import warnings

import numpy as np
import pandas as pd
import pytest

from gcnmops.exact.density import bw_nrd0, density_mode, quantiles7, r_density
from gcnmops.errors import InputError
from gcnmops.normalization.cpu import normalize_chromosomes, normalize_genome, sample_coverage
from gcnmops.exact.rstats import r_median, r_quantile
from golden import GOLDEN_DIR, array, assert_close, manifest, table

RTOL = 1e-9
ATOL = 1e-12  # floor for values near 0
NO_GOLDEN = f"golden outputs not found at {GOLDEN_DIR} (set GCNMOPS_GOLDEN_DIR)"


def _has_case(case: str) -> bool:
    return (GOLDEN_DIR / case / "manifest.json").is_file()


def _normalize_arrays() -> list:
    if not _has_case("normalize"):
        return [pytest.param(None, marks=pytest.mark.skip(reason=NO_GOLDEN), id="normalize")]
    names = [a for a in manifest("normalize")["arrays"] if a.startswith("norm_")]
    return [pytest.param(a, id=f"normalize-{a}") for a in names]


@pytest.mark.parametrize("name", _normalize_arrays())
def test_golden_normalize(name):
    """Case `normalize`: every normType x sizeFactor (and the ploidy vector) on 3 chromosomes."""
    parts = name.split("_")  # norm_<normType>_<sizeFactor>[_ploidy]
    kwargs = {"norm_type": parts[1], "size_factor": parts[2], "qu": 0.25, "qu_size_factor": 0.75}
    if name.endswith("_ploidy"):
        kwargs["ploidy"] = array("normalize", "ploidy")
    counts = array("normalize", "input_counts")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # cn.mops raised no warning on these data
        got = normalize_chromosomes(counts, array("normalize", "chr"), **kwargs)
    assert got.dtype == np.float64 and got.flags.f_contiguous
    assert_close(got, array("normalize", name), f"normalize/{name}", rtol=RTOL, atol=ATOL)


#: cases whose cn.mops call normalized with these normalizeChromosomes parameters
CASE_NORM = {
    "xranges_default": {},
    "exome_default": {},
    "synth3chr_default": {},
    "xranges_5classes": {},
    "xranges_params": {},
    "synth3chr_norm2_median": {"norm_type": "median", "size_factor": "median"},
}


def _chromosomes(case: str):
    tables = manifest(case).get("tables")
    if isinstance(tables, dict) and "input_ranges" in tables:
        return table(case, "input_ranges")["seqnames"].astype(str).to_numpy()
    return None  # matrix input: all "undef"


def _case_params(cases) -> list:
    return [pytest.param(c, id=c, marks=[] if _has_case(c) else pytest.mark.skip(reason=NO_GOLDEN)) for c in cases]


@pytest.mark.parametrize("case", _case_params(CASE_NORM))
def test_golden_normalized_data(case):
    m = manifest(case)
    params = m.get("params") or {}
    expected_norm = {"normType": CASE_NORM[case].get("norm_type", "poisson"),
                     "sizeFactor": CASE_NORM[case].get("size_factor", "mean")}
    for key, default in expected_norm.items():  # the table above agrees with the manifest
        assert params.get(key, "poisson" if key == "normType" else "mean") == default
    assert "normQu" not in params and "quSizeFactor" not in params
    got = normalize_chromosomes(array(case, "input_counts"), _chromosomes(case), **CASE_NORM[case])
    assert_close(got, array(case, "normalizedData"), f"{case}/normalizedData", rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("case", _case_params(["synth3chr_norm2_median"]))
def test_golden_sample_coverage(case):
    assert (manifest(case).get("params") or {}).get("norm") == 2
    got = sample_coverage(array(case, "input_counts"))
    assert_close(got, array(case, "params_cov"), f"{case}/params_cov", rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------------------------------------
# R's density()


def _density_vectors() -> list[np.ndarray]:
    rng = np.random.default_rng(20240607)
    return [rng.gamma(2.0, 0.6, 50), rng.gamma(3.0, 0.5, 1000) * 2.0, np.round(rng.gamma(2.0, 1.0, 5000), 1),
            rng.lognormal(0.0, 0.4, 20000), np.array([0.3, 5.1]), rng.gamma(2.0, 0.6, 3)]


@pytest.mark.r
@pytest.mark.skipif(shutil.which("Rscript") is None, reason="Rscript (R) is not installed")
def test_density_mode_matches_r(tmp_path):
    """density(v, na.rm=TRUE, from=0, to=q95, n=q95*100) as in cn.mops's poisson step: bw, grid, values, mode."""
    vectors = _density_vectors()
    for i, v in enumerate(vectors):
        np.savetxt(tmp_path / f"v{i}.txt", v, fmt="%.17g")
    script = f"""
    for (i in 0:{len(vectors) - 1}) {{
      v <- scan(file.path("{tmp_path}", paste0("v", i, ".txt")), quiet = TRUE)
      u <- quantile(v, 0.95)
      d <- density(v, na.rm = TRUE, from = 0, to = u, n = u * 100)
      cat(sprintf("%a", c(u, d$bw, d$x[which.max(d$y)], length(d$x))), "\\n")
      cat(sprintf("%a", d$y), "\\n")
      cat(sprintf("%a", d$x), "\\n")
    }}"""
    res = subprocess.run(["Rscript", "-e", script], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 3 * len(vectors)
    for i, v in enumerate(vectors):
        u_r, bw_r, mode_r, n_r = (float.fromhex(t) for t in lines[3 * i].split())
        y_r = np.array([float.fromhex(t) for t in lines[3 * i + 1].split()])
        x_r = np.array([float.fromhex(t) for t in lines[3 * i + 2].split()])
        (u,) = quantiles7(v, (0.95,))
        assert u == pytest.approx(u_r, rel=1e-15, abs=0)
        assert bw_nrd0(v) == pytest.approx(bw_r, rel=1e-14)
        grid, dens = r_density(v, n=u * 100, from_=0.0, to=u)
        assert grid.size == int(n_r)
        np.testing.assert_array_equal(grid, x_r)  # R's seq.int, bit for bit
        np.testing.assert_allclose(dens, y_r, rtol=1e-9, atol=1e-12 * y_r.max())
        mode = density_mode(v, 0.0, u, u * 100)
        assert abs(mode - mode_r) <= 1e-12 * max(1.0, abs(mode_r)), (i, mode, mode_r)


def test_density_grid_sizes():
    v = np.random.default_rng(1).gamma(2.0, 0.6, 500)
    grid, dens = r_density(v, n=299.5, from_=0.0, to=3.0)  # fractional n: ceiling(n) output points
    assert grid.size == 300 and grid[0] == 0.0 and grid[-1] == 3.0 and (dens >= 0).all()
    assert density_mode(v, 0.0, 3.0, 299.5) == grid[np.argmax(dens)]
    assert np.isnan(density_mode(v, 0.0, 0.0, 0.0))  # empty grid: no mode
    grid, _ = r_density(v, n=1500, from_=0.0, to=3.0)  # working grid 2048
    assert grid.size == 1500


# ---------------------------------------------------------------------------------------------
# behaviour on constructed data


def _counts(m=400, n=6, seed=3, lam=60.0):
    rng = np.random.default_rng(seed)
    depth = rng.uniform(0.5, 2.0, n)
    return rng.poisson(lam * depth, size=(m, n)).astype(np.int32)


def test_output_layout_and_input_untouched():
    x = _counts()
    before = x.copy()
    out = normalize_chromosomes(x)
    assert out.shape == x.shape and out.dtype == np.float64 and out.flags.f_contiguous
    np.testing.assert_array_equal(x, before)
    c_order = normalize_chromosomes(np.ascontiguousarray(x, dtype=np.float64))
    np.testing.assert_array_equal(out, c_order)


@pytest.mark.parametrize("norm_type", ["mean", "median", "quant", "mode"])
@pytest.mark.parametrize("size_factor", ["mean", "median", "quant", "mode"])
def test_simple_norm_types_by_hand(norm_type, size_factor):
    """Non-poisson types on one chromosome: out = X * f with f from the size factors, silent rows 0."""
    x = _counts(m=300, n=5).astype(np.float64)
    x[[7, 50], :] = 0.0
    x[100, :] = [0, 0.5, 0, 0, 0.25]  # silent: every value < 1
    keep = (x >= 1).any(axis=1)
    y = x[keep]

    def mode_nonzero(v):
        vals, cnt = np.unique(v[v != 0], return_counts=True)
        return vals[np.argmax(cnt)]

    sf = {"mean": y.mean(axis=0), "median": np.array([r_median(c) for c in y.T]),
          "quant": np.array([r_quantile(c, 0.75) for c in y.T]),
          "mode": np.array([mode_nonzero(c) for c in y.T])}[size_factor]
    f = {"mean": np.mean(sf) / sf, "median": r_median(sf) / sf, "quant": r_quantile(sf, 0.25) / sf,
         "mode": mode_nonzero(y.ravel()) / sf}[norm_type]
    expected = np.where(keep[:, None], x * f, 0.0)
    got = normalize_chromosomes(x, norm_type=norm_type, size_factor=size_factor)
    assert_close(got, expected, f"{norm_type}/{size_factor}", rtol=1e-13, atol=0)


def test_non_contiguous_chromosomes_equal_grouped():
    x = _counts(m=600, n=5)
    chrom = np.repeat(["chr1", "chr2", "chrX"], [250, 200, 150])
    grouped = normalize_chromosomes(x, chrom)
    perm = np.random.default_rng(7).permutation(600)
    shuffled = normalize_chromosomes(x[perm], chrom[perm])
    np.testing.assert_array_equal(shuffled, grouped[perm])
    # and each chromosome is normalized on its own rows only
    np.testing.assert_array_equal(grouped[250:450], normalize_chromosomes(x[250:450]))


def test_genome_is_one_chromosome_and_ploidy_defaults():
    x = _counts()
    out = normalize_chromosomes(x)
    np.testing.assert_array_equal(normalize_genome(x), out)
    np.testing.assert_array_equal(normalize_chromosomes(x, ["undef"] * x.shape[0]), out)
    np.testing.assert_array_equal(normalize_chromosomes(x, ploidy=[3] * x.shape[1]), out)  # all equal: as 2


def test_single_sample_unchanged():
    x = _counts(n=1)
    np.testing.assert_array_equal(normalize_chromosomes(x), x.astype(np.float64))


def test_all_zero_chromosome_left_alone_and_warnings():
    x = _counts(m=300, n=4).astype(np.float64)
    chrom = np.repeat(["a", "b", "c"], 100)
    x[100:200] = 0.0  # chromosome b: all zero, left as it is, no warning
    x[200:300] = 0.0
    x[250] = [3, 4, 5, 6]  # chromosome c: a single region with reads
    with pytest.warns(RuntimeWarning, match="Chromosome c"):
        out = normalize_chromosomes(x, chrom)
    np.testing.assert_array_equal(out[100:300], x[100:300])
    np.testing.assert_array_equal(out[:100], normalize_chromosomes(x[:100]))


def test_mode_size_factor_missing_uses_column_sums():
    x = _counts(m=200, n=4).astype(np.float64)
    x[:, 2] = 0.0
    x[0, 2] = 5.0  # column sum non-zero, but chromosome 2 has no reads in sample 3
    chrom = np.repeat(["1", "2"], 100)
    with pytest.warns(RuntimeWarning, match="size factors"):
        out = normalize_chromosomes(x, chrom, norm_type="mean", size_factor="mode")
    keep = (x[100:] >= 1).any(axis=1)
    sums = x.sum(axis=0)
    np.testing.assert_allclose(out[100:][keep], (x[100:] * (sums.mean() / sums))[keep], rtol=1e-14)


def test_ploidy_groups_scaled_to_diploid_median():
    x = _counts(m=500, n=6)
    ploidy = [2, 2, 2, 1, 1, 4]
    out = normalize_chromosomes(x, ploidy=ploidy)
    diploid = normalize_chromosomes(x[:, :3])
    np.testing.assert_array_equal(out[:, :3], diploid)
    haploid = normalize_chromosomes(x[:, 3:5])
    ref, mm = r_median(diploid), r_median(haploid)
    np.testing.assert_allclose(out[:, 3:5], haploid * ref / mm * 1 / 2, rtol=1e-15)
    np.testing.assert_allclose(out[:, 5], x[:, 5] * ref / r_median(x[:, 5]) * 4 / 2, rtol=1e-15)


def test_order_statistics_on_fractional_data():
    """Counting path (whole numbers) and selection path (fractions) give R's median / quantile."""
    rng = np.random.default_rng(11)
    x = rng.gamma(2.0, 10.0, size=(501, 4))
    for frac in (x, np.floor(x)):
        got = normalize_chromosomes(frac + 1.0, norm_type="median", size_factor="quant", qu_size_factor=0.3)
        sf = np.array([r_quantile(c, 0.3) for c in (frac + 1.0).T])
        np.testing.assert_allclose(got, (frac + 1.0) * (r_median(sf) / sf), rtol=1e-14)


def test_sample_coverage_by_hand():
    x = _counts(m=1000, n=5).astype(np.float64) + np.linspace(0, 0.5, 1000)[:, None]
    cov = []
    for c in x.T:
        lo, hi = r_quantile(c, 0.05), r_quantile(c, 0.95)
        cov.append(c[(c > lo) & (c < hi)].mean())
    cov = np.array(cov)
    np.testing.assert_allclose(sample_coverage(x), cov / r_median(cov), rtol=1e-13)


# ---------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("kwargs, match", [
    ({"norm_type": "min"}, "normType"),
    ({"norm_type": "Poisson"}, "normType"),
    ({"size_factor": "sum"}, "sizeFactor"),
    ({"qu": 1.5}, "between 0 and 1"),
    ({"chr": ["1"] * 5}, "one chromosome name per region"),
    ({"chr": ["1"] * 199 + [None]}, "missing"),
    ({"ploidy": [2, 2, 2]}, "one ploidy"),
    ({"ploidy": [2, 2, 1.5, 2]}, "whole numbers"),
    ({"ploidy": [2, 2, -1, 2]}, "whole numbers"),
    ({"ploidy": [1, 1, 0, 1]}, "ploidy 2 or more"),
    ({"ploidy": [3, 3, 1, 1]}, "ploidy 2"),
])
def test_bad_parameters(kwargs, match):
    with pytest.raises(InputError, match=match):
        normalize_chromosomes(_counts(m=200, n=4), **kwargs)


def test_bad_counts():
    x = _counts(m=200, n=4).astype(np.float64)
    bad = x.copy()
    bad[5, 1] = np.nan
    with pytest.raises(InputError, match="NAs in readcount matrix"):
        normalize_chromosomes(bad)
    bad[5, 1] = np.inf
    with pytest.raises(InputError, match="Infinite"):
        normalize_chromosomes(bad)
    bad = x.copy()
    bad[:, 2] = 0
    with pytest.raises(InputError, match=r"Zero columns in readcount matrix.*\[3\]"):
        normalize_chromosomes(bad)
    with pytest.raises(InputError, match="non-numeric"):
        normalize_chromosomes(np.array([["a", "b"], ["c", "d"]]))
    with pytest.raises(InputError, match="two-dimensional"):
        normalize_chromosomes(np.ones(5))


def test_zero_size_factor():
    x = _counts(m=200, n=4).astype(np.float64)
    chrom = np.repeat(["1", "2"], 100)
    x[100:, 3] = 0.0  # sample 4 has no reads on chromosome 2: its mean there is 0
    with pytest.raises(InputError, match=r"Some normalization factors are zero!.*\[4\].*chromosome 2"):
        normalize_chromosomes(x, chrom, norm_type="mean")


def test_sample_coverage_errors():
    sym = np.arange(-50.0, 51.0)  # mean between the 5% and 95% quantiles is exactly 0
    x = np.column_stack([sym, sym, sym, sym + 100.0])
    with pytest.raises(InputError, match="Median of the coverages is zero!"):
        sample_coverage(x)
    x = _counts(m=200, n=4).astype(np.float64)
    x[:, 1] = 7.0  # constant: nothing strictly between its quantiles
    with pytest.raises(InputError, match=r"sample\(s\) \[2\] is undefined"):
        sample_coverage(x)


# -------------------------------------------------------------------- chromosome rows, silent rows
def _rows_by_factorizing(names):
    """chromosome_rows's answer from first principles: each name's rows, in order of first appearance."""
    names = [str(v) for v in names]
    order = list(dict.fromkeys(names))
    return [(c, np.flatnonzero(np.array(names) == c)) for c in order]


@pytest.mark.parametrize("kind", ["object", "unicode", "series", "arrow", "category", "list"])
@pytest.mark.parametrize("layout", ["grouped", "interleaved", "one"])
def test_chromosome_rows_every_input_kind(kind, layout):
    from gcnmops.normalization.checks import chromosome_rows

    names = {"grouped": ["chr1"] * 5 + ["chr2"] * 3 + ["chrX"] * 4,
             "interleaved": ["chr1"] * 3 + ["chr2"] * 2 + ["chr1"] * 2 + ["chr3"],
             "one": ["chr7"] * 6}[layout]
    values = {"object": lambda: np.array(names, dtype=object), "unicode": lambda: np.array(names),
              "series": lambda: pd.Series(names, dtype=object),
              "arrow": lambda: pd.Series(names, dtype="string[pyarrow]"),
              "category": lambda: pd.Series(names, dtype="category"), "list": lambda: list(names)}[kind]()
    got = chromosome_rows(values, len(names))
    want = _rows_by_factorizing(names)
    assert [c for c, _ in got] == [c for c, _ in want]
    for (_, rows), (_, expected) in zip(got, want):
        assert np.array_equal(np.arange(len(names))[rows], expected)
        if np.all(np.diff(expected) == 1):
            assert isinstance(rows, slice)  # a contiguous chromosome is a slice (normalized in place)


@pytest.mark.parametrize("missing", [None, np.nan, pd.NA])
def test_chromosome_rows_missing_name_is_an_error(missing):
    from gcnmops.normalization.checks import chromosome_rows

    with pytest.raises(InputError, match="region 3 is missing"):
        chromosome_rows(np.array(["chr1", "chr1", missing, "chr2"], dtype=object), 4)


def test_silent_rows_over_bands_equal_a_plain_loop(monkeypatch):
    from gcnmops.normalization import kernels

    rng = np.random.default_rng(5)
    Y = np.asfortranarray(rng.choice([0.0, 0.4, 1.0, 3.0], p=[0.6, 0.2, 0.1, 0.1], size=(100_000, 4)))
    for r0, r1 in [(0, 100_000), (1_234, 70_001), (99_999, 100_000)]:
        silent, nonzero = kernels.silent_rows(Y, r0, r1)
        block = Y[r0:r1]
        assert np.array_equal(silent, (block < kernels.SILENT_BELOW).all(axis=1))
        assert nonzero == bool((block != 0).any())
    zeros = np.zeros((50_000, 3), order="F")
    silent, nonzero = kernels.silent_rows(zeros, 10, 50_000)
    assert silent.all() and not nonzero
