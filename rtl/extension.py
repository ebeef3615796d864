"""The T-SAR additions to the port: operand-bus MUXes, the 4:1 reduction trees, the LUT-group
buffer, write-back MUX, sequencer.

TLUT and TGEMV run their lane add/subtracts on the base ALU (word mode, :mod:`.schedule`). Two
additions are not muxes: the AVX2 port has no 4:1 reduction with accumulator (``vpmaddwd`` adds
pairs), so TGEMV's adder trees are added (:class:`~tsar.rtl.adder_tree.AdderTrees`, block
``tsar_trees``); and every TGEMV uop needs the whole LUT group (each lane picks from its block's
tables) besides the accumulator and the weights, more registers than the register file's three
read ports give in one cycle, so the group is held in the slice (:class:`LutBuffer`).

ISA variants (:class:`~tsar.isa.config.TsarConfig` axes) change what the MUXes select and how wide
the merged words are:

* compact LUT (S tables only): TLUT writes the S registers only (``cfg.tlut_uops``); TGEMV's lanes
  get ``S_b[idxD] << 1`` (the shift is wiring) and ``S_b[idxS]``, and the code-independent term
  ``-sum_b S_b[2^c-1]`` is *folded into the adder trees*: :class:`SegmentConstant` sums it once
  from fixed words of the LUT buffer (``s - 1`` adders, block ``tsar_operands``) and every tree adds
  it as one more input beside its pair sums (``T`` adders, no deeper tree). The alternative, a
  third operand on every lane, would put a 3:2 compressor row (``lanes`` x ``lut_bits`` full adders)
  and a third MUX in front of the shared ALU: the folded form is the cheaper honest hardware;
* int32 accumulators: tree ``t`` takes and returns 32-bit accumulator words (``cfg.acc_bits``;
  one write-back merge per accumulator width), and lane results enter the trees with their carry
  (exact ``lut_bits + 1``-bit differences, as the semantics add the words in int32).

LUT-group read policy (``lut_read``):

* ``"ports"``: every TGEMV first reads its group through the three read ports into the buffer,
  ``ceil(group_regs / 3)`` extra cycles (c2s4: 1, c4s4: 3);
* ``"latch"``: the buffer keeps the group a TLUT wrote (it snoops the TLUT's writes) with a tag;
  a TGEMV whose group is the tagged one reads no group registers. Any other write into the group
  clears the tag; a miss loads the group as in ``"ports"``.
"""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2

from tsar.isa.config import ADDER_TREE_FAN_IN, TsarConfig
from tsar.rtl.alu import WIDE_BITS
from tsar.rtl.alu import WORD_BITS as LANE_BITS
from tsar.rtl.base import SliceOp, instr_layout
from tsar.rtl.regfile import READ_PORTS, reg_bits
from tsar.rtl.schedule import (
    TGEMV_STEP,
    LaneOp,
    LutTerm,
    Source,
    SrcKind,
    check_tgemv,
    tgemv_lane,
    tgemv_lane_step,
    tgemv_output,
    tlut_cycles,
    tlut_schedule,
)


def _width(n: int) -> int:
    return max(1, bits_for(max(0, n - 1)))


