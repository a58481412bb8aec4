"""Every GPU tunable in one place: the block sizes, grid caps, local-work limits and compile choices of each family
of kernels, each with what it means and its unit.

Families were tuned (or sized) on their own, so a quantity may have different values in two families: the name
says which kernels read it. A ``*_SIM`` value replaces its namesake in numba's CUDA simulator, which runs every GPU
thread as a Python thread (small blocks and grids keep the tests fast). Imports nothing: the stage drivers read
these at import.
"""
from __future__ import annotations

# ------------------------------------------------------------------------ the EM (model/gpu.py), one thread per region
#: threads per block (the fastest measured, benchmarks/RESULTS.md)
EM_THREADS_PER_BLOCK = 256
#: blocks per SM of a launch with a global scratch (a grid-stride loop; 2, 4 and 16 measured alike)
EM_BLOCKS_PER_SM = 4
#: samples: the per-sample work buffers are per-thread local arrays up to this many (a global scratch beyond)
EM_LOCAL_WORK_MAX = 128
#: classes: the class loops are unrolled (state in registers) up to this many
EM_UNROLL_MAX_CLASSES = 16
#: registers per thread handed to the compiler as its cap (the fastest measured, benchmarks/RESULTS.md)
EM_MAX_REGISTERS = 128

# ------------------ the E-step against fixed parameters (model/estep.py): one thread per region, the whole matrix
#: threads per block (fewer for a matrix of fewer regions: whole warps)
ESTEP_THREADS_PER_BLOCK = 128
#: grid cap in blocks per SM (a grid-stride loop beyond)
ESTEP_BLOCKS_PER_SM = 32
#: samples: the INI buffer is a per-thread local array up to this many (a thread-fastest global scratch beyond)
ESTEP_LOCAL_WORK_MAX = 64

# -------------------------------------------------- the integer copy numbers' refit (calls/integer.py), on the GPU
#: CNVs x samples: refits of fewer cells run on the CPU (the same EM, the same doubles), where they take
#: milliseconds against a GPU fit's fixed cost of a few tenths of a second (device set-up, copies, synchronizations)
INTEGER_GPU_MIN_CELLS = 1 << 22

# ---------------------------------------------- the one-step model (model/onestep_gpu.py): as the E-step's launch
#: threads per block (fewer for a matrix of fewer regions: whole warps)
ONESTEP_THREADS_PER_BLOCK = 128
#: grid cap in blocks per SM (a grid-stride loop beyond)
ONESTEP_BLOCKS_PER_SM = 16
#: samples: the INI buffer is a per-thread local array up to this many (a thread-fastest global scratch beyond)
ONESTEP_LOCAL_WORK_MAX = 128

# ---------------------------------------------------------------- normalization (normalization/device_kernels.py)
#: threads per block of the sums kernel: the size of its shared arrays, a power of two
NORMALIZE_SUMS_THREADS_PER_BLOCK = 128
NORMALIZE_SUMS_THREADS_PER_BLOCK_SIM = 32
#: rows each thread of the sums kernel reads (a tile: threads per block x this many consecutive rows)
NORMALIZE_ROWS_PER_THREAD = 8
#: threads per block of the one-thread-per-row kernels (ratios, scale)
NORMALIZE_ROW_THREADS_PER_BLOCK = 256
NORMALIZE_ROW_THREADS_PER_BLOCK_SIM = 32
#: grid cap in blocks of the one-thread-per-row kernels (their threads loop over the rows beyond)
NORMALIZE_ROW_MAX_BLOCKS = 4096
NORMALIZE_ROW_MAX_BLOCKS_SIM = 2

# ------------------------------------------------------- segmentation (segmentation/gpu.py, device_kernels.py)
#: threads per block of the candidate mask and statistic kernels (one thread per position)
SEGMENT_THREADS_PER_BLOCK = 128
SEGMENT_THREADS_PER_BLOCK_SIM = 32
#: grid cap in blocks of the candidate mask kernel (a grid-stride loop beyond)
SEGMENT_MASK_MAX_BLOCKS = 4096
#: grid cap in blocks of the statistic kernel (a grid-stride loop beyond)
SEGMENT_STAT_MAX_BLOCKS = 1 << 20
#: threads per block of the prefix-sums kernel (one thread per vector)
SEGMENT_PREFIX_THREADS_PER_BLOCK = 1
#: grid cap in blocks of the prefix-sums kernel: the most vectors it sums (it has no grid-stride loop)
SEGMENT_PREFIX_MAX_BLOCKS = 1 << 20
#: threads per block of the kernels with one thread per vector or per segment (few threads, long sequential
#: loops: small blocks spread them over every multiprocessor)
SEGMENT_SPREAD_THREADS_PER_BLOCK = 32
#: grid cap in blocks of those kernels (a grid-stride loop beyond)
SEGMENT_SPREAD_MAX_BLOCKS = 1 << 16
#: threads of each segment's block in the medians' kernel (one block per segment)
SEGMENT_MEDIAN_THREADS_PER_BLOCK = 256
SEGMENT_MEDIAN_THREADS_PER_BLOCK_SIM = 8
#: grid cap in blocks of the medians' kernel (a grid-stride loop over the segments beyond)
SEGMENT_MEDIAN_MAX_BLOCKS = 1 << 16
#: vectors up to this long are prepared on the GPU, one thread each; longer ones on the host, whose cores run the
#: sequential sums (R's mean, Welford's variance) several times faster than one GPU thread
DEVICE_PREPARE_MAX_ROWS = 200_000

# ------------------------------------------------------------ the sample QC's spreads (calls/spreads_gpu.py)
#: threads per block of the spreads kernel (one block per column): the first SPREAD_ADDERS add a tile's terms in
#: the values' order while the others compute the next tile's
SPREAD_THREADS_PER_BLOCK = 256
SPREAD_THREADS_PER_BLOCK_SIM = 3
SPREAD_ADDERS = 32
SPREAD_ADDERS_SIM = 1
#: values of a column per tile (two tiles of three float64 terms each in shared memory: 24 KiB a block)
SPREAD_TILE = 512
SPREAD_TILE_SIM = 8
#: fraction of the free device memory a group of columns may take (four copies of each column)
SPREAD_MEMORY_FRACTION = 0.5
#: the same while the run's segmentation shares the device (``run_and_write`` makes the spreads beside it)
SPREAD_BESIDE_FRACTION = 0.125

# ------------------------------------------------------------------------ several blocks per device (host threads)
# Two host threads per GPU overlap one block's (or pass's) host passes with another's device stages. Two GATK-SV
# passes at once on one H100 once gave other calls than one at a time (benchmarks/RESULTS.md, sixth and seventh
# sessions): the non-resident model's streams did not wait for the model's constants, copied asynchronously on the
# default stream both threads share. Every backend stream now waits for the thread's default-stream work
# (cuda.runtime.ordered_stream), and two passes per H100 gave the one-at-a-time bytes in every run since (eighth
# session). Chromosome blocks gained little from a second thread (4 H100s: 2.78 s with one per GPU, 2.76 s with
# two): one per GPU there.
#: host threads per GPU running chromosome blocks (pipeline/multigpu.py)
BLOCKS_PER_DEVICE = 1
#: GATK-SV passes each GPU runs at a time (gatksv/cnmops.py)
PASSES_PER_DEVICE = 2
