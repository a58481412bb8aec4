"""What gcnmops may remove or replace on disk, and how a folder it writes is published.

- ``remove_inside(folder, name)``: remove the file ``name`` (relative) of ``folder`` only when it provably lies
  inside it: no absolute name, no ``..``, no symbolic link on the way (a linked subfolder is not followed out),
  a regular file of this user's. The folders it leaves empty go too.
- ``check_target(path, ours, what)``: the folder a command is about to replace (``convert -o``, ``reference
  build -o``): missing, empty, or one gcnmops made (``ours``, e.g. its manifest and nothing but its own files,
  ``holds_only``); a file, a foreign folder or a link loop is an InputError.
- ``temp_folder(target)``, ``temp_file(target)``: a new private folder or file beside ``target``, named with this
  run's process and host, so that ``remove_stale`` can tell a killed run's leftovers (process gone) from a
  running one's (``temp_target`` reads the target's name back).
- ``lock_folder(folder)``: this run's claim on an output folder (a second run into it is refused while the
  first lives; the claim ends with the process, however it ends); ``unlock_folder`` gives it back.
- ``publish_folder(tmp, path)``: rename the complete folder into place (readable as the umask says),
  replacing the one there only once the new one is complete.

Imports nothing of gcnmops but errors.
"""
from __future__ import annotations

import errno
import os
import re
import shutil
import socket
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from .errors import InputError

#: the names ``temp_folder`` gives: <stem>.gcnmops-<pid>@<host>.<8 random characters>.<tmp|old>
_TEMP = re.compile(r"^(?P<stem>.*)\.gcnmops-(?P<pid>\d+)@(?P<host>[A-Za-z0-9_-][A-Za-z0-9._-]*)\.[a-z0-9_]{8}\."
                   r"(?:tmp|old)$")


def umask() -> int:
    """The process's umask (read without changing it where the system tells it)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()).lstrip(".") or "host"


def temp_folder(target: Path, kind: str = "tmp", stem: str | None = None) -> Path:
    """A new empty folder (mode 0700) beside ``target``: ``.<target's name>.gcnmops-<pid>@<host>.XXXXXXXX.<kind>``
    (``kind`` "tmp" or "old"; ``stem`` replaces ``.<target's name>``)."""
    target = Path(target)
    prefix = (f".{target.name}" if stem is None else stem) + f".gcnmops-{os.getpid()}@{_host()}."
    return Path(tempfile.mkdtemp(prefix=prefix, suffix=f".{kind}", dir=target.parent))


def temp_file(target: Path) -> Path:
    """A new empty file (mode 0600) beside ``target``: ``.<target's name>.gcnmops-<pid>@<host>.XXXXXXXX.tmp``."""
    target = Path(target)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.gcnmops-{os.getpid()}@{_host()}.", suffix=".tmp",
                                dir=target.parent)
    os.close(fd)
    return Path(name)


def temp_target(name: str) -> str | None:
    """The name of the target a temporary of ``temp_file`` or ``temp_folder`` named ``name`` stands for
    (None for other names)."""
    found = _TEMP.match(name)
    return None if found is None else found["stem"][1:]


#: the file of an output folder that a run holds locked while it writes there (``lock_folder``)
LOCK_FILE = ".gcnmops.lock"


def lock_folder(folder) -> int:
    """Claim the output folder ``folder`` for this process (an exclusive ``flock`` on its LOCK_FILE, which
    names the process): a descriptor for ``unlock_folder``. InputError when another live process holds it.
    The lock ends with its process, however it ends (a killed run's file is taken over)."""
    import fcntl

    path = os.path.join(folder, LOCK_FILE)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 200).decode("ascii", "replace").strip() or "another process"
            os.close(fd)
            raise InputError(f"Another gcnmops run ({holder}) is writing into {str(folder)!r}: wait until it has "
                             "ended, or write to another folder (-o).") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path, follow_symlinks=False).st_ino
        except FileNotFoundError:
            same = False
        if same:  # not a file its last holder removed while this process waited to lock it
            os.ftruncate(fd, 0)
            os.write(fd, f"process {os.getpid()} on {_host()}\n".encode())
            return fd
        os.close(fd)


def unlock_folder(folder, fd: int) -> None:
    """Give back the claim of ``lock_folder``: its file removed, then the lock released."""
    try:
        os.unlink(os.path.join(folder, LOCK_FILE))
    except OSError:
        pass
    os.close(fd)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def remove_stale(folder, stem: str | None = None) -> int:
    """Remove from ``folder`` the temporaries of gcnmops runs that ended without cleaning up (killed outright):
    entries named by ``temp_folder`` (with ``stem``, if given) on this host whose process is gone, this user's,
    never a link. Returns how many were removed."""
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    host = _host()
    for entry in entries:
        found = _TEMP.match(entry.name)
        if found is None or found["host"] != host or (stem is not None and found["stem"] != stem):
            continue
        pid = int(found["pid"])
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if pid == os.getpid() or _running(pid) or st.st_uid != os.geteuid() or stat.S_ISLNK(st.st_mode):
            continue
        try:
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed += 1
        except OSError:
            pass
    return removed


