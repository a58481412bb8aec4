"""Long checks that run as child processes beside the test session.

A few checks are one child process that takes a minute or more (R CMD check of the R package, the GPU code in
numba's CUDA simulator), while the session's own process mostly keeps one core busy. A test module registers
such a job with :func:`register`, under the name of the fixture its tests request; conftest.py starts the jobs
of the selected tests as soon as they are collected (:func:`start_for`), at a lower CPU priority (``nice``: they
take the cores the tests leave idle, and the whole of them while a test waits for one), and the tests wait for
the job's results. A job runs in a new folder (its output in ``output.log`` there), removed at the session's end.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Protocol

REPO = Path(__file__).resolve().parents[1]
#: the jobs' niceness: below the tests' own processes
NICE = 10


class Job:
    """A child process (its own process group) run in a new folder ``folder``, output in ``folder / "output.log"``.

    ``make_args(folder)`` writes the job's inputs there and returns its command line; ``env`` (default os.environ)
    gets this interpreter's library folder first in LD_LIBRARY_PATH (batch.python_process_env: R embedded in the
    session, e.g. at collection, leaves R's library paths there, which can hold the system's libpython).
    """

    def __init__(self, make_args: Callable[[Path], list[str]], env: dict | None = None, prefix: str = "job"):
        from gcnmops.pipeline.batch import python_process_env

        self.folder = Path(tempfile.mkdtemp(prefix=f"gcnmops-{prefix}-"))
        args = make_args(self.folder)
        if shutil.which("nice"):
            args = ["nice", "-n", str(NICE), *args]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, env=python_process_env(env), cwd=str(self.folder), stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    @property
    def log(self) -> Path:
        return self.folder / "output.log"

    def wait(self, timeout: float) -> int:
        """The exit status, once the process has ended; fails the calling test after ``timeout`` seconds."""
        import pytest

        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.proc.args} did not finish within {timeout:.0f} s:\n{self.output()[-4000:]}")

    def wait_for(self, path: Path, timeout: float) -> None:
        """Until ``path`` exists; fails the calling test if the process ends first or after ``timeout`` seconds."""
        import pytest

        deadline = time.monotonic() + timeout
        while not path.exists():
            if self.proc.poll() is not None and not path.exists():
                pytest.fail(f"{self.proc.args} exited ({self.proc.returncode}) before writing {path.name}:\n"
                            + self.output()[-4000:])
            if time.monotonic() > deadline:
                pytest.fail(f"{self.proc.args} did not write {path.name} within {timeout:.0f} s:\n"
                            + self.output()[-4000:])
            time.sleep(0.1)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        """End the process group if it still runs (a session cut short) and remove the folder."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def python_env(**extra: str) -> dict:
    """os.environ with this repository and its tests/ first in PYTHONPATH (a job's Python imports gcnmops and the
    test modules' helpers from here), and ``extra``."""
    path = os.pathsep.join(p for p in (str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, **extra)


class Stoppable(Protocol):
    def stop(self) -> None: ...


#: fixture name -> start(the selected test items that request it) -> a started job, or None (nothing to run)
_STARTERS: dict[str, Callable[[list], Stoppable | None]] = {}


def register(fixture: str, start: Callable[[list], Stoppable | None]) -> None:
    """Start ``start(items)`` when the selected tests ``items`` request the fixture ``fixture``."""
    _STARTERS[fixture] = start


def start_for(items: list) -> dict[str, Stoppable]:
    """Start the registered jobs that the test items ``items`` need; fixture name -> job."""
    jobs = {}
    for fixture, start in _STARTERS.items():
        users = [item for item in items if fixture in getattr(item, "fixturenames", ())]
        job = start(users) if users else None
        if job is not None:
            jobs[fixture] = job
    return jobs
