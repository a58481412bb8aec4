"""``runcnMOPS.R -I ID covMatrix OUTDIR``: cn.mops with its defaults on a GATK-SV coverage table, integer copy
numbers, the CNVs as GFF3 (``OUTDIR/ID.cnMOPS.gff``).

What the script does, kept here: every cell is read as R's ``as.numeric`` reads it and NA becomes 0; samples
whose median is 0 are removed (``EXCLUDING SAMPLES DUE TO NO COVERAGE:`` and their IDs, no newline after
them) and fewer than three left stop it; the ranges are ``[Start, End]`` from the table's **0-based** Start
unchanged (one base wider than the bins, overlapping the next bin by one base: what GATK-SV's calls are made
on); the sample columns are the header's names but Chr, Start, Stop and Strand, each name once (its first
column). When cn.mops finds no CNV region, ``calcIntegerCopyNumbers`` stops (the WDL then leaves an empty GFF):
:data:`NO_CNV_REGIONS`.
"""
from __future__ import annotations

import contextlib
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from numba import njit, prange

from ..data import make_count_data
from ..errors import InputError
from .gff import gff3_text
from .matrix import read_depth_matrix, select
from .rebin import BinTable, raw_table

#: calcIntegerCopyNumbers' message when there is nothing to call (the WDL's EMPTY_OUTPUT_ERROR)
NO_CNV_REGIONS = "No CNV regions in result object. Rerun cn.mops with different parameters!"


class EmptyResult(Exception):
    """cn.mops found no CNV region: runcnMOPS.R stops with NO_CNV_REGIONS (exit status 1)."""


@njit(parallel=True, cache=True, nogil=True)
def _column_counts(values):  # pragma: no cover - numba
    """Per column of ``values`` (m, N): NaN cells, cells 0 or NaN, and whether every cell is NaN, 0 or at least
    the smallest normal double (then the median with NA -> 0 is 0 exactly when more than half the cells are)."""
    n = values.shape[1]
    nans, zeros, plain = np.zeros(n, np.int64), np.zeros(n, np.int64), np.ones(n, np.bool_)
    for j in prange(n):
        for i in range(values.shape[0]):
            v = values[i, j]
            if v != v:
                nans[j] += 1
                zeros[j] += 1
            elif v == 0:
                zeros[j] += 1
            elif not v >= 2.2250738585072014e-308:
                plain[j] = False
    return nans, zeros, plain


def _median_zero(values: np.ndarray, zeros: np.ndarray, plain: np.ndarray) -> np.ndarray:
    """(N,) bool: the columns of ``values`` (NA already 0) whose median is 0."""
    m = values.shape[0]
    if not m:
        return np.zeros(values.shape[1], dtype=bool)
    out = zeros >= m // 2 + 1
    for k in np.flatnonzero(~plain):  # a negative or subnormal cell: R's median itself
        out[k] = np.median(values[:, k]) == 0
    return out


def count_data(table: BinTable, out=None):
    """The CountData runcnMOPS.R hands cn.mops (NA -> 0, median-0 samples removed, 0-based starts unchanged)."""
    out = out or sys.stdout
    nans, zeros, plain = _column_counts(table.values)
    values = np.where(np.isnan(table.values), 0.0, table.values) if nans.any() else table.values
    names = list(table.samples)
    if len(names) < 2:
        raise InputError("runcnMOPS.R needs at least two sample columns (R's apply() fails on one).")
    zero = _median_zero(values, zeros, plain)
    keep = np.flatnonzero(~zero)
    if zero.any():
        out.write("\nEXCLUDING SAMPLES DUE TO NO COVERAGE:\n" + "\n".join(n for n, z in zip(names, zero) if z))
        out.flush()
        if len(keep) < 3:
            raise InputError("runcnMOPS.R: Less than three samples retained in coverage matrix after filtering on "
                             "median coverage")
    columns, seen = [], set()
    for k in keep:
        n = names[k]
        if n not in seen and n not in ("Chr", "Start", "Stop", "Strand"):
            columns.append(k)
        seen.add(n)
    ranges = pd.DataFrame({"seqnames": np.asarray(table.contig, dtype=object), "start": table.start,
                           "end": table.end})
    if len(columns) < values.shape[1]:
        values = select(values, np.arange(values.shape[0]), columns)
    return make_count_data(np.asfortranarray(values), [names[k] for k in columns], ranges, what="coverage matrix")


def call_gff(table: BinTable, *, backend: str = "auto", date: str | None = None, out=None,
             capture_warnings: bool = True, **fit_options) -> str:
    """The GFF3 text runcnMOPS.R writes for ``table``; EmptyResult when there is no CNV region. cn.mops's warnings
    go to ``out`` as R prints them (``capture_warnings=False``: the caller routes them, e.g. ``PassWarnings`` for
    passes run in threads); ``fit_options`` go to the model (e.g. ``max_device_memory``)."""
    import gcnmops
    from ..params import METHODS
    from ..pipeline.cnmops import run_mops

    data = count_data(table, out)
    with warnings.catch_warnings(record=True) if capture_warnings else contextlib.nullcontext([]) as caught:
        if capture_warnings:
            warnings.simplefilter("always")
        res = run_mops(data, METHODS["cn.mops"].params(), backend=backend, **fit_options)
    for w in caught:
        (out or sys.stderr).write(warning_text(w.message))
    try:
        res = gcnmops.calc_integer_copy_numbers(res, backend=backend)
    except InputError as e:
        if str(e) == NO_CNV_REGIONS:
            raise EmptyResult(NO_CNV_REGIONS) from None
        raise
    return gff3_text(res.cnvs, date)


def warning_text(message) -> str:
    """A warning as runcnMOPS.R's log shows it."""
    return f"Warning message:\n{message}\n"


class PassWarnings:
    """While open (``with``), every warning is written to the stream its thread named with ``to(stream)`` (the
    log of the pass that thread runs), as R prints it; a thread that named none gets Python's usual display.
    warnings.catch_warnings is process-wide state, so passes run in threads share this one."""

    def __init__(self):
        import threading

        self._local = threading.local()
        self._catch = warnings.catch_warnings()

    def to(self, stream) -> None:
        self._local.stream = stream

    def _show(self, message, category, filename, lineno, file=None, line=None):
        stream = getattr(self._local, "stream", None)
        if stream is None:
            self._default(message, category, filename, lineno, file, line)
        else:
            stream.write(warning_text(message))

    def __enter__(self) -> "PassWarnings":
        self._catch.__enter__()
        warnings.simplefilter("always")
        self._default = warnings.showwarning
        warnings.showwarning = self._show
        return self

    def __exit__(self, *exc) -> None:
        self._catch.__exit__(*exc)


def run_cnmops(matrix: str | os.PathLike, outdir: str | os.PathLike, ID: str = "CNMOPS", *,
               backend: str = "auto") -> Path:
    """runcnMOPS.R: ``OUTDIR/ID.cnMOPS.gff`` from the coverage table ``matrix``; EmptyResult (nothing written)
    when cn.mops finds no CNV region, as the script stops."""
    table = raw_table(read_depth_matrix(matrix))
    text = call_gff(table, backend=backend)
    path = Path(f"{os.fspath(outdir)}/{ID}.cnMOPS.gff")
    if not path.parent.is_dir():
        raise InputError(f"Output folder {path.parent} does not exist.")
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    return path


__all__ = ["NO_CNV_REGIONS", "EmptyResult", "PassWarnings", "count_data", "call_gff", "run_cnmops", "warning_text"]
