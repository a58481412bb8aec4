"""Helpers of the differential tests against R (tests/test_exact_vs_r.py, tests/test_normalization_vs_r.py): R
started once through rpy2 (skipped cleanly without it), vectors handed to R and back without rounding, many
vectors per R call, and random and adversarial test vectors."""
from __future__ import annotations

import numpy as np
import pytest


def r_or_skip():
    """rpy2's ``robjects.r`` of the embedded R; the test is skipped when R or rpy2 is missing."""
    from gcnmops.errors import InputError
    from gcnmops.io.rsession import r_session

    try:
        return r_session().ro.r
    except InputError as e:
        pytest.skip(str(e))


def to_r(R, x):
    """A numpy array as an R double vector (the same bits)."""
    from rpy2.robjects import FloatVector

    return FloatVector(np.asarray(x, dtype=np.float64).ravel())


def from_r(v) -> np.ndarray:
    """An R numeric vector as float64 (R's NA becomes a NaN)."""
    return np.array(v, dtype=np.float64)


def per_vector(R, fun: str, vectors, *args) -> np.ndarray:
    """R's ``fun(x, args[0][j], ...)`` (a scalar double) for every vector ``vectors[j]``, in one R call; ``args``:
    per-vector doubles."""
    lengths = np.array([len(v) for v in vectors], dtype=np.int64)
    flat = np.concatenate([np.asarray(v, dtype=np.float64) for v in vectors])
    call = R(f"""function(x, len, ...) {{
        g <- factor(rep.int(seq_along(len), len), levels = seq_along(len))
        unname(as.numeric(mapply({fun}, split(x, g), ..., SIMPLIFY = TRUE, USE.NAMES = FALSE)))
    }}""")
    from rpy2.robjects import IntVector

    return from_r(call(to_r(R, flat), IntVector(lengths.tolist()), *[to_r(R, a) for a in args]))


def same_bits(a, b) -> np.ndarray:
    """Elementwise: identical float64 bit patterns, or both NaN (R's NA is a NaN with a payload)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return (a.view(np.int64) == b.view(np.int64)) | (np.isnan(a) & np.isnan(b))


def assert_same_bits(ours, r, what: str, inputs=None) -> None:
    """ours and R's results bit-identical; the message counts the differences and shows the first."""
    ok = same_bits(ours, r)
    if not ok.all():
        j = int(np.argmin(ok))
        shown = "" if inputs is None else f" input {np.asarray(inputs[j])[:8]!r}..."
        raise AssertionError(f"{what}: {int((~ok).sum())} of {ok.size} differ from R; first #{j}: "
                             f"{float(np.ravel(ours)[j])!r} vs R {float(np.ravel(r)[j])!r}{shown}")


#: kinds of test vectors: magnitudes from 1e-290 to 1e290 ("wide" spans 1e-100..1e100 within one vector)
KINDS = ("uniform", "normal", "counts", "zeros", "ties", "near", "wide", "huge", "tiny")
#: kinds whose squared deviations stay inside double's range (var, sd, bw.nrd0)
SQUARE_SAFE = ("uniform", "normal", "counts", "zeros", "ties", "near", "wide")


def random_vector(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    """One test vector of length n: random (uniform, normal), read-count like with ties and zeros (counts, zeros,
    ties), nearly equal (near: 1 + a few ulps times scale), wide dynamic range, huge or tiny."""
    sign = rng.choice([-1.0, 1.0], n) if rng.random() < 0.3 else 1.0
    if kind == "uniform":
        return rng.uniform(0, 1, n) * 10.0 ** rng.uniform(-5, 8) * sign
    if kind == "normal":
        return rng.normal(rng.uniform(-100, 100), 10.0 ** rng.uniform(-3, 3), n)
    if kind == "counts":
        return rng.poisson(10.0 ** rng.uniform(-0.5, 3.5), n).astype(float) * rng.choice([1.0, rng.uniform(0.3, 3)])
    if kind == "zeros":
        x = np.zeros(n)
        k = int(rng.integers(0, max(1, n // 3) + 1))
        x[rng.choice(n, k, replace=False)] = rng.uniform(0, 50, k).round(int(rng.integers(0, 3)))
        return x
    if kind == "ties":
        return rng.choice(rng.uniform(0, 10, int(rng.integers(1, 4))), n) * 10.0 ** rng.uniform(-3, 3)
    if kind == "near":
        scale = 10.0 ** rng.uniform(-50, 50)
        return scale * (1.0 + rng.integers(-8, 9, n) * np.finfo(float).eps)
    if kind == "wide":
        return sign * 10.0 ** rng.uniform(-100, 100, n)
    if kind == "huge":
        return sign * 10.0 ** rng.uniform(280, 300, n)
    if kind == "tiny":
        return sign * 10.0 ** rng.uniform(-290, -280, n)
    raise ValueError(kind)


def random_vectors(rng: np.random.Generator, count: int, kinds=KINDS, min_len: int = 1) -> list[np.ndarray]:
    """``count`` vectors of the given kinds, lengths mostly 1..200 (odd and even), some up to 3000."""
    out = []
    for j in range(count):
        n = int(rng.integers(min_len, 10)) if j % 3 == 0 else int(rng.integers(min_len, 201))
        if j % 50 == 0:
            n = int(rng.integers(1000, 3001))
        out.append(random_vector(rng, kinds[j % len(kinds)], n))
    return out
