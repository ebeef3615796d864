"""The SIMD port: base datapath and write-back, optionally with the T-SAR additions."""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tsar.isa.config import ADDER_TREE_FAN_IN, TsarConfig
from tsar.rtl.adder_tree import AdderTrees
from tsar.rtl.alu import WIDE_BITS, WORD_BITS, SimdAlu
from tsar.rtl.base import Decode, SliceOp, WriteBack, issue_signature
from tsar.rtl.extension import (
    LUT_READ_POLICIES,
    LutBuffer,
    OperandPlan,
    TsarOperandMux,
    TsarSequencer,
    TsarWriteBackMux,
)
from tsar.rtl.mul import DotCombine, Multipliers, ResultPipe
from tsar.rtl.ops import AluFn
from tsar.rtl.regfile import READ_PORTS, reg_bits
from tsar.rtl.schedule import LaneOp

BASE_BLOCKS = ("decode", "alu", "mul", "dot", "pipe", "writeback")
"""Submodules of every port: issue/decode/hazards, ALU, multipliers (M1), combine and dot-product
adders (M2), result pipeline, write-back interface."""

TSAR_BLOCKS = ("tsar_operands", "tsar_trees", "tsar_lutbuf", "tsar_writeback", "tsar_sequencer")
"""Submodules a T-SAR port adds: operand MUXes, 4:1 reduction trees, LUT-group buffer,
write-back MUX, sequencer."""


