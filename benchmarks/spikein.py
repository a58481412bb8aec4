"""Spike-in accuracy of CNV calls on real read counts, and the calibration of their qualities.

Background: the real exome read counts of cn.mops's example data (``exomeCounts`` of cn.mops.RData: 3,785 chr22
targets x 22 HapMap samples), as stored in the golden case ``exome_default`` (input_counts + input_ranges).

Spike-ins: per replicate (seed), every sample gets ``per_sample`` CNVs at random places on the chromosome, of
lengths log-uniform in each size class (1-10 kb, 10-100 kb, 100 kb-1 Mb), each covering at least one window,
apart from each other and from the sample's background calls (the calls of the same mode on the unspiked
counts), at a copy number drawn from 0, 1, 1.5, 2.5, 3, 4 (1.5 and 2.5: mosaic). A loss to copy number c thins
each covered window's reads binomially (each read kept with probability c / 2); a gain adds Poisson(x (c - 2) / 2)
reads to a window of x reads.

Background calls: the calls of the same mode on the unspiked counts, at its defaults (which spike-ins avoid) and
at RELAXED settings (log2 thresholds halved, segments of any width): the real data's own CNVs and artefacts,
borderline ones included, which a spiked run calls in some replicates and not in others (``--strict-background``:
the defaults' calls only, as before; then a few real-data loci come back as "false" calls in up to a third of
the replicates, e.g. cn.mops's 57-kb loss in NA12342 at 22.84 Mb, where NA07051 has a background loss).

Measures, per mode (cn.mops defaults, exomecn.mops, haplocn.mops), pooled over the replicates; overlap = at
least one shared base, same sample:
- recall per size class and copy number: spike-ins overlapped by a call of the same direction (loss/gain);
- precision per size class (of the call's length): calls overlapping a spike-in of their direction / calls
  that overlap no background call of their sample (calls overlapping a spike-in are never background);
- quality calibration: the judged calls (not background; pooled over modes) in deciles of their QUAL (the call
  quality of ``gcnmops.calls.quality``, one decimal: 10 rows of equal counts by rank of QUAL, a QUAL value kept
  in the row of its first call): the false calls each decile's QUALs state (the sum of 10^(-QUAL/10)) against
  those observed, with an exact 95% Poisson interval of the ratio. ``--fit``: the calibration's constants of
  greatest likelihood on these replicates (``fit_calibration``), and their table; ``--constants``: a table of
  the map with other constants (e.g. a fit on other replicates).
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

import gcnmops
from gcnmops.calls.quality import CALIBRATION, Calibration, calibrate, calibrated_error, call_qualities, call_scores

CASE = "exome_default"
SIZE_CLASSES = {"1-10 kb": (1_000, 10_000), "10-100 kb": (10_000, 100_000), "100 kb-1 Mb": (100_000, 1_000_000)}
COPY_NUMBERS = (0.0, 1.0, 1.5, 2.5, 3.0, 4.0)
MODES = {"cn.mops": "cn_mops", "exomecn.mops": "exome_cn_mops", "haplocn.mops": "haplo_cn_mops"}
#: the settings of each mode's background calls that judge the spiked runs' calls: its log2 thresholds halved
#: (defaults: cn.mops -0.9 / 0.5, exomecn.mops -0.8 / 0.5, haplocn.mops -0.9 / 0.6) and segments of any width
RELAXED = {"cn.mops": {"lower_threshold": -0.45, "upper_threshold": 0.25, "min_width": 1},
           "exomecn.mops": {"lower_threshold": -0.4, "upper_threshold": 0.25, "min_width": 1},
           "haplocn.mops": {"lower_threshold": -0.45, "upper_threshold": 0.3, "min_width": 1}}


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
    r, locus = call_scores(result)
    calls = pd.DataFrame({"sample": cnvs["sampleName"].to_numpy(), "seqnames": cnvs["seqnames"].astype(str).to_numpy(),
                          "start": cnvs["start"].to_numpy(), "end": cnvs["end"].to_numpy(), "length": length,
                          "size": size_class(length), "qual": q, "r": r, "locus": locus, "status": status})
    return calls, match.any(axis=0)


def run_mode(mode: str, frame: pd.DataFrame, relaxed: bool = False):
    """The mode's result (integer copy numbers where it has calls); ``relaxed``: its calls only, at RELAXED."""
    result = getattr(gcnmops, MODES[mode])(frame, backend="cpu", **(RELAXED[mode] if relaxed else {}))
    if len(result.cnvs) and not relaxed:
        result = gcnmops.calc_integer_copy_numbers(result)
    return result


