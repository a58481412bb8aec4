"""The only code that knows the stage order. ``plan`` (RunPlan: a run decided once, cn.mops's rules between the
stages, each written once) and ``stages`` (normalize -> model -> segment and call on a block of regions:
``run_block``); the paths built on them choose blocks, placement and where results go: ``cnmops`` (cn_mops, the
whole matrix in memory), ``family`` (exome, haplo, reference, single), ``resident_gpu`` (the GPU placement of the
normalization and model: device-resident), ``multigpu`` (several GPUs), ``streaming`` (a count store chromosome
by chromosome), ``methods`` (the family by name), ``run`` (run -> integer copy numbers -> files, for the CLI and
batch) and ``batch`` (many experiments on GPU or CPU worker processes). ``blocks`` holds what crosses the blocks."""
