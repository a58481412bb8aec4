"""Streaming (issue 18): ``run_streaming`` / ``gcnmops run --stream`` on a chunked count store gives the in-memory
``cn_mops`` + integer copy numbers bit for bit, with the memory of one chromosome; ``gcnmops convert`` round trips;
bad input is refused (``error:``, exit 2); an interrupted run leaves the folder as it was."""
from __future__ import annotations

import dataclasses
import filecmp
import gzip
import json
import os
import subprocess
import sys
import threading
import tracemalloc
import weakref
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("zarr")

import cudasim  # noqa: E402
import gcnmops  # noqa: E402
from gcnmops.data import make_count_data  # noqa: E402
from gcnmops.errors import InputError  # noqa: E402
from gcnmops.example import example_cohort  # noqa: E402
from gcnmops.io.store import convert_counts, open_count_store, save_count_data  # noqa: E402
from gcnmops.pipeline.run import run_and_write  # noqa: E402
from gcnmops.pipeline.streamqc import qc_width  # noqa: E402
from gcnmops.pipeline.streaming import run_streaming  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MATRICES = ("normalized_data", "local_assessments", "individual_call", "ini_call", "cn_index")


def cohort(sizes=(900, 1100, 700, 3), n=10, seed=3, zero_chromosome: bool = True, halves: bool = False):
    """Chromosomes of ``sizes`` regions (the last tiny); with ``zero_chromosome`` one more without any read (cn.mops
    skips it; checked against the genome's column sums, not its own); ``halves``: non-whole counts."""
    m = sum(sizes)
    data, _ = example_cohort(n_regions=m, n_samples=n, seed=seed, n_cnvs=12)
    counts = data.counts.copy()
    names = np.concatenate([np.full(s, f"chr{k + 1}", dtype=object) for k, s in enumerate(sizes)])
    start = np.concatenate([np.arange(s) for s in sizes]) * 25_000 + 1
    if zero_chromosome:
        counts = np.vstack([counts, np.zeros((40, n))])
        names = np.concatenate([names, np.full(40, "chrZ", dtype=object)])
        start = np.concatenate([start, np.arange(40) * 25_000 + 1])
    if halves:
        counts = counts + 0.5 * (np.arange(counts.size).reshape(counts.shape) % 3 == 0)
    ranges = pd.DataFrame({"seqnames": names, "start": start, "end": start + 24_999})
    return make_count_data(counts, data.sample_names, ranges)


def reference(data, **params):
    """In memory: the method, then integer copy numbers (as gcnmops run)."""
    method = params.pop("method", "cn.mops")
    fn = {"cn.mops": gcnmops.cn_mops, "haplo": gcnmops.haplo_cn_mops}[method]
    raw = fn(data, backend="cpu", **params)
    return gcnmops.calc_integer_copy_numbers(raw) if len(raw.cnvr) else raw


