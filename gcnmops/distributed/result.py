"""DistributedResult: a cn.mops result whose matrices are Dask arrays (over the run's store, or read into this
process), and how a block's matrices are stored."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..result import CNVDetectionResult, ResultCounts
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
        value = result.params[name] if name in ("L", "A") else getattr(result, name)
        if value is not None:
            out[name] = (value, chunks_of(name, value.shape, rows, k), compress)
    return out


@dataclass
class DistributedResult(ResultCounts):
    """cn.mops's result slots (as :class:`gcnmops.CNVDetectionResult`), the matrices as Dask arrays.

    ``normalized_data``, ``local_assessments`` (sINI), ``individual_call``: float64 (m, N); ``cn_index``:
    int8 (m, N) class indices; ``ini_call``: (m,); ``posterior_probs``: (m, n, N) or None; ``params['L']``,
    ``params['A']``: (m, n) Dask arrays, ``params['cov']`` (N,) numpy. The matrices are the blocks' Zarr arrays of
    ``store`` (chunks: rows x sample groups within each block of whole chromosomes), read lazily, or arrays in
    this process (``store`` empty: a temporary store read before it was removed). ``gr``, ``segmentation``,
    ``cnvs``, ``cnvr``: pandas tables as in the single-process result.
    """

    gr: pd.DataFrame
    normalized_data: object
    local_assessments: object
    individual_call: object
    ini_call: object
    cn_index: object
    posterior_probs: object | None
    params: dict
    segmentation: pd.DataFrame
    cnvs: pd.DataFrame
    cnvr: pd.DataFrame
    sample_names: list[str]
    ranged: bool = True
    store: str = ""
    timings: dict = field(default_factory=dict)
    #: slot name (or "L", "A") -> [(first row, end row, Zarr path)] of its blocks (a result over its store)
    paths: dict = field(default_factory=dict)
    #: slot name (or "L", "A") -> its numpy array (a result read into this process)
    held: dict = field(default_factory=dict, repr=False)
    #: what the call qualities need of the model, gathered by the blocks (calls.quality.CallEvidence)
    call_evidence: object = field(default=None, repr=False)

    @classmethod
    def of_store(cls, work: WorkStore, layout: Layout, *, params: dict, posteriors: bool, **tables) -> \
            "DistributedResult":
        """The result of a run whose blocks wrote their matrices into ``work``: Dask arrays over it, or (a
        temporary store) its matrices read into this process."""
        names = [k for k in MATRICES if posteriors or k != "posterior_probs"]
        matrices, paths, held = {}, {}, {}
        for name in names:
            if work.temporary:
                held[name] = _read_blocks(work, layout, name)
            else:
                paths[name] = [(b0, b1, work.path_of(name, k)) for k, (b0, b1) in enumerate(layout.blocks)]
            matrices[name] = _dask_of(work, layout, name, held.get(name))
        params = dict(params, L=matrices.pop("L"), A=matrices.pop("A"))
        return cls(params=params, posterior_probs=matrices.pop("posterior_probs", None), **matrices, **tables,
                   store="" if work.temporary else work.path, paths=paths, held=held)

    @staticmethod
    def matrix_of_store(work: WorkStore, layout: Layout, name: str):
        """Matrix ``name`` of the blocks in ``work`` as a Dask array (read into this process from a temporary
        store)."""
        return _dask_of(work, layout, name, _read_blocks(work, layout, name) if work.temporary else None)

    def compute(self) -> CNVDetectionResult:
        """The whole result in this process as a CNVDetectionResult (numpy arrays, column-major): for results
        that fit in memory (tests, moderate cohorts); large ones stay in the store."""
        values = dict(self.held) or {name: _read_paths(parts) for name, parts in self.paths.items()}
        params = dict(self.params, L=values.pop("L"), A=values.pop("A"))
        return CNVDetectionResult(
            gr=self.gr, params=params, segmentation=self.segmentation, cnvs=self.cnvs, cnvr=self.cnvr,
            sample_names=list(self.sample_names), ranged=self.ranged, timings=dict(self.timings),
            posterior_probs=values.pop("posterior_probs", None), call_evidence=self.call_evidence, **values)

    def calc_integer_copy_numbers(self) -> "DistributedResult":
        """cn.mops's calcIntegerCopyNumbers, reading only the rows around the CNVs from the store.

        :func:`gcnmops.calc_integer_copy_numbers` runs on a result cut down to the regions within one
        region of a CNV (every region overlapping a CNV is there, in the same order), so its answer is the
        single-process one. Returns a new DistributedResult with integer labels in segmentation, cnvs, cnvr.
        """
        from ..calls.integer import calc_integer_copy_numbers

        rows = _rows_near(self.gr, self.cnvs)
        params = dict(self.params)
        params["L"] = np.asfortranarray(self.params["L"][rows].compute(scheduler="threads"))
        params["A"] = np.empty((rows.size, 0))
        small = CNVDetectionResult(
            gr=self.gr.iloc[rows].reset_index(drop=True),
            normalized_data=np.asfortranarray(self.normalized_data[rows].compute(scheduler="threads")),
            local_assessments=np.empty((rows.size, 0)), individual_call=np.empty((rows.size, 0)),
            ini_call=np.empty(rows.size), cn_index=np.empty((rows.size, 0), dtype=np.int8), posterior_probs=None,
            params=params, segmentation=self.segmentation, cnvs=self.cnvs, cnvr=self.cnvr,
            sample_names=list(self.sample_names), ranged=self.ranged)
        out = calc_integer_copy_numbers(small)
        return replace(self, segmentation=out.segmentation, cnvs=out.cnvs, cnvr=out.cnvr)


def _read_blocks(work: WorkStore, layout: Layout, name: str) -> np.ndarray:
    """Matrix ``name`` of every block of ``work`` read into one column-major array."""
    return _read_paths([(b0, b1, work.path_of(name, k)) for k, (b0, b1) in enumerate(layout.blocks)])


def _read_paths(parts: list[tuple[int, int, str]]) -> np.ndarray:
    """The blocks' Zarr arrays [(first row, end row, path)] read here (the store is visible to this process;
    nothing is gathered through a worker) into one column-major numpy array."""
    import zarr

    out = None
    for b0, b1, path in parts:
        array = zarr.open_array(path, mode="r")
        if out is None:
            out = np.empty((parts[-1][1],) + array.shape[1:], dtype=array.dtype, order="F")
        out[b0:b1] = array[...]
    return out


def _dask_of(work: WorkStore, layout: Layout, name: str, held: np.ndarray | None):
    """Matrix ``name`` as a Dask array: over ``held`` (chunked as stored), else over the blocks' Zarr arrays."""
    import dask.array as da

    if held is None:
        return da.concatenate([work.dask(name, k) for k in range(len(layout.blocks))], axis=0)
    return da.from_array(held, chunks=chunks_of(name, held.shape, layout.row_chunks(), layout.samples), name=False)


def _rows_near(gr: pd.DataFrame, cnvs: pd.DataFrame) -> np.ndarray:
    """Sorted rows of ``gr`` within two regions of the rows each CNV covers (integer.overlapping_rows,
    whose ranges are trimmed by one region at each end): every region overlapping a CNV and those between."""
    from ..calls.integer import overlapping_rows

    lo, hi = overlapping_rows(gr, cnvs)
    edges = np.zeros(len(gr) + 1, dtype=np.int64)  # +1 / -1 at the ends of the ranges, then a running sum
    np.add.at(edges, np.clip(lo - 2, 0, len(gr)), 1)
    np.add.at(edges, np.clip(hi + 2, 0, len(gr)), -1)
    return np.flatnonzero(np.cumsum(edges)[:-1] > 0)


__all__ = ["DistributedResult"]
