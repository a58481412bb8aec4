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

Usage: python benchmarks/accuracy.py [--dnacopy] [--seed 1] [--markdown] [--json PATH]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--truth", type=Path, default=TRUTH)
    ap.add_argument("--dnacopy", action="store_true", help="also gcnmops with seg_algorithm='DNAcopy'")
    ap.add_argument("--seed", type=int, default=1, help="jitter seed of the DNAcopy run")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
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
