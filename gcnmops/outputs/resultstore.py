"""The result store: the per-region matrices of a streamed run (``gcnmops run --stream``), written a chromosome at
a time into a Zarr group under a temporary name in the output folder and renamed to ``matrices.zarr`` with the
other result files (:meth:`ResultStore.publish`); :class:`StoredResult` reads one back (``read_result``).

Chunks, Zarr arrays and the regions' file are made as in a count store (``io.store``).
"""
from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..files import remove_stale, temp_folder, umask
from ..io.atomic import signals_held
from ..io.store import CHUNK_BYTES, RANGES_FILE, WRITE_THREADS, create_array, read_block, write_rows, zarr_module
from ..result import MATRIX_SLOTS, CNVDetectionResult, Result

#: the result store's folder in an output folder (params.json's ``matrixStore`` names it)
MATRIX_STORE = "matrices.zarr"
#: the per-region matrices a streamed run may keep (file stems of outputs.writers.MATRICES, and the posteriors);
#: ``integer_copy_number`` (the model's copy-number class per region, int8 indices) is always kept
STREAM_MATRICES = ("normalized_data", "local_assessments", "individual_call", "integer_copy_number", "ini_call",
                   "params_L", "params_A", "posterior_probs")
ALWAYS_KEPT = ("integer_copy_number",)
#: the folder inside the store's temporary folder holding the matrices a run reads back but does not keep
SCRATCH = ".scratch"


