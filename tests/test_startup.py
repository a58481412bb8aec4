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
         "gcnmops.pipeline", "gcnmops.io.readers", "gcnmops.io.writers", "gcnmops.model", "gcnmops.cuda.runtime")
#: never needed by a run on the CPU backend (numba-cuda came in through casemode's E-step before)
NOT_IN_A_CPU_RUN = ("numba.cuda", "cupy", "gcnmops.casemode", "gcnmops.model.gpu", "gcnmops.model.estep",
                    "gcnmops.segmentation.gpu", "gcnmops.normalization.gpu", "gcnmops.pipeline.resident_gpu",
                    "gcnmops.pipeline.streaming", "gcnmops.io.results", "gcnmops.io.store", "gcnmops.io.bam",
                    "matplotlib", "rpy2", "zarr", "dask")


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
    assert "gcnmops.cli" in loaded and "gcnmops.io.formats" in loaded
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
        assert value.__module__ == "gcnmops" + module, name
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
@pytest.fixture
def fake_gpu(monkeypatch):
    """A GPU as far as the probe knows: a driver library, no simulator, not probed yet; the probe and the context
    opening replaced by slow fakes that record their thread. Returns the record."""
    calls: list[tuple[str, object, int]] = []

    def slow_probe():
        calls.append(("probe", None, threading.get_ident()))
        time.sleep(0.1)
        return True

    def open_contexts(devices):
        time.sleep(0.2)
        calls.append(("contexts", devices, threading.get_ident()))

    monkeypatch.setattr(probe, "simulating", lambda: False)
    monkeypatch.setattr(probe, "driver_library_loads", lambda: True)
    monkeypatch.setattr(probe, "_PROBED", [])
    monkeypatch.setattr(probe, "_probe_gpu", slow_probe)
    monkeypatch.setattr(probe, "_open_contexts", open_contexts)
    return calls


def test_warm_up_probes_and_opens_contexts_on_another_thread_and_the_backend_waits_for_it(fake_gpu):
    warm = probe.warm_up_gpu([1])
    assert warm is not None and warm.thread.is_alive()
    assert probe.resolve_backend("gpu") == "gpu"  # waits for the warm-up's lock: the contexts are open now
    assert [c[:2] for c in fake_gpu] == [("probe", None), ("contexts", [1])]
    assert {c[2] for c in fake_gpu} == {warm.thread.ident} != {threading.get_ident()}
    warm.wait()
    assert probe.gpu_available() and len(fake_gpu) == 2  # probed once
    assert probe.warm_up_gpu() is None  # probed already: nothing started again


def test_warm_up_failing_to_open_a_context_is_dropped_and_releases_the_lock(fake_gpu, monkeypatch, caplog):
    def broken(devices):
        raise RuntimeError("CUDA_ERROR_OUT_OF_MEMORY")

    monkeypatch.setattr(probe, "_open_contexts", broken)
    with caplog.at_level("DEBUG", logger="gcnmops"):
        warm = probe.warm_up_gpu()
        warm.wait()
    assert "CUDA_ERROR_OUT_OF_MEMORY" in caplog.text  # logged, not raised: the run's own first use raises it
    assert probe._PROBE_LOCK.acquire(blocking=False)
    probe._PROBE_LOCK.release()
    assert probe.gpu_available()


def test_no_warm_up_while_another_thread_probes_or_without_a_gpu(fake_gpu, monkeypatch):
    with probe._PROBE_LOCK:  # a probe in progress elsewhere: left to it
        assert probe.warm_up_gpu() is None
    monkeypatch.setattr(probe, "driver_library_loads", lambda: False)
    assert probe.warm_up_gpu() is None
    monkeypatch.setattr(probe, "driver_library_loads", lambda: True)
    monkeypatch.setattr(probe, "simulating", lambda: True)
    assert probe.warm_up_gpu() is None
    assert fake_gpu == []


def test_no_context_opened_where_the_probe_finds_no_gpu(fake_gpu, monkeypatch):
    monkeypatch.setattr(probe, "_probe_gpu", lambda: False)
    probe.warm_up_gpu().wait()
    assert fake_gpu == [] and not probe.gpu_available()


def test_open_contexts_retains_each_named_existing_device_once(monkeypatch):
    from numba import cuda

    class Device:
        def __init__(self, k):
            self.k = k

        def get_primary_context(self):
            opened.append(self.k)

    monkeypatch.setattr(cuda, "gpus", [Device(k) for k in range(3)], raising=False)
    for devices, expected in ((None, [0]), ("all", [0, 1, 2]), (2, [2]), ([1, 1, 7, 0], [1, 0])):
        opened: list[int] = []
        probe._open_contexts(devices)
        assert opened == expected, devices


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
