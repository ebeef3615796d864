"""Machine code as assembler ``.byte`` lines, encoded by iced-x86: the form in which code that
keystone cannot assemble (AVX-512 / EVEX) enters a source for :mod:`tsar.isa.assembler`.

Kept beneath sim and kernels so both may use it (the native harnesses' register spills, the
512-bit T-SAR kernels)."""

from __future__ import annotations

import iced_x86 as iced


def byte_line(ins: iced.Instruction) -> str:
    """``ins`` encoded with iced-x86, as an assembler ``.byte`` line."""
    encoder = iced.Encoder(64)
    encoder.encode(ins, 0)
    return ".byte " + ", ".join(f"{b:#04x}" for b in encoder.take_buffer())
