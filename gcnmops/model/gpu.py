"""GPU driver of the per-region EM: the functions of em.py compiled by numba.cuda, one thread per region.

The kernel calls ``em.fit_region`` (the formulas of the CPU's ``em.fit_lanes``, from the same helpers) from a
grid-stride loop: the E-step streams over the samples, one posterior column (n x 1) at a time, adding it to the
per-class sums and storing it in the thread's row of a global posterior scratch, from which the M-step's T is
summed class by class, so that every sum runs in cn.mops's order (where the scratch does not fit the device,
each cycle's posteriors are recomputed instead of stored, more slowly: benchmarks/RESULTS.md). Every array is
region-fastest (column-major) and every scratch thread-fastest, so thread r and thread r+1 touch neighbouring
addresses and each warp's loads and stores coalesce. Per-thread state (alpha,
lambda, log lambda, the M-step accumulators, the posterior column) lives in ``cuda.local.array``s sized by the
number of classes, a compile-time constant of each specialization: with the fold changes copied into such an
array ``n`` is known to the compiler, every class loop unrolls and the state stays in registers ("unroll"
variant; "rolled" keeps the run-time class count, so the state goes to local memory; used for many classes).
The WORK_BUFFERS per-sample buffers (the median's buffer, then lgamma(x_k + 1); the normalizers; the INI terms)
are local arrays for N <= EM_LOCAL_WORK_MAX (local memory is interleaved per thread by the hardware, so it
coalesces like a column-major array) and per-thread slices of the global scratch beyond. The
minReadCount short-cut is decided per region inside the kernel. The likelihoods use glibc's exp and log
(exact/libm.py), as on the CPU, from copies of their tables in each block's shared memory; the kernel is built
without FMA contraction (cuda/nofma.py), so that fit_gpu computes what the CPU driver (model/cpu.py) computes,
bit for bit (tests/test_model_gpu.py checks it on a GPU, tests/test_model_gpu_sim.py in the CUDA simulator).

Host side: ``fit_gpu`` plans chunks from free device memory (plan.py), streams them through pinned
double buffers on two streams (pipeline.py) and, with several devices, lets one host thread per device
pull chunks from a shared queue, so each GPU takes rows in proportion to its measured speed.
"""
from __future__ import annotations

import contextlib
import logging
import math
import threading
from dataclasses import dataclass

import numpy as np

from ..cuda import plan as _plan
from ..cuda.config import (EM_BLOCKS_PER_SM, EM_LOCAL_WORK_MAX, EM_MAX_REGISTERS, EM_THREADS_PER_BLOCK,
                           EM_UNROLL_MAX_CLASSES)
from ..cuda.kernels import cached_kernel
from .chunks import OUT_FIELDS, POST_FIELD, ChunkPipeline
from ..cuda.runtime import (device_module, in_threads, is_device_array, kernel_arg, make_backend,
                            rows_of_column_major, simulating)
from .spec import ModelOutput, ModelSpec

try:  # module level: the kernel's ``cuda`` must be a global (the CUDA simulator swaps module globals)
    from numba import cuda
except Exception:  # noqa: BLE001 - numba without its CUDA target: the GPU backend is unavailable
    cuda = None

log = logging.getLogger("gcnmops")

#: per-sample buffers of em.fit_region per thread: lgamma(x_k + 1), the normalizers s_k, the INI terms
WORK_BUFFERS = 3
#: the posterior scratch is used where it takes at most this share of the device memory budget
STORE_SHARE = 0.25


# ----------------------------------------------------------------------------------------------- kernel
def get_kernel(nc: int, nw: int, keep_post: bool, variant: str = "unroll", max_registers: int | None = None):
    """The cuda.jit kernel specialized for ``nc`` classes and local work size ``nw`` (0: global scratch), from
    cuda.kernels' cache."""
    return cached_kernel(_build_kernel, nc, nw, bool(keep_post), variant, max_registers)


