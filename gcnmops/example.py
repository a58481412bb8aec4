"""A seeded, simulated read-count cohort with planted CNVs (in the spirit of cn.mops's XRanges).

Every random number comes from ``Generator(PCG64(seed)).random()`` (uniform doubles, whose stream
numpy keeps fixed) and is transformed here with Python's ``math`` functions, so the cohort does not
depend on numpy's version or on its distribution algorithms.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .data import CountData, make_count_data

#: Per-region mean counts are log-normal around this value.
BASE_MEAN = 100.0
_LOG_SD = 0.25
_MEAN_RANGE = (40.0, 250.0)  # keeps every Poisson mean (<= 250 * 1.2 * 2) well inside exp()'s range
_COVERAGE_RANGE = (0.8, 1.2)
_CNV_LENGTH = (10, 60)
_MAX_CARRIERS = 10
_GAP = 2  # normal regions kept on either side of a CNV


def example_cohort(
    n_regions: int = 5000,
    n_samples: int = 40,
    seed: int = 1,
    window: int = 25000,
    *,
    n_cnvs: int = 15,
) -> tuple[CountData, pd.DataFrame]:
    """Simulate Poisson read counts of ``n_regions`` windows x ``n_samples`` samples with planted CNVs.

    Regions: windows of ``window`` bp, the first half on "chr1", the rest on "chr2" (1-based closed
    coordinates). Sample k has coverage factor c_k in [0.8, 1.2]; region r a mean mu_r log-normal
    around 100 (clipped to [40, 250]); count ~ Poisson(mu_r * c_k * CN / 2), CN = 2 outside CNVs.
    About ``n_cnvs`` CNVs (fewer if the genome is too short), each 10-60 regions long within one
    chromosome and separate from the others, carried by 1-10 samples: deletions give CN0 or CN1,
    duplications CN3 or CN4 (per carrier).

    Returns ``(counts, truth)``: a :class:`CountData` with samples "S_1".."S_N" and a DataFrame with
    one row per planted CNV and carrier: ``seqnames, start, end, sample_name, CN``.
    """
    if n_regions < 1 or n_samples < 2 or window < 1 or n_cnvs < 0:
        raise ValueError("need n_regions >= 1, n_samples >= 2, window >= 1 and n_cnvs >= 0")
    rng = np.random.Generator(np.random.PCG64(seed))

    # chromosomes and coordinates
    n1 = n_regions - n_regions // 2
    chrom_sizes = [("chr1", n1), ("chr2", n_regions - n1)]
    chrom_sizes = [(c, n) for c, n in chrom_sizes if n > 0]
    seqnames = np.concatenate([np.full(n, c, dtype=object) for c, n in chrom_sizes])
    pos = np.concatenate([np.arange(n, dtype=np.int64) for _, n in chrom_sizes])
    ranges = pd.DataFrame({"seqnames": seqnames, "start": pos * window + 1, "end": (pos + 1) * window})

    # region means (log-normal, Box-Muller) and sample coverages
    u = rng.random((n_regions, 2))
    mu = np.array(
        [BASE_MEAN * math.exp(_LOG_SD * math.sqrt(-2.0 * math.log(1.0 - a)) * math.cos(2.0 * math.pi * b))
         for a, b in u.tolist()],
        dtype=np.float64,
    )
    mu = np.clip(mu, *_MEAN_RANGE)
    lo, hi = _COVERAGE_RANGE
    coverage = lo + (hi - lo) * rng.random(n_samples)
    sample_names = [f"S_{k + 1}" for k in range(n_samples)]

    # CNVs: one per slot; slots split each chromosome evenly
    per_chrom = _cnvs_per_chromosome([n for _, n in chrom_sizes], n_cnvs)
    total = sum(per_chrom)
    u_cnv = rng.random((max(total, 1), 4))
    u_pick = rng.random((max(total, 1), n_samples))
    u_cn = rng.random((max(total, 1), n_samples))
    factor = np.ones((n_regions, n_samples), dtype=np.float64)
    truth_rows = []
    max_carriers = min(_MAX_CARRIERS, max(1, n_samples // 2 - 1))
    c = 0
    offset = 0
    for (chrom, n), k_chrom in zip(chrom_sizes, per_chrom):
        slot = n // k_chrom if k_chrom else 0
        for j in range(k_chrom):
            ul, uo, uk, ut = u_cnv[c]
            length = min(_CNV_LENGTH[0] + int(ul * (_CNV_LENGTH[1] - _CNV_LENGTH[0] + 1)), slot - 2 * _GAP)
            first = offset + j * slot + _GAP + int(uo * (slot - 2 * _GAP - length + 1))
            rows = slice(first, first + length)
            n_carriers = 1 + int(uk * max_carriers)
            carriers = np.sort(np.argsort(u_pick[c], kind="stable")[:n_carriers])
            deletion = ut < 0.5
            for s in carriers.tolist():
                if deletion:
                    cn = 0 if u_cn[c, s] < 1.0 / 3.0 else 1
                else:
                    cn = 3 if u_cn[c, s] < 2.0 / 3.0 else 4
                factor[rows, s] = cn / 2.0
                truth_rows.append((chrom, int(ranges["start"].iat[first]), int(ranges["end"].iat[first + length - 1]),
                                   sample_names[s], cn))
            c += 1
        offset += n

    lam = mu[:, None] * coverage[None, :] * factor
    u_counts = rng.random(lam.shape)
    counts = _poisson_inversion(lam, u_counts)
    data = make_count_data(np.asfortranarray(counts), sample_names, ranges, min_samples=2,
                           what="simulated read count matrix")
    truth = pd.DataFrame(truth_rows, columns=["seqnames", "start", "end", "sample_name", "CN"])
    truth["CN"] = truth["CN"].astype(np.int64)
    return data, truth


def _cnvs_per_chromosome(sizes: list[int], n_cnvs: int) -> list[int]:
    """Split ``n_cnvs`` over chromosomes in proportion to their size; each slot must fit a CNV."""
    min_slot = _CNV_LENGTH[0] + 2 * _GAP
    total = sum(sizes)
    out = [n_cnvs * n // total for n in sizes]
    for i in range(n_cnvs - sum(out)):  # remainder to the first chromosomes
        out[i % len(out)] += 1
    return [min(k, n // min_slot) for k, n in zip(out, sizes)]


def _poisson_inversion(lam: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Poisson draws by inversion of the CDF (sequential search from 0), one uniform per draw.

    Only IEEE arithmetic and ``math.exp`` are used, so the draws are the same on every platform and
    numpy version. Means must stay below ~700 (exp(-mean) must not underflow).
    """
    shape = lam.shape
    lam = lam.ravel(order="F")
    u = u.ravel(order="F")
    if lam.size and lam.max() > 700.0:
        raise ValueError("Poisson means above 700 are not supported by this sampler")
    out = np.zeros(lam.size, dtype=np.float64)
    p = np.fromiter((math.exp(-x) for x in lam.tolist()), dtype=np.float64, count=lam.size)
    cdf = p.copy()
    idx = np.flatnonzero(u > cdf)
    lam_a, u_a, p_a, cdf_a = lam[idx], u[idx], p[idx], cdf[idx]
    k = 0
    limit = int(lam.max() + 40.0 * math.sqrt(lam.max()) + 40.0) if lam.size else 0
    while idx.size and k < limit:
        k += 1
        p_a = p_a * lam_a / k
        cdf_a = cdf_a + p_a
        out[idx] = k
        go = u_a > cdf_a
        if not go.all():
            idx, lam_a, u_a, p_a, cdf_a = idx[go], lam_a[go], u_a[go], p_a[go], cdf_a[go]
    return out.reshape(shape, order="F")


__all__ = ["example_cohort"]
