"""A cohort from per-sample count files listed in a sample sheet -> one CountData.

The sheet: a tab-separated text file of ``name<TAB>path`` lines (an optional header line ``name path`` or
``sample path``; ``#`` lines and blank lines skipped; relative paths are relative to the sheet's folder). Each
file is read as :func:`gcnmops.io.read_counts` reads one (a tool's count file: :mod:`.toolformats`; or a one-sample
table, e.g. GATK-SV's ``#Chr Start End <sample>`` file), each must hold one sample, and every sample must have the
same bins (compared in cn.mops's 1-based ranges, so a 0-based and a 1-based file of the same bins agree). The
sheet's names name the samples. Files are read on every core.

:func:`convert_sample_sheet` writes the cohort to a count store reading every file in parts of rows, side by
side (memory: one part of every file, not the matrix).
"""
from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import CountData, make_count_data, usable_cores
from ..errors import InputError
from .coordinates import AUTO
from .readers import read_counts

log = logging.getLogger("gcnmops")
_NAME_HEADERS = ("name", "sample", "sample_name", "sample_id", "id")
_PATH_HEADERS = ("path", "file", "filename", "count_file")


def read_sheet(sheet: str | os.PathLike) -> list[tuple[str, Path]]:
    """(sample name, file path) of each line of a sample sheet (see the module docstring)."""
    p = Path(sheet)
    if not p.is_file():
        raise InputError(f"Sample sheet not found: {sheet}")
    rows = []
    for no, line in enumerate(p.read_text(encoding="utf-8-sig").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) != 2 or not all(fields):
            raise InputError(f"{sheet}, line {no}: a sample sheet line is name<TAB>path (two tab-separated fields); "
                             f"found {len(fields)} field(s).")
        if not rows and fields[0].lower() in _NAME_HEADERS and fields[1].lower() in _PATH_HEADERS:
            continue  # the header line
        rows.append((no, fields[0], fields[1]))
    if not rows:
        raise InputError(f"Sample sheet {sheet} lists no samples (lines of name<TAB>path).")
    seen: dict[str, int] = {}
    for no, name, _ in rows:
        if name in seen:
            raise InputError(f"{sheet}, line {no}: sample {name!r} is listed again (first on line {seen[name]}); "
                             "sample names must be unique.")
        seen[name] = no
    return [(name, Path(path) if Path(path).is_absolute() else p.parent / path) for _, name, path in rows]


class _Conventions(logging.Filter):
    """Holds back the per-file 'coordinates read as' lines of a sheet's files and counts them (one summary line
    instead of one per sample)."""

    def __init__(self):
        super().__init__()
        self.seen: dict[str, int] = {}
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if ": coordinates read as " not in msg:
            return True
        how = msg.split(": coordinates read as ", 1)[1]
        with self.lock:
            self.seen[how] = self.seen.get(how, 0) + 1
        return False


def read_sample_sheet(sheet: str | os.PathLike, *, min_samples: int = 2, coordinates: str = AUTO,
                      depth_to_counts: float | None = None, threads: int | None = None) -> CountData:
    """The cohort of the sheet's files (see the module docstring): counts (bins x samples, order F) in sheet order.
    ``coordinates``/``depth_to_counts``: as :func:`gcnmops.io.read_counts` takes them, for every file."""
    entries = read_sheet(sheet)
    if len(entries) < min_samples:
        raise InputError(f"Sample sheet {sheet} lists {len(entries)} sample(s); cn.mops needs at least {min_samples} "
                         "(--method single takes one).")

    def read(entry) -> CountData:
        name, path = entry
        data = read_counts(str(path), min_samples=1, coordinates=coordinates, depth_to_counts=depth_to_counts)
        if data.n_samples != 1:
            raise InputError(f"{path} (sample {name!r} of {sheet}) holds {data.n_samples} samples; a sample sheet "
                             "lists one file per sample.")
        if data.ranges is None:
            raise InputError(f"{path} (sample {name!r} of {sheet}) has no coordinates (seqnames, start, end): the bins "
                             "of the samples cannot be compared.")
        return data

    conventions = _Conventions()
    log.addFilter(conventions)
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(threads or usable_cores(), len(entries)))) as pool:
            samples = list(pool.map(read, entries))
    finally:
        log.removeFilter(conventions)
    for how, n in conventions.seen.items():
        log.info(f"{sheet}: coordinates of {n} file(s) read as {how}")
    first = samples[0]
    for (name, path), data in zip(entries[1:], samples[1:]):
        _check_same_bins(first.ranges, entries[0], data.ranges, (name, path))
    counts = np.empty((first.n_regions, len(samples)), dtype=np.float64, order="F")
    for k, data in enumerate(samples):
        counts[:, k] = data.counts[:, 0]
    return make_count_data(counts, [name for name, _ in entries], first.ranges, min_samples=min_samples,
                           what=f"cohort of {sheet}")


