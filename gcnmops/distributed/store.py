"""Inputs and the working Zarr store of the distributed pipeline.

Inputs (:func:`open_matrix`): a Dask array (regions x samples), a Zarr array or group (``save_counts``
writes one), an ``.npy`` file (read by memory map, row chunk by row chunk, on the workers), or anything
:func:`gcnmops.read_counts` reads (.tsv/.csv/.parquet/.npz/.rds, numpy, pandas, CountData), which is
read on the client.

The working store is a folder of Zarr arrays that every worker can open by path (a shared file system on
a real cluster). Matrices are chunked (rows_per_chunk, samples_per_chunk): a row task (normalization
statistics, model) reads and writes whole chunks of its rows, a column task (size factors, coverage,
segmentation) whole chunks of its samples, so no chunk has two writers and nothing is read twice over.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..data import CountData, make_count_data
from ..errors import InputError
from ..files import check_target, publish_folder, remove_stale, temp_folder
from ..io.store import RANGES_FILE, checked_ranges, create_array, is_count_store, save_count_data


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
    already in this process; ``sample_names`` (N,); ``ranges`` seqnames/start/end (m rows) or None."""

    values: Any
    sample_names: list[str]
    ranges: pd.DataFrame | None
    #: ("zarr" | "npy", path) when the rows can be read straight from a file (see read_source_rows)
    source: tuple | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(int(s) for s in self.values.shape)

    @property
    def chromosomes(self) -> np.ndarray:
        return CountData(np.empty((self.shape[0], 0)), [], self.ranges).chromosomes

    def count_data_stub(self) -> CountData:
        """A CountData with the regions and names but no counts (shape (m, 0)): for checks and ``gr``."""
        return CountData(np.empty((self.shape[0], 0)), list(self.sample_names), self.ranges)


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
            values, names, found = _open_zarr(p)
            source = ("zarr", str(p if hasattr(zarr_node(p), "shape") else p / "counts"))
            return _checked(values, names, found, sample_names, ranges, min_samples, what, source)
        if p.suffix.lower() == ".npy":
            return _checked(_open_npy(p), None, None, sample_names, ranges, min_samples, what, ("npy", str(p)))
    if _is_dask_array(source) or isinstance(source, np.ndarray):  # counts checked when staged
        values = source
        if values.ndim == 1:  # one sample (singlecn.mops), else one region (cn.mops's vector input)
            values = values.reshape(-1, 1) if min_samples <= 1 else values.reshape(1, -1)
        return _checked(values, None, None, sample_names, ranges, min_samples, what)
    if reader is None:
        from ..io import read_counts

        def reader(obj):
            return read_counts(obj, min_samples=min_samples)

    data = reader(source)
    return Matrix(data.counts, list(data.sample_names), data.ranges)


def _checked(values, names_found, ranges_found, sample_names, ranges, min_samples, what, source=None) -> Matrix:
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
    if source is not None and values.ndim != 2:
        source = None
    return Matrix(values, stub.sample_names, ranges, source)


def zarr_node(p: Path):
    return _zarr().open(str(p), mode="r")


def read_source_rows(source: tuple, a: int, b: int) -> np.ndarray:
    """Rows a:b of a Zarr array or an .npy file (memory-mapped), read in the task that needs them."""
    kind, path = source
    if kind == "zarr":
        return _zarr().open_array(path, mode="r")[a:b]
    return _npy_rows(path, a, b)


def _open_zarr(p: Path):
    zarr = _zarr()
    da = _dask_array()
    if not p.exists():
        raise InputError(f"Zarr store not found: {p}")
    node = zarr.open(str(p), mode="r")
    if hasattr(node, "shape"):
        return da.from_zarr(str(p)), None, None
    if "counts" not in node:
        raise InputError(f"The Zarr group {p} has no array 'counts' (write one with "
                         "gcnmops.distributed.save_counts).")
    names = node.attrs.get("sample_names")
    ranges = pd.read_parquet(p / RANGES_FILE) if (p / RANGES_FILE).exists() else None
    return da.from_zarr(str(p / "counts")), names, ranges