def benchmark(seeds=(1, 2, 3, 4, 5), modes=tuple(MODES), per_sample: int = 6, n_windows: int | None = None,
              strict_background: bool = False) -> dict:
    """Spike-in calls and truths of every mode and replicate: {mode: {"calls": DataFrame, "truth": DataFrame}}.
    Spike-ins avoid the mode's calls on the unspiked counts; calls are judged against those and its calls there
    at RELAXED settings (``strict_background``: those only)."""
    bg = load_background(n_windows)
    out = {}
    for mode in modes:
        background = run_mode(mode, bg.frame(bg.counts)).cnvs
        relaxed = None if strict_background else run_mode(mode, bg.frame(bg.counts), relaxed=True).cnvs
        judge = background if relaxed is None else pd.concat([background, relaxed], ignore_index=True)
        calls, truths = [], []
        for seed in seeds:
            counts, truth = spike(bg, seed, per_sample, background)
            c, found = classify(run_mode(mode, bg.frame(counts)), truth, judge)
            calls.append(c.assign(seed=seed))
            truths.append(truth.assign(found=found, seed=seed))
        out[mode] = {"calls": pd.concat(calls, ignore_index=True), "truth": pd.concat(truths, ignore_index=True),
                     "background": f"{len(background)} background calls"
                     + ("" if relaxed is None else f" ({len(relaxed)} at RELAXED)")}
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


def calibration_table(calls: pd.DataFrame, constants: Calibration | None = None) -> pd.DataFrame:
    """Per decile of QUAL (the calls sorted by QUAL; a QUAL value in the decile of its first call): QUAL range,
    calls, false calls, expected false calls (the sum of the stated errors 10^(-QUAL/10)), stated error (their
    mean), observed false-call rate (FP / calls), observed / stated and its exact 95% Poisson interval (of the
    false calls). ``constants``: QUAL from the map with these constants (``calls["r"]``), not the package's
    (``calls["qual"]``)."""
    from scipy.stats import chi2

    judged = calls[calls["status"] != "BG"]
    if constants is not None:
        locus = judged["locus"].to_numpy(float) if "locus" in judged else None
        judged = judged.assign(qual=calibrate(judged["r"].to_numpy(float), constants, locus))
    judged = judged.sort_values("qual", kind="stable").reset_index(drop=True)
    if judged.empty:
        return pd.DataFrame()
    # each call's decile by rank; a QUAL value belongs to the decile of its first call (ties stay together)
    qual = judged["qual"].to_numpy()
    first = np.searchsorted(qual, qual, side="left")
    group = first * 10 // len(judged)
    rows = []
    for g, part in judged.groupby(group):
        n, false = len(part), int((part["status"] == "FP").sum())
        expected = float((10.0 ** (-part["qual"].to_numpy(float) / 10)).sum())
        low = chi2.ppf(0.025, 2 * false) / 2 if false else 0.0
        high = chi2.ppf(0.975, 2 * false + 2) / 2
        rows.append({"QUAL": f"{part['qual'].min():g}-{part['qual'].max():g}", "calls": n, "false calls": false,
                     "expected": expected, "stated error": expected / n, "observed error": false / n,
                     "observed / stated": false / expected if expected > 0 else np.nan,
                     "95% interval": f"{low / expected:.2g}-{high / expected:.2g}" if expected > 0 else "-"})
    return pd.DataFrame(rows)


def within_2x(table: pd.DataFrame) -> tuple[int, int]:
    """(deciles whose observed / stated is within [0.5, 2], deciles whose 95% interval reaches into it)."""
    ratio = table["observed / stated"].to_numpy(float)
    bounds = np.array([[float(v) for v in re.split(r"(?<!e)-", t)] for t in table["95% interval"]])
    return int(((ratio >= 0.5) & (ratio <= 2)).sum()), int(((bounds[:, 1] >= 0.5) & (bounds[:, 0] <= 2)).sum())


