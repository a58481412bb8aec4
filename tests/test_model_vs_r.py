"""The CPU model (model/cpu.py, the EM of model/em.py) against an R implementation of the per-region EM, bit for bit.

The R reference (tests/rcnmops.py, ``ref_em_all``) is written from the spec's words (part 1, section 2) in the
operation order of model/em.py (cn.mops runs the EM in compiled code; its order is the one the golden cases fix): R's
median, mean, sum, lgamma, exp and log, plain double sums in class and sample order. It checks that what R computes
for the steps (initial scale, initial weights, log-gamma, glibc's exp and log, INI's mean) is what our compiled EM
computes, on generated regions: normalized (fractional) counts, raw counts with per-sample coverages (norm=2),
regions whose median is 0, the minReadCount short-cut, other classes, priors and cycle counts. Skipped cleanly
without R or rpy2.
"""
from __future__ import annotations

import numpy as np
import pytest
from rcnmops import r_reference
from rdiff import assert_same_bits, from_r, to_r

from gcnmops.model.cpu import fit_cpu
from gcnmops.model.spec import ModelSpec

pytestmark = pytest.mark.r


DEFAULT_I = (0.025, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)


@pytest.fixture(scope="module")
def R():
    return r_reference()


def _regions(rng, m: int, N: int, fractional: bool) -> np.ndarray:
    lam = 10.0 ** rng.uniform(0, 3, (m, 1))
    x = rng.poisson(lam * rng.choice([0.0, 0.5, 1.0, 1.0, 1.0, 1.5, 2.0], (m, N))).astype(float)
    x[: m // 10, : N // 2 + 1] = 0.0  # median 0 with reads elsewhere: the mean fall-back
    x[m // 10: m // 8] = np.minimum(x[m // 10: m // 8], 4.0)  # the minReadCount short-cut
    if fractional:
        x = x * rng.uniform(0.7, 1.4, N)
    return np.ascontiguousarray(x)


CASES = [  # (N, classes, priorImpact, cyc, minReadCount, fractional counts, coverages)
    (30, DEFAULT_I, 1.0, 20, 5.0, True, False),
    (22, DEFAULT_I, 5.0, 20, 5.0, True, False),
    (15, (0.025, 0.5, 1.0, 1.5, 2.0), 10.0, 50, 5.0, False, True),
    (7, (0.025, 0.5, 1.0, 1.5, 2.0, 3.0, 4.5), 2.5, 12, 0.0, True, True),  # 7 classes: R's sum() matters
    (41, DEFAULT_I, 1.0, 20, 5.0, False, True),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_em_matches_r_reference(R, case) -> None:
    N, folds, prior, cyc, mrc, fractional, with_cov = CASES[case]
    rng = np.random.default_rng(8000 + case)
    x = _regions(rng, 120, N, fractional)
    cov = rng.uniform(0.6, 1.5, N) if with_cov else np.ones(N)
    classes = [f"CN{k}" for k in range(len(folds))]
    idx2 = int(np.argmin(np.abs(np.asarray(folds) - 1.0)))
    spec = ModelSpec.build(folds, classes, classes[idx2], prior, cyc, mrc)
    ours = fit_cpu(x, cov, spec)
    res = R["ref_em_all"](R["matrix"](to_r(R, x.ravel(order="F")), x.shape[0]), to_r(R, cov), to_r(R, folds),
                          idx2 + 1, prior, cyc, mrc)
    m, n = x.shape[0], len(folds)
    theirs = {k: from_r(res.rx2(k)).reshape(shape, order="F")
              for k, shape in (("lambda", (m, n)), ("alpha", (m, n)), ("sini", (m, N)), ("cn", (m, N)), ("ini", (m,)))}
    assert_same_bits(ours.lam.ravel(), theirs["lambda"].ravel(), "lambda (params L)")
    assert_same_bits(ours.alpha.ravel(), theirs["alpha"].ravel(), "alpha (params A)")
    assert_same_bits(ours.sini.ravel(), theirs["sini"].ravel(), "sINI (localAssessments)")
    assert_same_bits(ours.ini, theirs["ini"], "INI (iniCall)")
    assert np.array_equal(ours.cn + 1, theirs["cn"]), "expected classes"
