"""GPU backend without a GPU: the kernel, chunking, ordering and the pipeline in numba's CUDA simulator.

The simulator must be switched on before numba is imported, so the GPU runs happen in the session's simulator
child (cudasim.py), which saves their outputs; this process compares them with the CPU backend, bit for bit. The
simulator runs each GPU thread as a Python thread (~0.1 s a region): 100 regions, of which 35 take the special
paths, in 2 to 4 chunks per case, with each cycle's posteriors stored between the E-step and the M-step's sum
(the default) or recomputed; and 12 regions of 130 samples (more than EM_LOCAL_WORK_MAX: the global work scratch
chosen by itself).
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import cudasim
from gcnmops.cuda import plan
from gcnmops.model.cpu import fit_cpu
from gcnmops.model.spec import ModelSpec

FIELDS = ("lam", "alpha", "sini", "ini")

CHILD = r'''
    import json, sys
    import numpy as np
    from gcnmops.model.gpu import fit_gpu, KernelConfig
    from gcnmops.cuda.runtime import NumbaBackend
    from gcnmops.model.spec import ModelOutput, ModelSpec

    work = sys.argv[1]
    inp = np.load(f"{work}/input.npz")

    def spec_of(folds, cyc):
        folds = list(folds)
        return ModelSpec.build(folds, [f"CN{i}" for i in range(len(folds))], "CN2", 1.0, int(cyc), 1.0)

    class FlakyBackend(NumbaBackend):
        """Refuses device allocations above a size, as a full GPU would (tests the OOM retry): the lambdas of 40
        regions; the 100-region chunk is halved twice."""
        limit = 40 * 9 * 8
        def device_array(self, size, dtype):
            if size * np.dtype(dtype).itemsize > self.limit:
                raise RuntimeError("CUDA_ERROR_OUT_OF_MEMORY (simulated)")
            return super().device_array(size, dtype)

    cases = {
        # name: (folds, keep_post, kwargs); the wide input (N > EM_LOCAL_WORK_MAX) where the name says so
        "unroll_local_post": (inp["folds9"], True, dict(chunk_rows=37, config=KernelConfig(threads_per_block=16))),
        "unroll_global_post": (inp["folds9"], True, dict(chunk_rows=50, config=KernelConfig(
            threads_per_block=16, work="global"))),
        "rolled_global": (inp["folds9"], False, dict(chunk_rows=64, config=KernelConfig(
            threads_per_block=32, variant="rolled", work="global"))),
        "unroll_global_recompute_post": (inp["folds9"], True, dict(chunk_rows=50, config=KernelConfig(
            threads_per_block=16, work="global", posteriors="recompute"))),
        "rolled_local_post": (inp["folds5"], True, dict(chunk_rows=50, config=KernelConfig(
            threads_per_block=32, variant="rolled"))),
        "wide_auto_global_post": (inp["folds9"], True, dict(chunk_rows=8, config=KernelConfig(threads_per_block=4))),
        "five_classes_one_chunk": (inp["folds5"], True, dict(config=KernelConfig(threads_per_block=64))),
        "two_devices": (inp["folds9"], False, dict(chunk_rows=25, devices=[0, 0],
                                                    config=KernelConfig(threads_per_block=32))),
        "oom_retry": (inp["folds9"], False, dict(backend=FlakyBackend, config=KernelConfig(threads_per_block=64))),
        "user_out": (inp["folds9"], False, dict(chunk_rows=40, config=KernelConfig(threads_per_block=64))),
    }
    only = sys.argv[2:] or list(cases)
    meta = {}
    for name in only:
        folds, keep_post, kw = cases[name]
        wide = name.startswith("wide")
        x = np.asfortranarray(inp["x_wide" if wide else "x"])
        cov = inp["cov_wide" if wide else "cov"]
        spec = spec_of(folds, inp["cyc_wide" if wide else "cyc"])
        out = None
        if name == "user_out":
            out = ModelOutput.allocate(x.shape[0], spec.folds.size, x.shape[1], keep_post)
            for a in (out.lam, out.alpha, out.sini, out.ini):
                a.fill(np.nan)
        stats = {}
        res = fit_gpu(x, cov, spec, keep_post=keep_post, out=out, stats=stats, **kw)
        if out is not None:
            assert res is out
        arrays = {f: getattr(res, f) for f in ("lam", "alpha", "sini", "cn", "ini")}
        if keep_post:
            arrays["post"] = res.post
        np.savez(f"{work}/{name}.npz", **arrays)
        meta[name] = dict(rows=stats["rows_per_chunk"], n_chunks=stats["n_chunks"],
                          chunks={str(k): v for k, v in stats["chunks"].items()},
                          variant=stats["variant"], local_work=stats["local_work"], backend=stats["backend"],
                          store=stats["store_posteriors"])
    json.dump(meta, open(f"{work}/meta.json", "w"))
'''

FOLDS9 = np.array([0.025, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4])
FOLDS5 = np.array([0.025, 0.5, 1, 1.5, 2])
CYC = 20
#: the wide input: 130 samples (the global work scratch), fewer cycles (the simulator's time)
CYC_WIDE = 4


def _input(m=100, N=6, seed=7):
    rng = np.random.default_rng(seed)
    base = rng.uniform(0, 80, m)
    fold = rng.choice([0.0, 0.5, 1, 1, 1, 1, 1.5, 2], size=(m, N))
    x = rng.poisson(base[:, None] * fold).astype(np.float64) * rng.uniform(0.9, 1.1, N)
    x[:25] = rng.uniform(0, 1, (25, N))          # minReadCount short-cut regions
    x[25:30] = 0.0
    x[30:35, :3] = 0.0                             # median zero: the mean fallback
    cov = rng.uniform(0.7, 1.3, N)
    return np.asfortranarray(x), cov


def _wide_input(m=12, N=130, seed=11):
    """m regions of N samples: Poisson counts, a loss and a gain, one short-cut region, one sample far above its
    region (every class at the likelihood floor), some coverages exactly 1 (the log-lambda short-cut)."""
    rng = np.random.default_rng(seed)
    x = rng.poisson(rng.uniform(5, 400, m)[:, None] * rng.choice([0.5, 1, 1, 1, 1.5], size=(m, N))).astype(float)
    x[0] = rng.uniform(0, 1, N)
    x[1, 7] = 1e7
    cov = rng.uniform(0.6, 1.6, N)
    cov[::3] = 1.0
    return np.asfortranarray(x), cov


def _write_input(work) -> None:
    x, cov = _input()
    xw, cw = _wide_input()
    np.savez(work / "input.npz", x=x, cov=cov, folds9=FOLDS9, folds5=FOLDS5, cyc=CYC, x_wide=xw, cov_wide=cw,
             cyc_wide=CYC_WIDE)


SCENARIO = cudasim.register(__name__, CHILD, prepare=_write_input)


@pytest.fixture(scope="module")
def sim_run(cuda_simulator):
    work = cuda_simulator.wait(SCENARIO)
    x, cov = _input()
    meta = json.loads((work / "meta.json").read_text())
    return work, x, cov, meta


def _spec(folds, cyc=CYC):
    return ModelSpec.build(list(folds), [f"CN{i}" for i in range(len(folds))], "CN2", 1.0, cyc, 1.0)


def _assert_same(got, ref, keep_post):
    """Every output bit-identical: the kernel runs em.fit_region, whose sums run in cn.mops's order as the CPU
    driver's (em.fit_lanes) do, with glibc's exp and log (exact/libm.py) on both."""
    for f in FIELDS + ("cn",) + (("post",) if keep_post else ()):
        a, b = got[f], getattr(ref, f)
        assert a.dtype == b.dtype and a.shape == b.shape, f
        np.testing.assert_array_equal(a, b, err_msg=f)


@pytest.mark.parametrize("name,folds,keep_post", [
    ("unroll_local_post", FOLDS9, True),
    ("unroll_global_post", FOLDS9, True),
    ("unroll_global_recompute_post", FOLDS9, True),
    ("rolled_global", FOLDS9, False),
    ("rolled_local_post", FOLDS5, True),
    ("five_classes_one_chunk", FOLDS5, True),
    ("two_devices", FOLDS9, False),
    ("oom_retry", FOLDS9, False),
    ("user_out", FOLDS9, False),
])
def test_simulated_kernel_equals_cpu(sim_run, name, folds, keep_post):
    work, x, cov, meta = sim_run
    got = np.load(work / f"{name}.npz")
    ref = fit_cpu(x, cov, _spec(folds), keep_post=keep_post)
    _assert_same(got, ref, keep_post)


def test_simulated_kernel_equals_cpu_beyond_local_work(sim_run):
    """More samples than EM_LOCAL_WORK_MAX: the per-sample buffers in the global scratch, chosen by the kernel
    configuration itself; non-unit coverages, some exactly 1; bit for bit."""
    work, _, _, meta = sim_run
    x, cov = _wide_input()
    got = np.load(work / "wide_auto_global_post.npz")
    ref = fit_cpu(x, cov, _spec(FOLDS9, CYC_WIDE), keep_post=True)
    _assert_same(got, ref, True)
    assert meta["wide_auto_global_post"]["local_work"] == 0 and meta["wide_auto_global_post"]["variant"] == "unroll"
    assert (ref.lam[:, 0] == 0).sum() == 1 and (ref.post[1, :, 7] == ref.post[1, 0, 7]).all()


def test_simulated_chunking_and_order(sim_run):
    from gcnmops.model.gpu import local_work_size

    _, x, _, meta = sim_run
    m = x.shape[0]
    tiny = meta["unroll_local_post"]
    assert tiny["rows"] == 37 and tiny["n_chunks"] == math.ceil(m / 37)
    assert tiny["chunks"]["0"] == [list(c) for c in plan.chunk_bounds(m, 37)]
    assert tiny["variant"] == "unroll" and tiny["local_work"] == local_work_size(x.shape[1]) >= x.shape[1]
    assert meta["rolled_global"]["variant"] == "rolled" and meta["rolled_global"]["local_work"] == 0
    assert meta["rolled_local_post"]["variant"] == "rolled" and meta["rolled_local_post"]["local_work"] > 0
    assert meta["unroll_global_post"]["variant"] == "unroll" and meta["unroll_global_post"]["local_work"] == 0
    assert meta["five_classes_one_chunk"]["n_chunks"] == 1
    # two host threads pulled disjoint chunks that together cover every row once
    two = meta["two_devices"]
    pulled = sorted(tuple(c) for cs in two["chunks"].values() for c in cs)
    assert pulled == plan.chunk_bounds(m, 25)
    # posteriors stored between the passes of a cycle where the scratch fits ("auto"), recomputed on request;
    # the simulated out-of-memory device dropped the posterior scratch, then halved its chunk until the buffers fit
    assert tiny["store"] and meta["unroll_global_post"]["store"] and meta["wide_auto_global_post"]["store"]
    assert not meta["unroll_global_recompute_post"]["store"]
    assert not meta["oom_retry"]["store"]
    assert meta["oom_retry"]["rows"] < m and meta["oom_retry"]["n_chunks"] > 1


# ------------------------------------------------------------------------------ planning (no simulator)
def test_plan_fits_memory_and_targets_overlap():
    rb = plan.row_bytes(15, 9, False)
    assert rb == 15 * 8 + 2 * 9 * 8 + 15 * 8 + 15 + 8
    big = plan.plan_chunks(6_904_726, 15, 9, False, free_bytes=80 << 30)
    assert big.rows == math.ceil(6_904_726 / plan.TARGET_CHUNKS)
    assert big.device_bytes <= plan.memory_budget(80 << 30)
    small = plan.plan_chunks(6_904_726, 15, 9, False, free_bytes=80 << 30, max_device_memory=64 << 20)
    assert small.device_bytes <= 64 << 20 and small.rows == (64 << 20) // (2 * rb)
    assert plan.plan_chunks(1000, 15, 9, False, free_bytes=80 << 30).rows == 1000
    assert plan.plan_chunks(1000, 15, 9, False, free_bytes=80 << 30, max_rows=7).rows == 7
    post = plan.plan_chunks(10**6, 40, 9, True, free_bytes=1 << 30)
    assert post.device_bytes <= plan.memory_budget(1 << 30)
    with pytest.raises(MemoryError):
        plan.plan_chunks(10, 15, 9, False, free_bytes=80 << 30, max_device_memory=100)


def test_plan_shrink_bounds_and_split():
    p = plan.plan_chunks(10**6, 15, 9, False, free_bytes=1 << 30)
    q = plan.shrink(p)
    assert q.rows == p.rows // 2
    one = plan.ChunkPlan(rows=1, slots=2, row_bytes=1, fixed_bytes=0, budget_bytes=1)
    assert plan.shrink(one) is None
    assert plan.shrink(q, min_rows=q.rows) is None
    assert plan.chunk_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert plan.split_rows(100, [1, 1]) == [(0, 50), (50, 100)]
    assert plan.split_rows(100, [3, 1]) == [(0, 75), (75, 100)]
    assert plan.is_out_of_memory(RuntimeError("cudaErrorMemoryAllocation: out of memory"))
    assert not plan.is_out_of_memory(ValueError("shape"))


def test_resident_plan():
    # BM-A: counts + every output of 6.9M regions, 15 samples, 7 classes; norm=2 keeps a second input matrix
    assert plan.resident_bytes(6_904_726, 15, 7, False) == 6_904_726 * plan.row_bytes(15, 7, False)
    assert plan.resident_bytes(10, 15, 7, True, input_copies=2) == 10 * (plan.row_bytes(15, 7, True) + 120)
    assert plan.launch_rows(6_904_726) == -(-6_904_726 // plan.TARGET_CHUNKS)      # ~8 launches
    assert plan.launch_rows(1_500_000) == plan.MIN_FILL_ROWS                        # each still fills the GPU
    assert plan.launch_rows(300_000) == 150_000                                     # two launches, not one
    assert plan.launch_rows(1000) == 500 and plan.launch_rows(1000, max_rows=300) == 300  # always two or more
    assert plan.launch_rows(1) == 1


def test_kernel_config_resolves_variant_and_work():
    from gcnmops.cuda.config import EM_LOCAL_WORK_MAX, EM_UNROLL_MAX_CLASSES
    from gcnmops.model.gpu import KernelConfig

    cfg = KernelConfig()
    assert cfg.resolve(9, 15) == ("unroll", 16)                          # work buffer: the next power of two
    assert cfg.resolve(9, 40) == ("unroll", 64) and cfg.resolve(9, 2) == ("unroll", 8)
    assert cfg.resolve(9, EM_LOCAL_WORK_MAX) == ("unroll", EM_LOCAL_WORK_MAX)
    assert cfg.resolve(9, EM_LOCAL_WORK_MAX + 1) == ("unroll", 0)          # large N: global work scratch
    assert cfg.resolve(EM_UNROLL_MAX_CLASSES + 1, 15) == ("rolled", 16)
    assert KernelConfig(variant="rolled", work="global").resolve(9, 15) == ("rolled", 0)


def test_gpu_available_never_raises_without_gpu():
    from gcnmops.cuda.probe import gpu_available

    assert gpu_available() in (True, False)


def test_gpu_probe_runs_once_when_many_threads_ask(monkeypatch):
    """Several task threads of one Dask worker asking at once: one probe (numba-cuda's driver start is not
    thread-safe; unguarded, threads of a worker on an H100 saw no GPU), the same answer for all."""
    import threading
    import time

    from gcnmops.cuda import probe as gpu

    calls = []

    def slow_probe():
        calls.append(threading.get_ident())
        time.sleep(0.05)
        return len(calls) == 1  # a second, concurrent probe would answer differently

    monkeypatch.setattr(gpu, "_probe_gpu", slow_probe)
    monkeypatch.setattr(gpu, "_PROBED", [])
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(gpu.gpu_available())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert answers == [True] * 8


def _ptx_f64_ops(ptx: str) -> list[str]:
    """The float64 arithmetic instructions of a PTX listing, in order (loads, stores, moves, compares left out)."""
    import re

    skip = ("ld", "st", "mov", "cvt", "setp", "selp", "//", "@")
    return [ln.split()[0] for ln in ptx.splitlines()
            if re.search(r"\.f64\b", ln) and not ln.strip().startswith(skip)]


@pytest.fixture
def nvvm(monkeypatch):
    """numba-cuda's ``cuda`` and ``types`` for compiling kernels to PTX without a GPU (NVVM only), as for an
    H100; skips where numba-cuda or NVVM is missing."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("numba-cuda")
    except PackageNotFoundError:
        pytest.skip("numba-cuda not installed: numba's own deprecated numba.cuda is not a supported GPU target")
    from numba import cuda, types

    import numba.cuda.dispatcher as dispatcher

    try:
        cuda.compile_ptx(lambda a: None, (types.float64[:],), cc=(9, 0))
    except Exception as exc:  # noqa: BLE001 - no NVVM here: nothing to check
        pytest.skip(f"NVVM unavailable: {type(exc).__name__}")

    class _Hopper:
        compute_capability = (9, 0)

    monkeypatch.setattr(dispatcher, "get_current_device", lambda: _Hopper())  # device functions ask the driver
    return cuda, types


