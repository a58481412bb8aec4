"""Pictures of a CNVDetectionResult (matplotlib's Agg canvas: no display, no pyplot state).

- :func:`plot_cnvr` -- cn.mops's ``plot(result, which=k)``: four panels over CNV region ``k`` and 10 regions on
  each side: normalized read counts, local assessments (sINI), read count ratios log2((x + 0.01) /
  (lambda_main + 0.01)) and the CNV call (individualCall); samples called as gains in the region are red,
  losses blue, the others grey underneath.
- :func:`segplot` -- cn.mops's ``segplot(result, sampleIdx=...)``, with points and lines on one scale: one
  sample's local assessments (sINI, what cn.mops segments; ``values="ratio"``: read count log ratios to the
  cohort median) per region as points, each segment as a line at the mean of its points (a CN0 segment is
  drawn where its points are), the sample's CNV calls thick (gains red, losses blue), the call thresholds
  dotted; one panel per chromosome, y-limits symmetric around 0. Panels of more than ``max_points`` regions
  are thinned to the lowest and highest value of each bin of consecutive regions (the band a full scatter
  shows), so a genome of millions of regions draws in about a second.
- :func:`plot_overview` -- genome-wide: every CNV of every sample as a bar on the concatenated chromosomes,
  CNV regions shaded, chromosome boundaries marked.
- :func:`informative_cnvr` -- which CNV regions are worth a figure: the largest, those with most carriers and
  the strongest, in turn.
- :func:`write_plots` -- all of the above as PNG files (``run --plots``), moving an open progress bar.

Colours are those of the BED files' itemRgb: gains red, losses blue, calls at the normal copy number grey.
Every function returns a ``matplotlib.figure.Figure`` and writes it to ``path`` when one is given. Indices
follow cn.mops: ``which`` and ``sample_idx`` count from 1 (a sample may also be given by name).
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from ..data import chromosome_blocks
from ..errors import InputError
from ..calls.quality import cnv_directions, cnv_region_pairs
from ..files import remove_inside
from ..io.atomic import atomic_write
from ..outputs.writers import check_output_folder
from ..progress import ticker

GAIN = "#d62728"
LOSS = "#1f5fbf"
OTHER = "#b4b4b4"
SEGMENT = "#333333"
CNVR_SHADE = "#fff2b3"
#: regions drawn as points per segplot panel before thinning (``segplot``'s ``max_points``)
MAX_POINTS = 4000
#: the shortest CNV call drawn by segplot, as a fraction of its panel's width (shorter calls are widened)
MIN_CALL_WIDTH = 0.01
#: the narrowest CNV bar of the overview, as a fraction of the genome drawn (shorter CNVs are widened)
MIN_BAR_WIDTH = 0.002
#: the rankings ``informative_cnvr`` takes CNV regions from, in turn
RANKINGS = ("largest", "most carriers", "strongest")
_CN_LABEL = re.compile(r"^CN(\d+(?:\.\d+)?)$")
_PLOT_FILES = re.compile(r"^(overview|cnvr_\d+|segplot_\d+_.*)\.png$")


# ------------------------------------------------------------------------------------------ helpers
def _figure(width: float, height: float) -> Figure:
    """A figure on an Agg canvas (margins set by the caller: the constrained layout doubles the drawing time)."""
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path, dpi: int = 100) -> None:
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi)


def _main_index(result) -> int:
    return list(result.classes).index(result.params.get("mainClass", "CN2"))


def _main_lambda(result) -> np.ndarray:
    """lambda of the main class per region (params L)."""
    return np.asarray(result.params["L"], dtype=np.float64)[:, _main_index(result)]


def _blocks(result) -> list[tuple[str, int, int]]:
    """(chromosome, first row, end row) of ``result.gr``."""
    return chromosome_blocks(result.gr["seqnames"])


def _region_rows(result, seqname: str, start: int, end: int) -> tuple[int, int, int, int]:
    """(first, last) rows of ``gr`` overlapping [start, end] on ``seqname`` and the chromosome's row block."""
    for name, b0, b1 in _blocks(result):
        if name == str(seqname):
            s = result.gr["start"].to_numpy()[b0:b1]
            e = result.gr["end"].to_numpy()[b0:b1]
            hit = np.flatnonzero((s <= end) & (e >= start))
            if hit.size == 0:
                break
            return b0 + int(hit[0]), b0 + int(hit[-1]), b0, b1
    raise InputError(f"No region of the result overlaps {seqname}:{start}-{end}.")


