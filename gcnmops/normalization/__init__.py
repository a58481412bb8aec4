"""Stage 1, normalization: cn.mops's normalizeChromosomes / normalizeGenome on the CPU (cpu) and on the
device (gpu), both from the same host arithmetic: numba kernels (kernels), the formulas that combine their
results (factors) and the input checks (checks), which the Dask path (distributed.normalize) imports too."""
from .cpu import normalize_chromosomes, normalize_genome, sample_coverage

__all__ = ["normalize_chromosomes", "normalize_genome", "sample_coverage"]
