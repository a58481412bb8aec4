"""GPU backend on a real CUDA GPU (`pytest -m gpu`): every golden case's model through fit_gpu.

Compared with the CPU backend (labels identical, floats within 1e-12 relative) and with cn.mops's golden
outputs, plus a run forced into many chunks against a one-chunk run, several devices and run_many.
Set GCNMOPS_GPU_REPORT=path to write the measured differences as JSON.
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from gcnmops.model.cpu import fit_cpu
from gcnmops.model.spec import ModelSpec

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[1]
GOLDEN = Path(os.environ.get("GCNMOPS_GOLDEN_DIR", REPO.parent / "shared" / "golden"))
#: golden cases whose model is cn.mops's EM (referencecn.mops/singlecn.mops estimate lambda otherwise)
CASES = ["xranges_default", "xranges_norm0_posterior", "xranges_params", "xranges_5classes", "exome_default",
         "exome_exomecn", "synth3chr_default", "synth3chr_norm2_median", "haplo_xranges"]
REPORT: dict = {}


def _gpu():
    from gcnmops.cuda.probe import gpu_available

    if not gpu_available():
        pytest.skip("no usable CUDA GPU")
    from gcnmops.model.gpu import fit_gpu

    return fit_gpu


def load_case(name: str):
    folder = GOLDEN / name
    if not (folder / "manifest.json").exists():
        pytest.skip(f"golden case {name} not found under {GOLDEN}")
    man = json.loads((folder / "manifest.json").read_text())

    def arr(key):
        meta = man["arrays"][key]
        if meta["dtype"] == "str":
            import csv

            with gzip.open(folder / meta["file"], "rt") as fh:
                rows = list(csv.reader(fh, delimiter="\t"))
            return np.array(rows, dtype=object).reshape(meta["shape"], order="C") if rows else None
        dt = {"float64": "<f8", "int32": "<i4"}[meta["dtype"]]
        return np.frombuffer(gzip.open(folder / meta["file"]).read(), dtype=dt).reshape(meta["shape"], order="F")

    rp = man["result_params"]
    params = man.get("params") or {}
    if not isinstance(params, dict):
        params = {}
    norm = params.get("norm", 1)
    if norm == 2:
        x, cov = arr("input_counts"), arr("params_cov")
    else:
        x, cov = arr("normalizedData"), np.ones(len(man["sampleNames"]))
    spec = ModelSpec.build(rp["folds"], rp["classes"], rp["mainClass"], rp["priorImpact"], rp["cyc"],
                           rp["minReadCount"])
    keep_post = "posteriorProbs" in man["arrays"]
    golden = {k: arr(k) for k in ("params_L", "params_A", "localAssessments", "iniCall", "integerCopyNumber")}
    if keep_post:
        golden["posteriorProbs"] = arr("posteriorProbs")
    return np.asfortranarray(x, dtype=np.float64), np.asarray(cov, dtype=np.float64), spec, keep_post, golden, rp


def fit_streaming_cpu(x: np.ndarray, cov: np.ndarray, spec: ModelSpec, keep_post: bool):
    """What the GPU kernel computes, on the CPU: em.fit_region in its streaming order (exact_order=False),
    compiled by numba, with glibc's exp and log (exact/libm.py) — the same source and the same roundings."""
    import numba

    from gcnmops.exact.libm import TABLES
    from gcnmops.model.em import fit_region
    from gcnmops.model.spec import ModelOutput

    @numba.njit
    def run(x, cov, folds, l2, ai, ap, ps, cyc, mrc, mi, keep, lam, alpha, sini, cn, ini, post, tables):
        m, N = x.shape
        n = folds.size
        work, a, lm, ll, acc, p = np.empty(N), np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty((n, 1))
        for r in range(m):
            ini[r] = fit_region(x[r], cov, folds, l2, ai, ap, ps, cyc, mrc, mi, keep, False, work, a, lm, ll, acc,
                                p, lam[r], alpha[r], sini[r], cn[r], post[r] if keep else post[0], tables)

    m, N = x.shape
    out = ModelOutput.allocate(m, spec.folds.size, N, keep_post)
    post = out.post if keep_post else np.empty((1, 1, 1), order="F")
    run(x, np.ascontiguousarray(cov, dtype=np.float64), spec.folds, spec.log2_folds, spec.alpha_init,
        spec.alpha_prior, spec.prior_sum, spec.cyc, spec.min_read_count, spec.main_idx, keep_post, out.lam,
        out.alpha, out.sini, out.cn, out.ini, post, TABLES)
    return out


