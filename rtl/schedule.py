"""Micro-op schedules of TLUT and TGEMV on the base SIMD lanes and adder trees.

Everything here is derived from a :class:`~tsar.isa.config.TsarConfig` (LUT word layout
``cfg.word_index`` / ``cfg.word_meaning``, code split ``cfg.code_indices``, widths ``cfg.lut_bits`` /
``cfg.acc_bits``); the RTL (operand MUXes, sequencer ROM) is generated from these schedules, and
:func:`run_tlut_schedule` / :func:`run_tgemv_schedule` execute them in numpy so that a schedule can
be checked against the golden semantics without simulating any hardware (:func:`check_schedules`).

**TLUT** (``cfg.tlut_uops`` uops, each writes one register of the group): lane ``l`` of uop ``u``
computes word ``l`` of group register ``reg(u)`` with one add or subtract of two operands taken from
the operand bus:

* ``ZERO``, ``ACT i`` (activation byte ``i`` of the source register, sign-extended);
* ``LANE j``: the result of lane ``j`` in the same cycle (lane-to-lane forwarding, used for the words
  of ``c >= 2`` that need more than two terms). A chain of forwarded lanes is a chain of adders in
  one cycle: the datapath allows at most :data:`LANE_CHAIN` (two) chained lane operations, and
  :func:`tlut_schedule` refuses configurations that need more (``c = 3``, whose ``D[0] =
  -(a0+a1+a2)`` shares a register with its S table and needs three; see :func:`lane_chain`);
* ``GROUP r w << n``: word ``w`` of group register ``r`` written by an earlier uop, shifted left by
  ``n`` (used by ``c = 4``: ``D[p] = 2*S[p] - S[2^c - 1]``, so the D register follows its S register).
  Where a block's D and S tables share one register (``c = 4`` on 512 bits), the register is
  written in two passes, its S words first (:func:`tlut_schedule`): :func:`tlut_cycles` is then
  ``cfg.tlut_uops`` plus one per such register. In one pass the D words would chain three lane
  operations (``S[p] = S[lo] + S[hi]``, then ``D[p] = S[p] - S[~p]``), one more than the lanes do.

**TGEMV** (``cfg.tgemv_uops`` uops, :func:`tgemv_schedule`): every lane subtracts two LUT words
that the operand MUXes select with the weight codes (:func:`tgemv_lane_step`, derived from
``cfg.tgemv_terms()``): ``D_b[idxD] - S_b[idxS]`` in the full layout, ``2*S_b[idxD] - S_b[idxS]``
in the compact one (the doubling is a one-bit left shift of the A word: wiring). A term that does
not depend on the code (the compact layout's ``-S_b[2^c-1]``) is not a lane input: summed over the
segment's blocks it is one *segment constant* (``-sum_b S_b[2^c-1]``, the same for every segment
and uop of the instruction) that each adder tree takes as one more input (cheaper than a third
operand on every lane: ``T`` tree adders and ``s - 1`` shared adders instead of a 3:2 compressor row
in front of all ``lanes`` ALU words). The lanes form *segments* of ``s`` consecutive lanes, lane
``l = q*s + b`` doing block ``b`` of the output of segment ``q``; in uop ``u`` segment ``q``
finishes output ``j = u*P + q`` (``P = cfg.outputs_per_uop = lanes / s`` segments). The adder
trees (fan-in :data:`~tsar.isa.config.ADDER_TREE_FAN_IN` ``= F``, one per ``F`` lanes) add each
segment's ``s`` lanes, the segment constant and accumulator word ``j``; the write-back MUX puts the
``P`` sums into words ``u*P .. u*P+P-1`` of the accumulator (``acc_bits`` each), keeping the others.

* ``s = F`` (the paper's configurations): one segment per tree, the tree's root is the sum.
* ``s`` a proper divisor of ``F`` (e.g. ``c3s2``): each tree is *split* into ``F/s`` segments. A tree
  of ``F`` inputs plus an accumulator is ``F`` two-input adders; a segment needs ``s`` of them
  (``s - 1`` to reduce its lanes, one to add its accumulator word), so the split uses exactly the
  tree's adders: each segment's sum is the tree node at level ``log2(s)`` and the adders above that
  level are re-pointed, by input MUXes, at the segments' accumulator words. No adder and no zero
  input is added, which is what makes ``P = lanes / s`` outputs per uop (the ISA's uop count)
  honest. The split-tree MUXes are not in the Amaranth slice yet: :class:`~tsar.rtl.extension.OperandPlan`
  refuses ``s != F`` with a ValueError, while the numpy schedule here executes it.
* ``s`` not dividing ``F`` (or ``s > F``): no schedule (:class:`ScheduleError`).

Widths: a lane's operands are ``cfg.lut_bits`` words (a shifted A word wraps there) and its result
is taken with the adder's carry, ``lut_bits + 1`` bits (:data:`LANE_CARRY`), exact for the difference
of two words; the trees sum in :data:`~tsar.rtl.alu.WIDE_BITS` and the write-back keeps the low
``cfg.acc_bits`` of each sum. This equals the semantics (which add the words in the accumulator's
width) for every group, also one a base instruction overwrote, except where a shifted word would
need more than ``lut_bits`` with accumulators wider than the LUT words (compact with ``acc_bits =
32``): :func:`tgemv_lane_step` refuses that.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cache

import numpy as np
from amaranth.lib import enum as hw_enum

from tsar.common.errors import UserError
from tsar.isa import semantics
from tsar.isa.config import ADDER_TREE_FAN_IN, TsarConfig

LANE_CHAIN = 2
"""Most lane operations the datapath chains in one cycle by lane-to-lane forwarding (a lane that
reads a forwarded lane, which itself reads no forwarded lane): a datapath parameter of the
schedules, not of the ISA."""


class LaneOp(hw_enum.Enum, shape=2):
    """Operation of one ALU lane (also the RTL encoding of the lane's ``op`` input)."""

    ADD = 0
    SUB = 1
    MUL = 2


class SrcKind(Enum):
    """Where a lane operand comes from."""

    BASE = "base"  # the base operand bus: word l of the instruction's register operand
    LUT_A = "lut_a"  # TGEMV: the lane's minuend, a LUT word selected by the weight code (TgemvLane.a)
    LUT_B = "lut_b"  # TGEMV: the lane's subtrahend, selected by the weight code (TgemvLane.b)
    ZERO = "zero"
    ACT = "act"  # TLUT: sign-extended activation byte ``index``
    LANE = "lane"  # TLUT: same-cycle result of lane ``index``
    GROUP = "group"  # TLUT: word ``index`` of group register ``reg``, shifted left by ``shift``


@dataclass(frozen=True)
class Source:
    kind: SrcKind
    index: int = 0
    reg: int = 0
    shift: int = 0

    def __str__(self) -> str:
        if self.kind is SrcKind.ACT:
            return f"a{self.index}"
        if self.kind is SrcKind.LANE:
            return f"lane{self.index}"
        if self.kind is SrcKind.GROUP:
            text = f"g{self.reg}[{self.index}]"
            return f"({text}<<{self.shift})" if self.shift else text
        return self.kind.value


ZERO = Source(SrcKind.ZERO)


@dataclass(frozen=True)
class LaneStep:
    """One lane's work in one uop: ``a op b``."""

    op: LaneOp
    a: Source
    b: Source

    def __str__(self) -> str:
        sign = {LaneOp.ADD: "+", LaneOp.SUB: "-", LaneOp.MUL: "*"}[self.op]
        return f"{self.a} {sign} {self.b}"


@dataclass(frozen=True)
class TlutUop:
    """One TLUT uop: writes group register ``reg`` with the results of ``steps`` (one per lane)."""

    reg: int
    steps: tuple[LaneStep, ...]


TGEMV_STEP = LaneStep(LaneOp.SUB, Source(SrcKind.LUT_A), Source(SrcKind.LUT_B))
"""Every lane of every TGEMV uop: ``A - B``, the two code-selected words of :func:`tgemv_lane_step`."""

LANE_CARRY = 1
"""Bits a lane result carries beyond its ``lut_bits`` operands (the adder's carry-out: a sum or
difference of two words is exact in ``lut_bits + 1`` bits)."""


@dataclass(frozen=True)
class LutTerm:
    """One lookup of TGEMV: entry ``index`` (``"idxD"``, ``"idxS"``: the code's fields; ``"all"``:
    pattern ``2^c - 1``) of table ``table`` of the lane's block, shifted left by ``shift`` (times
    ``2^shift``), with sign ``sign`` (+1 / -1)."""

    table: str
    index: str
    shift: int = 0
    sign: int = 1

    def __str__(self) -> str:
        text = f"{self.table}_b[{self.index}]"
        return f"2^{self.shift}*{text}" if self.shift else text


@dataclass(frozen=True)
class TgemvLane:
    """The TGEMV lane step of a configuration: ``a - b`` (each a code-selected word, ``a`` possibly
    shifted) and the code-independent terms ``constant`` that the adder tree adds per segment
    (summed over the segment's blocks)."""

    a: LutTerm
    b: LutTerm
    constant: tuple[LutTerm, ...]

    def __str__(self) -> str:
        text = f"{self.a} - {self.b}"
        for t in self.constant:
            text += f"; tree {'+' if t.sign > 0 else '-'} sum_b {t}"
        return text


class ScheduleError(UserError, ValueError):
    """The configuration has no schedule on this datapath (no extra adders are allowed)."""


@cache
def tgemv_lane_step(cfg: TsarConfig) -> TgemvLane:
    """The lane step of ``cfg``'s TGEMV, from ``cfg.tgemv_terms()``: the terms indexed by a code
    field are the lane's operands (one positive, one negative; a coefficient ``2^n`` is a shift by
    ``n``), the terms of a fixed pattern are segment constants. ScheduleError when the terms do not
    map onto one lane subtraction, or a shifted word would have to be exact beyond ``lut_bits``
    (``acc_bits > lut_bits``)."""
    lane, constant = [], []
    for table, index, coef in cfg.tgemv_terms():
        shift = abs(coef).bit_length() - 1
        if abs(coef) != 1 << shift:
            raise ScheduleError(f"{cfg.name}: TGEMV coefficient {coef} is not a power of two")
        term = LutTerm(table, index, shift, 1 if coef > 0 else -1)
        (constant if index == "all" else lane).append(term)
    plus = [t for t in lane if t.sign > 0]
    minus = [t for t in lane if t.sign < 0]
    if len(plus) != 1 or len(minus) != 1 or minus[0].shift:
        raise ScheduleError(f"{cfg.name}: TGEMV terms {cfg.tgemv_terms()} are not one lane subtraction")
    if plus[0].shift and cfg.acc_bits > cfg.lut_bits:
        raise ScheduleError(f"{cfg.name}: lut_layout={cfg.lut_layout!r} with acc_bits={cfg.acc_bits} "
                            f"needs {cfg.lut_bits + plus[0].shift + LANE_CARRY}-bit lane results "
                            f"(2^{plus[0].shift} x a {cfg.lut_bits}-bit word); the lanes give "
                            f"{cfg.lut_bits + LANE_CARRY}")
    return TgemvLane(plus[0], minus[0], tuple(constant))


def check_tgemv(cfg: TsarConfig) -> None:
    """TGEMV needs the ``s`` lanes of one output inside one adder tree: ``s`` must divide the trees'
    fan-in (``s = F``: one output per tree; a proper divisor: a split tree, see the module doc), and
    its terms must map onto one lane subtraction (:func:`tgemv_lane_step`)."""
    tgemv_lane_step(cfg)
    if cfg.lanes % ADDER_TREE_FAN_IN or ADDER_TREE_FAN_IN % cfg.s:
        raise ScheduleError(f"{cfg.name}: TGEMV maps s={cfg.s} blocks onto {ADDER_TREE_FAN_IN}:1 adder "
                            f"trees; s must divide {ADDER_TREE_FAN_IN}")


def tree_segments(cfg: TsarConfig) -> int:
    """Outputs each adder tree finishes per TGEMV uop (``F / s``; 1 unless the tree is split)."""
    check_tgemv(cfg)
    return ADDER_TREE_FAN_IN // cfg.s


def tgemv_output(cfg: TsarConfig, uop: int, segment: int) -> int:
    """Accumulator lane finished by lane segment ``segment`` in TGEMV uop ``uop`` (for ``s = F`` the
    segment is the adder tree)."""
    return uop * cfg.outputs_per_uop + segment


def tgemv_lane(cfg: TsarConfig, lane: int) -> tuple[int, int]:
    """``(segment, block)`` of a lane in TGEMV (for ``s = F``: ``(tree, block)``)."""
    return divmod(lane, cfg.s)


@dataclass(frozen=True)
class TgemvUop:
    """One TGEMV uop. Lane ``l`` computes ``D_b[idxD(j,b)] - S_b[idxS(j,b)]`` for
    ``(j, b) = lanes[l]``; segment ``q`` (lanes ``q*s .. q*s+s-1``) is reduced with accumulator word
    ``outputs[q]`` by adder tree ``trees[q]`` and written back to that word."""

    outputs: tuple[int, ...]
    lanes: tuple[tuple[int, int], ...]
    trees: tuple[int, ...]


@cache
def tgemv_schedule(cfg: TsarConfig) -> tuple[TgemvUop, ...]:
    """The TGEMV uops of ``cfg``, in issue order."""
    check_tgemv(cfg)
    uops = []
    for u in range(cfg.tgemv_uops):
        outputs = tuple(tgemv_output(cfg, u, q) for q in range(cfg.outputs_per_uop))
        lanes = []
        for lane in range(cfg.lanes):
            segment, block = tgemv_lane(cfg, lane)
            lanes.append((outputs[segment], block))
        tree_of = tuple(q * cfg.s // ADDER_TREE_FAN_IN for q in range(cfg.outputs_per_uop))
        uops.append(TgemvUop(outputs, tuple(lanes), tree_of))
    done = sorted(j for uop in uops for j in uop.outputs)
    if done != list(range(cfg.m)):
        raise ScheduleError(f"{cfg.name}: TGEMV uops finish outputs {done}, not 0..{cfg.m - 1}")
    return tuple(uops)


def _word_place(cfg: TsarConfig, block: int, table: str, pattern: int) -> tuple[int, int]:
    """(group register, word) of entry ``pattern`` of table ``table`` of block ``block``."""
    return divmod(cfg.word_index(block, table, pattern), cfg.lanes)


def _bits(p: int) -> list[int]:
    return [i for i in range(p.bit_length()) if p >> i & 1]


def _mask(bits: list[int]) -> int:
    return sum(1 << i for i in bits)


def _direct(cfg: TsarConfig, block: int, plus: list[int], minus: list[int]) -> LaneStep | None:
    """One add/sub of activations (or zero), if the word has at most two terms and one positive."""
    act = [Source(SrcKind.ACT, block * cfg.c + i) for i in range(cfg.c)]
    if len(plus) + len(minus) > 2:
        return None
    if not plus:
        return LaneStep(LaneOp.SUB, ZERO, act[minus[0]]) if len(minus) == 1 else (
            LaneStep(LaneOp.ADD, ZERO, ZERO) if not minus else None)
    if minus:
        return LaneStep(LaneOp.SUB, act[plus[0]], act[minus[0]])
    return LaneStep(LaneOp.ADD, act[plus[0]], act[plus[1]] if len(plus) == 2 else ZERO)


def _step(cfg: TsarConfig, reg: int, block: int, table: str, p: int) -> tuple[LaneStep, int | None]:
    """Lane step for entry ``p`` of table ``table`` (``"D"``/``"S"``) of ``block``, and the group
    register it reads back (if any)."""
    full = cfg.patterns - 1
    on = _bits(p)
    off = [i for i in range(cfg.c) if i not in on]

    def act(i: int) -> Source:
        return Source(SrcKind.ACT, block * cfg.c + i)

    def lane_of(tab: str, q: int) -> Source:
        r, w = _word_place(cfg, block, tab, q)
        if r != reg:
            raise ScheduleError(f"{cfg.name}: word {tab}[{q}] is not in the same register")
        return Source(SrcKind.LANE, w)

    if table == "S":
        step = _direct(cfg, block, on, [])
        if step is not None:
            return step, None
        if cfg.c > 4:
            raise ScheduleError(f"{cfg.name}: S words of more than four terms")
        lo, hi = p & 0b11, p & ~0b11 & full  # S[p] = S[lo] + S[hi], each at most two terms
        a = lane_of("S", lo) if len(_bits(lo)) == 2 else act(_bits(lo)[0])
        b = lane_of("S", hi) if len(_bits(hi)) == 2 else act(_bits(hi)[0])
        return LaneStep(LaneOp.ADD, a, b), None
    step = _direct(cfg, block, on, off)
    if step is not None:
        return step, None
    if cfg.c == 2:  # D[0] = -(a0 + a1) = 0 - D[3]
        return LaneStep(LaneOp.SUB, ZERO, lane_of("D", full)), None
    if cfg.c == 3:  # a two-term S word of the same register +- the third activation
        if len(on) >= 2:
            rest = (on[2:] + off)[0]
            return LaneStep(LaneOp.ADD if rest in on else LaneOp.SUB, lane_of("S", _mask(on[:2])),
                            act(rest)), None
        if on:
            return LaneStep(LaneOp.SUB, act(on[0]), lane_of("S", _mask(off))), None
        return LaneStep(LaneOp.SUB, ZERO, lane_of("S", full)), None  # S[full] is forwarded itself
    # D[p] = 2*S[p] - S[all]: read back the S table written by an earlier uop (of this register
    # itself where the register holds both tables: a first pass, see tlut_schedule).
    s_reg, s_word = _word_place(cfg, block, "S", p)
    t_reg, t_word = _word_place(cfg, block, "S", full)
    if t_reg != s_reg:
        raise ScheduleError(f"{cfg.name}: c={cfg.c} needs a block's S table in one register")
    return (LaneStep(LaneOp.SUB, Source(SrcKind.GROUP, s_word, s_reg, 1),
                     Source(SrcKind.GROUP, t_word, t_reg)), s_reg)


def chain_depth(steps: tuple[LaneStep, ...]) -> list[int]:
    """Per lane of one uop: lane operations chained in the cycle to produce its result (1: none
    forwarded; 2: reads a lane that reads none; ...)."""
    depth: dict[int, int] = {}

    def of(lane: int, seen: tuple[int, ...] = ()) -> int:
        if lane in seen:
            raise ScheduleError(f"lane {lane} forwards to itself")
        if lane not in depth:
            step = steps[lane]
            inner = [of(s.index, (*seen, lane)) for s in (step.a, step.b) if s.kind is SrcKind.LANE]
            depth[lane] = 1 + max(inner, default=0)
        return depth[lane]

    return [of(lane) for lane in range(len(steps))]


def _word_name(cfg: TsarConfig, word: int) -> str:
    block, table, pattern = cfg.word_meaning(word)
    return f"{table}{block}[{pattern}]"


ZERO_STEP = LaneStep(LaneOp.ADD, ZERO, ZERO)
"""A lane that writes zero (the words a first pass leaves for the second)."""


@cache
def tlut_schedule(cfg: TsarConfig, lane_chain: int = LANE_CHAIN) -> tuple[TlutUop, ...]:
    """The TLUT cycles of ``cfg``, in issue order: one uop per group register (``cfg.tlut_uops``;
    only the tables of ``cfg.lut_tables`` are written), a register whose D words read back its own
    S table (c = 4 with a block's D and S tables in one register: 512 bits) in two passes, the
    first writing its S words (D words zero), the second the whole register from that read-back.
    ``lane_chain``: the most lane operations the datapath may chain in one cycle
    (:data:`LANE_CHAIN`); a configuration whose words need longer chains raises
    :class:`ScheduleError`."""
    regs: dict[int, tuple[LaneStep, ...]] = {}
    needs: dict[int, set[int]] = {}
    for reg in range(cfg.group_regs):
        steps, deps = [], set()
        for w in range(cfg.lanes):
            block, table, pattern = cfg.word_meaning(reg * cfg.lanes + w)
            step, dep = _step(cfg, reg, block, table, pattern)
            steps.append(step)
            if dep is not None:
                deps.add(dep)
        regs[reg], needs[reg] = tuple(steps), deps
        depth = chain_depth(regs[reg])
        if max(depth) > lane_chain:
            word = reg * cfg.lanes + depth.index(max(depth))
            raise ScheduleError(f"{cfg.name}: {_word_name(cfg, word)} chains {max(depth)} lane "
                                f"operations in one cycle; the lanes chain at most {lane_chain}")
    order: list[int] = []
    while len(order) < len(regs):  # registers read back are written first; else register order
        ready = [r for r in regs if r not in order and needs[r] - {r} <= set(order)]
        order.append(min(ready, key=lambda r: (not any(r in needs[x] for x in regs if x != r), r)))
    if len(order) != cfg.tlut_uops:
        raise ScheduleError(f"{cfg.name}: {len(order)} TLUT uops, the ISA says {cfg.tlut_uops}")
    uops = []
    for r in order:
        if r in needs[r]:
            uops.append(TlutUop(r, _first_pass(cfg, r, regs[r])))
        uops.append(TlutUop(r, regs[r]))
    return tuple(uops)


def _first_pass(cfg: TsarConfig, reg: int, steps: tuple[LaneStep, ...]) -> tuple[LaneStep, ...]:
    """The first pass of a register that reads itself back: the lanes that read it back (or forward
    from one that does) write zero; ScheduleError if the second pass reads back such a word."""
    own = {lane for lane, step in enumerate(steps)
           if any(s.kind is SrcKind.GROUP and s.reg == reg for s in (step.a, step.b))}
    grew = True
    while grew:
        more = {lane for lane, step in enumerate(steps)
                if any(s.kind is SrcKind.LANE and s.index in own for s in (step.a, step.b))}
        grew = bool(more - own)
        own |= more
    read = {s.index for step in steps for s in (step.a, step.b) if s.kind is SrcKind.GROUP and s.reg == reg}
    if read & own:
        word = reg * cfg.lanes + min(read & own)
        raise ScheduleError(f"{cfg.name}: {_word_name(cfg, word)} is read back in the pass that writes it")
    return tuple(ZERO_STEP if lane in own else step for lane, step in enumerate(steps))


def tlut_cycles(cfg: TsarConfig) -> int:
    """Cycles one TLUT of ``cfg`` takes on the slice: ``cfg.tlut_uops``, plus one for each register
    written in two passes (:func:`tlut_schedule`)."""
    return len(tlut_schedule(cfg))


def _wrap(x: np.ndarray, bits: int) -> np.ndarray:
    """Two's-complement wrap-around of ``x`` to ``bits`` (signed, int64)."""
    return ((x + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))


def run_tlut_schedule(cfg: TsarConfig, activations: np.ndarray,
                      lane_chain: int = LANE_CHAIN) -> np.ndarray:
    """Execute :func:`tlut_schedule` in numpy: ``(..., k)`` int8 -> ``(..., group_words)`` LUT words
    (``cfg.lut_dtype``)."""
    act = np.asarray(activations).astype(np.int64)
    group = np.zeros((*act.shape[:-1], cfg.group_regs, cfg.lanes), np.int64)
    bits = cfg.lut_bits
    for uop in tlut_schedule(cfg, lane_chain):
        results: dict[int, np.ndarray] = {}

        def value(src: Source, results: dict[int, np.ndarray] = results) -> np.ndarray:
            if src.kind is SrcKind.ZERO:
                return np.zeros(act.shape[:-1], np.int64)
            if src.kind is SrcKind.ACT:
                return act[..., src.index]
            if src.kind is SrcKind.LANE:
                return results[src.index]
            if src.kind is SrcKind.GROUP:
                return _wrap(group[..., src.reg, src.index] << src.shift, bits)
            raise AssertionError(src)

        pending = list(range(cfg.lanes))
        while pending:  # forwarded lanes first
            for lane in list(pending):
                step = uop.steps[lane]
                deps = [s.index for s in (step.a, step.b) if s.kind is SrcKind.LANE]
                if any(d not in results for d in deps):
                    continue
                a, b = value(step.a), value(step.b)
                results[lane] = _wrap(a + b if step.op is LaneOp.ADD else a - b, bits)
                pending.remove(lane)
        group[..., uop.reg, :] = np.stack([results[w] for w in range(cfg.lanes)], axis=-1)
    return group.reshape(*act.shape[:-1], cfg.group_words).astype(cfg.lut_dtype)


def run_tgemv_schedule(cfg: TsarConfig, acc: np.ndarray, group: np.ndarray,
                       weights: np.ndarray) -> np.ndarray:
    """Execute :func:`tgemv_schedule` in numpy (lanes, then trees, then write-back), like the RTL
    does: a shifted A word wraps to ``lut_bits``, a lane result is exact in ``lut_bits + 1`` bits,
    the trees add the segment constant, each sum wraps to ``acc_bits``; returns ``cfg.acc_dtype``."""
    acc = np.asarray(acc).astype(np.int64).copy()
    table = np.asarray(group).astype(np.int64)
    step = tgemv_lane_step(cfg)
    idx = dict(zip(("idxD", "idxS"), cfg.code_indices(semantics.weight_codes(cfg, weights)),
                   strict=True))  # (..., m, s) each

    def word(term: LutTerm, j: int, b: int) -> np.ndarray:
        pattern = cfg.term_pattern("all", 0) if term.index == "all" else idx[term.index][..., j, b]
        index = np.broadcast_to(cfg.word_index(b, term.table, pattern), table.shape[:-1])
        value = np.take_along_axis(table, index[..., None], -1)[..., 0]
        return _wrap(value << term.shift, cfg.lut_bits)

    constant = sum((t.sign * word(t, 0, b) for t in step.constant for b in range(cfg.s)),
                   np.zeros(table.shape[:-1], np.int64))
    for uop in tgemv_schedule(cfg):
        lanes = [_wrap(word(step.a, j, b) - word(step.b, j, b), cfg.lut_bits + LANE_CARRY)
                 for j, b in uop.lanes]
        for q, j in enumerate(uop.outputs):
            total = acc[..., j] + constant + sum(lanes[q * cfg.s:(q + 1) * cfg.s])
            acc[..., j] = _wrap(total, cfg.acc_bits)
    return acc.astype(cfg.acc_dtype)


def check_schedules(cfg: TsarConfig, samples: int = 2000, seed: int = 0,
                    lane_chain: int = LANE_CHAIN) -> None:
    """Check the TLUT and TGEMV schedules of ``cfg`` against the golden semantics
    (:func:`tsar.isa.semantics.tlut` / :func:`~tsar.isa.semantics.tgemv`) on ``samples`` random
    operands: random int8 activations, LUT groups as TLUT writes them, random accumulators over the
    whole ``acc_bits`` range and random weight bytes (any code, including ones a packer never emits).

    Raises :class:`ScheduleError` (a ValueError) when a schedule does not exist, AssertionError when
    one computes something else than the ISA."""
    rng = np.random.default_rng(seed)
    act = rng.integers(-128, 128, (samples, cfg.k)).astype(np.int8)
    group = semantics.tlut(cfg, act)
    _compare(cfg, "TLUT", run_tlut_schedule(cfg, act, lane_chain), group)
    acc = rng.integers(-cfg.acc_max - 1, cfg.acc_max + 1, (samples, cfg.m)).astype(cfg.acc_dtype)
    weights = rng.integers(0, 256, (samples, cfg.weight_bytes)).astype(np.uint8)
    _compare(cfg, "TGEMV", run_tgemv_schedule(cfg, acc, group, weights),
             semantics.tgemv(cfg, acc, group, weights))


def _compare(cfg: TsarConfig, what: str, got: np.ndarray, want: np.ndarray) -> None:
    if got.shape != want.shape or got.dtype != want.dtype:
        raise AssertionError(f"{cfg.name}: {what} schedule gives {got.dtype}{list(got.shape)}, the ISA "
                             f"{want.dtype}{list(want.shape)}")
    bad = np.argwhere(got != want)
    if len(bad):
        at = tuple(int(i) for i in bad[0])
        raise AssertionError(f"{cfg.name}: {what} schedule differs from the ISA in {len(bad)} words; "
                             f"first at {at}: {got[at]} != {want[at]}")


def format_schedule(cfg: TsarConfig) -> str:
    """The uop schedule of both instructions as text (for docs and ``tsar rtl sim --schedule``)."""
    uops = tlut_schedule(cfg)
    passes = f" in {len(uops)} cycles (two passes where a register reads itself back)" \
        if len(uops) != cfg.tlut_uops else ""
    lines = [f"{cfg.tlut_mnemonic}: {cfg.tlut_uops} uops, one group register each{passes}"]
    for n, uop in enumerate(uops):
        lines.append(f"  {'cycle' if passes else 'uop'} {n}: writes group register {uop.reg}")
        for w, step in enumerate(uop.steps):
            name = _word_name(cfg, uop.reg * cfg.lanes + w)
            lines.append(f"    lane {w:2}: {name:8} = {step}")
    lines.append(f"{cfg.tgemv_mnemonic}: {cfg.tgemv_uops} uops, {cfg.outputs_per_uop} outputs each")
    split = tree_segments(cfg)
    step = tgemv_lane_step(cfg)
    lane = f"{step.a} - {step.b}".replace("[idxD]", "[idxD(j,b)]").replace("[idxS]", "[idxS(j,b)]")
    const = "".join(f" {'+' if t.sign > 0 else '-'} sum_b {t}" for t in step.constant)
    for u, uop in enumerate(tgemv_schedule(cfg)):
        outs = list(uop.outputs)
        if split == 1:
            lines.append(f"  uop {u}: lanes l=t*{cfg.s}+b compute {lane}; "
                         f"tree t adds acc[j]{const} for j = {outs}")
        else:
            lines.append(f"  uop {u}: lanes l=q*{cfg.s}+b compute {lane}; "
                         f"tree q//{split}, split in {split}, adds segment q and acc[j]{const} "
                         f"for j = {outs}")
    return "\n".join(lines)
