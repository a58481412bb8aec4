"""Our normalization against an R implementation of the same steps, bit for bit, on generated cohorts.

The R reference (tests/rcnmops.py, ``ref_normalize``, ``ref_coverage``) is written from the words of the spec (part
1, section 3: normalizeChromosomes, and the coverage of norm=2 in section 1) with R's own colMeans, median, quantile,
mean, var, density and colSums, as cn.mops calls them. Cohorts: new seeds and shapes, one to five chromosomes (also
not contiguous), silent rows, all-zero chromosomes, fractional counts, every normType x sizeFactor, random quantiles,
ploidy vectors. Skipped cleanly without R or rpy2.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from rcnmops import r_reference
from rdiff import assert_same_bits, from_r, to_r

from gcnmops.errors import InputError
from gcnmops.normalization.cpu import normalize_chromosomes, sample_coverage

pytestmark = pytest.mark.r


NORM_TYPES = ("mean", "median", "quant", "mode", "poisson")
SIZE_FACTORS = ("mean", "median", "quant", "mode")


@pytest.fixture(scope="module")
def R():
    return r_reference()


def _cohort(rng: np.random.Generator):
    """(counts (m, N), chromosome names (m,)): region and sample effects, zero and silent rows, sometimes an
    all-zero chromosome, fractional values or chromosomes that are not contiguous."""
    m, N = int(rng.integers(120, 1200)), int(rng.integers(2, 26))
    chrom = np.sort(rng.integers(0, int(rng.integers(1, 6)), m)).astype(str)
    if rng.random() < 0.2:
        rng.shuffle(chrom)
    lam = 10.0 ** rng.uniform(-0.3, 2.7) * rng.uniform(0.5, 1.5, N)
    X = rng.poisson(lam * rng.gamma(rng.uniform(2, 20), 1.0, (m, 1)) / 5.0, (m, N)).astype(float)
    X[rng.random(m) < rng.uniform(0, 0.15)] = 0.0
    silent = rng.random(m) < 0.05
    X[silent] = rng.choice([0.0, 0.5], (int(silent.sum()), N))
    if rng.random() < 0.15 and len(set(chrom)) > 1:
        X[chrom == chrom[0]] = 0.0
    if rng.random() < 0.15:
        X = X * rng.uniform(0.5, 2.0, N)
    return X, chrom


def _ploidy(rng, N: int) -> np.ndarray:
    if N < 4 or rng.random() < 0.6:
        return np.full(N, 2.0)
    p = rng.choice([0.0, 1.0, 2.0, 3.0, 4.0], N)
    p[0] = 2.0
    return p


def _ours(X, chrom, args):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return normalize_chromosomes(X, chrom, *args)
    except InputError:
        return None


def _theirs(R, X, chrom, args):
    from rpy2.rinterface_lib.embedded import RRuntimeError
    from rpy2.robjects import StrVector

    try:
        out = R["ref_normalize"](R["matrix"](to_r(R, X.ravel(order="F")), X.shape[0]), StrVector(chrom.tolist()),
                                 *args[:4], to_r(R, args[4]))
    except RRuntimeError:
        return None
    return from_r(out).reshape(X.shape, order="F")


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_normalize_chromosomes_matches_r_reference(R, seed) -> None:
    """Every normType x sizeFactor on fresh cohorts (seeds 1-5: 100 cohorts), bit for bit; errors where R errs."""
    rng = np.random.default_rng(7100 + seed)
    checked = 0
    for nt in NORM_TYPES:
        for sf in SIZE_FACTORS:
            X, chrom = _cohort(rng)
            args = (nt, sf, float(rng.uniform(0.05, 0.95)), float(rng.uniform(0.05, 0.95)), _ploidy(rng, X.shape[1]))
            ours, theirs = _ours(X, chrom, args), _theirs(R, X, chrom, args)
            what = f"{nt}/{sf} on {X.shape}, {len(set(chrom))} chromosome(s), ploidy {sorted(set(args[4]))}"
            assert (ours is None) == (theirs is None), what
            if ours is not None:
                assert_same_bits(ours.ravel(order="F"), theirs.ravel(order="F"), what)
                checked += 1
    assert checked >= 15


def test_poisson_default_matches_r_reference_on_larger_cohorts(R) -> None:
    """cn.mops's default (poisson, mean) on cohorts of several thousand regions and several chromosomes."""
    rng = np.random.default_rng(7200)
    for _ in range(4):
        m, N = int(rng.integers(3000, 8000)), int(rng.integers(8, 40))
        chrom = np.repeat(np.arange(5), m // 5 + 1)[:m].astype(str)
        X = rng.poisson(rng.uniform(20, 150) * rng.gamma(10, 0.1, (m, 1)) * rng.uniform(0.6, 1.4, N), (m, N))
        X = X.astype(float)
        args = ("poisson", "mean", 0.25, 0.75, np.full(N, 2.0))
        assert_same_bits(_ours(X, chrom, args).ravel(order="F"), _theirs(R, X, chrom, args).ravel(order="F"),
                         f"poisson/mean on {X.shape}")


def test_coverage_of_norm2_matches_r_reference(R) -> None:
    rng = np.random.default_rng(7300)
    for _ in range(40):
        X, _ = _cohort(rng)
        X[:, 0] += 1.0  # a sample's middle 90% is never empty
        X = X + (X.sum(axis=0) == 0)
        try:
            ours = sample_coverage(X)
        except InputError:
            continue
        theirs = from_r(R["ref_coverage"](R["matrix"](to_r(R, X.ravel(order="F")), X.shape[0])))
        assert_same_bits(ours, theirs, f"coverage of {X.shape}")
