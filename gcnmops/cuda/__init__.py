"""The CUDA runtime under every stage's GPU driver, with no cn.mops semantics: the GPU probe and backend
choice (probe), device/pinned memory, streams and host row copies (runtime), chunk plans from free device
memory (plan), the no-FMA/no-LTO kernel compiler (nofma), the one kernel cache, whose lock covers every kernel's
build and first launch on a device (kernels), every GPU tunable (config) and glibc's exp/log tables in shared
memory (tables).

Imports only ``exact`` and ``errors``; no stage package imports upward into it.
"""
