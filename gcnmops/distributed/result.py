"""DistributedResult: a cn.mops result whose matrices are Dask arrays (over the run's store, or read into this
process), and how a block's matrices are stored."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..result import CNVDetectionResult, Result, read_rows
from .layout import Layout
from .store import WorkStore

#: the result's matrices (slot, or "L" / "A" of the params) and whether their stored chunks are compressed
#: (real-valued matrices hardly compress and raw chunks are read and written several times faster; the
#: piecewise-constant individual calls and the labels compress well)
MATRICES = {"normalized_data": False, "local_assessments": False, "individual_call": True, "ini_call": False,
            "cn_index": True, "posterior_probs": False, "L": False, "A": False}


#: the samples' axis of each matrix (None: whole in every chunk)
SAMPLE_AXIS = {"normalized_data": 1, "local_assessments": 1, "individual_call": 1, "ini_call": None, "cn_index": 1,
               "posterior_probs": 2, "L": None, "A": None}


def chunks_of(name: str, shape: tuple, rows, k: int) -> tuple:
    """Chunks of matrix ``name`` of ``shape``: ``rows`` (a size, or each chunk's) x ``k`` samples, other axes whole."""
    return (rows,) + tuple(k if axis == SAMPLE_AXIS[name] else s for axis, s in enumerate(shape) if axis > 0)


def matrices_of(result: CNVDetectionResult, rows: int, k: int) -> dict[str, tuple[np.ndarray, tuple, bool]]:
    """A block's matrices as stored: {name: (value, chunks, compressed)}; ``rows`` x ``k`` samples a chunk."""
    out = {}
    for name, compress in MATRICES.items():
        value = result.slot(name)
        if value is not None:
            out[name] = (value, chunks_of(name, value.shape, rows, k), compress)
    return out


@dataclass(repr=False)
class DistributedResult(Result):
    """cn.mops's result slots (:class:`gcnmops.result.Result`), the matrices as Dask arrays: the blocks' Zarr
    arrays of ``store`` (chunks: rows x sample groups within each block of whole chromosomes), read lazily, or
    arrays in this process (``store`` empty: a temporary store read before it was removed). ``params['cov']``
    (N,) numpy; ``gr``, ``segmentation``, ``cnvs``, ``cnvr``: pandas tables as in the single-process result.
    """

    store: str = ""
    #: slot name (or "L", "A") -> its numpy array, where the Dask array is over one (a temporary store read here)
    held: dict = field(default_factory=dict, repr=False)

    @classmethod
    def of_store(cls, work: WorkStore, layout: Layout, *, params: dict, posteriors: bool, **tables) -> \
            "DistributedResult":
        """The result of a run whose blocks wrote their matrices into ``work``: Dask arrays over it, or (a
        temporary store) its matrices read into this process."""
        names = [name for name in MATRICES if posteriors or name != "posterior_probs"]
        held = {name: _read_blocks(work, layout, name) for name in names} if work.temporary else {}
        matrices = {name: _dask_of(work, layout, name, held.get(name)) for name in names}
        params = dict(params, L=matrices.pop("L"), A=matrices.pop("A"))
        return cls(params=params, posterior_probs=matrices.pop("posterior_probs", None), **matrices, **tables,
                   store="" if work.temporary else work.path, held=held)

    @staticmethod
    def matrix_of_store(work: WorkStore, layout: Layout, name: str):
        """Matrix ``name`` of the blocks in ``work`` as a Dask array (read into this process from a temporary
        store)."""
        return _dask_of(work, layout, name, _read_blocks(work, layout, name) if work.temporary else None)

    def read(self, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        """Rows ``rows`` (None: all) of matrix ``name`` here: from the array in this process, else the store."""
        held = self.held.get(name)
        return read_rows(self.slot(name) if held is None else held, rows)

    def calc_integer_copy_numbers(self) -> "DistributedResult":
        """cn.mops's calcIntegerCopyNumbers (:func:`gcnmops.calc_integer_copy_numbers`: it reads only the
        regions around the CNVs); a new DistributedResult with integer labels in segmentation, cnvs, cnvr."""
        from ..calls.integer import calc_integer_copy_numbers

        return calc_integer_copy_numbers(self)


def _read_blocks(work: WorkStore, layout: Layout, name: str) -> np.ndarray:
    """Matrix ``name`` of every block of ``work`` read here (the store is visible to this process; nothing is
    gathered through a worker) into one column-major array."""
    import zarr

    out = None
    for k, (b0, b1) in enumerate(layout.blocks):
        array = zarr.open_array(work.path_of(name, k), mode="r")
        if out is None:
            out = np.empty((layout.blocks[-1][1],) + array.shape[1:], dtype=array.dtype, order="F")
        out[b0:b1] = array[...]
    return out


def _dask_of(work: WorkStore, layout: Layout, name: str, held: np.ndarray | None):
    """Matrix ``name`` as a Dask array: over ``held`` (chunked as stored), else over the blocks' Zarr arrays."""
    import dask.array as da

    if held is None:
        return da.concatenate([work.dask(name, k) for k in range(len(layout.blocks))], axis=0)
    return da.from_array(held, chunks=chunks_of(name, held.shape, layout.row_chunks(), layout.samples), name=False)


__all__ = ["DistributedResult"]
