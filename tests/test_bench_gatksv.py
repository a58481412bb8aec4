"""benchmarks/bench_gatksv.py at a small size: the batch it makes is a valid bgzipped bincov matrix of the shape
asked for, both CNMOPS calls run through ``gcnmops gatk-sv cnmops``, and the JSON report holds every stage and the
clean BEDs it names exist."""
from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_gatksv.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_gatksv", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bgzf_blocks_read_back():
    bench = _bench()
    data = np.random.default_rng(0).integers(48, 58, 200_000, dtype=np.uint8).tobytes()
    packed = bench.bgzf(data, 1) + bench.BGZF_EOF
    assert gzip.decompress(packed) == data
    assert packed[12:14] == b"BC" and packed.count(b"\x1f\x8b\x08\x04") >= 4  # one BGZF block per 65,280 bytes


def test_bench_runs_both_calls(tmp_path):
    bench = _bench()
    report = bench.main(["--bins", "10000", "--samples", "12", "--backend", "cpu", "--threads", "2",
                         "--workdir", str(tmp_path), "--json", str(tmp_path / "r.json")])
    assert json.loads((tmp_path / "r.json").read_text()) == report
    folder = Path(report["batch"]["folder"])
    sizes = report["batch"]["bins"]
    assert sizes["chr1"] == 10000 and set(sizes) == {"chr1", "chrX", "chrY"}
    with gzip.open(folder / "batch.bincov.bed.gz", "rt") as fh:
        header = fh.readline().rstrip("\n").split("\t")
        rows = [line.split("\t") for line in fh]
    assert header[:3] == ["#Chr", "Start", "End"] and len(header) == 3 + 12
    assert len(rows) == sum(sizes.values()) and all(len(r) == 15 for r in rows)
    assert rows[0][:3] == ["chr1", "0", "100"] and rows[-1][:3] == ["chrY", str((sizes["chrY"] - 1) * 100),
                                                                   str(sizes["chrY"] * 100)]
    sexes = {line.split("\t")[4] for line in (folder / "batch.ped").read_text().splitlines()}
    assert sexes == {"1", "2"}
    assert [(c["r1"], c["r2"], c["prefix"]) for c in report["calls"]] == [(3, 10, "header"), (1000, 100, "large")]
    for call in report["calls"]:
        st = call["stages_s"]
        assert set(st) == set(bench.STAGES) and call["wall_s"] >= st["read"] + st["passes"] + st["clean"]
        assert sum(st[g] for g in ("MR2", "MR1", "NR2", "NR1", "FR2", "FR1")) <= st["passes"] + 0.01  # one at a time
        assert call["peak_rss_gb"] > 0
        for bed in call["beds"]:
            assert (folder / "out" / bed).is_file() and (folder / "out" / (bed + ".tbi")).is_file()
        passes = {p.name for p in (folder / "out" / "passes").iterdir()}
        assert {f"chr1.normal.r{call['r1']}", f"chrX.2.r{call['r2']}", f"chrY.1.r{call['r1']}"} <= passes
    assert report["wall_s"] == round(sum(c["wall_s"] for c in report["calls"]), 3)


def test_genome_batch_has_grch38s_contigs(tmp_path):
    bench = _bench()
    full = bench.genome_bins(1.0)
    assert abs(sum(full.values()) - bench.GENOME_BINS) <= len(full) and full["chr1"] == bench.CHR1_BINS
    meta = bench.make_batch(tmp_path, bench.genome_bins(1e-4), 4, 1, 2)
    autosomes = [line.split("\t")[0] for line in (tmp_path / "chrom_file.fai").read_text().splitlines()]
    assert autosomes == [f"chr{k}" for k in range(1, 23)] and len(meta["bins"]) == 24
    assert (tmp_path / "allo_file.fai").read_text().startswith("chrX\t")
