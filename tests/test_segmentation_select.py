"""The sampled selection (segmentation/host.py: ``kth_pair_sampled``, ``quantile7_sampled``) against sort-based
order statistics, on inputs chosen to break it: ties, all values equal, sorted and reverse-sorted values, mostly
zeros, lengths around SAMPLED_SELECT_MIN, ranks 0, 1, n - 2, n - 1, and samples so unlucky that the bracket misses
the wanted rank (the plain-selection fallback). Three ways: the host's njit ``kth_pair`` / ``quantile7_select``;
``kth_pair_sampled`` in a CUDA kernel (numba's simulator, in the session's child: cudasim.py); and the device
prepare kernel (segmentation/gpu.py ``device_prepare``, eps = the 0.75 quantile of |diff|) against the host's
``prepare_vectors`` and a sort-based quantile.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import cudasim
from gcnmops.exact.rstats import quantile7_low_index, quantile7_sorted
from gcnmops.segmentation import host
from gcnmops.segmentation.host import SAMPLED_SELECT_MIN, SELECT_SAMPLE, kth_pair, quantile7_select

LENGTHS = (SAMPLED_SELECT_MIN - 1, SAMPLED_SELECT_MIN, SAMPLED_SELECT_MIN + 1, 3 * SAMPLED_SELECT_MIN + 5)
PATTERNS = ("ties", "equal", "sorted", "reverse", "zeros", "unlucky_high", "unlucky_low")


def _sample_positions(n: int) -> np.ndarray:
    """Where ``kth_pair_sampled`` takes its regular sample of buf[0:n] (n >= SAMPLED_SELECT_MIN)."""
    step = n // SELECT_SAMPLE
    return np.arange(SELECT_SAMPLE) * step + step // 2


def _values(pattern: str, n: int, seed: int) -> np.ndarray:
    """n values >= 0 of one adversarial ``pattern``; whole numbers (and halves), so |diff| of their running sums
    is exact. unlucky_high / unlucky_low: the sampled positions hold the largest / smallest value, so the sample's
    bracket misses middle ranks and the selection must fall back to the plain one."""
    rng = np.random.default_rng(seed)
    if pattern == "ties":
        return rng.integers(0, 4, n).astype(float)
    if pattern == "equal":
        return np.full(n, 2.5)
    if pattern == "sorted":
        return np.sort(rng.integers(0, n // 3, n)).astype(float)
    if pattern == "reverse":
        return np.sort(rng.integers(0, n // 3, n))[::-1].astype(float)
    if pattern == "zeros":
        return np.where(rng.random(n) < 0.85, 0.0, rng.integers(1, 50, n).astype(float))
    v = rng.integers(1, 1000, n).astype(float)
    if n >= SAMPLED_SELECT_MIN:
        v[_sample_positions(n)] = 1e6 if pattern == "unlucky_high" else 0.0
    return v


def _cases():
    """(values, k) of every case: each pattern and length, ranks at both ends, the middle and the eps quantile."""
    out = []
    for i, (pattern, n) in enumerate((p, n) for p in PATTERNS for n in LENGTHS):
        v = _values(pattern, n, i)
        for k in sorted({0, 1, n // 2, quantile7_low_index(n, host.EPS_QUANTILE), n - 2, n - 1}):
            out.append((pattern, v, k))
    return out


def _sorted_pair(v: np.ndarray, k: int) -> tuple[float, float]:
    s = np.sort(v)
    return float(s[k]), float(s[k + 1]) if k + 1 < v.size else np.nan


def _same(a: float, b: float) -> bool:
    return a == b or (np.isnan(a) and np.isnan(b))


# ---------------------------------------------------------------------------------------------------------
# host
# ---------------------------------------------------------------------------------------------------------

def test_host_kth_pair_is_the_sorted_order_statistic():
    bad = []
    for pattern, v, k in _cases():
        got = kth_pair(v.copy(), v.size, k)
        exp = _sorted_pair(v, k)
        if not (_same(got[0], exp[0]) and _same(got[1], exp[1])):
            bad.append((pattern, v.size, k, got, exp))
    assert not bad, bad[:5]


@pytest.mark.parametrize("p", [0.0, 0.25, host.EPS_QUANTILE, 0.999, 1.0])
def test_host_quantile7_select_is_the_sorted_quantile(p):
    for pattern, v, _ in _cases()[::6]:  # one case per (pattern, length)
        got = quantile7_select(v.copy(), v.size, p)
        assert got == quantile7_sorted(np.sort(v), v.size, p), (pattern, v.size, p)


def test_the_unlucky_samples_take_the_fallback_and_the_others_the_sampled_path(monkeypatch):
    """Run as plain Python (register_jitable keeps the function), recording the length each ``pair_select`` call
    gets: the whole buf (fallback) for the unlucky patterns at a middle rank, a part of it otherwise (not
    "equal", whose middle part is the whole buf)."""
    calls = []

    def recording(buf, n, k):
        calls.append(n)
        return pair_select(buf, n, k)

    pair_select = host.pair_select
    monkeypatch.setattr(host, "pair_select", recording)
    n = 3 * SAMPLED_SELECT_MIN + 5
    for pattern in (p for p in PATTERNS if p != "equal"):
        v = _values(pattern, n, 7)
        k = n // 2
        calls.clear()
        got = host.kth_pair_sampled(v.copy(), n, k, np.empty(SELECT_SAMPLE))
        assert got == _sorted_pair(v, k), pattern
        fell_back = calls == [n]
        assert fell_back == pattern.startswith("unlucky"), (pattern, calls)


# ---------------------------------------------------------------------------------------------------------
# CUDA simulator: kth_pair_sampled in a kernel, and the device prepare kernel's eps
# ---------------------------------------------------------------------------------------------------------

def _prepare_matrix() -> tuple[np.ndarray, list[tuple[int, int]]]:
    """(x, blocks): 3 samples whose |diff| in each block is one adversarial pattern; blocks whose |diff| vectors
    are SAMPLED_SELECT_MIN - 1, SAMPLED_SELECT_MIN and 2 SAMPLED_SELECT_MIN + 3 long."""
    lens = (SAMPLED_SELECT_MIN, SAMPLED_SELECT_MIN + 1, 2 * SAMPLED_SELECT_MIN + 4)
    firsts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    blocks = [(int(f), int(f + m)) for f, m in zip(firsts, lens)]
    rng = np.random.default_rng(11)
    cols = []
    for j, pattern in enumerate(("ties", "unlucky_high", "unlucky_low")):
        parts = []
        for b, m in enumerate(lens):
            d = _values(pattern, m - 1, 100 + 10 * j + b)
            parts.append(np.concatenate([[float(rng.integers(-5, 5))], d * rng.choice([-1.0, 1.0], m - 1)]).cumsum())
        cols.append(np.concatenate(parts))
    return np.asfortranarray(np.array(cols).T), blocks


def _write_input(work) -> None:
    cases = _cases()
    vals = np.concatenate([v for _, v, _ in cases])
    offs = np.concatenate([[0], np.cumsum([v.size for _, v, _ in cases])])
    ks = np.array([k for _, _, k in cases], dtype=np.int64)
    x, blocks = _prepare_matrix()
    np.savez(work / "input.npz", vals=vals, offs=offs, ks=ks, x=x, blocks=np.array(blocks))


CHILD = r'''
    import json, sys
    import numpy as np
    from numba import cuda
    from gcnmops.segmentation import gpu, interface
    from gcnmops.segmentation.host import SELECT_SAMPLE, kth_pair_sampled

    folder = sys.argv[1]
    inp = np.load(f"{folder}/input.npz")
    vals, offs, ks = inp["vals"], inp["offs"], inp["ks"]

    @cuda.jit
    def select(vals, offs, ks, sample, out):
        c = cuda.grid(1)
        if c < ks.shape[0]:
            o = offs[c]
            n = offs[c + 1] - o
            a, b = kth_pair_sampled(vals[o:o + n], n, ks[c], sample[c * SELECT_SAMPLE:(c + 1) * SELECT_SAMPLE])
            out[2 * c] = a
            out[2 * c + 1] = b

    out = np.zeros(2 * ks.size)
    d_out = cuda.to_device(out)
    tpb = 32
    select[(ks.size + tpb - 1) // tpb, tpb](cuda.to_device(vals), cuda.to_device(offs), cuda.to_device(ks),
                                            cuda.device_array(ks.size * SELECT_SAMPLE), d_out)
    d_out.copy_to_host(out)

    x = inp["x"]
    blocks = [tuple(b) for b in inp["blocks"].tolist()]
    firsts = np.array([b[0] for b in blocks], dtype=np.int64)
    ends = np.array([b[1] for b in blocks], dtype=np.int64)
    prm = interface.resolve_params(0.05, None, 3, None, 20, 40, 50)
    dev, _ = gpu.device_prepare(x.copy(order="F"), x, firsts, ends, prm)
    ref = gpu.prepare_vectors(x, firsts, ends, prm)
    same = {f: bool(np.array_equal(getattr(dev, f), getattr(ref, f))) for f in ref._fields}
    np.save(f"{folder}/pairs.npy", out)
    np.save(f"{folder}/eps.npy", dev.vec_eps)
    json.dump({"device_equals_host": same}, open(f"{folder}/result.json", "w"))
'''
SCENARIO = cudasim.register(__name__, CHILD, prepare=_write_input)


@pytest.fixture(scope="module")
def sim_folder(cuda_simulator):
    return cuda_simulator.wait(SCENARIO)


def test_sim_kernel_kth_pair_sampled_is_the_sorted_order_statistic(sim_folder):
    got = np.load(sim_folder / "pairs.npy").reshape(-1, 2)
    cases = _cases()
    assert got.shape[0] == len(cases)
    bad = [(pattern, v.size, k, tuple(g), _sorted_pair(v, k)) for (pattern, v, k), g in zip(cases, got)
           if not all(_same(a, b) for a, b in zip(g, _sorted_pair(v, k)))]
    assert not bad, bad[:5]


def test_sim_device_prepare_eps_is_the_sorted_quantile_and_the_hosts(sim_folder):
    same = json.loads((sim_folder / "result.json").read_text())["device_equals_host"]
    assert all(same.values()), same
    eps = np.load(sim_folder / "eps.npy")
    x, blocks = _prepare_matrix()
    exp = []
    for s in range(x.shape[1]):  # vector v = sample * nblocks + block
        for f, e in blocks:
            d = np.sort(np.abs(np.diff(x[f:e, s])))
            exp.append(quantile7_sorted(d, d.size, host.EPS_QUANTILE))
    assert np.array_equal(eps, np.array(exp)), (eps, exp)
