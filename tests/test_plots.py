"""Plots and the HTML report: they render, say what they show, and are written by ``run --plots/--report``."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")

import gcnmops  # noqa: E402
from gcnmops import InputError  # noqa: E402
from gcnmops.example import example_cohort  # noqa: E402
from gcnmops.data import make_count_data  # noqa: E402
from gcnmops.report.plots import (GAIN, LOSS, OTHER, _thin, informative_cnvr, log_ratios, plot_cnvr,  # noqa: E402
                           plot_overview, segplot, write_plots)
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from gcnmops.report import write_report  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def result():
    """8 samples, 400 regions; sample S_1 has no reads over 21 regions (a CN0 call)."""
    data, _ = example_cohort(n_regions=400, n_samples=8, n_cnvs=3, seed=11)
    counts = data.counts.copy()
    counts[100:121, 0] = 0
    r = gcnmops.cn_mops(make_count_data(counts, data.sample_names, data.ranges), backend="cpu")
    assert len(r.cnvr) > 0 and (r.cnvs["mean"] < -5).any()
    return gcnmops.calc_integer_copy_numbers(r)


def _texts(fig) -> list[str]:
    out = [fig._suptitle.get_text()] if fig._suptitle is not None else []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
    return out


def _line_colours(ax) -> list[tuple[str, int]]:
    """(hex colour, number of lines) of each line collection of ``ax``."""
    return [(to_hex(c.get_colors()[0]), len(c.get_segments())) for c in ax.collections
            if isinstance(c, LineCollection) and len(c.get_segments())]


def test_plot_cnvr_panels_and_colours(result, tmp_path) -> None:
    path = tmp_path / "cnvr.png"
    fig = plot_cnvr(result, which=1, path=path)
    assert path.read_bytes()[:8] == PNG
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["Normalized Read Counts", "Local Assessments", "Read Count Ratios", "CNV Call"]
    row = result.cnvr.iloc[0]
    assert all(ax.get_xlabel().startswith(f"{row['seqnames']}: ") for ax in fig.axes[2:])
    assert fig.axes[1].get_ylabel() == "local assessment (sINI)"
    cnvs = result.cnvs
    carriers = set(cnvs[(cnvs.seqnames == row["seqnames"]) & (cnvs.start <= row["end"]) & (cnvs.end >= row["start"])]
                   ["sampleName"])
    drawn = dict(_line_colours(fig.axes[3]))  # one collection per colour: grey (no call), gains, losses
    assert drawn.get(GAIN, 0) + drawn.get(LOSS, 0) == len(carriers)
    assert sum(drawn.values()) == len(result.sample_names)
    assert all(s in fig._suptitle.get_text() for s in carriers)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert f"no call ({len(result.sample_names) - len(carriers)})" in legend
    with pytest.raises(InputError, match="unknown CNVR"):
        plot_cnvr(result, which=len(result.cnvr) + 1)


def test_segplot_draws_segments_where_their_points_are(result, tmp_path) -> None:
    """Points and lines on one scale: each line at the mean of its points; the CN0 call at ~log2(0.025)."""
    fig = segplot(result, sample_idx=1, path=tmp_path / "seg.png")
    assert (tmp_path / "seg.png").read_bytes()[:8] == PNG
    chroms = list(dict.fromkeys(result.gr["seqnames"]))
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == chroms
    assert visible[0].get_ylabel() == "local assessment (sINI)" and "sINI" in fig._suptitle.get_text()
    lo, hi = visible[0].get_ylim()
    assert lo == pytest.approx(-hi)
    sini = result.local_assessments[:, 0]
    gr = result.gr
    ax = visible[chroms.index("chr1")]
    points = np.concatenate([c.get_offsets() for c in ax.collections if not isinstance(c, LineCollection)])
    segs, calls = [c for c in ax.collections if isinstance(c, LineCollection)]
    on = (gr.seqnames == "chr1").to_numpy()
    seg = result.segmentation[(result.segmentation.sampleName == "S_1") & (result.segmentation.seqnames == "chr1")]
    assert sorted(s[0, 1] for s in segs.get_segments()) == pytest.approx(sorted(seg["mean"]))
    cn0 = result.cnvs[(result.cnvs.sampleName == "S_1") & (result.cnvs.CN == "CN0")].iloc[0]
    rows = on & (gr.start >= cn0.start).to_numpy() & (gr.end <= cn0.end).to_numpy()
    (level,) = {s[0, 1] for s in calls.get_segments()}
    assert level == pytest.approx(sini[rows].mean()) and level < -5 and to_hex(calls.get_colors()[0]) == LOSS
    assert (np.abs(points[:, 1] - level) < 0.01).sum() >= rows.sum()  # the CN0 regions' points are there too
    assert lo < level
    ratio = segplot(result, sample_idx="S_1", seqname="chr1", values="ratio")
    assert [a.get_title() for a in ratio.axes if a.get_visible()] == ["chr1"]
    assert "ratio" in ratio.axes[0].get_ylabel()
    (rlevel,) = {s[0, 1] for s in [c for c in ratio.axes[0].collections if isinstance(c, LineCollection)][1]
                 .get_segments()}
    assert rlevel == pytest.approx(log_ratios(result)[rows, 0].mean()) and rlevel < -10
    with pytest.raises(InputError, match="counts from 1"):
        segplot(result, sample_idx=0)
    with pytest.raises(InputError, match="values must be"):
        segplot(result, values="log")
    lr = log_ratios(result)
    assert lr.shape == result.normalized_data.shape and np.isfinite(lr).all()


def test_segplot_thins_large_panels(result) -> None:
    x = np.arange(100_000, dtype=float)
    y = np.sin(x / 500.0)
    y[77_777] = 9.0
    tx, ty = _thin(x, y, 4000)
    assert tx.size <= 4000 and ty.max() == 9.0 and ty.min() == y.min()
    assert _thin(x[:100], y[:100], 4000)[1] is not None and _thin(x[:100], y[:100], 4000)[0].size == 100
    fig = segplot(result, sample_idx=1, max_points=50)
    for ax in fig.axes:
        if ax.get_visible():
            points = [c for c in ax.collections if not isinstance(c, LineCollection)][0].get_offsets()
            assert len(points) <= 50


def test_overview(result, tmp_path) -> None:
    ov = plot_overview(result, path=tmp_path / "ov.png")
    assert (tmp_path / "ov.png").read_bytes()[:8] == PNG
    ax = ov.axes[0]
    assert "CNVs" in ax.get_title(loc="left")
    bars = ax.collections[1]
    assert len(bars.get_paths()) == len(result.cnvs)
    edge = {to_hex(c) for c in bars.get_edgecolors()}
    assert edge <= {GAIN, LOSS, OTHER} and LOSS in edge and GAIN in edge


def test_informative_cnvr_picks_largest_most_carriers_strongest(result) -> None:
    """Not the first regions in genome order: the largest, the one most samples carry, the strongest."""
    names = list(result.sample_names)
    starts = np.array([1, 10_001, 20_001, 30_001, 40_001, 50_001]) + 100_000
    ends = starts + np.array([999, 999, 49_999, 999, 999, 999])
    cnvr = result.cnvr.iloc[:0].reindex(range(6)).assign(seqnames="chr1", start=starts, end=ends)
    rows = [(0, "S_1", -1.0), (1, "S_1", -1.0), (2, "S_2", 0.6), (4, "S_3", -5.3)]
    rows += [(3, s, 0.6) for s in names[:5]]
    cnvs = pd.DataFrame({"seqnames": "chr1", "start": [starts[r] for r, _, _ in rows],
                         "end": [ends[r] for r, _, _ in rows], "sampleName": [s for _, s, _ in rows],
                         "median": [m for _, _, m in rows], "mean": [m for _, _, m in rows], "CN": None})
    r = result.replace(cnvr=cnvr, cnvs=cnvs)
    chosen = informative_cnvr(r, 3)
    assert chosen == [(2, "largest"), (3, "most carriers"), (4, "strongest")]
    assert [i for i, _ in informative_cnvr(r, 10)] == list(range(6))
    assert informative_cnvr(r.replace(cnvr=cnvr.iloc[:0]), 5) == []


def test_write_plots_and_report(result, tmp_path, monkeypatch) -> None:
    import gcnmops.report.plots as plots_module

    files = result.write(tmp_path, formats=["tsv"])
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "cnvr_999.png").write_bytes(PNG)  # an earlier run's plot
    (tmp_path / "plots" / "mine.png").write_bytes(PNG)  # not ours: kept
    steps = []
    monkeypatch.setattr(plots_module, "ticker", lambda total: lambda n=1.0: steps.append((total, n)))
    plots = write_plots(result, tmp_path, max_cnvr=2, max_samples=1, dpi=50)
    assert [p.name for p in plots][:1] == ["overview.png"] and len(plots) == 1 + min(2, len(result.cnvr)) + 1
    assert len(steps) == len(plots) and {t for t, _ in steps} == {len(plots)}  # the progress bar moves per figure
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted([p.name for p in plots] + ["mine.png"])
    chosen = [f"cnvr_{i + 1:03d}.png" for i, _ in informative_cnvr(result, 2)]
    assert [p.name for p in plots if p.name.startswith("cnvr_")] == chosen
    assert all(p.read_bytes()[:8] == PNG for p in plots)
    page = write_report(result, tmp_path, files=list(files) + plots, plots=plots)
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert 'src="plots/overview.png"' in text and 'href="cnvr.tsv"' in text
    assert "CNV regions" in text and result.sample_names[0] in text
    row = result.cnvr.iloc[int(chosen[0][5:8]) - 1]
    assert f"CNV region {int(chosen[0][5:8])}: {row['seqnames']}:{int(row['start']):,}" in text  # captions


def test_cli_plots_and_report(tmp_path, capsys) -> None:
    from gcnmops.cli import main

    data, _ = example_cohort(n_regions=300, n_samples=2, n_cnvs=1, seed=2)
    frame = data.ranges.assign(S_1=data.counts[:, 0])
    frame.to_csv(tmp_path / "one.tsv", sep="\t", index=False)
    assert main(["run", str(tmp_path / "one.tsv"), "--method", "single", "--quiet", "--backend", "cpu",
                 "--formats", "tsv", "--report", "-o", str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    assert (out / "report.html").exists() and (out / "plots" / "overview.png").exists()
    assert "plots" in capsys.readouterr().out


def test_plot_files_move_the_progress_bar_per_figure_in_their_stage(result, tmp_path):
    """run --plots: the bar moves per figure within "plots"; a ticker of the finished write stage moves it no more."""
    from gcnmops.report.plots import plot_files
    from gcnmops.progress import Progress, ticker

    with Progress({"write": 1.0, "plots": 1.0}, disable=True) as bar:
        write_step = ticker(1.0)
        write_step(0.5)
        assert bar._shown == pytest.approx(250)
        bar.advance("write")
        files = plot_files(result, max_cnvr=1, max_samples=1, dpi=30)
        shown = []
        for k, (name, draw) in enumerate(files):
            draw(tmp_path / f"{k}.png")
            write_step(1.0)  # the write stage is over: ignored
            shown.append(bar._shown)
        assert shown == pytest.approx([500 + 500 * (k + 1) / len(files) for k in range(len(files))])


def _close_cohort():
    """6 samples of 1-kb windows near 37.7 Mb with a 6-window loss in the first sample."""
    import gcnmops

    rng = np.random.default_rng(0)
    m, n = 400, 6
    lam = np.full((m, n), 300.0)
    lam[200:206, 0] *= 0.5
    x = rng.poisson(lam)
    frame = pd.DataFrame({"seqnames": "chr7", "start": 37_700_001 + np.arange(m) * 1000,
                          "end": 37_700_000 + (np.arange(m) + 1) * 1000})
    for k in range(n):
        frame[f"NA1289{k}"] = x[:, k]
    return gcnmops.cn_mops(frame, backend="cpu")


def test_cnvr_ticks_are_distinct_and_segplot_titles_fit():
    from gcnmops import plots as plots_mod

    r = _close_cohort()
    fig = plots_mod.plot_cnvr(r, 1, margin=(3, 3))
    fig.canvas.draw()
    shown = [[t.get_text() for t in ax.get_xticklabels() if t.get_text()] for ax in fig.axes]
    shown = [labels for labels in shown if labels]  # the lower row (x shared)
    assert len(shown) == 2 and all(len(labels) == len(set(labels)) > 2 for labels in shown), shown
    fig = plots_mod.segplot(r, 1)
    renderer = fig.canvas.get_renderer()
    box = fig._suptitle.get_window_extent(renderer)
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width and box.y1 <= fig.bbox.height
    assert box.y0 > max(ax.get_window_extent(renderer).y1 for ax in fig.axes if ax.get_visible())
