"""The per-region EM: behaviours of the spec and agreement of the numba driver with plain Python."""
from __future__ import annotations

import numpy as np
import pytest

from gcnmops.model.cpu import fit_cpu
from gcnmops.exact.libm import TABLES
from gcnmops.model.em import fit_region
from gcnmops.model.spec import ModelOutput, ModelSpec
from gcnmops.params import DEFAULT_CLASSES, DEFAULT_FOLDS

SPEC = ModelSpec.build(DEFAULT_FOLDS, DEFAULT_CLASSES, "CN2", 1.0, 20, 5.0)


def python_fit(x: np.ndarray, cov: np.ndarray, spec: ModelSpec, keep_post: bool) -> ModelOutput:
    """The same em.py source run as plain Python, region by region."""
    m, n_samples = x.shape
    n = spec.folds.size
    out = ModelOutput.allocate(m, n, n_samples, keep_post)
    scratch = [np.empty(max(n, n_samples))] + [np.empty(n) for _ in range(4)] + [np.empty((n, n_samples))]
    for r in range(m):
        post = out.post[r] if keep_post else np.empty((1, 1))
        out.ini[r] = fit_region(x[r], cov, spec.folds, spec.log2_folds, spec.alpha_init,
                                spec.alpha_prior, spec.prior_sum, spec.cyc, spec.min_read_count, spec.main_idx,
                                keep_post, True, *scratch, out.lam[r], out.alpha[r], out.sini[r], out.cn[r], post,
                                TABLES)
    return out


def poisson_matrix(m: int, n: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mu = rng.gamma(4.0, 20.0, size=m)[:, None] * rng.choice([0.5, 1.0, 1.5], p=[.1, .8, .1], size=(m, n))
    x = rng.poisson(mu).astype(np.float64)
    x[:5] = rng.integers(0, 6, size=(5, n))  # short-cut rows
    x[5] = 0.0
    x[5, 0] = 7.0  # median 0 -> mean fallback
    return np.asfortranarray(x)


@pytest.mark.parametrize("keep_post", [False, True])
def test_numba_driver_equals_plain_python(keep_post: bool) -> None:
    x = poisson_matrix(60, 7)
    cov = np.linspace(0.8, 1.2, 7)
    a = fit_cpu(x, cov, SPEC, keep_post=keep_post)
    b = python_fit(x, cov, SPEC, keep_post)
    for name in ("lam", "alpha", "sini", "ini") + (("post",) if keep_post else ()):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=0, err_msg=name)
    assert (a.cn == b.cn).all()


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