def assert_same(got: gcnmops.CNVDetectionResult, ref: gcnmops.CNVDetectionResult):
    for name in MATRICES:
        a, b = getattr(got, name), getattr(ref, name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert np.array_equal(a, b, equal_nan=True), name
    for key in ("L", "A", "cov"):
        assert np.array_equal(got.params[key], ref.params[key], equal_nan=True), key
    if ref.posterior_probs is not None:
        assert np.array_equal(got.posterior_probs, ref.posterior_probs, equal_nan=True)
    for name in ("segmentation", "cnvs", "cnvr"):
        pd.testing.assert_frame_equal(getattr(got, name).reset_index(drop=True),
                                      getattr(ref, name).reset_index(drop=True), check_dtype=False)


@pytest.mark.parametrize("params", [
    {},
    {"norm": 2},
    {"norm": 0, "return_posterior": True},
    {"norm_type": "quant", "size_factor": "mode", "use_median": True},
    {"method": "haplo"},
], ids=["default", "norm2", "norm0_posterior", "quant_mode_median", "haplo"])
def test_streamed_equals_in_memory(tmp_path, params):
    data = cohort()
    store = save_count_data(data, tmp_path / "c.zarr", rows_per_chunk=500, samples_per_chunk=4)
    assert open_count_store(store).dtype == np.int32  # whole numbers kept as integers
    got = run_streaming(store, tmp_path / "out", backend="cpu", **params)
    ref = reference(data, **params)
    assert len(ref.cnvs) > 0 and ref.has_integer_copy_numbers()
    assert_same(got.compute(), ref)
    back = gcnmops.read_result(tmp_path / "out")  # the folder read back: the same
    assert_same(back.compute(), ref)


@pytest.mark.parametrize("params", [{}, {"norm": 2, "return_posterior": True}], ids=["default", "norm2_posterior"])
def test_streamed_on_several_devices_equals_in_memory(tmp_path, monkeypatch, params):
    """Two devices' threads (here the CPU backend, the device switch a no-op) each take the largest chromosome not
    yet taken, read it and run it: the same result and files as in memory, every chromosome once, the progress
    lines of all."""
    import contextlib

    from gcnmops.pipeline import streaming

    ran = []
    real = streaming.run_block
    monkeypatch.setattr(streaming, "_devices", lambda backend, devices: [0, 1])
    monkeypatch.setattr(streaming, "on_device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(streaming, "run_block", lambda plan, held, **kw: ran.append(kw["devices"]) or
                        real(plan, held, **kw))
    data = cohort()
    store = save_count_data(data, tmp_path / "c.zarr", rows_per_chunk=500, samples_per_chunk=4)
    lines = []
    got = run_streaming(store, tmp_path / "out", backend="cpu", devices=[0, 1], on_chromosome=lines.append,
                        **params)
    assert_same(got.compute(), reference(data, **params))
    assert sorted(d.name for d in lines) == sorted(b[0] for b in open_count_store(store).blocks)
    assert lines[-1].rows_done == data.n_regions and {tuple(d) for d in ran} <= {(0,), (1,)}
    run_streaming(store, tmp_path / "one", backend="cpu", **params)
    for name in ("segmentation.tsv", "cnvs.tsv", "cnvr.tsv", "sample_qc.tsv", "cnvr.bed"):
        assert filecmp.cmp(tmp_path / "out" / name, tmp_path / "one" / name, shallow=False), name


def test_device_threads_read_ahead_and_a_failure_stops_the_run(tmp_path, monkeypatch):
    """Several devices: each device's chromosomes are read on a reader thread of its own while the one before
    runs (every read off the device threads); a chromosome failing on one device is the run's error."""
    import contextlib
    import threading

    from gcnmops.pipeline import streaming

    readers = []
    real_read, real_block = streaming._read, streaming.run_block
    monkeypatch.setattr(streaming, "_devices", lambda backend, devices: [0, 1])
    monkeypatch.setattr(streaming, "on_device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(streaming, "_read", lambda *a: readers.append(threading.current_thread().name) or
                        real_read(*a))
    data = cohort()
    store = save_count_data(data, tmp_path / "c.zarr", rows_per_chunk=500, samples_per_chunk=4)
    got = run_streaming(store, tmp_path / "out", backend="cpu", devices=[0, 1])
    assert_same(got.compute(), reference(data))
    assert len(readers) == len(open_count_store(store).blocks)
    assert all(name.startswith("gcnmops-readahead") for name in readers), readers

    def failing(plan, held, **kw):
        if kw["devices"] == [1]:
            raise RuntimeError("device 1 failed (test)")
        return real_block(plan, held, **kw)

    monkeypatch.setattr(streaming, "run_block", failing)
    with pytest.raises(RuntimeError, match="device 1 failed"):
        run_streaming(store, tmp_path / "failed", backend="cpu", devices=[0, 1])
    assert not (tmp_path / "failed").exists() or not any((tmp_path / "failed").iterdir())  # nothing half-written


@pytest.mark.gpu
def test_streamed_on_every_gpu_equals_the_cpu(tmp_path):
    """A store streamed over every GPU of this machine (one GPU: over it alone): the CPU's in-memory result."""
    data = cohort(sizes=(30_000, 45_000, 8_000, 3, 20_000), n=16, seed=8)
    store = save_count_data(data, tmp_path / "c.zarr", rows_per_chunk=20_000, samples_per_chunk=8)
    got = run_streaming(store, tmp_path / "out", backend="gpu", devices="all")
    assert_same(got.compute(), reference(data))


def test_streamed_files_equal_run_and_write(tmp_path):
    """Call tables, sample QC, BED, SEG and VCF as gcnmops run writes them (their qualities from the evidence each
    chromosome gathered)."""
    data = cohort()
    store = save_count_data(data, tmp_path / "c.zarr")
    run_streaming(store, tmp_path / "s", backend="cpu", keep="none")
    run_and_write("cn.mops", data, tmp_path / "m", backend="cpu", formats=["bed", "vcf", "seg"])
    for name in ("segmentation.tsv", "cnvs.tsv", "cnvr.tsv", "sample_qc.tsv", "cnvs.bed", "cnvr.bed",
                 "segmentation.seg"):
        assert filecmp.cmp(tmp_path / "s" / name, tmp_path / "m" / name, shallow=False), name
    vcf = [gzip.open(tmp_path / d / "cnvr.vcf.gz", "rt").read().splitlines() for d in ("s", "m")]
    strip = [[x for x in v if not x.startswith(("##fileDate", "##gcnmops"))] for v in vcf]
    assert strip[0] == strip[1] and len(strip[0]) > 20
    params = json.loads((tmp_path / "s" / "params.json").read_text())
    assert params["matrixStore"] == "matrices.zarr"
    assert not [p for p in (tmp_path / "s").iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("kind", ["whole", "non_whole", "beyond"])
def test_streamed_sample_qc_is_the_in_memory_one(tmp_path, kind, monkeypatch):
    """sample_qc.tsv of a streamed run is the in-memory run's byte for byte (every float the same) on a cohort of
    several chromosomes with a nearly empty sample, flagged: with the matrices kept (read back from the store) and
    without (written as scratch, gone once the store is published); params.json's sampleQC as well, and the
    StoredResult and the folder read back carry the table. The coverage comes from the counts tallied as they
    were read (whole counts), or from the counts read back (non-whole counts; a median count beyond the tally)."""
    from gcnmops.calls.spreads import TALLY_BINS
    from gcnmops.pipeline.streamqc import CoverageTally

    data = cohort(sizes=(900, 1100, 700), halves=kind == "non_whole")
    counts = data.counts.copy()
    counts[np.random.default_rng(1).random(len(counts)) < 0.96, 3] = 0.0
    if kind == "beyond":  # exome-like depths: median counts above the tally's bins
        counts *= TALLY_BINS // 8
    data = make_count_data(counts, data.sample_names, data.ranges)
    tallied, real = [], CoverageTally.coverage

    def coverage(self, names):
        table = real(self, names)
        tallied.append(table is not None)
        return table

    monkeypatch.setattr(CoverageTally, "coverage", coverage)
    store = save_count_data(data, tmp_path / "c.zarr", rows_per_chunk=500, samples_per_chunk=4)
    mem, _ = run_and_write("cn.mops", data, tmp_path / "m", backend="cpu", formats=["seg"])
    flagged = mem.sample_qc[mem.sample_qc["outlier"]]
    assert flagged["sample"].tolist() == [data.sample_names[3]] and "median_zero" in flagged["reasons"].iloc[0]
    assert (mem.sample_qc["log2_mad"] > 0).all() and mem.sample_qc["cnvs"].sum() > 0
    params = json.loads((tmp_path / "m" / "params.json").read_text())["sampleQC"]
    for keep in ("none", "all"):
        out = tmp_path / keep
        got = run_streaming(store, out, backend="cpu", keep=keep, formats=["seg"])
        assert filecmp.cmp(out / "sample_qc.tsv", tmp_path / "m" / "sample_qc.tsv", shallow=False), keep
        pd.testing.assert_frame_equal(got.sample_qc, mem.sample_qc, check_exact=True)
        assert json.loads((out / "params.json").read_text())["sampleQC"] == params
        assert not (out / "matrices.zarr" / ".scratch").exists()
        if keep == "all":  # the QC reads groups of samples as wide as the store's chunks: each chunk read once
            import zarr

            counts = open_count_store(store)
            width = qc_width(*counts.shape, 1100 * counts.shape[1] * 8)
            assert 1 < width < counts.shape[1]
            for name in ("normalized_data", "local_assessments"):
                assert zarr.open_array(str(out / "matrices.zarr" / name), mode="r").chunks[-1] == width
        back = gcnmops.read_result(out).sample_qc  # the text (15 significant digits) read back
        pd.testing.assert_frame_equal(back, mem.sample_qc, check_dtype=False, rtol=1e-14)
    assert got.timings["sample_qc"] > 0
    assert tallied == [kind == "whole"] * 2


def test_non_whole_counts_and_parquet_input(tmp_path):
    """float64 counts (column sums over whole columns, as numpy sums the matrix) and a Parquet table read by row
    groups give the in-memory result."""
    data = cohort(halves=True)
    store = save_count_data(data, tmp_path / "c.zarr", rows_per_chunk=300)
    assert open_count_store(store).dtype == np.float64 and open_count_store(store).col_sums is None
    ref = reference(data, size_factor="mode")
    assert_same(run_streaming(store, tmp_path / "a", backend="cpu", size_factor="mode").compute(), ref)
    table = pd.concat([data.ranges, pd.DataFrame(data.counts, columns=data.sample_names)], axis=1)
    table.to_parquet(tmp_path / "c.parquet", row_group_size=700)
    assert_same(run_streaming(tmp_path / "c.parquet", tmp_path / "b", backend="cpu", size_factor="mode").compute(),
                ref)


def test_keep_chooses_the_matrices(tmp_path):
    data = cohort(zero_chromosome=False)
    store = save_count_data(data, tmp_path / "c.zarr")
    got = run_streaming(store, tmp_path / "out", backend="cpu", keep="local_assessments")
    assert got.kept == ["local_assessments", "integer_copy_number"]
    assert sorted(p.name for p in (tmp_path / "out" / "matrices.zarr").iterdir() if not p.name.startswith(".")) == \
        ["integer_copy_number", "local_assessments", "ranges.parquet"]
    ref = reference(data)
    assert np.array_equal(got.matrix("local_assessments")[:], ref.local_assessments)
    with pytest.raises(InputError, match="not kept"):
        got.matrix("normalized_data")
    with pytest.raises(InputError, match="needs every matrix"):
        got.compute()


def _table(data) -> pd.DataFrame:
    return pd.concat([data.ranges, pd.DataFrame(data.counts.astype(np.int64), columns=data.sample_names)], axis=1)


@pytest.mark.parametrize("fmt", ["tsv", "parquet"])
def test_convert_round_trip(tmp_path, fmt):
    data = cohort(zero_chromosome=False)
    path = tmp_path / f"c.{fmt}"
    table = _table(data)
    table.to_csv(path, sep="\t", index=False) if fmt == "tsv" else table.to_parquet(path)
    out, in_parts = convert_counts(path, tmp_path / "c.zarr", rows=500)
    store = open_count_store(out)
    assert in_parts and store.dtype == np.int32 and store.shape == data.counts.shape
    assert np.array_equal(store.rows(0, store.shape[0]), data.counts)
    assert store.sample_names == data.sample_names and store.ranges.equals(data.ranges)
    assert np.array_equal(store.col_sums, data.counts.sum(axis=0))
    # an unsorted table: read whole and sorted as read_counts sorts it
    table.sample(frac=1, random_state=2).to_csv(tmp_path / "u.tsv", sep="\t", index=False)
    out, in_parts = convert_counts(tmp_path / "u.tsv", tmp_path / "u.zarr", rows=500)
    again = gcnmops.read_counts(tmp_path / "u.tsv")
    assert not in_parts and np.array_equal(open_count_store(out).rows(0, again.n_regions), again.counts)
    # a later part with non-whole counts widens the store to float64
    mixed = table.copy()
    mixed[data.sample_names[0]] = mixed[data.sample_names[0]].astype(float)
    mixed.loc[len(mixed) - 1, data.sample_names[0]] = 2.5
    mixed.to_csv(tmp_path / "f.tsv", sep="\t", index=False)
    out, _ = convert_counts(tmp_path / "f.tsv", tmp_path / "f.zarr", rows=500)
    assert open_count_store(out).dtype == np.float64
    assert np.array_equal(open_count_store(out).rows(0, len(mixed)), gcnmops.read_counts(tmp_path / "f.tsv").counts)


def test_memory_scales_with_the_largest_chromosome(tmp_path):
    """The traced peak of a streamed run grows with the largest chromosome, not with the genome: 12 more
    chromosomes add less than their own counts would take (what grows: per-region coordinates, window medians,
    call tables); the in-memory run of the larger cohort (its matrices; the calls' qualities are made later, by
    the writers) needs over twice as much."""
    peaks = {}
    for k in (4, 16):
        data = cohort(sizes=(500,) * k, n=200, seed=k, zero_chromosome=False)
        store = save_count_data(data, tmp_path / f"c{k}.zarr", rows_per_chunk=500)  # chunks within a chromosome
        run_streaming(store, tmp_path / f"warm{k}", backend="cpu", keep="none")  # compiled, caches warm
        tracemalloc.start()
        run_streaming(store, tmp_path / f"o{k}", backend="cpu", keep="all")
        peaks[k] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    tracemalloc.start()
    reference(data)
    in_memory = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    chromosome = 500 * 200 * 8
    assert peaks[16] - peaks[4] < 12 * chromosome, peaks
    assert peaks[16] < 40 * chromosome and in_memory > 2 * peaks[16], (peaks, in_memory)


def test_interrupted_run_leaves_the_folder(tmp_path, monkeypatch):
    data = cohort()
    store = save_count_data(data, tmp_path / "c.zarr")
    out = tmp_path / "out"
    run_streaming(store, out, backend="cpu", keep="none")
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    from gcnmops.pipeline import streaming

    real, calls = streaming.run_block, []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(streaming, "run_block", failing)
    with pytest.raises(KeyboardInterrupt):
        run_streaming(store, out, backend="cpu")
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before  # nothing new, nothing left over
    assert gcnmops.read_result(out).kept == ["integer_copy_number"]


def _threads(prefix: str) -> list:
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


def test_read_ahead_holds_two_chromosomes_and_overlaps(tmp_path, monkeypatch):
    """While chromosome k is computed, k + 1 is read (each computation waits until the next read has started: a
    stream without read-ahead would stop here); no read starts while two chromosomes' counts are alive (the
    counts followed by weak references), and a chromosome's counts are gone once normalized; the result is the
    in-memory one; timings give each stage's own seconds and the waits."""
    from gcnmops.io.store import CountStore
    from gcnmops.pipeline import streaming

    data = cohort()
    path = save_count_data(data, tmp_path / "c.zarr", rows_per_chunk=300)
    total = len(open_count_store(path).blocks)
    cond = threading.Condition()
    reads, live, in_flight = [], set(), []

    class Watched(CountStore):
        def chromosome(self, name, a, b, values=None):
            with cond:
                reads.append(name)
                in_flight.append(len(live) + 1)  # this one and the counts still alive
                cond.notify_all()
            got = super().chromosome(name, a, b, values)
            live.add(name)
            weakref.finalize(got.counts, live.discard, name)
            return got

    opened = streaming.open_count_store
    monkeypatch.setattr(streaming, "open_count_store",
                        lambda p: Watched(**{f.name: getattr(opened(p), f.name) for f in dataclasses.fields(CountStore)}))
    real, overlapped = streaming.run_block, []

    def computing(*args, **kwargs):
        k = len(overlapped)
        with cond:
            overlapped.append(cond.wait_for(lambda: len(reads) >= min(total, k + 2), timeout=60))
        return real(*args, **kwargs)

    from gcnmops.pipeline import stages

    real_fit, released = stages.fit, []

    def fitting(*args, **kwargs):  # norm=1: the model reads the normalized counts; the counts are gone
        released.append(reads[len(released)] not in live)
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(streaming, "run_block", computing)
    monkeypatch.setattr(stages, "fit", fitting)
    got = run_streaming(path, tmp_path / "out", backend="cpu")
    assert len(reads) == total == len(overlapped) == len(released) and all(overlapped) and all(released)
    assert max(in_flight) <= 2, in_flight
    monkeypatch.undo()  # the in-memory reference below runs the stages unwatched
    assert_same(got.compute(), reference(data))
    assert set(got.timings) == set(streaming.STAGES + streaming.WAITS) | {"total"}
    assert got.timings["read"] > 0 and got.timings["write"] > 0
    assert got.timings["read_wait"] <= got.timings["total"] and got.timings["write_wait"] <= got.timings["total"]
    assert not _threads("gcnmops-store") and not _threads("gcnmops-readahead")


@pytest.mark.parametrize("failing", [1, 4], ids=["second_chromosome", "last_chromosome"])  # of 5
def test_background_writer_failure_ends_the_run(tmp_path, monkeypatch, failing):
    """A write of the background writer failing (a full disk; any other error) is the run's error, raised while the
    stream goes on (at the next chromosome's hand-over) or at its end (the last chromosome); nothing is left, not
    even the output folder the run made."""
    import errno

    from gcnmops.outputs.resultstore import ResultStore

    data = cohort()
    path = save_count_data(data, tmp_path / "c.zarr")
    real, writes = ResultStore.write, []

    def full(self, name, a, b, value):
        writes.append(a)
        if len(set(writes)) > failing:  # the (failing + 1)-th chromosome
            raise OSError(errno.ENOSPC, "No space left on device", str(self.tmp / name))
        return real(self, name, a, b, value)

    monkeypatch.setattr(ResultStore, "write", full)
    with pytest.raises(InputError, match="No space left on the device"):
        run_streaming(path, tmp_path / "out", backend="cpu")
    assert not (tmp_path / "out").exists()
    assert not _threads("gcnmops-store")

    def broken(self, name, a, b, value):
        raise RuntimeError("the store broke")

    monkeypatch.setattr(ResultStore, "write", broken)
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "mine.txt").write_text("x")
    with pytest.raises(RuntimeError, match="the store broke"):
        run_streaming(path, tmp_path / "kept", backend="cpu")
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["mine.txt"]


def test_bad_counts_found_by_the_read_ahead_end_the_run(tmp_path):
    """A NaN in the third chromosome, found while the second is computed: the run's error names the chromosome and
    the cell; no output folder is left."""
    data = cohort(halves=True)
    counts = data.counts.copy()
    counts[2000 + 17, 3] = np.nan  # chr3 starts at row 2000
    path = save_count_data(gcnmops.CountData(counts, data.sample_names, data.ranges), tmp_path / "c.zarr")
    with pytest.raises(InputError, match=r"chromosome chr3.*NaN"):
        run_streaming(path, tmp_path / "out", backend="cpu")
    assert not (tmp_path / "out").exists()


def test_interrupt_while_the_writer_writes(tmp_path, monkeypatch):
    """Ctrl-C while a chromosome's matrices are being written in the background: the clean-up waits for the writer
    (nothing is written after it), the folder stays as it was."""
    import time

    from gcnmops.outputs.resultstore import ResultStore
    from gcnmops.pipeline import streaming

    data = cohort()
    path = save_count_data(data, tmp_path / "c.zarr")
    out = tmp_path / "out"
    run_streaming(path, out, backend="cpu", keep="none")
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    real_write, writing = ResultStore.write, threading.Event()

    def slow(self, *args):
        writing.set()
        time.sleep(0.5)
        return real_write(self, *args)

    real, calls = streaming.run_block, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            assert writing.wait(30)  # chromosome 2's matrices are being written
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(ResultStore, "write", slow)
    monkeypatch.setattr(streaming, "run_block", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_streaming(path, out, backend="cpu")
    assert not _threads("gcnmops-store")
    time.sleep(0.6)
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    assert gcnmops.read_result(out).kept == ["integer_copy_number"]


def test_sigterm_while_the_writer_writes(tmp_path):
    """gcnmops run on a store, SIGTERM sent while the background writer writes: exit 143, `error: terminated`,
    no output folder."""
    data = cohort(zero_chromosome=False)
    path = save_count_data(data, tmp_path / "c.zarr")
    out = tmp_path / "out"
    script = f"""
import os, signal, sys, time
from gcnmops.outputs.resultstore import ResultStore
from gcnmops.cli import main
real = ResultStore.write
def slow(self, *args):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(1)
    return real(self, *args)
ResultStore.write = slow
sys.exit(main(["run", {str(path)!r}, "-o", {str(out)!r}, "--backend", "cpu", "--quiet"]))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=600,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 143, done.stderr
    assert done.stderr.startswith("error: terminated (SIGTERM)") and "Traceback" not in done.stderr
    assert not out.exists()


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gcnmops", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=600)


def test_cli_convert_and_stream(tmp_path):
    data = cohort(zero_chromosome=False)
    _table(data).to_csv(tmp_path / "c.tsv", sep="\t", index=False)
    done = _cli("convert", tmp_path / "c.tsv", "-o", tmp_path / "c.zarr", "--rows", 400)
    assert done.returncode == 0 and "int32, read in parts" in done.stdout, done.stderr
    done = _cli("run", tmp_path / "c.zarr", "-o", tmp_path / "out", "--backend", "cpu", "--keep", "local_assessments")
    assert done.returncode == 0, done.stderr
    lines = [x for x in done.stderr.splitlines() if x.startswith("gcnmops stream: ")]
    assert len(lines) == 4 and "(4/4)" in lines[-1] and "100% of regions" in lines[-1]
    assert f"sample QC ({tmp_path / 'out' / 'sample_qc.tsv'}): no outlier" in done.stdout
    ref = reference(data)
    back = gcnmops.read_result(tmp_path / "out")
    assert back.sample_qc["sample"].tolist() == data.sample_names
    assert np.array_equal(back.matrix("local_assessments")[:], ref.local_assessments)
    pd.testing.assert_frame_equal(back.cnvs, ref.cnvs.reset_index(drop=True), check_dtype=False)


def test_bad_input(tmp_path):
    data = cohort(zero_chromosome=False)
    _table(data).to_csv(tmp_path / "c.tsv", sep="\t", index=False)
    store = save_count_data(data, tmp_path / "c.zarr")
    _table(data).sample(frac=1, random_state=1).to_parquet(tmp_path / "u.parquet")
    (tmp_path / "empty.zarr").mkdir()
    cases = [
        (("run", tmp_path / "c.tsv", "--stream"), "convert it first"),
        (("run", store, "--keep", "sini"), "Unknown matrix 'sini'"),
        (("run", store, "--formats", "parquet"), "matrices.zarr"),
        (("run", store, "--method", "single"), "cohort methods"),
        (("run", store, "--seg-algorithm", "DNAcopy"), "fast"),
        (("run", store, "--plots"), "--plots"),
        (("run", tmp_path / "u.parquet", "--stream"), "contiguous"),
        (("run", tmp_path / "empty.zarr"), "no array 'counts'"),
        (("run", tmp_path / "nothere.zarr"), "not found"),
        (("run", tmp_path / "c.tsv", "--keep", "all"), "--stream only"),
        (("convert", tmp_path / "nothere.tsv", "-o", tmp_path / "x.zarr"), "not found"),
        (("convert", tmp_path / "c.tsv", "-o", tmp_path / "c.tsv"), "existing file"),
    ]
    for args, message in cases:
        if args[0] == "run":
            args = args + ("-o", tmp_path / "out", "--backend", "cpu")
        done = _cli(*args)
        assert done.returncode == 2 and done.stderr.startswith("error: ") and message in done.stderr, (args, done.stderr)
    assert not (tmp_path / "out").exists() and not (tmp_path / "x.zarr").exists()


GPU_CHILD = r'''
    import json, sys
    import numpy as np
    import gcnmops
    from test_streaming import MATRICES, cohort
    from gcnmops.cuda import probe
    from gcnmops.io.store import save_count_data
    from gcnmops.pipeline.streaming import run_streaming
    probe.gpu_available = lambda: True  # the simulator is no usable GPU to the probe
    data = cohort(sizes=(60, 50, 3), n=4, zero_chromosome=True)
    d = sys.argv[1]
    got = run_streaming(save_count_data(data, d + "/c.zarr"), d + "/gpu", backend="gpu").compute()
    ref = gcnmops.cn_mops(data, backend="gpu")
    ref = gcnmops.calc_integer_copy_numbers(ref, backend="gpu") if len(ref.cnvr) else ref
    same = all(np.array_equal(getattr(ref, k), getattr(got, k), equal_nan=True) for k in MATRICES)
    same = same and all(getattr(ref, k).reset_index(drop=True).equals(getattr(got, k))
                        for k in ("segmentation", "cnvs", "cnvr"))
    json.dump({"same": bool(same), "cnvs": len(got.cnvs)}, open(d + "/result.json", "w"))
'''
GPU_SCENARIO = cudasim.register(__name__, GPU_CHILD)


def test_gpu_backend_in_the_cuda_simulator(cuda_simulator):
    """The GPU backend per chromosome (GPU normalization, model from host memory, segmentation, integer copy
    numbers) under numba's CUDA simulator (in the session's simulator child, cudasim.py), tiny: the in-memory GPU
    pipeline's result (the simulator's model sums in another order than the CPU's, so the comparison is GPU with
    GPU)."""
    out = cuda_simulator.result(GPU_SCENARIO)
    assert out["same"] and out["cnvs"] > 0


def test_regions_beyond_vcf_positions_refused_before_the_store_is_read(tmp_path, monkeypatch):
    """A 3M-region cohort of 25-kb windows has chromosomes of 3.4 Gb: the VCF cannot hold them. That is said before
    the counts are read (it used to come after the whole run, at writing), and nothing is written."""
    data = cohort(zero_chromosome=False)
    ranges = data.genomic_ranges().copy()
    ranges["start"] = ranges["start"] * 4_000
    ranges["end"] = ranges["start"] + 24_999
    store = save_count_data(make_count_data(data.counts, data.sample_names, ranges), tmp_path / "c.zarr")
    import gcnmops.pipeline.streaming as streaming

    def no_read(*args, **kwargs):
        raise AssertionError("the store was read")

    monkeypatch.setattr(streaming, "_genome", no_read)
    with pytest.raises(gcnmops.InputError, match="VCF positions are 32-bit"):
        gcnmops.run_streaming(store, tmp_path / "out", backend="cpu")
    assert not (tmp_path / "out").exists()
    monkeypatch.undo()
    res = gcnmops.run_streaming(store, tmp_path / "out", backend="cpu", formats=["bed", "seg"])
    assert len(res.segmentation) and not (tmp_path / "out" / "cnvr.vcf.gz").exists()


def test_result_store_writes_row_bands_in_threads(tmp_path, monkeypatch):
    """A chromosome's rows spanning many row chunks are written by several threads, a band of whole chunks each:
    the stored matrices equal what was written, also where a chromosome starts and ends inside a chunk."""
    from gcnmops.io import store as io_store
    from gcnmops.outputs import resultstore

    monkeypatch.setattr(io_store, "usable_cores", lambda: 4)
    rng = np.random.default_rng(5)
    shapes = {"local_assessments": ((1000, 5), np.float64), "integer_copy_number": ((1000, 5), np.int8),
              "posterior_probs": ((1000, 3, 5), np.float64)}
    gr = pd.DataFrame({"seqnames": ["1"] * 1000, "start": np.arange(1000) * 10 + 1, "end": np.arange(1000) * 10 + 10})
    store = resultstore.ResultStore(tmp_path, shapes, {}, gr, max_rows=64)
    values = {k: rng.integers(0, 100, shape).astype(dtype) for k, (shape, dtype) in shapes.items()}
    seen = set()
    real = resultstore.ResultStore.write

    def write(self, name, a, b, value):
        real(self, name, a, b, value)
        seen.update(t.name for t in threading.enumerate() if t.name.startswith(self._thread_name + "w"))

    monkeypatch.setattr(resultstore.ResultStore, "write", write)
    for a, b in ((0, 437), (437, 438), (438, 1000)):
        for key, value in values.items():
            store.write(key, a, b, value[a:b])
    store.publish()
    assert len(seen) > 1  # several band threads wrote
    zarr = pytest.importorskip("zarr")
    for key, value in values.items():
        got = np.asarray(zarr.open_array(str(tmp_path / resultstore.MATRIX_STORE / key), mode="r")[:])
        np.testing.assert_array_equal(got, value)


def test_store_blocks_read_in_threads_equal_the_matrix(tmp_path, monkeypatch):
    """A count store's rows and sample columns read chunk by chunk in threads (``read_block``) are the matrix's,
    where the block starts and ends inside chunks in both directions, also converted to float64 in column-major
    order on the way; a damaged chunk is still an InputError."""
    from gcnmops.io import store as io_store

    monkeypatch.setattr(io_store, "usable_cores", lambda: 3)
    data = cohort(sizes=(40, 31))
    store = open_count_store(save_count_data(data, tmp_path / "c.zarr", rows_per_chunk=7, samples_per_chunk=3))
    m, n = store.shape
    assert n > 6
    for c0, c1 in ((0, n), (2, 7), (4, 5), (1, n - 1)):
        np.testing.assert_array_equal(store.columns(c0, c1), data.counts[:, c0:c1])
        # converted and made column-major chunk by chunk on the way (the sample QC's layout)
        got = store.columns(c0, c1, np.float64, "F")
        assert got.dtype == np.float64 and got.flags.f_contiguous
        np.testing.assert_array_equal(got, data.counts[:, c0:c1])
    for a, b in ((0, m), (5, 23), (8, 9)):
        np.testing.assert_array_equal(store.rows(a, b), data.counts[a:b])
    (tmp_path / "c.zarr" / "counts" / "1.1").write_bytes(b"damaged")
    with pytest.raises(InputError, match="damaged"):
        store.columns(2, 7)


def test_qc_groups_hold_a_column_per_thread():
    """The sample QC's groups of sample columns: as many as the bytes allow, never fewer than numba's threads (the
    statistics run in parallel over a group's columns), never more than the samples."""
    import numba

    threads = numba.get_num_threads()
    assert qc_width(10 ** 6, 50, 8 * 10 ** 6) == min(50, max(threads, 1))
    assert qc_width(10 ** 6, 50, 8 * 10 ** 7) == max(threads, 10)
    assert qc_width(10 ** 6, 1, 8 * 10 ** 9) == 1
    assert qc_width(10, 5000, 8 * 10 ** 9) == 5000


def test_coverage_tally_of_blocks_merged_is_the_tally_of_the_rows():
    """Blocks tallied apart (their histograms cut after their last count) and merged in any order give the
    coverage of tallying every row here, and calls.qc.coverage_qc's numbers."""
    from gcnmops.calls.qc import coverage_qc
    from gcnmops.pipeline.streamqc import CoverageTally

    rng = np.random.default_rng(2)
    counts = np.asfortranarray(rng.poisson([3.0, 40.0, 900.0], size=(5000, 3)).astype(np.float64))
    counts[:2600, 0] = 0.0  # a median count of 0
    names = ["a", "b", "c"]
    here, apart = CoverageTally(5000, 3), CoverageTally(5000, 3)
    cuts = [(0, 1200), (1200, 1201), (1201, 4000), (4000, 5000)]
    for a, b in cuts:
        here.tally(a, counts[a:b])
    for a, b in reversed(cuts):
        tally = CoverageTally.of_block(counts[a:b])
        assert tally[0].shape[1] <= int(counts[a:b].max()) + 1
        apart.merge(a, b - a, tally)
    pd.testing.assert_frame_equal(apart.coverage(names), here.coverage(names), check_exact=True)
    pd.testing.assert_frame_equal(apart.coverage(names), coverage_qc(counts, names), check_exact=True)
