"""The SIMD slice: base datapath and write-back, optionally with the T-SAR additions."""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Cat, Const, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tsar.isa.config import ADDER_TREE_FAN_IN, TsarConfig

from .adder_tree import AdderTrees
from .alu import LANE_BITS, WIDE_BITS, AluLanes
from .base import REG_BITS, Decode, WriteBack, issue_signature
from .extension import OperandPlan, TsarOperandMux, TsarSequencer, TsarWriteBackMux

BASE_BLOCKS = ("decode", "lanes", "trees", "writeback")
"""Submodules of every slice: control, ALU lanes, adder trees, write-back interface."""

TSAR_BLOCKS = ("tsar_operands", "tsar_writeback", "tsar_sequencer")
"""Submodules a T-SAR slice adds: operand MUXes, write-back MUX, sequencer/scoreboard."""


class SimdSlice(wiring.Component):
    """One SIMD slice of ``vector_bits // LANE_BITS`` ALU lanes (:data:`~tsar.rtl.alu.LANE_BITS`: 16)
    and ``lanes // ADDER_TREE_FAN_IN`` adder trees.

    ``tsar`` lists the T-SAR configurations the slice executes (empty: the base slice). The
    register file is outside: the slice drives read addresses (``dst``, ``src1``, ``src2``, and for
    T-SAR ``src2 | 1`` and the LUT group) and receives the data; it drives one write port ``wb``.
    ``done`` is high in the last cycle of each instruction.
    """

    def __init__(self, vector_bits: int = 256, tsar: Sequence[TsarConfig] = ()):
        self.vector_bits = vector_bits
        self.lanes = vector_bits // LANE_BITS
        self.trees = self.lanes // ADDER_TREE_FAN_IN
        self.configs = tuple(tsar)
        self.plan = OperandPlan(vector_bits, self.configs) if self.configs else None
        ports = {
            "issue": In(issue_signature(len(self.configs))),
            "done": Out(1),
            "rd_addr": Out(REG_BITS).array(3),  # dst, src1, src2
            "rd_data": In(vector_bits).array(3),
            "wb_en": Out(1),
            "wb_addr": Out(REG_BITS),
            "wb_data": Out(vector_bits),
        }
        if self.plan:
            ports |= {
                "rd_src2_hi_addr": Out(REG_BITS),
                "rd_src2_hi": In(vector_bits),
                "group_addr": Out(REG_BITS),
                "group_data": In(vector_bits * self.plan.max_group_regs),
            }
        super().__init__(ports)

    @property
    def blocks(self) -> tuple[str, ...]:
        return BASE_BLOCKS + (TSAR_BLOCKS if self.plan else ())

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.decode = decode = Decode(len(self.configs))
        m.submodules.lanes = lanes = AluLanes(self.lanes)
        m.submodules.trees = trees = AdderTrees(self.lanes)
        m.submodules.writeback = wb = WriteBack(self.lanes, self.trees)
        wiring.connect(m, wiring.flipped(self.issue), decode.issue)
        ir = decode.ir
        dst, src1, src2 = self.rd_data
        m.d.comb += [
            self.done.eq(decode.done),
            self.rd_addr[0].eq(ir.dst), self.rd_addr[1].eq(ir.src1), self.rd_addr[2].eq(ir.src2),
            *(trees.x[i].eq(lanes.wide[i]) for i in range(self.lanes)),
            *(wb.result[i].eq(lanes.result[i]) for i in range(self.lanes)),
            *(wb.sum[t].eq(trees.sum[t]) for t in range(self.trees)),
            wb.dot.eq(decode.wb_dot),
        ]
        if not self.plan:
            m.d.comb += [
                decode.stall.eq(0),
                *(lanes.op[i].eq(decode.lane_op) for i in range(self.lanes)),
                *(lanes.a[i].eq(src1.word_select(i, LANE_BITS)) for i in range(self.lanes)),
                *(lanes.b[i].eq(src2.word_select(i, LANE_BITS)) for i in range(self.lanes)),
                *(trees.acc[t].eq(dst.word_select(t, WIDE_BITS)) for t in range(self.trees)),
                self.wb_en.eq(decode.wb_en), self.wb_addr.eq(ir.dst), self.wb_data.eq(wb.data),
            ]
            return m

        m.submodules.tsar_sequencer = seq = TsarSequencer(self.plan)
        m.submodules.tsar_operands = ops = TsarOperandMux(self.plan)
        m.submodules.tsar_writeback = twb = TsarWriteBackMux(self.plan)
        m.d.comb += [
            seq.ir_valid.eq(decode.ir_valid), seq.ir.eq(ir), seq.base_lane_op.eq(decode.lane_op),
            decode.stall.eq(seq.stall),
            self.rd_src2_hi_addr.eq(Cat(Const(1, 1), ir.src2[1:])),
            self.group_addr.eq(seq.group_addr),
            # operand MUXes in front of the lanes and tree accumulators
            ops.cfg.eq(ir.cfg), ops.uop.eq(seq.uop), ops.tgemv.eq(seq.tgemv),
            ops.src1.eq(src1), ops.src2.eq(src2), ops.src2_hi.eq(self.rd_src2_hi), ops.acc.eq(dst),
            ops.group.eq(self.group_data),
            *(ops.a_sel[i].eq(seq.a_sel[i]) for i in range(self.lanes)),
            *(ops.b_sel[i].eq(seq.b_sel[i]) for i in range(self.lanes)),
            *(ops.lane_result[i].eq(lanes.result[i]) for i in range(self.lanes)),
            *(lanes.op[i].eq(seq.lane_op[i]) for i in range(self.lanes)),
            *(lanes.a[i].eq(ops.a[i]) for i in range(self.lanes)),
            *(lanes.b[i].eq(ops.b[i]) for i in range(self.lanes)),
            *(trees.acc[t].eq(ops.tree_acc[t]) for t in range(self.trees)),
            # write-back MUX
            twb.tlut.eq(seq.tlut), twb.tgemv.eq(seq.tgemv), twb.uop.eq(seq.uop),
            twb.dst.eq(ir.dst), twb.reg_offset.eq(seq.reg_offset),
            twb.base_en.eq(decode.wb_en), twb.base_data.eq(wb.data), twb.acc.eq(dst),
            *(twb.lane_result[i].eq(lanes.result[i]) for i in range(self.lanes)),
            *(twb.tree_sum[t].eq(trees.sum[t]) for t in range(self.trees)),
            self.wb_en.eq(twb.en), self.wb_addr.eq(twb.addr), self.wb_data.eq(twb.data),
        ]
        return m
