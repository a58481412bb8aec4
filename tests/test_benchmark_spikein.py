"""A small run of the spike-in benchmark (benchmarks/spikein.py) on the real exome counts."""
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from golden import GOLDEN_DIR  # noqa: E402

pytestmark = pytest.mark.skipif(not (GOLDEN_DIR / "exome_default").is_dir(), reason="golden data not found")


def test_spikes_change_exactly_their_windows_in_the_stated_direction():
    import spikein

    bg = spikein.load_background(1500)
    counts, truth = spikein.spike(bg, seed=2, per_sample=3, avoid=bg.ranges.iloc[:0].assign(sampleName=[]))
    assert len(truth) == 3 * len(bg.samples) and set(truth["size"]) == set(spikein.SIZE_CLASSES)
    changed = np.zeros(counts.shape, bool)
    for t in truth.itertuples():
        k = bg.samples.index(t.sample)
        rows = np.flatnonzero((bg.ranges["start"] <= t.end).to_numpy() & (bg.ranges["end"] >= t.start).to_numpy())
        assert rows.size >= 1
        diff = counts[rows, k] - bg.counts[rows, k]
        assert (diff <= 0).all() if t.CN < 2 else (diff >= 0).all()
        if t.CN == 0:
            assert (counts[rows, k] == 0).all()
        changed[rows, k] = True
    assert (counts[~changed] == bg.counts[~changed]).all()


def test_small_benchmark_reports_recall_precision_and_calibration():
    import spikein

    res = spikein.benchmark(seeds=(1,), modes=("cn.mops",), per_sample=6, n_windows=1500)["cn.mops"]
    truth, calls = res["truth"], res["calls"]
    big_losses = truth[(truth["size"] == "100 kb-1 Mb") & (truth["CN"] == 0)]
    assert len(big_losses) and big_losses["found"].mean() >= 0.5  # most whole-copy losses of 100 kb+ are found
    assert set(calls["status"]) <= {"TP", "FP", "BG"} and (calls["status"] == "TP").sum() > 0
    judged = calls[calls["status"] != "BG"]
    table = spikein.calibration_table(calls)
    assert table["calls"].sum() == len(judged) and table["false calls"].sum() == (judged["status"] == "FP").sum()
    assert (np.diff(table["stated error"].to_numpy()) <= 0).all()  # higher QUAL, lower stated error
    text = spikein.report({"cn.mops": res}, markdown=True)
    assert "| size class" not in text and "recall" in text and "| QUAL |" in text


def test_fit_calibration_recovers_a_known_map():
    """Outcomes drawn from a known map of r and the locus dispersion D: the maximum-likelihood constants give nearly
    its qualities where the calls are; the calibration table has 10 rows of equal counts (distinct QUALs), which
    state what the map states."""
    import spikein
    from gcnmops.calls.quality import Calibration, calibrate, calibrated_error

    rng = np.random.default_rng(3)
    truth = Calibration(q0=3.0, scale=0.01, power=1.8, tail_q=20.0, tail_r=100.0, locus_power=1.0)
    r = np.exp(rng.uniform(0, np.log(3e4), 40_000))
    d = np.exp(rng.exponential(0.4, r.size))
    false = rng.random(r.size) < calibrated_error(r, truth, d)
    calls = pd.DataFrame({"r": r, "locus": d, "status": np.where(false, "FP", "TP")})
    fitted = spikein.fit_calibration(calls)
    grid = np.array([0.0, 10, 30, 60, 100, 150, 300, 1000, 3000])
    for dv in (1.0, 2.0, 4.0):
        assert np.abs(calibrate(grid, fitted, np.full(grid.size, dv))
                      - calibrate(grid, truth, np.full(grid.size, dv))).max() <= 2
    table = spikein.calibration_table(calls.assign(qual=calibrate(r, fitted, d)))
    assert len(table) == 10 and table["calls"].sum() == len(calls) and table["false calls"].sum() == false.sum()
    assert np.median(table["calls"]) >= 0.09 * len(calls)  # one-decimal QUALs: (nearly) real deciles
    top = table.iloc[0]  # the lowest decile holds most false calls: within 2x of what it states
    assert top["false calls"] > 100 and 0.5 <= top["observed / stated"] <= 2
