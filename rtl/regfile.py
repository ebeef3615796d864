"""A behavioural model of the vector register file, so that whole instructions run in RTL.

Not part of the slice (the area and power figures exclude it, as the paper's do).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tsar.isa.config import VECTOR_REGISTERS

from .base import REG_BITS


class RegisterFile(wiring.Component):
    """``VECTOR_REGISTERS`` x ``width``-bit registers; combinational reads, one synchronous write.

    Read ports ``rd_addr[i]`` -> ``rd_data[i]``; a group read port returns ``group_regs``
    consecutive registers from ``group_addr`` (register ``group_addr + i`` mod ``VECTOR_REGISTERS``
    at bits ``[i*width, (i+1)*width)``; a configuration with smaller groups uses the first ones).
    ``regs`` are the storage signals (testbenches may set them).
    """

    def __init__(self, width: int, read_ports: int, group_regs: int = 1):
        self.width, self.group_regs = width, group_regs
        self.regs = [Signal(width, name=f"r{i}") for i in range(VECTOR_REGISTERS)]
        super().__init__({
            "rd_addr": In(REG_BITS).array(read_ports),
            "rd_data": Out(width).array(read_ports),
            "group_addr": In(REG_BITS),
            "group_data": Out(width * group_regs),
            "wr_en": In(1),
            "wr_addr": In(REG_BITS),
            "wr_data": In(width),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        regs = Array(self.regs)
        for addr, out in zip(self.rd_addr, self.rd_data, strict=True):
            m.d.comb += out.eq(regs[addr])
        m.d.comb += self.group_data.eq(Cat(regs[(self.group_addr + i)[:REG_BITS]]
                                           for i in range(self.group_regs)))
        with m.If(self.wr_en):
            m.d.sync += regs[self.wr_addr].eq(self.wr_data)
        return m