def _rel(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    den = np.maximum(np.abs(b), 1e-300)
    return float(np.max(np.abs(a - b) / den)) if a.size else 0.0


PAIRS = (("lam", "params_L"), ("alpha", "params_A"), ("sini", "localAssessments"), ("ini", "iniCall"))


@pytest.mark.parametrize("case", CASES)
def test_golden_case_gpu_equals_cpu_and_golden(case):
    fit_gpu = _gpu()
    x, cov, spec, keep_post, golden, rp = load_case(case)
    cpu = fit_cpu(x, cov, spec, keep_post=keep_post)
    gpu = fit_gpu(x, cov, spec, keep_post=keep_post)
    rec = REPORT.setdefault(case, {})
    # GPU vs the same streaming order on the CPU: bit for bit (glibc's exp and log on both, no contraction)
    stream = fit_streaming_cpu(x, cov, spec, keep_post)
    fields = ["lam", "alpha", "sini", "cn", "ini"] + (["post"] if keep_post else [])
    rec["values_differing_from_streaming_cpu"] = {f: int(np.sum(getattr(gpu, f) != getattr(stream, f)))
                                                  for f in fields}
    for f in fields:
        np.testing.assert_array_equal(getattr(gpu, f), getattr(stream, f), err_msg=f"{f} vs streaming CPU")
    # GPU vs CPU: identical labels, floats within 1e-12 relative
    np.testing.assert_array_equal(gpu.cn, cpu.cn)
    rec["labels_equal_cpu"] = True
    fields = [p[0] for p in PAIRS] + (["post"] if keep_post else [])
    for f in fields:
        # 1e-12 relative; values that cancel to ~0 (sINI near 0, alpha underflowing) are held to 1e-12 of
        # the array's largest magnitude instead
        a, b = getattr(gpu, f), getattr(cpu, f)
        rec[f"max_rel_vs_cpu_{f}"] = _rel(a, b)
        rec[f"max_abs_over_scale_vs_cpu_{f}"] = float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.max(np.abs(b)), err_msg=f)
    # GPU vs golden cn.mops
    labels = np.asarray(rp["classes"], dtype=object)[gpu.cn]
    assert np.array_equal(labels, golden["integerCopyNumber"]), "integerCopyNumber differs from cn.mops"
    for f, g in PAIRS:
        rec[f"max_rel_vs_golden_{g}"] = _rel(getattr(gpu, f), golden[g])
        np.testing.assert_allclose(getattr(gpu, f), golden[g], rtol=1e-8, atol=1e-12, err_msg=g)
    if keep_post:
        rec["max_rel_vs_golden_posteriorProbs"] = _rel(gpu.post, golden["posteriorProbs"])
        np.testing.assert_allclose(gpu.post, golden["posteriorProbs"], rtol=1e-8, atol=1e-12)


