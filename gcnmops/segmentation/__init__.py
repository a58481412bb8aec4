"""Stage 3, segmentation of each sample's sINI per chromosome: cn.mops's "fast" algorithm on the CPU (cpu)
and on the device (gpu), and segAlgorithm "DNAcopy" through R (dnacopy).

The fast algorithm's per-position arithmetic (prefix sums, candidate test, window statistic) is one
``register_jitable`` source in kernels, compiled by both the CPU driver and the CUDA kernels; the host passes
before and after the statistic (cleaning, eps/thresholds/variance, local maxima, breakpoints, merging, segment
values) are in host, the argument checks and output assembly in interface.
"""
from .cpu import segment, segment_columns

__all__ = ["segment", "segment_columns"]
