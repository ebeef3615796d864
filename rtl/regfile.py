"""A behavioural model of the vector register file, so that whole instructions run in RTL.

Not part of the slice (the area and power figures exclude it, as the paper's do). It has
:data:`READ_PORTS` read ports per vector port, as a core that executes FMA (three sources) on the
port needs; the slice reads nothing wider. Its registers are those the width's encoding addresses
(:func:`vector_registers`: 16 ymm on a 256-bit port, 32 zmm on a 512-bit one).
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from tsar.isa.config import registers_at

READ_PORTS = 3
"""Read ports of the register file per vector port (FMA's three sources)."""


vector_registers = registers_at
"""Architectural vector registers of a ``vector_bits`` port: those the width's encoding addresses
(:func:`tsar.isa.config.registers_at`)."""


def reg_bits(vector_bits: int) -> int:
    """Bits of a register number on a ``vector_bits`` port (:func:`vector_registers`)."""
    return bits_for(vector_registers(vector_bits) - 1)


class RegisterFile(wiring.Component):
    """:func:`vector_registers` x ``width``-bit registers; :data:`READ_PORTS` combinational
    reads, one synchronous write. ``regs`` are the storage signals (testbenches may set them)."""

    def __init__(self, width: int):
        self.width = width
        self.regs = [Signal(width, name=f"r{i}") for i in range(vector_registers(width))]
        regs = reg_bits(width)
        super().__init__({
            "rd_addr": In(regs).array(READ_PORTS),
            "rd_data": Out(width).array(READ_PORTS),
            "wr_en": In(1),
            "wr_addr": In(regs),
            "wr_data": In(width),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        regs = Array(self.regs)
        for addr, out in zip(self.rd_addr, self.rd_data, strict=True):
            m.d.comb += out.eq(regs[addr])
        with m.If(self.wr_en):
            m.d.sync += regs[self.wr_addr].eq(self.wr_data)
        return m