def _check_same_bins(ra: pd.DataFrame, a_entry, rb: pd.DataFrame, b_entry, first_row: int = 0) -> None:
    """InputError naming sample ``b`` and its first bin that differs from sample ``a``'s (the ranges of their
    rows from ``first_row`` on, to their ends if they differ in length)."""
    (an, ap), (bn, bp) = a_entry, b_entry
    m = min(len(ra), len(rb))
    same = (ra["seqnames"].astype(str).to_numpy()[:m] == rb["seqnames"].astype(str).to_numpy()[:m]) & \
           (ra["start"].to_numpy()[:m] == rb["start"].to_numpy()[:m]) & \
           (ra["end"].to_numpy()[:m] == rb["end"].to_numpy()[:m])
    if same.all() and len(ra) == len(rb):
        return

    def bin_of(r: pd.DataFrame, i: int) -> str:
        return f"{r['seqnames'].iloc[i]}:{r['start'].iloc[i]}-{r['end'].iloc[i]}"

    if not same.all():
        i = int(np.argmin(same))
        raise InputError(f"Sample {bn!r} ({bp}) has other bins than sample {an!r} ({ap}): its bin {first_row + i + 1} "
                         f"is {bin_of(rb, i)}, where {an!r} has {bin_of(ra, i)} (1-based). Every sample must be "
                         "counted in the same bins.")
    longer, shorter = (bn, an) if len(rb) > len(ra) else (an, bn)
    extra = rb if len(rb) > len(ra) else ra
    raise InputError(f"Sample {bn!r} ({bp}) has {first_row + len(rb):,} bins and sample {an!r} ({ap}) "
                     f"{first_row + len(ra):,}: {longer!r} goes on after the last bin of {shorter!r}, with bin "
                     f"{first_row + m + 1} {bin_of(extra, m)}. Every sample must be counted in the same bins.")


def _file_parts(name: str, path: Path, sheet, rows: int, coordinates: str, depth_to_counts: float | None):
    """One sheet file's rows in parts of ``rows`` rows (one-sample CountData each; None for a part that shows the
    file's rows must be sorted first)."""
    from .readers import detect_format, read_count_parts, read_counts
    from .toolformats import sniff, tool_file_parts

    shown = str(path)
    kind = sniff(path) if path.is_file() else None
    if kind is not None:
        parts = tool_file_parts(path, kind, shown=shown, coordinates=coordinates, depth_to_counts=depth_to_counts,
                                rows=rows)
    elif path.is_file() and depth_to_counts is None and detect_format(path)[0] in (".tsv", ".txt", ".csv",
                                                                                   ".parquet"):
        parts = (data for data, _ in read_count_parts(path, min_samples=1, rows=rows, coordinates=coordinates))
    else:  # a format read whole (.rds, .npz): one sample's column
        whole = read_counts(shown, min_samples=1, coordinates=coordinates, depth_to_counts=depth_to_counts)
        parts = (CountData(whole.counts[a:a + rows], whole.sample_names, whole.ranges.iloc[a:a + rows].reset_index(
            drop=True) if whole.ranges is not None else None) for a in range(0, whole.n_regions, rows))
    for data in parts:
        if data is not None and data.n_samples != 1:
            raise InputError(f"{path} (sample {name!r} of {sheet}) holds {data.n_samples} samples; a sample sheet "
                             "lists one file per sample.")
        if data is not None and data.ranges is None:
            raise InputError(f"{path} (sample {name!r} of {sheet}) has no coordinates (seqnames, start, end): the "
                             "bins of the samples cannot be compared.")
        yield data


