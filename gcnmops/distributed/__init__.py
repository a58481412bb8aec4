"""Beyond one machine: cn.mops on a Dask cluster (``cn_mops``), inputs in Zarr (``save_counts``).

Workers run blocks of whole chromosomes (small consecutive ones merged, the largest given out first) through the
pipeline's stage order (``pipeline.stages.run_block``), after a first pass over the input for what crosses
chromosomes (each sample's total count; norm=2's coverages); each block writes its matrices into the run's store
and returns its call tables. Runs on a ``dask.distributed`` LocalCluster (CPU worker processes), dask-jobqueue or
dask-kubernetes clusters (SLURM, PBS, Kubernetes, ...) and dask-cuda workers (one GPU each); docs/scaling.md has
the recipes. The answers are the single-process ones, bit for bit.

Needs the ``dask`` extra (``pip install 'gcnmops[dask]'``: dask[distributed], zarr); imported lazily.
"""
from __future__ import annotations

from .methods import METHODS, build_params, canonical_method, check_parameters
from .pipeline import cn_mops, normalize_chromosomes
from .result import DistributedResult
from .store import open_matrix, save_counts

__all__ = ["cn_mops", "normalize_chromosomes", "DistributedResult", "save_counts", "open_matrix", "METHODS",
           "canonical_method", "check_parameters", "build_params"]
