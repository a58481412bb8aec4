"""gcnmops: cn.MOPS (Copy Number estimation by a Mixture Of PoissonS), exact and fast, on CPU and GPU.

Data path: read (io) -> normalize -> model (EM per region) -> segment -> call -> integer copy numbers.

The public names below are imported from their modules on first use (``gcnmops.cn_mops`` loads the pipeline,
``gcnmops.build_reference`` the case mode and numba-cuda, ``gcnmops.count_reads`` the BAM reader): ``import
gcnmops`` itself loads numpy and nothing heavier, so that a command (``python -m gcnmops ...``) imports only what
it runs. Submodules (``gcnmops.io``, ``gcnmops.casemode``, ...) are reachable as attributes after ``import
gcnmops``, as before.
"""
from typing import TYPE_CHECKING

from . import compat, jitcache
from .version import __version__  # written in one place: version.py

jitcache.configure()  # before any kernel is defined: a writable kernel cache for every user of every install
compat.patch_numpy_for_numba_cuda()

#: every public name -> the module that defines it (tests/test_startup.py checks the TYPE_CHECKING block agrees)
_EXPORTS = {
    "cn_mops": ".pipeline.cnmops",
    "exome_cn_mops": ".pipeline.family",
    "haplo_cn_mops": ".pipeline.family",
    "reference_cn_mops": ".pipeline.family",
    "single_cn_mops": ".pipeline.family",
    "calc_integer_copy_numbers": ".calls.integer",
    "calc_fractional_copy_numbers": ".calls.robust",
    "make_robust_cnvr": ".calls.robust",
    "normalize_chromosomes": ".normalization",
    "normalize_genome": ".normalization",
    "segment": ".segmentation",
    "read_counts": ".io.readers",
    "read_result": ".outputs.results",
    "count_reads": ".alignments.counting",
    "run_many": ".model",
    "CNVDetectionResult": ".result",
    "CountData": ".data",
    "InputError": ".errors",
    "build_reference": ".casemode.api",
    "call_samples": ".casemode.api",
    "sex_aware_cn_mops": ".casemode.api",
    "load_reference": ".casemode.reference",
    "Reference": ".casemode.reference",
    "run_streaming": ".pipeline.streaming",
    "convert_counts": ".io.store",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = compat.lazy_exports(globals(), _EXPORTS, submodules=True)

if TYPE_CHECKING:  # what type checkers and editors see: the same names, imported eagerly
    from .calls.integer import calc_integer_copy_numbers
    from .calls.robust import calc_fractional_copy_numbers, make_robust_cnvr
    from .casemode.api import build_reference, call_samples, sex_aware_cn_mops
    from .casemode.reference import Reference, load_reference
    from .data import CountData
    from .errors import InputError
    from .alignments.counting import count_reads
    from .io.readers import read_counts
    from .io.store import convert_counts
    from .model import run_many
    from .normalization import normalize_chromosomes, normalize_genome
    from .outputs.results import read_result
    from .pipeline.cnmops import cn_mops
    from .pipeline.family import exome_cn_mops, haplo_cn_mops, reference_cn_mops, single_cn_mops
    from .pipeline.streaming import run_streaming
    from .result import CNVDetectionResult
    from .segmentation import segment
