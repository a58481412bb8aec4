"""The one-time "compiling kernels" line: jitcache.kernels_cached looks at the kernel cache's index files, for the
CPU's kernels and the GPU's (named ``_nofma_``) apart; a run whose cache is cold says so once on stderr
(end to end from a fresh install: tests/test_wheel.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys


def _cached(cache_dir, files: list[str]) -> dict:
    script = f"""
import hashlib, json, os, pathlib
from gcnmops import jitcache
model = os.path.dirname(jitcache._SOURCES + "/model/")
target = pathlib.Path({str(cache_dir)!r}) / f"model_{{hashlib.sha1(model.encode()).hexdigest()}}"
target.mkdir(parents=True, exist_ok=True)
for name in {files!r}:
    (target / name).write_bytes(b"")
print(json.dumps({{"cpu": jitcache.kernels_cached(gpu=False), "gpu": jitcache.kernels_cached(gpu=True)}}))
"""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_cold_and_warm_caches_per_backend(tmp_path):
    for k, (files, expected) in enumerate([
        ([], {"cpu": False, "gpu": False}),
        (["cpu._fit_all-33.py311.nbi"], {"cpu": True, "gpu": False}),
        (["gpu._build_kernel._nofma_em_kernel-70.py311.nbi", "cpu._fit_all-33.py311.nbc"], {"cpu": False, "gpu": True}),
    ]):
        cache = tmp_path / f"cache{k}"
        cache.mkdir(mode=0o700)
        assert _cached(cache, files) == expected, files


def test_the_line_is_printed_once_and_not_with_quiet(tmp_path):
    """A cold cache: the line on stderr before the run; --quiet prints nothing (test_cli_meta's quiet run)."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    script = """
import sys
from types import SimpleNamespace
from gcnmops import cli
cli._announce_compiling(SimpleNamespace(quiet=False), None)
cli._announce_compiling(SimpleNamespace(quiet=True), None)
"""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout == ""
    assert proc.stderr.count("compiling kernels (once per machine, ~") == 1, proc.stderr
