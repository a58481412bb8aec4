"""GPU model benchmark: kernel time, end-to-end host-to-host time, PCIe bandwidth, fp64 roofline.

Shapes (regions x samples): A4 = 4 x BM-A (multi-GPU scaling), A = BM-A 6,904,726 x 15 (the thesis's, cyc=20, 9 classes), B = BM-B 481,299 x 15,
C = 1,000,000 x 100, D = 200,000 x 1000. Synthetic read counts: Poisson around a per-region level with
planted losses and gains and empty regions (the minReadCount short-cut), scaled by per-sample factors.

    python benchmarks/bench_gpu.py --shapes A,B,C,D --variants --json out.json
    python benchmarks/bench_gpu.py --scaling A4 --devices 0,1   # end-to-end on one GPU vs on several
    python benchmarks/bench_gpu.py --profile B      # one kernel launch, for `ncu` (fp64 op counts)

``--variants`` sweeps kernel configurations on the first shape and then measures every shape with the
fastest one (printed; it is the KernelConfig default when the sweep confirms it).

Kernel time: the whole matrix resident on the device, one launch, CUDA events, median of --repeat.
End-to-end: ``fit_gpu(x, cov, spec)`` from a pageable host matrix to host results (pinned result arrays
from cupy's pinned pool, chunks overlapped), wall clock, median of --repeat after one warm-up call.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gcnmops.cuda.runtime import kernel_arg  # noqa: E402
from gcnmops.model.gpu import KernelConfig, _Device, fit_gpu  # noqa: E402
from gcnmops.model.spec import ModelSpec  # noqa: E402

SHAPES = {"A4": (4 * 6_904_726, 15), "A": (6_904_726, 15), "B": (481_299, 15), "C": (1_000_000, 100), "D": (200_000, 1000)}
FOLDS = [0.025, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4]


def make_data(m: int, N: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    level = rng.gamma(4.0, 15.0, m)
    level[rng.random(m) < 0.02] = 0.0                     # empty regions: the short-cut
    x = np.empty((m, N), order="F")
    cnv_rows = rng.random(m) < 0.01
    sf = rng.uniform(0.85, 1.15, N)
    for k in range(N):
        lam = level.copy()
        hit = cnv_rows & (rng.random(m) < 0.3)
        lam[hit] *= rng.choice([0.0, 0.5, 1.5, 2.0], hit.sum())
        x[:, k] = rng.poisson(lam) * sf[k]
    return x, np.ones(N)


def spec_for(cyc: int = 20) -> ModelSpec:
    return ModelSpec.build(FOLDS, [f"CN{i}" for i in range(9)], "CN2", 1.0, cyc, 1.0)


def out_bytes(m, N, n, keep_post=False):
    return m * (2 * n * 8 + N * 8 + N + 8 + (n * N * 8 if keep_post else 0))


def time_kernel(x, cov, spec, cfg: KernelConfig, repeat: int):
    """(median kernel time (s), first call (s): compile or cache load) of one launch over the whole
    device-resident matrix, with the model's own launch (scratch, grid)."""
    import cupy as cp

    m, N = x.shape
    n = spec.folds.size
    dev = _Device(0, spec, cov, N, False, cfg, "cupy")
    be = dev.backend
    views = {"x": cp.asarray(x, order="F"), "lam": cp.empty((m, n), order="F"), "alpha": cp.empty((m, n), order="F"),
             "sini": cp.empty((m, N), order="F"), "cn": cp.empty((m, N), dtype=cp.int8, order="F"),
             "ini": cp.empty(m)}
    views = {k: kernel_arg(v) for k, v in views.items()}
    dev.allocate_resident_work(m)
    stream = be.stream()
    t0 = time.perf_counter()
    dev.launch(views, be.launch_stream(stream), m, 0)  # compile (or load) + warm
    stream.synchronize()
    compile_s = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record(stream)
        dev.launch(views, be.launch_stream(stream), m, 0)
        e1.record(stream)
        e1.synchronize()
        times.append(cp.cuda.get_elapsed_time(e0, e1) / 1e3)
    res = float(np.median(times))
    del views, dev
    cp.get_default_memory_pool().free_all_blocks()
    return res, compile_s


