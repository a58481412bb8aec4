"""glibc's exp/log tables (libm.TABLES) in a GPU block's shared memory, for the kernels that call
``libm.exp_glibc``/``libm.log_glibc``: each lane of a warp reads its own entry, which constant memory would
serve one address at a time.

A kernel declares the four arrays itself, one per line (the CUDA simulator tells shared arrays apart by their
line), and fills them with ``copy_tables`` before its first exp or log::

    head = cuda.shared.array(TABLE_SIZE, float64)
    tail = cuda.shared.array(TABLE_SIZE, float64)
    invc = cuda.shared.array(TABLE_SIZE, float64)
    logc = cuda.shared.array(TABLE_SIZE, float64)
    copy_tables(head, tail, invc, logc)     # then pass (head, tail, invc, logc) where TABLES is taken
"""
from __future__ import annotations

from ..exact.libm import HEAD, INVC, LOGC, TABLE_SIZE, TAIL

try:  # module level: a device function's ``cuda`` must be a global (the CUDA simulator swaps module globals)
    from numba import cuda
except Exception:  # noqa: BLE001 - numba without its CUDA target: no kernel calls this
    cuda = None


def _copy_tables(head, tail, invc, logc):
    """The block's threads copy the tables' (TABLE_SIZE,) float64 entries, then wait for each other."""
    for j in range(cuda.threadIdx.x, TABLE_SIZE, cuda.blockDim.x):
        head[j] = HEAD[j]
        tail[j] = TAIL[j]
        invc[j] = INVC[j]
        logc[j] = LOGC[j]
    cuda.syncthreads()


copy_tables = cuda.jit(device=True)(_copy_tables) if cuda is not None else None

__all__ = ["TABLE_SIZE", "copy_tables"]
