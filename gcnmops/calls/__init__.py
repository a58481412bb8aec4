"""Stage 4, calls: individual calls, CNVs and CNV regions from segments (cnvs), integer copy numbers
(integer), robust CNV regions and fractional copy numbers (robust)."""
from .cnvs import Calls, call_cnvs
from .integer import calc_integer_copy_numbers
from .robust import calc_fractional_copy_numbers, make_robust_cnvr

__all__ = ["Calls", "call_cnvs", "calc_integer_copy_numbers", "calc_fractional_copy_numbers", "make_robust_cnvr"]
