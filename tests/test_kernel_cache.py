"""The one GPU kernel cache (cuda/kernels.py): every kernel built once, whatever the number of threads asking, and
every first launch of a kernel on a device (numba-cuda's compile, disk-cache load and module load) made under one
lock, so that host threads launching the same kernel at once never load it twice into a context.

- Many threads asking for the same kernels at once in numba's CUDA simulator (the session's simulator child): one
  build per (builder, key), for the stages' own getters too, and the kernel launches as numba's.
- A stand-in for a numba-cuda dispatcher whose first launch per (device, signature) loads a module without a lock,
  as numba-cuda's ``get_cufunc`` does: launched from 8 threads at once on two devices, each load happens once (the
  dispatcher launched directly, without the cache, loads twice: the check can fail).
- On a real GPU (``-m gpu``): 8 threads launching the same kernels at once, never loaded in their process, read
  from numba's disk cache (the path that raised numba-cuda's "key already in dictionary"), give the CPU's values.
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import cudasim
from background import python_env

CHILD = r'''
    import json, sys, threading, time
    import numpy as np
    from numba import cuda
    from gcnmops.cuda import kernels as kc
    from gcnmops.cuda.nofma import jit_nofma
    from gcnmops.exact.rstats import ld_mean
    from gcnmops.model import estep, gpu as model_gpu, onestep_gpu
    from gcnmops.normalization import device_kernels as nk
    from gcnmops.segmentation import device_kernels as sk

    builds = {}

    def counted(name, build):
        """``build`` counting its calls, slow enough that every other thread asks while it runs."""
        def builder(*key):
            builds[name] = builds.get(name, 0) + 1
            time.sleep(0.2)
            return build(*key)
        return builder

    # the stages' builders, counted (restored at the end: later scenarios run in this interpreter)
    patched = [(model_gpu, "_build_kernel", "em"), (estep, "_build_gpu_kernel", "estep"),
               (onestep_gpu, "_build_gpu_kernel", "onestep"), (sk, "_build_kernels", "segment_statistic")]
    originals = [getattr(module, attr) for module, attr, _ in patched]
    for (module, attr, name), build in zip(patched, originals):
        setattr(module, attr, counted(name, build))
    means_builder = counted("means", jit_nofma)
    getters = {
        "em": lambda: [model_gpu.get_kernel(3, 8, False, "unroll", None)],
        "estep": lambda: [estep._gpu_kernel(3, 5, False)],
        "onestep": lambda: [onestep_gpu._gpu_kernel(3, 5, True)],
        "segment_statistic": lambda: list(sk.kernels(4)),
        "segment_values": lambda: list(sk._segment_values_kernels()),
        "segment_prepare": lambda: [sk.prepare_kernel()],
        "normalize": lambda: list(nk.kernels()),
        "means": lambda: [kc.cached_kernel(means_builder, sk._nofma_segment_means)],
    }
    threads = 16
    barrier = threading.Barrier(threads)
    got = [None] * threads
    errors = []

    def ask(t):
        try:
            barrier.wait()
            got[t] = {name: get() for name, get in getters.items()}
        except BaseException as exc:
            errors.append(repr(exc))

    workers = [threading.Thread(target=ask, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for (module, attr, _), build in zip(patched, originals):
        setattr(module, attr, build)
    out = {"errors": errors, "builds": builds,
           "same": {name: all(all(a is b for a, b in zip(g[name], got[0][name])) for g in got)
                    for name in getters},
           "wrapped": all(isinstance(k, kc.Kernel) for g in got for ks in g.values() for k in ks)}
    # a kernel from the cache launches as numba's: the segments' means against R's mean
    (means,) = got[0]["means"]
    x = np.array([1.0, 2.0, 4.0, 0.1, 0.2, 0.3, 0.4])
    first, lens = np.array([0, 3]), np.array([3, 4])
    d_mean = cuda.device_array(2)
    means[1, 2](cuda.to_device(x), cuda.to_device(first), cuda.to_device(lens), d_mean)
    out["means"] = d_mean.copy_to_host().tolist() == [ld_mean(x[:3], 3), ld_mean(x[3:], 4)]
    json.dump(out, open(sys.argv[1] + "/result.json", "w"))
'''

SCENARIO = cudasim.register(__name__, CHILD)


@pytest.fixture(scope="module")
def sim(cuda_simulator):
    return cuda_simulator.result(SCENARIO)


def test_many_threads_get_one_build_per_kernel(sim):
    assert sim["errors"] == []
    assert sim["builds"] == {"em": 1, "estep": 1, "onestep": 1, "segment_statistic": 1, "means": 1}, sim["builds"]
    assert all(sim["same"].values()), sim["same"]  # every thread got the same kernel objects
    assert sim["wrapped"]


def test_a_cached_kernel_launches_as_numbas(sim):
    assert sim["means"]


# ------------------------------------------------------------------------- first launches, a stand-in for numba-cuda
class _RacyDispatcher:
    """Loads a "module" into the calling thread's device on the first launch of each signature there, as numba-cuda's
    ``CUDACodeLibrary.get_cufunc`` does: check, load (slowly), register; a second load of one (device, signature)
    is recorded as numba-cuda's "key already in dictionary"."""

    def __init__(self, device):
        self.device = device
        self.overloads: dict = {}
        self.modules: dict = {}
        self.twice: list = []
        self.launches = 0

    def typeof_pyval(self, value):
        return type(value).__name__

    def __getitem__(self, config):
        return self._launch

    def _launch(self, *args):
        key = (self.device(), tuple(type(a).__name__ for a in args))
        self.overloads.setdefault(key[1], True)
        if key not in self.modules:
            time.sleep(0.02)
            if key in self.modules:
                self.twice.append(key)
            self.modules[key] = True
        self.launches += 1


