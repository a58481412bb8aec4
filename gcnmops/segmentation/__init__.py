"""Stage 3, segmentation of each sample's sINI per chromosome: cn.mops's "fast" algorithm on the CPU (cpu)
and on the device (gpu), and segAlgorithm "DNAcopy" through R (dnacopy)."""
from .cpu import segment, segment_columns

__all__ = ["segment", "segment_columns"]
