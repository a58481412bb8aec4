"""The CUDA runtime every stage's GPU driver uses: device and pinned memory, streams, host row copies.

Device memory, pinned memory and streams come from a ``Backend``:

- ``CupyBackend``: cupy's memory pools, pinned memory, streams and events; strided device-to-host copies
  (cudaMemcpy2DAsync) straight into pinned result arrays. Used on real GPUs.
- ``NumbaBackend``: numba.cuda's own arrays, pinned arrays and streams. Used where cupy is missing and in
  numba's CUDA simulator (tests), where everything is synchronous but the same code paths run.
"""
from __future__ import annotations

import os
import threading
from contextlib import ExitStack

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
    """A column-major (m, K) view of a column-major array of 1, 2 or 3 dimensions, or of some rows of one
    (``rows_of_column_major``); never a copy (ValueError where no such view exists)."""
    if a.ndim == 1:
        return a.reshape((a.shape[0], 1), order="F")
    if a.ndim == 2:
        return a
    if a.flags.f_contiguous:
        return a.reshape((a.shape[0], -1), order="F")
    if not rows_of_column_major(a):
        raise ValueError("not rows of a column-major array")
    return np.lib.stride_tricks.as_strided(a, (a.shape[0], a.size // max(a.shape[0], 1)), a.strides[:2],
                                           writeable=a.flags.writeable)


def rows_of_column_major(a: np.ndarray) -> bool:
    """True if ``a`` is column-major or rows r0:r1 of a column-major array (``x[r0:r1]``): region-fastest, each
    column contiguous, the columns evenly spaced (the host side of a strided copy)."""
    if a.flags.f_contiguous:
        return True
    if a.ndim == 0 or a.strides[0] != a.itemsize:
        return False
    expect = a.strides[1] if a.ndim > 1 else 0
    if a.ndim > 1 and expect < a.shape[0] * a.itemsize:
        return False
    for k in range(2, a.ndim):  # the trailing axes step as one column axis would
        expect *= a.shape[k - 1]
        if a.strides[k] != expect:
            return False
    return True


def column_pitch(a: np.ndarray) -> int:
    """Bytes from one column of ``as_matrix(a)`` to the next (its rows' count times the item size when
    contiguous; the parent's column length for rows of a column-major matrix)."""
    h = as_matrix(a)
    return h.strides[1] if h.shape[1] > 1 else h.shape[0] * h.itemsize


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
        """A new stream (numba's are blocking: ordered after the default stream's work, as ``ordered_stream``)."""
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

    def synchronize(self) -> None:
        self.cuda.synchronize()

    def empty_out(self, shape, dtype) -> np.ndarray:
        return np.empty(shape, dtype=dtype, order="F")

    def release_out(self) -> None:
        """Nothing is page-locked here."""

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
        from numba import cuda

        self.cp = cupy
        self.cuda = cuda
        self.rt = cupy.cuda.runtime
        self.device_id = device_id
        self._nb_streams: dict[int, object] = {}
        self._landing = Landing()

    def activate(self):
        return on_device(self.device_id)

    def mem_info(self) -> tuple[int, int]:
        free, total = self.rt.memGetInfo()
        # blocks cached by cupy's pool are free for our purposes
        free += pool_free_bytes()
        return int(free), int(total)

    def device_array(self, size: int, dtype):
        a = self.cp.empty(size, dtype=dtype)
        return self.cuda.as_cuda_array(a, sync=False)

    def to_device(self, a: np.ndarray):
        return self.cuda.as_cuda_array(self.cp.asarray(np.ascontiguousarray(a)), sync=False)

    def pinned(self, size: int, dtype) -> np.ndarray:
        return pinned_empty(size, dtype=dtype)

    def stream(self):
        return ordered_stream()

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
        """Copy a (rows, K) column-major device chunk into rows r0.. of the host (m, K), column-major or rows of a
        column-major array."""
        _rows_to_host(host, r0, _ptr_dev(dev), rows * host.itemsize, rows, s)

    def copy_rows_to_host(self, host: np.ndarray, dev, r0: int, rows: int, s) -> None:
        """Rows r0:r0 + rows of the column-major device array ``dev`` (m, ...) into the same rows of ``host`` of
        the same shape (column-major, or rows of a column-major array: ``rows_of_column_major``): one strided
        copy (cudaMemcpy2DAsync) on stream ``s``, asynchronous when ``host`` is pinned."""
        item = host.itemsize
        _rows_to_host(host, r0, _ptr_dev(dev) + r0 * item, host.shape[0] * item, rows, s)

    def record(self, s):
        e = self.cp.cuda.Event(disable_timing=True)
        e.record(s)
        return e

    def wait(self, e) -> None:
        e.synchronize()

    def stream_wait(self, s, e) -> None:
        s.wait_event(e)

    def synchronize(self) -> None:
        self.cp.cuda.Device(self.device_id).synchronize()

    def empty_out(self, shape, dtype) -> np.ndarray:
        """A result array page-locked in place (``Landing``), so results land in it directly; ``release_out``
        unlocks every such array once the copies into them are done."""
        return self._landing.empty(shape, dtype=dtype)

    def release_out(self) -> None:
        self._landing.close()

    def is_pinned(self, a: np.ndarray) -> bool:
        """Whether ``a`` is page-locked (and stays so: pending unlocks of closed Landings are waited for first)."""
        _UNLOCKER.drain()
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


@njit(parallel=True, cache=True, nogil=True)
def _touch_pages(flat, step):
    """Write one element per page of the 1-D byte view ``flat`` (every ``step`` bytes), on every core: the kernel
    supplies fresh pages in parallel (one thread faults ~0.25 s per GB in)."""
    for k in prange((flat.shape[0] + step - 1) // step):
        flat[k * step] = 0


_PAGE = 4096


def touched_empty(shape, dtype=np.float64) -> np.ndarray:
    """A new column-major array whose fresh pages every core has supplied, not page-locked. Results copied into
    it once from several GPUs land sooner this way than locked first (locking them for every device's context
    cost more than the driver's staging of the copies: benchmarks/RESULTS.md, twelfth session)."""
    a = np.empty(shape, dtype=dtype, order="F")
    if not simulating() and a.nbytes:
        _touch_pages(a.reshape(-1, order="A").view(np.uint8), _PAGE)
    return a


#: cudaHostRegisterPortable: page-locked for every device's context (several GPUs copy into one result)
_REGISTER_PORTABLE = 1


class Landing:
    """Host arrays that device copies land in (or leave from), page-locked in place.

    A fresh pinned allocation costs about ten times as much as a plain array whose pages are touched by every
    core and then registered (cudaHostRegister), which takes copies at the same speed. ``empty`` makes such an array, ``lock`` locks an existing one (``device_copy``'s source);
    ``close`` (or leaving the ``with`` block), called once the copies into or out of them have completed, hands
    them to a thread that unregisters them (``_Unlocker``: unlocking 2 GB takes ~0.04-0.1 s, off the caller's
    path): they are ordinary numpy arrays that the caller keeps, the unlocker holding a reference until done."""

    def __init__(self) -> None:
        self._registered: list[np.ndarray] = []

    def empty(self, shape, dtype=np.float64) -> np.ndarray:
        """A new column-major array, its fresh pages supplied by every core (``touched_empty``), then locked
        (``lock``)."""
        return self.lock(touched_empty(shape, dtype))

    def lock(self, a: np.ndarray) -> np.ndarray:
        """Page-lock the contiguous array ``a`` in place until ``close``; where it is already locked or the
        system refuses to lock more, it stays as it is (copies are then pageable: slower, still correct). Memory
        still being unlocked from an earlier Landing is unlocked first."""
        if simulating() or a.nbytes == 0:
            return a
        import cupy

        for attempt in (0, 1):
            try:
                cupy.cuda.runtime.hostRegister(a.ctypes.data, a.nbytes, _REGISTER_PORTABLE)
                break
            except cupy.cuda.runtime.CUDARuntimeError as e:
                if attempt or e.status != _ALREADY_REGISTERED or not _UNLOCKER.drain():
                    return a
        self._registered.append(a)
        return a

    def close(self) -> None:
        if self._registered:
            _UNLOCKER.submit(self._registered)
            self._registered = []

    def __enter__(self) -> "Landing":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: cudaErrorHostMemoryAlreadyRegistered
_ALREADY_REGISTERED = 712


class _Unlocker:
    """Unregisters closed Landings' arrays on one daemon thread, in order; ``drain`` waits for all of it (at exit
    too, before the CUDA context goes)."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        """No thread, nothing pending (also in a forked child: the parent's thread is not there)."""
        self._pool = None
        self._pending: list = []
        self._lock = threading.Lock()

    def submit(self, arrays: list[np.ndarray]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with self._lock:
            if self._pool is None:
                import atexit

                self._pool = ThreadPoolExecutor(1, thread_name_prefix="gcnmops-unlock")
                atexit.register(self.drain)
            self._pending = [f for f in self._pending if not f.done()]
            try:
                self._pending.append(self._pool.submit(_unregister, arrays))
            except RuntimeError:  # the interpreter is shutting down (its executors take no more work): here
                _unregister(arrays)

    def drain(self) -> bool:
        """Wait until every submitted array is unlocked; whether any was pending."""
        with self._lock:
            pending, self._pending = self._pending, []
        for f in pending:
            f.result()
        return bool(pending)


def _unregister(arrays: list[np.ndarray]) -> None:
    if not arrays:
        return
    import cupy

    for a in reversed(arrays):
        cupy.cuda.runtime.hostUnregister(a.ctypes.data)


_UNLOCKER = _Unlocker()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_UNLOCKER._reset)


def pinned_empty(shape, dtype=np.float64) -> np.ndarray:
    """An empty column-major host array in page-locked memory from cupy's pinned pool (fast, asynchronous
    copies; the block returns to the pool when the array is freed); a plain array in the simulator."""
    if simulating():
        return np.empty(shape, dtype=dtype, order="F")
    import cupy  # not cupyx.empty_pinned: importing cupyx loads scipy at every GPU run's start

    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    memory = cupy.cuda.alloc_pinned_memory(nbytes)
    return np.ndarray(shape, dtype=dtype, buffer=memory, order="F")


def device_copy(host: np.ndarray):
    """A column-major device copy (cupy) of the host array ``host``; in the simulator a numpy copy.

    Pageable memory crosses PCIe slowly through the driver's staging buffers on a fresh process's first copy; its
    pages are page-locked in place for the copy instead (cudaHostRegister, cheap for memory already touched), then
    released. Rows of a column-major matrix (``x[r0:r1]``, a block of chromosomes) are copied straight from it
    (``_rows_to_device``)."""
    if simulating():
        return host.copy(order="F")
    import cupy

    if host.ndim == 2 and not host.flags.f_contiguous and rows_of_column_major(host):
        return _rows_to_device(host)
    with Landing() as landing:
        try:
            return cupy.asarray(landing.lock(np.asfortranarray(host)), order="F")
        finally:
            cupy.cuda.get_current_stream().synchronize()  # the copy has read the pages before they are released


def copy_to_host_async(host: np.ndarray, dev, stream) -> None:
    """Enqueue on cupy ``stream`` the copy of the column-major device array ``dev`` into ``host`` of its shape
    (column-major, or rows of a column-major array: one strided copy); asynchronous where ``host`` is
    page-locked. In the simulator a synchronous copy (``stream`` unused)."""
    if simulating():
        host[...] = dev
    elif host.size:
        rows = host.shape[0]
        _rows_to_host(host, 0, _ptr_dev(dev), rows * host.itemsize, rows, stream)


def _rows_to_host(host: np.ndarray, r0: int, dev_ptr: int, dev_pitch: int, rows: int, stream) -> None:
    """Enqueue on ``stream`` one strided copy (cudaMemcpy2DAsync) of ``rows`` rows of a column-major device matrix
    (first row at ``dev_ptr``, ``dev_pitch`` bytes from one column to the next) into rows r0.. of ``host``
    (column-major, or rows of a column-major array)."""
    import cupy

    h = as_matrix(host)
    item = h.itemsize
    cupy.cuda.runtime.memcpy2DAsync(h.ctypes.data + r0 * item, column_pitch(h), dev_ptr, dev_pitch, rows * item,
                                    h.shape[1], cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)


def _rows_to_device(host: np.ndarray):
    """A column-major device copy of rows r0:r1 of a column-major host matrix (``host`` = x[r0:r1]): one strided
    copy (cudaMemcpy2DAsync), no host copy; at DMA speed where the host matrix is page-locked (its owner locks
    it once, e.g. ``Landing.lock``), else through the driver's staging buffers."""
    import cupy

    rows, K = host.shape
    dev = cupy.empty((rows, K), dtype=host.dtype, order="F")
    if dev.size:
        stream = cupy.cuda.get_current_stream()
        item = host.itemsize
        cupy.cuda.runtime.memcpy2DAsync(dev.data.ptr, rows * item, host.ctypes.data, column_pitch(host), rows * item,
                                        K, cupy.cuda.runtime.memcpyHostToDevice, stream.ptr)
        stream.synchronize()  # the caller may free or change the host rows
    return dev


def ordered_stream():
    """A new non-blocking cupy stream on the current device whose work comes after what this thread has enqueued
    so far on its current stream: cupy copies host arrays there asynchronously (e.g. the model's constants), and
    a non-blocking stream is not ordered after the default stream by itself, which other threads share."""
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    stream.wait_event(cupy.cuda.get_current_stream().record())
    return stream


def on_device(device_id: int) -> ExitStack:
    """Context manager: ``device_id`` is this thread's current device for cupy and numba (their allocations,
    copies and launches go there); nothing in the CUDA simulator (one simulated device)."""
    stack = ExitStack()
    if not simulating():
        import cupy
        from numba import cuda

        stack.enter_context(cupy.cuda.Device(device_id))
        stack.enter_context(cuda.gpus[device_id])
    return stack


_EXIT_HELD: list = []


def keep_modules_at_exit() -> None:
    """Once per process: at interpreter exit, numba-cuda's module finalizers only queue their unloads (the driver
    frees everything when the process ends) instead of flushing the queue. Flushed at exit, after kernels were
    loaded on several devices, a library is unloaded twice: glibc aborts the process ("double free") after every
    file was written, and the run ends with status 134. Registered after numba-cuda's own exit hooks, so it runs
    before them (atexit is last-in, first-out)."""
    if _EXIT_HELD or simulating():
        return
    _EXIT_HELD.append(True)
    import atexit
    import sys
    import weakref

    weakref.finalize(keep_modules_at_exit, int)  # weakref's own exit hook registered first: it runs after hold

    def hold() -> None:
        from numba.cuda.core import config

        config.CUDA_DEALLOCS_COUNT = sys.maxsize
        config.CUDA_DEALLOCS_RATIO = float(sys.maxsize)

    atexit.register(hold)


def _thread_pool():
    """The cupy memory pool this thread allocates from: its own (``thread_memory_pool``) or cupy's default pool."""
    import cupy

    try:
        pool = getattr(cupy.cuda.get_allocator(), "__self__", None)
    except Exception:  # noqa: BLE001 - a cupy without get_allocator: its default pool
        pool = None
    return pool if isinstance(pool, cupy.cuda.MemoryPool) else cupy.get_default_memory_pool()


def pool_free_bytes() -> int:
    """Bytes cached free in the cupy memory pool this thread allocates from: device memory it can use besides
    the device's free memory."""
    return int(_thread_pool().free_bytes())


def release_pool_blocks() -> None:
    """The free blocks of this thread's cupy memory pool given back to the device (after an out-of-memory error,
    before a smaller try); nothing in the simulator."""
    if not simulating():
        _thread_pool().free_all_blocks()


def thread_memory_pool() -> ExitStack:
    """Context manager: cupy allocations of this thread come from a memory pool of its own (freed on exit).

    Host threads that share a GPU must not share cupy's pool: a block one thread frees while its kernels on the
    default stream still use it goes back to the pool, and another thread may get it at once and write it on a
    stream of its own before those kernels are done. Nothing in the CUDA simulator."""
    stack = ExitStack()
    if not simulating():
        import cupy

        pool = cupy.cuda.MemoryPool()
        stack.callback(pool.free_all_blocks)
        stack.callback(cupy.cuda.Device().synchronize)  # the thread's work is done before its blocks are freed
        stack.enter_context(cupy.cuda.using_allocator(pool.malloc))
    return stack


def in_threads(work: dict) -> None:
    """Run each callable of ``work`` (thread name -> callable) in a thread of its own, wait for all, and re-raise
    the first exception in the caller's thread."""
    errors: list = []

    def guarded(fn):
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(fn,), name=name) for name, fn in work.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


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
