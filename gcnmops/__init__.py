"""gcnmops: cn.MOPS (Copy Number estimation by a Mixture Of PoissonS), exact and fast, on CPU and GPU.

Data path: read (io) -> normalize -> model (EM per region) -> segment -> call -> integer copy numbers.
"""
from .data import CountData
from .errors import InputError
from .family import exome_cn_mops, haplo_cn_mops, reference_cn_mops, single_cn_mops
from .integer import calc_integer_copy_numbers
from .io import read_counts
from .model.gpu import run_many
from .mops import cn_mops
from .normalize import normalize_chromosomes, normalize_genome
from .result import CNVDetectionResult
from .segment import segment

__version__ = "0.1.0"

__all__ = [
    "cn_mops", "exome_cn_mops", "haplo_cn_mops", "reference_cn_mops", "single_cn_mops",
    "calc_integer_copy_numbers", "normalize_chromosomes", "normalize_genome",
    "segment", "read_counts", "CNVDetectionResult", "CountData", "InputError",
]