def pinned_bandwidth(nbytes=1 << 30):
    import cupy as cp
    import cupyx

    h = cupyx.empty_pinned(nbytes, dtype=np.uint8)
    h[:] = 1
    d = cp.empty(nbytes, dtype=np.uint8)
    s = cp.cuda.Stream(non_blocking=True)
    out = {}
    for name, fn in (("h2d", lambda: d.set(h, stream=s)), ("d2h", lambda: d.get(stream=s, out=h))):
        fn()
        s.synchronize()
        ts = []
        for _ in range(3):
            t = time.perf_counter()
            fn()
            s.synchronize()
            ts.append(time.perf_counter() - t)
        out[name] = nbytes / min(ts) / 1e9
    return out


def device_info():
    import cupy as cp

    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    sm = props["multiProcessorCount"]
    clock_hz = dev.attributes.get("ClockRate", 0) * 1e3
    # Hopper: 64 fp64 FMA units per SM, an FMA is two flops (non-tensor fp64 peak)
    return dict(name=name, sm=sm, clock_ghz=clock_hz / 1e9, fp64_peak_tflops=sm * 64 * 2 * clock_hz / 1e12,
                n_devices=cp.cuda.runtime.getDeviceCount())


def check_vs_cpu(x, cov, spec, res, rows=20000):
    from gcnmops.model.cpu import fit_cpu

    r = min(rows, x.shape[0])
    ref = fit_cpu(np.asfortranarray(x[:r]), cov, spec)
    rel = max(float(np.max(np.abs(getattr(res, f)[:r] - getattr(ref, f)) /
                        np.maximum(np.abs(getattr(ref, f)), 1e-300))) for f in ("lam", "ini"))
    scale = max(float(np.max(np.abs(getattr(res, f)[:r] - getattr(ref, f))) / max(np.max(np.abs(getattr(ref, f))), 1e-300))
                for f in ("alpha", "sini"))
    return bool(np.array_equal(res.cn[:r], ref.cn)), rel, scale


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="A,B,C,D")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--variants", action="store_true", help="sweep kernel variants on the first shape")
    ap.add_argument("--devices", default=None, help="e.g. all or 0,1 for the end-to-end runs")
    ap.add_argument("--profile", default=None, help="one kernel launch of this shape (for ncu)")
    ap.add_argument("--scaling", default=None, help="end-to-end on device 0 alone vs on --devices, this shape")
    ap.add_argument("--user-out", action="store_true", help="also time end-to-end into pageable user arrays")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    spec = spec_for()
    if a.profile:
        m, N = SHAPES[a.profile]
        x, cov = make_data(m, N)
        t, _ = time_kernel(x, cov, spec, KernelConfig(), 1)
        print(f"profile {a.profile}: kernel {t:.4f} s")
        return
    info = device_info()
    bw = pinned_bandwidth()
    print(f"device: {info['name']} x{info['n_devices']}, {info['sm']} SMs, {info['clock_ghz']:.2f} GHz, "
          f"fp64 peak {info['fp64_peak_tflops']:.1f} TFLOP/s; pinned H2D {bw['h2d']:.1f} GB/s, D2H {bw['d2h']:.1f} GB/s",
          flush=True)
    devices = None
    if a.devices:
        devices = "all" if a.devices == "all" else [int(d) for d in a.devices.split(",")]
    if a.scaling:
        return scaling(a, spec, info, bw, devices)
    rows = []
    sweep = []
    cfg_best = KernelConfig()
    for si, key in enumerate(a.shapes.split(",")):
        m, N = SHAPES[key]
        t = time.perf_counter()
        x, cov = make_data(m, N)
        gen_s = time.perf_counter() - t
        if a.variants and si == 0:
            for cfg in (KernelConfig(), KernelConfig(max_registers=None), KernelConfig(max_registers=96),
                        KernelConfig(max_registers=168), KernelConfig(max_registers=192),
                        KernelConfig(threads_per_block=64), KernelConfig(threads_per_block=256),
                        KernelConfig(variant="rolled"), KernelConfig(work="global"),
                        KernelConfig(posteriors="recompute")):
                kt, cs = time_kernel(x, cov, spec, cfg, a.repeat)
                sweep.append(dict(shape=key, cfg=dict(cfg.__dict__), kernel_s=kt, compile_s=cs))
                print(f"  variant {cfg.__dict__}: kernel {kt:.4f} s (compile {cs:.1f} s)", flush=True)
            best = min(sweep, key=lambda r: r["kernel_s"])
            cfg_best = KernelConfig(**best["cfg"])
            print(f"  fastest: {best['cfg']} ({best['kernel_s']:.4f} s): used below", flush=True)
        kt, _ = time_kernel(x, cov, spec, cfg_best, a.repeat)
        e2e_s, e2e, st, last = time_e2e(x, cov, spec, a.repeat, devices, cfg_best)
        user_s = None
        if a.user_out:
            user_s, user_all, _, _ = time_e2e(x, cov, spec, a.repeat, devices, cfg_best, user_out=True)
            print(f"  {key}: end-to-end into pageable user arrays {user_s:.4f} s {user_all}", flush=True)
        same, rel, scale = check_vs_cpu(x, cov, spec, last)
        del last
        moved = x.nbytes + out_bytes(m, N, 9)
        # work: exp per class and sample and cycle dominates; report region-sample-cycles per second
        rsc = m * N * spec.cyc
        row = dict(shape=key, m=m, N=N, kernel_s=kt, e2e_s=e2e_s, e2e_all=e2e, chunks=st["n_chunks"],
                   rows_per_chunk=st["rows_per_chunk"], pcie_gb=moved / 1e9, pcie_gbs=moved / e2e_s / 1e9,
                   gen_s=gen_s, labels_equal_cpu=same, max_rel_lam_ini=rel, max_scaled_alpha_sini=scale,
                   rsc_per_s=rsc / kt, config=dict(cfg_best.__dict__), e2e_user_out_s=user_s)
        rows.append(row)
        print(f"  {key}: {m} x {N}: kernel {kt:.4f} s, end-to-end {e2e_s:.4f} s ({st['n_chunks']} chunks; "
              f"calls {', '.join(f'{v:.3f}' for v in e2e)}), "
              f"PCIe {moved / 1e9:.2f} GB -> {moved / e2e_s / 1e9:.1f} GB/s; cpu check labels={same} rel={rel:.1e}",
              flush=True)
        del x
    if a.json:
        Path(a.json).write_text(json.dumps(dict(device=info, pinned_bw=bw, rows=rows, sweep=sweep), indent=1))
    print()
    if sweep:
        print("| kernel config (BM-A sweep) | kernel (s) |")
        print("| --- | --- |")
        for r in sweep:
            c = r["cfg"]
            print(f"| tpb {c['threads_per_block']}, {c['variant']}, work {c['work']}, regs {c['max_registers']}, "
                  f"posteriors {c['posteriors']} | "
                  f"{r['kernel_s']:.4f} |")
        print()
    print(f"| shape | regions x samples | kernel (s) | end-to-end (s) | first call (s) | chunks | "
          f"bytes over PCIe (GB) | achieved PCIe (GB/s) | region-sample-cycles / s | labels = CPU | max rel diff |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['shape']} | {r['m']:,} x {r['N']} | {r['kernel_s']:.4f} | {r['e2e_s']:.4f} | {r['e2e_all'][0]:.3f} | "
              f"{r['chunks']} | "
              f"{r['pcie_gb']:.2f} | {r['pcie_gbs']:.1f} | {r['rsc_per_s']:.3g} | {r['labels_equal_cpu']} | "
              f"{max(r['max_rel_lam_ini'], r['max_scaled_alpha_sini']):.1e} |")


