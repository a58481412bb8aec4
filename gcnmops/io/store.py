"""Chunked count matrices on disk, read a chromosome at a time.

Count stores (:func:`open_count_store`):

- a Zarr group as ``gcnmops convert`` / ``gcnmops.distributed.save_counts`` write it: array ``counts``
  (regions x samples, chunked by rows and samples; an integer dtype when every count is a whole number,
  else float64), attributes ``sample_names`` and ``col_sums`` (each sample's total count, exact), the
  regions in ``ranges.parquet`` (seqnames, start, end; absent for a bare matrix);
- a Parquet table (seqnames/start/end + one column per sample), read by row groups.

Rows of a chromosome must be contiguous and in increasing start order (``gcnmops convert`` sorts a table
as ``gcnmops.read_counts`` does). Counts stay in their stored dtype until a chromosome is taken
(:meth:`CountStore.chromosome`: validated, float64, column-major).

The result store of a streamed run is ``gcnmops.outputs.resultstore``'s (chunked and made as here).
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import (CountData, check_names, chromosome_blocks, make_count_data, rows_grouped, unsorted_rows,
                    usable_cores, validate_counts, validate_ranges)
from ..errors import InputError
from ..files import check_target, holds_only, publish_folder, remove_stale, temp_folder
from .coordinates import AUTO

#: the Zarr array of the counts in a count store, and the file of its regions beside it
COUNTS = "counts"
RANGES_FILE = "ranges.parquet"
#: bytes of one stored chunk of a count store or a result store (about)
CHUNK_BYTES = 16 << 20
_INT32_MAX = np.iinfo(np.int32).max


def zarr_module():
    try:
        import zarr
    except ImportError:  # pragma: no cover - the dask extra installs it
        raise InputError("Chunked stores need zarr: pip install 'gcnmops[dask]' (or pip install zarr).") from None
    return zarr


def create_array(path: str, shape: tuple, chunks: tuple, dtype, compress: bool = True, checksum: bool = False):
    """A new Zarr array at ``path`` (replacing any); ``compress=False`` stores raw chunks (real-valued
    matrices hardly compress, and raw chunks are read and written several times faster); ``checksum``: each
    chunk carries the CRC32 of its values (a damaged chunk is an error when read, not other numbers)."""
    zarr = zarr_module()
    if int(zarr.__version__.split(".")[0]) >= 3:  # zarr 3's spelling: the checksum a bytes codec after zstd
        from zarr.codecs import Crc32cCodec, ZstdCodec

        codecs = ([ZstdCodec()] if compress else []) + ([Crc32cCodec()] if checksum else [])
        return zarr.create_array(store=path, shape=shape, chunks=chunks, dtype=dtype, overwrite=True,
                                 compressors=codecs or None)
    extra = {"filters": [__import__("numcodecs").CRC32()]} if checksum else {}
    if compress:
        return zarr.open_array(path, mode="w", shape=shape, chunks=chunks, dtype=dtype, **extra)
    return zarr.open_array(path, mode="w", shape=shape, chunks=chunks, dtype=dtype, compressor=None, **extra)


def is_zarr_path(p: Path) -> bool:
    """A Zarr store's folder (by name or by its metadata files)."""
    return p.suffix == ".zarr" or (p.is_dir() and any((p / f).exists() for f in (".zarray", ".zgroup", "zarr.json")))


def is_count_store(path: Path) -> bool:
    """True when the folder ``path`` is a count store gcnmops wrote (``convert``, ``save_counts``): a Zarr group
    naming its samples that holds nothing but its counts array and regions (``CountStoreWriter`` replaces only
    such a folder)."""
    attrs = None
    for name, key in ((".zattrs", None), ("zarr.json", "attributes")):  # zarr 2, zarr 3
        try:
            meta = json.loads((path / name).read_text())
        except (OSError, ValueError):
            continue
        attrs = meta.get(key) if key and isinstance(meta, dict) else meta
        break
    return isinstance(attrs, dict) and "sample_names" in attrs and holds_only(path, _COUNT_STORE_FILES.match)


#: the files of a count store, relative names (zarr 2 and zarr 3 layouts)
_COUNT_STORE_FILES = re.compile(r"^(\.zgroup|\.zattrs|\.zmetadata|zarr\.json|" + re.escape(RANGES_FILE) + r"|" +
                                COUNTS + r"(/(\.zarray|\.zattrs|zarr\.json|\d+(\.\d+)*|c(/\d+)*))?)$")


