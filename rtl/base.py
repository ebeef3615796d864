"""Control and write-back of the base slice: instruction register, op decode, result select."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal, signed
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from tsar.isa.config import VECTOR_REGISTERS

from .alu import LANE_BITS, WIDE_BITS
from .schedule import LaneOp

REG_BITS = bits_for(VECTOR_REGISTERS - 1)
"""Bits of a register number (``VECTOR_REGISTERS`` registers)."""


class SliceOp(enum.Enum, shape=3):
    """Operations the slice executes (register operands ``dst``, ``src1`` = VEX.vvvv,
    ``src2`` = ModRM.rm).

    * ``VPADDW`` / ``VPSUBW`` / ``VPMULLW``: ``dst.w[l] = src1.w[l] op src2.w[l]`` (wrap to the
      lane width, :data:`~tsar.rtl.alu.LANE_BITS`);
    * ``VPDPW4``: ``dst.d[t] += sum_{i<F} src1.w[F*t+i] * src2.w[F*t+i]`` for each adder tree ``t``
      (``F``: :data:`~tsar.isa.config.ADDER_TREE_FAN_IN`; signed, wrapping to
      :data:`~tsar.rtl.alu.WIDE_BITS`); the dwords above the trees' are cleared;
    * ``TLUT`` / ``TGEMV``: the T-SAR instruction of configuration ``cfg`` (T-SAR slices only;
      a base slice treats them as ``NOP``): ``TLUT dst_group, src2``, ``TGEMV dst, src1_group,
      src2[:src2|1]``.
    """

    NOP = 0
    VPADDW = 1
    VPSUBW = 2
    VPMULLW = 3
    VPDPW4 = 4
    TLUT = 5
    TGEMV = 6


BASE_OPS = (SliceOp.VPADDW, SliceOp.VPSUBW, SliceOp.VPMULLW, SliceOp.VPDPW4)


def instr_layout(n_configs: int) -> data.StructLayout:
    """One decoded instruction: op, configuration index (T-SAR ops), register numbers."""
    return data.StructLayout({
        "op": SliceOp,
        "cfg": max(1, bits_for(max(0, n_configs - 1))),
        "dst": REG_BITS,
        "src1": REG_BITS,
        "src2": REG_BITS,
    })


def issue_signature(n_configs: int) -> wiring.Signature:
    """Issue port, from the front end's side: ``instr`` is taken when ``valid & ready``."""
    return wiring.Signature({
        "valid": Out(1),
        "ready": In(1),
        "instr": Out(instr_layout(n_configs)),
    })


class Decode(wiring.Component):
    """Instruction register and base-op decode.

    Takes a new instruction every cycle unless ``stall`` (a multi-uop T-SAR instruction holds
    the register). ``done`` marks the cycle in which the instruction in ``ir`` finishes.
    """

    def __init__(self, n_configs: int):
        super().__init__({
            "issue": In(issue_signature(n_configs)),
            "stall": In(1),
            "ir_valid": Out(1),
            "ir": Out(instr_layout(n_configs)),
            "lane_op": Out(LaneOp),
            "wb_dot": Out(1),
            "wb_en": Out(1),
            "done": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        m.d.comb += self.issue.ready.eq(~self.stall)
        with m.If(~self.stall):
            m.d.sync += [self.ir_valid.eq(self.issue.valid), self.ir.eq(self.issue.instr)]
        m.d.comb += self.done.eq(self.ir_valid & ~self.stall)
        with m.Switch(self.ir.op):
            with m.Case(SliceOp.VPSUBW):
                m.d.comb += self.lane_op.eq(LaneOp.SUB)
            with m.Case(SliceOp.VPMULLW, SliceOp.VPDPW4):
                m.d.comb += self.lane_op.eq(LaneOp.MUL)
            with m.Default():
                m.d.comb += self.lane_op.eq(LaneOp.ADD)
        is_base = Signal()
        m.d.comb += [
            is_base.eq(Cat(self.ir.op == op for op in BASE_OPS).any()),
            self.wb_en.eq(self.ir_valid & is_base),
            self.wb_dot.eq(self.ir.op == SliceOp.VPDPW4),
        ]
        return m


class WriteBack(wiring.Component):
    """Base write-back interface: the lane results, or the adder-tree dwords (``dot``)."""

    def __init__(self, lanes: int, trees: int):
        self.lanes, self.trees = lanes, trees
        super().__init__({
            "result": In(LANE_BITS).array(lanes),
            "sum": In(signed(WIDE_BITS)).array(trees),
            "dot": In(1),
            "data": Out(lanes * LANE_BITS),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        dot = Cat(*self.sum, Const(0, self.lanes * LANE_BITS - self.trees * WIDE_BITS))
        with m.If(self.dot):
            m.d.comb += self.data.eq(dot)
        with m.Else():
            m.d.comb += self.data.eq(Cat(*self.result))
        return m
