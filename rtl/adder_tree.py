"""The adder trees of the dot-product path (a VPDPWSSD-like reduction with accumulator), of fan-in
:data:`~tsar.isa.config.ADDER_TREE_FAN_IN`."""

from amaranth.hdl import Module, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tsar.isa.config import ADDER_TREE_FAN_IN

from .alu import WIDE_BITS


def _pairwise(xs: list[Value]) -> Value:
    """Balanced sum of ``xs``: ``(x0 + x1) + (x2 + x3)`` for four."""
    if len(xs) == 1:
        return xs[0]
    half = len(xs) // 2
    return _pairwise(xs[:half]) + _pairwise(xs[half:])


class AdderTree(wiring.Component):
    """``sum = acc + (x0 + x1) + (x2 + x3)`` (for fan-in 4; generally ``acc`` plus the balanced
    sums of the two halves of the inputs), all signed :data:`~tsar.rtl.alu.WIDE_BITS`-bit with
    wrap-around."""

    x: In(signed(WIDE_BITS)).array(ADDER_TREE_FAN_IN)
    acc: In(signed(WIDE_BITS))
    sum: Out(signed(WIDE_BITS))

    def elaborate(self, platform) -> Module:
        m = Module()
        xs = list(self.x)
        half = len(xs) // 2
        m.d.comb += self.sum.eq(self.acc + _pairwise(xs[:half]) + _pairwise(xs[half:]))
        return m


class AdderTrees(wiring.Component):
    """One :class:`AdderTree` per ``ADDER_TREE_FAN_IN`` lanes; tree ``t`` reduces the wide outputs
    of lanes ``F*t .. F*t+F-1``."""

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
