"""Files that htslib (through pysam) writes, passed through a pipe (``through_pipe``): the same bytes, without the
disk wait that htslib adds at the end of every file."""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path


#: the folder whose entries name a process's open files (Linux, macOS): ``through_pipe`` passes htslib a pipe there
FD_FOLDER = Path("/dev/fd")


#: what ``through_pipe``'s pipe holds: Linux's default largest pipe (/proc/sys/fs/pipe-max-size), far above htslib's
#: last flush
PIPE_BYTES = 1 << 20


def _large_pipe() -> tuple[int, int] | None:
    """(read end, write end) of a pipe holding PIPE_BYTES, or None where pipes cannot be enlarged so."""
    try:
        import fcntl
    except ImportError:  # Windows
        return None
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is None:
        return None
    read_end, write_end = os.pipe()
    try:
        if fcntl.fcntl(write_end, set_size, PIPE_BYTES) >= PIPE_BYTES:
            return read_end, write_end
    except OSError:  # a lower pipe-max-size, or the user's pipe quota spent
        pass
    os.close(read_end)
    os.close(write_end)
    return None


def through_pipe(write: Callable[[str], object], dst, size: int = 0) -> None:
    """``write(name)``, a call that has htslib write a file, with ``name`` the write end of a pipe whose bytes a
    thread copies into ``dst``: the same bytes as ``write(str(dst))``, without the disk wait that htslib adds.

    htslib ends every file it writes with fdatasync, which waits for the disk; after the gigabytes of a run's
    matrices that is up to a second per file (the file system's journal commits what is pending first). On a pipe
    fdatasync is refused and htslib goes on: the file is then written as every other file of a run (no sync; the
    batch's renames make it appear). pysam closes the file (htslib's last flush, up to a few 64-KiB blocks) holding
    Python's lock, which the copying thread needs to read on: the pipe is made to hold ``PIPE_BYTES`` first, so that
    the flush never waits for the copy. That holds only for a file the pipe holds whole (``size``: bytes it may
    reach, at most): a larger one (a wide cohort's VCF) is written as ``write(str(dst))``, as where FD_FOLDER is
    missing or the pipe cannot be enlarged (not Linux)."""
    pipe = _large_pipe() if FD_FOLDER.is_dir() and size <= PIPE_BYTES // 2 else None
    if pipe is None:
        write(str(dst))
        return
    read_end, write_end = pipe
    failure: list[BaseException] = []

    def copy() -> None:
        try:
            with open(read_end, "rb", buffering=0) as src, open(dst, "wb") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
        except BaseException as err:  # noqa: BLE001 - re-raised by the writing thread
            failure.append(err)

    thread = threading.Thread(target=copy, name="gcnmops-pipe", daemon=True)
    thread.start()
    try:
        write(f"{FD_FOLDER}/{write_end}")
    except BaseException:
        os.close(write_end)
        thread.join(1.0)  # a copy that failed first (a full disk) is the cause; htslib may still hold the pipe
        if failure:
            raise failure[0] from None
        raise
    os.close(write_end)
    thread.join()  # htslib closed its end: the copy reads to the end
    if failure:
        raise failure[0]
