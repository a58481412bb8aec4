"""Pictures of a CNVDetectionResult (matplotlib, no display needed).

- :func:`plot_cnvr` -- cn.mops's ``plot(result, which=k)``: four panels over one CNV region and 10 regions
  on each side: normalized read counts, local assessments (sINI), read count ratios
  log2((x + 0.01) / (lambda_main + 0.01)) and the CNV call (individualCall); samples called as gains in the
  region are red, losses blue, the others grey underneath.
- :func:`segplot` -- cn.mops's ``segplot(result, sampleIdx=...)``: one sample's log ratios per region as
  points and its segments' means as horizontal lines, one panel per chromosome, y-limits symmetric.
- :func:`plot_overview` -- genome-wide: every CNV of every sample as a bar on a concatenated genome axis,
  CNV regions shaded, chromosome boundaries marked.
- :func:`write_plots` -- all of the above as PNG files (``run --plots``).

Every function returns a ``matplotlib.figure.Figure`` (drawn with the Agg canvas, so no GUI backend and no
pyplot state is involved) and writes it to ``path`` when one is given. Indices follow cn.mops: ``which``
and ``sample_idx`` count from 1 (a sample may also be given by name).
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PatchCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from .data import chromosome_blocks
from .errors import InputError

GAIN = "#d62728"
LOSS = "#1f5fbf"
OTHER = "#b4b4b4"
CNVR_SHADE = "#fff2b3"
_CN_LABEL = re.compile(r"^CN(\d+(?:\.\d+)?)$")


# ------------------------------------------------------------------------------------------ helpers
def _figure(width: float, height: float, layout: str | None = None) -> Figure:
    """A figure on an Agg canvas (margins set by the caller: the constrained layout doubles the drawing time)."""
    fig = Figure(figsize=(width, height), layout=layout)
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


def _region_rows(result, seqname: str, start: int, end: int) -> tuple[int, int, int, int]:
    """(first, last) rows of ``gr`` overlapping [start, end] on ``seqname`` and the chromosome's row block."""
    gr = result.gr
    for name, b0, b1 in chromosome_blocks(gr["seqnames"].astype(str).to_numpy(dtype=object)):
        if name == str(seqname):
            s = gr["start"].to_numpy()[b0:b1]
            e = gr["end"].to_numpy()[b0:b1]
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


def _called_colours(ic: np.ndarray, upper: float, lower: float) -> list[str]:
    """Per sample: red if any call in ``ic`` (rows of the CNV region) >= upper, blue if any <= lower."""
    col = [OTHER] * ic.shape[1]
    for k in range(ic.shape[1]):
        if (ic[:, k] >= upper).any():
            col[k] = GAIN
        if (ic[:, k] <= lower).any():
            col[k] = LOSS
    return col


def _cn_number(label) -> float | None:
    if label is None or (isinstance(label, float) and math.isnan(label)):
        return None
    m = _CN_LABEL.match(str(label))
    return float(m.group(1)) if m else None


def log_ratios(result) -> np.ndarray:
    """(m, N) log2 ratios of the normalized counts as segplot shows them: to the row medians of the cohort
    (cn.mops's segplot), or to the main class's lambda for referencecn.mops/singlecn.mops results (their
    reference is the controls / the chromosome); non-finite values become 0, as in cn.mops."""
    x = np.asarray(result.normalized_data, dtype=np.float64)
    if result.params.get("method") == "referencecn.mops":
        ref = _main_lambda(result)[:, None]
    else:
        ref = np.median(x, axis=1)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log2(x / ref)
    out[~np.isfinite(out)] = 0.0
    return out


