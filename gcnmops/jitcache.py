"""Where compiled kernels (numba CPU and numba-cuda GPU) are cached on disk, for any user of any install.

numba caches beside the sources (``__pycache__``) and, where that folder is not writable, in the user's cache
folder; where neither is writable (a shared read-only install used by an account without a writable HOME)
every ``cache=True`` function fails with "cannot cache function ... no locator available". A cache file is
code that numba runs when it loads it, so a kernel cache must be a folder no one else can write.
``configure()`` runs before any kernel is defined and keeps numba's own choice only where that is such a
private folder: a ``NUMBA_CACHE_DIR`` set by the user, else the install's ``__pycache__``. Otherwise it
points ``NUMBA_CACHE_DIR`` at ``$XDG_CACHE_HOME/gcnmops`` (``~/.cache/gcnmops``, created 0700), else at a new
private temporary folder of this process (removed at exit; never a predictable shared name), and copies there
the kernels compiled into the install (``gcnmops warmup`` of scripts/setup.sh), so that the user does not
compile them again. A folder is private when it is a folder of this user's that group and others cannot
write (``private_folder``); any other is never used. Where no such folder can be had, kernels are compiled in
every process and not cached. A damaged cache file (truncated, garbage) is a miss: the kernel is compiled
again (``tolerate_damaged``), never an error.
"""
from __future__ import annotations

import atexit
import hashlib
import importlib.abc
import importlib.util
import logging
import os
import shutil
import stat
import sys
import tempfile
import types
from collections.abc import Callable
from pathlib import Path

from .files import remove_stale, temp_folder

PACKAGE_DIR = Path(__file__).resolve().parent
#: the package's folder as numba names its sources (not resolved: numba keys caches on the path as imported)
_SOURCES = os.path.dirname(os.path.abspath(__file__))
_KERNEL_FILES = (".nbi", ".nbc")
_CACHING = True
#: this process's temporary kernel cache (``cache_folder``), and the stem of such folders' names
_TEMPORARY: Path | None = None
_TEMP_STEM = "gcnmops-kernels"
log = logging.getLogger("gcnmops")


def _writable(folder: Path) -> bool:
    """True when files can be created in the existing folder ``folder``."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
    except OSError:
        return False
    return True


def _trusted(st: os.stat_result, owners: tuple[int, ...]) -> bool:
    return st.st_uid in owners and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def private_folder(folder: Path, create: bool = True) -> bool:
    """True when ``folder`` is a writable folder of this user's that group and others cannot write (made 0700,
    its parents as the umask says, where missing and ``create``): the only kind used as a kernel cache."""
    folder = Path(folder)
    if create and not folder.exists():
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            folder.mkdir(mode=0o700)
        except OSError:
            return False
    try:
        st = folder.stat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and _trusted(st, (os.geteuid(),)) and _writable(folder)


def _in_tree_private() -> bool:
    """Whether numba would cache beside the sources in a private folder (see ``private_folder``)."""
    pycache = PACKAGE_DIR / "__pycache__"
    if pycache.exists():
        return private_folder(pycache, create=False)
    return os.access(PACKAGE_DIR, os.W_OK) and private_folder(PACKAGE_DIR, create=False)


def user_cache_dir() -> Path | None:
    """``$XDG_CACHE_HOME/gcnmops`` (default ``~/.cache/gcnmops``); None without a usable home."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(xdg):  # unset, or relative: the XDG spec says to ignore it
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        xdg = os.path.join(home, ".cache")
    return Path(xdg) / "gcnmops"


