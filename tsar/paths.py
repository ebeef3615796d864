"""Locations of files shipped with the package (kernel sources, headers)."""

from __future__ import annotations

from pathlib import Path

import tsar.kernels

KERNELS_DIR = Path(tsar.kernels.__file__).resolve().parent


def kernel_source(name: str) -> Path:
    """Path of a shipped assembly kernel, e.g. ``kernel_source("gemv16_c2s4.s")``."""
    path = KERNELS_DIR / "asm" / name
    if not path.is_file():
        raise FileNotFoundError(f"no shipped kernel {name!r} in {path.parent}")
    return path
