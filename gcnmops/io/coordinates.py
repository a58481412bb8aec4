"""Which coordinate convention a count file's regions use, and their conversion to cn.mops's.

cn.mops's regions are 1-based and closed ([start, end], both bases included). BED and the tools that write
BED-style files (GATK-SV's bincov matrices and RD files, mosdepth, bedGraph, CNVkit) are 0-based and half-open
([start, end)): the same bin is ``start + 1 .. end`` in cn.mops's terms. Read as it stands, a 0-based file moves
every call by one base and makes neighbouring bins overlap.

The rule, for every file with coordinates (never a silent shift):

- ``coordinates="0-based"`` / ``"1-based"`` (the CLI's ``--zero-based`` / ``--one-based``): the file is read so.
- A file that declares BED style (a header line starting with ``#``, a ``.bed`` name, or a tool whose
  convention is known) is read as 0-based, unless its bins contradict it (they follow each other as 1-based
  closed bins do, end + 1 = next start, and none starts at 0): refused, naming the flags.
- A file that declares nothing (a plain TSV/CSV/Parquet table, gcnmops's own convention) is read as 1-based,
  unless its bins look 0-based (a start of 0, or bins that abut as half-open ones do): refused, naming the flags.

One log line says which convention was read and why (at debug level for a plain table read as 1-based, gcnmops's
long-standing default; at info level for every conversion and every explicit choice).
"""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from ..errors import InputError

log = logging.getLogger("gcnmops")

AUTO, ZERO_BASED, ONE_BASED = "auto", "0-based", "1-based"
CHOICES = (AUTO, ZERO_BASED, ONE_BASED)
FLAGS = "--zero-based (BED style: 0-based, half-open) or --one-based (1-based, closed)"


def check_choice(coordinates: str) -> str:
    """``coordinates`` if it is one of CHOICES; InputError otherwise."""
    if coordinates not in CHOICES:
        raise InputError(f"coordinates must be one of {', '.join(map(repr, CHOICES))}, not {coordinates!r}.")
    return coordinates


def evidence(seqnames, start, end) -> tuple[bool, int, int]:
    """(some start is 0, number of neighbouring bins that abut half-open (end == next start), number that abut
    closed (end + 1 == next start)) over consecutive rows of the same chromosome."""
    s = np.asarray(start, dtype=np.float64)
    e = np.asarray(end, dtype=np.float64)
    if s.size == 0:
        return False, 0, 0
    names = pd.Series(seqnames).astype(str).to_numpy()
    same = names[1:] == names[:-1]
    half_open = int(np.count_nonzero(same & (e[:-1] == s[1:])))
    closed = int(np.count_nonzero(same & (e[:-1] + 1 == s[1:])))
    return bool((s == 0).any()), half_open, closed


def start_offset(seqnames, start, end, *, coordinates: str, declared: str | None, source: str) -> int:
    """What to add to the file's starts to make cn.mops's 1-based starts (1 or 0), said in one log line.

    ``declared``: why the file is BED style (e.g. "a '#' header line"), or None when it declares nothing.
    Cells that are not numbers are left to the caller's checks (they do not count as evidence)."""
    check_choice(coordinates)
    if coordinates == ZERO_BASED:
        log.info(f"{source}: coordinates read as 0-based, half-open (--zero-based): starts + 1 make cn.mops's "
                 "1-based ranges.")
        return 1
    if coordinates == ONE_BASED:
        log.info(f"{source}: coordinates read as 1-based, closed (--one-based), as they are.")
        return 0
    s = pd.to_numeric(pd.Series(start), errors="coerce")
    e = pd.to_numeric(pd.Series(end), errors="coerce")
    zero, half_open, closed = evidence(seqnames, s.to_numpy(dtype=np.float64, na_value=np.nan),
                                       e.to_numpy(dtype=np.float64, na_value=np.nan))
    if declared is not None:
        if not zero and closed > half_open:
            raise InputError(
                f"{source} is BED style ({declared}: 0-based, half-open), but {closed} of its neighbouring bins "
                "follow each other as 1-based closed bins do (end + 1 = next start). Say which it is: " + FLAGS + ".")
        log.info(f"{source}: coordinates read as 0-based, half-open ({declared}): starts + 1 make cn.mops's "
                 "1-based ranges.")
        return 1
    if zero or half_open > closed:
        why = "a start of 0" if zero else f"{half_open} neighbouring bins that abut as half-open bins do"
        raise InputError(
            f"{source} does not say its coordinate convention and its regions look 0-based ({why}), while a table "
            "without a BED-style '#' header is read as 1-based, closed (cn.mops's convention). Say which it is: "
            + FLAGS + ".")
    log.debug(f"{source}: coordinates read as 1-based, closed (cn.mops's convention; the file declares no other).")
    return 0


__all__ = ["AUTO", "ZERO_BASED", "ONE_BASED", "CHOICES", "FLAGS", "check_choice", "evidence", "start_offset"]
