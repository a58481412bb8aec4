"""Host/device pipeline of the GPU model: pinned double buffers, one stream per slot, host work overlapped.

Chunk i+1 is gathered into pinned memory and copied in while chunk i computes and chunk i-1 copies out;
results of a finished chunk are scattered into the result arrays (or land there directly when those are
pinned) while later chunks run. Device memory, pinned memory and streams come from a ``Backend``:

- ``CupyBackend``: cupy's memory pools, pinned memory, streams and events; strided device-to-host copies
  (cudaMemcpy2DAsync) straight into pinned result arrays. Used on real GPUs.
- ``NumbaBackend``: numba.cuda's own arrays, pinned arrays and streams. Used where cupy is missing and in
  numba's CUDA simulator (tests), where everything is synchronous but the same code paths run.

Every device buffer is a flat capacity-sized array; a chunk of ``rows`` uses the contiguous prefix
reshaped to (rows, K) in column-major order, so each copy is one contiguous block and the kernel's
loads and stores stay coalesced.
"""
from __future__ import annotations

import threading
from contextlib import ExitStack
from dataclasses import dataclass, field

import numpy as np
from numba import njit, prange

#: host copies are split into blocks of this many rows per column
_COPY_BLOCK = 1 << 16
#: numba's workqueue threading layer does not allow parallel regions from several host threads at once
_HOST_COPY_LOCK = threading.Lock()


@njit(parallel=True, nogil=True, cache=True)
def _gather(src, r0, dst):
    """dst[:, :] = src[r0:r0 + rows, :] for column-major 2-D arrays (parallel over column blocks)."""
    rows, K = dst.shape
    nb = (rows + _COPY_BLOCK - 1) // _COPY_BLOCK
    for t in prange(K * nb):
        k = t // nb
        lo = (t % nb) * _COPY_BLOCK
        hi = min(rows, lo + _COPY_BLOCK)
        dst[lo:hi, k] = src[r0 + lo:r0 + hi, k]


@njit(parallel=True, nogil=True, cache=True)
def _scatter(src, dst, r0):
    """dst[r0:r0 + rows, :] = src for column-major 2-D arrays."""
    rows, K = src.shape
    nb = (rows + _COPY_BLOCK - 1) // _COPY_BLOCK
    for t in prange(K * nb):
        k = t // nb
        lo = (t % nb) * _COPY_BLOCK
        hi = min(rows, lo + _COPY_BLOCK)
        dst[r0 + lo:r0 + hi, k] = src[lo:hi, k]


def as_matrix(a: np.ndarray) -> np.ndarray:
    """A column-major (m, K) view of a column-major array of 1, 2 or 3 dimensions (no copy)."""
    if a.ndim == 1:
        return a.reshape((a.shape[0], 1), order="F")
    if a.ndim == 2:
        return a
    return a.reshape((a.shape[0], -1), order="F")


def gather_rows(src: np.ndarray, r0: int, dst: np.ndarray) -> None:
    with _HOST_COPY_LOCK:
        _gather(as_matrix(src), r0, as_matrix(dst))


def scatter_rows(src: np.ndarray, dst: np.ndarray, r0: int) -> None:
    with _HOST_COPY_LOCK:
        _scatter(as_matrix(src), as_matrix(dst), r0)


def _ptr_dev(d) -> int:
    return d.__cuda_array_interface__["data"][0]


