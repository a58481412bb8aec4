"""Sensitivity and precision of CNV calls against the simulated truth of cn.mops's XRanges data.

Data: cn.mops's XRanges (5000 regions x 40 samples, 25-kb windows on chrA) as stored in the golden case
``xranges_default`` (input_counts + input_ranges), and its simulated truth CNVRanges
(``../shared/data/xranges_true_cnvs.tsv``: 20 CNV regions with every sample's integer copy number).

Callers compared on the same data:
- gcnmops ``cn_mops()`` (defaults) + ``calc_integer_copy_numbers()``, run here;
- cn.mops 1.53 ``cn.mops(XRanges)`` + ``calcIntegerCopyNumbers()``: its own golden tables (cnvs, cnvr,
  cnvs_integer) of the same case;
- with ``--dnacopy``: gcnmops with ``seg_algorithm="DNAcopy"`` (R's DNAcopy through rpy2; seeded jitter).

Measures (overlap = at least one shared base, same chromosome):
- true sample-CNVs: every (truth region, sample) whose copy number is not 2 (153 on XRanges);
- sensitivity = true sample-CNVs overlapped by a called CNV of the same sample / all true sample-CNVs;
- precision = called CNVs (``cnvs`` rows) overlapping a true sample-CNV of the same sample / all called CNVs;
- F1 = their harmonic mean; "with direction": a match counts only if the call's sign (mean sINI < 0 loss,
  > 0 gain) agrees with the truth (copy number < 2 loss, > 2 gain);
- sensitivity per true copy number (0, 1, 3, 4, 5);
- integer CN exact: among matched true sample-CNVs, the share whose called integer copy number (of the
  overlapping call with the largest overlap) equals the true one;
- regions: truth regions overlapped by a CNV region (``cnvr``) / all truth regions, and CNV regions
  overlapping a truth region / all CNV regions.

Case mode (``--casemode``): simulated cohorts (gcnmops.example_cohort, 5000 regions x 40 samples, seeds 1-3 or
``--seeds``); each of the 40 samples held out in turn (``--held-out N``: the first N only), the reference built from
the other 39, the sample called "frozen" and "refit" (= cn_mops on all 40): CN-label agreement of frozen and refit,
CNV agreement (50% reciprocal overlap, both ways), per seed and pooled, and each against the truth (sensitivity /
precision as above, pooled). ``--sex``: mixed-sex cohorts (casemode.simulate.mixed_sex_cohort, 40 samples, seeds
1-5 or ``--seeds``) by cn_mops and by sex_aware_cn_mops, per seed and pooled: false chrX/chrY CNVs in males and the
planted CNVs found on chrX/chrY and on the autosomes, split into single-copy gains of a diploid chromosome (CN3 on
an autosome or a female's X: log2 1.5 = 0.585, barely above upperThreshold 0.5, cn.mops's weakest kind) and the
other kinds; a miss of the sex-aware run that cn.mops also shows on autosomes is cn.mops's, not the sex handling's.

Spike-ins on real counts (``spikein``: benchmarks/spikein.py, its docstring says what is measured): recall and
precision per size class and copy number, and the calibration of the call qualities.

Usage: python benchmarks/accuracy.py spikein [--seeds 1,2,3,4,5 | 1-400] [--fit] [--strict-background]
       [--modes cn.mops,exomecn.mops,haplocn.mops]
       python benchmarks/accuracy.py [--dnacopy] [--seed 1] [--markdown] [--json PATH] [--casemode] [--sex]
       [--seeds 1,2,3] [--held-out N]
(GCNMOPS_GOLDEN_DIR and --truth override the shared data locations).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

import gcnmops  # noqa: E402
from golden import GOLDEN_DIR, array, manifest, table  # noqa: E402

CASE = "xranges_default"
TRUTH = REPO.parent / "shared" / "data" / "xranges_true_cnvs.tsv"
NORMAL_CN = 2


def load_truth(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(regions: seqnames/start/end, sample-CNVs: seqnames/start/end/sample/CN with CN != 2)."""
    wide = pd.read_csv(path, sep="\t", dtype={"seqnames": str})
    samples = list(wide.columns[3:])
    long = wide.melt(id_vars=["seqnames", "start", "end"], value_vars=samples, var_name="sample", value_name="CN")
    long = long[long["CN"] != NORMAL_CN].reset_index(drop=True)
    return wide[["seqnames", "start", "end"]], long