class OperandPlan:
    """The operand sources each lane needs, derived from the uop schedules of ``configs``.

    Lane ``l``'s A operand MUX has inputs ``a_sources[l]`` (index 0 is the base operand bus), and
    likewise for B; the sequencer's uop ROM stores the indices.

    A configuration is refused (ValueError naming the axis) unless its LUT entries are the ALU's
    :data:`~tsar.rtl.alu.WORD_BITS` (``lut_bits``), its accumulator words fit the trees'
    :data:`~tsar.rtl.alu.WIDE_BITS` (``acc_bits``), its weight codes are split codes, its ``s``
    equals the adder-tree fan-in (the split trees of :mod:`.schedule` for smaller ``s`` are not
    implemented in RTL), its weights fit a register pair and its schedules exist
    (:class:`~tsar.rtl.schedule.ScheduleError`, e.g. a compact LUT with int32 accumulators).
    """

    def __init__(self, vector_bits: int, configs: Sequence[TsarConfig]):
        self.configs = tuple(configs)
        self.vector_bits = vector_bits
        self.reg_bits = reg_bits(vector_bits)
        self.instr_layout = instr_layout(len(self.configs), vector_bits)
        self.lanes = vector_bits // LANE_BITS
        self.trees = self.lanes // ADDER_TREE_FAN_IN
        for cfg in self.configs:
            if cfg.vector_bits != vector_bits:
                raise ValueError(f"{cfg.name} is a {cfg.vector_bits}-bit configuration")
            if cfg.lut_bits != LANE_BITS:
                raise ValueError(f"{cfg.name}: lut_bits={cfg.lut_bits} is not supported by the RTL: "
                                 f"the slice's lanes are {LANE_BITS}-bit")
            if cfg.weight_code != "split":
                raise ValueError(f"{cfg.name}: weight_code={cfg.weight_code!r} is not supported by the "
                                 "slice: its operand MUXes take split codes (idxD | idxS << c)")
            if not cfg.lut_bits <= cfg.acc_bits <= WIDE_BITS:
                raise ValueError(f"{cfg.name}: acc_bits={cfg.acc_bits} is not supported by the RTL: "
                                 f"its adder trees sum {WIDE_BITS}-bit words")
            check_tgemv(cfg)
            if cfg.s != ADDER_TREE_FAN_IN:
                raise ValueError(f"{cfg.name}: s={cfg.s} < adder-tree fan-in {ADDER_TREE_FAN_IN} needs "
                                 "split adder trees (tsar.rtl.schedule), not implemented in the RTL")
            if cfg.weight_regs > 2:
                raise ValueError(f"{cfg.name}: weights wider than a register pair")
            tlut_schedule(cfg)
        self.lut_bits = LANE_BITS
        self.wide_lanes = any(cfg.acc_bits > cfg.lut_bits for cfg in self.configs)
        """Whether lane results enter the trees with their carry (some accumulator is wider than a
        LUT word; else the carry cannot reach the kept bits and is left out)."""
        self.constants = any(tgemv_lane_step(cfg).constant for cfg in self.configs)
        """Whether the trees take a segment constant (some configuration has a compact LUT)."""
        base = [Source(SrcKind.BASE)]
        self.a_sources = [[*base, TGEMV_STEP.a] for _ in range(self.lanes)]
        self.b_sources = [[*base, TGEMV_STEP.b] for _ in range(self.lanes)]
        for cfg in self.configs:
            for uop in tlut_schedule(cfg):
                for lane, step in enumerate(uop.steps):
                    for sources, src in ((self.a_sources[lane], step.a), (self.b_sources[lane], step.b)):
                        if src not in sources:
                            sources.append(src)
        self.sel_bits = max(_width(len(s)) for s in self.a_sources + self.b_sources)
        self.max_uops = max([1] + [max(tlut_cycles(c), c.tgemv_uops) for c in self.configs])
        self.max_group_regs = max([1] + [c.group_regs for c in self.configs])
        self.max_k = max([1] + [c.k for c in self.configs])
        self.max_loads = max([1] + [load_cycles(c) for c in self.configs])

    def select(self, lane: int, side: str, src: Source) -> int:
        return (self.a_sources if side == "a" else self.b_sources)[lane].index(src)

    def acc_word(self, cfg: TsarConfig, uop: int, tree: int) -> int:
        """Accumulator word (of ``cfg.acc_bits``) that adder tree ``tree`` finishes in TGEMV uop
        ``uop`` (``s = F``: segment = tree)."""
        return tgemv_output(cfg, uop, tree)

    def acc_groups(self) -> dict[int, list[int]]:
        """Configuration indices by accumulator width (one write-back merge per width)."""
        out: dict[int, list[int]] = {}
        for index, cfg in enumerate(self.configs):
            out.setdefault(cfg.acc_bits, []).append(index)
        return out