class NumbaBackend:
    """numba.cuda memory and streams (real GPUs without cupy, and the CUDA simulator)."""

    name = "numba"
    direct_out = False

    def __init__(self, device_id: int = 0):
        from numba import cuda

        self.cuda = cuda
        self.device_id = device_id

    def activate(self):
        return self.cuda.gpus[self.device_id]

    def mem_info(self) -> tuple[int, int]:
        free, total = self.cuda.current_context().get_memory_info()
        # the simulator reports infinite memory
        return int(min(free, 1 << 40)), int(min(total, 1 << 40))

    def device_array(self, size: int, dtype):
        return self.cuda.device_array(size, dtype=dtype)

    def to_device(self, a: np.ndarray):
        return self.cuda.to_device(np.ascontiguousarray(a))

    def pinned(self, size: int, dtype) -> np.ndarray:
        return self.cuda.pinned_array(size, dtype=dtype)

    def stream(self):
        return self.cuda.stream()

    def launch_stream(self, s):
        return s

    def h2d(self, dev, host: np.ndarray, s) -> None:
        dev.copy_to_device(host, stream=s)

    def d2h(self, host: np.ndarray, dev, s) -> None:
        dev.copy_to_host(host, stream=s)

    def record(self, s):
        try:
            e = self.cuda.event(timing=False)
        except TypeError:  # the simulator's Event takes no arguments
            e = self.cuda.event()
        e.record(s)
        return e

    def wait(self, e) -> None:
        e.synchronize()

    def stream_wait(self, s, e) -> None:
        e.wait(s)

    def stream_wait_current(self, s) -> None:
        """``s`` waits for the work enqueued so far on the default stream (launches are synchronous here)."""

    def synchronize(self) -> None:
        self.cuda.synchronize()

    def empty_out(self, shape, dtype) -> np.ndarray:
        return np.empty(shape, dtype=dtype, order="F")

    def copy_rows_to_host(self, host: np.ndarray, dev, r0: int, rows: int, s) -> None:
        """Rows r0:r0 + rows of the column-major device array ``dev`` into the same rows of ``host`` (same
        shape). Device-resident arrays are numpy arrays in the CUDA simulator, the only place this runs."""
        scatter_rows(as_matrix(np.asarray(dev))[r0:r0 + rows], host, r0)


class CupyBackend:
    """cupy memory pools, pinned memory, streams and events; numba launches on cupy's streams."""

    name = "cupy"
    direct_out = True

    def __init__(self, device_id: int = 0):
        import cupy
        import cupyx
        from numba import cuda

        self.cp = cupy
        self.cpx = cupyx
        self.cuda = cuda
        self.rt = cupy.cuda.runtime
        self.device_id = device_id
        self._nb_streams: dict[int, object] = {}

    def activate(self):
        stack = ExitStack()
        stack.enter_context(self.cp.cuda.Device(self.device_id))
        stack.enter_context(self.cuda.gpus[self.device_id])
        return stack

    def mem_info(self) -> tuple[int, int]:
        free, total = self.rt.memGetInfo()
        # blocks cached by cupy's pool are free for our purposes
        free += self.cp.get_default_memory_pool().free_bytes()
        return int(free), int(total)

    def device_array(self, size: int, dtype):
        a = self.cp.empty(size, dtype=dtype)
        return self.cuda.as_cuda_array(a, sync=False)

    def to_device(self, a: np.ndarray):
        return self.cuda.as_cuda_array(self.cp.asarray(np.ascontiguousarray(a)), sync=False)

    def pinned(self, size: int, dtype) -> np.ndarray:
        return self.cpx.empty_pinned(size, dtype=dtype)

    def stream(self):
        return self.cp.cuda.Stream(non_blocking=True)

    def launch_stream(self, s):
        ns = self._nb_streams.get(s.ptr)
        if ns is None:
            ns = self._nb_streams[s.ptr] = self.cuda.external_stream(s.ptr)
        return ns

    def h2d(self, dev, host: np.ndarray, s) -> None:
        self.rt.memcpyAsync(_ptr_dev(dev), host.ctypes.data, host.nbytes, self.rt.memcpyHostToDevice, s.ptr)

    def d2h(self, host: np.ndarray, dev, s) -> None:
        self.rt.memcpyAsync(host.ctypes.data, _ptr_dev(dev), host.nbytes, self.rt.memcpyDeviceToHost, s.ptr)

    def d2h_rows(self, host: np.ndarray, r0: int, dev, rows: int, s) -> None:
        """Copy a (rows, K) column-major device chunk into rows r0.. of the column-major host (m, K)."""
        h = as_matrix(host)
        item = h.itemsize
        m, K = h.shape
        self.rt.memcpy2DAsync(h.ctypes.data + r0 * item, m * item, _ptr_dev(dev), rows * item, rows * item, K,
                              self.rt.memcpyDeviceToHost, s.ptr)

    def copy_rows_to_host(self, host: np.ndarray, dev, r0: int, rows: int, s) -> None:
        """Rows r0:r0 + rows of the column-major device array ``dev`` (m, ...) into the same rows of the
        column-major ``host`` array of the same shape: one strided copy (cudaMemcpy2DAsync) on stream ``s``,
        asynchronous when ``host`` is pinned."""
        h = as_matrix(host)
        item = h.itemsize
        m, K = h.shape
        self.rt.memcpy2DAsync(h.ctypes.data + r0 * item, m * item, _ptr_dev(dev) + r0 * item, m * item,
                              rows * item, K, self.rt.memcpyDeviceToHost, s.ptr)

    def record(self, s):
        e = self.cp.cuda.Event(disable_timing=True)
        e.record(s)
        return e

    def wait(self, e) -> None:
        e.synchronize()

    def stream_wait(self, s, e) -> None:
        s.wait_event(e)

    def stream_wait_current(self, s) -> None:
        """``s`` waits for the work enqueued so far on cupy's current stream (e.g. the normalization)."""
        s.wait_event(self.cp.cuda.get_current_stream().record())

    def synchronize(self) -> None:
        self.cp.cuda.Device(self.device_id).synchronize()

    def empty_out(self, shape, dtype) -> np.ndarray:
        """A result array in pinned memory (from cupy's pinned pool), so results land in it directly."""
        return self.cpx.empty_pinned(shape, dtype=dtype, order="F")

    def is_pinned(self, a: np.ndarray) -> bool:
        try:
            attrs = self.rt.pointerGetAttributes(a.ctypes.data)
        except Exception:  # noqa: BLE001 - unregistered pageable memory may raise on old runtimes
            return False
        return getattr(attrs, "type", 0) in (1,)  # cudaMemoryTypeHost