def test_many_chunks_equal_one_chunk():
    fit_gpu = _gpu()
    from gcnmops.model.gpu import KernelConfig

    x, cov, spec, _, _, _ = load_case("xranges_default")
    one_stats, many_stats = {}, {}
    one = fit_gpu(x, cov, spec, keep_post=True, stats=one_stats)
    many = fit_gpu(x, cov, spec, keep_post=True, chunk_rows=97, stats=many_stats)
    assert one_stats["n_chunks"] == 1 and many_stats["n_chunks"] == -(-x.shape[0] // 97)
    for f in ("lam", "alpha", "sini", "cn", "ini", "post"):
        np.testing.assert_array_equal(getattr(many, f), getattr(one, f), err_msg=f)
    # the other kernel variants and the global-memory work buffer give the same numbers (a different
    # register allocation may contract other multiply-adds into FMAs: last-bit differences)
    for cfg in (KernelConfig(variant="rolled"), KernelConfig(work="global"), KernelConfig(threads_per_block=64),
                KernelConfig(max_registers=None)):
        alt = fit_gpu(x, cov, spec, keep_post=True, chunk_rows=1000, config=cfg)
        np.testing.assert_array_equal(alt.cn, one.cn)
        for f in ("lam", "alpha", "sini", "ini", "post"):
            b = getattr(one, f)
            np.testing.assert_allclose(getattr(alt, f), b, rtol=1e-12, atol=1e-12 * np.max(np.abs(b)), err_msg=f)
    # a user-supplied (pageable) result goes through the staging buffers
    from gcnmops.model.spec import ModelOutput

    out = ModelOutput.allocate(x.shape[0], spec.folds.size, x.shape[1], True)
    st = {}
    res = fit_gpu(x, cov, spec, keep_post=True, out=out, chunk_rows=1234, stats=st)
    assert res is out and st["direct"] is False
    for f in ("lam", "alpha", "sini", "cn", "ini", "post"):
        np.testing.assert_array_equal(getattr(out, f), getattr(one, f), err_msg=f)
    # a tiny device-memory cap forces many chunks by itself
    capped_stats = {}
    capped = fit_gpu(x, cov, spec, keep_post=True, max_device_memory=2 << 20, stats=capped_stats)
    assert capped_stats["n_chunks"] > 1
    np.testing.assert_array_equal(capped.sini, one.sini)


def test_device_resident_input():
    """fit_gpu of a cupy matrix (fit_gpu_device): fitted where it lies in several launches, the host copies and
    the device outputs equal, the numbers those of the host path (last bits may differ: the strided views
    compile their own kernel specialization)."""
    fit_gpu = _gpu()
    import cupy as cp

    from gcnmops.model.gpu import fit_gpu_device

    x, cov, spec, _, _, _ = load_case("xranges_default")
    ref = fit_gpu(x, cov, spec, keep_post=True)
    st = {}
    host, dev = fit_gpu_device(cp.asarray(x, order="F"), cov, spec, keep_post=True, chunk_rows=97, stats=st)
    assert st["resident"] and st["n_chunks"] == -(-x.shape[0] // 97)
    rec = REPORT.setdefault("device_resident", {})
    for f in ("lam", "alpha", "sini", "cn", "ini", "post"):
        np.testing.assert_array_equal(cp.asnumpy(getattr(dev, f)), getattr(host, f), err_msg=f)
        a, b = getattr(host, f), getattr(ref, f)
        rec[f"bit_equal_{f}"] = bool(np.array_equal(a, b))
        if f == "cn":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.max(np.abs(b)), err_msg=f)
    via_fit = fit_gpu(cp.asarray(x, order="F"), cov, spec)  # two launches (plan.launch_rows)
    np.testing.assert_array_equal(via_fit.cn, host.cn)
    np.testing.assert_allclose(via_fit.sini, host.sini, rtol=1e-12, atol=1e-12 * np.max(np.abs(host.sini)))


def test_all_devices_and_run_many():
    fit_gpu = _gpu()
    from gcnmops.model.gpu import run_many

    x, cov, spec, _, _, _ = load_case("xranges_default")
    ref = fit_gpu(x, cov, spec)
    st = {}
    multi = fit_gpu(x, cov, spec, devices="all", chunk_rows=500, stats=st)
    assert sum(len(c) for c in st["chunks"].values()) == st["n_chunks"]
    np.testing.assert_array_equal(multi.sini, ref.sini)
    np.testing.assert_array_equal(multi.cn, ref.cn)
    x2, cov2, spec2, kp2, _, _ = load_case("exome_default")
    outs = run_many([dict(x=x, cov=cov, spec=spec), (x2, cov2, spec2, kp2)], devices="all")
    np.testing.assert_array_equal(outs[0].sini, ref.sini)
    np.testing.assert_array_equal(outs[1].cn, fit_gpu(x2, cov2, spec2).cn)


def teardown_module(module):
    path = os.environ.get("GCNMOPS_GPU_REPORT")
    if path and REPORT:
        Path(path).write_text(json.dumps(REPORT, indent=1))
