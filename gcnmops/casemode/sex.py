"""Sex chromosomes: which rows are chrX/chrY outside the pseudo-autosomal regions, each sample's sex (given or
inferred from coverage), and the copy number each sex is expected to have there.

Names: a chromosome is X if its name, lower-cased and without a leading "chr", is "x" (chrX, X, chrx); Y
likewise. Pseudo-autosomal regions (PAR1, PAR2; 1-based closed, UCSC/Ensembl/GRC coordinates):

| genome | chrX PAR1 | chrX PAR2 | chrY PAR1 | chrY PAR2 |
| --- | --- | --- | --- | --- |
| hg38 (GRCh38) | 10,001-2,781,479 | 155,701,383-156,030,895 | 10,001-2,781,479 | 56,887,903-57,217,415 |
| hg19 (GRCh37) | 60,001-2,699,520 | 154,931,044-155,260,560 | 10,001-2,649,520 | 59,034,050-59,363,566 |

A region overlapping a PAR by one base or more is pseudo-autosomal: two copies in both sexes, modelled with
the autosomes. ``genome=None``: no PAR (every chrX/chrY region is sex-specific).

Inferred sex, per sample: x_ratio = mean count per non-PAR chrX region / mean count per autosomal region,
y_ratio likewise for chrY (raw counts: per-chromosome normalization would scale the sexes together). Expected:
female x 1, y 0; male x 0.5, y 0.5 (less where chrY is poorly mappable). Male iff x_ratio < 0.75; without
chrX regions, male iff y_ratio > 0.25. Where both exist and disagree (XXY, X0, a bad sample) chrX decides and
a warning names the sample: give ``sex=`` to override.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..errors import InputError

#: pseudo-autosomal regions per genome build and sex chromosome, 1-based closed
PAR = {
    "hg38": {"X": ((10001, 2781479), (155701383, 156030895)), "Y": ((10001, 2781479), (56887903, 57217415))},
    "hg19": {"X": ((60001, 2699520), (154931044, 155260560)), "Y": ((10001, 2649520), (59034050, 59363566))},
}
GENOMES = tuple(PAR) + (None,)
FEMALE, MALE = "female", "male"
#: accepted spellings of ``sex=`` values
SEX_NAMES = {"female": FEMALE, "f": FEMALE, "xx": FEMALE, "male": MALE, "m": MALE, "xy": MALE}
#: x_ratio below which a sample is male; y_ratio above which it is male
X_MALE_BELOW = 0.75
Y_MALE_ABOVE = 0.25


def sex_chromosome(name) -> str | None:
    """"X" or "Y" for a sex chromosome's name (chrX, X, chrx, ...), else None."""
    s = str(name).lower()
    s = s[3:] if s.startswith("chr") else s
    return {"x": "X", "y": "Y"}.get(s)


def check_genome(genome) -> str | None:
    if genome not in GENOMES:
        raise InputError(f"genome must be one of {', '.join(map(str, GENOMES))} (the build whose pseudo-autosomal "
                         f"regions are excluded from the sex chromosomes' special treatment); got {genome!r}.")
    return genome


def sex_rows(gr: pd.DataFrame, genome: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(x, y): (m,) bool masks of the regions of ``gr`` (seqnames, start, end) on chrX / chrY outside the PARs."""
    kind = np.array([sex_chromosome(c) for c in pd.unique(gr["seqnames"])], dtype=object)
    names = pd.unique(gr["seqnames"])
    which = pd.Series(kind, index=names).reindex(gr["seqnames"]).to_numpy()
    start, end = gr["start"].to_numpy(), gr["end"].to_numpy()
    out = []
    for chrom in ("X", "Y"):
        mask = which == chrom
        for lo, hi in (PAR[genome][chrom] if genome else ()):
            mask &= ~((start <= hi) & (end >= lo))
        out.append(mask)
    return out[0], out[1]


def autosome_rows(gr: pd.DataFrame) -> np.ndarray:
    """(m,) bool: regions on neither chrX nor chrY."""
    names = pd.unique(gr["seqnames"])
    auto = pd.Series([sex_chromosome(c) is None for c in names], index=names)
    return auto.reindex(gr["seqnames"]).to_numpy(dtype=bool)


def checked_sex(sex, sample_names: list[str]) -> list[str] | None:
    """``sex=`` as one of "female"/"male" per sample: a sequence in sample order or a mapping name -> sex; None
    stays None (infer)."""
    if sex is None:
        return None
    if isinstance(sex, str):
        raise InputError("sex must give one value per sample (a list, or a mapping sample -> sex), not one string.")
    if isinstance(sex, dict):
        missing = [s for s in sample_names if s not in sex]
        if missing:
            raise InputError(f"sex: no value for sample(s) {', '.join(missing[:5])}; give female or male for each.")
        values = [sex[s] for s in sample_names]
    else:
        values = list(sex)
        if len(values) != len(sample_names):
            raise InputError(f"sex: {len(values)} values for {len(sample_names)} samples; give one per sample.")
    return [sex_value(v, s) for s, v in zip(sample_names, values)]


def sex_value(value, sample: str) -> str:
    """"female" or "male" for one ``sex=`` value (female/male, F/M, XX/XY, any case) of ``sample``; InputError
    for anything else."""
    key = str(value).strip().lower()
    if key not in SEX_NAMES:
        raise InputError(f"sex of sample {sample}: {value!r} is not female/male (F/M, XX/XY accepted).")
    return SEX_NAMES[key]


def sample_sexes(counts: np.ndarray, gr: pd.DataFrame, genome: str | None, sample_names: list[str],
                 sex=None) -> list[dict]:
    """Per sample {"sample", "sex", "x_ratio", "y_ratio", "given"}: the given ``sex`` or the inferred one (module
    docstring); the ratios are reported either way (None where the chromosome has no regions)."""
    given = checked_sex(sex, sample_names)
    xm, ym = sex_rows(gr, genome)
    auto = autosome_rows(gr)
    auto_mean = counts[auto].mean(axis=0) if auto.any() else np.full(counts.shape[1], np.nan)
    rx = counts[xm].mean(axis=0) / auto_mean if xm.any() else np.full(counts.shape[1], np.nan)
    ry = counts[ym].mean(axis=0) / auto_mean if ym.any() else np.full(counts.shape[1], np.nan)
    out = []
    for k, name in enumerate(sample_names):
        x, y = float(rx[k]), float(ry[k])
        if given is not None:
            s = given[k]
        elif np.isfinite(x):
            s = MALE if x < X_MALE_BELOW else FEMALE
            if np.isfinite(y) and (y > Y_MALE_ABOVE) != (s == MALE):
                warnings.warn(f"Sample {name}: chrX coverage says {s} (x ratio {x:.2f}) but chrY says otherwise "
                              f"(y ratio {y:.2f}); chrX decides. Give sex= to override.", RuntimeWarning,
                              stacklevel=3)
        elif np.isfinite(y):
            s = MALE if y > Y_MALE_ABOVE else FEMALE
        else:
            raise InputError("Cannot infer the samples' sex: there are no autosomal regions, or no chrX/chrY regions "
                             "outside the pseudo-autosomal regions. Give sex= (female/male per sample).")
        out.append({"sample": name, "sex": s, "x_ratio": _finite(x), "y_ratio": _finite(y), "given": given is not None})
    return out


def _finite(v: float):
    return round(v, 6) if np.isfinite(v) else None


__all__ = ["PAR", "GENOMES", "FEMALE", "MALE", "sex_chromosome", "check_genome", "sex_rows", "autosome_rows",
           "checked_sex", "sex_value", "sample_sexes"]