def _build_kernel(NC: int, NW: int, KEEP: bool, variant: str, max_registers):
    from numba import float64

    from ..cuda.nofma import jit_nofma
    from .em import fit_region
    from ..cuda.tables import TABLE_SIZE, copy_tables

    if variant not in ("unroll", "rolled"):
        raise ValueError(f"unknown kernel variant {variant!r}")
    UNROLL = variant == "unroll"
    LOCAL_WORK = NW > 0

    def _nofma_em_kernel(x, cov, folds_g, log2_folds, alpha_init, alpha_prior, prior_sum, cyc, min_read_count,
                         main_idx, work_g, lam, alpha, sini, cn, ini, post):
        a_s = cuda.local.array(NC, float64)
        l_s = cuda.local.array(NC, float64)
        ll_s = cuda.local.array(NC, float64)
        acc = cuda.local.array(NC, float64)
        p = cuda.local.array((NC, 1), float64)   # one posterior column: fit_region streams the samples
        if UNROLL:
            # the class count becomes a compile-time constant: loops unroll, state stays in registers
            folds = cuda.local.array(NC, float64)
            for i in range(NC):
                folds[i] = folds_g[i]
        else:
            folds = folds_g
        head = cuda.shared.array(TABLE_SIZE, float64)  # glibc's exp/log tables (shared_tables.py)
        tail = cuda.shared.array(TABLE_SIZE, float64)
        invc = cuda.shared.array(TABLE_SIZE, float64)
        logc = cuda.shared.array(TABLE_SIZE, float64)
        copy_tables(head, tail, invc, logc)
        tabs = (head, tail, invc, logc)
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        # this thread's row of the scratch (the dummy's only row where there is none): the WORK_BUFFERS
        # buffers of N values side by side (global work only), then the n x N posteriors (if stored)
        w = work_g[min(start, work_g.shape[0] - 1)]
        if LOCAL_WORK:
            work = cuda.local.array(NW, float64)
            norm = cuda.local.array(NW, float64)
            terms = cuda.local.array(NW, float64)
            pst = w
        else:
            N = x.shape[1]
            work = w[:N]
            norm = w[N:2 * N]
            terms = w[2 * N:3 * N]
            pst = w[3 * N:]
        for r in range(start, x.shape[0], stride):
            post_r = post[r] if KEEP else post[0]
            ini[r] = fit_region(
                x[r], cov, folds, log2_folds, alpha_init, alpha_prior, prior_sum, cyc, min_read_count,
                main_idx, KEEP, work, norm, terms, pst, a_s, l_s, ll_s, acc, p, lam[r], alpha[r], sini[r], cn[r],
                post_r, tabs,
            )

    opts = {}
    if max_registers and not simulating():
        opts["max_registers"] = int(max_registers)
    return jit_nofma(_nofma_em_kernel, **opts)  # the exponent x log(lambda) - lgamma(x + 1) - lambda cancels


def local_work_size(N: int) -> int:
    """The per-thread work buffer compiled for N samples: the next power of two (at least 8), so that a few
    kernel variants (8, 16, 32, 64, 128) serve every sample count and can be compiled once, at install."""
    return max(8, 1 << (max(1, N) - 1).bit_length())


# --------------------------------------------------------------------------------------- device state
@dataclass
class KernelConfig:
    """Launch choices; the defaults are the fastest measured (benchmarks/RESULTS.md).

    ``threads_per_block``; ``variant``: "unroll" (class count compiled in, state in registers), "rolled"
    (run-time class count) or "auto" (unroll up to EM_UNROLL_MAX_CLASSES classes); ``work``: the per-sample
    buffer in "local" memory, in "global" thread-fastest scratch, or "auto" (local up to EM_LOCAL_WORK_MAX
    samples); ``max_registers``: the per-thread register cap handed to the compiler (None: uncapped);
    ``posteriors``: each cycle's posteriors "store"d in a global scratch between the E-step and the M-step's
    T, "recompute"d, or "auto" (stored where the scratch takes at most STORE_SHARE of the memory budget and
    can be allocated).
    """

    threads_per_block: int = EM_THREADS_PER_BLOCK
    variant: str = "auto"
    work: str = "auto"
    max_registers: int | None = EM_MAX_REGISTERS
    posteriors: str = "auto"

    def resolve(self, n: int, N: int) -> tuple[str, int]:
        variant = self.variant
        if variant == "auto":
            variant = "unroll" if n <= EM_UNROLL_MAX_CLASSES else "rolled"
        work = self.work
        if work == "auto":
            work = "local" if N <= EM_LOCAL_WORK_MAX else "global"
        return variant, (local_work_size(N) if work == "local" else 0)