# ------------------------------------------------------------------------------------------ plot(result, which)
def plot_cnvr(result, which: int = 1, margin=(10, 10), path=None, dpi: int = 100) -> Figure:
    """cn.mops's ``plot(result, which)``: a 2 x 2 figure over CNV region ``which`` (1-based) of
    ``result.cnvr`` plus ``margin`` regions on each side (within the chromosome)."""
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
    gr = result.gr
    xlab = f"{chrom}: {int(gr['start'].iloc[p0])} - {int(gr['end'].iloc[p1])}"
    p = result.params
    nd = np.asarray(result.normalized_data, dtype=np.float64)[rows]
    la = np.asarray(result.local_assessments)[rows]
    lam = _main_lambda(result)[rows]
    ratio = np.log2((nd + 0.01) / (lam[:, None] + 0.01))
    ic = np.asarray(result.individual_call)[rows]
    colours = _called_colours(np.asarray(result.individual_call)[r0:r1 + 1], p["upperThreshold"],
                              p["lowerThreshold"])
    xs = np.arange(p0, p1 + 1) - p0 + 1
    fig = _figure(11, 8)
    axes = fig.subplots(2, 2)
    fig.subplots_adjust(left=0.07, right=0.985, bottom=0.06, top=0.91, wspace=0.2, hspace=0.25)
    panels = [
        (axes[0, 0], nd, "Normalized Read Counts", "Read Count", False),
        (axes[0, 1], la, "Local Assessments", "Local Assessment Score", True),
        (axes[1, 0], ratio, "Read Count Ratios", f"log2 ratio to lambda ({p.get('mainClass', 'CN2')})", False),
        (axes[1, 1], ic, "CNV Call", "CNV Call Value", True),
    ]
    order = [k for k, c in enumerate(colours) if c == OTHER] + [k for k, c in enumerate(colours) if c != OTHER]
    names = list(result.sample_names)
    for ax, values, title, ylab, thresholds in panels:
        ax.axvspan(r0 - p0 + 0.5, r1 - p0 + 1.5, color=CNVR_SHADE, zorder=0)
        for k in order:
            called = colours[k] != OTHER
            ax.plot(xs, values[:, k], color=colours[k], lw=2.0 if called else 1.0, alpha=1.0 if called else 0.6,
                    zorder=3 if called else 2, label=names[k] if called else None)
        if thresholds:
            for t in (p["upperThreshold"], p["lowerThreshold"]):
                ax.axhline(t, color="k", ls=":", lw=0.8, zorder=1)
        ax.set_title(title)
        ax.set_ylabel(ylab)
        ax.set_xlabel(xlab)
        ax.set_xlim(0.5, xs[-1] + 0.5)
        ax.tick_params(axis="x", labelbottom=False)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if handles:
        axes[0, 0].legend(handles[:12], labels[:12], fontsize=7, loc="best", title="called samples",
                          title_fontsize=7)
    fig.suptitle(f"CNV region {int(which)}: {chrom}:{int(row['start']):,}-{int(row['end']):,} "
                 f"({p.get('method', 'cn.mops')})")
    _save(fig, path, dpi)
    return fig


