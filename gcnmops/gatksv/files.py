"""Writing the step's files as its tools do: bgzip (+ tabix, BED preset) and plain gzip."""
from __future__ import annotations

import gzip
import os
from pathlib import Path

from ..errors import InputError
from ..outputs.callfiles import TBI_MAX_POSITION


def require_pysam():
    """pysam, or the InputError saying how to install it (asked before a call's work, not after its passes)."""
    try:
        import pysam
    except ImportError:
        raise InputError("Writing bgzipped, tabix-indexed files needs pysam (pip install 'gcnmops[formats]').") \
            from None
    return pysam


def write_text(path: str | os.PathLike, lines) -> Path:
    """The lines (no newlines) as a text file, one per line."""
    p = Path(path)
    with open(p, "w", encoding="utf-8", errors="surrogateescape", newline="") as fh:
        for line in lines:
            fh.write(line + "\n")
    return p


def bgzip(path: str | os.PathLike, lines, *, index: bool = True) -> Path:
    """``path`` (ending .gz) written bgzipped from ``lines``, with its tabix index (BED preset: '#' lines are
    the header) when ``index``; the plain file is not left behind (``bgzip -f`` then ``tabix -f``)."""
    pysam = require_pysam()
    gz = Path(path)
    plain = gz.with_suffix("")
    write_text(plain, lines)
    pysam.tabix_compress(str(plain), str(gz), force=True)
    plain.unlink()
    if index:
        try:
            pysam.tabix_index(str(gz), preset="bed", force=True)
        except OSError as err:
            gz.unlink(missing_ok=True)  # no file without its index
            raise InputError(f"Cannot index {gz} with tabix ({err}): a .tbi index holds positions up to "
                             f"{TBI_MAX_POSITION:,} (GATK-SV's `tabix -p bed` fails there too); a contig longer "
                             "than that needs a CSI index. Nothing was left of the file.") from None
    return gz


def bgzip_file(src: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """``bgzip`` of a plain file to ``dest``."""
    require_pysam().tabix_compress(str(src), str(dest), force=True)
    return Path(dest)


def gzip_lines(path: str | os.PathLike, lines) -> Path:
    """``gzip -f`` of the lines (plain gzip)."""
    with gzip.open(path, "wt", encoding="utf-8", errors="surrogateescape", newline="") as fh:
        for line in lines:
            fh.write(line + "\n")
    return Path(path)


__all__ = ["write_text", "bgzip", "bgzip_file", "gzip_lines"]