def _launch_from_threads(launchable, threads: int = 8, rounds: int = 5) -> None:
    barrier = threading.Barrier(threads)

    def run(t):
        _DEVICE.id = t % 2
        barrier.wait()
        for r in range(rounds):
            launchable[1, 32](1.0, r)
            launchable[1, 32](r, 2)

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


_DEVICE = threading.local()


def _as_built(dispatcher):
    """A builder handing out a made dispatcher."""
    return dispatcher


def test_first_launches_on_each_device_load_once(monkeypatch):
    from gcnmops.cuda import kernels as kc

    monkeypatch.setattr(kc, "_device_id", lambda: _DEVICE.id)
    racy = _RacyDispatcher(lambda: _DEVICE.id)
    kernel = kc.cached_kernel(_as_built, racy)
    assert isinstance(kernel, kc.Kernel) and kc.cached_kernel(_as_built, racy) is kernel
    _launch_from_threads(kernel)
    assert racy.twice == []
    assert len(racy.modules) == 4 and racy.launches == 8 * 5 * 2  # 2 devices x 2 signatures, every launch ran
    # the stand-in without the cache: the threads load the same module twice (what the check above would see)
    bare = _RacyDispatcher(lambda: _DEVICE.id)
    _launch_from_threads(bare)
    assert bare.twice


def test_kernel_forwards_the_dispatchers_attributes():
    from gcnmops.cuda.kernels import Kernel

    racy = _RacyDispatcher(lambda: 0)
    assert Kernel(racy).overloads is racy.overloads and Kernel(racy).dispatcher is racy


# ---------------------------------------------------------------------------------------------------- a real GPU
GPU_CHILD = r'''
import sys, threading
import numpy as np
from gcnmops.cuda.probe import gpu_available
from gcnmops.exact.rstats import ld_mean, median_inplace
from gcnmops.segmentation.device_kernels import _segment_values_kernels
from gcnmops.segmentation.gpu import _bits
from numba import cuda

assert gpu_available()
threads = 8
rng = np.random.default_rng(5)
segs = [rng.normal(0, 1, int(n)) for n in rng.integers(1, 60, 200)]
x = np.concatenate(segs)
lens = np.array([s.size for s in segs])
first = np.concatenate([[0], np.cumsum(lens)[:-1]])
want_mean = [ld_mean(s, s.size) for s in segs]
want_median = [median_inplace(s.copy(), s.size) for s in segs]
barrier = threading.Barrier(threads)
errors, ok = [], []

def run(t):
    try:
        with cuda.gpus[0]:
            d_x, d_first, d_len = cuda.to_device(x), cuda.to_device(first), cuda.to_device(lens)
            d_mean, d_median = cuda.device_array(len(segs)), cuda.device_array(len(segs))
            keys = _bits(d_x)
            means, medians = _segment_values_kernels()
            barrier.wait()  # every thread's first launch of both kernels at once
            means[4, 32](d_x, d_first, d_len, d_mean)
            medians[len(segs), 64](d_x, keys, d_first, d_len, d_median)
            cuda.synchronize()
            ok.append(d_mean.copy_to_host().tolist() == want_mean and d_median.copy_to_host().tolist() == want_median)
    except BaseException as exc:
        errors.append(repr(exc))

workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()
assert errors == [], errors
assert ok == [True] * threads, ok
'''


@pytest.mark.gpu
def test_threads_launching_the_same_unloaded_kernels_on_one_gpu(tmp_path):
    """8 threads launch the segments' means and medians kernels at once, in a fresh process, twice: the first
    process may compile them (numba loads what it compiles as it compiles, under its compiler lock); the second
    reads them from the disk cache and loads each on its first launch, the path where two threads loading one
    module raised numba-cuda's "key already in dictionary"."""
    from gcnmops.cuda.probe import gpu_available

    if not gpu_available():
        pytest.skip("no usable CUDA GPU")
    env = {k: v for k, v in python_env().items() if k != "NUMBA_ENABLE_CUDASIM"}
    for run in range(2):
        proc = subprocess.run([sys.executable, "-c", GPU_CHILD], capture_output=True, text=True, timeout=900,
                              env=env, cwd=Path(__file__).resolve().parents[1])
        assert proc.returncode == 0, f"run {run}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