def remove_inside(folder, name: str) -> bool:
    """Remove the file ``name`` (a relative name, ``/``-separated) of ``folder`` when it is a regular file of
    this user's reached without following a link below ``folder`` (``folder`` itself may be one), and then its
    folders below ``folder`` that it leaves empty. Returns whether it was removed."""
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or any(p in ("", ".", "..") or "\\" in p for p in parts):
        return False
    directory = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    fds: list[int] = []
    try:
        fds.append(os.open(folder, directory))
        for part in parts[:-1]:
            fds.append(os.open(part, directory | os.O_NOFOLLOW, dir_fd=fds[-1]))
        st = os.stat(parts[-1], dir_fd=fds[-1], follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return False
        os.unlink(parts[-1], dir_fd=fds[-1])
        for i in range(len(parts) - 2, -1, -1):  # the folders left empty, innermost first
            try:
                os.rmdir(parts[i], dir_fd=fds[i])
            except OSError:
                break
        return True
    except OSError:  # a link on the way (ELOOP, ENOTDIR), gone, or not ours to remove
        return False
    finally:
        for fd in fds:
            os.close(fd)


def holds_only(folder: Path, allowed: Callable[[str], bool]) -> bool:
    """True when every entry below ``folder`` is a plain file or folder (no link, no device) whose relative
    ``/``-separated name ``allowed`` accepts."""
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                return False
            if not allowed(Path(path).relative_to(folder).as_posix()):
                return False
    return True


def check_target(path, ours: Callable[[Path], bool], what: str) -> Path:
    """``path`` (a link resolved) if a command may write its folder there: missing, an empty folder, or a folder
    that ``ours`` recognises as one gcnmops made (then replaced). Anything else (a file, a user's folder, a link
    loop) is an InputError naming ``what`` was to be written; nothing is changed."""
    path = Path(path)
    try:
        real = Path(os.path.realpath(path, strict=True)) if os.path.islink(path) else path
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOENT):
            why = "a loop of symbolic links" if err.errno == errno.ELOOP else "a symbolic link that leads nowhere"
            raise InputError(f"{str(path)!r} is {why}: give a folder name for {what} (-o).") from None
        raise InputError(f"Cannot use {str(path)!r} for {what}: {err.strerror or err}.") from None
    if not real.exists():
        _check_parents(real, path, what)
        return real
    if not real.is_dir():
        raise InputError(f"{str(path)!r} is an existing file, not a folder: give a new name for {what} (-o); "
                         "gcnmops does not replace it.")
    try:
        empty = not any(real.iterdir())
        made_by_us = empty or ours(real)
    except OSError as err:
        raise InputError(f"Cannot read the folder {str(path)!r}: {err.strerror or err}.") from None
    if not made_by_us:
        raise InputError(f"{str(path)!r} is an existing folder that gcnmops did not make (or that holds other "
                         f"files): it is left as it is. Give a new name for {what} (-o).")
    return real


def _check_parents(real: Path, path: Path, what: str) -> None:
    """InputError when the folders ``real`` would be made in cannot be: the nearest existing one above it a loop
    of symbolic links, or a file."""
    for parent in real.parents:
        if not os.path.lexists(parent):
            continue
        try:
            is_folder = stat.S_ISDIR(os.stat(parent).st_mode)
        except OSError as err:
            why = "a loop of symbolic links" if err.errno == errno.ELOOP else (err.strerror or str(err))
            raise InputError(f"Cannot make {str(path)!r} for {what} (-o): {str(parent)!r} is {why}.") from None
        if not is_folder:
            raise InputError(f"Cannot make {str(path)!r} for {what} (-o): {str(parent)!r} is a file, not a "
                             "folder.")
        return


def publish_folder(tmp: Path, path: Path) -> None:
    """Rename the complete folder ``tmp`` (made by ``temp_folder``) to ``path``, its mode as the umask gives a
    new folder; a folder at ``path`` (checked by ``check_target``) is moved aside first and removed once the new
    one is in place, or put back should the rename fail."""
    os.chmod(tmp, 0o777 & ~umask())
    old = None
    if os.path.lexists(path):
        old = temp_folder(path, "old")
        os.rmdir(old)  # its name only: os.replace onto an existing folder fails
        os.replace(path, old)
    try:
        os.replace(tmp, path)
    except BaseException:
        if old is not None:
            os.replace(old, path)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


__all__ = ["umask", "temp_folder", "temp_file", "temp_target", "lock_folder", "unlock_folder", "remove_stale",
           "remove_inside", "holds_only", "check_target", "publish_folder"]
