"""Several GPUs of a machine (pipeline/multigpu.py): whole chromosomes placed on the devices, each device's thread
running the stage order; the result equals the whole matrix run bit for bit.

Without a GPU the placement, the per-device threads and the assembly run on the CPU backend (two workers, the
device switch a no-op) and, in numba's CUDA simulator, with the GPU stages on chromosome blocks; on a machine
with several GPUs (``pytest -m gpu``) on every device.
"""
from __future__ import annotations

import contextlib
import os
import threading

import numpy as np
import pandas as pd
import pytest

import cudasim
from gcnmops.cuda.probe import Backend
from gcnmops.data import make_count_data
from gcnmops.params import METHODS
from gcnmops.pipeline import multigpu
from gcnmops.pipeline.plan import RunPlan
from gcnmops.pipeline.stages import run_block

MATRICES = ("normalized_data", "local_assessments", "individual_call", "ini_call", "cn_index", "posterior_probs")
TABLES = ("segmentation", "cnvs", "cnvr")


def cohort(sizes=(700, 1200, 90, 4, 500), n=7, seed=5, silent: int | None = 3):
    """Chromosomes of ``sizes`` regions (one tiny), uneven region means, planted gains and losses; the chromosome
    ``silent`` without a read."""
    rng = np.random.default_rng(seed)
    m = sum(sizes)
    mu = rng.gamma(4.0, 30.0, size=(m, 1)) * rng.uniform(0.7, 1.3, size=(1, n))
    dose = np.ones((m, n))
    for _ in range(12):
        s, k = rng.integers(0, m - 40), rng.integers(0, n)
        dose[s:s + rng.integers(6, 40), k] = rng.choice([0.02, 0.5, 1.5, 2.0])
    y = rng.poisson(mu * dose).astype(float)
    names = np.repeat([f"chr{i + 1}" for i in range(len(sizes))], sizes)
    if silent is not None:
        first = sum(sizes[:silent])
        y[first:first + sizes[silent]] = 0.0
    starts = np.concatenate([np.arange(k) * 1000 + 1 for k in sizes])
    ranges = pd.DataFrame({"seqnames": names, "start": starts, "end": starts + 999})
    return make_count_data(y, [f"S{k}" for k in range(n)], ranges)


def assert_same(a, b):
    for name in MATRICES:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert np.array_equal(x, y, equal_nan=True), name
    for key in ("L", "A", "cov"):
        assert np.array_equal(a.params[key], b.params[key], equal_nan=True), key
    for name in TABLES:
        assert getattr(a, name).equals(getattr(b, name)), name


@pytest.mark.parametrize("method,params,per_device", [
    ("cn.mops", {}, 1), ("cn.mops", {}, 2), ("cn.mops", {"norm": 0}, 2),
    ("cn.mops", {"norm": 2, "return_posterior": True}, 3), ("haplo", {"norm": 2}, 2),
    ("exome", {"use_median": True}, 1),
])
def test_chromosomes_on_workers_equal_the_whole_run(method, params, per_device, monkeypatch):
    """Two devices' worker threads (``per_device`` each) take the chromosomes largest first; every matrix and table
    equals run_block on the whole matrix (the CPU backend here: the device switch does nothing)."""
    monkeypatch.setattr(multigpu, "on_device", lambda device: contextlib.nullcontext())
    data = cohort()
    row = METHODS[method]
    plan = RunPlan(row, row.params(**params), Backend.CPU, data.n_regions)
    timings: dict = {}
    got = multigpu.run_on_devices(plan, data, [0, 1], timings, per_device=per_device)
    assert_same(got, run_block(plan, data))
    assert sum(got.gpu_stats[f"device_{d}_chromosomes"] for d in (0, 1)) == 5
    assert sum(got.gpu_stats[f"device_{d}_groups"] for d in (0, 1)) == len(
        multigpu.chromosome_groups(data.blocks(), 2 * per_device))
    assert {"genome", "normalize", "model", "segment_call"} <= set(timings)


def test_a_failing_device_fails_the_run(monkeypatch):
    """An error on one device's thread is the run's error; the other device stops taking chromosomes."""
    monkeypatch.setattr(multigpu, "on_device", lambda device: contextlib.nullcontext())
    real = multigpu.run_block

    def failing(plan, held, **kw):
        if kw.get("devices") == [1]:
            raise RuntimeError("device 1 failed (test)")
        return real(plan, held, **kw)

    monkeypatch.setattr(multigpu, "run_block", failing)
    data = cohort()
    plan = RunPlan(METHODS["cn.mops"], METHODS["cn.mops"].params(), Backend.CPU, data.n_regions)
    with pytest.raises(RuntimeError, match="device 1 failed"):
        multigpu.run_on_devices(plan, data, [0, 1], {})