def test_model_kernel_compiles_for_contiguous_and_strided_views(nvvm):
    """The EM kernel compiles to PTX without a GPU (NVVM only) for the host pipeline's contiguous chunk views
    and the device-resident pipeline's strided row views, with the same float64 instruction sequence."""
    cuda, types = nvvm
    from gcnmops.model.gpu import get_kernel

    f64 = types.float64

    def sig(layout):
        a2, a1 = types.Array(f64, 2, layout), types.Array(f64, 1, "C" if layout == "F" else layout)
        c1 = types.Array(f64, 1, "C")
        return (a2, c1, c1, c1, c1, c1, f64, types.int64, f64, types.int64, types.Array(f64, 2, "F"), a2, a2, a2,
                types.Array(types.int8, 2, layout), a1, types.Array(f64, 3, "F"))

    kernel = get_kernel(7, 15, False, "unroll", None).py_func
    ops = {layout: _ptx_f64_ops(cuda.compile_ptx(kernel, sig(layout), cc=(9, 0))[0]) for layout in ("F", "A")}
    assert len(ops["F"]) > 500 and ops["F"] == ops["A"]


def test_onestep_kernel_compiles(nvvm):
    """The one-step kernel (referencecn.mops, singlecn.mops: glibc's exp/log, R's long-double sums) compiles to
    PTX without a GPU, for the arrays fit_onestep_gpu passes."""
    cuda, types = nvvm
    from gcnmops.model.onestep_gpu import _gpu_kernel

    f64, c1 = types.float64, types.Array(types.float64, 1, "C")
    f2 = types.Array(f64, 2, "F")
    sig = (f2, c1, c1, c1, c1, c1, f64, f64, types.int64, f2, f2, f2, f2, types.Array(types.int8, 2, "F"), c1,
           types.Array(f64, 3, "F"))
    ptx = cuda.compile_ptx(_gpu_kernel(5, 15, False).py_func, sig, cc=(9, 0))[0]
    assert len(_ptx_f64_ops(ptx)) > 300


