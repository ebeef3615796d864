"""Architectural state the Python execution layer works on.

``zmm``: ``(EVEX_VECTOR_REGISTERS, REGISTER_BYTES)`` = ``(32, 64)`` uint8, register ``i`` in row
``i``, little-endian lanes (xmm ``i`` is the first 16 bytes of row ``i``, ymm ``i`` the first 32).
``k``: the eight opmask registers as Python ints (unsigned 64-bit). ``gpr``: one Python int
(unsigned 64-bit) per GPR, in x86 encoding order (:data:`tsar.isa.operands.GPR64`: rax, rcx, rdx,
rbx, rsp, rbp, rsi, rdi, r8..r15). ``flags``: a one-element list holding the lazy flag state of
:mod:`tsar.sim.x86.flags`. ``mem``: the guest arena.

``wide``: bits 511:256 of some register may be non-zero (an EVEX instruction was compiled, or the
caller loaded a 512-bit value). VEX and T-SAR writes zero bits 511:256 of their destination, as
silicon does; closures compiled while ``wide`` is false skip that store (the bits are known zero).
:meth:`CpuState.widen` turns it on and bumps ``generation``, which tells the engine's caches to
drop every closure compiled before (:class:`~tsar.sim.python_engine.blocks.BlockCache`).
"""

from __future__ import annotations

import numpy as np

from tsar.isa.config import EVEX_VECTOR_REGISTERS, MAX_VECTOR_BYTES, OPMASK_REGISTERS
from tsar.isa.operands import GPR64
from tsar.sim.memory import GuestMemory
from tsar.sim.x86 import flags
from tsar.sim.x86.fpenv import FpEnv

GPR_NAMES = GPR64
"""The GPRs of :attr:`CpuState.gpr`, in encoding order."""
MASK64 = (1 << 64) - 1

REGISTER_BYTES = MAX_VECTOR_BYTES
"""Bytes of one row of :attr:`CpuState.zmm`: the widest register (zmm, 512 bits)."""
YMM_BYTES = 32
"""Bytes of a ymm register (the widest VEX operand)."""


class CpuState:
    """Vector and opmask registers, GPRs, lazy flags and memory shared by all compiled instruction
    closures."""

    def __init__(self, mem: GuestMemory) -> None:
        self.mem = mem
        self.zmm = np.zeros((EVEX_VECTOR_REGISTERS, REGISTER_BYTES), np.uint8)
        self.k: list[int] = [0] * OPMASK_REGISTERS
        self.wide = False
        self.generation = 0  # bumped when closures compiled before are no longer valid
        self.gpr: list[int] = [0] * len(GPR_NAMES)
        self.flags: list[flags.FlagState] = [flags.raw(0x202)]
        self.rflags_base = 0x202  # non-arithmetic RFLAGS bits at entry
        self.fp = FpEnv()  # MXCSR
        self.trace: list[tuple[int, int, int]] | None = None  # (address, bytes, 1 = write)

    def widen(self) -> None:
        """Bits 511:256 may be live from now on (see the module docstring)."""
        if not self.wide:
            self.wide = True
            self.generation += 1

    def registers(self) -> dict[str, int]:
        return dict(zip(GPR_NAMES, self.gpr, strict=True))
