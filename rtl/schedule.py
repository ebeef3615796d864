"""Micro-op schedules of TLUT and TGEMV on the base SIMD lanes and adder trees.

Everything here is derived from a :class:`~tsar.isa.config.TsarConfig`; the RTL (operand MUXes,
sequencer ROM) is generated from these schedules, and :func:`run_tlut_schedule` /
:func:`run_tgemv_schedule` execute them in numpy so that a schedule can be checked against the
golden semantics without simulating any hardware.

**TLUT** (``cfg.tlut_uops`` uops, each writes one register of the group): lane ``l`` of uop ``u``
computes word ``l`` of group register ``reg(u)`` with one add or subtract of two operands taken from
the operand bus:

* ``ZERO``, ``ACT i`` (activation byte ``i`` of the source register, sign-extended);
* ``LANE j``: the result of lane ``j`` in the same cycle (lane-to-lane forwarding, used for the words
  of ``c = 2`` and ``c = 4`` that need more than two terms; never more than two lanes deep);
* ``GROUP r w << n``: word ``w`` of group register ``r`` written by an earlier uop, shifted left by
  ``n`` (used by ``c = 4``: ``D[p] = 2*S[p] - S[2^c - 1]``, so the D register follows its S register).

**TGEMV** (``cfg.tgemv_uops`` uops): lane ``l = t*s + b`` belongs to adder tree ``t`` and block
``b``; in uop ``u`` it computes ``D_b[idxD] - S_b[idxS]`` for output ``j = u*T + t`` (``T`` trees),
the operand MUXes selecting the LUT words with the weight codes. Tree ``t`` adds its ``s = 4`` lanes
and accumulator word ``j``; the write-back MUX puts the ``T`` sums into words ``u*T .. u*T+T-1`` of
the accumulator, keeping the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cache

import numpy as np
from amaranth.lib import enum as hw_enum

from tsar.isa.config import ADDER_TREE_FAN_IN, LANE_BITS, TsarConfig


class LaneOp(hw_enum.Enum, shape=2):
    """Operation of one ALU lane (also the RTL encoding of the lane's ``op`` input)."""

    ADD = 0
    SUB = 1
    MUL = 2


class SrcKind(Enum):
    """Where a lane operand comes from."""

    BASE = "base"  # the base operand bus: word l of the instruction's register operand
    LUT_D = "lut_d"  # TGEMV: D entry selected by the weight code
    LUT_S = "lut_s"  # TGEMV: S entry selected by the weight code
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


TGEMV_STEP = LaneStep(LaneOp.SUB, Source(SrcKind.LUT_D), Source(SrcKind.LUT_S))
"""Every lane of every TGEMV uop: ``D_b[idxD] - S_b[idxS]``."""


class ScheduleError(ValueError):
    """The configuration has no schedule on this datapath (no extra adders are allowed)."""


def trees(cfg: TsarConfig) -> int:
    """Number of 4:1 adder trees of the datapath (one per four lanes)."""
    return cfg.lanes // ADDER_TREE_FAN_IN


def check_tgemv(cfg: TsarConfig) -> None:
    """TGEMV needs one adder-tree input per block: ``s`` must equal the trees' fan-in."""
    if cfg.s != ADDER_TREE_FAN_IN or cfg.lanes % ADDER_TREE_FAN_IN:
        raise ScheduleError(f"{cfg.name}: TGEMV maps s={cfg.s} blocks onto 4:1 adder trees; "
                            f"s must be {ADDER_TREE_FAN_IN}")


def tgemv_output(cfg: TsarConfig, uop: int, tree: int) -> int:
    """Accumulator lane finished by adder tree ``tree`` in TGEMV uop ``uop``."""
    return uop * trees(cfg) + tree


def tgemv_lane(cfg: TsarConfig, lane: int) -> tuple[int, int]:
    """``(tree, block)`` of a lane in TGEMV."""
    return divmod(lane, cfg.s)


def _word_place(cfg: TsarConfig, block: int, sparse: bool, pattern: int) -> tuple[int, int]:
    """(group register, word) of ``D_b[p]`` / ``S_b[p]``."""
    g = block * cfg.block_words + (cfg.patterns if sparse else 0) + pattern
    return divmod(g, cfg.lanes)


def _bits(p: int) -> list[int]:
    return [i for i in range(p.bit_length()) if p >> i & 1]


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


def _step(cfg: TsarConfig, reg: int, block: int, sparse: bool, p: int) -> tuple[LaneStep, int | None]:
    """Lane step for one word, and the group register it reads back (if any)."""
    full = cfg.patterns - 1
    on = _bits(p)
    off = [i for i in range(cfg.c) if i not in on]

    def lane_of(sp: bool, q: int) -> Source:
        r, w = _word_place(cfg, block, sp, q)
        if r != reg:
            raise ScheduleError(f"{cfg.name}: word {'S' if sp else 'D'}[{q}] is not in the same register")
        return Source(SrcKind.LANE, w)

    if sparse:
        step = _direct(cfg, block, on, [])
        if step is not None:
            return step, None
        if cfg.c > 4:
            raise ScheduleError(f"{cfg.name}: S words of more than four terms")
        lo, hi = p & 0b11, p & ~0b11 & full  # S[p] = S[lo] + S[hi], each at most two terms
        a = lane_of(True, lo) if len(_bits(lo)) == 2 else Source(SrcKind.ACT, block * cfg.c + _bits(lo)[0])
        b = lane_of(True, hi) if len(_bits(hi)) == 2 else Source(SrcKind.ACT, block * cfg.c + _bits(hi)[0])
        return LaneStep(LaneOp.ADD, a, b), None
    step = _direct(cfg, block, on, off)
    if step is not None:
        return step, None
    if cfg.c == 2:  # D[0] = -(a0 + a1) = 0 - D[3]
        return LaneStep(LaneOp.SUB, ZERO, lane_of(False, full)), None
    # D[p] = 2*S[p] - S[all]: read back the S register written by an earlier uop.
    s_reg, s_word = _word_place(cfg, block, True, p)
    t_reg, t_word = _word_place(cfg, block, True, full)
    if s_reg == reg or t_reg != s_reg:
        raise ScheduleError(f"{cfg.name}: c={cfg.c} needs the S table in a register of its own")
    return (LaneStep(LaneOp.SUB, Source(SrcKind.GROUP, s_word, s_reg, 1),
                     Source(SrcKind.GROUP, t_word, t_reg)), s_reg)


@cache
def tlut_schedule(cfg: TsarConfig) -> tuple[TlutUop, ...]:
    """The TLUT uops of ``cfg``, in issue order (one per group register)."""
    regs: dict[int, tuple[LaneStep, ...]] = {}
    needs: dict[int, set[int]] = {}
    for reg in range(cfg.group_regs):
        steps, deps = [], set()
        for w in range(cfg.lanes):
            block, e = divmod(reg * cfg.lanes + w, cfg.block_words)
            step, dep = _step(cfg, reg, block, e >= cfg.patterns, e % cfg.patterns)
            steps.append(step)
            if dep is not None:
                deps.add(dep)
        regs[reg], needs[reg] = tuple(steps), deps
    order: list[int] = []
    while len(order) < len(regs):  # registers read back are written first; else register order
        ready = [r for r in regs if r not in order and needs[r] <= set(order)]
        order.append(min(ready, key=lambda r: (not any(r in needs[x] for x in regs), r)))
    uops = tuple(TlutUop(r, regs[r]) for r in order)
    assert len(uops) == cfg.tlut_uops
    for uop in uops:  # lane forwarding stays two lanes deep
        for step in uop.steps:
            for src in (step.a, step.b):
                if src.kind is SrcKind.LANE:
                    inner = uop.steps[src.index]
                    assert SrcKind.LANE not in (inner.a.kind, inner.b.kind), cfg.name
    return uops


def _wrap16(x: np.ndarray) -> np.ndarray:
    return ((x + (1 << (LANE_BITS - 1))) % (1 << LANE_BITS)) - (1 << (LANE_BITS - 1))


def run_tlut_schedule(cfg: TsarConfig, activations: np.ndarray) -> np.ndarray:
    """Execute :func:`tlut_schedule` in numpy: ``(..., k)`` int8 -> ``(..., group_words)`` int16."""
    act = np.asarray(activations).astype(np.int64)
    group = np.zeros((*act.shape[:-1], cfg.group_regs, cfg.lanes), np.int64)
    for uop in tlut_schedule(cfg):
        results: dict[int, np.ndarray] = {}

        def value(src: Source, results: dict[int, np.ndarray] = results) -> np.ndarray:
            if src.kind is SrcKind.ZERO:
                return np.zeros(act.shape[:-1], np.int64)
            if src.kind is SrcKind.ACT:
                return act[..., src.index]
            if src.kind is SrcKind.LANE:
                return results[src.index]
            if src.kind is SrcKind.GROUP:
                return _wrap16(group[..., src.reg, src.index] << src.shift)
            raise AssertionError(src)

        pending = list(range(cfg.lanes))
        while pending:  # forwarded lanes first
            for lane in list(pending):
                step = uop.steps[lane]
                deps = [s.index for s in (step.a, step.b) if s.kind is SrcKind.LANE]
                if any(d not in results for d in deps):
                    continue
                a, b = value(step.a), value(step.b)
                results[lane] = _wrap16(a + b if step.op is LaneOp.ADD else a - b)
                pending.remove(lane)
        group[..., uop.reg, :] = np.stack([results[w] for w in range(cfg.lanes)], axis=-1)
    return group.reshape(*act.shape[:-1], cfg.group_words).astype(np.int16)


def run_tgemv_schedule(cfg: TsarConfig, acc: np.ndarray, group: np.ndarray,
                       weights: np.ndarray) -> np.ndarray:
    """Execute the TGEMV uops in numpy (lanes, then trees, then write-back), like the RTL does."""
    from tsar.isa.semantics import weight_codes

    check_tgemv(cfg)
    acc = np.asarray(acc).astype(np.int64).copy()
    table = np.asarray(group).astype(np.int64)
    codes = weight_codes(cfg, weights)  # (..., m, s)
    for uop in range(cfg.tgemv_uops):
        for tree in range(trees(cfg)):
            j = tgemv_output(cfg, uop, tree)
            total = acc[..., j]
            for block in range(cfg.s):
                code = codes[..., j, block]
                base = block * cfg.block_words
                d = np.take_along_axis(table, (base + (code & (cfg.patterns - 1)))[..., None], -1)[..., 0]
                s = np.take_along_axis(table, (base + cfg.patterns + (code >> cfg.c))[..., None], -1)[..., 0]
                total = total + _wrap16(d - s)
            acc[..., j] = _wrap16(total)
    return acc.astype(np.int16)


def format_schedule(cfg: TsarConfig) -> str:
    """The uop schedule of both instructions as text (for docs and ``tsar rtl sim --schedule``)."""
    lines = [f"{cfg.tlut_mnemonic}: {cfg.tlut_uops} uops, one group register each"]
    for n, uop in enumerate(tlut_schedule(cfg)):
        lines.append(f"  uop {n}: writes group register {uop.reg}")
        for w, step in enumerate(uop.steps):
            block, e = divmod(uop.reg * cfg.lanes + w, cfg.block_words)
            name = f"{'S' if e >= cfg.patterns else 'D'}{block}[{e % cfg.patterns}]"
            lines.append(f"    lane {w:2}: {name:8} = {step}")
    lines.append(f"{cfg.tgemv_mnemonic}: {cfg.tgemv_uops} uops, {trees(cfg)} outputs each")
    for u in range(cfg.tgemv_uops):
        outs = [tgemv_output(cfg, u, t) for t in range(trees(cfg))]
        lines.append(f"  uop {u}: lanes l=t*{cfg.s}+b compute D_b[idxD(j,b)] - S_b[idxS(j,b)]; "
                     f"tree t adds acc[j] for j = {outs}")
    return "\n".join(lines)