class _Device:
    """One device's backend, constants, kernel, pipeline and (global-work) scratch."""

    def __init__(self, device_id: int, spec: ModelSpec, cov: np.ndarray, N: int, keep_post: bool,
                 cfg: KernelConfig, backend_name: str):
        self.device_id = device_id
        self.backend = backend_name(device_id) if callable(backend_name) else make_backend(device_id, backend_name)
        self.spec = spec
        self.N = N
        self.n = spec.folds.size
        self.keep_post = keep_post
        self.cfg = cfg
        self.variant, self.nw = cfg.resolve(self.n, N)
        self.kernel = get_kernel(self.n, self.nw, keep_post, self.variant, cfg.max_registers)
        self.pipeline: ChunkPipeline | None = None
        self.simulated = simulating()
        self.work: list = []
        self.store = False
        self.max_blocks = None
        with self.backend.activate():
            be = self.backend
            cov = np.ascontiguousarray(cov, dtype=np.float64)
            self.consts = [be.to_device(a) for a in (cov, spec.folds, spec.log2_folds, spec.alpha_init,
                                                      spec.alpha_prior)]
            self.dummy_post = be.to_device(np.zeros(1)).reshape((1, 1, 1), order="F")
            # no global scratch: one row whose single value is too short for the posteriors
            self.dummy_work = be.to_device(np.zeros(1)).reshape((1, 1), order="F")
            self.sm_count = _sm_count()

    def scratch_threads(self, capacity: int) -> int:
        """Threads of a launch over ``capacity`` rows with a global scratch (grid-stride loop, at most
        EM_BLOCKS_PER_SM blocks per SM): the scratch's rows."""
        tpb = self.cfg.threads_per_block
        blocks = min(math.ceil(capacity / tpb), max(1, self.sm_count * EM_BLOCKS_PER_SM))
        return blocks * tpb

    def scratch_width(self, store: bool) -> int:
        """Values per thread of the global scratch: the WORK_BUFFERS per-sample buffers (global work only)
        and, where ``store``, one cycle's n x N posteriors."""
        return (0 if self.nw else WORK_BUFFERS * self.N) + (self.n * self.N if store else 0)

    def scratch_plan(self, rows: int, slots: int, budget: int) -> tuple[bool, int]:
        """(whether the posteriors are stored, scratch bytes) for ``slots`` launches of ``rows`` rows at once:
        stored where their scratch takes at most STORE_SHARE of ``budget`` bytes (else recomputed)."""
        T = self.scratch_threads(rows)
        store = {"store": True, "recompute": False}.get(self.cfg.posteriors)
        if store is None:
            if self.cfg.posteriors != "auto":
                raise ValueError(f"posteriors must be 'auto', 'store' or 'recompute'; got {self.cfg.posteriors!r}")
            store = slots * T * self.n * self.N * 8 <= STORE_SHARE * budget
        return store, slots * T * self.scratch_width(store) * 8

    def setup(self, m: int, max_device_memory, max_rows, slots: int = 2) -> _plan.ChunkPlan:
        """Plan chunks from this device's free memory and allocate, halving the chunk on out-of-memory (the
        posterior scratch gives way first: ``allocate_work``)."""
        with self.backend.activate():
            free, _total = self.backend.mem_info()
            # one scratch per slot (the slots' kernels may overlap)
            store, fixed = self.scratch_plan(m, slots, _plan.memory_budget(free, max_device_memory))
            plan = _plan.plan_chunks(m, self.N, self.n, self.keep_post, free, max_device_memory, slots=slots,
                                     fixed_bytes=fixed, max_rows=max_rows)
            while True:
                try:
                    self._allocate(plan, store)
                    return plan
                except Exception as exc:  # noqa: BLE001 - retried only for out-of-memory
                    if not _plan.is_out_of_memory(exc):
                        raise
                    self.pipeline = None
                    self.work = []
                    smaller = _plan.shrink(plan)
                    if smaller is None:
                        raise MemoryError(f"GPU {self.device_id}: out of memory even for {plan.rows} rows") from exc
                    log.warning("GPU %d: out of memory with %d rows per chunk; retrying with %d",
                                self.device_id, plan.rows, smaller.rows)
                    plan = smaller

    def _allocate(self, plan: _plan.ChunkPlan, store: bool) -> None:
        self.pipeline = ChunkPipeline(self.backend, plan.rows, self.N, self.n, self.keep_post, nslots=plan.slots)
        self.allocate_work(plan.rows, plan.slots, store)

    def allocate_work(self, rows: int, slots: int, store: bool) -> None:
        """The global scratch (global work and/or stored posteriors; none for local work without them): one
        per slot, for launches of ``rows``; thread t's values are row t of a (threads, scratch_width)
        column-major array, so a warp's accesses coalesce. With ``posteriors`` "auto", posteriors whose scratch
        cannot be allocated are recomputed instead."""
        try:
            self._allocate_scratch(rows, slots, store)
        except Exception as exc:  # noqa: BLE001 - retried only for out-of-memory
            if not (store and self.cfg.posteriors == "auto" and _plan.is_out_of_memory(exc)):
                raise
            log.info("GPU %d: out of memory for the posterior scratch; recomputing posteriors instead",
                     self.device_id)
            self._allocate_scratch(rows, slots, False)

    def _allocate_scratch(self, rows: int, slots: int, store: bool) -> None:
        self.work = []
        self.store = store
        width = self.scratch_width(store)
        if width:
            T = self.scratch_threads(rows)
            self.max_blocks = T // self.cfg.threads_per_block
            for _ in range(slots):
                self.work.append(self.backend.device_array(T * width, np.float64).reshape((T, width), order="F"))

    def allocate_resident_work(self, rows: int) -> None:
        """The scratch of the device-resident model (one slot), planned from the free memory left after its
        outputs."""
        self.allocate_work(rows, 1, self.scratch_plan(rows, 1, _plan.memory_budget(self.backend.mem_info()[0]))[0])

    def launch(self, views, stream, rows: int, k: int) -> None:
        tpb = self.cfg.threads_per_block
        blocks = math.ceil(rows / tpb)
        work = self.dummy_work
        if self.work:
            blocks = min(blocks, self.max_blocks)
            work = self.work[k]
        with _SIM_LAUNCH_LOCK if self.simulated else _NO_LOCK:
            self._launch(blocks, tpb, stream, views, work)

    def _launch(self, blocks, tpb, stream, views, work) -> None:
        s = self.spec
        cov, folds, log2_folds, alpha_init, alpha_prior = self.consts
        self.kernel[blocks, tpb, stream](
            views["x"], cov, folds, log2_folds, alpha_init, alpha_prior, float(s.prior_sum), int(s.cyc),
            float(s.min_read_count), int(s.main_idx), work, views["lam"], views["alpha"], views["sini"],
            views["cn"], views["ini"], views.get("post", self.dummy_post),
        )

    def run(self, x, out, next_chunk, direct: bool) -> None:
        with self.backend.activate():
            self.pipeline.run(x, out, next_chunk, self.launch, direct=direct)


