"""Inputs and the result store of the distributed pipeline.

Inputs (:func:`open_matrix`): a Dask array (regions x samples), a Zarr array or group (``save_counts`` writes one),
an ``.npy`` file (read by memory map), or anything :func:`gcnmops.read_counts` reads (.tsv/.csv/.parquet/.npz/.rds,
numpy, pandas, CountData), which is read on the client. A task reads its part of a file itself (``part`` /
``read_part``): rows of whole chromosomes, or whole sample columns.

The result store (:class:`WorkStore`) is a folder every worker can open by path (a shared file system on a real
cluster): each block of whole chromosomes writes its own Zarr arrays (``<matrix>/<block>``), so no chunk has two
writers. A temporary store (``work_store(None)``) is removed at the end of its run unless kept on request.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..data import CountData, make_count_data
from ..errors import InputError
from ..files import check_target, publish_folder, remove_stale, temp_folder
from ..io.store import (LAYOUT, checked_ranges, counts_layout, create_array, is_count_store, write_rows,
                        open_counts_array, read_zarr, save_count_data)

#: the temporary stores' name prefix (in the system's temporary folder)
TEMP_PREFIX = "gcnmops-dask-"


def _zarr():
    try:
        import zarr
    except ImportError:  # pragma: no cover - the dask extra installs it
        raise InputError("The distributed pipeline needs zarr and dask: pip install 'gcnmops[dask]'.") from None
    return zarr


def _dask_array():
    try:
        import dask.array as da
    except ImportError:  # pragma: no cover - the dask extra installs it
        raise InputError("The distributed pipeline needs dask: pip install 'gcnmops[dask]'.") from None
    return da


@dataclass
class Matrix:
    """A regions x samples count matrix: ``values`` a Dask array (lazy, chunked anyhow) or a numpy array
    already in this process; ``sample_names`` (N,); ``ranges`` seqnames/start/end (m rows) or None; ``what``
    names it in messages."""

    values: Any
    sample_names: list[str]
    ranges: pd.DataFrame | None
    #: ("zarr" | "npy", path) when a task can read its part straight from a file
    source: tuple | None = None
    what: str = "read count matrix"
    #: each sample's total count, stored with a count group (its counts were checked when it was written)
    col_sums: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(int(s) for s in self.values.shape)

    @property
    def in_memory(self) -> bool:
        return isinstance(self.values, np.ndarray)

    def count_data_stub(self) -> CountData:
        """A CountData with the regions and names but no counts (shape (m, 0)): for checks and ``gr``."""
        return CountData(np.empty((self.shape[0], 0)), list(self.sample_names), self.ranges)

    def part(self, rows: slice = slice(None), cols: slice = slice(None)):
        """What a task reads to get ``values[rows, cols]`` (see ``read_part``): a file's path and the selection,
        a Dask array (computed as the task's input) or a numpy view."""
        if self.source is not None:
            return (*self.source, rows, cols)
        return self.values[rows, cols]


def read_part(part) -> np.ndarray:
    """In a task: the values of a ``Matrix.part`` (a file's selection read here, only those rows / columns)."""
    if not isinstance(part, tuple):
        return np.asarray(part)
    kind, path, rows, cols = part
    if kind == "zarr":
        return read_zarr(path, (rows, cols))
    return np.array(np.load(path, mmap_mode="r")[rows, cols])


def _is_dask_array(obj) -> bool:
    return type(obj).__module__.startswith("dask.array") and hasattr(obj, "chunks")


def _is_zarr_path(p: Path) -> bool:
    return p.suffix == ".zarr" or (p.is_dir() and any((p / f).exists() for f in (".zarray", ".zgroup", "zarr.json")))


def open_matrix(source, *, sample_names=None, ranges=None, min_samples: int = 2, reader=None,
                what: str = "read count matrix") -> Matrix:
    """``source`` as a :class:`Matrix` (see the module docstring for what it may be).

    ``sample_names`` / ``ranges`` (a DataFrame with seqnames, start, end) describe a Dask or numpy array or
    a bare Zarr/npy matrix, whose rows of a chromosome must be contiguous. ``reader``: how to
    read an in-memory object or a table file (default :func:`gcnmops.read_counts`; the family's readers
    for referencecn.mops / singlecn.mops inputs). Raises InputError with what to fix.
    """
    if isinstance(source, (str, os.PathLike)):
        p = Path(source)
        if _is_zarr_path(p):
            values, names, found, sums = _open_zarr(p)
            where = ("zarr", str(p if hasattr(zarr_node(p), "shape") else p / "counts"))
            return _checked(values, names, found, sample_names, ranges, min_samples, what, where, sums)
        if p.suffix.lower() == ".npy":
            return _checked(_open_npy(p), None, None, sample_names, ranges, min_samples, what, ("npy", str(p)))
    if _is_dask_array(source) or isinstance(source, np.ndarray):  # counts checked by the run's first pass
        values = source
        if values.ndim == 1:  # one sample (singlecn.mops), else one region (cn.mops's vector input)
            values = values.reshape(-1, 1) if min_samples <= 1 else values.reshape(1, -1)
        return _checked(values, None, None, sample_names, ranges, min_samples, what)
    if reader is None:
        from ..io import read_counts

        def reader(obj):
            return read_counts(obj, min_samples=min_samples)

    data = reader(source)
    return Matrix(data.counts, list(data.sample_names), data.ranges, what=what)


def _checked(values, names_found, ranges_found, sample_names, ranges, min_samples, what, source=None,
             col_sums=None) -> Matrix:
    if values.ndim != 2:
        raise InputError(f"The {what} must be two-dimensional (regions x samples), got {values.ndim} dimensions.")
    if not (np.issubdtype(values.dtype, np.number) or values.dtype == bool):
        raise InputError(f"The {what} contains non-numeric values (dtype {values.dtype}); every count must be "
                         "a number.")
    m, n = (int(s) for s in values.shape)
    if m == 0:
        raise InputError(f"The {what} has no regions (rows).")
    names = sample_names if sample_names is not None else names_found
    stub = make_count_data(np.zeros((1, n)), None if names is None else list(names), None,
                           min_samples=min_samples, what=what)  # sample count and names, cn.mops's messages
    ranges = ranges if ranges is not None else ranges_found
    if ranges is not None:
        ranges = checked_ranges(ranges, m, f"the {what}", "sort the rows by chromosome, then start, before the "
                                "distributed run (gcnmops.read_counts sorts a table file)")
    return Matrix(values, stub.sample_names, ranges, source, what, col_sums)


def zarr_node(p: Path):
    return _zarr().open(str(p), mode="r")


def _open_zarr(p: Path):
    da = _dask_array()
    if not p.exists():
        raise InputError(f"Zarr store not found: {p}")
    arr, attrs, ranges = open_counts_array(p, bare=True, how="gcnmops.distributed.save_counts")
    return (da.from_zarr(str(p if arr.path == "" else p / "counts")), attrs.get("sample_names"), ranges,
            attrs.get("col_sums"))


def _open_npy(p: Path):
    import dask

    da = _dask_array()
    if not p.exists():
        raise InputError(f"Count file not found: {p}")
    try:
        mm = np.load(p, mmap_mode="r")
    except (OSError, ValueError) as e:
        raise InputError(f"Cannot read {p} as a .npy array: {e}") from None
    if mm.ndim != 2:
        raise InputError(f"{p}: the .npy matrix must be two-dimensional (regions x samples), got shape {mm.shape}.")
    m, n = mm.shape
    rows = max(1, (64 << 20) // max(1, n * mm.dtype.itemsize))
    parts = [da.from_delayed(dask.delayed(read_part, pure=True)(("npy", str(p), slice(a, min(m, a + rows)),
                                                                  slice(None))),
                             shape=(min(m, a + rows) - a, n), dtype=mm.dtype) for a in range(0, m, rows)]
    return da.concatenate(parts, axis=0)


def save_counts(data, path, *, rows_per_chunk: int | None = None, samples_per_chunk: int | None = None) -> Path:
    """Write counts (anything :func:`gcnmops.read_counts` reads, or a Dask array) as a Zarr count group at
    ``path`` (``counts`` regions x samples: int32/int64 when every count is a whole number, else float64; the
    sample names and, for whole numbers, each sample's total in its attributes; the regions in
    ``ranges.parquet``): the input the distributed pipeline reads chunk by chunk on its workers, and
    ``gcnmops run --stream`` / ``gcnmops.run_streaming`` a chromosome at a time (io/store.py). Chunks:
    ``rows_per_chunk`` x ``samples_per_chunk`` (default about 16 MB, at most 256 samples). Written under a
    temporary name and renamed when complete."""
    zarr = _zarr()
    if _is_dask_array(data):
        m, n = (int(v) for v in data.shape)
        p = check_target(path, is_count_store, "the count store")  # a user's folder is never replaced
        remove_stale(p.parent)
        tmp = temp_folder(p)
        try:
            group = zarr.open_group(str(tmp), mode="w")
            chunks = (min(m, rows_per_chunk or 65536), min(n, samples_per_chunk or n))
            arr = create_array(str(tmp / "counts"), (m, n), chunks, "f8", checksum=True)
            data.astype("f8").rechunk(chunks).to_zarr(arr)
            group.attrs["sample_names"] = [f"Sample_{k + 1}" for k in range(n)]
            group.attrs[LAYOUT] = counts_layout(arr)
            publish_folder(tmp, p)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return p
    matrix = open_matrix(data)
    counts = CountData(np.asarray(matrix.values), list(matrix.sample_names), matrix.ranges)
    return save_count_data(counts, path, rows_per_chunk=rows_per_chunk, samples_per_chunk=samples_per_chunk)


class WorkStore:
    """The folder of Zarr arrays a run's blocks write their matrices into (``path`` must be visible to every
    worker): array ``<name>/<block>`` holds rows of block ``block`` (see ``work_store``)."""

    def __init__(self, path, temporary: bool = False) -> None:
        self.path = str(path)
        #: made by ``work_store`` for this run (removed at its end unless kept)
        self.temporary = temporary

    def __getstate__(self) -> dict:
        return {"path": self.path, "temporary": False}  # a copy sent to a worker never removes the folder

    def path_of(self, name: str, block: int) -> str:
        """The folder of block ``block``'s array ``name``."""
        return os.path.join(self.path, name, str(block))

    def write(self, name: str, block: int, value: np.ndarray, chunks: tuple, compress: bool) -> None:
        """Block ``block``'s matrix ``name`` (``chunks``: rows, then samples for a matrix; raw chunks unless
        ``compress``: real-valued matrices hardly compress, raw chunks are read and written several times faster)."""
        shape = value.shape
        chunks = tuple(min(s, c) for s, c in zip(shape, chunks + shape[len(chunks):]))
        array = create_array(self.path_of(name, block), shape, chunks, value.dtype, compress=compress)
        write_rows(array, 0, shape[0], value)

    def columns(self, name: str, blocks: int, c0: int, c1: int) -> np.ndarray:
        """Columns c0:c1 of matrix ``name`` over its first ``blocks`` blocks (every row, in order), float64,
        column-major; the row chunks read in threads (a chunk holds the rows of a group of samples)."""
        from concurrent.futures import ThreadPoolExecutor

        zarr = _zarr()
        parts = [zarr.open_array(self.path_of(name, k), mode="r") for k in range(blocks)]
        out = np.empty((sum(a.shape[0] for a in parts), c1 - c0), order="F")
        reads, r = [], 0
        for a in parts:
            reads += [(a, r, i, min(a.shape[0], i + a.chunks[0])) for i in range(0, a.shape[0], a.chunks[0])]
            r += a.shape[0]

        def read(a, r: int, i: int, j: int) -> None:
            out[r + i:r + j] = a[i:j, c0:c1]

        with ThreadPoolExecutor(max(1, min(8, os.cpu_count() or 1, len(reads)))) as pool:
            list(pool.map(lambda t: read(*t), reads))
        return out

    def read(self, name: str, block: int) -> np.ndarray:
        return np.asarray(_zarr().open_array(self.path_of(name, block), mode="r")[...])

    def dask(self, name: str, block: int):
        return _dask_array().from_zarr(self.path_of(name, block))

    def remove(self) -> None:
        """The folder and everything in it gone (a temporary store at the end of its run)."""
        shutil.rmtree(self.path, ignore_errors=True)


def work_store(store=None, keep_work: bool = False) -> WorkStore:
    """A run's store: the folder ``store`` as given (the caller's: kept, it holds the result), else a new
    ``gcnmops-dask-*`` folder in the system's temporary folder, removed at the end of the run (its matrices read
    into this process first) unless ``keep_work``."""
    if store is not None:
        Path(store).mkdir(parents=True, exist_ok=True)
        return WorkStore(store)
    return WorkStore(tempfile.mkdtemp(prefix=TEMP_PREFIX), temporary=not keep_work)


__all__ = ["Matrix", "open_matrix", "read_part", "save_counts", "WorkStore", "work_store", "TEMP_PREFIX"]