def store_chunks(m: int, n: int, itemsize: int) -> tuple[int, int]:
    """(rows, samples) of a chunk of about CHUNK_BYTES: at most 256 samples (a column pass reads only its
    samples' chunks), whole rows otherwise."""
    k = max(1, min(n, 256))
    rows = max(1024, CHUNK_BYTES // (itemsize * k))
    return min(m, rows), k


def integral_dtype(max_count: float, whole: bool) -> np.dtype:
    """The dtype counts are stored in: int32 (whole numbers up to 2^31 - 1), int64 (larger whole numbers),
    else float64."""
    if not whole:
        return np.dtype(np.float64)
    return np.dtype(np.int32) if max_count <= _INT32_MAX else np.dtype(np.int64)


def counts_kind(values: np.ndarray) -> tuple[bool, float]:
    """(every count a whole number, the largest count) of validated counts."""
    if values.size == 0:
        return True, 0.0
    if values.dtype.kind in "iub":
        return True, float(values.max())
    return bool(np.all(values == np.floor(values))), float(values.max())


#: the group attribute in which a count store records its counts array's layout as written (``counts_layout``)
LAYOUT = "counts_layout"


def counts_layout(array) -> dict:
    """The layout of a Zarr array as a count store records it: dtype, order, shape and chunks."""
    return {"dtype": np.dtype(array.dtype).str, "order": array.order, "shape": [int(s) for s in array.shape],
            "chunks": [int(c) for c in array.chunks]}


def has_checksums(array) -> bool:
    """Whether each chunk of the Zarr array carries a checksum of its values (CRC32 in zarr 2, CRC32C in zarr 3)."""
    codecs = list(getattr(array, "filters", None) or []) + list(getattr(array, "compressors", None) or [])
    return any(type(c).__name__ in ("CRC32", "Crc32cCodec") for c in codecs)


def check_zarr_counts(array, folder: Path, where: str, attrs=None) -> None:
    """InputError unless the Zarr array of counts ``array`` (stored in ``folder``; ``attrs``: its group's
    attributes, if any) is what its metadata says: two-dimensional numbers; the layout its group recorded when
    it was written (``counts_layout``: a ``.zarray`` edited afterwards reads other values from the same chunks);
    integers where the group holds integer totals; every chunk present (zarr reads a missing one as its fill
    value, zeros) and, uncompressed, of its full size. ``where`` names the store in the messages."""
    if array.ndim != 2:
        raise InputError(f"The counts of {where} must be two-dimensional (regions x samples), got shape {array.shape}.")
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        raise InputError(f"The counts of {where} are not numbers (dtype {array.dtype}).")
    attrs = dict(attrs or {})
    rewrite = "write the store again (gcnmops convert, gcnmops.distributed.save_counts)"
    recorded = attrs.get(LAYOUT)
    if recorded is not None and recorded != counts_layout(array):
        raise InputError(f"The counts array of {where} does not match the layout recorded when it was written "
                         f"({recorded}; its metadata now says {counts_layout(array)}): its .zarray was changed, "
                         f"and its chunks would be read as other numbers. Restore it, or {rewrite}.")
    sums = attrs.get("col_sums")
    if sums is not None:
        if np.ndim(sums) != 1 or len(sums) != array.shape[1]:
            raise InputError(f"{where} records {np.size(sums)} sample totals (col_sums) for {array.shape[1]} samples: "
                             f"{rewrite}.")
        if array.dtype.kind not in "iu":
            raise InputError(f"{where} records integer sample totals, but its counts array says dtype {array.dtype}: "
                             f"its .zarray was changed, and its chunks would be read as other numbers. {rewrite}.")
    missing, total, first = _missing_chunks(array, folder)
    if missing:
        (r0, r1), (c0, c1) = first
        raise InputError(f"{where} lacks {missing} of the {total} chunks of its counts (the first: rows {r0 + 1}-{r1}, "
                         f"samples {c0 + 1}-{c1}); a missing chunk would be read as zeros. Is the copy complete? "
                         f"Copy it again, or {rewrite}.")


def _missing_chunks(array, folder: Path):
    """(chunks missing, chunks in all, (rows, samples) of the first missing or short chunk) of a Zarr array
    stored in ``folder``; an uncompressed chunk file shorter than a chunk counts as missing."""
    total = int(np.prod(array.cdata_shape))
    try:
        meta = json.loads((folder / ".zarray").read_text())
    except (OSError, ValueError):  # not zarr 2's layout: zarr's own count of the chunks present
        return max(0, total - int(array.nchunks_initialized)), total, ((0, 0), (0, 0))
    sep = meta.get("dimension_separator") or "."
    raw = meta.get("compressor") is None and not meta.get("filters")
    size = int(np.prod(array.chunks)) * np.dtype(array.dtype).itemsize
    missing, first = 0, None
    (rows, cols), (r, c) = array.cdata_shape, array.chunks
    for i in range(rows):
        for j in range(cols):
            f = folder / f"{i}{sep}{j}"
            try:
                ok = f.is_file() and (not raw or f.stat().st_size == size)
            except OSError:
                ok = False
            if not ok:
                missing += 1
                if first is None:
                    first = ((i * r, min(array.shape[0], (i + 1) * r)), (j * c, min(array.shape[1], (j + 1) * c)))
    return missing, total, first


# ------------------------------------------------------------------------------------------------ reading
@dataclass
class CountStore:
    """A count matrix on disk (see the module docstring): ``m`` regions x ``n`` samples of ``dtype``.

    ``ranges``: seqnames/start/end (None for a bare matrix: the regions are rows of "undef"); ``blocks``:
    (chromosome, first row, end row) in row order; ``col_sums``: each sample's total count (float64, exact)
    when the store holds them."""

    path: Path
    kind: str
    sample_names: list[str]
    ranges: pd.DataFrame | None
    dtype: np.dtype
    shape: tuple[int, int]
    col_sums: np.ndarray | None = None
    _columns: list | None = None  # Parquet: the sample columns' names in the file

    @property
    def blocks(self) -> list[tuple[str, int, int]]:
        if self.ranges is None:
            return [("undef", 0, self.shape[0])]
        return self.__dict__.setdefault("_blocks", chromosome_blocks(self.ranges["seqnames"]))

    def genomic_ranges(self) -> pd.DataFrame:
        """The ``gr`` table of every region (as CountData.genomic_ranges)."""
        return CountData(np.empty((self.shape[0], 0)), [], self.ranges).genomic_ranges()

    def rows(self, a: int, b: int) -> np.ndarray:
        """Counts of rows a:b, (b - a, n), in the stored dtype (Zarr: the chunks read in threads, ``read_block``)."""
        if self.kind == "zarr":
            return read_zarr(str(self.path / COUNTS), (slice(a, b), slice(None)), lambda arr: read_block(arr, a, b))
        import pyarrow.parquet as pq

        f = pq.ParquetFile(self.path)
        meta = f.metadata
        groups, first, at = [], None, 0
        for g in range(meta.num_row_groups):
            n = meta.row_group(g).num_rows
            if at < b and at + n > a:
                groups.append(g)
                first = at if first is None else first
            at += n
        table = f.read_row_groups(groups, columns=self._columns)
        frame = table.slice(a - first, b - a).to_pandas()
        return frame.to_numpy()

    def columns(self, c0: int, c1: int, dtype=None, order: str = "C") -> np.ndarray:
        """Counts of samples c0:c1 over every region, (m, c1 - c0), in ``dtype`` (default: the stored one) and
        ``order`` (Zarr: ``read_block``, which converts chunk by chunk in threads)."""
        if self.kind == "zarr":
            m = self.shape[0]
            return read_zarr(str(self.path / COUNTS), (slice(None), slice(c0, c1)),
                             lambda arr: read_block(arr, 0, m, c0, c1, dtype, order))
        import pyarrow.parquet as pq

        table = pq.read_table(self.path, columns=self._columns[c0:c1]).to_pandas().to_numpy()
        return np.asarray(table, dtype=dtype, order=order)

    def chromosome(self, name: str, a: int, b: int, values: np.ndarray | None = None) -> CountData:
        """Rows a:b (one chromosome) as a CountData: counts validated (cn.mops's checks), float64, column-major.
        ``values``: those rows already read (``rows(a, b)``)."""
        values = self.rows(a, b) if values is None else values
        ranges = None if self.ranges is None else self.ranges.iloc[a:b].reset_index(drop=True)
        where = f"read count matrix (chromosome {name}, rows {a + 1}-{b})"
        counts = validate_counts(values, where, sample_names=self.sample_names, ranges=ranges)
        return CountData(counts, list(self.sample_names), ranges)

    def exact_col_sums(self, group_bytes: int) -> np.ndarray:
        """Each sample's total count as ``normalize_chromosomes`` sums the in-memory matrix (float64 column sums):
        the stored ones, else summed here (whole numbers exactly, row chunk by row chunk; other values column
        group by column group, in numpy's order over whole columns)."""
        if self.col_sums is not None:
            return self.col_sums
        m, n = self.shape
        if self.dtype.kind in "iub":
            sums = np.zeros(n, dtype=np.int64)
            step = max(1, group_bytes // max(1, n * self.dtype.itemsize))
            for a in range(0, m, step):
                sums += self.rows(a, min(m, a + step)).sum(axis=0, dtype=np.int64)
            return sums.astype(np.float64)
        out = np.empty(n)
        for c0, c1 in self.column_groups(group_bytes):
            out[c0:c1] = np.asfortranarray(self.columns(c0, c1), dtype=np.float64).sum(axis=0)
        return out

    def column_groups(self, group_bytes: int) -> list[tuple[int, int]]:
        """Sample groups whose float64 columns take about ``group_bytes`` (one sample at least)."""
        m, n = self.shape
        k = max(1, min(n, group_bytes // max(1, 8 * m)))
        return [(c, min(n, c + k)) for c in range(0, n, k)]


def read_zarr(path: str, selection: tuple[slice, slice], read=None) -> np.ndarray:
    """``array[selection]`` of the 2-D Zarr array at ``path`` (``read(array)`` instead, when given); a chunk
    that cannot be decoded (cut, overwritten, another codec's) is an InputError naming the store and the chunk,
    not the codec's traceback."""
    array = zarr_module().open_array(path, mode="r")
    try:
        return read(array) if read is not None else np.asarray(array[selection])
    except InputError:
        raise
    except Exception as err:  # noqa: BLE001 - each codec raises its own (RuntimeError, ValueError, zlib.error)
        raise InputError(f"The Zarr array {path} is damaged: {_bad_chunk(array, selection)} cannot be read "
                         f"({type(err).__name__}: {err}). Write the store again (gcnmops convert).") from None


def _bad_chunk(array, selection: tuple[slice, slice]) -> str:
    """The first chunk of ``array`` within ``selection`` that cannot be read, as its key ("chunk 0.1")."""
    if not all(isinstance(s, slice) for s in selection):
        return "a chunk"
    (r0, r1, _), (c0, c1, _) = (s.indices(size) for s, size in zip(selection, array.shape))
    rows, cols = array.chunks
    for i in range(r0 // rows, -(-r1 // rows)):
        for j in range(c0 // cols, -(-c1 // cols)):
            try:
                array[i * rows:(i + 1) * rows, j * cols:(j + 1) * cols]
            except Exception:  # noqa: BLE001
                return f"chunk {i}.{j} (rows {i * rows + 1}-{min((i + 1) * rows, array.shape[0])}, samples " \
                       f"{j * cols + 1}-{min((j + 1) * cols, array.shape[1])})"
    return "a chunk"


def chunk_cuts(a: int, b: int, step: int) -> list[int]:
    """a, the chunk boundaries (multiples of ``step``) inside (a, b), and b: the pieces of a:b that no two chunks
    share."""
    return [a] + list(range((a // step + 1) * step, b, step)) + [b]


#: threads writing rows of a stored matrix, a band of whole row chunks each (at most the usable cores): one thread
#: copying and writing raw chunks was the streamed run's bottleneck with several GPUs, and a Dask block's
WRITE_THREADS = 8


def write_rows(array, a: int, b: int, value: np.ndarray, pool: ThreadPoolExecutor | None = None) -> None:
    """Rows a:b of the Zarr ``array`` from ``value`` (b - a rows), in bands of whole row chunks written by up to
    WRITE_THREADS threads at once (no two bands share a chunk); ``pool``: the threads (default: made here)."""
    cuts = chunk_cuts(a, b, array.chunks[0])
    threads = min(WRITE_THREADS, usable_cores(), len(cuts) - 1)
    if threads <= 1:
        array[a:b] = value
        return
    bands = np.array_split(np.arange(len(cuts) - 1), threads)  # consecutive chunk rows per thread

    def band(ks: np.ndarray) -> None:
        lo, hi = cuts[ks[0]], cuts[ks[-1] + 1]
        array[lo:hi] = value[lo - a:hi - a]

    own = pool is None
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="gcnmops-rows") if own else pool
    try:
        for done in [pool.submit(band, ks) for ks in bands]:
            done.result()
    finally:
        if own:
            pool.shutdown()


def read_block(array, a: int, b: int, c0: int = 0, c1: int | None = None, dtype=None, order: str = "C") -> np.ndarray:
    """Rows a:b, columns c0:c1 (default: to the last) of a 2-D Zarr ``array`` (``order``, ``dtype``: default the
    array's), its chunks read, decompressed and copied into place (converted and, order "F", transposed on the way)
    in threads, one chunk a task: zarr 2 reads a selection's chunks one after another, and decompresses with
    blosc's own threads only in the main thread (a read-ahead thread would decompress on one core). File reads,
    blosc and the copies release the GIL. Memory: the block, plus a chunk per thread."""
    r, c = array.chunks
    c1 = array.shape[1] if c1 is None else c1
    dtype = array.dtype if dtype is None else np.dtype(dtype)
    rows, cols = chunk_cuts(a, b, r), chunk_cuts(c0, c1, c)
    tasks = [(r0, r1, k0, k1) for r0, r1 in zip(rows, rows[1:]) for k0, k1 in zip(cols, cols[1:])]
    if len(tasks) < 2 or usable_cores() < 2:
        return np.asarray(array[a:b, c0:c1], dtype=dtype, order=order)
    out = np.empty((b - a, c1 - c0), dtype=dtype, order=order)

    def read(task: tuple[int, int, int, int]) -> None:
        r0, r1, k0, k1 = task
        array.get_basic_selection((slice(r0, r1), slice(k0, k1)), out=out[r0 - a:r1 - a, k0 - c0:k1 - c0])

    with ThreadPoolExecutor(max_workers=min(usable_cores(), len(tasks)), thread_name_prefix="gcnmops-read") as pool:
        list(pool.map(read, tasks))
    return out


def open_count_store(path, *, min_samples: int = 2) -> CountStore:
    """The count store at ``path`` (a Zarr group or a Parquet file, see the module docstring), its names and
    regions checked (cn.mops's messages); InputError naming what to fix."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"Count store not found: {p}")
    if is_zarr_path(p):
        store = _open_zarr(p)
    elif p.suffix.lower() == ".parquet" and p.is_file():
        store = _open_parquet(p)
    else:
        raise InputError(f"{p} is not a chunked count store (a Zarr folder or a .parquet file): convert it first, "
                         f"gcnmops convert {p} -o counts.zarr")
    m, n = store.shape
    if m == 0:
        raise InputError(f"The count store {p} has no regions (rows).")
    stub = make_count_data(np.zeros((1, n)), store.sample_names, None, min_samples=min_samples)
    store.sample_names = list(stub.sample_names)
    if store.ranges is not None:
        store.ranges = checked_ranges(store.ranges, m, str(p))
    return store


def checked_ranges(ranges: pd.DataFrame, m: int, where: str,
                   fix: str = "convert the table with gcnmops convert (it sorts the rows)") -> pd.DataFrame:
    """``ranges`` validated, their chromosomes contiguous and each in increasing start order (a store is read a
    chromosome at a time; ``gcnmops convert`` sorts a table). ``where`` names the input and ``fix`` says how to
    sort it in the InputError."""
    ranges = validate_ranges(pd.DataFrame(ranges), m)
    blocks = chromosome_blocks(ranges["seqnames"])
    check_names([name for name, _, _ in blocks], kind="Chromosome name")
    if not rows_grouped(blocks):
        raise InputError(f"The rows of each chromosome must be contiguous in {where}: {fix}.")
    drops = unsorted_rows(ranges, blocks)
    if drops.size:  # would give segments ending before they start
        i = int(drops[0])
        raise InputError(f"The regions of {where} are not in increasing start order within their chromosome "
                         f"({drops.size} row(s) start before the row above, the first: row {i + 1}, "
                         f"{ranges['seqnames'][i]}:{ranges['start'][i]} after {ranges['start'][i - 1]}): {fix}.")
    return ranges


def open_counts_array(p: Path, bare: bool = False, how: str = "gcnmops convert or gcnmops.distributed.save_counts"):
    """(the Zarr counts array of the store ``p``, its group's attributes (a dict; empty for a bare array), the
    regions of ``ranges.parquet`` or None), checked (``check_zarr_counts``); ``bare``: a bare array at ``p`` is
    accepted too. Damaged metadata is an InputError saying to write the store again with ``how``."""
    zarr = zarr_module()
    try:
        node = zarr.open(str(p), mode="r")
        if hasattr(node, "shape"):
            if not bare:
                raise InputError(f"{p} is a bare Zarr array: a count store is a group with an array 'counts' (write "
                                 f"one with {how}).")
            check_zarr_counts(node, p, str(p))
            return node, {}, None
        if COUNTS not in node:
            raise InputError(f"The Zarr group {p} has no array 'counts' (write one with {how}).")
        arr, attrs = node[COUNTS], node.attrs.asdict()
        check_zarr_counts(arr, p / COUNTS, str(p), attrs)
        if "sample_names" in attrs and not has_checksums(arr):  # a count store of an earlier gcnmops
            _note_unchecked(p)
        sums = attrs.get("col_sums")
        if sums is not None:
            attrs["col_sums"] = np.asarray(sums, dtype=np.float64)
        ranges = pd.read_parquet(p / RANGES_FILE) if (p / RANGES_FILE).exists() else None
    except InputError:
        raise
    except Exception as e:  # zarr's PathNotFoundError, damaged metadata (JSON, codecs), a damaged ranges.parquet
        raise InputError(f"{p} holds no array 'counts' readable as Zarr ({type(e).__name__}: {e}): write the store "
                         f"with {how}.") from None
    return arr, attrs, ranges


_NOTED: set = set()


def _note_unchecked(p: Path) -> None:
    """Say once per store and process that its chunks carry no checksums."""
    key = str(Path(p).resolve())
    if key not in _NOTED:
        _NOTED.add(key)
        logging.getLogger("gcnmops").warning(
            f"{p} was written without chunk checksums (by an earlier gcnmops): a damaged chunk in it cannot be "
            f"told from counts. `gcnmops convert {p} -o NEW.zarr` writes a copy that carries them.")


def _open_zarr(p: Path) -> CountStore:
    arr, attrs, ranges = open_counts_array(p)
    return CountStore(p, "zarr", attrs.get("sample_names"), ranges, np.dtype(arr.dtype),
                      tuple(int(s) for s in arr.shape), attrs.get("col_sums"))


def _open_parquet(p: Path) -> CountStore:
    import pyarrow.parquet as pq

    from .columns import END_ALIASES, SEQNAMES_ALIASES, START_ALIASES, count_data_from_frame

    try:
        f = pq.ParquetFile(p)
    except Exception as e:  # pyarrow raises ArrowInvalid / OSError on a corrupt file
        raise InputError(f"Cannot read {p} as Parquet: {e}") from None
    names = [c for c in f.schema_arrow.names if not c.startswith("__index_level_")]
    lower = {c.lower(): c for c in names}
    coords = [next((lower[a] for a in aliases if a in lower), None)
              for aliases in (SEQNAMES_ALIASES, START_ALIASES, END_ALIASES)]
    head = next(f.iter_batches(batch_size=min(1000, max(1, f.metadata.num_rows)), columns=names)).to_pandas()
    log = logging.getLogger("gcnmops")
    silent = lambda record: False  # noqa: E731 - the probe's rows may be regrouped: said for the whole table below
    log.addFilter(silent)
    try:
        probe = count_data_from_frame(head, min_samples=1, source=str(p))  # the column rules of read_counts
    finally:
        log.removeFilter(silent)
    samples = list(probe.sample_names)
    if not set(samples) <= set(names):
        raise InputError(f"{p}: the sample columns could not be named from the file's header; convert it with "
                         "gcnmops convert.")
    ranges = None
    if all(c is not None for c in coords):
        table = pq.read_table(p, columns=coords).to_pandas(ignore_metadata=True)  # index-held ones as columns
        ranges = table.set_axis(["seqnames", "start", "end"], axis=1)
    dtypes = {np.dtype(f.schema_arrow.field(s).type.to_pandas_dtype()) for s in samples}
    dtype = np.result_type(*dtypes) if dtypes else np.dtype(np.float64)
    return CountStore(p, "parquet", samples, ranges, dtype, (int(f.metadata.num_rows), len(samples)), None,
                      _columns=samples)


# ------------------------------------------------------------------------------------------------ writing
class CountStoreWriter:
    """A count store written in parts of rows (``append``), under a temporary name beside ``path`` and renamed
    by ``close`` (an interrupted conversion leaves nothing). The counts' dtype is that of the first part
    (``integral_dtype``), widened (int64, float64) should a later part need it."""

    def __init__(self, path, n: int, sample_names: list[str], m_hint: int | None = None):
        self.path = check_target(path, is_count_store, "the count store")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(self.path.parent)  # of a conversion killed outright
        self.tmp = temp_folder(self.path)
        self.n, self.names, self.m_hint = n, list(sample_names), m_hint
        self.m = 0
        self.array = None
        self.ranges: list[pd.DataFrame] = []
        self.sums = np.zeros(n, dtype=np.int64)  # exact while the counts are whole numbers

    def append(self, counts: np.ndarray, ranges: pd.DataFrame | None) -> None:
        """Rows of validated counts (k, n) and their regions (None for a bare matrix)."""
        whole, top = counts_kind(counts)
        dtype = integral_dtype(top, whole)
        if self.array is None:
            rows, k = store_chunks(self.m_hint or 1 << 62, self.n, dtype.itemsize)
            self.array = create_array(str(self.tmp / COUNTS), (0, self.n), (rows, k), dtype, checksum=True)
        elif np.result_type(self.array.dtype, dtype) != self.array.dtype:
            self._widen(np.result_type(self.array.dtype, dtype))
        k = counts.shape[0]
        self.array.append(np.asarray(counts, dtype=self.array.dtype), axis=0)
        if self.array.dtype.kind in "iu":
            self.sums += counts.sum(axis=0, dtype=np.int64) if counts.dtype.kind in "iub" else \
                counts.astype(np.int64).sum(axis=0)
        self.m += k
        if ranges is not None:  # seqnames as codes: the regions of a long table take little memory
            part = ranges[["seqnames", "start", "end"]].reset_index(drop=True)
            self.ranges.append(part.assign(seqnames=pd.Categorical(part["seqnames"].astype(str))))

    def regions(self) -> pd.DataFrame | None:
        """The regions appended so far (seqnames as strings), or None for a bare matrix."""
        if not self.ranges:
            return None
        return pd.concat(self.ranges, ignore_index=True).astype({"seqnames": object})

    def _widen(self, dtype) -> None:
        """The counts written so far rewritten as ``dtype`` (a later part holds larger or non-whole counts)."""
        old = self.array
        path = str(self.tmp / (COUNTS + ".wide"))
        new = create_array(path, (0, self.n), old.chunks, dtype, checksum=True)
        for a in range(0, old.shape[0], old.chunks[0]):
            new.append(np.asarray(old[a:a + old.chunks[0]], dtype=dtype), axis=0)
        shutil.rmtree(self.tmp / COUNTS)
        os.replace(path, self.tmp / COUNTS)
        self.array = zarr_module().open_array(str(self.tmp / COUNTS), mode="r+")

    def close(self) -> Path:
        """Write the names, sums and regions; rename the store to ``path`` (replacing a store there)."""
        if self.array is None:
            raise InputError("No counts to write (the input has no rows).")
        group = zarr_module().open_group(str(self.tmp), mode="a")
        group.attrs["sample_names"] = self.names
        group.attrs[LAYOUT] = counts_layout(self.array)
        if self.array.dtype.kind in "iu":  # sums of other values: over whole columns when read (exact_col_sums)
            group.attrs["col_sums"] = [int(v) for v in self.sums]
        if self.ranges:
            self.regions().to_parquet(self.tmp / RANGES_FILE, index=False)
        publish_folder(self.tmp, self.path)
        return self.path

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def write_count_store(parts, path, sample_names: list[str], m_hint: int | None = None) -> Path:
    """A count store at ``path`` from ``parts``, an iterable of CountData (the rows in order; each validated);
    the regions must come grouped by chromosome and sorted (``checked_ranges``). All or nothing."""
    writer = None
    try:
        for part in parts:
            if writer is None:
                writer = CountStoreWriter(path, part.n_samples, sample_names, m_hint)
            writer.append(part.counts, part.ranges)
        if writer is None:
            raise InputError("No counts to write (the input has no rows).")
        if writer.ranges:
            checked_ranges(writer.regions(), writer.m, "the converted table")
        return writer.close()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise


def write_sorted_parts(parts, output) -> Path | None:
    """A count store at ``output`` from ``parts``, CountData of the rows in order (None for a part that shows the
    rows must be sorted first), all of the same samples; None, and nothing written, when the rows turn out not to be
    grouped by chromosome and sorted by start (or the samples change). Memory: one part (and the regions)."""
    writer = first = None
    try:
        for data in parts:
            if data is None:
                break
            if writer is None:
                first = data
                writer = CountStoreWriter(output, data.n_samples, list(data.sample_names))
            elif list(data.sample_names) != list(first.sample_names):
                break
            writer.append(data.counts, data.ranges)
        else:
            if writer is not None:
                ranges = writer.regions()
                if ranges is None or _grouped_and_sorted(ranges):
                    return writer.close()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if writer is not None:
        writer.abort()
    return None


#: rows per part when a count store is converted again
STORE_COPY_ROWS = 262_144


def convert_counts(input, output, *, min_samples: int = 2, rows: int | None = None,
                   coordinates: str = AUTO) -> tuple[Path, bool]:
    """``input`` (anything :func:`gcnmops.read_counts` reads, or a count store) as a count store at ``output``;
    returns (the store, whether it was read in parts). A count store and text and Parquet tables are read in parts
    of rows (memory: one part), tables when their rows come grouped by chromosome and sorted by start; other
    formats, and tables that must be sorted (as read_counts sorts them), are read whole. Whole-number counts are stored as int32/int64. ``coordinates``:
    as read_counts takes it."""
    from .readers import detect_format, read_count_parts, read_counts

    p = Path(input) if isinstance(input, (str, os.PathLike)) else None
    if p is not None and p.is_dir() and is_count_store(p):  # a store again (one of an earlier gcnmops: checksummed)
        store = open_count_store(p)
        step = rows or STORE_COPY_ROWS
        return write_sorted_parts((store.chromosome(name, a, min(b, a + step)) for name, b0, b in store.blocks
                                   for a in range(b0, b, step)), output), True
    if p is not None and p.is_file() and detect_format(p)[0] in (".tsv", ".txt", ".csv", ".parquet"):
        parts = read_count_parts(p, min_samples=min_samples, rows=rows, coordinates=coordinates)
        try:
            written = write_sorted_parts((data for data, reordered in parts), output)
        finally:
            parts.close()
        if written is not None:
            return written, True
        import logging

        logging.getLogger("gcnmops").warning(
            f"{p}: the rows are not grouped by chromosome and sorted by start: reading the whole table to sort it "
            "(memory: the whole matrix).")
    return save_count_data(read_counts(input, min_samples=min_samples, coordinates=coordinates), output), False


def _grouped_and_sorted(ranges: pd.DataFrame) -> bool:
    blocks = chromosome_blocks(ranges["seqnames"])
    return rows_grouped(blocks) and not unsorted_rows(ranges, blocks).size


def save_count_data(data: CountData, path, rows_per_chunk: int | None = None,
                    samples_per_chunk: int | None = None) -> Path:
    """A CountData as a count store at ``path`` (integer dtype when its counts are whole numbers)."""
    whole, top = counts_kind(data.counts)
    dtype = integral_dtype(top, whole)
    m, n = data.counts.shape
    rows, k = store_chunks(m, n, dtype.itemsize)
    writer = CountStoreWriter(path, n, list(data.sample_names), m)
    try:
        writer.array = create_array(str(writer.tmp / COUNTS), (m, n),
                                    (min(m, rows_per_chunk or rows), min(n, samples_per_chunk or k)), dtype,
                                    checksum=True)
        step = writer.array.chunks[0]
        for a in range(0, m, step):
            block = data.counts[a:a + step]
            writer.array[a:a + step] = block.astype(dtype) if dtype.kind in "iu" else block
            if dtype.kind in "iu":
                writer.sums += block.astype(np.int64).sum(axis=0)
        writer.m = m
        if data.ranges is not None:
            writer.ranges = [data.ranges[["seqnames", "start", "end"]].reset_index(drop=True)]
        return writer.close()
    except BaseException:
        writer.abort()
        raise



__all__ = ["CountStore", "open_count_store", "checked_ranges", "CountStoreWriter", "write_count_store",
           "save_count_data", "convert_counts", "write_sorted_parts", "chunk_cuts", "read_block", "read_zarr",
           "open_counts_array", "create_array", "is_zarr_path", "store_chunks", "integral_dtype", "counts_kind", "zarr_module",
           "check_zarr_counts", "counts_layout", "COUNTS", "LAYOUT", "RANGES_FILE", "CHUNK_BYTES"]
