"""Machine code that saves and restores the vector and opmask registers to and from a register
image: the native harnesses' (the host oracle's, the native engine's T-SAR stubs') one layout.

Image layout (bytes from the base register): vector register ``i`` at ``REGISTER_BYTES * i``
(zmm0..31 with AVX-512, else ymm0..15 in the low 32 bytes of each row), then the opmask
registers k0..7, 8 bytes each, at :data:`K_OFFSET` (AVX-512 only). AVX-512 moves are encoded with
iced-x86 (keystone has no AVX-512) and returned as assembler ``.byte`` lines.
"""

from __future__ import annotations

import iced_x86 as iced

from tsar.isa.bytelines import byte_line
from tsar.isa.config import EVEX_VECTOR_REGISTERS, OPMASK_REGISTERS, VECTOR_REGISTERS
from tsar.sim.platforms.detect import cpu_flags
from tsar.sim.x86.state import REGISTER_BYTES

K_OFFSET = EVEX_VECTOR_REGISTERS * REGISTER_BYTES
"""Offset of k0 in an image."""
IMAGE_BYTES = K_OFFSET + 8 * OPMASK_REGISTERS
"""Bytes of a whole image."""
HOST_AVX512 = {"avx512f", "avx512bw"} <= cpu_flags()
"""The host executes AVX-512 F and BW (``kmovq``): images hold zmm0..31 and k0..7."""


def spill_lines(base: str, avx512: bool = HOST_AVX512) -> tuple[list[str], list[str]]:
    """(lines storing the registers into the image at GPR ``base``, lines loading them back)."""
    if not avx512:
        regs = range(VECTOR_REGISTERS)
        return ([f"vmovdqu ymmword ptr [{base} + {REGISTER_BYTES * i}], ymm{i}" for i in regs],
                [f"vmovdqu ymm{i}, ymmword ptr [{base} + {REGISTER_BYTES * i}]" for i in regs])
    c, r = iced.Code, iced.Register
    gpr = getattr(r, base.upper())

    def mem(offset: int) -> iced.MemoryOperand:
        return iced.MemoryOperand(gpr, displ=offset, displ_size=1 if offset else 0)
    zmm = [(r.ZMM0 + i, REGISTER_BYTES * i) for i in range(EVEX_VECTOR_REGISTERS)]
    ks = [(r.K0 + i, K_OFFSET + 8 * i) for i in range(OPMASK_REGISTERS)]
    store = [byte_line(iced.Instruction.create_mem_reg(c.EVEX_VMOVDQU64_ZMMM512_K1Z_ZMM, mem(o), z))
             for z, o in zmm]
    store += [byte_line(iced.Instruction.create_mem_reg(c.VEX_KMOVQ_M64_KR, mem(o), k)) for k, o in ks]
    load = [byte_line(iced.Instruction.create_reg_mem(c.EVEX_VMOVDQU64_ZMM_K1Z_ZMMM512, z, mem(o)))
            for z, o in zmm]
    load += [byte_line(iced.Instruction.create_reg_mem(c.VEX_KMOVQ_KR_KM64, k, mem(o))) for k, o in ks]
    return store, load
