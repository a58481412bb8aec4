"""Beyond one machine: cn.mops on a Dask cluster (``cn_mops``), inputs in Zarr (``save_counts``).

The matrix is chunked by rows for the normalization statistics and the model (regions are independent)
and by samples for the segmentation (whole chromosomes per sample); matrices pass through a Zarr store,
results come back as Dask arrays over it and pandas tables. Runs on a ``dask.distributed`` LocalCluster
(CPU worker processes), dask-jobqueue clusters (SLURM, PBS, ...) and dask-cuda workers (one GPU each);
docs/scaling.md has the command lines. The answers are the single-process ones, bit for bit.

Needs the ``dask`` extra (``pip install 'gcnmops[dask]'``: dask[distributed], zarr); imported lazily.
"""
from __future__ import annotations

from .methods import METHODS, build_params, canonical_method, check_parameters
from .pipeline import cn_mops, normalize_chromosomes
from .result import DistributedResult
from .store import open_matrix, save_counts

__all__ = ["cn_mops", "normalize_chromosomes", "DistributedResult", "save_counts", "open_matrix", "METHODS",
           "canonical_method", "check_parameters", "build_params"]
