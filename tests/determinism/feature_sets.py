"""CPU feature sets one machine can emulate, as environments for a child process.

numpy, glibc, OpenBLAS and numba each choose code paths by the CPU when a process starts, and
each can be told to use fewer features than the CPU has:

* numpy: ``NPY_DISABLE_CPU_FEATURES`` names dispatch targets it must not use (its found
  targets are in ``numpy._core._multiarray_umath.__cpu_dispatch__``);
* glibc: ``GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,...`` hides features from its ``ifunc``
  selection (libm's ``exp``, ``log``, ``pow`` have FMA variants);
* OpenBLAS: ``OPENBLAS_CORETYPE`` picks a kernel family (only a regression to a matrix
  product on an output path would notice);
* numba: ``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES`` set the target LLVM compiles for,
  ``NUMBA_CACHE_DIR`` keeps each target's compiled kernels apart.

:func:`environments` gives the sets every digest must agree across: the machine as it is; no
AVX-512 (an AVX2 server); and no AVX2 or FMA either (x86-64-v2, the oldest CPU numpy 2.x
supports). On a CPU without AVX-512 the first two are the same machine.

:func:`emulator` goes further where QEMU's user-mode emulator is installed: it runs a process
on an emulated Intel Nehalem (SSE4.2, no AVX), whose ``cpuid`` every library reads as it would
on such a machine, with no setting to obey. Compiling numba's kernels under emulation would take
many minutes, so that process uses the kernels the x86-64-v2 set compiled (the same target).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

_AVX512_GLIBC = ("AVX512F", "AVX512CD", "AVX512BW", "AVX512DQ", "AVX512VL", "AVX512_VNNI",
                 "AVX512_BF16", "AVX512_FP16")


def _numpy_targets(above_baseline: bool) -> list[str]:
    """numpy's dispatch targets to disable: the AVX-512 ones, or all of them (the baseline,
    x86-64-v2, remains)."""
    from numpy._core import _multiarray_umath as umath

    targets = list(umath.__cpu_dispatch__)
    if above_baseline:
        return targets
    return [t for t in targets if "AVX512" in t or t == "X86_V4"]


def environments(cache_root: Path) -> dict[str, dict[str, str]]:
    """Per feature set, the environment of a child process (``os.environ`` plus settings).

    ``native`` keeps numba's default cache (the one ``make setup`` fills); the others compile
    into ``cache_root/<name>``.
    """
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("NPY_DISABLE_CPU", "NUMBA_CPU", "GLIBC_TUNABLES",
                                 "OPENBLAS_CORETYPE"))}
    no_avx512 = {
        "NPY_DISABLE_CPU_FEATURES": " ".join(_numpy_targets(False)),
        "GLIBC_TUNABLES": "glibc.cpu.hwcaps=" + ",".join(f"-{f}" for f in _AVX512_GLIBC),
        "OPENBLAS_CORETYPE": "Haswell",
        "NUMBA_CPU_NAME": "x86-64-v3", "NUMBA_CPU_FEATURES": "",
        "NUMBA_CACHE_DIR": str(cache_root / "x86-64-v3"),
    }
    v2 = {
        "NPY_DISABLE_CPU_FEATURES": " ".join(_numpy_targets(True)),
        "GLIBC_TUNABLES": "glibc.cpu.hwcaps=" + ",".join(
            ("-AVX2", "-FMA", "-FMA4") + tuple(f"-{f}" for f in _AVX512_GLIBC)),
        "OPENBLAS_CORETYPE": "Nehalem",
        "NUMBA_CPU_NAME": "x86-64-v2", "NUMBA_CPU_FEATURES": "",
        "NUMBA_CACHE_DIR": str(cache_root / "x86-64-v2"),
    }
    return {"native": base, "no_avx512": {**base, **no_avx512}, "x86_64_v2": {**base, **v2}}


def emulator(cache_root: Path) -> tuple[list[str], dict[str, str]] | None:
    """``(command prefix, environment)`` running a process on an emulated Nehalem CPU with
    the x86-64-v2 set's numba cache, or ``None`` without ``qemu-x86_64-static``."""
    qemu = shutil.which("qemu-x86_64-static") or shutil.which("qemu-x86_64")
    if qemu is None:
        return None
    env = environments(cache_root)["x86_64_v2"]
    for key in ("NPY_DISABLE_CPU_FEATURES", "GLIBC_TUNABLES", "OPENBLAS_CORETYPE"):
        env.pop(key)  # the emulated CPU has none of those features to disable
    return [qemu, "-cpu", "Nehalem"], env
