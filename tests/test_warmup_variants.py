"""After ``gcnmops warmup``, a fresh process compiles no CPU kernel, whichever path it runs first.

numba compiles a kernel once per argument types (an array with a dimension of one is typed C-contiguous, not F;
a placeholder array can be typed unlike the array it stands for) and caches each variant on disk. The child runs
the user-facing variants one by one (posteriors, norm 0/1/2 and the other normalizations, the methods of the
family, integer copy numbers, five classes, one sample, one region, case mode, a streamed run) and counts, per
variant, the cache misses of gcnmops's numba dispatchers (numba's own per-dispatcher statistics: a miss is a
compile). Any miss names the variant and the kernel that warmup left out. The check can fail: without warmup's
variant runs (a cold cache, or a kernel whose types change with the path) the child compiles.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from background import python_env

REPO = Path(__file__).resolve().parents[1]

CHILD = r'''
import json, sys, warnings
warnings.simplefilter("ignore")
import numpy as np
import gcnmops
from gcnmops.data import make_count_data
from gcnmops.example import example_cohort
from gcnmops.io.store import save_count_data
from numba.core.dispatcher import Dispatcher

def misses():
    out = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("gcnmops") and module is not None:
            for obj in list(vars(module).values()):
                if isinstance(obj, Dispatcher) and obj.stats.cache_misses:
                    out[obj.py_func.__module__ + "." + obj.py_func.__qualname__] = sum(obj.stats.cache_misses.values())
    return out

data = example_cohort(n_regions=500, n_samples=7, seed=5)[0]
cases = example_cohort(n_regions=500, n_samples=3, seed=6)[0]
one = make_count_data(cases.counts[:, 1:2], cases.sample_names[1:2], cases.ranges, min_samples=1)
five = dict(I=[0.025, 0.5, 1, 1.5, 2], classes=["CN0", "CN1", "CN2", "CN3", "CN4"])
ints = gcnmops.calc_integer_copy_numbers
lone = np.random.default_rng(4).poisson(60.0, 500).astype(float)
lone[200:260] = np.random.default_rng(5).poisson(10.0, 60)  # a deletion: something to call
ref = None
tmp = __import__("tempfile").mkdtemp()

def reference():
    global ref
    ref = ref or gcnmops.build_reference(data, genome=None, backend="cpu")
    return ref

variants = {
    "cn_mops": lambda: gcnmops.cn_mops(data, backend="cpu"),
    "posterior": lambda: gcnmops.cn_mops(data, return_posterior=True, backend="cpu"),
    "norm=0": lambda: gcnmops.cn_mops(data, norm=0, backend="cpu"),
    "norm=2": lambda: gcnmops.cn_mops(data, norm=2, backend="cpu"),
    "norm_type=mode": lambda: gcnmops.cn_mops(data, norm_type="mode", backend="cpu"),
    "norm_type=median, size_factor=quant": lambda: gcnmops.cn_mops(data, norm_type="median", size_factor="quant",
                                                                   backend="cpu"),
    "size_factor=median": lambda: gcnmops.cn_mops(data, size_factor="median", backend="cpu"),
    "five classes, posterior, integer": lambda: ints(gcnmops.cn_mops(data, return_posterior=True, **five,
                                                                     backend="cpu")),
    "exome, integer": lambda: ints(gcnmops.exome_cn_mops(data, backend="cpu")),
    "haplo, integer": lambda: ints(gcnmops.haplo_cn_mops(data, backend="cpu")),
    "reference, posterior, integer": lambda: ints(gcnmops.reference_cn_mops(cases, data, return_posterior=True,
                                                                            backend="cpu")),
    "reference, one sample": lambda: ints(gcnmops.reference_cn_mops(cases.counts[:, :1], data.counts,
                                                                    backend="cpu")),
    "single": lambda: ints(gcnmops.single_cn_mops(lone, backend="cpu")),
    "case mode": lambda: gcnmops.call_samples(cases, reference(), "frozen", integer=True, backend="cpu"),
    "case mode, one sample": lambda: gcnmops.call_samples(one, reference(), "frozen", integer=True, backend="cpu"),
    "one region": lambda: gcnmops.cn_mops(np.full((1, 5), 40.0), backend="cpu"),
    "segment": lambda: gcnmops.segment(np.random.default_rng(2).normal(size=300), alpha=2),
    "streamed": lambda: gcnmops.run_streaming(save_count_data(data, f"{tmp}/c.zarr"), f"{tmp}/out", backend="cpu"),
}
report = {}
for name, run in variants.items():
    before = misses()
    try:
        run()
    except Exception as err:
        raise SystemExit(f"{name}: {err}")
    report[name] = {k: v for k, v in misses().items() if v != before.get(k, 0)}
print(json.dumps(report))
'''


@pytest.mark.slow
def test_no_kernel_compiled_after_warmup():
    env = python_env(NUMBA_NUM_THREADS="2")
    warm = subprocess.run([sys.executable, "-m", "gcnmops", "warmup", "--backend", "cpu"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=3600)
    assert warm.returncode == 0, warm.stderr[-3000:]
    child = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=1800)
    assert child.returncode == 0, child.stderr[-3000:]
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert len(report) == 18
    compiled = {name: kernels for name, kernels in report.items() if kernels}
    assert not compiled, f"compiled after warmup (variant: kernels): {compiled}"
