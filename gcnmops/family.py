"""The cn.mops family's other entry points: the same pipeline with other defaults or normal class."""
from __future__ import annotations

from .mops import cn_mops
from .result import CNVDetectionResult


def exome_cn_mops(input, prior_impact: float = 10, lower_threshold: float = -0.8, min_width: int = 5,
                  min_read_count: float = 1, **kwargs) -> CNVDetectionResult:
    """``exomecn.mops()``: cn_mops with defaults tuned for exome targets (see cn_mops for arguments)."""
    return cn_mops(input, prior_impact=prior_impact, lower_threshold=lower_threshold, min_width=min_width,
                   min_read_count=min_read_count, **kwargs)