def _sample_index(result, sample_idx) -> int:
    names = list(result.sample_names)
    if isinstance(sample_idx, str):
        if sample_idx not in names:
            raise InputError(f"Unknown sample {sample_idx!r}; the result has {', '.join(names[:10])}"
                             f"{' ...' if len(names) > 10 else ''}.")
        return names.index(sample_idx)
    k = int(sample_idx)
    if not 1 <= k <= len(names):
        raise InputError(f"sample_idx counts from 1 (as cn.mops's sampleIdx); got {sample_idx}, the result has "
                         f"{len(names)} sample(s).")
    return k - 1


def _cn_number(label) -> float | None:
    if label is None or (isinstance(label, float) and math.isnan(label)):
        return None
    m = _CN_LABEL.match(str(label))
    return float(m.group(1)) if m else None


def count_ratios(x: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """log2((x + 0.01) / (reference + 0.01)) elementwise: cn.mops's read count ratios (finite at zero counts)."""
    return np.log2((np.asarray(x, dtype=np.float64) + 0.01) / (np.asarray(reference, dtype=np.float64) + 0.01))


def log_ratios(result) -> np.ndarray:
    """(m, N) read count ratios (``count_ratios``) of the normalized counts to the row medians of the cohort, or
    to the main class's lambda for referencecn.mops results (their reference is the controls)."""
    x = np.asarray(result.normalized_data, dtype=np.float64)
    if result.params.get("method") == "referencecn.mops":
        ref = _main_lambda(result)[:, None]
    else:
        ref = np.median(x, axis=1)[:, None]
    return count_ratios(x, ref)


def _called_colours(ic: np.ndarray, upper: float, lower: float) -> np.ndarray:
    """Per sample: GAIN if a call in ``ic`` (rows of the CNV region) is >= upper, LOSS if one is <= lower (a
    loss wins, as in cn.mops), else OTHER."""
    out = np.full(ic.shape[1], OTHER, dtype=object)
    out[(ic >= upper).any(axis=0)] = GAIN
    out[(ic <= lower).any(axis=0)] = LOSS
    return out


def _lines(ax, xs: np.ndarray, values: np.ndarray, colour: str, lw: float, alpha: float, zorder: int) -> None:
    """Each column of ``values`` as a line over ``xs`` (one collection: one artist whatever the samples)."""
    if values.shape[1] == 0:
        return
    paths = np.stack([np.broadcast_to(xs[:, None], values.shape), values], axis=-1).transpose(1, 0, 2)
    ax.add_collection(LineCollection(paths, colors=colour, linewidths=lw, alpha=alpha, zorder=zorder))


def _names(names: list[str], k: int = 8) -> str:
    return ", ".join(names[:k]) + (f" and {len(names) - k} more" if len(names) > k else "")


# ------------------------------------------------------------------------------------------ plot(result, which)
def plot_cnvr(result, which: int = 1, margin=(10, 10), path=None, dpi: int = 100, note: str | None = None) -> Figure:
    """cn.mops's ``plot(result, which)``: a 2 x 2 figure over CNV region ``which`` (1-based row of
    ``result.cnvr``, the VCF's ID cnvr<which>) plus ``margin`` regions on each side (within the chromosome).
    x: the regions in order (ticks: their start in Mb); ``note``: a line under the title."""
    cnvr = result.cnvr.reset_index(drop=True)
    if len(cnvr) == 0:
        raise InputError("The result has no CNV regions to plot.")
    if not 1 <= int(which) <= len(cnvr):
        raise InputError(f"Selected unknown CNVR for plotting: which={which}, the result has {len(cnvr)} CNV "
                         "region(s) (counted from 1).")
    row = cnvr.iloc[int(which) - 1]
    chrom = str(row["seqnames"])
    r0, r1, b0, b1 = _region_rows(result, chrom, int(row["start"]), int(row["end"]))
    p0 = max(r0 - int(margin[0]), b0)
    p1 = min(r1 + int(margin[1]), b1 - 1)
    rows = slice(p0, p1 + 1)
    starts = result.gr["start"].to_numpy()[rows]
    p = result.params
    main = p.get("mainClass", "CN2")
    nd = np.asarray(result.normalized_data, dtype=np.float64)[rows]
    ic = np.asarray(result.individual_call)[rows]
    colours = _called_colours(ic[r0 - p0:r1 - p0 + 1], p["upperThreshold"], p["lowerThreshold"])
    xs = np.arange(1, p1 - p0 + 2, dtype=np.float64)
    fig = _figure(9.6, 7.6)
    axes = fig.subplots(2, 2, sharex=True)
    fig.subplots_adjust(left=0.08, right=0.985, bottom=0.08, top=0.83, wspace=0.24, hspace=0.2)
    panels = [
        (axes[0, 0], nd, "Normalized Read Counts", "read count", False),
        (axes[0, 1], np.asarray(result.local_assessments)[rows], "Local Assessments", "local assessment (sINI)",
         True),
        (axes[1, 0], count_ratios(nd, _main_lambda(result)[rows, None]), "Read Count Ratios",
         f"log2 ratio to lambda ({main})", False),
        (axes[1, 1], ic, "CNV Call", "CNV call value", True),
    ]
    groups = [(colours == OTHER, OTHER, 1.0, 0.55, 2), (colours == GAIN, GAIN, 1.8, 0.9, 3),
              (colours == LOSS, LOSS, 1.8, 0.9, 3)]
    decimals = _distinct_decimals(starts / 1e6)
    positions = FuncFormatter(lambda v, _: f"{starts[int(round(v)) - 1] / 1e6:.{decimals}f}"
                              if 1 <= int(round(v)) <= len(starts) else "")  # no label off the regions
    for ax, values, title, ylab, thresholds in panels:
        ax.axvspan(r0 - p0 + 0.5, r1 - p0 + 1.5, color=CNVR_SHADE, zorder=0, lw=0)
        for chosen, colour, lw, alpha, z in groups:
            _lines(ax, xs, values[:, chosen], colour, lw, alpha, z)
        if thresholds:
            for t in (p["upperThreshold"], p["lowerThreshold"]):
                ax.axhline(t, color="k", ls=":", lw=0.8, zorder=1)
        ax.autoscale_view()
        ax.set_xlim(0.5, xs[-1] + 0.5)
        ax.set_title(title, fontsize=11, y=1.0)
        ax.set_ylabel(ylab)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
        ax.xaxis.set_major_formatter(positions)
    for ax in axes[1]:
        ax.set_xlabel(f"{chrom}: {int(starts[0]):,} - {int(result.gr['end'].iloc[p1]):,} (region start, Mb)")
    names = np.asarray(result.sample_names, dtype=object)
    gains, losses = list(names[colours == GAIN]), list(names[colours == LOSS])
    handles = [Line2D([], [], color=GAIN, lw=2, label=f"gain ({len(gains)})"),
               Line2D([], [], color=LOSS, lw=2, label=f"loss ({len(losses)})"),
               Line2D([], [], color=OTHER, lw=1.5, label=f"no call ({int((colours == OTHER).sum())})"),
               Patch(color=CNVR_SHADE, label="CNV region"),
               Line2D([], [], color="k", ls=":", lw=0.8, label="call thresholds")]
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.905), ncols=5, fontsize=9,
               frameon=False)
    carriers = "; ".join(s for s in (f"gains: {_names(gains)}" if gains else "",
                                     f"losses: {_names(losses)}" if losses else "") if s)
    lines = [f"CNV region {int(which)}: {chrom}:{int(row['start']):,}-{int(row['end']):,} "
             f"({int(row['end']) - int(row['start']) + 1:,} bp, {r1 - r0 + 1} regions; {p.get('method', 'cn.mops')})"]
    lines += [text for text in (note, carriers) if text]
    fig.suptitle("\n".join(lines), fontsize=11, y=0.99, va="top")
    _save(fig, path, dpi)
    return fig


