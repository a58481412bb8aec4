"""The per-region EM: behaviours of the spec; em.fit_region (the GPU kernel's streaming EM, plain Python and
compiled; with the posteriors stored between its two passes and recomputed) against the CPU driver
(em.fit_lanes) and cn.mops's golden outputs, bit for bit."""
from __future__ import annotations

import numba
import numpy as np
import pytest

from gcnmops.model.cpu import fit_cpu
from gcnmops.exact.libm import TABLES
from gcnmops.model.em import fit_region
from gcnmops.model.spec import ModelOutput, ModelSpec
from gcnmops.params import DEFAULT_CLASSES, DEFAULT_FOLDS

SPEC = ModelSpec.build(DEFAULT_FOLDS, DEFAULT_CLASSES, "CN2", 1.0, 20, 5.0)


def _scratch(n: int, n_samples: int, store: bool) -> list:
    """fit_region's scratch: work, norm, terms (N each), pst (n x N when ``store``, else empty: recompute),
    alpha, lam, log_lam, acc (n each), p (n, 1)."""
    return ([np.empty(max(n, n_samples)) for _ in range(3)] + [np.empty(n * n_samples if store else 0)]
            + [np.empty(n) for _ in range(4)] + [np.empty((n, 1))])


def python_fit(x: np.ndarray, cov: np.ndarray, spec: ModelSpec, keep_post: bool, store: bool = True) -> ModelOutput:
    """The same em.py source run as plain Python, region by region (em.fit_region, what the GPU kernel runs)."""
    m, n_samples = x.shape
    n = spec.folds.size
    out = ModelOutput.allocate(m, n, n_samples, keep_post)
    scratch = _scratch(n, n_samples, store)
    for r in range(m):
        post = out.post[r] if keep_post else np.empty((1, 1))
        out.ini[r] = fit_region(x[r], cov, spec.folds, spec.log2_folds, spec.alpha_init,
                                spec.alpha_prior, spec.prior_sum, spec.cyc, spec.min_read_count, spec.main_idx,
                                keep_post, *scratch, out.lam[r], out.alpha[r], out.sini[r], out.cn[r], post,
                                TABLES)
    return out


@numba.njit
def _fit_regions(x, cov, folds, l2, ai, ap, ps, cyc, mrc, mi, keep, store, lam, alpha, sini, cn, ini, post, tables):
    m, N = x.shape
    n = folds.size
    w, s, terms, pst = np.empty(N), np.empty(N), np.empty(N), np.empty(n * N if store else 0)
    a, lm, ll, acc, p = np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty((n, 1))
    for r in range(m):
        ini[r] = fit_region(x[r], cov, folds, l2, ai, ap, ps, cyc, mrc, mi, keep, w, s, terms, pst, a, lm, ll, acc,
                            p, lam[r], alpha[r], sini[r], cn[r], post[r] if keep else post[0], tables)


def fit_streaming(x: np.ndarray, cov: np.ndarray, spec: ModelSpec, keep_post: bool, store: bool = True
                  ) -> ModelOutput:
    """em.fit_region (the GPU kernel's streaming EM) region by region, compiled by numba for the CPU;
    ``store``: the posteriors kept between the two passes of a cycle (else recomputed)."""
    m, n_samples = x.shape
    out = ModelOutput.allocate(m, spec.folds.size, n_samples, keep_post)
    post = out.post if keep_post else np.empty((1, 1, 1), order="F")
    _fit_regions(x, np.ascontiguousarray(cov, dtype=np.float64), spec.folds, spec.log2_folds, spec.alpha_init,
                 spec.alpha_prior, spec.prior_sum, spec.cyc, spec.min_read_count, spec.main_idx, keep_post, store,
                 out.lam, out.alpha, out.sini, out.cn, out.ini, post, TABLES)
    return out