CHILD = r'''
    import json, sys
    import numpy as np
    from gcnmops.cuda.probe import Backend
    from gcnmops.params import METHODS
    from gcnmops.pipeline import multigpu
    from gcnmops.pipeline.plan import RunPlan
    from gcnmops.pipeline.stages import run_block
    import test_multigpu as t

    out = {}
    data = t.cohort(sizes=(150, 220, 150, 90), n=5, silent=2)
    for name, params in (("norm1", {}), ("norm2_post", {"norm": 2, "return_posterior": True})):
        p = METHODS["cn.mops"].params(**params)
        cpu = run_block(RunPlan(METHODS["cn.mops"], p, Backend.CPU, data.n_regions), data)
        for groups in (4, 2, 1):
            # one worker thread: the simulator runs kernels from one host thread at a time
            gpu = multigpu.run_on_devices(RunPlan(METHODS["cn.mops"], p, Backend.GPU, data.n_regions), data, [0],
                                          {}, per_device=1, groups=groups)
            stats = gpu.gpu_stats
            try:
                t.assert_same(gpu, cpu)
                said = f"identical, {stats['device_0_resident']} of {stats['device_0_groups']} resident"
            except AssertionError as err:
                said = f"differs: {err}"
            out[f"{name}/{groups}"] = f"{said}, {stats['device_0_copied']} copied"
    json.dump(out, open(f"{sys.argv[1]}/result.json", "w"))
'''
SCENARIO = cudasim.register(__name__, CHILD)


@pytest.mark.parametrize("name", ["norm1", "norm2_post"])
def test_sim_gpu_stages_on_chromosome_blocks(cuda_simulator, name):
    """In the CUDA simulator: the GPU stages on chromosome blocks, device-resident (the whole genome's sums given,
    normalized on the device or, for the chromosome without a read, by the CPU code with them; the model and the
    segmentation's statistic on the device) equal the CPU run of the whole matrix; every result lands in place
    in the whole run's matrices (the stages write into their rows), but for the normalized data of the chromosome
    the CPU code normalizes."""
    got = cuda_simulator.result(SCENARIO)
    assert got[f"{name}/4"] == "identical, 4 of 4 resident, 1 copied"  # one group per chromosome
    assert got[f"{name}/2"] == "identical, 2 of 2 resident, 0 copied"  # 150 + 220 rows; 150 + 90
    assert got[f"{name}/1"] == "identical, 1 of 1 resident, 0 copied"


@pytest.mark.gpu
def test_every_gpu_equals_the_cpu():
    """Chromosomes on every GPU of this machine equal the CPU's run of the whole matrix."""
    from gcnmops.cuda.probe import device_ids

    data = cohort(sizes=(40_000, 65_000, 12_000, 4, 30_000, 55_000), n=24, seed=9)
    for params, per_device in (({}, 1), ({}, 2), ({"norm": 2, "return_posterior": True}, 2)):
        p = METHODS["cn.mops"].params(**params)
        gpu = multigpu.run_on_devices(RunPlan(METHODS["cn.mops"], p, Backend.GPU, data.n_regions), data,
                                      device_ids("all"), {}, per_device=per_device)
        assert_same(gpu, run_block(RunPlan(METHODS["cn.mops"], p, Backend.CPU, data.n_regions), data))


@pytest.mark.gpu
def test_two_threads_on_one_gpu_equal_the_run_alone():
    """Two block threads on one GPU (each with a cupy memory pool of its own) give the run alone, repeatedly, on a
    cohort of over 128 samples (the EM's global-scratch kernel) whose chromosomes overlap in time. Two GATK-SV
    passes at once on one H100 changed calls while the threads shared one pool (benchmarks/RESULTS.md, sixth
    session): this is the check to pass before cuda/config.py's BLOCKS_PER_DEVICE and PASSES_PER_DEVICE go to 2."""
    data = cohort(sizes=(60_000, 90_000, 40_000, 75_000), n=200, seed=4, silent=None)
    p = METHODS["cn.mops"].params()
    alone = run_block(RunPlan(METHODS["cn.mops"], p, Backend.GPU, data.n_regions), data)
    for _ in range(3):
        two = multigpu.run_on_devices(RunPlan(METHODS["cn.mops"], p, Backend.GPU, data.n_regions), data, [0], {},
                                      per_device=2)
        assert_same(two, alone)


@pytest.mark.gpu
def test_a_threads_pool_is_its_own_and_counted():
    """Inside thread_memory_pool a thread allocates from its own pool, whose freed blocks pool_free_bytes counts;
    after it, cupy's default pool again."""
    import cupy

    from gcnmops.cuda.runtime import pool_free_bytes, thread_memory_pool

    default = cupy.get_default_memory_pool()
    with thread_memory_pool():
        a = cupy.zeros(1 << 20)
        before = default.used_bytes()
        del a
        assert pool_free_bytes() >= 8 << 20 and default.used_bytes() == before
    b = cupy.zeros(1 << 20)
    assert default.used_bytes() >= 8 << 20
    del b


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_the_unlocker_starts_afresh_in_a_forked_child():
    """Landing.close hands arrays to an unlocker thread; a forked child (which has no such thread) starts without
    one and nothing pending, so its own unlocks run and drain() returns instead of waiting forever."""
    from gcnmops.cuda import runtime

    runtime._UNLOCKER.submit([])
    runtime._UNLOCKER.drain()
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if a submit there runs and drains
        if runtime._UNLOCKER._pool is not None or runtime._UNLOCKER._pending:
            os._exit(3)  # the parent's executor: a submit would wait forever on its absent thread
        runtime._UNLOCKER.submit([])
        runtime._UNLOCKER.drain()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.parametrize("sizes,parts", [((700, 1200, 90, 4, 500), 2), ((5, 5, 5, 5), 4), ((9, 1, 1, 1), 3),
                                          ((3, 8, 2, 7, 7, 1, 4), 3), ((100,), 4), ((4, 4), 8)])