def load_input() -> pd.DataFrame:
    counts = array(CASE, "input_counts")
    frame = table(CASE, "input_ranges")
    for k, s in enumerate(manifest(CASE)["sampleNames"]):
        frame[s] = counts[:, k]
    return frame


def _overlap_pairs(a: pd.DataFrame, b: pd.DataFrame, a_sample: str | None, b_sample: str | None):
    """Index pairs (i, j) of rows of a and b that overlap (same chromosome and, if given, same sample)."""
    a_key = a["seqnames"].astype(str) + ("\t" + a[a_sample].astype(str) if a_sample else "")
    b_key = b["seqnames"].astype(str) + ("\t" + b[b_sample].astype(str) if b_sample else "")
    pairs = []
    b_groups = b.groupby(b_key.to_numpy()).indices
    for key, ia in a.groupby(a_key.to_numpy()).indices.items():
        jb = b_groups.get(key)
        if jb is None:
            continue
        s1, e1 = a["start"].to_numpy()[ia][:, None], a["end"].to_numpy()[ia][:, None]
        s2, e2 = b["start"].to_numpy()[jb][None, :], b["end"].to_numpy()[jb][None, :]
        hit = (s1 <= e2) & (s2 <= e1)
        for x, y in zip(*np.nonzero(hit)):
            ov = min(e1[x, 0], e2[0, y]) - max(s1[x, 0], s2[0, y]) + 1
            pairs.append((ia[x], jb[y], ov))
    return pairs


def measure(calls: pd.DataFrame, cnvr: pd.DataFrame, integer_calls: pd.DataFrame | None,
            truth_regions: pd.DataFrame, truth: pd.DataFrame) -> dict:
    """The measures described in the module docstring for one caller."""
    calls = calls.reset_index(drop=True)
    pairs = _overlap_pairs(truth, calls, "sample", "sampleName")
    truth_dir = np.sign(truth["CN"].to_numpy() - NORMAL_CN)
    call_dir = np.sign(calls["mean"].to_numpy(dtype=float))
    t_hit = np.zeros(len(truth), bool)
    c_hit = np.zeros(len(calls), bool)
    t_hit_dir = np.zeros(len(truth), bool)
    c_hit_dir = np.zeros(len(calls), bool)
    best: dict[int, tuple[int, int]] = {}
    for i, j, ov in pairs:
        t_hit[i] = c_hit[j] = True
        if truth_dir[i] == call_dir[j]:
            t_hit_dir[i] = c_hit_dir[j] = True
        if i not in best or ov > best[i][1]:
            best[i] = (j, ov)
    n_t, n_c = len(truth), len(calls)
    sens, prec = t_hit.mean() if n_t else np.nan, c_hit.mean() if n_c else np.nan
    sens_d, prec_d = t_hit_dir.mean() if n_t else np.nan, c_hit_dir.mean() if n_c else np.nan
    out = {
        "true sample-CNVs": n_t, "called CNVs": n_c,
        "sensitivity": sens, "precision": prec, "F1": _f1(sens, prec),
        "sensitivity (direction)": sens_d, "precision (direction)": prec_d, "F1 (direction)": _f1(sens_d, prec_d),
    }
    for cn in sorted(truth["CN"].unique()):
        sel = truth["CN"].to_numpy() == cn
        out[f"sensitivity CN{cn} (n={int(sel.sum())})"] = t_hit[sel].mean()
    if integer_calls is not None:
        labels = integer_calls.reset_index(drop=True)["CN"].astype(str).to_numpy()
        exact = [labels[j] == f"CN{truth['CN'].iat[i]}" for i, (j, _) in best.items()]
        out["integer CN exact (matched)"] = float(np.mean(exact)) if exact else np.nan
    reg_pairs = _overlap_pairs(truth_regions, cnvr.reset_index(drop=True), None, None)
    r_hit = np.zeros(len(truth_regions), bool)
    cr_hit = np.zeros(len(cnvr), bool)
    for i, j, _ in reg_pairs:
        r_hit[i] = cr_hit[j] = True
    out["CNV regions"] = len(cnvr)
    out["region sensitivity"] = r_hit.mean() if len(truth_regions) else np.nan
    out["region precision"] = cr_hit.mean() if len(cnvr) else np.nan
    return out


