"""The adder trees of the dot-product path (a VPDPWSSD-like reduction with accumulator), of fan-in
:data:`~tsar.isa.config.ADDER_TREE_FAN_IN`."""

from amaranth.hdl import Cat, Module, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tsar.isa.config import ADDER_TREE_FAN_IN
from tsar.rtl.alu import WIDE_BITS, WORD_BITS


def _pairwise(xs: list[Value]) -> Value:
    """Balanced sum of ``xs``: ``(x0 + x1) + (x2 + x3)`` for four."""
    if len(xs) == 1:
        return xs[0]
    half = len(xs) // 2
    return _pairwise(xs[:half]) + _pairwise(xs[half:])


class AdderTree(wiring.Component):
    """``sum = acc + (x0 + x1) + (x2 + x3)`` (for fan-in 4; generally ``acc`` plus the balanced
    sums of the two halves of the inputs), all signed :data:`~tsar.rtl.alu.WIDE_BITS`-bit with
    wrap-around. With ``constant``: one more input ``k``, ``sum = (acc + k) + (x0 + x1) + (x2 +
    x3)`` (one more adder, beside the pair sums: no deeper)."""

    def __init__(self, constant: bool = False):
        self.constant = constant
        super().__init__({
            "x": In(signed(WIDE_BITS)).array(ADDER_TREE_FAN_IN),
            "acc": In(signed(WIDE_BITS)),
            **({"k": In(signed(WIDE_BITS))} if constant else {}),
            "sum": Out(signed(WIDE_BITS)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        xs = list(self.x)
        half = len(xs) // 2
        acc = (self.acc + self.k) if self.constant else self.acc
        m.d.comb += self.sum.eq(acc + _pairwise(xs[:half]) + _pairwise(xs[half:]))
        return m


class AdderTrees(wiring.Component):
    """One :class:`AdderTree` per ``ADDER_TREE_FAN_IN`` lanes; tree ``t`` reduces the lane results
    of lanes ``F*t .. F*t+F-1`` (``x``, :data:`~tsar.rtl.alu.WORD_BITS` each, sign-extended).

    ``constant``: every tree also adds ``k`` (the segment constant of a compact-LUT TGEMV).
    ``carry``: each lane result enters its tree exact, ``WORD_BITS + 1`` bits: the extra (sign) bit
    is the result's top bit corrected by the lane's signed overflow, from the operands' top bits
    ``a_top`` / ``b_top`` and the lane's ``sub`` (three gates a lane; needed where accumulators are
    wider than a word, left out otherwise: it cannot reach the kept bits).

    ``isolate``: input ``en`` AND-gates the lane inputs (``x``, and ``a_top`` / ``b_top``), so the
    trees hold still while they are not used (the accumulators come gated from the operand MUX).
    """

    def __init__(self, lanes: int, constant: bool = False, carry: bool = False, isolate: bool = False):
        self.lanes = lanes
        self.trees = lanes // ADDER_TREE_FAN_IN
        self.constant, self.carry, self.isolate = constant, carry, isolate
        super().__init__({
            "x": In(WORD_BITS).array(lanes),
            **({"en": In(1)} if isolate else {}),
            **({"a_top": In(lanes), "b_top": In(lanes), "sub": In(lanes)} if carry else {}),
            "acc": In(signed(WIDE_BITS)).array(self.trees),
            **({"k": In(signed(WIDE_BITS))} if constant else {}),
            "sum": Out(signed(WIDE_BITS)).array(self.trees),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        lanes = []
        xs = list(self.x)
        a_top, b_top = (self.a_top, self.b_top) if self.carry else (None, None)
        if self.isolate:
            xs = [x & self.en.replicate(WORD_BITS) for x in xs]
            if self.carry:
                a_top, b_top = (v & self.en.replicate(self.lanes) for v in (a_top, b_top))
        for i in range(self.lanes):
            r = xs[i]
            if self.carry:
                top = r[-1]
                overflow = (a_top[i] == (b_top[i] ^ self.sub[i])) & (top != a_top[i])
                lanes.append(Cat(r, top ^ overflow).as_signed())
            else:
                lanes.append(r.as_signed())
        for t in range(self.trees):
            tree = m.submodules[f"tree{t}"] = AdderTree(self.constant)
            if self.constant:
                m.d.comb += tree.k.eq(self.k)
            m.d.comb += [tree.x[i].eq(lanes[t * ADDER_TREE_FAN_IN + i])
                         for i in range(ADDER_TREE_FAN_IN)]
            m.d.comb += [tree.acc.eq(self.acc[t]), self.sum[t].eq(tree.sum)]
        return m
