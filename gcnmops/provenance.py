"""What made a result folder: the gcnmops version, the command line, the date, the backend and device, and a
fingerprint of each input (params.json's ``provenance``, the VCF header's ``##gcnmopsCommand`` and
``##gcnmopsInput`` lines).

An input's fingerprint (``fingerprint``) is cheap for big inputs and says whether a file is still the one that
was read: its size, its modification time and a SHA-256 digest. The digest covers the whole file up to
``WHOLE_LIMIT`` bytes (``sha256``); a larger file's digest covers its first and last ``PART`` bytes and its size
(``sha256_head_tail``: ``sha256(first MiB + last MiB + str(size))``), so that a multi-gigabyte table costs two
reads of 1 MiB. A folder (a Zarr count store) is digested from its listing (``sha256_listing``: each file's
relative path, size and modification time in nanoseconds, one tab-separated line each, sorted by path).
"""
from __future__ import annotations

import datetime
import hashlib
import os
import shlex
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from .cuda.probe import Backend, as_backend, device_names
from .version import __version__

#: files up to this size are digested whole; larger ones by their first and last PART bytes
WHOLE_LIMIT = 2 << 20
PART = 1 << 20
#: the command line and input paths of the command this process runs (``note_command``), if any
_COMMAND: dict = {}


def note_command(argv: Sequence[str], inputs: Iterable = ()) -> None:
    """Record the command this process runs (``argv`` without the program's name) and its input paths
    (None entries skipped): the default of ``describe``. The command line faces call it once they have parsed
    their arguments."""
    paths = []
    for i in inputs:  # an option may name several files (count's BAMs)
        paths += [p for p in (i if isinstance(i, (list, tuple)) else [i]) if p]
    _COMMAND.clear()
    _COMMAND.update(argv=["gcnmops", *map(str, argv)], inputs=paths)


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _iso(ns: int) -> str:
    return datetime.datetime.fromtimestamp(ns / 1e9, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def fingerprint(path) -> dict:
    """``{"path": absolute path, "size": bytes, "modified": ISO 8601 UTC, <digest kind>: hex}`` of a file or
    folder (see the module docstring); ``{"path", "missing": True}`` where it cannot be read."""
    p = Path(path)
    out: dict = {"path": str(p.absolute())}
    try:
        st = p.stat()
        if p.is_dir():
            h, size = hashlib.sha256(), 0
            lines = []
            for root, _, files in os.walk(p):
                for name in files:
                    f = Path(root, name)
                    fst = f.stat()
                    size += fst.st_size
                    lines.append(f"{f.relative_to(p).as_posix()}\t{fst.st_size}\t{fst.st_mtime_ns}\n")
            for line in sorted(lines):
                h.update(line.encode())
            out.update(size=size, modified=_iso(st.st_mtime_ns), sha256_listing=h.hexdigest())
            return out
        size = st.st_size
        h = hashlib.sha256()
        with open(p, "rb") as f:
            if size <= WHOLE_LIMIT:
                h.update(f.read())
                kind = "sha256"
            else:
                h.update(f.read(PART))
                f.seek(size - PART)
                h.update(f.read(PART))
                h.update(str(size).encode())
                kind = "sha256_head_tail"
        out.update(size=size, modified=_iso(st.st_mtime_ns), **{kind: h.hexdigest()})
    except OSError:
        out["missing"] = True
    return out


def device(backend, devices=None) -> str:
    """The hardware a run used: the GPUs' names (``devices``: as the run's ``devices=``, None: device 0) on
    the GPU backend, else the CPU's model and how many of its threads this process may use."""
    if as_backend(backend) is Backend.GPU:
        try:
            return "; ".join(device_names(devices))
        except Exception:  # noqa: BLE001 - a description only: never fails a run
            return "GPU"
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    import platform

    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model or platform.machine() or 'CPU'} ({threads} threads)"


def describe(backend=None, devices=None, inputs: Iterable | None = None) -> dict:
    """params.json's ``provenance``: {gcnmops (version), command (a shell-quoted command line), date (ISO 8601
    UTC, now), backend ("cpu"/"gpu", None where unknown), device, python, inputs (``fingerprint`` of each path
    of ``inputs``; None: the noted command's)}. The command is the noted one (``note_command``), else this
    process's ``sys.argv``."""
    argv = _COMMAND.get("argv") or [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python",
                                    *sys.argv[1:]]
    paths = _COMMAND.get("inputs", []) if inputs is None else [i for i in inputs if isinstance(i, (str, os.PathLike))]
    return {
        "gcnmops": __version__,
        "command": shlex.join(argv),
        "date": _utc_now(),
        "backend": None if backend is None else str(backend),
        "device": None if backend is None else device(backend, devices),
        "python": sys.version.split()[0],
        "inputs": [fingerprint(p) for p in paths],
    }


__all__ = ["describe", "device", "fingerprint", "note_command", "WHOLE_LIMIT", "PART"]