#: the CUDA simulator cannot run kernels from several host threads at once
_SIM_LAUNCH_LOCK = threading.Lock()
_NO_LOCK = contextlib.nullcontext()


def _sm_count() -> int:
    try:
        return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)
    except Exception:  # noqa: BLE001 - the simulator has no such attribute
        return 1


def _device_ids(devices) -> list[int]:
    if devices is None:
        return [0]
    if isinstance(devices, str):
        if devices != "all":
            raise ValueError("devices must be None, 'all', an int or a list of ints")

        return list(range(len(cuda.gpus)))
    if isinstance(devices, (int, np.integer)):
        return [int(devices)]
    ids = [int(d) for d in devices]
    if not ids:
        raise ValueError("devices must name at least one device")
    return ids


def _check_out(out: ModelOutput, m: int, n: int, N: int, keep_post: bool) -> None:
    shapes = {"lam": (m, n), "alpha": (m, n), "sini": (m, N), "cn": (m, N), "ini": (m,)}
    if keep_post:
        shapes["post"] = (m, n, N)
    for name, shape in shapes.items():
        a = getattr(out, name)
        if a is None or a.shape != shape or not rows_of_column_major(a):
            raise ValueError(f"out.{name} must be a column-major array of shape {shape} (or rows of one)")


# ------------------------------------------------------------------------------------------- public API
def fit_gpu(x: np.ndarray, cov: np.ndarray, spec: ModelSpec, keep_post: bool = False,
            out: ModelOutput | None = None, devices=None, max_device_memory: int | None = None, *,
            chunk_rows: int | None = None, config: KernelConfig | None = None, backend: str = "auto",
            stats: dict | None = None) -> ModelOutput:
    """Fit every region of ``x`` (m, N) float64 on the GPU(s); ``cov`` (N,). Same results as ``fit_cpu``.

    ``devices``: None (device 0), an id, a list of ids or "all": rows are pulled in chunks from a shared
    queue by one host thread per device. ``max_device_memory``: bytes each device may use at most.
    ``chunk_rows`` caps the rows per chunk (tests force many chunks with it). ``backend``: "auto" (cupy
    when importable, else numba.cuda's own memory), "cupy", "numba", or a callable(device_id) -> backend. ``out``: column-major result
    arrays to fill (pinned ones receive the copies directly). ``stats`` (a dict) receives the plan and
    the chunks each device ran. A device array ``x`` (cupy) is fitted where it lies (``fit_gpu_device``; one
    device, ``max_device_memory`` and ``backend`` do not apply).
    """
    if is_device_array(x):
        if devices not in (None, 0, [0]):
            raise ValueError("a device-resident x is fitted on its own device; pass devices=None")
        return fit_gpu_device(x, cov, spec, keep_post=keep_post, out=out, chunk_rows=chunk_rows, config=config,
                              stats=stats)[0]
    x = np.asarray(x, dtype=np.float64)
    if not x.flags.f_contiguous:
        x = np.asfortranarray(x)
    m, N = x.shape
    n = spec.folds.size
    cov = np.ascontiguousarray(cov, dtype=np.float64)
    if cov.shape != (N,):
        raise ValueError(f"cov must have one value per sample ({N}); got shape {cov.shape}")
    cfg = config or KernelConfig()
    devs = [_Device(d, spec, cov, N, keep_post, cfg, backend) for d in _device_ids(devices)]
    out, direct = _host_outputs(devs[0].backend, out, m, n, N, keep_post)
    if m == 0:
        return out
    try:
        rows, chunks, plans, taken = _run_shared_queue(devs, x, out, direct, max_device_memory, chunk_rows)
    finally:  # every copy has landed (or failed) before the outputs are unlocked
        for d in devs:
            d.backend.synchronize()
        devs[0].backend.release_out()
    if stats is not None:
        stats.update(rows_per_chunk=rows, n_chunks=len(chunks), plans=plans, chunks=taken, direct=direct,
                     backend=devs[0].backend.name, variant=devs[0].variant, local_work=devs[0].nw,
                     store_posteriors=devs[0].store, order={d.device_id: list(d.pipeline.order) for d in devs})
    return out