class ResultStore:
    """The matrices of a streamed result: a Zarr group written under a temporary name in ``outdir``.

    ``shapes``: name -> (shape, dtype) of each kept matrix (STREAM_MATRICES' names); rows are chunked by
    about CHUNK_BYTES, at most ``max_rows`` (a chromosome's: a write then never holds a chunk larger than what it
    writes), and the last axis by at most 256, or ``columns`` (the width of the groups of samples read back by
    ``columns``: each chunk then read once). ``write(name, a, b, value)`` stores rows a:b; ``write_behind(writes)``
    runs a chromosome's writes on a background thread, one chromosome at a time (``wait``); ``columns`` reads
    them back a group of samples at a time; ``publish`` and ``abort`` wait for them first (nothing is written into
    the store after either). The names of ``shapes`` in ``scratch`` are written and read back during the run but
    not kept: ``publish`` removes them."""

    def __init__(self, outdir: Path, shapes: dict, attrs: dict, gr: pd.DataFrame, max_rows: int | None = None,
                 scratch=(), columns: int | None = None):
        self.outdir = Path(outdir)
        remove_stale(self.outdir, stem=f".{MATRIX_STORE}")  # of a streamed run killed outright
        self.tmp = temp_folder(self.outdir / MATRIX_STORE)
        self.old: Path | None = None
        self._pool: ThreadPoolExecutor | None = None  # the background writer (write_behind)
        self._thread_name = f"gcnmops-store-{id(self):x}"
        self._behind: Future | None = None
        self._bands: ThreadPoolExecutor | None = None  # the threads of one write's row bands
        zarr = zarr_module()
        group = zarr.open_group(str(self.tmp), mode="w")
        self.arrays = {}
        for name, (shape, dtype) in shapes.items():
            dtype = np.dtype(dtype)
            across = tuple(min(s, 256) for s in shape[1:])
            if across and columns:
                across = across[:-1] + (max(1, min(across[-1], columns)),)
            rows = min(shape[0], max_rows or shape[0],
                       max(1024, CHUNK_BYTES // (dtype.itemsize * int(np.prod(across)))))
            chunks = (rows,) + across
            compress = name in ("individual_call", "integer_copy_number")  # runs of equal values
            path = self.tmp / SCRATCH / name if name in scratch else self.tmp / name
            self.arrays[name] = create_array(str(path), shape, chunks, dtype, compress=compress)
        group.attrs.update(attrs)
        gr.to_parquet(self.tmp / RANGES_FILE, index=False)

    def write(self, name: str, a: int, b: int, value: np.ndarray) -> None:
        """Rows a:b of ``name`` (``value``: b - a rows), in bands of whole row chunks written in threads
        (``io.store.write_rows``)."""
        if self._bands is None:
            self._bands = ThreadPoolExecutor(max_workers=WRITE_THREADS, thread_name_prefix=self._thread_name + "w")
        write_rows(self.arrays[name], a, b, value, self._bands)

    def columns(self, name: str, c0: int, c1: int, order: str = "C") -> np.ndarray:
        """Samples c0:c1 of the matrix ``name`` over every region (in ``order``), once the background writes are
        done."""
        self.wait()
        array = self.arrays[name]
        return read_block(array, 0, array.shape[0], c0, c1, order=order)

    def write_behind(self, writes: Callable[[], None]) -> None:
        """Run ``writes`` (a chromosome's ``write`` calls) on the background writer once the writes handed over
        before are done (waited for here: one chromosome in flight at most); their error is raised here."""
        self.wait()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._thread_name)
        self._behind = self._pool.submit(writes)

    def wait(self) -> None:
        """Wait for the background writes; raise their error."""
        behind, self._behind = self._behind, None
        if behind is not None:
            behind.result()

    def _stop(self) -> None:
        """The background writer ended (its running writes finished, the others dropped)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._bands is not None:
            self._bands.shutdown(wait=True)
            self._bands = None
        for thread in threading.enumerate():  # a signal raised inside submit() can leave its worker unknown to the pool
            if thread.name.startswith(self._thread_name + "_"):
                thread.join()

    def publish(self) -> None:
        """Rename the store to ``matrices.zarr`` (an earlier one is moved aside; ``drop_old`` removes it), once
        the background writes are done."""
        self.wait()
        self._stop()
        shutil.rmtree(self.tmp / SCRATCH, ignore_errors=True)
        os.chmod(self.tmp, 0o777 & ~umask())  # mkdtemp made it private; the folder as the umask says
        final = self.outdir / MATRIX_STORE
        if final.exists():
            self.old = temp_folder(final, "old")
            os.rmdir(self.old)
            os.replace(final, self.old)
        os.replace(self.tmp, final)

    def unpublish(self) -> None:
        """Undo ``publish`` (the other result files could not be renamed)."""
        final = self.outdir / MATRIX_STORE
        if final.exists() and not self.tmp.exists():
            os.replace(final, self.tmp)
        if self.old is not None and self.old.exists():
            os.replace(self.old, final)
            self.old = None

    def drop_old(self) -> None:
        if self.old is not None:
            shutil.rmtree(self.old, ignore_errors=True)

    def abort(self) -> None:
        """Remove the store, once the background writer has stopped (Ctrl-C and SIGTERM held meanwhile)."""
        with signals_held():
            self._stop()
            shutil.rmtree(self.tmp, ignore_errors=True)


#: the result slot (or "L" / "A" of the params) each of STREAM_MATRICES fills
_SLOTS = {"integer_copy_number": "cn_index", "params_L": "L", "params_A": "A"}


@dataclass(repr=False)
class StoredResult(Result):
    """A streamed result (:class:`gcnmops.result.Result`): the call tables in memory, the kept per-region
    matrices Zarr arrays of ``store`` read on demand (those not kept: None). ``matrix(name)`` by the names of
    STREAM_MATRICES; ``compute()`` loads everything into a :class:`gcnmops.CNVDetectionResult` (every matrix
    must have been kept)."""

    store: str = ""
    kept: list[str] = field(default_factory=list)

    @classmethod
    def of_store(cls, store: str, kept: list[str], *, params: dict, **slots) -> "StoredResult":
        """The result whose ``kept`` matrices are the arrays of the Zarr store ``store``."""
        zarr = zarr_module()
        arrays = {_SLOTS.get(n, n): zarr.open_array(os.path.join(store, n), mode="r") for n in kept}
        matrices = {n: arrays.get(n) for n in MATRIX_SLOTS}
        params = dict(params, L=matrices.pop("L"), A=matrices.pop("A"))
        return cls(**matrices, params=params, **slots, store=store, kept=list(kept))

    def matrix(self, name: str):
        """The Zarr array of a kept matrix (slice it to read rows: ``matrix("local_assessments")[a:b]``)."""
        if name not in self.kept:
            raise InputError(f"The matrix {name!r} was not kept by this streamed run (kept: {', '.join(self.kept)}); "
                             "run again with it in --keep (keep= in Python).")
        return self.slot(_SLOTS.get(name, name))

    def compute(self) -> CNVDetectionResult:
        """The whole result in this process (numpy arrays, column-major): for results that fit in memory."""
        needed = [n for n in STREAM_MATRICES if n != "posterior_probs"]
        missing = [n for n in needed if n not in self.kept]
        if missing:
            raise InputError(f"compute() needs every matrix; this streamed run did not keep {', '.join(missing)}. "
                             "Read the kept ones with matrix(name), or run again with --keep all.")
        return self.rows()


def open_stored_result(folder: Path, params: dict, tables: dict, sample_names: list[str]) -> StoredResult:
    """The StoredResult of an output folder whose params.json names a matrix store (outputs.results.read_result)."""
    store = Path(folder) / params.get("matrixStore", MATRIX_STORE)
    if not store.is_dir():
        raise InputError(f"{store} is missing: the streamed result's matrices were not written (or moved away).")
    group = zarr_module().open_group(str(store), mode="r")
    kept = [str(k) for k in group.attrs.get("kept", [])]
    gr = pd.read_parquet(store / RANGES_FILE)
    gr["seqnames"] = gr["seqnames"].astype(object)
    params = dict(params)
    params["cov"] = np.array([params["cov"][s] for s in sample_names], dtype=np.float64)
    return StoredResult.of_store(str(store), kept, gr=gr, params=params, sample_names=sample_names,
                                 ranged=bool(group.attrs.get("ranged", True)), **tables)


__all__ = ["ResultStore", "StoredResult", "open_stored_result", "MATRIX_STORE", "STREAM_MATRICES", "ALWAYS_KEPT"]
