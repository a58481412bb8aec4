"""The only code that knows the stage order. ``plan`` (RunPlan: a run decided once, cn.mops's rules between the
stages, each written once) and ``stages`` (normalize -> model -> segment and call on a block of regions:
``run_block``); the paths built on them choose blocks, placement and where results go: ``cnmops`` (cn_mops, the
whole matrix in memory), ``family`` (exome, haplo, reference, single), ``resident_gpu`` (the GPU placement of the
normalization and model: device-resident), ``streaming`` (a count store chromosome by chromosome), ``methods``
(the family by name) and ``run`` (run -> integer copy numbers -> files, for the CLI and batch)."""
