"""The install a new user makes: the sdist and wheel built with ``python -m build`` install into a fresh virtual
environment with plain pip and run ``gcnmops run --example`` there, saying once that the kernels are compiled;
a subset of the tests passes against the installed package (scripts/check_wheel.sh, a background job from the
session's start: building, installing and a first compile take minutes)."""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import tarfile
import zipfile

import pytest

import background
import gcnmops

REPO = background.REPO


def _start(items) -> background.Job | None:
    if importlib.util.find_spec("build") is None:
        return None
    return background.Job(lambda folder: ["bash", str(REPO / "scripts" / "check_wheel.sh"), str(folder / "w")],
                          dict(os.environ, PYTHON=sys.executable), prefix="wheel")


background.register("wheel_check", _start)


@pytest.fixture
def wheel_check(background_jobs) -> background.Job | None:
    return background_jobs.get("wheel_check")


@pytest.mark.slow
def test_the_wheel_installs_into_a_fresh_venv_and_runs_the_example(wheel_check):
    if wheel_check is None:
        pytest.skip("python -m build is not installed here (pip install build)")
    code = wheel_check.wait(2400)
    out = wheel_check.output()
    assert code == 0 and "check_wheel: ok" in out, out[-6000:]
    work = wheel_check.folder / "w"
    assert "compiling kernels (once per machine" in (work / "run1.err").read_text()
    assert (work / "run2.err").read_text() == ""  # the second run loads what the first compiled: nothing said
    made = json.loads((work / "example1" / "params.json").read_text())["provenance"]
    assert made["gcnmops"] == gcnmops.__version__ and made["command"].startswith("gcnmops run --example")

    wheel, = (work / "dist").glob(f"gcnmops-{gcnmops.__version__}-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {"gcnmops/version.py", "gcnmops/py.typed", "gcnmops/example.py"} <= set(names)
    assert {f"gcnmops-{gcnmops.__version__}.dist-info/licenses/{n}" for n in ("LICENSE", "COPYING")} <= set(names)
    sdist, = (work / "dist").glob(f"gcnmops-{gcnmops.__version__}.tar.gz")
    with tarfile.open(sdist) as tar:
        inside = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"LICENSE", "COPYING", "CHANGELOG.md", "CITATION.cff", "pyproject.toml", "gcnmops/version.py"} <= inside
