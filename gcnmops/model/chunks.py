"""Host/device pipeline of the GPU model: pinned double buffers, one stream per slot, host work overlapped.

Chunk i+1 is gathered into pinned memory and copied in while chunk i computes and chunk i-1 copies out;
results of a finished chunk are scattered into the result arrays (or land there directly when those are
pinned) while later chunks run. Every device buffer is a flat capacity-sized array; a chunk of ``rows``
uses the contiguous prefix reshaped to (rows, K) in column-major order, so each copy is one contiguous
block and the kernel's loads and stores stay coalesced.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..cuda.runtime import gather_rows, scatter_rows


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