# ------------------------------------------------------------------------------------------ segplot
def segplot(result, sample_idx=1, seqname=None, path=None, dpi: int = 100) -> Figure:
    """cn.mops's ``segplot``: the log ratios of sample ``sample_idx`` (1-based, or a sample name) per region
    as points, its segments' means (of the local assessments, as cn.mops) as horizontal lines (red above
    0, blue below; CNV segments thicker), a zero line; one panel per chromosome (all chromosomes when
    ``seqname`` is None), y-limits symmetric around 0."""
    k = _sample_index(result, sample_idx)
    name = result.sample_names[k]
    gr = result.gr
    blocks = chromosome_blocks(gr["seqnames"].astype(str).to_numpy(dtype=object))
    if seqname is not None:
        blocks = [b for b in blocks if b[0] == str(seqname)]
        if not blocks:
            raise InputError(f"Unknown seqname {seqname!r}.")
    ratios = log_ratios(result)[:, k]
    seg = result.segmentation
    seg = seg[seg["sampleName"].astype(str) == str(name)]
    p = result.params
    undef = all(b[0] == "undef" for b in blocks)
    scale = 1.0 if undef else 1e6
    lim = 0.0
    ncol = min(4, len(blocks))
    nrow = math.ceil(len(blocks) / ncol)
    height = 3.2 * nrow + 0.6
    fig = _figure(max(6.0, 4.0 * ncol), height)
    axes = np.atleast_1d(fig.subplots(nrow, ncol, squeeze=False).ravel())
    fig.subplots_adjust(left=0.08 if ncol > 1 else 0.12, right=0.98, bottom=0.62 / height,
                        top=1 - 0.55 / height, wspace=0.28, hspace=0.45)
    for ax, (chrom, b0, b1) in zip(axes, blocks):
        s = gr["start"].to_numpy()[b0:b1]
        e = gr["end"].to_numpy()[b0:b1]
        mid = ((s + e) // 2) / scale
        y = ratios[b0:b1]
        ax.scatter(mid, y, s=3, color="#555555", alpha=0.5, linewidths=0, zorder=2)
        ax.axhline(0.0, color="k", lw=0.7, zorder=1)
        lim = max(lim, float(np.abs(y).max()) if y.size else 0.0)
        for _, sr in seg[seg["seqnames"].astype(str) == chrom].iterrows():
            mean = float(sr["mean"])
            cnv = mean >= p["upperThreshold"] or mean <= p["lowerThreshold"]
            colour = GAIN if mean > 0 else LOSS if mean < 0 else "k"
            ax.hlines(mean, sr["start"] / scale, sr["end"] / scale, colors=colour, lw=3.0 if cnv else 1.5,
                      zorder=3)
            lim = max(lim, abs(mean))
        ax.set_title(chrom)
        ax.set_xlabel("region" if undef else "position (Mb)")
        ax.set_ylabel("log2 ratio")
    lim = max(lim, 1.0) * 1.05
    for ax in axes[:len(blocks)]:
        ax.set_ylim(-lim, lim)
    for ax in axes[len(blocks):]:
        ax.set_visible(False)
    fig.suptitle(f"Segmentation of sample {name} ({p.get('method', 'cn.mops')})")
    _save(fig, path, dpi)
    return fig


# ------------------------------------------------------------------------------------------ overview
def plot_overview(result, path=None, dpi: int = 100) -> Figure:
    """Genome-wide overview: one row per sample, every CNV as a bar on the concatenated chromosomes (red
    gains, blue losses; darker for copy numbers further from normal once integer copy numbers are known),
    CNV regions shaded, chromosome boundaries as lines."""
    gr = result.gr
    blocks = chromosome_blocks(gr["seqnames"].astype(str).to_numpy(dtype=object))
    offsets: dict[str, float] = {}
    ticks, labels, bounds = [], [], []
    pos = 0.0
    for chrom, b0, b1 in blocks:
        lo = float(gr["start"].iloc[b0]) - 1.0
        hi = float(gr["end"].to_numpy()[b0:b1].max())
        offsets[chrom] = pos - lo
        ticks.append(pos + (hi - lo) / 2)
        labels.append(chrom)
        pos += hi - lo
        bounds.append(pos)
    names = list(result.sample_names)
    n = len(names)
    fig = _figure(12, min(2.2 + 0.22 * n, 40), layout="constrained")
    ax = fig.subplots()
    for _, r in result.cnvr.iterrows():
        off = offsets.get(str(r["seqnames"]))
        if off is not None:
            ax.axvspan(off + r["start"], off + r["end"], color=CNVR_SHADE, zorder=0, lw=0)
    main = _cn_number(result.params.get("mainClass", "CN2"))
    rects, colours = [], []
    index = {s: i for i, s in enumerate(names)}
    for _, c in result.cnvs.iterrows():
        off = offsets.get(str(c["seqnames"]))
        if off is None or str(c["sampleName"]) not in index:
            continue
        i = index[str(c["sampleName"])]
        cn = _cn_number(c.get("CN"))
        gain = (cn > main) if (cn is not None and main is not None and cn != main) else float(c["mean"]) > 0
        strong = cn is not None and main is not None and abs(cn - main) >= 2
        colour = GAIN if gain else LOSS
        rects.append(Rectangle((off + c["start"], n - 1 - i - 0.4), max(c["end"] - c["start"] + 1, 1), 0.8))
        colours.append((colour, 1.0 if strong or cn is None else 0.55))
    if rects:
        coll = PatchCollection(rects, facecolors=[to_rgba(c, a) for c, a in colours], edgecolors=[
            to_rgba(c, 1.0) for c, _ in colours], linewidths=0.6, zorder=3)
        ax.add_collection(coll)
    for b in bounds[:-1]:
        ax.axvline(b, color="#888888", lw=0.6, zorder=1)
    ax.set_xlim(0, max(pos, 1.0))
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xticks(ticks, labels, fontsize=8, rotation=90 if len(labels) > 12 else 0)
    if n <= 80:
        ax.set_yticks(range(n), names[::-1], fontsize=7 if n > 30 else 8)
    else:
        ax.set_yticks([])
    ax.set_xlabel("chromosome")
    ax.set_ylabel("sample")
    handles = [Patch(color=GAIN, label="gain"), Patch(color=LOSS, label="loss")]
    if any(a < 1.0 for _, a in colours):  # integer copy numbers known: one step vs two or more from normal
        handles = [Patch(color=to_rgba(GAIN, 0.55), label="gain (+1 copy)"),
                   Patch(color=GAIN, label="gain (+2 or more)"),
                   Patch(color=to_rgba(LOSS, 0.55), label="loss (-1 copy)"),
                   Patch(color=LOSS, label="loss (-2 or more)")]
    ax.legend(handles=handles + [Patch(color=CNVR_SHADE, label="CNV region")], loc="lower right",
              bbox_to_anchor=(1.0, 1.0), fontsize=8, ncols=len(handles) + 1, frameon=False)
    s = result.summary()
    ax.set_title(f"{result.params.get('method', 'cn.mops')}: {s['cnvs']} CNVs in {s['cnv_regions']} CNV regions, "
                 f"{s['samples']} samples, {s['regions']:,} regions", loc="left", fontsize=10, pad=22)
    _save(fig, path, dpi)
    return fig


# ------------------------------------------------------------------------------------------ files
def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)) or "sample"