def assert_bit_identical(got: ModelOutput, ref: ModelOutput, keep_post: bool, what: str = "") -> None:
    """Every output equal bit for bit (NaN where NaN)."""
    for name in ("lam", "alpha", "sini", "cn", "ini") + (("post",) if keep_post else ()):
        a, b = getattr(got, name), getattr(ref, name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_array_equal(a, b, err_msg=f"{what} {name}")


def poisson_matrix(m: int, n: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mu = rng.gamma(4.0, 20.0, size=m)[:, None] * rng.choice([0.5, 1.0, 1.5], p=[.1, .8, .1], size=(m, n))
    x = rng.poisson(mu).astype(np.float64)
    x[:5] = rng.integers(0, 6, size=(5, n))  # short-cut rows
    x[5] = 0.0
    x[5, 0] = 7.0  # median 0 -> mean fallback
    return np.asfortranarray(x)


@pytest.mark.parametrize("keep_post,store", [(False, True), (True, False)])
def test_numba_driver_equals_plain_python(keep_post: bool, store: bool) -> None:
    x = poisson_matrix(60, 7)
    cov = np.linspace(0.8, 1.2, 7)
    cov[3] = 1.0  # one sample takes fit_region's cov == 1 short-cut (log lambda), the others do not
    a = fit_cpu(x, cov, SPEC, keep_post=keep_post)
    assert_bit_identical(python_fit(x, cov, SPEC, keep_post, store), a, keep_post, "plain Python")


#: class vectors (fold changes; the main class is the one of fold 1): 3 to 9 classes, I = 0.025 .. 8; one with two
#: classes of the same fold (exact ties of their posteriors: the label is the first)
FOLD_SETS = {
    "default9": DEFAULT_FOLDS,
    "three": (0.025, 1.0, 2.0),
    "wide5": (0.025, 0.5, 1.0, 3.0, 8.0),
    "to8_9": (0.025, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0),
    "tied4": (0.5, 1.0, 2.0, 2.0),
}


def _spec(folds, cyc: int, min_read_count: float = 5.0) -> ModelSpec:
    names = [f"CN{i}" for i in range(len(folds))]
    return ModelSpec.build(folds, names, names[list(folds).index(1.0)], 1.0, cyc, min_read_count)


def random_cohort(m: int, N: int, seed: int) -> np.ndarray:
    """m regions of N samples: Poisson counts around region levels from ~1 to ~1e9 (the largest give exponents
    below em.EXP_CUTOFF: floored likelihoods, ties at 1e-100), losses and gains, regions under minReadCount,
    all-zero regions, median-zero regions, single outliers (every class floored for that sample) and
    normalized (non-integer) counts."""
    rng = np.random.default_rng(seed)
    level = 10.0 ** rng.uniform(0, 9, m)
    fold = rng.choice([0.0, 0.5, 1, 1, 1, 1, 1, 1.5, 2, 4], size=(m, N))
    x = rng.poisson(np.minimum(level[:, None] * fold, 1e12)).astype(np.float64)
    j = rng.permutation(m)
    q = max(1, m // 12)
    x[j[:q]] = rng.integers(0, 6, size=(q, N))                     # minReadCount short-cut
    x[j[q]] = 0.0
    x[j[q + 1:2 * q], : max(1, N // 2 + 1)] = 0.0                   # median zero: the mean fallback
    out = j[2 * q:3 * q]
    x[out, rng.integers(0, N, q)] = rng.choice([1e6, 1e8, 3e9], q)  # one sample far above its region
    norm = j[3 * q:4 * q]
    x[norm] *= rng.uniform(0.8, 1.25, (q, N))                        # normalized counts
    if N > 1:
        x[j[4 * q], 1:] = x[j[4 * q], 0]                             # all samples equal
    return np.asfortranarray(x)


def coverages(kind: str, N: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    if kind == "ones":
        return np.ones(N)
    cov = rng.uniform(0.4, 2.5, N)
    if kind == "mixed":  # some samples exactly 1: fit_region's log-lambda short-cut for those only
        cov[rng.random(N) < 0.5] = 1.0
    return cov


STREAMING_CASES = [
    # (N, fold set, coverage kind, cyc, keep_post)
    (2, "default9", "ones", 20, False),
    (2, "three", "mixed", 1, True),
    (3, "wide5", "random", 20, True),
    (3, "tied4", "ones", 2, True),
    (15, "default9", "mixed", 20, True),
    (15, "to8_9", "random", 25, False),
    (15, "three", "ones", 1, False),
    (40, "tied4", "random", 20, True),
    (40, "default9", "ones", 21, False),
    (130, "wide5", "mixed", 20, True),
    (130, "default9", "random", 3, False),
]


@pytest.mark.parametrize("N,folds,cov_kind,cyc,keep_post", STREAMING_CASES)
def test_streaming_fit_region_equals_cpu_lanes_bit_for_bit(N, folds, cov_kind, cyc, keep_post) -> None:
    """em.fit_region (the GPU kernel's EM: samples streamed, no posterior matrix) against the CPU driver
    (em.fit_lanes, cn.mops's order, bit-identical to cn.mops): every output equal bit for bit."""
    seed = 1000 * N + cyc
    spec = _spec(FOLD_SETS[folds], cyc)
    x = random_cohort(90, N, seed)
    cov = coverages(cov_kind, N, seed)
    ref = fit_cpu(x, cov, spec, keep_post=keep_post)
    for store in (True, False):
        got = fit_streaming(x, cov, spec, keep_post, store)
        assert_bit_identical(got, ref, keep_post, f"N={N} {folds} {cov_kind} cyc={cyc} store={store}")
    # the cohort reaches the special paths it is meant to
    modelled = ref.lam[:, 0] > 0
    assert 0 < modelled.sum() < x.shape[0]
    if keep_post:
        floored_everywhere = (ref.post[modelled] == ref.post[modelled].max(axis=1, keepdims=True)).all(axis=1)
        assert floored_everywhere.any(), "no sample with every class at the likelihood floor"


@pytest.mark.parametrize("case", ["xranges_norm0_posterior", "synth3chr_norm2_median", "exome_default"])
def test_streaming_fit_region_equals_golden_cn_mops(case: str) -> None:
    """em.fit_region (the GPU kernel's EM) on golden cases' model inputs: cn.mops's outputs bit for bit (with
    posteriors; with the coverages of norm=2)."""
    from test_model_gpu import PAIRS, load_case

    x, cov, spec, keep_post, golden, rp = load_case(case)
    for store in (True, False):
        got = fit_streaming(x, cov, spec, keep_post, store)
        for f, g in PAIRS + ((("post", "posteriorProbs"),) if keep_post else ()):
            np.testing.assert_array_equal(getattr(got, f), golden[g], err_msg=f"{f} vs golden {g} (store={store})")
        np.testing.assert_array_equal(np.asarray(rp["classes"], dtype=object)[got.cn], golden["integerCopyNumber"])


def test_short_cut_gives_the_prior_answer() -> None:
    x = np.asfortranarray(np.full((3, 4), 5.0))  # every count <= minReadCount = 5
    out = fit_cpu(x, np.ones(4), SPEC, keep_post=True)
    assert (out.lam == 0).all()
    assert (out.alpha[:, SPEC.main_idx] == 1).all() and out.alpha.sum() == 3
    assert (out.cn == SPEC.main_idx).all() and (out.sini == 0).all() and (out.ini == 0).all()
    assert (out.post[:, SPEC.main_idx, :] == 1).all()


def test_deletion_and_duplication_are_labelled() -> None:
    rng = np.random.default_rng(0)
    x = rng.poisson(100.0, size=(1, 12)).astype(np.float64)
    x[0, 0] = 0.0  # homozygous deletion
    x[0, 1] = 52.0  # one copy
    x[0, 2] = 205.0  # four copies
    out = fit_cpu(np.asfortranarray(x), np.ones(12), SPEC)
    labels = np.asarray(DEFAULT_CLASSES)[out.cn[0]]
    assert list(labels[:3]) == ["CN0", "CN1", "CN4"]
    assert (labels[3:] == "CN2").all()
    assert out.sini[0, 0] < -4 and out.sini[0, 2] > 0.9 and out.ini[0] > 0


def test_posteriors_are_distributions() -> None:
    out = fit_cpu(poisson_matrix(40, 6), np.ones(6), SPEC, keep_post=True)
    np.testing.assert_allclose(out.post.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(out.alpha.sum(axis=1), 1.0, rtol=1e-12)