def cache_folder() -> Path | None:
    """The kernel cache when numba's own places are not private: ``user_cache_dir()`` if private (created 0700
    if missing), else a new private temporary folder of this process, removed at exit (``remove_temporary``;
    those of processes killed outright by the next one); None where neither can be had."""
    global _TEMPORARY
    folder = user_cache_dir()
    if folder is not None and private_folder(folder):
        return folder
    if _TEMPORARY is not None:
        return _TEMPORARY
    try:
        parent = Path(tempfile.gettempdir())
        remove_stale(parent, stem=_TEMP_STEM)
        folder = temp_folder(parent / _TEMP_STEM, stem=_TEMP_STEM)
    except OSError:  # no usable temporary folder at all
        return None
    _TEMPORARY = folder
    atexit.register(remove_temporary)
    return folder


def remove_temporary() -> None:
    """Remove this process's temporary kernel cache (``cache_folder``), if it made one."""
    global _TEMPORARY
    if _TEMPORARY is not None:
        shutil.rmtree(_TEMPORARY, ignore_errors=True)
        _TEMPORARY = None


def configure() -> str | None:
    """Choose where kernels are cached (module docstring): returns the folder set as ``NUMBA_CACHE_DIR`` (None:
    numba's own choice, a private folder, or no cache at all)."""
    _tolerate_damaged_cpu()
    given = os.environ.get("NUMBA_CACHE_DIR")
    if given:
        if private_folder(Path(given)):
            return None
        log.warning(f"NUMBA_CACHE_DIR={given} is not a private folder of yours (one that only you can write, "
                    "as compiled kernels are code that is run): it is not used.")
    elif _in_tree_private():
        return None
    folder = cache_folder()
    _set_cache_dir("" if folder is None else str(folder))
    if folder is None:
        _without_cache()
        return None
    seed(folder)
    return str(folder)


def _set_cache_dir(folder: str) -> None:
    os.environ["NUMBA_CACHE_DIR"] = folder
    for name in ("numba.core.config", "numba.cuda.core.config"):  # already imported: read at import
        config = sys.modules.get(name)
        if config is not None:
            config.CACHE_DIR = folder


def seed(folder: Path, sources: str = _SOURCES) -> int:
    """Copy the kernels cached in the install's ``__pycache__`` folders under ``sources`` to ``folder``, where
    numba looks for them with ``NUMBA_CACHE_DIR=folder`` (numba checks each against its source's content, so a
    stale one is recompiled, not used). Only files that this user or root owns and no one else can write, in
    such folders, are copied; files already there are kept. Returns how many were copied."""
    copied = 0
    owners = (os.geteuid(), 0)
    for pycache in sorted(Path(sources).rglob("__pycache__")):
        try:
            if not _trusted(pycache.lstat(), owners) or not pycache.is_dir():
                continue
            kernels = [f for f in pycache.iterdir() if f.suffix in _KERNEL_FILES]
        except OSError:
            continue
        source_dir = str(pycache.parent)  # numba's UserProvidedCacheLocator.get_suitable_cache_subpath
        target = folder / f"{os.path.basename(source_dir)}_{hashlib.sha1(source_dir.encode()).hexdigest()}"
        for kernel in kernels:
            try:
                st = kernel.lstat()
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or not _trusted(st, owners) or (target / kernel.name).exists():
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


def tolerate_damaged(cache_file_class) -> None:
    """Make numba's cache files of ``cache_file_class`` (an ``IndexDataCacheFile``: numba's and numba-cuda's)
    read a damaged index or data file (truncated, garbage) as a miss: the kernel is compiled again and its
    entry rewritten, instead of an error; an entry that cannot be written (a folder in the way of its file, a
    full disk) is left unwritten: the kernel just compiled is used all the same. Once per class."""
    if getattr(cache_file_class, "_gcnmops_tolerant", False):
        return
    load_index, load_data, save = cache_file_class._load_index, cache_file_class._load_data, cache_file_class.save

    def _load_index(self):
        try:
            return load_index(self)
        except Exception:  # anything unpickling garbage raises
            return {}

    def _load_data(self, name):
        try:
            return load_data(self, name)
        except Exception:
            return None

    def _save(self, key, data):
        try:
            save(self, key, data)
        except OSError:  # numba removed its temporary file
            pass

    cache_file_class._load_index, cache_file_class._load_data = _load_index, _load_data
    cache_file_class.save = _save
    cache_file_class._gcnmops_tolerant = True


