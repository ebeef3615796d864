"""Architectural state the Python execution layer works on.

``ymm``: ``(16, 32)`` uint8, register ``i`` in row ``i``, little-endian lanes (xmm ``i`` is the
first 16 bytes). ``gpr``: a list of 16 Python ints (unsigned 64-bit), in x86 encoding order
(rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8..r15). ``flags``: a one-element list holding the lazy
flag state of :mod:`tsar.sim.x86.flags`. ``mem``: the guest arena.
"""

from __future__ import annotations

import numpy as np

from tsar.isa.config import VECTOR_REGISTERS
from tsar.sim.memory import GuestMemory
from tsar.sim.x86 import flags
from tsar.sim.x86.fpenv import FpEnv

GPR_NAMES = ("rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
             "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")
MASK64 = (1 << 64) - 1

REGISTER_BYTES = 32
"""Bytes of one row of :attr:`CpuState.ymm`: the widest VEX register (ymm, 256 bits)."""


class CpuState:
    """Vector registers, GPRs, lazy flags and memory shared by all compiled instruction closures."""

    def __init__(self, mem: GuestMemory) -> None:
        self.mem = mem
        self.ymm = np.zeros((VECTOR_REGISTERS, REGISTER_BYTES), np.uint8)
        self.gpr: list[int] = [0] * 16
        self.flags: list[flags.FlagState] = [flags.raw(0x202)]
        self.rflags_base = 0x202  # non-arithmetic RFLAGS bits at entry
        self.fp = FpEnv()  # MXCSR
        self.trace: list[tuple[int, int, int]] | None = None  # (address, bytes, 1 = write)

    def registers(self) -> dict[str, int]:
        return dict(zip(GPR_NAMES, self.gpr, strict=True))