def time_e2e(x, cov, spec, repeat, devices, cfg, user_out=False):
    """Median wall time of fit_gpu from host arrays to host results, after one warm-up call (the first
    element of the returned list; it includes compilation and the pools' first allocations).

    ``user_out``: results go into preallocated (and already touched) pageable numpy arrays passed as
    ``out`` (staging buffers + host scatter), instead of pinned arrays fit_gpu takes from cupy's pool.
    With pinned results, two result sets are alive while timing (the last and the new one), so the pool
    holds both after the first timed calls.
    """
    out = None
    if user_out:
        from gcnmops.model.spec import ModelOutput

        m, N = x.shape
        out = ModelOutput.allocate(m, spec.folds.size, N, False)
        for f in ("lam", "alpha", "sini", "cn", "ini"):
            getattr(out, f).fill(0)
    t = time.perf_counter()
    res = fit_gpu(x, cov, spec, devices=devices, config=cfg, out=out)        # warm-up (compile, pools)
    first = time.perf_counter() - t
    del res
    e2e = []
    for _ in range(repeat):
        st = {}
        t = time.perf_counter()
        res = fit_gpu(x, cov, spec, devices=devices, config=cfg, stats=st, out=out)
        e2e.append(time.perf_counter() - t)
        last = res
        del res
    return float(np.median(e2e)), [first] + e2e, st, last


