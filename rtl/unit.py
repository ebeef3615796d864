"""A port with its register-file model: executes whole instructions."""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tsar.isa.config import TsarConfig
from tsar.rtl.base import issue_signature
from tsar.rtl.regfile import READ_PORTS, RegisterFile
from tsar.rtl.slice import SimdSlice


class VectorUnit(wiring.Component):
    """:class:`SimdSlice` (submodule ``slice``) wired to a :class:`RegisterFile` (``regfile``) of
    :data:`~tsar.rtl.regfile.READ_PORTS` read ports; ``load_data`` is the memory operand;
    ``lut_read`` and ``isolate`` as in :class:`SimdSlice`.

    Register-file model limitation: a multi-uop instruction reads its sources every uop, so its
    sources must not overlap registers it has already written (a renamed core reads the old
    physical registers instead). TLUT reads its own group back, which is intended.
    """

    def __init__(self, vector_bits: int = 256, tsar: Sequence[TsarConfig] = (),
                 lut_read: str = "latch", isolate: bool = False):
        self.slice = SimdSlice(vector_bits, tsar, lut_read, isolate)
        self.regfile = RegisterFile(vector_bits)
        super().__init__({"issue": In(issue_signature(len(self.slice.configs), vector_bits)), "done": Out(1),
                          "idle": Out(1), "load_data": In(vector_bits * self.slice.load_regs)})

    @property
    def configs(self) -> tuple[TsarConfig, ...]:
        return self.slice.configs

    @property
    def regs(self):
        return self.regfile.regs

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.slice = s = self.slice
        m.submodules.regfile = rf = self.regfile
        wiring.connect(m, wiring.flipped(self.issue), s.issue)
        m.d.comb += [
            self.done.eq(s.done), self.idle.eq(s.idle), s.load_data.eq(self.load_data),
            *(rf.rd_addr[i].eq(s.rd_addr[i]) for i in range(READ_PORTS)),
            *(s.rd_data[i].eq(rf.rd_data[i]) for i in range(READ_PORTS)),
            rf.wr_en.eq(s.wb_en), rf.wr_addr.eq(s.wb_addr), rf.wr_data.eq(s.wb_data),
        ]
        return m
