"""The SIMD ALU lanes of the base slice: add, subtract and multiply (low half) of
:data:`LANE_BITS`-bit words."""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .schedule import LaneOp

LANE_BITS = 16
"""Width of one ALU lane of the base slice (the words of VPADDW/VPSUBW/VPMULLW): the base slice's
own parameter, not the ISA's. A T-SAR configuration runs on these lanes only if its LUT entries
and accumulator words have this width (``cfg.lut_bits``, ``cfg.acc_bits``; checked by
:class:`~tsar.rtl.extension.OperandPlan`)."""

WIDE_BITS = 2 * LANE_BITS
"""Width of a lane's product, and of the dot-product adder trees."""


class AluLane(wiring.Component):
    """One :data:`LANE_BITS`-bit ALU lane.

    ``result = a + b``, ``a - b`` (one adder, ``b`` inverted plus carry-in) or the low half of
    ``a * b``; ``wide`` feeds the dot-product adder trees: the signed :data:`WIDE_BITS`-bit product
    for ``MUL``, otherwise ``result`` sign-extended.
    """

    op: In(LaneOp)
    a: In(LANE_BITS)
    b: In(LANE_BITS)
    result: Out(LANE_BITS)
    wide: Out(signed(WIDE_BITS))

    def elaborate(self, platform) -> Module:
        m = Module()
        sub = self.op == LaneOp.SUB
        addsub = Signal(LANE_BITS)
        product = Signal(signed(WIDE_BITS))
        m.d.comb += [
            addsub.eq(self.a + (self.b ^ sub.replicate(LANE_BITS)) + sub),
            product.eq(self.a.as_signed() * self.b.as_signed()),
        ]
        with m.If(self.op == LaneOp.MUL):
            m.d.comb += [self.result.eq(product[:LANE_BITS]), self.wide.eq(product)]
        with m.Else():
            m.d.comb += [self.result.eq(addsub), self.wide.eq(addsub.as_signed())]
        return m


class AluLanes(wiring.Component):
    """``lanes`` independent :class:`AluLane` instances (each with its own operation)."""

    def __init__(self, lanes: int):
        self.lanes = lanes
        super().__init__({
            "op": In(LaneOp).array(lanes),
            "a": In(LANE_BITS).array(lanes),
            "b": In(LANE_BITS).array(lanes),
            "result": Out(LANE_BITS).array(lanes),
            "wide": Out(signed(WIDE_BITS)).array(lanes),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        for i in range(self.lanes):
            lane = m.submodules[f"lane{i}"] = AluLane()
            m.d.comb += [
                lane.op.eq(self.op[i]), lane.a.eq(self.a[i]), lane.b.eq(self.b[i]),
                self.result[i].eq(lane.result), self.wide[i].eq(lane.wide),
            ]
        return m
