"""Stage 1, normalization: cn.mops's normalizeChromosomes / normalizeGenome on the CPU (cpu) and on the
device (gpu), both from the same host arithmetic."""
from .cpu import normalize_chromosomes, normalize_genome, sample_coverage

__all__ = ["normalize_chromosomes", "normalize_genome", "sample_coverage"]
