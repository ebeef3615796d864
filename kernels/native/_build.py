"""cffi build script for ``tsar.kernels._native`` (used by setup.py's ``cffi_modules``).

Compiled with ``-O3 -mavx2 -mfma`` (the package needs an AVX2 CPU); AVX-512 variants are separate
functions built with ``__attribute__((target(...)))`` and chosen at run time from CPUID.
"""

from __future__ import annotations

import os
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
SOURCES = ["dispatch.c", "quant.c", "bandwidth.c", "peak.c", "tl2.c", "tl1.c", "i2s.c", "dense.c", "int2.c",
           "trit5.c", "tq.c", "iqbn.c"]
CFLAGS = ["-O3", "-mavx2", "-mfma", "-std=gnu11", "-fno-strict-aliasing"]


def _rel(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


ffibuilder = FFI()
ffibuilder.cdef((HERE / "api.h").read_text())
ffibuilder.set_source(
    "tsar.kernels._native",
    '#include "api.h"',
    sources=[_rel(HERE / s) for s in SOURCES],
    include_dirs=[_rel(HERE)],
    extra_compile_args=CFLAGS,
    libraries=["pthread"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
