"""Where compiled kernels (numba CPU and numba-cuda GPU) are cached on disk, for any user of any install.

numba caches beside the sources (``__pycache__``) and, where that folder is not writable, in the user's cache
folder; where neither is writable (a shared read-only install used by an account without a writable HOME)
every ``cache=True`` function fails with "cannot cache function ... no locator available". ``configure()``
runs before any kernel is defined and, only in that case, points ``NUMBA_CACHE_DIR`` at the first writable
of ``$XDG_CACHE_HOME/gcnmops`` (``~/.cache/gcnmops``) and a per-user folder under the system's temporary
folder. A ``NUMBA_CACHE_DIR`` set by the user is left as it is.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


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
    return [Path(xdg) / "gcnmops", Path(tempfile.gettempdir()) / f"gcnmops-{user}"]


def configure() -> str | None:
    """Set ``NUMBA_CACHE_DIR`` where numba's own locations are not writable; returns the folder chosen (None:
    numba's default or the user's setting)."""
    if os.environ.get("NUMBA_CACHE_DIR") or _in_tree_writable():
        return None
    for folder in fallback_dirs():
        if _writable(folder):
            os.environ["NUMBA_CACHE_DIR"] = str(folder)
            for name in ("numba.core.config", "numba.cuda.core.config"):  # already imported: read at import
                config = sys.modules.get(name)
                if config is not None:
                    config.CACHE_DIR = str(folder)
            return str(folder)
    return None
