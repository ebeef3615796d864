"""Ternary weight formats, T-SAR kernels and native baseline kernels."""

from pathlib import Path

C_DIR = Path(__file__).resolve().parent / "c"
"""``kernels/c``: the shipped C kernels and the generated ``tsar.h`` T-SAR header."""


def kernel_c_dir() -> Path:
    """``kernels/c`` (see :data:`C_DIR`)."""
    return C_DIR
