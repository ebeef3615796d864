"""T-SAR instructions in the simulator: decoded by :func:`tsar.isa.decode`, executed by the
golden semantics :func:`tsar.isa.semantics.tlut` / :func:`tsar.isa.semantics.tgemv`.

Register groups map to consecutive rows of ``state.ymm``; a 128-bit configuration uses the xmm
halves and, like every VEX.128 write, zeroes bits 255:128 of the registers it writes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tsar.isa import codec
from tsar.isa.instructions import Field, Kind
from tsar.isa.operands import GPR_NUMBER, Memory, Register
from tsar.isa.semantics import tgemv, tlut

from .decode import Operand as DOperand
from .decode import address_fn
from .state import CpuState
from .vecexec import Compiled


def _address(mem: Memory, next_ip: int, st: CpuState) -> Callable[[], int]:
    if mem.rip_relative:
        return address_fn(DOperand("mem", 0, rip_target=next_ip + mem.disp), st.gpr)
    op = DOperand("mem", 0, base=GPR_NUMBER[mem.base] if mem.base else -1,
                  index=GPR_NUMBER[mem.index] if mem.index else -1, scale=mem.scale,
                  disp=mem.disp & ((1 << 64) - 1))
    return address_fn(op, st.gpr)


def _source(op: Register | Memory, nbytes: int, regs: int, width: int, next_ip: int,
            st: CpuState) -> Callable[[], np.ndarray]:
    """Reader of ``nbytes`` operand bytes: memory, or the low bytes of ``regs`` registers."""
    if isinstance(op, Memory):
        addr, view = _address(op, next_ip, st), st.mem.view

        def read() -> np.ndarray:
            a = addr()
            if st.trace is not None:
                st.trace.append((a, nbytes, 0))
            return view(a, nbytes)
        return read
    rows = st.ymm[op.num:op.num + regs, :width]
    return lambda: rows.reshape(-1)[:nbytes]


def compile_tsar(inst: codec.TsarInstruction, next_ip: int, st: CpuState) -> Compiled:
    """Closure executing a decoded T-SAR instruction; memory traffic in bytes is static."""
    cfg = inst.spec.config
    width = cfg.register_bytes
    y = st.ymm
    dst = inst.operand(Field.MODRM_REG)
    src = inst.operand(Field.MODRM_RM)
    if inst.spec.kind is Kind.TLUT:
        read = _source(src, cfg.k, 1, width, next_ip, st)
        group = y[dst.num:dst.num + cfg.group_regs]

        def run_tlut() -> None:
            words = tlut(cfg, read().view(np.int8))
            group[:, :width] = words.view(np.uint8).reshape(cfg.group_regs, width)
            if width < 32:
                group[:, width:] = 0
        return Compiled(run_tlut, cfg.k if isinstance(src, Memory) else 0, 0)
    lut = inst.operand(Field.VEX_VVVV)
    read_w = _source(src, cfg.weight_bytes, cfg.weight_regs, width, next_ip, st)
    lut_rows = y[lut.num:lut.num + cfg.group_regs, :width]
    acc_row = y[dst.num]

    def run_tgemv() -> None:
        acc = acc_row[:width].view(np.int16)
        words = lut_rows.reshape(-1).view(np.int16)
        acc_row[:width] = tgemv(cfg, acc, words, read_w()).view(np.uint8)
        if width < 32:
            acc_row[width:] = 0
    return Compiled(run_tgemv, cfg.weight_bytes if isinstance(src, Memory) else 0, 0)