def _host_outputs(be, out: ModelOutput | None, m: int, n: int, N: int, keep_post: bool
                  ) -> tuple[ModelOutput, bool]:
    """(the host arrays the model's results go to: ``out`` checked, or new ones from the backend ``be``;
    whether the copies land in them directly: pinned arrays)."""
    if out is None:
        alloc = be.empty_out
        out = ModelOutput(lam=alloc((m, n), np.float64), alpha=alloc((m, n), np.float64),
                          sini=alloc((m, N), np.float64), cn=alloc((m, N), np.int8), ini=alloc((m,), np.float64),
                          post=alloc((m, n, N), np.float64) if keep_post else None)
        return out, be.direct_out
    _check_out(out, m, n, N, keep_post)
    direct = be.direct_out and all(be.is_pinned(getattr(out, f)) for f in ("lam", "alpha", "sini", "cn", "ini"))
    if keep_post:
        direct = direct and be.is_pinned(out.post)
    return out, direct


def _run_shared_queue(devs: list, x: np.ndarray, out: ModelOutput, direct: bool, max_device_memory, chunk_rows):
    """Every row of ``x`` through the devices: chunks planned for each device's share of the rows, pulled from
    one queue by a host thread per device. Returns (rows per chunk, the chunks, the plans, chunks per device)."""
    m = x.shape[0]
    # each device runs about m / len(devs) rows: plan its chunks (and their overlap) for that share
    share = math.ceil(m / len(devs))
    plans = [d.setup(share, max_device_memory, chunk_rows) for d in devs]
    rows = min(p.rows for p in plans)
    chunks = _plan.chunk_bounds(m, rows)
    lock = threading.Lock()
    taken: dict[int, list] = {d.device_id: [] for d in devs}
    it = iter(chunks)

    def puller(dev_id):
        def next_chunk():
            with lock:
                c = next(it, None)
            if c is not None:
                taken[dev_id].append(c)
            return c
        return next_chunk

    if len(devs) == 1:
        devs[0].run(x, out, puller(devs[0].device_id), direct)
        return rows, chunks, plans, taken
    in_threads({f"gcnmops-gpu{d.device_id}": (lambda d=d: d.run(x, out, puller(d.device_id), direct)) for d in devs})
    return rows, chunks, plans, taken


