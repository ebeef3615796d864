"""The 4:1 adder trees of the dot-product path (a VPDPWSSD-like reduction with accumulator)."""

from amaranth.hdl import Module, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tsar.isa.config import ADDER_TREE_FAN_IN

from .alu import WIDE_BITS


class AdderTree(wiring.Component):
    """``sum = acc + (x0 + x1) + (x2 + x3)``, all signed 32-bit with wrap-around."""

    x: In(signed(WIDE_BITS)).array(ADDER_TREE_FAN_IN)
    acc: In(signed(WIDE_BITS))
    sum: Out(signed(WIDE_BITS))

    def elaborate(self, platform) -> Module:
        m = Module()
        m.d.comb += self.sum.eq(self.acc + (self.x[0] + self.x[1]) + (self.x[2] + self.x[3]))
        return m


class AdderTrees(wiring.Component):
    """One :class:`AdderTree` per four lanes; tree ``t`` reduces the wide outputs of lanes
    ``4t .. 4t+3``."""

    def __init__(self, lanes: int):
        self.trees = lanes // ADDER_TREE_FAN_IN
        super().__init__({
            "x": In(signed(WIDE_BITS)).array(lanes),
            "acc": In(signed(WIDE_BITS)).array(self.trees),
            "sum": Out(signed(WIDE_BITS)).array(self.trees),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        for t in range(self.trees):
            tree = m.submodules[f"tree{t}"] = AdderTree()
            m.d.comb += [tree.x[i].eq(self.x[t * ADDER_TREE_FAN_IN + i])
                         for i in range(ADDER_TREE_FAN_IN)]
            m.d.comb += [tree.acc.eq(self.acc[t]), self.sum[t].eq(tree.sum)]
        return m
