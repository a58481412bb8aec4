"""Where compiled kernels (numba CPU and numba-cuda GPU) are cached on disk, for any user of any install.

numba caches beside the sources (``__pycache__``) and, where that folder is not writable, in the user's cache
folder; where neither is writable (a shared read-only install used by an account without a writable HOME)
every ``cache=True`` function fails with "cannot cache function ... no locator available". ``configure()``
runs before any kernel is defined and, only in that case, points ``NUMBA_CACHE_DIR`` at the first writable
of ``$XDG_CACHE_HOME/gcnmops`` (``~/.cache/gcnmops``) and a per-user folder under the system's temporary
folder, and copies there the kernels compiled into the install (``gcnmops warmup`` of scripts/setup.sh), so
that the user does not compile them again. Where no folder can be written at all, kernels are compiled in
every process and not cached (never an error). A ``NUMBA_CACHE_DIR`` set by the user is left as it is.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
#: the package's folder as numba names its sources (not resolved: numba keys caches on the path as imported)
_SOURCES = os.path.dirname(os.path.abspath(__file__))
_KERNEL_FILES = (".nbi", ".nbc")
_CACHING = True


def _writable(folder: Path) -> bool:
    """True when files can be created in ``folder`` (created if missing)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
    except OSError:
        return False
    return True


def _in_tree_writable() -> bool:
    pycache = PACKAGE_DIR / "__pycache__"
    return _writable(pycache) if pycache.exists() else os.access(PACKAGE_DIR, os.W_OK)


def fallback_dirs() -> list[Path]:
    """The folders tried, in order, when the install's own folder is not writable."""
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    user = os.environ.get("USER") or str(os.getuid() if hasattr(os, "getuid") else "user")
    try:
        temporary = [Path(tempfile.gettempdir()) / f"gcnmops-{user}"]
    except OSError:  # no usable temporary folder at all
        temporary = []
    return [Path(xdg) / "gcnmops", *temporary]


def configure() -> str | None:
    """Set ``NUMBA_CACHE_DIR`` where numba's own locations are not writable; returns the folder chosen (None:
    numba's default, the user's setting, or no cache at all)."""
    if os.environ.get("NUMBA_CACHE_DIR") or _in_tree_writable():
        return None
    for folder in fallback_dirs():
        if _writable(folder):
            os.environ["NUMBA_CACHE_DIR"] = str(folder)
            for name in ("numba.core.config", "numba.cuda.core.config"):  # already imported: read at import
                config = sys.modules.get(name)
                if config is not None:
                    config.CACHE_DIR = str(folder)
            seed(folder)
            return str(folder)
    _without_cache()
    return None


def seed(folder: Path, sources: str = _SOURCES) -> int:
    """Copy the kernels cached in the install's ``__pycache__`` folders under ``sources`` to ``folder``, where
    numba looks for them with ``NUMBA_CACHE_DIR=folder`` (numba checks each against its source's content, so a
    stale one is recompiled, not used). Files already there are kept. Returns how many were copied."""
    copied = 0
    for pycache in sorted(Path(sources).rglob("__pycache__")):
        kernels = [f for f in pycache.iterdir() if f.suffix in _KERNEL_FILES]
        source_dir = str(pycache.parent)  # numba's UserProvidedCacheLocator.get_suitable_cache_subpath
        target = folder / f"{os.path.basename(source_dir)}_{hashlib.sha1(source_dir.encode()).hexdigest()}"
        for kernel in kernels:
            if (target / kernel.name).exists():
                continue
            try:
                target.mkdir(parents=True, exist_ok=True)
                tmp = target / f".{kernel.name}.{os.getpid()}.tmp"
                shutil.copyfile(kernel, tmp)
                os.replace(tmp, target / kernel.name)  # whole files only: other processes may read them now
            except OSError:  # a full disk: what is missing is compiled
                return copied
            copied += 1
    return copied


def caching() -> bool:
    """Whether compiled kernels can be cached on disk (False: no folder can be written, see ``configure``)."""
    return _CACHING


def compile_bytecode() -> int:
    """Byte-compile the package's modules into its ``__pycache__`` folders where that is writable, as ``pip
    install`` does; ``gcnmops warmup`` calls it for a source checkout run where Python writes no bytecode
    (``PYTHONDONTWRITEBYTECODE``): each process would compile ~190 modules from source (0.5 s on the H100
    machine). Returns how many files were compiled; a read-only install compiles none (never an error)."""
    import compileall

    before = sum(1 for _ in PACKAGE_DIR.rglob("__pycache__/*.pyc"))
    compileall.compile_dir(str(PACKAGE_DIR), quiet=2)  # quiet=2: not even the files it cannot write
    return sum(1 for _ in PACKAGE_DIR.rglob("__pycache__/*.pyc")) - before


def _without_cache() -> None:
    """No folder can be written: ``cache=True`` kernels are compiled in every process instead of failing."""
    from numba.core import caching, dispatcher

    global _CACHING
    _CACHING = False  # the GPU kernels (cuda.nofma.jit_nofma) are then compiled without cache=True
    enable = dispatcher.Dispatcher.enable_caching

    def enable_or_not(self) -> None:
        try:
            enable(self)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            self._cache = caching.NullCache()

    dispatcher.Dispatcher.enable_caching = enable_or_not
    logging.getLogger("gcnmops").warning(
        "No writable folder for compiled kernels (the install, HOME and the temporary folder are read-only): they "
        "are compiled in every run (a minute or more). Set NUMBA_CACHE_DIR to a writable folder to keep them.")
