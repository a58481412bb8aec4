"""DistributedResult: a cn.mops result whose matrices are Dask arrays over the run's Zarr store."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..result import CNVDetectionResult, ResultCounts

@dataclass
class DistributedResult(ResultCounts):
    """cn.mops's result slots (as :class:`gcnmops.CNVDetectionResult`), the matrices as Dask arrays.

    ``normalized_data``, ``local_assessments`` (sINI), ``individual_call``: float64 (m, N); ``cn_index``:
    int8 (m, N) class indices; ``ini_call``: (m,); ``posterior_probs``: (m, n, N) or None; ``params['L']``,
    ``params['A']``: (m, n) Dask arrays, ``params['cov']`` (N,) numpy. Every matrix is a Zarr array of
    ``store`` (chunks: rows x sample groups), read lazily. ``gr``, ``segmentation``, ``cnvs``, ``cnvr``:
    pandas tables as in the single-process result.
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
    #: slot name (or "L", "A") -> its Zarr array's path: every matrix of the result, read by ``compute``
    paths: dict = field(default_factory=dict)
    #: the run's WorkStore: a temporary store is removed once no result holds it (distributed.store.work_store)
    work: object = field(default=None, repr=False, compare=False)

    def compute(self) -> CNVDetectionResult:
        """The whole result in this process as a CNVDetectionResult (numpy arrays, column-major): for results
        that fit in memory (tests, moderate cohorts); large ones stay in the store."""
        values = {slot: _read_fortran(path) for slot, path in self.paths.items()}
        params = dict(self.params, L=values.pop("L"), A=values.pop("A"))
        return CNVDetectionResult(
            gr=self.gr, params=params, segmentation=self.segmentation, cnvs=self.cnvs, cnvr=self.cnvr,
            sample_names=list(self.sample_names), ranged=self.ranged, timings=dict(self.timings),
            posterior_probs=values.pop("posterior_probs", None), **values)

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


def _read_fortran(path: str) -> np.ndarray:
    """The Zarr array at ``path``, read here (the store is visible to this process; nothing is gathered
    through a worker; several times faster than through Dask's per-chunk tasks), a few row chunks at a time,
    into a column-major numpy array."""
    import zarr

    array = zarr.open_array(path, mode="r")
    step = max(1, 8 * array.chunks[0])
    out = np.empty(array.shape, dtype=array.dtype, order="F")
    for a in range(0, array.shape[0], step):
        out[a:a + step] = array[a:a + step]
    return out


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
