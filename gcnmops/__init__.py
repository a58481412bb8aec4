"""gcnmops: cn.MOPS (Copy Number estimation by a Mixture Of PoissonS), exact and fast, on CPU and GPU.

Data path: read (io) -> normalize -> model (EM per region) -> segment -> call -> integer copy numbers.
"""
from . import compat, jitcache

jitcache.configure()  # before any kernel is defined: a writable kernel cache for every user of every install
compat.patch_numpy_for_numba_cuda()

from .data import CountData  # noqa: E402
from .errors import InputError
from .pipeline.family import exome_cn_mops, haplo_cn_mops, reference_cn_mops, single_cn_mops
from .calls.integer import calc_integer_copy_numbers
from .io import read_counts
from .io.results import read_result
from .pipeline.cnmops import cn_mops
from .pipeline.streaming import run_streaming
from .io.store import convert_counts
from .normalization.cpu import normalize_chromosomes, normalize_genome
from .result import CNVDetectionResult
from .calls.robust import calc_fractional_copy_numbers, make_robust_cnvr
from .casemode import Reference, build_reference, call_samples, load_reference, sex_aware_cn_mops
from .segmentation.cpu import segment

__version__ = "0.1.0"


def __getattr__(name: str):
    """Imported on first use: ``run_many`` (several experiments, one per GPU) loads numba.cuda, ``count_reads``
    the BAM reader (neither is needed by a run on a count matrix)."""
    if name == "run_many":
        from .model.gpu import run_many

        return run_many
    if name == "count_reads":
        from .io.counting import count_reads

        return count_reads
    raise AttributeError(f"module 'gcnmops' has no attribute {name!r}")


__all__ = [
    "cn_mops", "exome_cn_mops", "haplo_cn_mops", "reference_cn_mops", "single_cn_mops",
    "calc_integer_copy_numbers", "calc_fractional_copy_numbers", "make_robust_cnvr", "normalize_chromosomes", "normalize_genome",
    "segment", "read_counts", "read_result", "count_reads", "run_many", "CNVDetectionResult", "CountData", "InputError",
    "build_reference", "call_samples", "load_reference", "Reference", "sex_aware_cn_mops", "run_streaming",
    "convert_counts",
]
