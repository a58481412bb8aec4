"""Filters of calls (``--min-length``, ``--min-quality``): a call failing one is kept and marked, never removed --
FILTER in the VCFs, a ``filter`` column in the BEDs and call tables -- so a user sees what a threshold takes away.

A call's length is its bases (end - start + 1 of its 1-based closed range); its quality the phred Q of
``calls.quality`` (a CNV: its own; a CNV region in the cohort VCF: QUAL, the highest of its carriers). A call
passes (``PASS``) or fails with the names of FILTERS it fails, ``;``-separated as VCF writes them.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError

#: filter name -> (the result's selection entry that sets it, its description with {} for the threshold)
FILTERS = {
    "LowQual": ("minQuality", "Quality below {} (phred; --min-quality)"),
    "Short": ("minLength", "Shorter than {} bp (--min-length)"),
}


def call_filters(min_length: int | None = None, min_quality: int | None = None) -> dict:
    """The selection entries (``minLength``, ``minQuality``) of the thresholds given, checked (whole numbers
    >= 0; InputError otherwise)."""
    out = {}
    for key, value, flag in (("minLength", min_length, "--min-length"), ("minQuality", min_quality,
                                                                           "--min-quality")):
        if value is None:
            continue
        if isinstance(value, bool) or not float(value).is_integer() or value < 0:
            raise InputError(f"{flag} must be a whole number >= 0, not {value!r}.")
        out[key] = int(value)
    return out


def active_filters(selection: dict) -> dict[str, str]:
    """The FILTERS the result's ``selection`` sets: name -> description with its threshold."""
    return {name: text.format(selection[key]) for name, (key, text) in FILTERS.items() if key in selection}


def filter_status(length: np.ndarray, quality: np.ndarray, selection: dict) -> np.ndarray:
    """(n,) object array: ``PASS`` or the failed FILTERS (``;``-separated) of n calls of ``length`` bases and
    phred ``quality``, under the thresholds of ``selection``."""
    length, quality = np.asarray(length), np.asarray(quality)
    fails = {"LowQual": quality < selection.get("minQuality", -np.inf),
             "Short": length < selection.get("minLength", -np.inf)}
    out = np.full(length.shape, "PASS", dtype=object)
    for i in np.flatnonzero(np.logical_or.reduce(list(fails.values()))) if length.size else ():
        out[i] = ";".join(name for name, f in fails.items() if f[i])
    return out


__all__ = ["FILTERS", "call_filters", "active_filters", "filter_status"]