def write_plots(result, outdir, max_cnvr: int = 12, max_samples: int = 6, dpi: int = 100) -> list[Path]:
    """Write ``plots/overview.png``, ``plots/cnvr_<k>.png`` for the first ``max_cnvr`` CNV regions and
    ``plots/segplot_<sample>.png`` for up to ``max_samples`` samples (those with most CNVs first) under
    ``outdir``; returns the paths written."""
    out = Path(outdir) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    plot_overview(result, out / "overview.png", dpi=dpi)
    written.append(out / "overview.png")
    for k in range(1, min(len(result.cnvr), max_cnvr) + 1):
        path = out / f"cnvr_{k:03d}.png"
        plot_cnvr(result, which=k, path=path, dpi=dpi)
        written.append(path)
    names = [str(s) for s in result.sample_names]
    counts = result.cnvs["sampleName"].astype(str).value_counts().reindex(names, fill_value=0).to_numpy()
    order = sorted(range(len(names)), key=lambda i: (-counts[i], i))[:max_samples]
    for i in order:
        path = out / f"segplot_{i + 1:03d}_{_safe(result.sample_names[i])}.png"
        segplot(result, sample_idx=i + 1, path=path, dpi=dpi)
        written.append(path)
    return written


__all__ = ["plot_cnvr", "segplot", "plot_overview", "write_plots", "log_ratios"]
