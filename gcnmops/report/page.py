"""A one-page HTML report of a CNVDetectionResult (``run --report``).

``write_report(result, outdir, files=...)`` writes ``outdir/report.html``: the run summary (method, size,
parameters, time per stage), the sample QC, CNVs per sample, the CNV regions with their integer copy numbers, the plots of
``report.plots.write_plots`` (written first if absent) and links to every output file. Everything is
linked relatively, so the folder can be moved or served as it is; no JavaScript, no external resources.
"""
from __future__ import annotations

import datetime
import html
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..params import PARAMETERS

#: CNV regions listed in the table (the files have all of them)
MAX_TABLE_ROWS = 200

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;
color:#222;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .6em;
text-align:left}th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.gain{background:#fbe0e0}.loss{background:#dde7f8}.muted{color:#777}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{font-size:.85em;color:#555}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:1em}
.cols{display:flex;flex-wrap:wrap;gap:2em;align-items:flex-start}
"""


def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def _cell(value) -> str:
    if isinstance(value, (int, np.integer)):
        return f'<td class="num">{int(value):,}</td>'
    if isinstance(value, (float, np.floating)):
        return '<td class="num">NA</td>' if np.isnan(value) else f'<td class="num">{float(value):.4g}</td>'
    return f"<td>{_e(value)}</td>"


def _table(header: list[str] | None, rows: list[list], row_classes: list[str] | None = None) -> str:
    """An HTML table (``header`` None: none; key-value tables)."""
    out = ["<table>" + ("<tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>" if header else "")]
    for i, row in enumerate(rows):
        cls = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        out.append(f"<tr{cls}>" + "".join(_cell(v) for v in row) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _cn_value(label) -> float | None:
    text = str(label)
    if text.startswith("CN"):
        try:
            return float(text[2:])
        except ValueError:
            return None
    return None


def _summary_section(result) -> str:
    s = result.summary()
    p = result.params
    rows = [
        ["method", p.get("method")], ["cn.mops semantics", p.get("version")],
        ["regions", s["regions"]], ["samples", s["samples"]], ["chromosomes", s["chromosomes"]],
        ["segments", s["segments"]], ["CNVs", s["cnvs"]], ["CNV regions", s["cnv_regions"]],
    ]
    names = [q.result_name for q in PARAMETERS.values() if q.result_name is not None] + ["mainClass"]
    params = [[k, ", ".join(str(v) for v in p[k]) if isinstance(p[k], (list, tuple)) else p[k]]
              for k in names if k in p]
    timing = [[k, f"{v:.2f} s"] for k, v in result.timings.items()]
    parts = ["<h2>Summary</h2>", '<div class="cols"><div>', _table(None, rows), "</div><div>",
             _table(["parameter", "value"], params), "</div>"]
    if timing:
        parts += ["<div>", _table(["stage", "time"], timing), "</div>"]
    parts.append("</div>")
    return "\n".join(parts)


def _sample_qc_section(result) -> str:
    """The sample QC table (sample_qc.tsv; outliers highlighted) and what the run left out or filtered; empty
    without a sample QC."""
    qc = result.sample_qc
    if qc is None:
        return ""
    shown = [c for c in qc.columns if c not in ("sini_iqr", "sini_bivar")]
    rows = [[None if v is pd.NA else v for v in row] for row in qc[shown].itertuples(index=False)]
    rows = [[("yes" if v else "no") if isinstance(v, (bool, np.bool_)) else v for v in row] for row in rows]
    selection = "".join(f"<li>{_e(k)}: {_e(', '.join(map(str, v)) if isinstance(v, list) else v)}</li>"
                        for k, v in result.selection.items())
    return "\n".join(["<h2>Sample QC</h2>",
                      '<p class="muted">outlier rule and columns: gcnmops.calls.qc; the file: sample_qc.tsv</p>',
                      _table(shown, rows, ["loss" if o else "" for o in qc["outlier"]]),
                      f"<ul>{selection}</ul>" if selection else ""])


def _per_sample_section(result) -> str:
    """CNVs, gains and losses per sample; long cohorts in up to four tables side by side."""
    cnvs = result.cnvs
    names = [str(s) for s in result.sample_names]
    sample = cnvs["sampleName"].astype(str)
    mean = cnvs["mean"].to_numpy(float)
    count = sample.value_counts().reindex(names, fill_value=0).to_numpy()
    gains = sample[mean > 0].value_counts().reindex(names, fill_value=0).to_numpy()
    losses = sample[mean < 0].value_counts().reindex(names, fill_value=0).to_numpy()
    rows = [[n, int(c), int(g), int(lo)] for n, c, g, lo in zip(names, count, gains, losses)]
    per = max(20, -(-len(rows) // 4))
    tables = [_table(["sample", "CNVs", "gains", "losses"], rows[i:i + per]) for i in range(0, len(rows), per)]
    return ("<h2>CNVs per sample</h2>\n<p class=\"muted\">gains and losses by the sign of the CNV's segment mean "
            "(sINI)</p>\n<div class=\"cols\">" + "".join(f"<div>{t}</div>" for t in tables) + "</div>")


def _cnvr_section(result) -> str:
    from ..pipeline.family import cnvr_per_sample

    cnvr = cnvr_per_sample(result)
    if len(cnvr) == 0:
        return "<h2>CNV regions</h2><p>No CNVs detected.</p>"
    main = _cn_value(result.params.get("mainClass", "CN2"))
    names = [str(s) for s in result.sample_names]
    has_cn = all(n in cnvr.columns for n in names) and cnvr[names].notna().any().any()
    header = ["#", "seqnames", "start", "end", "width (bp)", "carriers"]
    rows, classes = [], []
    cnvs = result.cnvs
    for i, r in cnvr.head(MAX_TABLE_ROWS).iterrows():
        hit = cnvs[(cnvs["seqnames"].astype(str) == str(r["seqnames"])) & (cnvs["start"] <= r["end"])
                   & (cnvs["end"] >= r["start"])]
        carriers = list(dict.fromkeys(hit["sampleName"].astype(str)))
        if has_cn:
            labels = [f"{n}: {r[n]}" for n in names if _cn_value(r[n]) is not None and _cn_value(r[n]) != main]
            text = ", ".join(labels) or ", ".join(carriers)
        else:
            text = ", ".join(carriers)
        mean = float(hit["mean"].mean()) if len(hit) else 0.0
        rows.append([i + 1, r["seqnames"], int(r["start"]), int(r["end"]), int(r["end"]) - int(r["start"]) + 1,
                     text])
        classes.append("gain" if mean > 0 else "loss" if mean < 0 else "")
    note = "" if len(cnvr) <= MAX_TABLE_ROWS else (
        f'<p class="muted">First {MAX_TABLE_ROWS} of {len(cnvr)} CNV regions; all are in the files below.</p>')
    caption = ("carriers with their integer copy number" if has_cn else
               "samples with a CNV call there (integer copy numbers not computed)")
    return (f"<h2>CNV regions</h2>\n<p class=\"muted\">{_e(caption)}; rows tinted by the sign of the calls.</p>\n"
            + _table(header, rows, classes) + note)


def _caption(result, path: Path) -> str:
    """What a plot of ``write_plots`` shows, from its file name."""
    name = path.stem
    if name.startswith("cnvr_") and name[5:].isdigit() and int(name[5:]) <= len(result.cnvr):
        r = result.cnvr.iloc[int(name[5:]) - 1]
        return f"CNV region {int(name[5:])}: {r['seqnames']}:{int(r['start']):,}-{int(r['end']):,}"
    if name.startswith("segplot_") and name[8:11].isdigit() and int(name[8:11]) <= len(result.sample_names):
        sample = str(result.sample_names[int(name[8:11]) - 1])
        n = int((result.cnvs["sampleName"].astype(str) == sample).sum())
        return f"sample {sample}: {n} CNV call{'s' if n != 1 else ''}"
    return name


def _plots_section(result, plots: list[Path], outdir: Path) -> str:
    if not plots:
        return ""
    parts = ["<h2>Plots</h2>"]
    groups = [("overview", "Genome-wide overview of the CNV calls"),
              ("cnvr_", "The most informative CNV regions (cn.mops's plot(result, which)): the largest, those with "
                        "most carriers and the strongest"),
              ("segplot_", "Segmentations of the samples with most CNV calls (cn.mops's segplot)")]
    for prefix, title in groups:
        mine = [p for p in plots if p.name.startswith(prefix)]
        if not mine:
            continue
        parts.append(f"<h3>{_e(title)}</h3>")
        parts.append('<div class="grid">' if prefix != "overview" else "<div>")
        for p in mine:
            rel = os.path.relpath(p, outdir)
            parts.append(f'<figure><a href="{_e(rel)}"><img src="{_e(rel)}" alt="{_e(p.stem)}" loading="lazy">'
                         f"</a><figcaption>{_e(_caption(result, p))}</figcaption></figure>")
        parts.append("</div>")
    return "\n".join(parts)


def _files_section(files, outdir: Path) -> str:
    """``files``: paths (their sizes on disk), or bytes by path (files not yet under their final names)."""
    sizes = {Path(f): n for f, n in files.items()} if isinstance(files, dict) else \
        {Path(f): Path(f).stat().st_size for f in files if Path(f).exists()}
    rows = []
    for f, size in sorted(sizes.items(), key=lambda item: str(item[0])):
        rel = os.path.relpath(f, outdir)
        rows.append(f'<tr><td><a href="{_e(rel)}">{_e(rel)}</a></td><td class="num">{size:,}</td></tr>')
    if not rows:
        return ""
    return ("<h2>Output files</h2>\n<table><tr><th>file</th><th>bytes</th></tr>\n" + "\n".join(rows)
            + "\n</table>")


def report_html(result, outdir, files=(), plots=()) -> str:
    """The report page as a string; links are relative to ``outdir``. ``files``: the output files to list, or
    their sizes by path (files being written under temporary names)."""
    outdir = Path(outdir)
    p = result.params
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    from .. import __version__

    head = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>gcnmops report: {_e(p.get('method'))}</title><style>{_CSS}</style></head><body>\n"
            f"<h1>gcnmops report</h1>\n<p class=\"muted\">{_e(p.get('method'))} on "
            f"{len(result.sample_names)} sample(s) &middot; gcnmops {_e(__version__)} &middot; {_e(when)}</p>")
    body = [head, _summary_section(result), _sample_qc_section(result), _per_sample_section(result),
            _cnvr_section(result),
            _plots_section(result, [Path(x) for x in plots], outdir), _files_section(files, outdir),
            "</body></html>\n"]
    return "\n".join(b for b in body if b)


def write_report(result, outdir, files=(), plots=None) -> Path:
    """Write ``outdir/report.html``; ``files``: output files to link (e.g. what ``result.write`` returned);
    ``plots``: PNGs to show (default: those under ``outdir/plots``, written by write_plots if none)."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    if plots is None:
        plots = sorted((outdir / "plots").glob("*.png")) if (outdir / "plots").is_dir() else []
        if not plots:
            from .plots import write_plots

            plots = write_plots(result, outdir)
    files = [Path(f) for f in files]
    path = outdir / "report.html"
    path.write_text(report_html(result, outdir, files=files, plots=plots), encoding="utf-8")
    return path


__all__ = ["write_report", "report_html"]