def fit_gpu_device(x, cov: np.ndarray, spec: ModelSpec, keep_post: bool = False, out: ModelOutput | None = None,
                   *, chunk_rows: int | None = None, config: KernelConfig | None = None,
                   stats: dict | None = None) -> tuple[ModelOutput, ModelOutput]:
    """Fit every region of a device-resident ``x`` (m, N) float64 column-major on the current device, with
    no copy of x: the device-resident pipeline's model stage.

    ``x``: a cupy array (a numpy array in the CUDA simulator, see pipeline.device_module). The outputs are
    made on the device for all m rows; the kernel runs in launches of ``plan.launch_rows`` rows on one stream
    (which first waits for the work already enqueued on the current stream, e.g. the normalization), and
    each launch's rows are copied into the host outputs on a second stream while the next launch computes.
    Host outputs: ``out`` (column-major arrays of ModelOutput's shapes; pinned ones are copied into
    asynchronously) or new arrays, made while the kernels run and page-locked for the copies
    (cuda.runtime.Landing) until they are done. Returns (host outputs, device outputs) once every copy is done.
    """
    xp = device_module()
    m, N = x.shape
    n = spec.folds.size
    if x.dtype != np.float64 or not x.flags.f_contiguous:
        raise ValueError("x must be a column-major float64 device array")
    cov = np.ascontiguousarray(cov, dtype=np.float64)
    if cov.shape != (N,):
        raise ValueError(f"cov must have one value per sample ({N}); got shape {cov.shape}")
    if out is not None:
        _check_out(out, m, n, N, keep_post)
    device_id = 0 if xp is np else int(x.device.id)
    dev = _Device(device_id, spec, cov, N, keep_post, config or KernelConfig(), "auto")
    be = dev.backend
    fields = OUT_FIELDS + ((POST_FIELD,) if keep_post else ())
    shapes = {"lam": (m, n), "alpha": (m, n), "sini": (m, N), "cn": (m, N), "ini": (m,), "post": (m, n, N)}
    with be.activate():
        d = {name: xp.empty(shapes[name], dtype=dtype, order="F") for name, _, dtype in fields}
        resident = ModelOutput(**{"post": None, **d})
        rows = _plan.launch_rows(m, chunk_rows)
        try:
            chunks = _plan.chunk_bounds(m, rows) if m else []
            if chunks:
                dev.allocate_resident_work(rows)
                compute, copy = be.stream(), be.stream()
            done = []
            for r0, r1 in chunks:
                views = {"x": kernel_arg(x[r0:r1]), **{name: kernel_arg(a[r0:r1]) for name, a in d.items()}}
                dev.launch(views, be.launch_stream(compute), r1 - r0, 0)
                done.append(be.record(compute))
            if out is None:  # made (pages touched and locked) while the kernels run
                out = ModelOutput(**{"post": None, **{name: be.empty_out(shapes[name], dtype)
                                                      for name, _, dtype in fields}})
            for (r0, r1), launched in zip(chunks, done):
                be.stream_wait(copy, launched)
                for name in d:
                    be.copy_rows_to_host(getattr(out, name), d[name], r0, r1 - r0, copy)
        finally:  # every copy has landed (or failed) before the outputs are unlocked
            be.synchronize()
            be.release_out()
    if stats is not None:
        stats.update(rows_per_chunk=rows, n_chunks=len(chunks), backend=be.name, variant=dev.variant,
                     local_work=dev.nw, store_posteriors=dev.store, resident=True)
    return out, resident


def run_many(experiments, devices="all", **options) -> list[ModelOutput]:
    """Fit several independent experiments, one per GPU at a time (a host thread per device).

    ``experiments``: an iterable of dicts with keys x, cov, spec and optionally keep_post (or tuples
    (x, cov, spec[, keep_post])). Returns their outputs in the same order.
    """
    items = []
    for e in experiments:
        if isinstance(e, dict):
            items.append((e["x"], e["cov"], e["spec"], bool(e.get("keep_post", False))))
        else:
            e = tuple(e)
            items.append((e[0], e[1], e[2], bool(e[3]) if len(e) > 3 else False))
    ids = _device_ids(devices)
    results: list = [None] * len(items)
    lock = threading.Lock()
    it = iter(range(len(items)))
    failed: list = []

    def worker(dev_id):
        while not failed:  # after a failure, no device takes another experiment
            with lock:
                j = next(it, None)
            if j is None:
                return
            x, cov, spec, kp = items[j]
            try:
                results[j] = fit_gpu(x, cov, spec, keep_post=kp, devices=[dev_id], **options)
            except BaseException:
                failed.append(j)
                raise

    in_threads({f"gcnmops-many{d}": (lambda d=d: worker(d)) for d in ids})
    return results


__all__ = ["fit_gpu", "fit_gpu_device", "run_many", "KernelConfig", "get_kernel"]
