"""A fresh process's fixed cost (issue 14): what ``import gcnmops``, the command line's help and a CPU run load,
and the GPU warm-up that overlaps the CUDA driver's start with a run's imports and input read.

The import checks run in child interpreters (this process has loaded everything already) and assert which
modules are NOT loaded: each one listed here was loaded before the lazy imports, so a module-level import
added back upstream fails them.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import gcnmops
from gcnmops.cuda import probe

#: loaded by ``import gcnmops`` before (pandas 0.3 s, numba + numba-cuda 0.4 s, pyarrow through pandas, casemode
#: and the whole pipeline); none is needed by ``--help``, ``--version`` or a refused option
HEAVY = ("pandas", "pyarrow", "numba", "numba.cuda", "llvmlite", "scipy", "pysam", "tqdm", "gcnmops.casemode",
         "gcnmops.pipeline", "gcnmops.io.readers", "gcnmops.outputs.writers", "gcnmops.model",
         "gcnmops.cuda.runtime")
#: never needed by a run on the CPU backend (numba-cuda came in through casemode's E-step before)
NOT_IN_A_CPU_RUN = ("numba.cuda", "cupy", "gcnmops.casemode", "gcnmops.model.gpu", "gcnmops.model.estep",
                    "gcnmops.segmentation.gpu", "gcnmops.normalization.gpu", "gcnmops.pipeline.resident_gpu",
                    "gcnmops.pipeline.streaming", "gcnmops.outputs.results", "gcnmops.outputs.resultstore",
                    "gcnmops.io.store", "gcnmops.alignments.bam", "matplotlib", "rpy2", "zarr", "dask")


def _loaded_after(code: str, tmp_path: Path) -> set[str]:
    """The modules loaded in a fresh interpreter (no CUDA simulator) after running ``code``."""
    report = tmp_path / "modules.json"
    script = f"import json, sys\n{code}\nopen({str(report)!r}, 'w').write(json.dumps(sorted(sys.modules)))\n"
    env = {k: v for k, v in __import__("os").environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(report.read_text()))


def test_import_gcnmops_loads_no_heavy_library(tmp_path):
    loaded = _loaded_after("import gcnmops", tmp_path)
    assert "gcnmops" in loaded and "numpy" in loaded  # the child really imported the package
    assert sorted(m for m in HEAVY if m in loaded) == []


def test_help_and_a_refused_option_load_no_heavy_library(tmp_path):
    code = """
from gcnmops.cli import main
for argv in (["--help"], ["run", "--help"], ["run", "--example", "-o", "out", "--method", "nope"]):
    try:
        main(argv)
    except SystemExit:
        pass
"""
    loaded = _loaded_after(code, tmp_path)
    assert "gcnmops.cli" in loaded and "gcnmops.outputs.formats" in loaded
    assert sorted(m for m in HEAVY if m in loaded) == []


def test_a_cpu_run_loads_no_gpu_or_unused_module(tmp_path):
    code = """
from gcnmops.cli import main
assert main(["run", "--example", "-o", "out", "--backend", "cpu", "--quiet"]) == 0
"""
    loaded = _loaded_after(code, tmp_path)
    assert (tmp_path / "out" / "params.json").exists()  # it did run
    assert {"pandas", "numba", "gcnmops.pipeline.run"} <= loaded
    assert sorted(m for m in NOT_IN_A_CPU_RUN if m in loaded) == []


def test_no_driver_library_means_no_gpu_without_loading_numba_cuda(tmp_path):
    code = """
import ctypes
from gcnmops.cuda import probe
def refuse(name, *a, **k):
    raise OSError(f"{name}: cannot open shared object file")