def _npy_rows(path: str, a: int, b: int) -> np.ndarray:
    """Rows a:b of an .npy matrix (memory-mapped: only those rows are read)."""
    return np.array(np.load(path, mmap_mode="r")[a:b])


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
    parts = [da.from_delayed(dask.delayed(_npy_rows, pure=True)(str(p), a, min(m, a + rows)),
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
        p = check_target(path, is_count_store, "the count store")
        tmp = temp_folder(p)
        try:
            group = zarr.open_group(str(tmp), mode="w")
            chunks = (min(m, rows_per_chunk or 65536), min(n, samples_per_chunk or n))
            arr = zarr.open_array(str(tmp / "counts"), mode="w", shape=(m, n), chunks=chunks, dtype="f8")
            data.astype("f8").rechunk(chunks).to_zarr(arr)
            group.attrs["sample_names"] = [f"Sample_{k + 1}" for k in range(n)]
            publish_folder(tmp, p)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return p
    matrix = open_matrix(data)
    counts = CountData(np.asarray(matrix.values), list(matrix.sample_names), matrix.ranges)
    return save_count_data(counts, path, rows_per_chunk=rows_per_chunk, samples_per_chunk=samples_per_chunk)


class WorkStore:
    """The folder of Zarr arrays a run reads and writes (``path`` must be visible to every worker); see
    ``work_store``."""

    def __init__(self, path) -> None:
        self.path = str(path)

    def __getstate__(self) -> dict:
        return {"path": self.path}  # a copy sent to a worker never removes the folder

    def discard(self) -> None:
        """Remove the folder now if it is a temporary one of ``work_store`` (a run that failed)."""
        remove = _TEMPORARY.pop(id(self), None)
        if remove is not None:
            remove()

    def path_of(self, name: str) -> str:
        """The folder of array ``name`` in the store."""
        return os.path.join(self.path, name)

    def create(self, name: str, shape: tuple, chunks: tuple, dtype, compress: bool = True) -> None:
        """A new array ``name`` (replacing any); ``compress=False`` stores raw chunks (real-valued matrices
        hardly compress, and raw chunks are read and written several times faster)."""
        create_array(self.path_of(name), shape, chunks, dtype, compress=compress)

    def write(self, name: str, selection, value: np.ndarray) -> None:
        _zarr().open_array(self.path_of(name), mode="r+")[selection] = value

    def read(self, name: str, selection=slice(None)) -> np.ndarray:
        """The selection as a float64 (or stored dtype) array in column-major order."""
        return np.asfortranarray(_zarr().open_array(self.path_of(name), mode="r")[selection])

    def dask(self, name: str):
        return _dask_array().from_zarr(self.path_of(name))

    def exists(self, name: str) -> bool:
        return os.path.exists(self.path_of(name))


#: id(WorkStore) -> the finalizer removing its temporary folder (``work_store``)
_TEMPORARY: dict[int, weakref.finalize] = {}
_STEM = "gcnmops-dask"


def work_store(store=None, keep_work: bool = False) -> WorkStore:
    """A run's working store: the folder ``store`` as given (the caller's, never removed), else a new private
    folder in the temporary folder, removed by ``discard`` (a run that failed), once no object holds its
    WorkStore any more (the run's result holds it), or at exit at the latest; ``keep_work=True``: kept there.
    Temporary stores of runs killed outright (process gone) are removed first."""
    if store is not None:
        return WorkStore(store)
    parent = Path(tempfile.gettempdir())
    remove_stale(parent, stem=_STEM)
    if keep_work:  # a name remove_stale does not take
        return WorkStore(tempfile.mkdtemp(prefix=_STEM + "-"))
    work = WorkStore(temp_folder(parent / _STEM, stem=_STEM))
    _TEMPORARY[id(work)] = weakref.finalize(work, _remove_work, id(work), work.path)
    return work


def _remove_work(key: int, path: str) -> None:
    _TEMPORARY.pop(key, None)
    shutil.rmtree(path, ignore_errors=True)


__all__ = ["Matrix", "open_matrix", "save_counts", "WorkStore", "work_store"]