def test_nofma_kernels_link_without_lto():
    """Every no-FMA kernel is built with lto=False: nvJitLink's link-time code generation contracts the
    multiply-adds NVVM kept apart (on an H100, R's lgamma series came out 1 ulp off for a quarter of the
    arguments in an LTO-linked kernel)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("numba-cuda")
    except PackageNotFoundError:
        pytest.skip("numba-cuda not installed")
    from gcnmops.normalization import device_kernels as normalize_kernels
    from gcnmops.segmentation import gpu as segment_gpu
    from gcnmops.cuda.nofma import jit_nofma
    from gcnmops.model.gpu import get_kernel

    built = [get_kernel(3, 5, False, "unroll", None), *segment_gpu.kernels(4), *normalize_kernels.kernels()]
    for kernel in built:
        assert kernel.targetoptions.get("lto") is False, kernel.py_func.__name__

    def plain(a):
        a[0] = 0.0

    with pytest.raises(ValueError, match="_nofma_"):
        jit_nofma(plain)


def test_the_backends_streams_wait_for_the_default_stream(monkeypatch):
    """A cupy backend's streams are non-blocking: each is made to wait for what this thread enqueued on its current
    stream before it (the model's constants, copied there asynchronously, behind other threads' work), so a kernel
    on it never reads them early: the suspected cause of two GATK-SV passes at once on one GPU changing calls
    (benchmarks/RESULTS.md, seventh session; not yet confirmed on a GPU). The chunk pipeline's slots and the
    resident model's streams come from ``stream()``."""
    import sys
    import types

    from gcnmops.cuda import runtime
    from gcnmops.model.chunks import ChunkPipeline

    current_work = object()  # the event recorded on the current stream

    class Stream:
        def __init__(self, non_blocking=False):
            self.non_blocking, self.waited = non_blocking, []

        def wait_event(self, event):
            self.waited.append(event)

        def record(self):
            return current_work

    current = Stream()
    cuda = types.SimpleNamespace(Stream=Stream, get_current_stream=lambda: current)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    be = object.__new__(runtime.CupyBackend)  # no GPU here: only its streams are used
    be.device_array = lambda size, dtype: np.empty(size, dtype)
    be.pinned = lambda size, dtype: np.empty(size, dtype)
    pipeline = ChunkPipeline(be, capacity=8, N=3, n=5, keep_post=False, nslots=2)
    streams = [slot.stream for slot in pipeline.slots]
    assert len(streams) == 2 and all(s.non_blocking and s.waited == [current_work] for s in streams)
