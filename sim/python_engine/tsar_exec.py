"""T-SAR instructions in the simulator: decoded by :func:`tsar.isa.decode`, executed by the
golden semantics :func:`tsar.isa.semantics.tlut` / :func:`tsar.isa.semantics.tgemv`.

Register groups map to consecutive rows of ``state.zmm``; a 128-bit configuration uses the xmm
parts, a 256-bit one the ymm parts, and like every VEX write each zeroes the bits of the registers
it writes above its width (up to bit 511; bits 511:256 only when :attr:`CpuState.wide`). A
512-bit (EVEX) configuration writes whole rows of zmm0..31, and compiling one widens the state
(:meth:`CpuState.widen`), as any EVEX instruction does.

Runs of T-SAR instructions inside a block can execute as one batch (:func:`batch_spans`,
:func:`compile_batch`): all TLUTs in one :func:`tlut` call, all TGEMVs in one :func:`tgemv` call
that computes each instruction's contribution from a zero accumulator, the contributions then
added per accumulator (int16 addition wraps, so their order does not matter). A run qualifies
only when this reordering cannot change what any instruction reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tsar.isa import codec
from tsar.isa.config import TsarConfig
from tsar.isa.instructions import Field, Kind
from tsar.isa.operands import GPR_NUMBER, Memory, Register
from tsar.isa.semantics import tgemv, tlut
from tsar.sim.errors import GuestFault
from tsar.sim.x86.decode import Operand as DOperand
from tsar.sim.x86.decode import address_fn
from tsar.sim.x86.state import REGISTER_BYTES, YMM_BYTES, CpuState
from tsar.sim.x86.vecexec import Compiled, zeroes_upper


@dataclass(frozen=True)
class TsarOp:
    """What a decoded T-SAR instruction reads and writes, for batching.

    ``dst``: first register written (a TLUT's group base, a TGEMV's accumulator); ``lut``: a
    TGEMV's group base; ``src``: the activation / weight operand; ``nbytes`` its size.
    """

    cfg: TsarConfig
    kind: Kind
    dst: int
    lut: int
    src: Register | Memory
    nbytes: int

    @property
    def writes(self) -> frozenset[int]:
        count = self.cfg.group_regs if self.kind is Kind.TLUT else 1
        return frozenset(range(self.dst, self.dst + count))

    @property
    def group(self) -> frozenset[int]:
        return frozenset(range(self.lut, self.lut + self.cfg.group_regs)) \
            if self.kind is Kind.TGEMV else frozenset()

    @property
    def src_regs(self) -> frozenset[int]:
        if isinstance(self.src, Memory):
            return frozenset()
        count = 1 if self.kind is Kind.TLUT else self.cfg.weight_regs
        return frozenset(range(self.src.num, self.src.num + count))


def _memory_operand(mem: Memory, next_ip: int) -> DOperand:
    if mem.rip_relative:
        return DOperand("mem", 0, rip_target=next_ip + mem.disp)
    return DOperand("mem", 0, base=GPR_NUMBER[mem.base] if mem.base else -1,
                    index=GPR_NUMBER[mem.index] if mem.index else -1, scale=mem.scale,
                    disp=mem.disp & ((1 << 64) - 1))


def _source(op: Register | Memory, nbytes: int, regs: int, width: int, next_ip: int,
            st: CpuState) -> Callable[[], np.ndarray]:
    """Reader of ``nbytes`` operand bytes: memory, or the low bytes of ``regs`` registers."""
    if isinstance(op, Memory):
        addr, view = address_fn(_memory_operand(op, next_ip), st.gpr), st.mem.view

        def read() -> np.ndarray:
            a = addr()
            if st.trace is not None:
                st.trace.append((a, nbytes, 0))
            return view(a, nbytes)
        return read
    rows = st.zmm[op.num:op.num + regs, :width]
    if width == REGISTER_BYTES:
        flat = rows.reshape(-1)[:nbytes]  # a view: consecutive full rows
        return lambda: flat
    return lambda: rows.reshape(-1)[:nbytes]


def tsar_op(inst: codec.TsarInstruction) -> TsarOp:
    """The batching view of a decoded instruction."""
    cfg = inst.spec.config
    dst = inst.operand(Field.MODRM_REG)
    src = inst.operand(Field.MODRM_RM)
    if inst.spec.kind is Kind.TLUT:
        return TsarOp(cfg, Kind.TLUT, dst.num, -1, src, cfg.k)
    return TsarOp(cfg, Kind.TGEMV, dst.num, inst.operand(Field.VEX_VVVV).num, src, cfg.weight_bytes)


def compile_tsar(inst: codec.TsarInstruction, next_ip: int, st: CpuState) -> Compiled:
    """Closure executing a decoded T-SAR instruction; memory traffic in bytes is static."""
    cfg = inst.spec.config
    width = cfg.register_bytes
    if width > YMM_BYTES:
        st.widen()  # from now on bits 511:256 may be live: VEX writes must zero them
    y = st.zmm
    op = tsar_op(inst)
    mem_bytes = op.nbytes if isinstance(op.src, Memory) else 0
    zero_upper = zeroes_upper(width, st)  # the VEX rule
    if op.kind is Kind.TLUT:
        read = _source(op.src, cfg.k, 1, width, next_ip, st)
        group = y[op.dst:op.dst + cfg.group_regs]
        words_out = group[:, :width].view(cfg.lut_dtype)  # (group_regs, lanes), a view
        upper = group[:, width:]

        def run_tlut() -> None:
            words_out[:] = tlut(cfg, read().view(np.int8)).reshape(words_out.shape)
            if zero_upper:
                upper.fill(0)
        return Compiled(run_tlut, mem_bytes, 0)
    read_w = _source(op.src, cfg.weight_bytes, cfg.weight_regs, width, next_ip, st)
    lut_rows = y[op.lut:op.lut + cfg.group_regs, :width]
    acc_row = y[op.dst]
    acc = acc_row[:width].view(cfg.acc_dtype)
    high = acc_row[width:]
    if width == REGISTER_BYTES:
        words = lut_rows.reshape(-1).view(cfg.lut_dtype)  # a view of the live registers

        def run_tgemv() -> None:
            acc[:] = tgemv(cfg, acc, words, read_w())
        return Compiled(run_tgemv, mem_bytes, 0)

    rows_words = lut_rows.view(cfg.lut_dtype)  # (group_regs, lanes): strided rows
    words = np.empty(rows_words.size, cfg.lut_dtype)  # the group's words, gathered each call
    gathered = words.reshape(rows_words.shape)

    def run_tgemv_narrow() -> None:
        gathered[...] = rows_words
        acc[:] = tgemv(cfg, acc, words, read_w())
        if zero_upper:
            high.fill(0)
    return Compiled(run_tgemv_narrow, mem_bytes, 0)


# --- batching ------------------------------------------------------------------------------------
def batch_spans(ops: Sequence[TsarOp | None]) -> list[tuple[int, int]]:
    """``[start, end)`` spans of ``ops`` (consecutive instructions; None = not T-SAR) that may run
    as one batch: same configuration, at least two TLUTs or two TGEMVs, and:

    * a TLUT's group is written by no other instruction of the span and read by no earlier TGEMV;
      a TLUT's register source is not written earlier in the span;
    * a TGEMV's group and register weights are not an accumulator of an earlier TGEMV (a group a
      TLUT writes is written before the TGEMV, by the rule above); its register weights are not a
      TLUT group of the span either (the batch reads every operand before writing the groups);
    * an accumulator is written by no TLUT of the span.
    """
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(ops):
        if ops[i] is None:
            i += 1
            continue
        start, cfg = i, ops[i].cfg
        lut_written: set[int] = set()
        acc_written: set[int] = set()
        tgemv_read: set[int] = set()
        counts = {Kind.TLUT: 0, Kind.TGEMV: 0}
        while i < len(ops):
            op = ops[i]
            if op is None or op.cfg != cfg:
                break
            if op.kind is Kind.TLUT:
                if op.writes & (lut_written | acc_written | tgemv_read) or \
                        op.src_regs & (lut_written | acc_written):
                    break
                lut_written |= op.writes
            else:
                if (op.group | op.src_regs) & acc_written or op.src_regs & lut_written or \
                        op.dst in lut_written:
                    break
                acc_written.add(op.dst)
                tgemv_read |= op.group | op.src_regs
            counts[op.kind] += 1
            i += 1
        if max(counts.values()) >= 2:
            spans.append((start, i))
    return spans


def _gather(ops: list[TsarOp], next_ips: list[int], st: CpuState) -> Callable[[], np.ndarray]:
    """Reader of the operands of ``ops`` (all the same size) as one ``(len(ops), nbytes)`` uint8
    array, read at the addresses the instructions compute (one view when they are consecutive)."""
    nbytes, cfg = ops[0].nbytes, ops[0].cfg
    width, regs = cfg.register_bytes, (1 if ops[0].kind is Kind.TLUT else cfg.weight_regs)
    n = len(ops)
    mems = [_memory_operand(op.src, ip) if isinstance(op.src, Memory) else None
            for op, ip in zip(ops, next_ips, strict=True)]
    view = st.mem.view
    if all(m is not None and m.rip_target is None for m in mems):
        first = mems[0]
        same = all((m.base, m.index, m.scale) == (first.base, first.index, first.scale) for m in mems)
        if same and all(m.disp == (first.disp + i * nbytes) & ((1 << 64) - 1)
                        for i, m in enumerate(mems)):
            addr = address_fn(first, st.gpr)

            return lambda: view(addr(), n * nbytes).reshape(n, nbytes)
    readers = [_source(op.src, nbytes, regs, width, ip, st)
               for op, ip in zip(ops, next_ips, strict=True)]

    def read_each() -> np.ndarray:
        return np.concatenate([r() for r in readers]).reshape(n, nbytes)
    return read_each


def _row_words(cfg: TsarConfig) -> int:
    """LUT words in one row of ``state.zmm``."""
    return REGISTER_BYTES * 8 // cfg.lut_bits


def _word_index(cfg: TsarConfig, bases: Sequence[int], regs: int) -> np.ndarray:
    """Flat LUT-word indices of ``state.zmm`` (viewed as ``cfg.lut_dtype``) for the low
    ``register_bytes`` of ``regs`` registers from each base: shape ``(len(bases), regs * lanes)``."""
    lanes = cfg.lanes
    rows = np.asarray(bases)[:, None] + np.arange(regs)[None, :]
    words = rows[:, :, None] * _row_words(cfg) + np.arange(lanes)[None, None, :]
    return words.reshape(len(bases), regs * lanes)


def compile_batch(ops: list[TsarOp], next_ips: list[int], st: CpuState,
                  fallback: Callable[[], None]) -> Callable[[], None]:
    """One closure executing the span ``ops`` (see :func:`batch_spans`) as a batch.

    A memory operand that faults leaves the registers untouched and runs ``fallback`` (the
    instructions one by one), which raises the fault at the right instruction; so does a run with
    a memory trace, which records the accesses in program order.
    """
    cfg = ops[0].cfg
    y = st.zmm
    # flat views of the registers in LUT words and in accumulator lanes
    flat = y.reshape(-1).view(cfg.lut_dtype)
    acc_flat = y.reshape(-1).view(cfg.acc_dtype)
    width = cfg.register_bytes
    if width > YMM_BYTES:
        st.widen()
    viewed = width >= YMM_BYTES  # register views instead of index arrays (the rows are strided)
    zero_upper = zeroes_upper(width, st)  # the VEX rule
    tl = [(op, ip) for op, ip in zip(ops, next_ips, strict=True) if op.kind is Kind.TLUT]
    tg = [(op, ip) for op, ip in zip(ops, next_ips, strict=True) if op.kind is Kind.TGEMV]

    # TLUTs: read every source, one tlut() call, write the groups.
    if tl:
        read_act = _gather([op for op, _ in tl], [ip for _, ip in tl], st)
        out_index = _word_index(cfg, [op.dst for op, _ in tl], cfg.group_regs)
        words = _row_words(cfg)
        nregs = y.shape[0]
        zero_index = np.setdiff1d(np.arange(nregs * words).reshape(nregs, words)[sorted(
            {r for op, _ in tl for r in op.writes})].reshape(-1), out_index.reshape(-1))
        single = len(tl) == 1 and viewed
        if single:
            rows = slice(tl[0][0].dst, tl[0][0].dst + cfg.group_regs)
            out_view = y[rows, :width].view(cfg.lut_dtype)  # (group_regs, lanes)
            out_upper = y[rows, width:]

    # TGEMVs: weights, groups, accumulators.
    if tg:
        read_w = _gather([op for op, _ in tg], [ip for _, ip in tg], st)
        luts = [op.lut for op, _ in tg]
        if len(set(luts)) == 1:
            group_index = _word_index(cfg, luts[:1], cfg.group_regs)[0]
        else:
            group_index = _word_index(cfg, luts, cfg.group_regs)
        group_view = None
        if viewed and group_index.ndim == 1:
            group_view = y[luts[0]:luts[0] + cfg.group_regs, :width].view(cfg.lut_dtype)
            group_words = np.empty(group_view.size, cfg.lut_dtype)  # gathered from the strided rows
            group_gathered = group_words.reshape(group_view.shape)
        accs = sorted({op.dst for op, _ in tg})
        zeros = np.zeros((len(tg), cfg.m), cfg.acc_dtype)
        order = [accs.index(op.dst) for op, _ in tg]
        reduce = None
        if len(accs) < len(tg):  # contributions to the same accumulator are summed
            reduce = np.zeros((len(accs), len(tg)), cfg.acc_dtype)
            reduce[order, np.arange(len(tg))] = 1
            perm = None
        else:
            perm = np.argsort(order)  # contributions in accumulator order
            if (perm == np.arange(len(tg))).all():
                perm = None
        acc_index = (np.asarray(accs)[:, None] * (REGISTER_BYTES * 8 // cfg.acc_bits)
                     + np.arange(cfg.acc_lanes)[None, :])
        acc_view = None
        if viewed and accs == list(range(accs[0], accs[0] + len(accs))):
            acc_view = y[accs[0]:accs[0] + len(accs), :width].view(cfg.acc_dtype)
            acc_upper = y[accs[0]:accs[0] + len(accs), width:]
        acc_high = None if viewed else (np.asarray(accs)[:, None] * REGISTER_BYTES
                                      + np.arange(cfg.register_bytes, REGISTER_BYTES))

    def run() -> None:
        if st.trace is not None:
            fallback()
            return
        try:
            act = read_act() if tl else None
            weights = read_w() if tg else None
        except GuestFault:
            fallback()  # faults at the right instruction (or, if not, executes the span)
            return
        if tl:
            words = tlut(cfg, act.view(np.int8))
            if single:
                out_view[:] = words[0].reshape(out_view.shape)
                if zero_upper:
                    out_upper.fill(0)
            else:
                flat[out_index] = words
                if zero_index.size:
                    flat[zero_index] = 0
        if tg:
            if group_view is not None:
                group_gathered[...] = group_view
                groups = group_words
            else:
                groups = flat.take(group_index)
            contrib = tgemv(cfg, zeros, groups, weights)
            if reduce is not None:
                contrib = np.matmul(reduce, contrib)  # int16: wraps mod 2^16
            elif perm is not None:
                contrib = contrib[perm]
            if acc_view is not None:
                np.add(acc_view, contrib, out=acc_view)
                if zero_upper:
                    acc_upper.fill(0)
            else:
                acc_flat[acc_index] = acc_flat.take(acc_index) + contrib
                if acc_high is not None:
                    y.reshape(-1)[acc_high] = 0

    return run