def fit_calibration(calls: pd.DataFrame) -> Calibration:
    """The constants of the map (``gcnmops.calls.quality.calibrated_error``) of greatest likelihood of the
    false/true outcome (FP/TP) of the judged calls given their model phred scores ``r`` and locus dispersions
    ``locus`` (1 where the table has none): a grid of starts, then Nelder-Mead (tail_r on a log scale)."""
    from scipy.optimize import minimize

    judged = calls[calls["status"] != "BG"]
    r = judged["r"].to_numpy(float)
    locus = judged["locus"].to_numpy(float) if "locus" in judged else np.ones(r.size)
    false = (judged["status"] == "FP").to_numpy()
    if false.all() or not false.any():
        raise ValueError(f"{int(false.sum())} false calls of {false.size}: a fit needs both false and true calls")

    def constants(x):
        return Calibration(x[0], x[1], x[2], x[3], 10.0 ** x[4], x[5])

    def nll(x):
        p = np.clip(calibrated_error(r, constants(x), locus), 1e-300, 1 - 1e-12)
        return -(np.log(p[false]).sum() + np.log1p(-p[~false]).sum())

    starts = [np.array([q0, a, b, t, lr, c]) for q0 in (2.0, 3.0) for a in (0.003, 0.03, 0.3) for b in (1.0, 1.5, 2.3)
              for t in (15.0, 25.0) for lr in (0.5, 2.0, 3.5) for c in (0.0, 0.4, 1.0)]
    start = min(starts, key=nll)
    best = minimize(nll, start, method="Nelder-Mead",
                    options={"xatol": 1e-8, "fatol": 1e-8, "maxiter": 40_000, "maxfev": 40_000})
    return constants(best.x)


def _markdown(table: pd.DataFrame, index: bool = True) -> str:
    """A pipe table of ``table`` (floats with 3 significant digits)."""
    frame = table.reset_index() if index else table
    cell = (lambda v: f"{v:.3g}" if isinstance(v, float) else str(v))
    rows = [[str(c) for c in frame.columns]] + [[cell(v) for v in row] for row in frame.itertuples(index=False)]
    return "\n".join(["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * len(rows[0])]
                     + ["| " + " | ".join(r) + " |" for r in rows[1:]])


def report(results: dict, markdown: bool = False, fit: bool = False, constants: Calibration | None = None) -> str:
    """Recall and precision per mode, the calibration table of the pooled calls; ``fit``: also the constants
    fitted on these calls (``fit_calibration``) and their calibration table; ``constants``: also the table of
    the map with these constants."""
    fmt = _markdown if markdown else (lambda t: t.to_string())
    parts = []
    for mode, res in results.items():
        parts += [f"## {mode}: recall (spike-ins found / spiked), {res['background']}",
                  fmt(recall_table(res["truth"])), f"## {mode}: precision", fmt(precision_table(res["calls"]))]
    pooled = pd.concat([r["calls"] for r in results.values()], ignore_index=True)
    tables = [("the package's constants", CALIBRATION, None)]
    if constants is not None:
        tables.append(("the constants given", constants, constants))
    if fit:
        try:
            constants = fit_calibration(pooled)
            tables.append(("the constants fitted on these calls", constants, constants))
        except ValueError as e:
            parts.append(f"no fit: {e}")
    judged = pooled[pooled["status"] != "BG"]
    for title, shown, constants in tables:
        cal = calibration_table(pooled, constants)
        point, interval = within_2x(cal)
        values = ", ".join(f"{k}={v:.4g}" for k, v in shown._asdict().items())
        parts += [f"## quality calibration (all modes), {title}: {values}",
                  _markdown(cal, index=False) if markdown else cal.to_string(index=False),
                  f"{len(judged)} judged calls, {int((judged['status'] == 'FP').sum())} false; observed within 2x of "
                  f"stated in {point} of {len(cal)} deciles, its 95% interval reaching into 0.5-2 in {interval}"]
    return "\n\n".join(parts)


def _seeds(text: str) -> list[int]:
    """Seeds from '1,2,5-8' (ranges inclusive)."""
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return out


def main(argv: list[str]) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="accuracy.py spikein", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=_seeds, default=[1, 2, 3, 4, 5], help="e.g. 1,2,3 or 1-400")
    ap.add_argument("--modes", type=lambda t: t.split(","), default=list(MODES), help="of " + ", ".join(MODES))
    ap.add_argument("--per-sample", type=int, default=6, help="spike-ins per sample and replicate")
    ap.add_argument("--fit", action="store_true", help="also fit the calibration's constants on these replicates")
    ap.add_argument("--constants", type=lambda t: Calibration(*map(float, t.split(","))),
                    help="also the table of the map with these constants: q0,scale,power,tail_q,tail_r,locus_power")
    ap.add_argument("--strict-background", action="store_true",
                    help="judge calls against the background calls at the modes' defaults only")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", help="write the per-call and per-spike-in tables here")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    results = benchmark(args.seeds, args.modes, args.per_sample, strict_background=args.strict_background)
    seconds = time.perf_counter() - t0
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({m: {k: (v.to_dict("records") if isinstance(v, pd.DataFrame) else v) for k, v in r.items()}
                       for m, r in results.items()}, fh)
    print(report(results, args.markdown, args.fit, args.constants))
    print(f"\n{len(args.seeds)} replicate(s) x {len(args.modes)} mode(s) in {seconds:.0f} s (CPU)")
