"""``gcnmops info``'s CUDA lines: which driver, CuPy and numba-cuda are installed, and what to install when they
disagree (gcnmops[cuda12] / gcnmops[cuda13]); the extras name one CUDA version each."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gcnmops.cuda.install import CudaStack, advice, extra_for, report

CU13 = {"numba-cuda": "0.30.4", "cuda-bindings": "13.5.0", "nvidia-cuda-runtime": "13.5.37"}
CU12 = {"numba-cuda": "0.30.4", "cuda-bindings": "12.9.2", "nvidia-cuda-runtime-cu12": "12.9.79"}


def test_an_agreeing_stack_needs_nothing():
    assert advice(CudaStack((13, 0), None, {**CU13, "cupy-cuda13x": "14.2.0"})) == []
    assert advice(CudaStack((12, 8), None, {**CU12, "cupy-cuda12x": "13.6.0"})) == []
    assert report(CudaStack((13, 0), "580.159.04", {**CU13, "cupy-cuda13x": "14.2.0"}))[-1].endswith("gcnmops[cuda13]")


@pytest.mark.parametrize("driver, packages, expected", [
    # the case: gcnmops[gpu] gave cupy-cuda12x beside cuda-bindings 13
    ((13, 0), {**CU13, "cupy-cuda12x": "14.2.0"}, "pip uninstall cupy-cuda12x, then pip install 'gcnmops[cuda13]'"),
    ((12, 4), {**CU13, "cupy-cuda13x": "14.2.0"}, "pip uninstall cupy-cuda13x, then pip install 'gcnmops[cuda12]'"),
    ((13, 0), {**CU13, "cupy-cuda12x": "1", "cupy-cuda13x": "14"}, "pip uninstall cupy-cuda12x"),
    ((13, 1), {"numba": "0.68.1"}, "CuPy, numba-cuda, the CUDA bindings missing): pip install 'gcnmops[cuda13]'"),
    ((11, 8), {}, "update the driver"),
])
def test_disagreements_say_what_to_install(driver, packages, expected):
    fixes = advice(CudaStack(driver, None, packages))
    assert any(expected in line for line in fixes), fixes


def test_the_newest_extra_the_driver_supports():
    assert [extra_for(d) for d in [(11, 8), (12, 0), (12, 9), (13, 0), (14, 1), None]] == [None, 12, 12, 13, 13, None]


def test_the_extras_name_one_cuda_version_each():
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    for major in (12, 13):
        line = re.search(rf"(?m)^cuda{major} = \[(.*)\]$", text).group(1)
        assert f"numba-cuda[cu{major}]" in line and f"cupy-cuda{major}x" in line
        assert not re.search(rf"cu(da)?{25 - major}", line)  # nothing of the other version


def test_info_names_the_driver_and_the_packages():
    proc = subprocess.run([sys.executable, "-m", "gcnmops", "info"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"(?m)^CUDA driver: (none found|supports CUDA \d+\.\d+)", proc.stdout)
    assert re.search(r"(?m)^CUDA packages: ", proc.stdout)


def test_numba_cuda_installed_but_not_active_is_said(monkeypatch):
    """numba-cuda present but its numba.cuda redirect not run (its folder on PYTHONPATH, not a site dir): no GPU,
    and a requested GPU backend says why and what to do, instead of a traceback from numba's retired target."""
    import importlib.util

    from gcnmops.cuda import probe
    from gcnmops.errors import InputError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "numba.cuda.core" else real(name, *a))
    probe.why_not_numba_cuda.cache_clear()
    monkeypatch.setattr(probe, "_PROBED", [])
    monkeypatch.setattr(probe, "driver_library_loads", lambda: True)
    monkeypatch.setattr(probe, "simulating", lambda: False)
    try:
        why = probe.why_not_numba_cuda()
        assert why and "redirect" in why and "site.addsitedir" in why
        assert probe.gpu_count() == 0
        with pytest.raises(InputError, match="numba-cuda is installed but not active"):
            probe.resolve_backend("gpu")
        from gcnmops.cuda import install

        agreeing = CudaStack((13, 0), "580.159.04", {**CU13, "cupy-cuda13x": "14.2.0"})
        monkeypatch.setattr(install, "installed", lambda: agreeing)
        lines = report()  # gcnmops info: the reason among its "to do" lines, not "they agree"
        assert f"  to do: {why}" in lines and not any("agree" in line for line in lines)
    finally:
        probe.why_not_numba_cuda.cache_clear()