def _f1(s: float, p: float) -> float:
    return 2 * s * p / (s + p) if s + p > 0 else 0.0


def _fmt(v) -> str:
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, float) and np.isnan(v):
        return "-"
    return f"{v:.3f}"


def render(columns: dict[str, dict], markdown: bool) -> str:
    names = list(columns)
    rows = list(next(iter(columns.values())))
    if markdown:
        lines = ["| measure | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
        lines += ["| " + r + " | " + " | ".join(_fmt(columns[n].get(r, np.nan)) for n in names) + " |" for r in rows]
        return "\n".join(lines)
    w = max(len(r) for r in rows) + 2
    lines = ["".ljust(w) + "".join(n.rjust(24) for n in names)]
    lines += [r.ljust(w) + "".join(_fmt(columns[n].get(r, np.nan)).rjust(24) for n in names) for r in rows]
    return "\n".join(lines)


def reciprocal(a: pd.DataFrame, b: pd.DataFrame, share: float = 0.5) -> tuple[int, int]:
    """(CNVs of ``a`` matched by a CNV of ``b`` of the same sample with ``share`` reciprocal overlap, len(a))."""
    hit = 0
    for c in a.itertuples():
        o = b[(b.sampleName == c.sampleName) & (b.seqnames == c.seqnames)]
        ov = np.minimum(o.end, c.end) - np.maximum(o.start, c.start) + 1
        hit += bool(((ov >= share * (c.end - c.start + 1)) & (ov >= share * (o.end - o.start + 1))).any())
    return hit, len(a)


def casemode_report(seeds=(1, 2, 3), n_samples: int = 40, held_out: int | None = None) -> None:
    """Frozen vs refit vs truth, one held-out sample at a time (module docstring), per seed and pooled;
    ``held_out``: only the first that many samples of each cohort are held out (default all)."""
    from gcnmops.data import make_count_data
    from gcnmops.example import example_cohort

    fr_all, rf_all, truths, labels = [], [], [], []
    print(f"case mode, cohorts of {n_samples} samples, each held out against the other {n_samples - 1}:")
    print("| seed | CN labels frozen == refit | refit's CNVs found by frozen | frozen's CNVs found by refit |")
    print("| --- | --- | --- | --- |")
    for seed in seeds:
        data, truth = example_cohort(5000, n_samples, seed=seed)
        same = total = 0
        fr_seed, rf_seed = [], []
        for k in range(n_samples if held_out is None else held_out):
            others = [j for j in range(n_samples) if j != k]
            ref = gcnmops.build_reference(make_count_data(data.counts[:, others],
                                                          [data.sample_names[j] for j in others], data.ranges),
                                          backend="cpu")
            one = make_count_data(data.counts[:, [k]], [data.sample_names[k]], data.ranges, min_samples=1)
            fr = gcnmops.call_samples(one, ref, "frozen", backend="cpu")
            rf = gcnmops.call_samples(one, ref, "refit", backend="cpu")
            same += int((fr.cn_index == rf.cn_index).sum())
            total += fr.cn_index.size
            tag = f"{seed}:"
            fr_seed.append(fr.cnvs.assign(sampleName=tag + fr.cnvs.sampleName.astype(str)))
            rf_seed.append(rf.cnvs.assign(sampleName=tag + rf.cnvs.sampleName.astype(str)))
        fr, rf = pd.concat(fr_seed), pd.concat(rf_seed)
        h1, n1 = reciprocal(rf, fr)
        h2, n2 = reciprocal(fr, rf)
        print(f"| {seed} | {same / total:.5f} ({total:,} pairs) | {h1}/{n1} = {h1 / max(n1, 1):.3f} | "
              f"{h2}/{n2} = {h2 / max(n2, 1):.3f} |")
        labels.append((same, total))
        fr_all.append(fr)
        rf_all.append(rf)
        held = set(data.sample_names[:held_out]) if held_out is not None else set(data.sample_names)
        truths.append(truth[truth.sample_name.isin(held)].assign(sample=f"{seed}:" + truth.sample_name, CN=truth.CN))
    fr, rf, truth = pd.concat(fr_all), pd.concat(rf_all), pd.concat(truths)
    regions = truth[["seqnames", "start", "end"]].drop_duplicates()
    h1, n1 = reciprocal(rf, fr)
    h2, n2 = reciprocal(fr, rf)
    same, total = (sum(v) for v in zip(*labels))
    print(f"| all | {same / total:.5f} ({total:,} pairs) | {h1}/{n1} = {h1 / max(n1, 1):.3f} | "
          f"{h2}/{n2} = {h2 / max(n2, 1):.3f} |")
    print("(CNVs matched: same sample and chromosome, 50% reciprocal overlap)")
    cols = {name: measure(c, c.head(0).assign(), None, regions, truth.drop(columns="sample_name"))
            for name, c in (("frozen", fr), ("refit", rf))}
    print(render({n: {k: v for k, v in col.items() if "region" not in k and k != "CNV regions"}
                  for n, col in cols.items()}, markdown=True))


def _found(calls: pd.DataFrame, t) -> bool:
    """Whether a call of ``calls`` overlaps the planted CNV ``t`` (same sample and chromosome)."""
    return bool(((calls.sampleName == t.sample_name) & (calls.seqnames == t.seqnames) & (calls.start <= t.end)
                 & (calls.end >= t.start)).any())


def sex_report(seeds=(1, 2, 3, 4, 5), n_samples: int = 40) -> None:
    """cn_mops vs sex_aware_cn_mops on mixed-sex cohorts (module docstring), per seed and pooled. The planted
    CNVs found are also split by kind: a gain of one copy on a diploid chromosome (CN3 on an autosome or a
    female's X: a fold change of 1.5, log2 0.585, just above cn.mops's upperThreshold 0.5, which a segment mean
    reaches only where nearly every region's posterior is on the gain) against every other kind."""
    from gcnmops.casemode.simulate import mixed_sex_cohort

    print(f"mixed-sex cohorts of {n_samples} samples ({n_samples - n_samples // 2} female, {n_samples // 2} male):")
    print("| seed | caller | false chrX/chrY CNVs in males | planted chrX/chrY found | of them single-copy gains "
          "of a diploid | other kinds | planted autosomal found | of them single-copy gains | other kinds |")
    print("| --- |" + " --- |" * 8)
    pooled: dict[str, np.ndarray] = {}
    for seed in seeds:
        data, truth, sexes = mixed_sex_cohort(n_samples, seed=seed)
        males = {n for n, s in zip(data.sample_names, sexes) if s == "male"}
        sex_chrom = truth.seqnames.isin(["chrX", "chrY"]).to_numpy()
        gain1 = ((truth.CN == 3) & ~((truth.sex == "male") & truth.seqnames.isin(["chrX", "chrY"]))).to_numpy()
        for name, res in (("cn_mops", gcnmops.cn_mops(data, backend="cpu")),
                          ("sex_aware", gcnmops.sex_aware_cn_mops(data, backend="cpu"))):
            c = res.cnvs[res.cnvs.seqnames.isin(["chrX", "chrY"])]
            on_sex = truth[sex_chrom]
            false = sum(not ((on_sex.sample_name == r.sampleName) & (on_sex.seqnames == r.seqnames)
                             & (on_sex.start <= r.end) & (on_sex.end >= r.start)).any()
                        for r in c.itertuples() if r.sampleName in males)
            hit = np.array([_found(res.cnvs, t) for t in truth.itertuples()])
            counts = np.array([false] + [v for sel in (sex_chrom, ~sex_chrom) for part in (sel, sel & gain1,
                                                                                            sel & ~gain1)
                                         for v in (int(hit[part].sum()), int(part.sum()))])
            pooled[name] = pooled.get(name, 0) + counts
            print(f"| {seed} | {name} | " + _sex_cells(counts) + " |")
    for name, counts in pooled.items():
        print(f"| all | {name} | " + _sex_cells(counts) + " |")


def _sex_cells(counts: np.ndarray) -> str:
    cells = [str(int(counts[0]))]
    for i in range(1, len(counts), 2):
        hit, n = int(counts[i]), int(counts[i + 1])
        cells.append(f"{hit}/{n}" + (f" = {hit / n:.3f}" if n else ""))
    return " | ".join(cells)


def main() -> None:
    if sys.argv[1:2] == ["spikein"]:
        from spikein import main as spikein_main  # benchmarks/spikein.py: real counts with spiked CNVs

        spikein_main(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--casemode", action="store_true", help="frozen vs refit vs truth (case mode)")
    ap.add_argument("--sex", action="store_true", help="cn.mops vs sex-aware on a mixed-sex cohort")
    ap.add_argument("--seeds", type=lambda t: [int(v) for v in t.split(",")],
                    help="--casemode/--sex: simulation seeds, comma separated (default 1,2,3 / 1,2,3,4,5)")
    ap.add_argument("--held-out", type=int, help="--casemode: hold out only the first N samples of each cohort "
                                                 "(default all 40)")
    ap.add_argument("--truth", type=Path, default=TRUTH)
    ap.add_argument("--dnacopy", action="store_true", help="also gcnmops with seg_algorithm='DNAcopy'")
    ap.add_argument("--seed", type=int, default=1, help="jitter seed of the DNAcopy run")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.casemode or args.sex:
        if args.casemode:
            casemode_report(*([args.seeds] if args.seeds else []), held_out=args.held_out)
        if args.sex:
            sex_report(*([args.seeds] if args.seeds else []))
        return
    if not (GOLDEN_DIR / CASE / "manifest.json").exists():
        sys.exit(f"golden case {CASE} not found under {GOLDEN_DIR} (set GCNMOPS_GOLDEN_DIR)")
    truth_regions, truth = load_truth(args.truth)
    data = load_input()
    columns: dict[str, dict] = {}

    t0 = time.perf_counter()
    ours = gcnmops.cn_mops(data, backend="cpu")
    ours_int = gcnmops.calc_integer_copy_numbers(ours)
    t_ours = time.perf_counter() - t0
    columns["gcnmops (fast)"] = measure(ours.cnvs, ours.cnvr, ours_int.cnvs, truth_regions, truth)

    gold_cnvs, gold_cnvr = table(CASE, "cnvs"), table(CASE, "cnvr")
    gold_int = table(CASE, "cnvs_integer") if "cnvs_integer" in manifest(CASE)["tables"] else None
    columns["cn.mops 1.53 (golden)"] = measure(gold_cnvs, gold_cnvr, gold_int, truth_regions, truth)

    same = (len(gold_cnvs) == len(ours.cnvs)
            and (ours.cnvs[["seqnames", "start", "end", "sampleName"]].astype(str).to_numpy()
                 == gold_cnvs[["seqnames", "start", "end", "sampleName"]].astype(str).to_numpy()).all())
    t_dna = None
    if args.dnacopy:
        t0 = time.perf_counter()
        dna = gcnmops.cn_mops(data, backend="cpu", seg_algorithm="DNAcopy", seed=args.seed)
        dna_int = gcnmops.calc_integer_copy_numbers(dna)
        t_dna = time.perf_counter() - t0
        columns[f"gcnmops DNAcopy (seed {args.seed})"] = measure(dna.cnvs, dna.cnvr, dna_int.cnvs, truth_regions,
                                                                 truth)
    print(f"XRanges ({len(data)} regions x {len(manifest(CASE)['sampleNames'])} samples), truth {args.truth.name}: "
          f"{len(truth_regions)} CNV regions, {len(truth)} true sample-CNVs")
    print(render(columns, args.markdown))
    print(f"gcnmops calls identical to cn.mops's (coordinates and samples): {same}; "
          f"gcnmops fast pipeline {t_ours:.1f} s" + (f", DNAcopy pipeline {t_dna:.1f} s" if t_dna else ""))
    if args.json:
        args.json.write_text(json.dumps({k: {m: (None if isinstance(v, float) and np.isnan(v) else float(v))
                                             for m, v in col.items()} for k, col in columns.items()}, indent=1))


if __name__ == "__main__":
    main()