def simulating() -> bool:
    """True when numba runs CUDA code in its simulator (NUMBA_ENABLE_CUDASIM=1)."""
    from numba import config

    return bool(getattr(config, "ENABLE_CUDASIM", False))


def device_module():
    """The array module of device-resident data: cupy on a real GPU; numpy in the CUDA simulator (whose
    kernels take numpy arrays), so the device-resident pipeline runs there too."""
    if simulating():
        return np
    import cupy

    return cupy


def kernel_arg(a):
    """A device-resident array (or a view of one, any strides) as a numba.cuda kernel argument, with no copy and
    no synchronization."""
    if simulating():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return FakeCUDAArray(a)  # (a plain numpy argument would be copied, and must be contiguous)
    from numba import cuda

    return cuda.as_cuda_array(a, sync=False)


def is_device_array(a) -> bool:
    """True for arrays in device memory (cupy, numba.cuda, anything with ``__cuda_array_interface__``)."""
    return hasattr(a, "__cuda_array_interface__")


def pinned_empty(shape, dtype=np.float64) -> np.ndarray:
    """An empty column-major host array in page-locked memory from cupy's pinned pool (fast, asynchronous
    copies; the block returns to the pool when the array is freed); a plain array in the simulator."""
    if simulating():
        return np.empty(shape, dtype=dtype, order="F")
    import cupyx

    return cupyx.empty_pinned(shape, dtype=dtype, order="F")


def make_backend(device_id: int = 0, prefer: str = "auto"):
    """cupy where importable (and not simulating), else numba.cuda's own."""
    sim = simulating()
    if prefer in ("auto", "cupy") and not sim:
        try:
            return CupyBackend(device_id)
        except ImportError:
            if prefer == "cupy":
                raise
    return NumbaBackend(device_id)


# names of the per-chunk arrays: (output attribute, columns per row as a function of (N, n), dtype)
OUT_FIELDS = (
    ("lam", lambda N, n: n, np.float64),
    ("alpha", lambda N, n: n, np.float64),
    ("sini", lambda N, n: N, np.float64),
    ("cn", lambda N, n: N, np.int8),
    ("ini", lambda N, n: 1, np.float64),
)
POST_FIELD = ("post", lambda N, n: n * N, np.float64)


