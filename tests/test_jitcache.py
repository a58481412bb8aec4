"""Where kernels are cached: numba's own places where private, else a private user or temporary folder."""
from __future__ import annotations

import os
from pathlib import Path

from gcnmops import jitcache


def test_user_setting_and_writable_install_are_left_alone(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert jitcache.configure() is None
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setattr(jitcache, "_in_tree_private", lambda: True)
    assert jitcache.configure() is None


def test_read_only_install_falls_back_to_a_private_user_folder(monkeypatch, tmp_path):
    """The install's folder cannot be used: ``$XDG_CACHE_HOME/gcnmops``, created 0700."""
    import os
    import stat

    import numba.core.config as config

    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(jitcache, "_in_tree_private", lambda: False)
    monkeypatch.setattr(config, "CACHE_DIR", config.CACHE_DIR)
    chosen = jitcache.configure()
    assert chosen == str(tmp_path / "xdg" / "gcnmops")
    assert stat.S_IMODE(os.stat(chosen).st_mode) == 0o700
    assert os.environ["NUMBA_CACHE_DIR"] == chosen and config.CACHE_DIR == chosen
    monkeypatch.delenv("NUMBA_CACHE_DIR")


def test_seed_copies_the_install_kernels_where_numba_looks(tmp_path):
    """The kernels compiled into a read-only install (setup.sh's warmup) are copied into the user's cache folder
    under numba's name for their source folder; files already there are kept."""
    import hashlib

    pycache = tmp_path / "pkg" / "model" / "__pycache__"
    pycache.mkdir(parents=True)
    (pycache / "cpu._fit_all-27.py311.nbi").write_bytes(b"index")
    (pycache / "cpu._fit_all-27.py311.1.nbc").write_bytes(b"code")
    (pycache / "cpu.cpython-311.pyc").write_bytes(b"bytecode")
    cache = tmp_path / "cache"
    source_dir = str(pycache.parent)
    target = cache / f"model_{hashlib.sha1(source_dir.encode()).hexdigest()}"
    target.mkdir(parents=True)
    (target / "cpu._fit_all-27.py311.nbi").write_bytes(b"the user's own")
    (pycache / "cpu._planted-9.py311.nbi").write_bytes(b"anyone could have written this")
    (pycache / "cpu._planted-9.py311.nbi").chmod(0o666)  # not copied: others can write it
    assert jitcache.seed(cache, sources=str(tmp_path / "pkg")) == 1
    assert sorted(p.name for p in target.iterdir()) == ["cpu._fit_all-27.py311.1.nbc", "cpu._fit_all-27.py311.nbi"]
    assert (target / "cpu._fit_all-27.py311.nbi").read_bytes() == b"the user's own"


def test_no_writable_folder_at_all_compiles_without_cache(tmp_path):
    """Install, HOME and every fallback read-only: kernels are compiled and run (a warning), not an error."""
    import os
    import subprocess
    import sys
    import textwrap

    module = tmp_path / "ro" / "kernel_mod.py"
    module.parent.mkdir()
    module.write_text("from numba import njit\n\n@njit(cache=True)\ndef twice(x):\n    return 2 * x\n")
    module.parent.chmod(0o555)
    script = textwrap.dedent(f"""
        import logging, os, sys
        from gcnmops import jitcache
        os.environ.pop("NUMBA_CACHE_DIR", None)
        jitcache._in_tree_private = lambda: False
        jitcache.cache_folder = lambda: None
        logging.basicConfig()
        assert jitcache.configure() is None
        from numba.core import caching  # as for a user who can write nowhere (root can write any folder)
        caching.CacheImpl._locator_classes = [caching.UserProvidedCacheLocator]
        sys.path.insert(0, {str(module.parent)!r})
        import kernel_mod
        print(kernel_mod.twice(21))
    """)
    env = {**os.environ, "HOME": "/dev/null/home", "XDG_CACHE_HOME": "/dev/null/xdg"}
    env.pop("NUMBA_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    module.parent.chmod(0o755)
    assert proc.returncode == 0 and proc.stdout.strip() == "42", proc.stderr[-2000:]
    assert "No private writable folder for compiled kernels" in proc.stderr


def _unprivileged(command: list[str]) -> list[str] | None:
    """``command`` as user nobody who can read (and traverse) everything but write only what anyone may write
    (setpriv, keeping CAP_DAC_READ_SEARCH: this interpreter may lie below a private folder); None where that
    cannot be done here."""
    import os
    import shutil
    import subprocess

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    wrapped = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=+dac_read_search",
               "--ambient-caps=+dac_read_search", *command]
    probe = subprocess.run(wrapped[:-len(command)] + ["/bin/sh", "-c", "test $(id -u) = 65534 && ! touch /x"],
                           capture_output=True)
    return wrapped if probe.returncode == 0 else None


def _plant_kernel_indexes(install: Path, cache: Path, marker: Path) -> int:
    """Index files in ``cache`` under the names numba gives the cached kernels of the package copied into
    ``install`` with ``NUMBA_CACHE_DIR=cache``, each a pickle that creates ``marker`` when loaded: what another
    user can plant in a cache folder they can write. Returns how many were planted."""
    import hashlib
    import inspect
    import pickle
    import sys

    from numba.core.dispatcher import Dispatcher
    from numba.core.caching import NullCache

    import gcnmops.pipeline.run  # noqa: F401 - every stage's kernels defined

    class Payload:
        def __reduce__(self):
            return open, (str(marker), "w")

    planted = 0
    for module in [m for name, m in list(sys.modules.items()) if name.startswith("gcnmops")]:
        for obj in list(vars(module).values()):
            kernel_cache = getattr(obj, "_cache", None) if isinstance(obj, Dispatcher) else None
            if kernel_cache is None or isinstance(kernel_cache, NullCache):
                continue
            source = Path(inspect.getfile(obj.py_func)).resolve().relative_to(jitcache.PACKAGE_DIR.parent)
            folder = str((install / source).parent)
            target = cache / f"{os.path.basename(folder)}_{hashlib.sha1(folder.encode()).hexdigest()}"
            target.mkdir(parents=True, exist_ok=True)
            (target / kernel_cache._cache_file._index_name).write_bytes(pickle.dumps(Payload()))
            planted += 1
    return planted


def test_a_read_only_install_used_by_an_unprivileged_user():
    """The package copied into a read-only folder, run as an unprivileged user whose HOME cannot be written:
    `gcnmops run --example` works, its kernels cached in a private temporary folder of the run (seeded from the
    install's compiled kernels) that is gone after it, nothing written into the install. Cache files planted by
    another user in the shared temporary folder under the name older versions used (``gcnmops-$USER``) are not
    run."""
    import os
    import shutil
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    import pytest

    scratch = Path(tempfile.mkdtemp(prefix="gcnmops-readonly-"))  # not below pytest's private folder
    scratch.chmod(0o777)
    out = scratch / "out"
    command = _unprivileged([sys.executable, "-m", "gcnmops", "run", "--example", "-o", str(out), "--backend", "cpu",
                             "--quiet"])
    if command is None:
        shutil.rmtree(scratch)
        pytest.skip("needs root and setpriv to run as an unprivileged user")
    install = scratch / "install"
    shutil.copytree(jitcache.PACKAGE_DIR, install / "gcnmops")
    before = sorted(p.relative_to(install) for p in install.rglob("*"))
    for folder, _, files in os.walk(install):
        for name in files:
            os.chmod(os.path.join(folder, name), 0o444)
        os.chmod(folder, 0o555)
    for folder, mode in (("home", 0o555), ("tmp", 0o1777)):
        (scratch / folder).mkdir()
        (scratch / folder).chmod(mode)
    planted, marker = scratch / "tmp" / "gcnmops-nobody", scratch / "tmp" / "planted-code-ran"
    assert _plant_kernel_indexes(install, planted, marker) > 10
    for folder, _, _ in os.walk(planted):
        os.chmod(folder, 0o777)  # writable by the user, as a folder they would have made: still not theirs
    planted_files = sorted(planted.rglob("*"))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch / "home"), "USER": "nobody",
           "TMPDIR": str(scratch / "tmp"), "PYTHONPATH": str(install)}
    try:
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, cwd=str(scratch))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert " files written" in proc.stdout and (out / "cnvs.tsv").is_file()
        assert not marker.exists() and sorted(planted.rglob("*")) == planted_files
        assert not [p for p in (scratch / "tmp").iterdir() if p.name.startswith("gcnmops-kernels")]  # gone
        assert sorted(p.relative_to(install) for p in install.rglob("*")) == before
    finally:
        for folder, _, _ in os.walk(install):
            os.chmod(folder, 0o755)
        shutil.rmtree(scratch)


def test_compile_bytecode_writes_the_missing_pyc_files_once(monkeypatch, tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("X = 1\n")
    (pkg / "sub" / "b.py").write_text("Y = 2\n")
    monkeypatch.setattr(jitcache, "PACKAGE_DIR", pkg)
    assert jitcache.compile_bytecode() == 2
    assert len(list(pkg.rglob("__pycache__/*.pyc"))) == 2
    assert jitcache.compile_bytecode() == 0  # up to date: nothing compiled again


def test_compile_bytecode_of_an_unwritable_package_is_not_an_error(monkeypatch, tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("X = 1\n")
    (pkg / "__pycache__").write_text("a file where the folder should be\n")  # no folder can be made there
    monkeypatch.setattr(jitcache, "PACKAGE_DIR", pkg)
    assert jitcache.compile_bytecode() == 0
