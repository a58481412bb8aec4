"""Which CUDA pieces are installed and whether they agree (``gcnmops info``): the driver's CUDA version, CuPy's
wheel (``cupy-cuda12x`` / ``cupy-cuda13x``), numba-cuda and the CUDA bindings and runtime its ``[cu12]`` /
``[cu13]`` extra brings; what to install when they disagree (the extras ``gcnmops[cuda12]`` and
``gcnmops[cuda13]``). Read from the packages' metadata and the driver library alone: nothing is imported or
started on the GPU."""
from __future__ import annotations

import ctypes
import ctypes.util
import sys
from dataclasses import dataclass, field
from importlib import metadata

from .probe import driver_library_loads

#: the CUDA major versions that gcnmops has an extra for (gcnmops[cuda12], gcnmops[cuda13])
EXTRAS = (12, 13)
#: the packages each major version's runtime and compiler come in (numba-cuda[cuNN] installs them)
_RUNTIME = {12: ("nvidia-cuda-runtime-cu12", "nvidia-cuda-nvrtc-cu12"), 13: ("nvidia-cuda-runtime", "nvidia-cuda-nvrtc")}


@dataclass
class CudaStack:
    """What is installed: ``driver`` the CUDA version the driver supports ((major, minor); None: no driver),
    ``driver_release`` the NVIDIA kernel module's version where readable, ``packages`` name -> version of the
    CUDA-related Python packages present; ``inactive``: why an installed numba-cuda is not numba's CUDA target
    (``probe.why_not_numba_cuda``; None: it is, or it was not asked)."""

    driver: tuple[int, int] | None
    driver_release: str | None = None
    packages: dict[str, str] = field(default_factory=dict)
    inactive: str | None = None

    def major(self, name: str) -> int | None:
        version = self.packages.get(name)
        try:
            return int(version.split(".")[0]) if version else None
        except ValueError:
            return None

    @property
    def cupy(self) -> list[int]:
        """The CUDA major versions of the CuPy wheels installed (more than one is a conflict)."""
        return [m for m in EXTRAS if f"cupy-cuda{m}x" in self.packages]

    @property
    def bindings(self) -> int | None:
        """The CUDA major version numba-cuda runs on: that of cuda-bindings (its [cu12]/[cu13] extra)."""
        return self.major("cuda-bindings")

    @property
    def runtime(self) -> list[int]:
        """The CUDA major versions whose runtime packages (pip wheels) are installed."""
        return [m for m, names in _RUNTIME.items() if names[0] in self.packages and
                (m != 13 or (self.major(names[0]) or 0) >= 13)]


