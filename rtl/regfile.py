"""A behavioural model of the vector register file, so that whole instructions run in RTL.

Not part of the slice (the area and power figures exclude it, as the paper's do). It has
:data:`READ_PORTS` read ports per vector port, as a core that executes FMA (three sources) on the
port needs; the slice reads nothing wider.
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tsar.isa.config import VECTOR_REGISTERS
from tsar.rtl.base import REG_BITS

READ_PORTS = 3
"""Read ports of the register file per vector port (FMA's three sources)."""


class RegisterFile(wiring.Component):
    """``VECTOR_REGISTERS`` x ``width``-bit registers; :data:`READ_PORTS` combinational reads,
    one synchronous write. ``regs`` are the storage signals (testbenches may set them)."""

    def __init__(self, width: int):
        self.width = width
        self.regs = [Signal(width, name=f"r{i}") for i in range(VECTOR_REGISTERS)]
        super().__init__({
            "rd_addr": In(REG_BITS).array(READ_PORTS),
            "rd_data": Out(width).array(READ_PORTS),
            "wr_en": In(1),
            "wr_addr": In(REG_BITS),
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
