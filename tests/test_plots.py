"""Plots and the HTML report: they render, say what they show, and are written by ``run --plots/--report``."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import gcnmops  # noqa: E402
from gcnmops import InputError  # noqa: E402
from gcnmops.example import example_cohort  # noqa: E402
from gcnmops.plots import log_ratios, plot_cnvr, plot_overview, segplot, write_plots  # noqa: E402
from gcnmops.report import write_report  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def result():
    data, _ = example_cohort(n_regions=400, n_samples=8, n_cnvs=3, seed=11)
    r = gcnmops.cn_mops(data, backend="cpu")
    assert len(r.cnvr) > 0
    return gcnmops.calc_integer_copy_numbers(r)


def _texts(fig) -> list[str]:
    out = [fig._suptitle.get_text()] if fig._suptitle is not None else []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
    return out


def test_plot_cnvr_panels_and_colours(result, tmp_path) -> None:
    path = tmp_path / "cnvr.png"
    fig = plot_cnvr(result, which=1, path=path)
    assert path.read_bytes()[:8] == PNG
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["Normalized Read Counts", "Local Assessments", "Read Count Ratios", "CNV Call"]
    row = result.cnvr.iloc[0]
    assert all(ax.get_xlabel().startswith(f"{row['seqnames']}: ") for ax in fig.axes)
    carriers = set(result.cnvs[(result.cnvs.seqnames == row["seqnames"]) & (result.cnvs.start <= row["end"])
                               & (result.cnvs.end >= row["start"])]["sampleName"])
    lines = fig.axes[3].get_lines()
    called = {ln.get_label() for ln in lines if ln.get_color() in ("#d62728", "#1f5fbf")}
    assert carriers <= called and len(lines) >= len(result.sample_names)
    with pytest.raises(InputError, match="unknown CNVR"):
        plot_cnvr(result, which=len(result.cnvr) + 1)


def test_segplot_and_overview(result, tmp_path) -> None:
    fig = segplot(result, sample_idx=1, path=tmp_path / "seg.png")
    assert (tmp_path / "seg.png").read_bytes()[:8] == PNG
    chroms = list(dict.fromkeys(result.gr["seqnames"]))
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == chroms
    lo, hi = visible[0].get_ylim()
    assert lo == pytest.approx(-hi)
    one = segplot(result, sample_idx=result.sample_names[0], seqname=chroms[-1])
    assert [ax.get_title() for ax in one.axes if ax.get_visible()] == [chroms[-1]]
    with pytest.raises(InputError, match="counts from 1"):
        segplot(result, sample_idx=0)
    lr = log_ratios(result)
    assert lr.shape == result.normalized_data.shape and np.isfinite(lr).all()
    ov = plot_overview(result, path=tmp_path / "ov.png")
    assert (tmp_path / "ov.png").read_bytes()[:8] == PNG
    assert "CNVs" in ov.axes[0].get_title(loc="left")


def test_write_plots_and_report(result, tmp_path) -> None:
    files = result.write(tmp_path, formats=["tsv"])
    plots = write_plots(result, tmp_path, max_cnvr=2, max_samples=1, dpi=50)
    assert [p.name for p in plots][:1] == ["overview.png"] and len(plots) == 1 + min(2, len(result.cnvr)) + 1
    assert all(p.read_bytes()[:8] == PNG for p in plots)
    page = write_report(result, tmp_path, files=list(files) + plots, plots=plots)
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert 'src="plots/overview.png"' in text and 'href="cnvr.tsv"' in text
    assert "CNV regions" in text and result.sample_names[0] in text


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