def sheet_parts(sheet: str | os.PathLike, *, rows: int, min_samples: int = 2, coordinates: str = AUTO,
                depth_to_counts: float | None = None, threads: int | None = None):
    """The cohort of the sheet's files in parts of ``rows`` rows (CountData, rows x samples, in row order; None
    for a part that shows a file's rows must be sorted first): the files are read side by side, part after part,
    each part's bins checked to be every sample's."""
    entries = read_sheet(sheet)
    if len(entries) < min_samples:
        raise InputError(f"Sample sheet {sheet} lists {len(entries)} sample(s); cn.mops needs at least {min_samples} "
                         "(--method single takes one).")
    names = [name for name, _ in entries]
    files = [_file_parts(name, path, sheet, rows, coordinates, depth_to_counts) for name, path in entries]
    conventions = _Conventions()
    log.addFilter(conventions)
    at = 0
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(threads or usable_cores(), len(entries)))) as pool:
            while True:
                got = list(pool.map(lambda f: next(f, False), files))
                if all(g is False for g in got):
                    break
                if any(g is None for g in got):
                    yield None
                    return
                for k, g in enumerate(got):
                    if g is False:  # this file has ended, the first one with rows goes on
                        j = next(j for j, h in enumerate(got) if h is not False)
                        _check_same_bins(got[j].ranges, entries[j], got[j].ranges.iloc[:0], entries[k], at)
                first = got[0]
                counts = np.empty((first.n_regions, len(got)), dtype=np.float64, order="F")
                for k, g in enumerate(got):
                    if k:
                        _check_same_bins(first.ranges, entries[0], g.ranges, entries[k], at)
                    counts[:, k] = g.counts[:, 0]
                yield make_count_data(counts, names, first.ranges, min_samples=min_samples,
                                      what=f"cohort of {sheet}")
                at += first.n_regions
    finally:
        log.removeFilter(conventions)
        for f in files:
            f.close()
    for how, n in conventions.seen.items():
        log.info(f"{sheet}: coordinates of {n} file(s) read as {how}")


def convert_sample_sheet(sheet: str | os.PathLike, output, *, rows: int | None = None, coordinates: str = AUTO,
                         depth_to_counts: float | None = None) -> tuple[Path, bool]:
    """The cohort of the sheet as a count store at ``output``; returns (the store, whether it was read in parts).
    The files are read in parts of ``rows`` rows (default: the store's chunk of rows, at most about 256 MB of
    counts), unless their rows must be sorted (then whole, as :func:`read_sample_sheet` reads them)."""
    from .store import save_count_data, store_chunks, write_sorted_parts

    n = len(read_sheet(sheet))
    rows = rows or max(1024, min(store_chunks(1 << 62, n, 4)[0], (256 << 20) // (8 * n)))
    parts = sheet_parts(sheet, rows=rows, coordinates=coordinates, depth_to_counts=depth_to_counts)
    try:
        written = write_sorted_parts(parts, output)
    finally:
        parts.close()
    if written is not None:
        return written, True
    log.warning(f"{sheet}: the files' rows are not grouped by chromosome and sorted by start: reading them whole to "
                "sort them (memory: the whole matrix).")
    data = read_sample_sheet(sheet, coordinates=coordinates, depth_to_counts=depth_to_counts)
    return save_count_data(data, output), False


__all__ = ["read_sheet", "read_sample_sheet", "sheet_parts", "convert_sample_sheet"]