def scaling(a, spec, info, bw, devices):
    """End-to-end time of one large experiment on device 0 alone and on ``devices``; the speed-up."""
    m, N = SHAPES[a.scaling]
    t = time.perf_counter()
    x, cov = make_data(m, N)
    print(f"  data {m} x {N} in {time.perf_counter() - t:.1f} s", flush=True)
    cfg = KernelConfig()
    kt, _ = time_kernel(x, cov, spec, cfg, a.repeat)
    one_s, one_all, st1, last = time_e2e(x, cov, spec, a.repeat, [0], cfg)
    del last
    print(f"  one GPU: kernel {kt:.4f} s, end-to-end {one_s:.4f} s {one_all}", flush=True)
    many_s, many_all, st, last = time_e2e(x, cov, spec, a.repeat, devices, cfg)
    same, rel, scale = check_vs_cpu(x, cov, spec, last)
    ids = sorted(st["chunks"])
    share = {d: sum(c[1] - c[0] for c in st["chunks"][d]) for d in ids}
    print(f"  {len(ids)} GPUs: end-to-end {many_s:.4f} s {many_all}; rows per device {share}", flush=True)
    moved = x.nbytes + out_bytes(m, N, 9)
    row = dict(shape=a.scaling, m=m, N=N, kernel_one_s=kt, e2e_one_s=one_s, e2e_one_all=one_all, e2e_many_s=many_s,
               e2e_many_all=many_all, devices=ids, rows_per_device=share, speedup=one_s / many_s,
               chunks=st["n_chunks"], pcie_gb=moved / 1e9, labels_equal_cpu=same, max_rel_lam_ini=rel,
               max_scaled_alpha_sini=scale)
    if a.json:
        Path(a.json).write_text(json.dumps(dict(device=info, pinned_bw=bw, scaling=row), indent=1))
    print()
    print("| shape | regions x samples | kernel 1 GPU (s) | end-to-end 1 GPU (s) | GPUs | end-to-end (s) | speed-up | "
          "chunks | labels = CPU |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    print(f"| {a.scaling} | {m:,} x {N} | {kt:.4f} | {one_s:.4f} | {len(ids)} | {many_s:.4f} | {one_s / many_s:.2f}x | "
          f"{st['n_chunks']} | {same} |")


if __name__ == "__main__":
    main()
