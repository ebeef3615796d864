"""A slice with its register-file model: executes whole instructions."""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tsar.isa.config import TsarConfig

from .base import issue_signature
from .regfile import RegisterFile
from .slice import SimdSlice


class VectorUnit(wiring.Component):
    """:class:`SimdSlice` (submodule ``slice``) wired to a :class:`RegisterFile` (``regfile``).

    Register-file model limitation: a multi-uop instruction reads its sources every uop, so its
    sources must not overlap registers it has already written (a renamed core reads the old
    physical registers instead). TLUT reads its own group back, which is intended.
    """

    def __init__(self, vector_bits: int = 256, tsar: Sequence[TsarConfig] = ()):
        self.slice = SimdSlice(vector_bits, tsar)
        plan = self.slice.plan
        self.regfile = RegisterFile(vector_bits, read_ports=4 if plan else 3,
                                    group_regs=plan.max_group_regs if plan else 1)
        super().__init__({"issue": In(issue_signature(len(self.slice.configs))), "done": Out(1)})

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
            self.done.eq(s.done),
            *(rf.rd_addr[i].eq(s.rd_addr[i]) for i in range(3)),
            *(s.rd_data[i].eq(rf.rd_data[i]) for i in range(3)),
            rf.wr_en.eq(s.wb_en), rf.wr_addr.eq(s.wb_addr), rf.wr_data.eq(s.wb_data),
        ]
        if s.plan:
            m.d.comb += [
                rf.rd_addr[3].eq(s.rd_src2_hi_addr), s.rd_src2_hi.eq(rf.rd_data[3]),
                rf.group_addr.eq(s.group_addr), s.group_data.eq(rf.group_data),
            ]
        return m