def _distinct_decimals(values: np.ndarray, least: int = 2, most: int = 7) -> int:
    """The fewest decimals (from ``least`` to ``most``) that write distinct ``values`` distinctly."""
    values = np.unique(np.asarray(values, dtype=np.float64))
    for d in range(least, most):
        if np.unique(np.round(values, d)).size == values.size:
            return d
    return most


# ------------------------------------------------------------------------------------------ segplot
def _thin(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """All points if at most ``max_points``, else the lowest and highest y of each of ``max_points / 2`` bins of
    consecutive points, at the bin's middle x."""
    if x.size <= max_points:
        return x, y
    edges = np.unique(np.linspace(0, x.size, max(max_points // 2, 1) + 1).astype(np.int64))
    lo, hi = edges[:-1], edges[1:]
    mid = x[(lo + hi - 1) // 2]
    return np.concatenate([mid, mid]), np.concatenate([np.minimum.reduceat(y, lo), np.maximum.reduceat(y, lo)])


def _segment_levels(y: np.ndarray, s: np.ndarray, e: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """(first row, end row, mean of ``y`` over the rows) of each range [s, e] of one chromosome's regions
    (``starts``/``ends`` sorted); ranges without a region get NaN."""
    lo = np.searchsorted(starts, s, side="left")
    hi = np.searchsorted(ends, e, side="right")
    finite = np.isfinite(y)
    total = np.concatenate([[0.0], np.cumsum(np.where(finite, y, 0.0))])
    count = np.concatenate([[0], np.cumsum(finite)])
    n = count[np.maximum(hi, lo)] - count[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        level = np.where(n > 0, (total[np.maximum(hi, lo)] - total[lo]) / np.maximum(n, 1), np.nan)
    return lo, hi, level


def segplot(result, sample_idx=1, seqname=None, values: str = "sini", path=None, dpi: int = 100,
            max_points: int = MAX_POINTS) -> Figure:
    """cn.mops's ``segplot`` on one scale: sample ``sample_idx`` (1-based, or a sample name) per region as
    points -- ``values="sini"`` its local assessments (what cn.mops segments), ``"ratio"`` its read count
    ratios (``log_ratios``) -- each segment as a line at the mean of its points, the sample's CNV calls thick
    (gains red, losses blue, calls at the normal copy number grey), the call thresholds dotted (sINI); one panel
    per chromosome (all when ``seqname`` is None), y-limits symmetric around 0. Panels of more than
    ``max_points`` regions are thinned (module docstring)."""
    if values not in ("sini", "ratio"):
        raise InputError(f"values must be 'sini' (local assessments) or 'ratio' (read count ratios), not {values!r}.")
    k = _sample_index(result, sample_idx)
    name = str(result.sample_names[k])
    gr = result.gr
    blocks = _blocks(result)
    if seqname is not None:
        blocks = [b for b in blocks if b[0] == str(seqname)]
        if not blocks:
            raise InputError(f"Unknown seqname {seqname!r}.")
    y_all = (np.asarray(result.local_assessments, dtype=np.float64)[:, k] if values == "sini"
             else log_ratios(result)[:, k])
    ylabel = "local assessment (sINI)" if values == "sini" else "log2 read count ratio to median"
    p = result.params
    seg = result.segmentation
    seg = seg[seg["sampleName"].astype(str).to_numpy() == name]
    cnvs = result.cnvs
    mine = cnvs["sampleName"].astype(str).to_numpy() == name
    cnvs, directions = cnvs[mine], cnv_directions(result, cnvs[mine])
    undef = all(b[0] == "undef" for b in blocks)
    scale = 1.0 if undef else 1e6
    ncol = min(4, len(blocks))
    nrow = math.ceil(len(blocks) / ncol)
    height = 2.9 * nrow + 1.1
    fig = _figure(max(7.0, 4.0 * ncol), height)
    axes = np.atleast_1d(fig.subplots(nrow, ncol, squeeze=False).ravel())
    what = "local assessments (sINI)" if values == "sini" else "read count ratios"
    title = fig.suptitle(f"Sample {name}: {what} and segments ({p.get('method', 'cn.mops')}, {len(cnvs)} CNV calls)",
                         y=1 - 0.08 / height, va="top")
    extra = 0.0  # inches: a title too wide for the figure goes on two lines
    if title.get_window_extent(fig.canvas.get_renderer()).width > 0.96 * fig.bbox.width:
        title.set_text(f"Sample {name}: {what} and segments\n({p.get('method', 'cn.mops')}, {len(cnvs)} CNV calls)")
        extra = 0.25
    fig.subplots_adjust(left=0.85 / fig.get_figwidth(), right=1 - 0.3 / fig.get_figwidth(), bottom=0.55 / height,
                        top=1 - (0.95 + extra) / height, wspace=0.28, hspace=0.5)
    starts_all, ends_all = gr["start"].to_numpy(), gr["end"].to_numpy()
    lim = 0.0
    for ax, (chrom, b0, b1) in zip(axes, blocks):
        starts, ends, y = starts_all[b0:b1], ends_all[b0:b1], y_all[b0:b1]
        mid = (starts + ends) / 2.0 / scale
        px, py = _thin(mid, y, max_points)
        ax.scatter(px, py, s=4, color="#666666", alpha=0.6, linewidths=0, zorder=2)
        ax.axhline(0.0, color="k", lw=0.6, zorder=1)
        if values == "sini":
            for t in (p["upperThreshold"], p["lowerThreshold"]):
                ax.axhline(t, color="k", ls=":", lw=0.8, zorder=1)
        finite = y[np.isfinite(y)]
        lim = max(lim, float(np.abs(finite).max()) if finite.size else 0.0)
        on = seg["seqnames"].astype(str).to_numpy() == chrom
        s, e = seg["start"].to_numpy()[on], seg["end"].to_numpy()[on]
        lo, hi, level = _segment_levels(y, s, e, starts, ends)
        ax.add_collection(LineCollection(_spans(s, e, level, scale), colors=SEGMENT, linewidths=1.6, zorder=3))
        on = cnvs["seqnames"].astype(str).to_numpy() == chrom
        s, e = cnvs["start"].to_numpy()[on], cnvs["end"].to_numpy()[on]
        level = _segment_levels(y, s, e, starts, ends)[2]
        grow = np.maximum(0.0, MIN_CALL_WIDTH * (ends[-1] - starts[0] + 1) - (e - s + 1)) / 2  # visible calls
        s, e = s - grow, e + grow
        colour = np.array([{-1: LOSS, 1: GAIN}.get(int(d), OTHER) for d in directions[on]], dtype=object)
        ax.add_collection(LineCollection(_spans(s, e, level, scale), colors=list(colour), linewidths=4.0,
                                         zorder=4))
        ax.set_xlim(float(starts[0] - 1) / scale, float(ends[-1]) / scale)
        ax.set_title(chrom, y=1.0)
    for i, ax in enumerate(axes[:len(blocks)]):
        if i % ncol == 0:
            ax.set_ylabel(ylabel)
        if i + ncol >= len(blocks):  # the lowest panel of its column
            ax.set_xlabel("region" if undef else "position (Mb)")
    lim = max(lim, 1.0) * 1.05
    for ax in axes[:len(blocks)]:
        ax.set_ylim(-lim, lim)
    for ax in axes[len(blocks):]:
        ax.set_visible(False)
    handles = [Line2D([], [], ls="", marker="o", ms=3, color="#666666", label="region"),
               Line2D([], [], color=SEGMENT, lw=1.6, label="segment mean"),
               Line2D([], [], color=GAIN, lw=4, label="gain call"), Line2D([], [], color=LOSS, lw=4, label="loss call")]
    if values == "sini":
        handles.append(Line2D([], [], color="k", ls=":", lw=0.8, label="call thresholds"))
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1 - (0.42 + extra) / height),
               ncols=len(handles), fontsize=9, frameon=False)
    _save(fig, path, dpi)
    return fig


def _spans(s: np.ndarray, e: np.ndarray, level: np.ndarray, scale: float) -> np.ndarray:
    """(n, 2, 2) horizontal lines from s to e (bp, divided by ``scale``) at ``level``."""
    x0, x1 = (np.asarray(s, dtype=np.float64) - 1) / scale, np.asarray(e, dtype=np.float64) / scale
    return np.stack([np.stack([x0, level], axis=-1), np.stack([x1, level], axis=-1)], axis=1)


# ------------------------------------------------------------------------------------------ overview
def _boxes(x0: np.ndarray, x1: np.ndarray, y0: np.ndarray, y1: np.ndarray) -> np.ndarray:
    """(n, 4, 2) rectangles as polygon vertices."""
    return np.stack([np.stack([x0, y0], -1), np.stack([x1, y0], -1), np.stack([x1, y1], -1),
                     np.stack([x0, y1], -1)], axis=1)


def plot_overview(result, path=None, dpi: int = 100) -> Figure:
    """Genome-wide overview: one row per sample, every CNV as a bar on the concatenated chromosomes (red gains,
    blue losses, grey calls at the normal copy number; pale for one copy from normal, full for two or more once
    integer copy numbers are known; at least ``MIN_BAR_WIDTH`` of the genome wide), CNV regions shaded,
    chromosome boundaries as lines."""
    gr = result.gr
    offsets: dict[str, float] = {}
    ticks, labels, bounds = [], [], []
    pos = 0.0
    ends = gr["end"].to_numpy()
    for chrom, b0, b1 in _blocks(result):
        lo = float(gr["start"].iloc[b0]) - 1.0
        hi = float(ends[b0:b1].max())
        offsets[chrom] = pos - lo
        ticks.append(pos + (hi - lo) / 2)
        labels.append(chrom)
        pos += hi - lo
        bounds.append(pos)
    names = list(result.sample_names)
    n = len(names)
    height = min(2.2 + 0.22 * n, 40)
    fig = _figure(12, height)
    ax = fig.subplots()
    fig.subplots_adjust(left=0.09 if n <= 80 else 0.04, right=0.99, bottom=0.75 / height, top=1 - 0.7 / height)

    def genome_x(frame):
        """(x0, x1, known chromosome) of each range on the genome axis, at least MIN_BAR_WIDTH wide."""
        off = frame["seqnames"].astype(str).map(offsets).to_numpy(dtype=np.float64)
        x0, x1 = off + frame["start"].to_numpy() - 1, off + frame["end"].to_numpy()
        grow = np.maximum(0.0, MIN_BAR_WIDTH * pos - (x1 - x0)) / 2  # short ranges widened to stay visible
        return x0 - grow, x1 + grow, np.isfinite(off)

    x0, x1, ok = genome_x(result.cnvr)
    ax.add_collection(PolyCollection(_boxes(x0[ok], x1[ok], np.full(ok.sum(), -0.6), np.full(ok.sum(), n - 0.4)),
                                     facecolors=CNVR_SHADE, edgecolors="none", zorder=0))
    cnvs = result.cnvs
    row = pd.Index(names).get_indexer(cnvs["sampleName"].astype(str).to_numpy())
    x0, x1, ok = genome_x(cnvs)
    ok &= row >= 0
    direction = cnv_directions(result, cnvs)
    main = _cn_number(result.params.get("mainClass", "CN2"))
    cn = np.array([np.nan if (v := _cn_number(c)) is None else v for c in cnvs["CN"].to_numpy(dtype=object)])
    known = np.isfinite(cn) & (main is not None)
    strong = ~known | (np.abs(cn - (main or 0.0)) >= 2)
    base = np.array([{-1: LOSS, 1: GAIN}.get(int(d), OTHER) for d in direction], dtype=object)
    y = n - 1 - row
    ax.add_collection(PolyCollection(
        _boxes(x0[ok], x1[ok], y[ok] - 0.4, y[ok] + 0.4),
        facecolors=[to_rgba(c, 1.0 if s else 0.5) for c, s in zip(base[ok], strong[ok])],
        edgecolors=[to_rgba(c) for c in base[ok]], linewidths=0.6, zorder=3))
    for b in bounds[:-1]:
        ax.axvline(b, color="#888888", lw=0.6, zorder=1)
    ax.set_xlim(0, max(pos, 1.0))
    ax.set_ylim(-0.6, n - 0.4)
    if len(labels) == 1:  # one chromosome: its positions (Mb)
        off = offsets[labels[0]]
        mb = [v for v in MaxNLocator(nbins=8).tick_values(-off / 1e6, (pos - off) / 1e6) if 0 <= v * 1e6 + off <= pos]
        ax.set_xticks([v * 1e6 + off for v in mb], [f"{v:g}" for v in mb], fontsize=8)
    else:
        ax.set_xticks(ticks, labels, fontsize=8, rotation=90 if len(labels) > 12 else 0)
    if n <= 80:
        ax.set_yticks(range(n), names[::-1], fontsize=7 if n > 30 else 8)
    else:
        ax.set_yticks([])
    ax.set_xlabel(f"{labels[0]} position (Mb)" if len(labels) == 1 else "chromosome")
    ax.set_ylabel("sample")
    handles = [Patch(color=GAIN, label="gain"), Patch(color=LOSS, label="loss")]
    if known.any():  # integer copy numbers: one step vs two or more from normal
        handles = [Patch(facecolor=to_rgba(GAIN, 0.5), edgecolor=GAIN, label="gain (+1 copy)"),
                   Patch(color=GAIN, label="gain (+2 or more)"),
                   Patch(facecolor=to_rgba(LOSS, 0.5), edgecolor=LOSS, label="loss (-1 copy)"),
                   Patch(color=LOSS, label="loss (-2 or more)")]
    if (ok & (direction == 0)).any():
        handles.append(Patch(color=OTHER, label="call at normal copy number"))
    ax.legend(handles=handles + [Patch(color=CNVR_SHADE, label="CNV region")], loc="lower right",
              bbox_to_anchor=(1.0, 1.0), fontsize=8, ncols=len(handles) + 1, frameon=False)
    s = result.summary()
    ax.set_title(f"{result.params.get('method', 'cn.mops')}: {s['cnvs']:,} CNVs in {s['cnv_regions']:,} CNV "
                 f"regions, {s['samples']} samples, {s['regions']:,} regions", loc="left", fontsize=10, pad=22)
    _save(fig, path, dpi)
    return fig


# ------------------------------------------------------------------------------------------ choosing
def informative_cnvr(result, k: int = 12) -> list[tuple[int, str]]:
    """Up to ``k`` CNV regions worth a figure, as (row of ``result.cnvr`` from 0, why) in genome order: taken in
    turn from three rankings (RANKINGS) -- the largest (bp), the most carriers (samples with a CNV call there)
    and the strongest (largest absolute segment statistic of its calls, i.e. furthest from the normal copy
    number) -- ties broken by position."""
    cnvr = result.cnvr.reset_index(drop=True)
    n = len(cnvr)
    if n == 0 or k <= 0:
        return []
    cnvs = result.cnvs.reset_index(drop=True)
    region, cnv = cnv_region_pairs(cnvr, cnvs)
    sample = pd.factorize(cnvs["sampleName"].astype(str))[0][cnv]
    pairs = np.unique(np.stack([region, sample], axis=1), axis=0) if region.size else np.zeros((0, 2), np.int64)
    carriers = np.bincount(pairs[:, 0], minlength=n)
    stat = cnvs["median" if result.params.get("useMedian", False) else "mean"].to_numpy(float)
    strength = np.zeros(n)
    np.maximum.at(strength, region, np.nan_to_num(np.abs(stat[cnv])))
    width = cnvr["end"].to_numpy(np.int64) - cnvr["start"].to_numpy(np.int64) + 1
    index = np.arange(n)
    rankings = {"largest": np.lexsort((index, -width)), "most carriers": np.lexsort((index, -strength, -carriers)),
                "strongest": np.lexsort((index, -carriers, -strength))}
    chosen: dict[int, str] = {}
    cursor = dict.fromkeys(RANKINGS, 0)
    while len(chosen) < min(k, n):
        for why in RANKINGS:
            order = rankings[why]
            while cursor[why] < n and int(order[cursor[why]]) in chosen:
                cursor[why] += 1
            if cursor[why] < n and len(chosen) < min(k, n):
                chosen[int(order[cursor[why]])] = why
    return sorted(chosen.items())


# ------------------------------------------------------------------------------------------ files
def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)) or "sample"


def plot_files(result, max_cnvr: int = 12, max_samples: int = 6, dpi: int = 100) -> list[tuple[str, Callable]]:
    """The files of ``write_plots`` as (name under the output folder, ``draw(path)``) pairs; ``draw`` makes the
    figure, writes it as PNG whatever the path's suffix (a temporary name: ``run --plots`` writes the plots
    in the batch of its other files, all renamed together) and moves an open progress bar by one figure of the
    stage running when ``plot_files`` was called."""
    regions = informative_cnvr(result, max_cnvr)
    names = [str(s) for s in result.sample_names]
    counts = result.cnvs["sampleName"].astype(str).value_counts().reindex(names, fill_value=0).to_numpy()
    samples = sorted(range(len(names)), key=lambda i: (-counts[i], i))[:max_samples]

    files = [("plots/overview.png", lambda: plot_overview(result, dpi=dpi))]
    files += [(f"plots/cnvr_{row + 1:03d}.png",
               lambda row=row, why=why: plot_cnvr(result, which=row + 1, dpi=dpi, note=f"chosen among the {why}"))
              for row, why in regions]
    files += [(f"plots/segplot_{i + 1:03d}_{_safe(names[i])}.png",
               lambda i=i: segplot(result, sample_idx=i + 1, dpi=dpi)) for i in samples]
    step = ticker(len(files))  # the progress bar moves per figure, in the stage running now

    def draw(figure: Callable[[], Figure]) -> Callable:
        def write(path) -> None:
            with open(path, "wb") as fh:
                figure().savefig(fh, dpi=dpi, format="png")
            step()

        return write

    return [(name, draw(figure)) for name, figure in files]


def write_plots(result, outdir, max_cnvr: int = 12, max_samples: int = 6, dpi: int = 100) -> list[Path]:
    """Write under ``outdir/plots``: ``overview.png``, ``cnvr_<k>.png`` for the ``max_cnvr`` most informative CNV
    regions (``informative_cnvr``; k: the row of cnvr.tsv, the VCF's ID cnvr<k>) and
    ``segplot_<i>_<sample>.png`` for the ``max_samples`` samples with most CNV calls, each under a temporary
    name first; the plot files of an earlier run in that folder that were not written again are removed once
    all are (a ``plots`` that is a link to another folder is refused). Moves an open progress bar per figure;
    returns the paths written."""
    outdir = check_output_folder(outdir)
    out = outdir / "plots"
    out.mkdir(parents=True, exist_ok=True)
    earlier = {old.name for old in out.iterdir() if _PLOT_FILES.match(old.name)}
    written = [atomic_write(outdir / name, draw) for name, draw in plot_files(result, max_cnvr, max_samples, dpi)]
    for name in earlier - {path.name for path in written}:
        remove_inside(outdir, f"plots/{name}")
    return written


__all__ = ["plot_cnvr", "segplot", "plot_overview", "informative_cnvr", "write_plots", "plot_files", "log_ratios",
           "count_ratios"]