class SimdSlice(wiring.Component):
    """One ``vector_bits`` integer SIMD port (256: AVX2; 512: AVX-512 at full width, 32 lanes and
    32 zmm register numbers, as Zen 5 executes it), optionally with T-SAR.

    ``tsar``: the T-SAR configurations it executes (empty: the base port); ``lut_read``: the
    LUT-group read policy (:mod:`.extension`); ``isolate``: operand isolation (AND gates in the
    blocks' inputs, no state): the multipliers' operands are zero unless a multiplier operation is
    in the instruction register, and on a T-SAR port the weight codes of the LUT lookup, the
    accumulator register into the tree and write-back selects, and the lane results into the
    reduction trees are zero unless a TLUT or TGEMV is; both enables come straight from the
    instruction register and the decode ROM. Functionally invisible; off, the Verilog is the same
    as without the option. The register file is outside: the port drives
    :data:`~tsar.rtl.regfile.READ_PORTS` read addresses (``src1``, ``src2``, ``dst``; during a
    TGEMV ``src2 | 1`` for the second weight register, during a group load the group) and one
    write port. ``load_data``: the memory operand (``src2`` and, for two-register weights, the
    next register) of an instruction with ``mem`` set. ``done``: an instruction leaves the
    instruction register; ``idle``: nothing in flight.
    """

    def __init__(self, vector_bits: int = 256, tsar: Sequence[TsarConfig] = (),
                 lut_read: str = "latch", isolate: bool = False):
        if lut_read not in LUT_READ_POLICIES:
            raise ValueError(f"lut_read={lut_read!r}: expected one of {', '.join(LUT_READ_POLICIES)}")
        self.vector_bits = vector_bits
        self.words = vector_bits // WORD_BITS
        self.trees = self.words // ADDER_TREE_FAN_IN
        self.configs = tuple(tsar)
        self.lut_read = lut_read
        self.isolate = bool(isolate)
        self.plan = OperandPlan(vector_bits, self.configs) if self.configs else None
        self.load_regs = max([1] + [c.weight_regs for c in self.configs])
        regs = reg_bits(vector_bits)
        super().__init__({
            "issue": In(issue_signature(len(self.configs), vector_bits)),
            "done": Out(1),
            "idle": Out(1),
            "rd_addr": Out(regs).array(READ_PORTS),
            "rd_data": In(vector_bits).array(READ_PORTS),
            "load_data": In(vector_bits * self.load_regs),
            "wb_en": Out(1),
            "wb_addr": Out(regs),
            "wb_data": Out(vector_bits),
        })

    @property
    def blocks(self) -> tuple[str, ...]:
        return BASE_BLOCKS + (TSAR_BLOCKS if self.plan else ())

    def elaborate(self, platform) -> Module:
        m = Module()
        n, bits = self.words, self.vector_bits
        m.submodules.decode = dec = Decode(len(self.configs), bits, self.isolate)
        m.submodules.alu = alu = SimdAlu(n)
        m.submodules.mul = mul = Multipliers(n, self.isolate)
        m.submodules.dot = dot = DotCombine(n)
        m.submodules.pipe = pipe = ResultPipe(bits)
        m.submodules.writeback = wb = WriteBack(bits)
        if self.isolate:
            m.d.comb += mul.en.eq(dec.mul_op)
        wiring.connect(m, wiring.flipped(self.issue), dec.issue)
        ir = dec.ir
        src1 = self.rd_data[0]
        src2 = Mux(ir.mem, self.load_data[:bits], self.rd_data[1])

        def words(v):
            return [v.word_select(i, WORD_BITS) for i in range(n)]

        m.d.comb += [
            self.done.eq(dec.done), self.idle.eq(dec.idle),
            *(mul.a[i].eq(w) for i, w in enumerate(words(src1))),
            *(mul.b[i].eq(w) for i, w in enumerate(words(src2))),
            mul.fn.eq(dec.mul_fn),
            *(getattr(dot, x)[i].eq(getattr(mul, x)[i]) for x in ("ll", "mid", "hh") for i in range(n)),
            *(dot.cross[d].eq(mul.cross[d]) for d in range(n // 2)),
            dot.fn.eq(mul.fn_q),
            pipe.issue.eq(dec.go_mul), pipe.issue_dst.eq(ir.dst), pipe.issue_lat.eq(dec.mul_lat),
            pipe.m2_result.eq(dot.result),
            dec.busy.eq(pipe.busy),
            *(dec.busy_dst[k].eq(pipe.busy_dst[k]) for k in range(len(pipe.busy_dst))),
            wb.alu_en.eq(dec.go_alu), wb.alu_dst.eq(ir.dst), wb.alu_data.eq(Cat(*alu.result)),
            wb.pipe_en.eq(pipe.wb_en), wb.pipe_dst.eq(pipe.wb_dst), wb.pipe_data.eq(pipe.wb_data),
        ]
        base_addr = (ir.src1, ir.src2, ir.dst)
        if not self.plan:
            m.d.comb += [
                *(self.rd_addr[i].eq(a) for i, a in enumerate(base_addr)),
                *(alu.a[i].eq(w) for i, w in enumerate(words(src1))),
                *(alu.b[i].eq(w) for i, w in enumerate(words(src2))),
                alu.sub.eq(dec.sub.replicate(n)), alu.fn.eq(dec.alu_fn), alu.esize.eq(dec.esize),
                dec.tsar_done.eq(0),
                self.wb_en.eq(wb.en), self.wb_addr.eq(wb.addr), self.wb_data.eq(wb.data),
            ]
            return m

        plan = self.plan
        m.submodules.tsar_sequencer = seq = TsarSequencer(plan, self.lut_read)
        m.submodules.tsar_operands = ops = TsarOperandMux(plan, self.isolate)
        m.submodules.tsar_trees = trees = AdderTrees(n, plan.constants, plan.wide_lanes, self.isolate)
        m.submodules.tsar_lutbuf = buf = LutBuffer(plan, self.lut_read)
        m.submodules.tsar_writeback = twb = TsarWriteBackMux(plan)
        uop = seq.tlut | seq.tgemv
        twb_acc = self.rd_data[2]
        if self.isolate:
            tsar_ir = Signal()  # a TLUT or TGEMV (op[1]) is in the instruction register
            m.d.comb += [tsar_ir.eq(dec.ir_valid & ir.op.as_value()[1]), ops.en.eq(tsar_ir),
                         trees.en.eq(tsar_ir)]
            twb_acc = ops.acc_gated
        src2_hi = Mux(ir.mem, self.load_data[bits:] if self.load_regs > 1 else 0, self.rd_data[0])
        with m.If(seq.loading):
            m.d.comb += [self.rd_addr[i].eq(ir.src1 + READ_PORTS * seq.load_step + i)
                         for i in range(READ_PORTS)]
        with m.Elif(ir.op == SliceOp.TGEMV):
            m.d.comb += [self.rd_addr[0].eq(Cat(Const(1, 1), ir.src2[1:])),
                         self.rd_addr[1].eq(ir.src2), self.rd_addr[2].eq(ir.dst)]
        with m.Else():
            m.d.comb += [self.rd_addr[i].eq(a) for i, a in enumerate(base_addr)]
        m.d.comb += [
            seq.ir_valid.eq(dec.ir_valid), seq.ir.eq(ir), seq.start_ok.eq(~pipe.busy.any()),
            seq.hit.eq(buf.hit), dec.tsar_done.eq(seq.done),
            ops.cfg.eq(ir.cfg), ops.uop.eq(seq.uop), ops.tgemv.eq(seq.tgemv),
            ops.src1.eq(src1), ops.src2.eq(src2), ops.src2_hi.eq(src2_hi), ops.acc.eq(self.rd_data[2]),
            ops.group.eq(buf.group),
            *(ops.a_sel[i].eq(seq.a_sel[i]) for i in range(n)),
            *(ops.b_sel[i].eq(seq.b_sel[i]) for i in range(n)),
            *(ops.lane_result[i].eq(alu.word_sum[i]) for i in range(n)),
            *(alu.a[i].eq(ops.a[i]) for i in range(n)),
            *(alu.b[i].eq(ops.b[i]) for i in range(n)),
            alu.sub.eq(Mux(uop, Cat(*(seq.lane_op[i] == LaneOp.SUB for i in range(n))),
                           dec.sub.replicate(n))),
            alu.fn.eq(Mux(uop, AluFn.ADD, dec.alu_fn)),
            alu.esize.eq(Mux(uop, 1, dec.esize)),
            *(trees.x[i].eq(alu.result[i]) for i in range(n)),
            *(trees.acc[t].eq(ops.tree_acc[t]) for t in range(self.trees)),
            buf.load.eq(seq.loading), buf.load_step.eq(seq.load_step), buf.load_last.eq(seq.load_last),
            *(buf.port_data[i].eq(self.rd_data[i]) for i in range(READ_PORTS)),
            buf.tlut.eq(seq.tlut), buf.tlut_done.eq(seq.tlut & seq.done),
            buf.reg_offset.eq(seq.reg_offset), buf.tlut_data.eq(Cat(*alu.result)),
            buf.wb_en.eq(self.wb_en), buf.wb_addr.eq(self.wb_addr),
            buf.cfg.eq(ir.cfg), buf.dst.eq(ir.dst), buf.src1.eq(ir.src1),
            twb.cfg.eq(ir.cfg), twb.tlut.eq(seq.tlut), twb.tgemv.eq(seq.tgemv), twb.uop.eq(seq.uop),
            twb.dst.eq(ir.dst), twb.reg_offset.eq(seq.reg_offset),
            twb.base_en.eq(wb.en), twb.base_addr.eq(wb.addr), twb.base_data.eq(wb.data),
            twb.acc.eq(twb_acc),
            *(twb.lane_result[i].eq(alu.result[i]) for i in range(n)),
            *(twb.tree_sum[t].eq(trees.sum[t]) for t in range(self.trees)),
            self.wb_en.eq(twb.en), self.wb_addr.eq(twb.addr), self.wb_data.eq(twb.data),
        ]
        if plan.constants:
            m.d.comb += trees.k.eq(ops.tree_const)
        if plan.wide_lanes:
            m.d.comb += [
                trees.a_top.eq(Cat(*(ops.a[i][-1] for i in range(n)))),
                trees.b_top.eq(Cat(*(ops.b[i][-1] for i in range(n)))),
                trees.sub.eq(alu.sub),
            ]
        return m


__all__ = ["BASE_BLOCKS", "TSAR_BLOCKS", "WIDE_BITS", "SimdSlice"]
