"""Files written whole or not at all: each one under a temporary name beside its target (``temp_beside``),
renamed over it once complete (``publish``, ``atomic_write``); Ctrl-C and SIGTERM held while such files are
cleaned up (``signals_held``); an OSError while writing as an InputError naming the folder (``output_error``).

The count files (``alignments.counting``) are written this way, and the result files (``gcnmops.outputs``: its batch
renames many such files together).
"""
from __future__ import annotations

import errno
import os
import re
import signal
import threading
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from ..errors import InputError
from ..files import temp_file, temp_target, umask


@contextmanager
def signals_held():
    """Ctrl-C and SIGTERM wait until the block has run (main thread only): a clean-up interrupted by a second
    signal (a second Ctrl-C, a job scheduler's repeated SIGTERM) would leave files behind. A signal that came
    meanwhile is raised again once the handlers are back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    # a handler installed outside Python (e.g. R's, when R embeds the engine) cannot be put back: left alone
    held = [sig for sig in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(sig) is not None]
    previous = {sig: signal.signal(sig, lambda sig, frame: came.append(sig)) for sig in held}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if came:
            signal.raise_signal(came[0])


def temp_beside(path: Path) -> Path:
    """A new empty file (mode 0600) in ``path``'s folder, named for ``path``, this process and host
    (``files.temp_file``: the next run of any command removes it should this one be killed)."""
    return temp_file(path)


#: errno values of a full disk or quota, and of a folder that cannot be written
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT}
_NO_WRITE = {errno.EACCES, errno.EPERM, errno.EROFS}


def output_error(err: OSError, folder) -> InputError:
    """The InputError for ``err`` raised while writing into ``folder``: a full disk, a folder that cannot be
    written, or what the system said; nothing of the failed write is left."""
    where = f"the output folder {str(folder)!r}"
    code = err.errno
    if code is None and (found := re.search(r"\[errno (\d+)\]", str(err), re.IGNORECASE)):
        code = int(found.group(1))  # Arrow's errors carry the system's error in their text only
    if code in _NO_SPACE:
        return InputError(f"No space left on the device of {where} (disk full or quota reached): nothing was "
                          "written. Free some space, or write to another folder (-o).")
    if code in _NO_WRITE:
        return InputError(f"Cannot write into {where}: {err.strerror}. Nothing was written; choose a folder you "
                          "can write (-o).")
    name = Path(err.filename).name if err.filename else ""
    name = temp_target(name) or name
    return InputError(f"Writing into {where} failed" + (f" at {name!r}" if name else "") +
                      f": {err.strerror or err}. Nothing was written.")


def publish(tmp: Path, path: Path, mode: int) -> None:
    """Give the temporary file ``tmp`` the permissions ``mode`` and rename it over ``path``."""
    os.chmod(tmp, mode)  # mkstemp creates 0600; give the file the permissions open() would
    os.replace(tmp, path)


def atomic_write(path: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path`` and rename it to ``path`` on success. An OSError
    (a full disk, no permission) becomes an InputError naming the folder."""
    path = Path(path)
    try:
        tmp = temp_beside(path)
        try:
            write(tmp)
            publish(tmp, path, 0o666 & ~umask())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as err:
        raise output_error(err, path.parent) from None
    return path
