"""Wide cohorts (few regions, many samples): ``gcnmops run`` holds a bounded number of bytes per sample, so that a
cohort of a million samples fits in a few GB (benchmarks/bench_wide.py measures time and memory at scale)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from bench_wide import cohort  # noqa: E402

#: resident bytes a run may add per sample (all formats by default, CPU backend)
BYTES_PER_SAMPLE = 6000
#: the run in a fresh process, reporting its peak resident memory (kB) on its last line
_RUN = ("import resource, sys\nfrom gcnmops.cli import main\ncode = main(sys.argv[1:])\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\nsys.exit(code)")


def _peak_kb(table: Path, out: Path) -> int:
    done = subprocess.run([sys.executable, "-c", _RUN, "run", str(table), "-o", str(out), "--quiet", "--backend",
                           "cpu"], capture_output=True, text=True, cwd=REPO, timeout=1200)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_memory_per_sample_of_a_wide_cohort_is_bounded(tmp_path):
    """2 regions x 48,000 samples against 2 x 16,000 (both past PARQUET_PART_COLUMNS: matrices written in parts of
    columns, whose memory does not grow with the samples): the peak resident memory grows by at most
    BYTES_PER_SAMPLE per sample (it was over 30 KB: a dense table of residual counts, the EM's 64-lane scratch,
    pyarrow's per-column state of whole tables, a Series per column of every table read and written)."""
    small, large = 16_000, 48_000
    _peak_kb(cohort(tmp_path / "warm.tsv", 2, 200), tmp_path / "warm")  # kernels compiled and cached first
    base = _peak_kb(cohort(tmp_path / "small.tsv", 2, small), tmp_path / "small")
    peak = _peak_kb(cohort(tmp_path / "large.tsv", 2, large), tmp_path / "large")
    per_sample = (peak - base) * 1024 / (large - small)
    assert per_sample < BYTES_PER_SAMPLE, f"{per_sample:.0f} bytes per sample ({base} kB -> {peak} kB)"
