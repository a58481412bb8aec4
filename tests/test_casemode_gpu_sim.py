"""The frozen E-step's CUDA kernel (model/estep.py) without a GPU: numba's CUDA simulator runs it, and call_samples
with backend="gpu" (E-step kernel + GPU segmentation) must give what backend="cpu" gives.

The simulator must be switched on before numba is imported, so the GPU runs happen in the session's simulator
child (cudasim.py), which compares them with the CPU there and writes JSON. In the simulator no device is probed
(cuda.probe.gpu_available() is False), so the scenario marks the probe as done with a device: the simulator stands
in for it.
"""
from __future__ import annotations

import pytest

import cudasim

CHILD = r'''
    import json, sys
    import numpy as np
    from gcnmops.cuda import probe
    probe._PROBED[:] = [True]  # the simulator stands in for a device

    import gcnmops
    from gcnmops.data import make_count_data
    from gcnmops.example import example_cohort
    from gcnmops.cuda.config import ESTEP_LOCAL_WORK_MAX
    from gcnmops.model import estep as es
    from gcnmops.model.spec import ModelSpec

    out = {}
    # call_samples frozen, backend gpu vs cpu: 2 new samples (with CNVs) against a reference of 12, posteriors kept
    data, _ = example_cohort(240, 14, seed=5, n_cnvs=4)
    ref = gcnmops.build_reference(make_count_data(data.counts[:, :12], data.sample_names[:12], data.ranges),
                                  backend="cpu", return_posterior=True)
    y = data.counts[:, 12:].copy(order="F")
    y[40:60, 0] = np.floor(y[40:60, 0] / 2)  # a loss of one copy and a gain of two, new to the reference
    y[150:170, 1] *= 2
    new = make_count_data(y, data.sample_names[12:], data.ranges, min_samples=1)
    got = {b: gcnmops.call_samples(new, ref, "frozen", backend=b) for b in ("cpu", "gpu")}
    cpu, gpu = got["cpu"], got["gpu"]
    cols = ["seqnames", "start", "end", "sampleName"]
    out["call_samples"] = {
        "sini": bool(np.array_equal(cpu.local_assessments, gpu.local_assessments)),
        "labels": bool(np.array_equal(cpu.cn_index, gpu.cn_index)),
        "ini": bool(np.array_equal(cpu.ini_call, gpu.ini_call)),
        "post": bool(np.array_equal(cpu.posterior_probs, gpu.posterior_probs)),
        "segments": bool(cpu.segmentation[cols].equals(gpu.segmentation[cols])),
        "cnvs": len(cpu.cnvs), "cnvs_equal": bool(cpu.cnvs[cols].equals(gpu.cnvs[cols])),
        "non_main": int((cpu.cn_index != 2).sum()),
    }
    # the kernel alone: more samples than a thread's local INI buffer (global scratch), unmodelled regions,
    # n_fit 0 (the plain E-step) and > 0 (the samples join the class weights), posteriors kept
    rng = np.random.default_rng(3)
    m, J = 12, ESTEP_LOCAL_WORK_MAX + 6
    folds = np.array([0.025, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4])
    spec = ModelSpec.build(folds, [f"CN{i}" for i in range(9)], "CN2", 1.0, 20, 1.0)
    mu = rng.uniform(20, 150, m)
    x = np.asfortranarray(rng.poisson(mu[:, None] * rng.choice([0.0, 0.5, 1, 1, 1, 1.5], (m, J))).astype(float))
    lam = np.asfortranarray(mu[:, None] * folds[None, :])
    lam[:3] = 0.0  # not modelled by the fit
    alpha = np.asfortranarray(rng.dirichlet(np.r_[0.1, 1, 30, 1, 0.1, 0.1, 0.1, 0.1, 0.1], m))
    cov = rng.uniform(0.8, 1.2, J)
    for n_fit in (0, 25):
        a = es.estep_cpu(x, cov, lam, alpha, spec, keep_post=True, n_fit=n_fit)
        b = es.estep_gpu(x, cov, lam, alpha, spec, keep_post=True, n_fit=n_fit)
        out[f"kernel_n_fit_{n_fit}"] = {f: bool(np.array_equal(getattr(a, f), getattr(b, f)))
                                        for f in ("sini", "cn", "ini", "post")}
        out[f"kernel_n_fit_{n_fit}"]["labels_used"] = sorted(set(np.unique(a.cn).tolist()))
    json.dump(out, open(f"{sys.argv[1]}/result.json", "w"))
'''
SCENARIO = cudasim.register(__name__, CHILD)


@pytest.fixture(scope="module")
def sim_result(cuda_simulator):
    return cuda_simulator.result(SCENARIO)


def test_frozen_call_on_the_simulated_gpu_equals_the_cpu(sim_result):
    r = sim_result["call_samples"]
    assert r["non_main"] > 0 and r["cnvs"] > 0  # the new samples carry CNVs: the comparison is not all-normal
    assert r["sini"] and r["labels"] and r["ini"] and r["post"], r
    assert r["segments"] and r["cnvs_equal"], r


@pytest.mark.parametrize("n_fit", [0, 25])
def test_estep_kernel_with_global_scratch_equals_the_cpu(sim_result, n_fit):
    r = sim_result[f"kernel_n_fit_{n_fit}"]
    assert len(r["labels_used"]) >= 3, r  # losses, normal and gains among the labels
    assert r["sini"] and r["cn"] and r["ini"] and r["post"], r