def driver_cuda_version() -> tuple[int, int] | None:
    """The CUDA version the installed NVIDIA driver supports (cuDriverGetVersion; needs no GPU context), or None
    without a driver library."""
    if not driver_library_loads():
        return None
    name = "libcuda.so.1" if sys.platform.startswith("linux") else ctypes.util.find_library("cuda") or "nvcuda"
    try:
        lib = ctypes.CDLL(name)
        version = ctypes.c_int()
        if lib.cuDriverGetVersion(ctypes.byref(version)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return version.value // 1000, version.value % 1000 // 10


def _driver_release() -> str | None:
    try:
        with open("/proc/driver/nvidia/version") as f:
            words = f.readline().split()
    except OSError:
        return None
    return next((w for w in words if w[:1].isdigit() and w.count(".") >= 1), None)


def installed() -> CudaStack:
    """The CUDA stack of this machine and environment."""
    names = ["numba", "numba-cuda", "cuda-bindings", "cuda-python", "cuda-core", "cuda-toolkit", *(f"cupy-cuda{m}x" for m in EXTRAS),
             *(n for pair in _RUNTIME.values() for n in pair), "nvidia-nvjitlink-cu12", "nvidia-nvjitlink"]
    packages = {}
    for name in names:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return CudaStack(driver_cuda_version(), _driver_release(), packages)


def extra_for(driver: tuple[int, int] | None) -> int | None:
    """The newest CUDA major version gcnmops has an extra for that the driver supports (None: none)."""
    if driver is None:
        return None
    return max((m for m in EXTRAS if m <= driver[0]), default=None)


def advice(stack: CudaStack) -> list[str]:
    """What to install or remove so that the driver, CuPy and numba-cuda agree; empty when they do."""
    if stack.driver is None:
        if stack.cupy or stack.bindings:
            return ["no NVIDIA driver found: the GPU packages cannot be used here (runs use the CPU backend)"]
        return []
    want = extra_for(stack.driver)
    driver = f"{stack.driver[0]}.{stack.driver[1]}"
    if want is None:
        return [f"the NVIDIA driver supports CUDA {driver} only; gcnmops's GPU backend needs CUDA 12 or later: update "
                "the driver"]
    fix = f"pip install 'gcnmops[cuda{want}]'"
    out = []
    if len(stack.cupy) > 1:
        out.append(f"several CuPy wheels are installed ({', '.join(f'cupy-cuda{m}x' for m in stack.cupy)}): they "
                   f"overwrite each other; pip uninstall {' '.join(f'cupy-cuda{m}x' for m in stack.cupy if m != want)}")
    too_new = [f"{what} for CUDA {m}" for what, ms in (("CuPy", stack.cupy), ("numba-cuda's bindings",
                                                                              [stack.bindings] if stack.bindings else []))
               for m in ms if m > stack.driver[0]]
    if too_new:
        remove = " ".join(f"cupy-cuda{m}x" for m in stack.cupy if m > stack.driver[0])
        out.append(f"{' and '.join(too_new)}, but the driver supports CUDA {driver}: "
                   f"{f'pip uninstall {remove}, then ' if remove else ''}{fix}")
    if len(stack.cupy) == 1 and stack.bindings and stack.cupy[0] != stack.bindings:
        out.append(f"CuPy is built for CUDA {stack.cupy[0]} but numba-cuda runs on CUDA {stack.bindings}: they "
                   f"disagree; pip uninstall cupy-cuda{stack.cupy[0]}x, then {fix}")
    if not stack.cupy or "numba-cuda" not in stack.packages or not stack.bindings:
        missing = [n for n, ok in (("CuPy", stack.cupy), ("numba-cuda", "numba-cuda" in stack.packages),
                                   ("the CUDA bindings", stack.bindings)) if not ok]
        out.append(f"for the GPU backend ({', '.join(missing)} missing): {fix}")
    if stack.inactive:
        out.append(stack.inactive)
    return out


def report(stack: CudaStack | None = None) -> list[str]:
    """``gcnmops info``'s lines on CUDA: the driver, the packages found, and ``advice`` (with this process's
    numba-cuda asked whether it is active, where ``stack`` is not given: that imports numba.cuda)."""
    if stack is None:
        from dataclasses import replace

        from .probe import why_not_numba_cuda

        stack = replace(installed(), inactive=why_not_numba_cuda())
    lines = ["CUDA driver: " + ("none found" if stack.driver is None else
                                f"supports CUDA {stack.driver[0]}.{stack.driver[1]}"
                                + (f" (NVIDIA driver {stack.driver_release})" if stack.driver_release else ""))]
    shown = {k: v for k, v in stack.packages.items() if k != "numba"}
    lines.append("CUDA packages: " + (", ".join(f"{k} {v}" for k, v in shown.items()) or "none"))
    if stack.runtime:
        lines.append("CUDA runtime (pip wheels): " + ", ".join(f"CUDA {m}" for m in stack.runtime))
    fixes = advice(stack)
    if fixes:
        lines += [f"  to do: {line}" for line in fixes]
    elif stack.driver is not None:
        lines.append(f"  the driver, CuPy and numba-cuda agree (CUDA {stack.bindings}): gcnmops[cuda{stack.bindings}]")
    return lines


__all__ = ["CudaStack", "EXTRAS", "advice", "driver_cuda_version", "extra_for", "installed", "report"]