def _tolerate_damaged_cpu() -> None:
    """``tolerate_damaged`` for numba's CPU cache files, as soon as numba's caching module is imported (now if it
    is; else right after its import, so that ``import gcnmops`` does not load numba)."""
    name = "numba.core.caching"
    if name in sys.modules:
        tolerate_damaged(sys.modules[name].IndexDataCacheFile)
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, lambda module: tolerate_damaged(module.IndexDataCacheFile)))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``then(module)`` once the module ``name`` has been imported (by whoever imports it), then leaves."""

    def __init__(self, name: str, then: Callable[[types.ModuleType], None]):
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenLoader(spec.loader, self.then)
        return spec


class _ThenLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, then: Callable[[types.ModuleType], None]):
        self.loader, self.then = loader, then

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        self.then(module)


def kernels_cached(gpu: bool = False) -> bool:
    """Whether the kernel cache already holds compiled kernels of gcnmops for the CPU (``gpu=False``) or the GPU
    (the exact GPU kernels carry ``_nofma_`` in their names): a look at the cache's index files (``.nbi``) of
    the package's source folders, in the install (``__pycache__``) or under ``NUMBA_CACHE_DIR``, without
    loading numba. True where nothing is cached at all (``caching()`` False: ``configure`` said so already)."""
    if not _CACHING or os.environ.get("NUMBA_CACHE_DIR") == "":
        return True
    cache = os.environ.get("NUMBA_CACHE_DIR")
    for root, dirs, _ in os.walk(_SOURCES):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        folder = (Path(cache) / f"{os.path.basename(root)}_{hashlib.sha1(root.encode()).hexdigest()}" if cache
                  else Path(root) / "__pycache__")
        try:
            names = [n for n in os.listdir(folder) if n.endswith(".nbi")]
        except OSError:
            continue
        if any(("_nofma_" in n) == gpu for n in names):
            return True
    return False


def caching() -> bool:
    """Whether compiled kernels can be cached on disk (False: no folder can be written, see ``configure``)."""
    return _CACHING


def compile_bytecode() -> int:
    """Byte-compile the package's modules into its ``__pycache__`` folders where that is writable, as ``pip
    install`` does; ``gcnmops warmup`` calls it for a source checkout run where Python writes no bytecode
    (``PYTHONDONTWRITEBYTECODE``): each process would compile every module from source. Returns how many files were compiled; a read-only install compiles none (never an error)."""
    import compileall

    before = sum(1 for _ in PACKAGE_DIR.rglob("__pycache__/*.pyc"))
    compileall.compile_dir(str(PACKAGE_DIR), quiet=2)  # quiet=2: not even the files it cannot write
    return sum(1 for _ in PACKAGE_DIR.rglob("__pycache__/*.pyc")) - before


def _without_cache() -> None:
    """No private folder: gcnmops's ``cache=True`` kernels are compiled in every process, cached nowhere."""
    from numba.core import caching, dispatcher

    global _CACHING
    _CACHING = False  # the GPU kernels (cuda.nofma.jit_nofma) are then compiled without cache=True
    enable = dispatcher.Dispatcher.enable_caching

    def enable_or_not(self) -> None:
        if getattr(self.py_func, "__module__", "").split(".")[0] == __name__.split(".")[0]:
            self._cache = caching.NullCache()
            return
        try:
            enable(self)
        except RuntimeError:  # another library's: "cannot cache function ...: no locator available"
            self._cache = caching.NullCache()

    dispatcher.Dispatcher.enable_caching = enable_or_not
    log.warning("No private writable folder for compiled kernels (the install, HOME and the temporary folder are "
                "read-only or shared): they are compiled in every run (a minute or more). Set NUMBA_CACHE_DIR to a "
                "folder only you can write to keep them.")
