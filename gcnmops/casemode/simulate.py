"""A seeded, simulated mixed-sex cohort with planted CNVs on the autosomes and on chrX/chrY (tests, benchmarks).

Windows of ``window`` bp on chr1, chr2 (``n_autosomal`` regions, halved), chrX (``n_x``) and chrY (``n_y``) of
hg38, each chromosome from base 1, so that chrX's and chrY's first windows lie in PAR1 (10,001-2,781,479).
Sample k (male or female, alternating from the first, a female) has coverage c_k in [0.8, 1.2]; region r a mean
mu_r log-normal around 100 (clipped to [40, 250]); count ~ Poisson(mu_r c_k CN / 2), where the normal CN is 2 on
the autosomes and chrX's PAR, 2 (female) or 1 (male) on chrX outside it, 1 (male) on chrY outside its PAR and, on
chrY's PAR and a female's chrY, 0 with mismapped reads at 1% of a copy's rate (chrY's PAR is masked in hg38
analysis sets: its reads map to chrX). CNVs, 10-40 regions, carried by 1-4 samples each: losses of one copy or
all copies, gains of one or two (on a male's X/Y: CN0 or CN2; never on a female's chrY); a sample carries at most one
CNV per chromosome (cn.mops's fast segmentation misses a second CNV on a chromosome that holds a loss of every
copy, on autosomes as on chrX: a limit of cn.mops, not of the sex handling measured here).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..data import CountData, make_count_data
from .sex import FEMALE, MALE, PAR

#: mismapped reads on an absent chromosome, per copy's rate
ABSENT_RATE = 0.01


def mixed_sex_cohort(n_samples: int = 40, n_autosomal: int = 4000, n_x: int = 800, n_y: int = 300, seed: int = 1,
                     window: int = 25000, cnvs_per_chromosome: int = 4) -> tuple[CountData, pd.DataFrame, list[str]]:
    """(counts, truth, sexes): counts of every region x sample; truth: one row per planted CNV and carrier
    (seqnames, start, end, sample_name, CN, sex); sexes: "female"/"male" per sample."""
    rng = np.random.default_rng(seed)
    sizes = [("chr1", n_autosomal - n_autosomal // 2), ("chr2", n_autosomal // 2), ("chrX", n_x), ("chrY", n_y)]
    seqnames = np.concatenate([np.full(n, c, dtype=object) for c, n in sizes])
    pos = np.concatenate([np.arange(n, dtype=np.int64) for _, n in sizes])
    ranges = pd.DataFrame({"seqnames": seqnames, "start": pos * window + 1, "end": (pos + 1) * window})
    m = len(ranges)
    mu = np.clip(100.0 * np.exp(0.25 * rng.standard_normal(m)), 40.0, 250.0)
    cov = rng.uniform(0.8, 1.2, n_samples)
    sexes = [FEMALE if k % 2 == 0 else MALE for k in range(n_samples)]
    male = np.array([s == MALE for s in sexes])
    names = [f"S_{k + 1}" for k in range(n_samples)]

    par = np.zeros(m, dtype=bool)
    for chrom in ("X", "Y"):
        on = seqnames == f"chr{chrom}"
        for lo, hi in PAR["hg38"][chrom]:
            par |= on & (ranges["start"].to_numpy() <= hi) & (ranges["end"].to_numpy() >= lo)
    normal = np.full((m, n_samples), 2.0)
    x_np = (seqnames == "chrX") & ~par
    y_np = (seqnames == "chrY") & ~par
    normal[np.ix_(x_np, male)] = 1.0
    normal[np.ix_(y_np, male)] = 1.0
    normal[np.ix_(y_np, ~male)] = 0.0
    normal[(seqnames == "chrY") & par] = 0.0
    cn = normal.copy()

    truth = []
    offset = 0
    for chrom, n in sizes:
        lo_ok = offset + (int(np.count_nonzero(par[offset:offset + n])) if chrom in ("chrX", "chrY") else 0)
        slot = (offset + n - lo_ok) // cnvs_per_chromosome
        used: set[int] = set()  # samples with a CNV on this chromosome
        for j in range(cnvs_per_chromosome):
            length = int(rng.integers(10, 41))
            first = lo_ok + j * slot + 2 + int(rng.integers(0, max(1, slot - length - 4)))
            rows = slice(first, first + length)
            eligible = [k for k in range(n_samples) if not (chrom == "chrY" and not male[k]) and k not in used]
            carriers = rng.choice(eligible, size=min(len(eligible), int(rng.integers(1, 5))), replace=False)
            used.update(carriers.tolist())
            loss = rng.random() < 0.5
            for k in sorted(carriers.tolist()):
                base = normal[first, k]
                new = (0.0 if base == 1 or rng.random() < 1 / 3 else base - 1) if loss else base + (
                    1 if base == 1 or rng.random() < 2 / 3 else 2)
                cn[rows, k] = new
                truth.append((chrom, int(ranges["start"].iat[first]), int(ranges["end"].iat[first + length - 1]),
                              names[k], int(new), sexes[k]))
        offset += n
    lam = mu[:, None] * cov[None, :] * np.maximum(cn, ABSENT_RATE * 2) / 2.0
    counts = rng.poisson(lam).astype(np.float64)
    data = make_count_data(np.asfortranarray(counts), names, ranges, what="simulated read count matrix")
    truth = pd.DataFrame(truth, columns=["seqnames", "start", "end", "sample_name", "CN", "sex"])
    return data, truth, sexes


__all__ = ["mixed_sex_cohort"]
