"""Gaps between the libraries we run on, closed once at import (before numba-cuda is loaded).

- numba-cuda 0.30 registers an overload of ``np.row_stack`` when its numpy support loads; NumPy 2.5 removed
  ``row_stack`` (deprecated alias of ``vstack`` since 2.0), so loading numba.cuda fails there with an
  AttributeError. The alias is restored when missing; numpy's own ``vstack`` is what it always meant.
"""
from __future__ import annotations

import numpy as np


def patch_numpy_for_numba_cuda() -> None:
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