def load_cycles(cfg: TsarConfig) -> int:
    """Cycles to read a LUT group through the register file's read ports."""
    return -(-cfg.group_regs // READ_PORTS)


LUT_READ_POLICIES = ("ports", "latch")


class TsarSequencer(wiring.Component):
    """Control/scoreboard: counts the uop cycles of TLUT (:func:`~tsar.rtl.schedule.tlut_cycles`:
    a register written in two passes takes two) and TGEMV and drives the uop ROM.

    A T-SAR instruction starts when ``start_ok`` (nothing in flight). A TGEMV first spends
    ``load_cycles`` cycles (``loading``, ``load_step``) reading its group into the buffer unless
    the policy is ``"latch"`` and the buffer hits (``hit``). Per uop it drives each lane's operation and
    operand selects and the TLUT destination register offset; ``tlut`` / ``tgemv`` mark uop cycles
    (they write back); ``done`` the last one.
    """

    def __init__(self, plan: OperandPlan, lut_read: str):
        self.plan, self.lut_read = plan, lut_read
        n, sel = plan.lanes, plan.sel_bits
        super().__init__({
            "ir_valid": In(1),
            "ir": In(plan.instr_layout),
            "start_ok": In(1),
            "hit": In(1),
            "done": Out(1),
            "loading": Out(1),
            "load_step": Out(range(plan.max_loads)),
            "load_last": Out(1),
            "stall": Out(1),
            "uop": Out(_width(plan.max_uops)),
            "tlut": Out(1),
            "tgemv": Out(1),
            "lane_op": Out(LaneOp).array(n),
            "a_sel": Out(sel).array(n),
            "b_sel": Out(sel).array(n),
            "reg_offset": Out(plan.reg_bits),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        plan, ir = self.plan, self.ir
        last = Signal.like(self.uop)
        last_load = Signal.like(self.load_step)
        loaded = Signal()
        tlut_ir = self.ir_valid & (ir.op == SliceOp.TLUT)
        tgemv_ir = self.ir_valid & (ir.op == SliceOp.TGEMV)
        started = Signal()  # a T-SAR instruction in the register has begun (nothing in flight)
        active = Signal()
        need_load = tgemv_ir & ~loaded & (~self.hit if self.lut_read == "latch" else 1)
        m.d.comb += [
            active.eq((tlut_ir | tgemv_ir) & (started | self.start_ok)),
            self.loading.eq(active & need_load),
            self.load_last.eq(self.load_step == last_load),
            self.tlut.eq(active & tlut_ir),
            self.tgemv.eq(active & tgemv_ir & ~need_load),
            self.done.eq((self.tlut | self.tgemv) & (self.uop == last)),
            self.stall.eq((tlut_ir | tgemv_ir) & ~self.done),
        ]
        with m.If(self.done | ~(tlut_ir | tgemv_ir)):
            m.d.sync += [started.eq(0), loaded.eq(0), self.uop.eq(0), self.load_step.eq(0)]
        with m.Else():
            m.d.sync += started.eq(active)
            with m.If(self.loading):
                m.d.sync += self.load_step.eq(self.load_step + 1)
                with m.If(self.load_step == last_load):
                    m.d.sync += [loaded.eq(1), self.load_step.eq(0)]
            with m.Elif(self.tlut | self.tgemv):
                m.d.sync += self.uop.eq(self.uop + 1)
        with m.Switch(ir.cfg):
            for index, cfg in enumerate(plan.configs):
                with m.Case(index):
                    m.d.comb += last_load.eq(load_cycles(cfg) - 1)
                    with m.If(ir.op == SliceOp.TLUT):
                        m.d.comb += last.eq(tlut_cycles(cfg) - 1)
                        with m.Switch(self.uop):
                            for u, uop in enumerate(tlut_schedule(cfg)):
                                with m.Case(u):
                                    m.d.comb += self._drive(uop.steps)
                                    m.d.comb += self.reg_offset.eq(uop.reg)
                    with m.Else():
                        m.d.comb += last.eq(cfg.tgemv_uops - 1)
        with m.If(self.tgemv):
            m.d.comb += self._drive([TGEMV_STEP] * plan.lanes)
        return m

    def _drive(self, steps) -> list:
        out = []
        for lane, step in enumerate(steps):
            out += [
                self.lane_op[lane].eq(step.op),
                self.a_sel[lane].eq(self.plan.select(lane, "a", step.a)),
                self.b_sel[lane].eq(self.plan.select(lane, "b", step.b)),
            ]
        return out


class TsarOperandMux(wiring.Component):
    """Operand-bus input MUXes in front of the lanes and the adder trees' accumulator inputs.

    Lane ``l`` gets, by its A/B select: the base operand (word ``l`` of ``src1`` / ``src2``); for
    TGEMV the two LUT words of :func:`~tsar.rtl.schedule.tgemv_lane_step` picked by the weight codes
    of output ``j = uop*T + t`` (``l = t*s + b``: ``D_b[idxD]`` / ``S_b[idxS]``, or in the compact
    layout ``S_b[idxD] << 1`` / ``S_b[idxS]``); for TLUT a sign-extended activation byte of
    ``src2``, zero, another lane's result, or a word of the LUT group. The tree accumulators get the
    ``dst`` dwords (base dot product) or the accumulator words ``j`` (TGEMV, ``acc_bits`` each,
    sign-extended); ``tree_const`` (only where a configuration has one) is the segment constant
    (:class:`SegmentConstant`, a submodule).

    ``isolate``: input ``en`` (a T-SAR instruction is in the instruction register) AND-gates the
    weight codes in front of the LUT-word lookup and the accumulator register (``acc``; passed on
    gated as ``acc_gated`` to the write-back merge), so the lookup MUXes, the accumulator selects
    and the merge hold still on base operations (the base operand path through the lane MUXes is
    not gated).
    """

    def __init__(self, plan: OperandPlan, isolate: bool = False):
        self.plan = plan
        self.isolate = isolate
        n, bits = plan.lanes, plan.vector_bits
        super().__init__({
            "cfg": In(plan.instr_layout.members["cfg"]),
            "uop": In(_width(plan.max_uops)),
            "tgemv": In(1),
            "a_sel": In(plan.sel_bits).array(n),
            "b_sel": In(plan.sel_bits).array(n),
            "src1": In(bits),
            "src2": In(bits),
            "src2_hi": In(bits),
            "acc": In(bits),
            "group": In(bits * plan.max_group_regs),
            "lane_result": In(LANE_BITS).array(n),
            **({"en": In(1), "acc_gated": Out(bits)} if isolate else {}),
            "a": Out(LANE_BITS).array(n),
            "b": Out(LANE_BITS).array(n),
            "tree_acc": Out(signed(WIDE_BITS)).array(plan.trees),
            **({"tree_const": Out(signed(WIDE_BITS))} if plan.constants else {}),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        plan = self.plan
        acc = self.acc
        if self.isolate:
            acc = Signal.like(self.acc, name="acc_iso")
            m.d.comb += [acc.eq(self.acc & self.en.replicate(len(self.acc))), self.acc_gated.eq(acc)]
        lut_a = [Signal(plan.lut_bits, name=f"lut_a{i}") for i in range(plan.lanes)]
        lut_b = [Signal(plan.lut_bits, name=f"lut_b{i}") for i in range(plan.lanes)]
        with m.Switch(self.cfg):
            for index, cfg in enumerate(plan.configs):
                with m.Case(index):
                    m.d.comb += self._lookup(cfg, lut_a, lut_b)
        tree_acc = [Signal(signed(WIDE_BITS), name=f"tgemv_acc{t}") for t in range(plan.trees)]
        groups = plan.acc_groups()
        for indices in groups.values():  # one accumulator-word select per accumulator width
            cfg = plan.configs[indices[0]]
            picked = []
            for t in range(plan.trees):  # s = F: tree t finishes accumulator word uop*T + t
                words = [acc.word_select(plan.acc_word(cfg, u, t), cfg.acc_bits)
                         for u in range(cfg.tgemv_uops)]
                picked.append(tree_acc[t].eq((Array(words)[self.uop] if len(words) > 1
                                              else words[0]).as_signed()))
            if len(groups) == 1:
                m.d.comb += picked
            else:
                with m.If(Cat(*(self.cfg == i for i in indices)).any()):
                    m.d.comb += picked
        if plan.constants:
            m.submodules.segment_constant = const = SegmentConstant(plan)
            m.d.comb += [const.cfg.eq(self.cfg), const.group.eq(self.group),
                         self.tree_const.eq(const.value)]

        def word(bus: Signal, i: int):
            return bus.word_select(i, LANE_BITS)

        def value(lane: int, side: str, src: Source):
            if src.kind is SrcKind.BASE:
                return word(self.src1 if side == "a" else self.src2, lane)
            if src.kind is SrcKind.LUT_A:
                return lut_a[lane]
            if src.kind is SrcKind.LUT_B:
                return lut_b[lane]
            if src.kind is SrcKind.ZERO:
                return Const(0, LANE_BITS)
            if src.kind is SrcKind.ACT:
                return self.src2.word_select(src.index, 8).as_signed()
            if src.kind is SrcKind.LANE:
                return self.lane_result[src.index]
            if src.kind is SrcKind.GROUP:
                return self.group.word_select(src.reg * plan.lanes + src.index, plan.lut_bits) << src.shift
            raise AssertionError(src)

        for lane in range(plan.lanes):
            for side, sel, out, sources in (("a", self.a_sel, self.a, plan.a_sources),
                                            ("b", self.b_sel, self.b, plan.b_sources)):
                with m.Switch(sel[lane]):
                    for i, src in enumerate(sources[lane]):
                        with m.Case(i):
                            m.d.comb += out[lane].eq(value(lane, side, src))
        for t in range(plan.trees):
            m.d.comb += self.tree_acc[t].eq(Mux(self.tgemv, tree_acc[t],
                                                acc.word_select(t, WIDE_BITS).as_signed()))
        return m

    def _table(self, cfg: TsarConfig, block: int, term: LutTerm) -> list:
        """The ``2^c`` words of ``term``'s table of ``block``, each shifted by ``term.shift`` and
        kept to ``lut_bits`` (the shift is wiring)."""
        return [(self.group.word_select(cfg.word_index(block, term.table, p), cfg.lut_bits)
                 << term.shift)[:cfg.lut_bits] for p in range(cfg.patterns)]

    def _lookup(self, cfg: TsarConfig, lut_a: list[Signal], lut_b: list[Signal]) -> list:
        """The A/B LUT words of every lane for one configuration, selected by its weight codes."""
        weights = Cat(self.src2, self.src2_hi)
        if self.isolate:
            weights = weights & self.en.replicate(len(weights))
        step = tgemv_lane_step(cfg)
        out = []
        for lane in range(self.plan.lanes):
            tree, block = tgemv_lane(cfg, lane)
            codes = []
            for u in range(cfg.tgemv_uops):
                offset, bits = cfg.code_field(tgemv_output(cfg, u, tree), block)
                codes.append(weights[offset:offset + bits])
            code = Array(codes)[self.uop] if len(codes) > 1 else codes[0]
            sel = ceil_log2(cfg.patterns)  # select bits of a table of 2^c entries
            index = dict(zip(("idxD", "idxS"), (idx[:sel] for idx in cfg.code_indices(code)),
                             strict=True))
            for term, target in ((step.a, lut_a), (step.b, lut_b)):
                out.append(target[lane].eq(Array(self._table(cfg, block, term))[index[term.index]]))
        return out


class SegmentConstant(wiring.Component):
    """The code-independent TGEMV terms, summed over the blocks (:func:`~tsar.rtl.schedule.tgemv_lane_step`
    ``.constant``; compact LUT: ``-sum_b S_b[2^c-1]``), for the configuration in the instruction
    register: ``s - 1`` adders on fixed words of the LUT buffer, shared by every tree and uop;
    zero for a configuration without such terms."""

    def __init__(self, plan: OperandPlan):
        self.plan = plan
        super().__init__({
            "cfg": In(plan.instr_layout.members["cfg"]),
            "group": In(plan.vector_bits * plan.max_group_regs),
            "value": Out(signed(WIDE_BITS)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        with m.Switch(self.cfg):
            for index, cfg in enumerate(self.plan.configs):
                terms = tgemv_lane_step(cfg).constant
                if not terms:
                    continue
                plus = [self._word(cfg, b, t) for t in terms if t.sign > 0 for b in range(cfg.s)]
                minus = [self._word(cfg, b, t) for t in terms if t.sign < 0 for b in range(cfg.s)]
                total = sum(plus[1:], plus[0]) if plus else None
                for w in minus:
                    total = -w if total is None else total - w
                with m.Case(index):
                    m.d.comb += self.value.eq(total)
        return m

    def _word(self, cfg: TsarConfig, block: int, term: LutTerm):
        pattern = cfg.term_pattern(term.index, 0)
        word = self.group.word_select(cfg.word_index(block, term.table, pattern), cfg.lut_bits)
        return (word.as_signed() << term.shift)


class TsarWriteBackMux(wiring.Component):
    """The write-back MUX (``vector_bits`` wide: 256 bits on AVX2, 512 on AVX-512).

    TLUT: the lane results go to group register ``dst + reg_offset``. TGEMV: adder tree ``t``'s
    low ``acc_bits`` replace accumulator word ``uop*T + t`` (``acc_bits`` of the configuration: one
    merge per accumulator width, selected by the configuration); the other words are written back
    unchanged (fused accumulation, one full-register write per uop). Otherwise the base write-back
    passes through.
    """

    def __init__(self, plan: OperandPlan):
        self.plan = plan
        n, bits = plan.lanes, plan.vector_bits
        super().__init__({
            "cfg": In(plan.instr_layout.members["cfg"]),
            "tlut": In(1),
            "tgemv": In(1),
            "uop": In(_width(plan.max_uops)),
            "dst": In(plan.reg_bits),
            "reg_offset": In(plan.reg_bits),
            "base_en": In(1),
            "base_addr": In(plan.reg_bits),
            "base_data": In(bits),
            "lane_result": In(LANE_BITS).array(n),
            "tree_sum": In(signed(WIDE_BITS)).array(plan.trees),
            "acc": In(bits),
            "en": Out(1),
            "addr": Out(plan.reg_bits),
            "data": Out(bits),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        plan = self.plan
        merges = []
        for bits, indices in plan.acc_groups().items():
            cfg = plan.configs[indices[0]]
            source = {plan.acc_word(cfg, u, t): (u, t) for u in range(cfg.tgemv_uops)
                      for t in range(plan.trees)}
            merged = []
            for w in range(plan.vector_bits // bits):
                u, t = source[w]
                merged.append(Signal(bits, name=f"acc{bits}_word{w}"))
                m.d.comb += merged[-1].eq(Cat(self.acc.word_select(w, bits), self.tree_sum[t][:bits])
                                          .word_select(self.uop == u, bits))
            merges.append((indices, Cat(*merged)))
        tgemv_data = Signal(plan.vector_bits)
        if len(merges) == 1:
            m.d.comb += tgemv_data.eq(merges[0][1])
        else:
            with m.Switch(self.cfg):
                for indices, value in merges:
                    with m.Case(*indices):
                        m.d.comb += tgemv_data.eq(value)
        m.d.comb += [
            self.en.eq(self.base_en | self.tlut | self.tgemv),
            self.addr.eq(Mux(self.tlut | self.tgemv, self.dst | Mux(self.tlut, self.reg_offset, 0),
                             self.base_addr)),
        ]
        with m.If(self.tlut):
            m.d.comb += self.data.eq(Cat(*self.lane_result))
        with m.Elif(self.tgemv):
            m.d.comb += self.data.eq(tgemv_data)
        with m.Else():
            m.d.comb += self.data.eq(self.base_data)
        return m


class LutBuffer(wiring.Component):
    """The LUT-group buffer: ``max_group_regs`` registers of flip-flops in the slice.

    Written by the group loads of TGEMV (``load``: registers ``3*load_step + i`` from read port
    ``i``) and by every TLUT uop (its group register ``reg_offset``, which is also what the c = 4
    read-back reads). With ``lut_read = "latch"`` it keeps a tag (group register, configuration):
    set when a TLUT or a load completes, cleared by a TLUT write or by any other write into the
    tagged group; ``hit`` when the TGEMV in the instruction register names the tagged group.
    """

    def __init__(self, plan: OperandPlan, lut_read: str):
        self.plan, self.lut_read = plan, lut_read
        bits = plan.vector_bits
        cfg_shape = plan.instr_layout.members["cfg"]
        super().__init__({
            "load": In(1),
            "load_step": In(range(plan.max_loads)),
            "load_last": In(1),
            "port_data": In(bits).array(READ_PORTS),
            "tlut": In(1),
            "tlut_done": In(1),
            "reg_offset": In(plan.reg_bits),
            "tlut_data": In(bits),
            "wb_en": In(1),
            "wb_addr": In(plan.reg_bits),
            "cfg": In(cfg_shape),
            "dst": In(plan.reg_bits),
            "src1": In(plan.reg_bits),
            "group": Out(bits * plan.max_group_regs),
            "hit": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        plan = self.plan
        regs = [Signal(plan.vector_bits, name=f"lut{r}") for r in range(plan.max_group_regs)]
        m.d.comb += self.group.eq(Cat(*regs))
        with m.If(self.load), m.Switch(self.load_step):
            for step in range(plan.max_loads):
                with m.Case(step):
                    for i in range(READ_PORTS):
                        if READ_PORTS * step + i < plan.max_group_regs:
                            m.d.sync += regs[READ_PORTS * step + i].eq(self.port_data[i])
        with m.If(self.tlut), m.Switch(self.reg_offset):
            for r in range(plan.max_group_regs):
                with m.Case(r):
                    m.d.sync += regs[r].eq(self.tlut_data)
        if self.lut_read != "latch":
            return m
        valid = Signal()
        tag = Signal(plan.reg_bits)
        tag_cfg = Signal.like(self.cfg)
        group_regs = Signal(range(plan.max_group_regs + 1))
        with m.Switch(tag_cfg):
            for index, cfg in enumerate(plan.configs):
                with m.Case(index):
                    m.d.comb += group_regs.eq(cfg.group_regs)
        inside = (self.wb_addr >= tag) & (self.wb_addr < tag + group_regs)
        m.d.comb += self.hit.eq(valid & (tag == self.src1) & (tag_cfg == self.cfg))
        with m.If(self.tlut_done):
            m.d.sync += [valid.eq(1), tag.eq(self.dst), tag_cfg.eq(self.cfg)]
        with m.Elif(self.load & self.load_last):
            m.d.sync += [valid.eq(1), tag.eq(self.src1), tag_cfg.eq(self.cfg)]
        with m.Elif(self.tlut | (self.wb_en & inside)):
            m.d.sync += valid.eq(0)
        return m