@dataclass
class Slot:
    """One pipeline buffer set: flat device arrays, pinned staging, its stream and its chunk in flight."""

    stream: object
    dev: dict = field(default_factory=dict)
    host: dict = field(default_factory=dict)
    pending: tuple | None = None  # (event, r0, rows)


class ChunkPipeline:
    """Runs chunks of one matrix through ``launch`` on one device with ``nslots`` buffers in flight.

    ``launch(views, stream, rows, k)`` (k: the slot's index) enqueues the kernel on the backend's launch stream; ``views`` maps
    "x" and every output name to (rows, ...) column-major device views.
    """

    def __init__(self, backend, capacity: int, N: int, n: int, keep_post: bool, nslots: int = 2):
        self.backend = backend
        self.capacity = capacity
        self.N = N
        self.n = n
        self.keep_post = keep_post
        fields = OUT_FIELDS + ((POST_FIELD,) if keep_post else ())
        self.fields = [(name, width(N, n), dtype) for name, width, dtype in fields]
        self.slots: list[Slot] = []
        for _ in range(nslots):
            slot = Slot(stream=backend.stream())
            slot.dev["x"] = backend.device_array(capacity * N, np.float64)
            slot.host["x"] = backend.pinned(capacity * N, np.float64)
            for name, width, dtype in self.fields:
                slot.dev[name] = backend.device_array(capacity * width, dtype)
            self.slots.append(slot)
        self.chunks_run = 0
        self.order: list[tuple[int, int]] = []

    def _views(self, slot: Slot, rows: int) -> dict:
        v = {"x": slot.dev["x"][: rows * self.N].reshape((rows, self.N), order="F")}
        for name, width, _ in self.fields:
            flat = slot.dev[name][: rows * width]
            if name == "ini":
                v[name] = flat
            elif name == "post":
                v[name] = flat.reshape((rows, self.n, self.N), order="F")
            else:
                v[name] = flat.reshape((rows, width), order="F")
        return v

    def _finish(self, slot: Slot, out, direct: bool) -> None:
        if slot.pending is None:
            return
        event, r0, rows = slot.pending
        self.backend.wait(event)
        if not direct:
            for name, width, _ in self.fields:
                stage = slot.host[name][: rows * width].reshape((rows, width), order="F")
                scatter_rows(stage, getattr(out, name), r0)
        slot.pending = None

    def run(self, x: np.ndarray, out, next_chunk, launch, direct: bool = False) -> None:
        """Pull (r0, r1) ranges from ``next_chunk()`` until it returns None; results go into ``out``.

        ``direct``: the result arrays are pinned and the backend copies into them in place.
        """
        be = self.backend
        N = self.N
        i = 0
        try:
            while True:
                rng = next_chunk()
                if rng is None:
                    break
                r0, r1 = rng
                rows = r1 - r0
                if rows <= 0:
                    continue
                if rows > self.capacity:
                    raise ValueError("chunk larger than the pipeline's capacity")
                slot = self.slots[i % len(self.slots)]
                self._finish(slot, out, direct)            # chunk i - nslots: wait, scatter (host)
                hx = slot.host["x"][: rows * N].reshape((rows, N), order="F")
                gather_rows(x, r0, hx)                       # host gather overlaps the other slot's kernel
                views = self._views(slot, rows)
                be.h2d(slot.dev["x"][: rows * N], slot.host["x"][: rows * N], slot.stream)
                launch(views, be.launch_stream(slot.stream), rows, i % len(self.slots))
                for name, width, dtype in self.fields:
                    dev = slot.dev[name][: rows * width]
                    if direct:
                        be.d2h_rows(getattr(out, name), r0, dev, rows, slot.stream)
                    else:
                        if name not in slot.host:
                            slot.host[name] = be.pinned(self.capacity * width, dtype)
                        be.d2h(slot.host[name][: rows * width], dev, slot.stream)
                slot.pending = (be.record(slot.stream), r0, rows)
                self.order.append((r0, r1))
                i += 1
            # drain in submission order
            for k in range(len(self.slots)):
                self._finish(self.slots[(i + k) % len(self.slots)], out, direct)
        except BaseException:
            be.synchronize()
            raise
        self.chunks_run += i
