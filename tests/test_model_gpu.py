"""GPU backend on a real CUDA GPU (`pytest -m gpu`): every golden case's model through fit_gpu.

Compared with the CPU backend and with cn.mops's golden outputs, bit for bit (the kernel's em.fit_region sums in
cn.mops's order, with glibc's exp and log and no FMA contraction), plus a run forced into many chunks, the other
kernel configurations, several devices and run_many against a one-chunk run. Set GCNMOPS_GPU_REPORT=path to write
the counts of differing values as JSON.
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


PAIRS = (("lam", "params_L"), ("alpha", "params_A"), ("sini", "localAssessments"), ("ini", "iniCall"))


def _differing(a, b) -> int:
    """How many values of ``a`` differ from ``b`` in some bit (NaN where NaN counts as equal)."""
    a, b = np.asarray(a), np.asarray(b)
    same = (a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind == "f" else a == b
    return int(np.sum(~same))


@pytest.mark.parametrize("case", CASES)
def test_golden_case_gpu_equals_cpu_and_golden(case):
    fit_gpu = _gpu()
    x, cov, spec, keep_post, golden, rp = load_case(case)
    cpu = fit_cpu(x, cov, spec, keep_post=keep_post)
    gpu = fit_gpu(x, cov, spec, keep_post=keep_post)
    rec = REPORT.setdefault(case, {})
    # GPU vs the CPU driver (em.fit_lanes): bit for bit
    fields = ["lam", "alpha", "sini", "cn", "ini"] + (["post"] if keep_post else [])
    rec["values_differing_from_cpu"] = {f: _differing(getattr(gpu, f), getattr(cpu, f)) for f in fields}
    for f in fields:
        np.testing.assert_array_equal(getattr(gpu, f), getattr(cpu, f), err_msg=f"{f} vs CPU")
    # GPU vs golden cn.mops: bit for bit (the CPU driver is, tests/test_golden.py)
    labels = np.asarray(rp["classes"], dtype=object)[gpu.cn]
    assert np.array_equal(labels, golden["integerCopyNumber"]), "integerCopyNumber differs from cn.mops"
    pairs = PAIRS + ((("post", "posteriorProbs"),) if keep_post else ())
    rec["values_differing_from_golden"] = {g: _differing(getattr(gpu, f), golden[g]) for f, g in pairs}
    for f, g in pairs:
        np.testing.assert_array_equal(getattr(gpu, f), golden[g], err_msg=f"{f} vs golden {g}")


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
    # the other kernel variants and the global-memory work buffers give the same numbers, bit for bit (no FMA
    # contraction in any of them)
    for cfg in (KernelConfig(variant="rolled"), KernelConfig(work="global"), KernelConfig(threads_per_block=64),
                KernelConfig(max_registers=None), KernelConfig(variant="rolled", work="global")):
        alt = fit_gpu(x, cov, spec, keep_post=True, chunk_rows=1000, config=cfg)
        for f in ("lam", "alpha", "sini", "cn", "ini", "post"):
            np.testing.assert_array_equal(getattr(alt, f), getattr(one, f), err_msg=f"{f} {cfg}")
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
    the device outputs equal, the numbers those of the host path bit for bit (the strided views compile their
    own kernel specialization, with the same float64 instructions)."""
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
        np.testing.assert_array_equal(a, b, err_msg=f)
    via_fit = fit_gpu(cp.asarray(x, order="F"), cov, spec)  # two launches (plan.launch_rows)
    for f in ("lam", "alpha", "sini", "cn", "ini"):
        np.testing.assert_array_equal(getattr(via_fit, f), getattr(host, f), err_msg=f)


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
