"""The CUDA-simulator scenarios of the test files, run in one child Python per test session.

numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1) must be on before numba is imported, so GPU code without a GPU
runs in a child process. A test file registers its scenario at import with :func:`register` (a script, and a
function writing the script's inputs, if any) and its tests request the fixture ``cuda_simulator`` (conftest.py).
The session's child, a background job (background.py) started once the tests are collected, runs the scenarios
of the selected tests one after another in one interpreter (numba, the simulator and gcnmops imported once), in
the tests' order, each as ``__main__`` with ``sys.argv = [script, folder]``: it writes what its tests read (e.g.
``result.json``) into its own folder. ``Simulator.wait(__name__)`` waits for the calling module's scenario and
fails its tests with the scenario's traceback if it raised.
"""
from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Callable

import background

#: module name -> (script, prepare(folder) or None)
_SCENARIOS: dict[str, tuple[str, Callable[[Path], None] | None]] = {}

# Each scenario in a fresh namespace; what one scenario leaves in gcnmops's GPU probe (a scenario may mark the
# simulator as a found device) is undone before the next. "done" marks a scenario finished, "error.txt" failed.
_RUNNER = textwrap.dedent(r'''
    import runpy, sys, traceback
    from pathlib import Path
    from gcnmops.cuda import probe
    from gcnmops.cuda.runtime import simulating
    assert simulating(), "the CUDA simulator is not on"
    for folder in sys.argv[1:]:
        d = Path(folder)
        probed, available = list(probe._PROBED), probe.gpu_available
        try:
            sys.argv = [str(d / "scenario.py"), str(d)]
            runpy.run_path(sys.argv[0], run_name="__main__")
        except BaseException:
            (d / "error.txt").write_text(traceback.format_exc())
        finally:
            probe._PROBED[:] = probed
            probe.gpu_available = available
            sys.stdout.flush()
            sys.stderr.flush()
            (d / "done").touch()
''')


def register(module: str, script: str, prepare: Callable[[Path], None] | None = None) -> str:
    """Register the scenario of the test module ``module`` (its ``__name__``); returns ``module``."""
    _SCENARIOS[module] = (textwrap.dedent(script), prepare)
    return module


class Simulator:
    """The child running the scenarios ``names`` (module names), each in ``job.folder / name``."""

    def __init__(self, names: list[str]):
        self.names = list(names)
        self.job = background.Job(self._prepare, background.python_env(NUMBA_ENABLE_CUDASIM="1"), prefix="cudasim")

    def _prepare(self, work: Path) -> list[str]:
        for name in self.names:
            script, prepare = _SCENARIOS[name]
            (work / name).mkdir()
            (work / name / "scenario.py").write_text(script)
            if prepare is not None:
                prepare(work / name)
        return [sys.executable, "-c", _RUNNER, *(str(work / name) for name in self.names)]

    def wait(self, name: str, timeout: float = 1500.0) -> Path:
        """The folder of scenario ``name`` once it has run; fails if it raised or the child died first."""
        import pytest

        assert name in self.names, f"no scenario {name} was started (is it registered with cudasim.register?)"
        d = self.job.folder / name
        self.job.wait_for(d / "done", timeout)
        if (d / "error.txt").exists():
            pytest.fail(f"the simulator scenario {name} raised:\n{(d / 'error.txt').read_text()[-6000:]}\n"
                        f"child output:\n{self.job.output()[-4000:]}")
        return d

    def result(self, name: str) -> dict:
        """The JSON object scenario ``name`` wrote to ``result.json``."""
        return json.loads((self.wait(name) / "result.json").read_text())

    def stop(self) -> None:
        self.job.stop()


def _start(items: list) -> Simulator | None:
    """The simulator on the registered scenarios of the modules of ``items``, in their order."""
    names = []
    for item in items:
        module = getattr(getattr(item, "module", None), "__name__", None)
        if module in _SCENARIOS and module not in names:
            names.append(module)
    return Simulator(names) if names else None


background.register("cuda_simulator", _start)