ctypes.CDLL = refuse
probe.driver_library_loads.cache_clear()
assert probe.gpu_count() == 0 and not probe.gpu_available() and probe.warm_up_gpu() is None
assert probe.resolve_backend("auto") == "cpu"
"""
    if not sys.platform.startswith("linux"):
        pytest.skip("the driver library check is Linux's")
    loaded = _loaded_after(code, tmp_path)
    assert "gcnmops.cuda.probe" in loaded and "numba.cuda" not in loaded


# ------------------------------------------------------------------------------------------- public names
def _type_checking_imports() -> dict[str, str]:
    """name -> module of the ``if TYPE_CHECKING:`` imports of gcnmops/__init__.py."""
    tree = ast.parse(Path(gcnmops.__file__).read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    return {a.name: "." + n.module for n in block.body if isinstance(n, ast.ImportFrom) for a in n.names}


def test_every_public_name_resolves_to_its_module():
    assert _type_checking_imports() == gcnmops._EXPORTS  # what type checkers see is what is exported
    assert sorted(gcnmops.__all__) == sorted(gcnmops._EXPORTS)
    for name, module in gcnmops._EXPORTS.items():
        value = getattr(gcnmops, name)
        home = "gcnmops" + module  # the module named, or (a stage package's entry) one of its modules
        assert value.__module__ == home or value.__module__.startswith(home + "."), name
    assert set(gcnmops.__all__) <= set(dir(gcnmops))
    from gcnmops import Reference, cn_mops  # noqa: F401 - `from gcnmops import name` goes through __getattr__


def test_submodules_are_attributes_and_unknown_names_are_attribute_errors():
    assert gcnmops.casemode.build_reference is gcnmops.build_reference
    assert gcnmops.io.read_counts is gcnmops.read_counts
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        gcnmops.no_such_name  # noqa: B018
    with pytest.raises(AttributeError):
        gcnmops.io.no_such_name  # noqa: B018
    assert not hasattr(gcnmops, "_private")


# ------------------------------------------------------------------------------------------- GPU warm-up
class FakeDriver:
    """cuda-python's ``cuda.bindings.driver`` as the warm-up uses it: each call returns (CUresult, value...) and is
    recorded with its thread; ``fail``: the call that returns an error."""

    class CUresult:
        CUDA_SUCCESS = 0
        CUDA_ERROR_NO_DEVICE = 100

    def __init__(self, n_devices: int = 3, fail: str | None = None):
        self.n, self.fail, self.calls = n_devices, fail, []

    def _call(self, name, *args, value=None):
        self.calls.append((name, args, threading.get_ident()))
        if name == "cuInit":
            time.sleep(0.1)  # the driver's start takes a while: the caller goes on meanwhile
        if name == self.fail:
            return (self.CUresult.CUDA_ERROR_NO_DEVICE,) + (() if value is None else (None,))
        return (self.CUresult.CUDA_SUCCESS,) + (() if value is None else (value,))

    def cuDriverGetVersion(self):
        return self._call("cuDriverGetVersion", value=13000)

    def cuInit(self, flags):
        return self._call("cuInit", flags)

    def cuDeviceGetCount(self):
        return self._call("cuDeviceGetCount", value=self.n)

    def cuDeviceGet(self, ordinal):
        return self._call("cuDeviceGet", ordinal, value=f"dev{ordinal}")

    def cuDevicePrimaryCtxRetain(self, dev):
        return self._call("cuDevicePrimaryCtxRetain", dev, value=f"ctx-{dev}")


@pytest.fixture
def fake_driver(monkeypatch):
    """A machine with a GPU driver as far as warm_up_gpu can tell, its binding replaced by a FakeDriver."""
    driver = FakeDriver()
    monkeypatch.setattr(probe, "simulating", lambda: False)
    monkeypatch.setattr(probe, "driver_library_loads", lambda: True)
    monkeypatch.setattr(probe, "_PROBED", [])
    monkeypatch.setitem(sys.modules, "cuda.bindings", type(sys)("cuda.bindings"))
    sys.modules["cuda.bindings"].driver = driver
    return driver


def test_warm_up_starts_the_driver_and_retains_the_named_contexts_on_another_thread(fake_driver):
    t0 = time.perf_counter()
    warm = probe.warm_up_gpu([2, 0, 2, 9])
    assert time.perf_counter() - t0 < 0.1 and warm.thread.is_alive()  # cuInit (0.1 s) runs on the thread
    warm.wait()
    names = [c[0] for c in fake_driver.calls]
    assert names == ["cuDriverGetVersion", "cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDevicePrimaryCtxRetain",
                     "cuDeviceGet", "cuDevicePrimaryCtxRetain"]
    retained = [c[1] for c in fake_driver.calls if c[0] == "cuDevicePrimaryCtxRetain"]
    assert retained == [("dev2",), ("dev0",)]  # each existing device named, once; 9 is the run's to refuse
    main, thread = threading.get_ident(), warm.thread.ident
    assert fake_driver.calls[0][2] == main  # the library is loaded on the calling thread, before the thread starts
    assert {c[2] for c in fake_driver.calls[1:]} == {thread} != {main}
    assert probe._PROBED == []  # the probe is not made: numba-cuda makes it on the run's thread, as before


@pytest.mark.parametrize("fail", ["cuInit", "cuDeviceGetCount", "cuDevicePrimaryCtxRetain"])
def test_a_failing_driver_call_ends_the_warm_up_quietly(fake_driver, fail, caplog):
    fake_driver.fail = fail
    with caplog.at_level("DEBUG", logger="gcnmops"):
        probe.warm_up_gpu("all").wait()  # no exception: the run's own first GPU use meets the error, reports it
    assert f"GPU warm-up stopped: {fail}" in caplog.text
    names = [c[0] for c in fake_driver.calls]
    assert names[-1] == fail and names.count(fail) == 1  # nothing after the failing call


def test_no_warm_up_without_a_usable_driver_binding_or_in_the_simulator(fake_driver, monkeypatch):
    fake_driver.fail = "cuDriverGetVersion"
    assert probe.warm_up_gpu() is None
    monkeypatch.setattr(probe, "simulating", lambda: True)
    assert probe.warm_up_gpu() is None
    monkeypatch.setattr(probe, "simulating", lambda: False)
    monkeypatch.setattr(probe, "driver_library_loads", lambda: False)
    assert probe.warm_up_gpu() is None
    assert [c[0] for c in fake_driver.calls] == ["cuDriverGetVersion"]  # nothing started
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # numba-cuda without cuda-python
    monkeypatch.setattr(probe, "driver_library_loads", lambda: True)
    assert probe.warm_up_gpu() is None


def test_the_real_binding_without_a_driver_ends_quietly(caplog):
    driver = pytest.importorskip("cuda.bindings.driver")
    if probe.driver_library_loads():
        pytest.skip("a CUDA driver is installed here")
    with caplog.at_level("DEBUG", logger="gcnmops"):
        probe._start_driver(driver, None)
    assert "GPU warm-up stopped" in caplog.text


def test_device_ids():
    assert probe._device_ids(None, 2) == [0] and probe._device_ids(None, 0) == []
    assert probe._device_ids("all", 3) == [0, 1, 2] and probe._device_ids(1, 3) == [1]
    assert probe._device_ids([1, 1, 7, 0], 3) == [1, 0]


def test_run_waits_for_the_warm_up_after_reading_and_before_the_run(monkeypatch, tmp_path):
    """The command line starts the warm-up first (--backend auto/gpu, not cpu) and waits for it after reading
    its input, before the run's first GPU work."""
    from gcnmops import cli
    from gcnmops.pipeline import run as run_module

    events = []

    class Warm:
        def wait(self):
            events.append("wait")

    def warm_up(devices=None):
        events.append(("warm_up", devices))
        return Warm()

    real_read, real_run = cli._read_input, run_module.run_and_write
    monkeypatch.setattr(probe, "warm_up_gpu", warm_up)
    monkeypatch.setattr(cli, "_read_input", lambda *a: events.append("read") or real_read(*a))
    monkeypatch.setattr(run_module, "run_and_write", lambda *a, **k: events.append("run") or real_run(*a, **k))
    assert cli.main(["run", "--example", "-o", str(tmp_path / "a"), "--backend", "auto", "--quiet"]) == 0
    assert events == [("warm_up", None), "read", "wait", "run"]
    events.clear()
    assert cli.main(["run", "--example", "-o", str(tmp_path / "b"), "--backend", "cpu", "--quiet"]) == 0
    assert events == ["read", "run"]