def test_chromosome_groups_split_in_order_with_the_least_largest_run(sizes, parts):
    """The groups are consecutive whole chromosomes covering every row once, at most ``parts`` of them, and no
    split of the chromosomes in order into ``parts`` runs has a smaller largest run (checked by trying them all)."""
    import itertools

    ends = np.cumsum(sizes)
    blocks = [(f"chr{k}", int(e - s), int(e)) for k, (s, e) in enumerate(zip(sizes, ends))]
    groups = multigpu.chromosome_groups(blocks, parts)
    assert len(groups) <= parts
    assert [g[0] for g in groups] == [0] + [g[1] for g in groups[:-1]] and groups[-1][1] == ends[-1]
    assert sum(g[2] for g in groups) == len(sizes)
    assert all(blocks[sum(h[2] for h in groups[:i])][1] == g[0] for i, g in enumerate(groups))
    best = min(max(np.diff([0, *(ends[c - 1] for c in cuts), ends[-1]]))
               for k in range(min(parts, len(sizes)))
               for cuts in itertools.combinations(range(1, len(sizes)), k))
    assert max(g[1] - g[0] for g in groups) == best


def test_several_devices_run_chromosome_groups(monkeypatch):
    """cn_mops's ``devices`` naming several GPUs runs groups of chromosomes on them (run_on_devices); one GPU, one
    chromosome, or host arrays to write into (the R bridge's) stay on run_block."""
    from gcnmops.pipeline import cnmops

    seen = []
    monkeypatch.setattr(cnmops.RunPlan, "build", classmethod(lambda cls, row, p, backend, m: RunPlan(
        row, p, Backend.GPU, m)))
    monkeypatch.setattr(cnmops, "device_ids", lambda devices: [0, 1, 2] if devices == "all" else list(devices))
    monkeypatch.setattr(multigpu, "run_on_devices", lambda plan, data, ids, timings: seen.append(ids) or "groups")
    monkeypatch.setattr(cnmops, "run_block", lambda plan, data, **kw: "block")
    data, p = cohort(), METHODS["cn.mops"].params()
    assert cnmops.run_mops(data, p, backend="gpu", devices="all") == "groups" and seen == [[0, 1, 2]]
    assert cnmops.run_mops(data, p, backend="gpu", devices=[1, 3]) == "groups" and seen[-1] == [1, 3]
    assert cnmops.run_mops(data, p, backend="gpu", devices=[1]) == "block"
    assert cnmops.run_mops(data, p, backend="gpu") == "block"
    assert cnmops.run_mops(data, p, backend="gpu", devices="all", out=object()) == "block"
    one = make_count_data(data.counts[:700], data.sample_names, data.ranges.iloc[:700])
    assert cnmops.run_mops(one, p, backend="gpu", devices="all") == "block"


def test_the_model_part_is_handed_on_before_the_segmentation_ends(monkeypatch):
    """The MODEL_DONE listener (the writers) gets the whole run's model part once every group's model has
    landed, while the groups are still being segmented: the same matrices as the final result's, already
    filled; a group's normalized data that did not land in place is copied in first."""
    from gcnmops.pipeline import stages

    monkeypatch.setattr(multigpu, "on_device", lambda device: contextlib.nullcontext())
    data = cohort()
    plan = RunPlan(METHODS["cn.mops"], METHODS["cn.mops"].params(), Backend.CPU, data.n_regions)
    real = stages.segment_and_call
    seen, segmented, handed = [], [], threading.Event()

    def segment(*args, **kw):  # each group's segmentation waits until the model part has been handed on
        segmented.append(handed.wait(20))
        return real(*args, **kw)

    def listener(part):
        seen.append((part, [a.copy() for a in (part.normalized_data, part.local_assessments, part.cn_index)]))
        handed.set()

    monkeypatch.setattr(stages, "segment_and_call", segment)
    token = stages.MODEL_DONE.set(listener)
    try:
        got = multigpu.run_on_devices(plan, data, [0, 1], {}, per_device=1)
    finally:
        stages.MODEL_DONE.reset(token)
    assert len(seen) == 1 and seen[0][0].individual_call is None
    assert segmented == [True, True]  # two groups, both segmented after the hand-on
    part, copies = seen[0]
    assert part.normalized_data is got.normalized_data and part.local_assessments is got.local_assessments
    for early, final in zip(copies, (got.normalized_data, got.local_assessments, got.cn_index)):
        assert np.array_equal(early, final, equal_nan=True)
    assert_same(got, run_block(plan, data))
