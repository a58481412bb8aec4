"""Spike-in accuracy of CNV calls on real read counts, and the calibration of their qualities.

Background: the real exome read counts of cn.mops's example data (``exomeCounts`` of cn.mops.RData: 3,785 chr22
targets x 22 HapMap samples), as stored in the golden case ``exome_default`` (input_counts + input_ranges).

Spike-ins: per replicate (seed), every sample gets ``per_sample`` CNVs at random places on the chromosome, of
lengths log-uniform in each size class (1-10 kb, 10-100 kb, 100 kb-1 Mb), each covering at least one window,
apart from each other and from the sample's background calls (the calls of the same mode on the unspiked
counts), at a copy number drawn from 0, 1, 1.5, 2.5, 3, 4 (1.5 and 2.5: mosaic). A loss to copy number c thins
each covered window's reads binomially (each read kept with probability c / 2); a gain adds Poisson(x (c - 2) / 2)
reads to a window of x reads.

Measures, per mode (cn.mops defaults, exomecn.mops, haplocn.mops), pooled over the replicates; overlap = at
least one shared base, same sample:
- recall per size class and copy number: spike-ins overlapped by a call of the same direction (loss/gain);
- precision per size class (of the call's length): calls overlapping a spike-in of their direction / calls
  that overlap no background call of their sample (those are the real data's own CNVs or artefacts, present
  without spike-ins; calls overlapping a spike-in are never background);
- quality calibration: the calls (pooled over modes) in deciles of their QUAL (the call quality of
  ``gcnmops.calls.quality``; ties kept together, so fewer rows where qualities repeat): the error each QUAL
  states (mean of 10^(-QUAL/10)) against the observed false-call rate.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

import gcnmops
from gcnmops.calls.quality import call_qualities

CASE = "exome_default"
SIZE_CLASSES = {"1-10 kb": (1_000, 10_000), "10-100 kb": (10_000, 100_000), "100 kb-1 Mb": (100_000, 1_000_000)}
COPY_NUMBERS = (0.0, 1.0, 1.5, 2.5, 3.0, 4.0)
MODES = {"cn.mops": "cn_mops", "exomecn.mops": "exome_cn_mops", "haplocn.mops": "haplo_cn_mops"}


@dataclass
class Background:
    """Real counts: ``ranges`` (seqnames, start, end), ``counts`` (m, N) int64, ``samples``."""

    ranges: pd.DataFrame
    counts: np.ndarray
    samples: list[str]

    def frame(self, counts: np.ndarray) -> pd.DataFrame:
        out = self.ranges.copy()
        for k, s in enumerate(self.samples):
            out[s] = counts[:, k]
        return out


def load_background(n_windows: int | None = None) -> Background:
    """The golden ``exome_default`` input (the first ``n_windows`` windows if given)."""
    from golden import array, manifest, table

    counts = np.asarray(array(CASE, "input_counts"), dtype=np.int64)
    ranges = table(CASE, "input_ranges")[["seqnames", "start", "end"]]
    if n_windows is not None:
        counts, ranges = counts[:n_windows], ranges.iloc[:n_windows].reset_index(drop=True)
    return Background(ranges, counts, list(manifest(CASE)["sampleNames"]))


def size_class(length: np.ndarray) -> np.ndarray:
    """The size class name of each length (bp); lengths outside every class: '<1 kb' or '>1 Mb'."""
    length = np.asarray(length)
    out = np.where(length < 1_000, "<1 kb", ">1 Mb").astype(object)
    for name, (lo, hi) in SIZE_CLASSES.items():
        out[(length >= lo) & (length < hi)] = name
    return out


def spike(bg: Background, seed: int, per_sample: int, avoid: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """(spiked counts, truth: seqnames, start, end, sample, CN, size) of one replicate (module docstring);
    ``avoid``: calls (seqnames, start, end, sampleName) no spike-in of that sample may overlap."""
    rng = np.random.default_rng(seed)
    counts = bg.counts.copy()
    chrom = bg.ranges["seqnames"].astype(str).to_numpy()
    start, end = bg.ranges["start"].to_numpy(np.int64), bg.ranges["end"].to_numpy(np.int64)
    rows = []
    for k, sample in enumerate(bg.samples):
        taken = [(int(s), int(e)) for s, e in avoid.loc[avoid["sampleName"] == sample, ["start", "end"]].to_numpy()]
        for j in range(per_sample):
            lo, hi = list(SIZE_CLASSES.values())[j % len(SIZE_CLASSES)]
            for _ in range(200):  # tries to find a free place
                length = int(np.exp(rng.uniform(np.log(lo), np.log(hi))))
                name = chrom[rng.integers(len(chrom))]
                on = np.flatnonzero(chrom == name)
                first, last = start[on].min(), end[on].max()
                if last - first < length:
                    continue
                s = int(rng.integers(first, last - length + 1))
                e = s + length - 1
                hit = on[(start[on] <= e) & (end[on] >= s)]
                gap = hi // 2  # keep spike-ins apart: one call never spans two
                if hit.size and all(e + gap < a or s - gap > b for a, b in taken):
                    break
            else:
                continue
            cn = float(COPY_NUMBERS[rng.integers(len(COPY_NUMBERS))])
            x = counts[hit, k]
            counts[hit, k] = rng.binomial(x, cn / 2) if cn < 2 else x + rng.poisson(x * (cn - 2) / 2)
            taken.append((s, e))
            rows.append((name, s, e, sample, cn, size_class(np.array([length]))[0]))
    truth = pd.DataFrame(rows, columns=["seqnames", "start", "end", "sample", "CN", "size"])
    return counts, truth


def _overlaps(a: pd.DataFrame, a_sample: str, b: pd.DataFrame, b_sample: str) -> np.ndarray:
    """(len(a), len(b)) bool: same chromosome and sample, at least one shared base."""
    same = ((a["seqnames"].astype(str).to_numpy()[:, None] == b["seqnames"].astype(str).to_numpy()[None, :])
            & (a[a_sample].astype(str).to_numpy()[:, None] == b[b_sample].astype(str).to_numpy()[None, :]))
    return (same & (a["start"].to_numpy()[:, None] <= b["end"].to_numpy()[None, :])
            & (a["end"].to_numpy()[:, None] >= b["start"].to_numpy()[None, :]))


def classify(result, truth: pd.DataFrame, background: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """(calls: the result's CNVs with length, size, qual, status TP/FP/BG; (len(truth),) recalled flags)."""
    cnvs = result.cnvs.reset_index(drop=True)
    q, directions = call_qualities(result)
    sign = np.array([{"loss": -1, "gain": 1}.get(d, 0) for d in directions])
    stat = cnvs["median" if result.params.get("useMedian", False) else "mean"].to_numpy(float)
    sign = np.where(sign == 0, np.sign(stat), sign)  # a CNV of the normal integer copy number: its statistic
    truth_sign = np.sign(truth["CN"].to_numpy(float) - 2.0)  # the samples are diploid, whatever the mode assumes
    hit = _overlaps(cnvs, "sampleName", truth, "sample")
    match = hit & (sign[:, None] == truth_sign[None, :])
    bg = _overlaps(cnvs, "sampleName", background, "sampleName").any(axis=1) & ~hit.any(axis=1)
    length = cnvs["end"].to_numpy() - cnvs["start"].to_numpy() + 1
    status = np.where(match.any(axis=1), "TP", np.where(bg, "BG", "FP"))
    calls = pd.DataFrame({"sample": cnvs["sampleName"].to_numpy(), "length": length, "size": size_class(length),
                          "qual": q, "status": status})
    return calls, match.any(axis=0)


def run_mode(mode: str, frame: pd.DataFrame):
    result = getattr(gcnmops, MODES[mode])(frame, backend="cpu")
    if len(result.cnvs):
        result = gcnmops.calc_integer_copy_numbers(result)
    return result


def benchmark(seeds=(1, 2, 3, 4, 5), modes=tuple(MODES), per_sample: int = 6, n_windows: int | None = None) -> dict:
    """Spike-in calls and truths of every mode and replicate: {mode: {"calls": DataFrame, "truth": DataFrame}}."""
    bg = load_background(n_windows)
    out = {}
    for mode in modes:
        background = run_mode(mode, bg.frame(bg.counts)).cnvs
        calls, truths = [], []
        for seed in seeds:
            counts, truth = spike(bg, seed, per_sample, background)
            c, found = classify(run_mode(mode, bg.frame(counts)), truth, background)
            calls.append(c.assign(seed=seed))
            truths.append(truth.assign(found=found, seed=seed))
        out[mode] = {"calls": pd.concat(calls, ignore_index=True), "truth": pd.concat(truths, ignore_index=True),
                     "background": len(background)}
    return out


def recall_table(truth: pd.DataFrame) -> pd.DataFrame:
    """Recall (found / spiked) per size class (rows) and copy number (columns), and over all copy numbers."""
    cells = truth.groupby(["size", "CN"])["found"].agg(["sum", "count"])
    table = {}
    for (size, cn), (k, n) in cells.iterrows():
        table.setdefault(f"CN{cn:g}", {})[size] = f"{k / n:.2f} ({k}/{n})"
    total = truth.groupby("size")["found"].agg(["sum", "count"])
    table["all"] = {size: f"{k / n:.2f} ({k}/{n})" for size, (k, n) in total.iterrows()}
    return pd.DataFrame(table).reindex([s for s in SIZE_CLASSES if s in total.index])


def precision_table(calls: pd.DataFrame) -> pd.DataFrame:
    """Precision (TP / (TP + FP)) per size class of the calls, background calls left out."""
    judged = calls[calls["status"] != "BG"]
    rows = {}
    for size, part in judged.groupby("size"):
        tp = int((part["status"] == "TP").sum())
        rows[size] = {"precision": f"{tp / len(part):.2f} ({tp}/{len(part)})", "background calls left out":
                      int(((calls["status"] == "BG") & (calls["size"] == size)).sum())}
    order = ["<1 kb"] + list(SIZE_CLASSES) + [">1 Mb"]
    return pd.DataFrame(rows).T.reindex([s for s in order if s in rows])


def calibration_table(calls: pd.DataFrame) -> pd.DataFrame:
    """Per decile of QUAL (ties together): QUAL range, calls, stated error (mean 10^(-QUAL/10)), observed
    false-call rate (FP / calls), and observed / stated."""
    judged = calls[calls["status"] != "BG"].sort_values("qual", kind="stable").reset_index(drop=True)
    if judged.empty:
        return pd.DataFrame()
    edges = np.unique(np.quantile(judged["qual"], np.linspace(0, 1, 11), method="lower"))
    group = np.searchsorted(edges[1:-1], judged["qual"].to_numpy(), side="right") if edges.size > 2 else \
        np.zeros(len(judged), int)
    rows = []
    for g, part in judged.groupby(group):
        stated = float((10.0 ** (-part["qual"].to_numpy(float) / 10)).mean())
        observed = float((part["status"] == "FP").mean())
        rows.append({"QUAL": f"{part['qual'].min()}-{part['qual'].max()}", "calls": len(part),
                     "false calls": int((part["status"] == "FP").sum()), "stated error": stated,
                     "observed error": observed, "observed / stated": observed / stated if stated > 0 else np.nan})
    return pd.DataFrame(rows)


def _markdown(table: pd.DataFrame, index: bool = True) -> str:
    """A pipe table of ``table`` (floats with 3 significant digits)."""
    frame = table.reset_index() if index else table
    cell = (lambda v: f"{v:.3g}" if isinstance(v, float) else str(v))
    rows = [[str(c) for c in frame.columns]] + [[cell(v) for v in row] for row in frame.itertuples(index=False)]
    return "\n".join(["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * len(rows[0])]
                     + ["| " + " | ".join(r) + " |" for r in rows[1:]])


def report(results: dict, markdown: bool = False) -> str:
    fmt = _markdown if markdown else (lambda t: t.to_string())
    parts = []
    for mode, res in results.items():
        parts += [f"## {mode}: recall (spike-ins found / spiked), {res['background']} background calls",
                  fmt(recall_table(res["truth"])), f"## {mode}: precision", fmt(precision_table(res["calls"]))]
    pooled = pd.concat([r["calls"] for r in results.values()], ignore_index=True)
    cal = calibration_table(pooled)
    parts += ["## quality calibration (all modes)",
              _markdown(cal, index=False) if markdown else cal.to_string(index=False)]
    return "\n\n".join(parts)


def main(argv: list[str]) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="accuracy.py spikein", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=lambda t: [int(v) for v in t.split(",")], default=[1, 2, 3, 4, 5])
    ap.add_argument("--modes", type=lambda t: t.split(","), default=list(MODES), help="of " + ", ".join(MODES))
    ap.add_argument("--per-sample", type=int, default=6, help="spike-ins per sample and replicate")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", help="write the per-call and per-spike-in tables here")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    results = benchmark(args.seeds, args.modes, args.per_sample)
    print(report(results, args.markdown))
    print(f"\n{len(args.seeds)} replicate(s) x {len(args.modes)} mode(s) in {time.perf_counter() - t0:.0f} s (CPU)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({m: {k: (v.to_dict("records") if isinstance(v, pd.DataFrame) else v) for k, v in r.items()}
                       for m, r in results.items()}, fh)
