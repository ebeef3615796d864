"""The scalar subset the Python layer executes itself, so that loops mixing vector and simple
integer instructions run without returning to Unicorn.

Covered (32- and 64-bit register destinations; 32-bit writes zero-extend): mov, movzx, movsx
(these three also to 16-bit registers, bits 63:16 kept), cwde, cdqe, movsxd, lea, add, sub, and,
or, xor, cmp, test, inc, dec, shl/shr/sar (imm or cl), imul (2 and 3 operands), cmovcc,
nop/endbr64 and the prefetch hints (no architectural effect: no access, no fault), plus stores of
8..64-bit registers or immediates.
Flags are recorded lazily (:mod:`tsar.sim.x86.flags`). Anything else returns None and is left to
Unicorn; branches are compiled by :func:`branch_target_fn`.
"""

from __future__ import annotations

from collections.abc import Callable

import iced_x86 as iced
import numpy as np

from tsar.sim.x86 import flags as fl
from tsar.sim.x86.decode import Operand, address_fn, mnemonic, operand_int, operand_store, operands
from tsar.sim.x86.state import CpuState
from tsar.sim.x86.vecexec import Compiled

_ARITH = {"add": fl.ADD, "sub": fl.SUB, "cmp": fl.SUB, "and": fl.LOGIC, "or": fl.LOGIC,
          "xor": fl.LOGIC, "test": fl.LOGIC}
_NOPS = frozenset({"nop", "endbr64", "endbr32", "prefetcht0", "prefetcht1", "prefetcht2", "prefetchnta",
                   "prefetchw", "prefetchwt1"})


def _getter(op: Operand, st: CpuState, trace: bool) -> Callable[[], int] | None:
    """Unsigned value of a source operand, masked to its size."""
    g = st.gpr
    if op.kind == "gpr" and op.high8:  # ah, ch, dh, bh: bits 15:8 of the full register
        n = op.reg
        return lambda: (g[n] >> 8) & 0xFF
    if op.kind == "gpr":
        n, mask = op.reg, (1 << (8 * op.size)) - 1
        if op.size == 8:
            return lambda: g[n]
        return lambda: g[n] & mask
    if op.kind == "imm":
        return None
    if op.kind == "mem" and op.size in (1, 2, 4, 8):
        addr, view, size = address_fn(op, g), st.mem.view, op.size
        if trace:
            def load_t() -> int:
                a = addr()
                st.trace.append((a, size, 0))
                return int.from_bytes(view(a, size), "little")
            return load_t
        return operand_int(op, g, st.mem)
    return None


def _source(op: Operand, bits: int, st: CpuState, trace: bool) -> Callable[[], int] | None:
    if op.kind == "imm":
        value = op.value & ((1 << bits) - 1)
        return lambda: value
    return _getter(op, st, trace)


def _signed(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) else v


def _move16(name: str, ops: list[Operand], st: CpuState, trace: bool, mem_r: int) -> Compiled | None:
    """``mov`` / ``movzx`` / ``movsx`` to a 16-bit register: bits 63:16 are kept."""
    g, n, src = st.gpr, ops[0].reg, ops[1]
    get = _source(src, 16, st, trace)
    if get is None:
        return None
    if name == "movsx" and src.size == 1:
        def movsx16() -> None:
            g[n] = (g[n] & ~0xFFFF) | (_signed(get(), 8) & 0xFFFF)
        return Compiled(movsx16, mem_r, 0)

    def move16() -> None:
        g[n] = (g[n] & ~0xFFFF) | get()
    return Compiled(move16, mem_r, 0)


_WIDEN = {"cwde": (16, 32), "cdqe": (32, 64)}
"""Sign extensions within rax: ``cwde`` (ax to eax, bits 63:32 cleared), ``cdqe`` (eax to rax)."""


def _widen(name: str, st: CpuState) -> Compiled:
    g = st.gpr
    src, dst = _WIDEN[name]
    mask = (1 << dst) - 1

    def widen() -> None:
        g[0] = _signed(g[0] & ((1 << src) - 1), src) & mask
    return Compiled(widen, 0, 0)


def compile_scalar(ins: iced.Instruction, st: CpuState, trace: bool = False) -> Compiled | None:
    """Closure for a supported scalar instruction, or None (Unicorn executes it)."""
    name = mnemonic(ins)
    if name in _NOPS:
        return Compiled(lambda: None, 0, 0)
    if ins.has_lock_prefix or ins.has_rep_prefix or ins.has_repne_prefix or ins.has_segment_prefix:
        return None
    ops = operands(ins)
    if any(o.kind == "other" for o in ops):
        return None
    g, f = st.gpr, st.flags
    mem_r = sum(o.size for o in ops[1:] if o.kind == "mem") if name != "lea" else 0
    if name in ("cmp", "test") and ops and ops[0].kind == "mem" and ops[0].size in (4, 8):
        return _arith(name, ops, ops[0].size * 8, st, trace, mem_r + ops[0].size)
    if name == "mov" and ops[0].kind == "mem":
        return _store(ops, st, trace)
    if name in _WIDEN:
        return _widen(name, st)
    if name in ("mov", "movzx", "movsx") and ops and ops[0].kind == "gpr" and ops[0].size == 2:
        return _move16(name, ops, st, trace, mem_r)
    if not ops or ops[0].kind != "gpr" or ops[0].size not in (4, 8):
        return None
    dst = ops[0]
    n, bits = dst.reg, dst.size * 8
    mask = (1 << bits) - 1
    if name in ("mov", "movzx", "movsx", "movsxd"):
        src = ops[1]
        get = _source(src, bits, st, trace)
        if get is None:
            return None
        if name == "mov" or name == "movzx" or src.size == dst.size:
            def mov() -> None:
                g[n] = get()
            return Compiled(mov, mem_r, 0)
        sbits = src.size * 8

        def movsx() -> None:
            g[n] = _signed(get(), sbits) & mask
        return Compiled(movsx, mem_r, 0)
    if name == "lea":
        addr = address_fn(ops[1], g)

        def lea() -> None:
            g[n] = addr() & mask
        return Compiled(lea, 0, 0)
    if name in _ARITH:
        return _arith(name, ops, bits, st, trace, mem_r)
    if name in ("inc", "dec"):
        kind, step = (fl.INC, 1) if name == "inc" else (fl.DEC, -1)

        def incdec() -> None:
            a = g[n] & mask
            r = (a + step) & mask
            g[n] = r
            f[0] = (kind, r, a, 1, bits, fl.cf(f[0]))
        return Compiled(incdec, 0, 0)
    if name in ("shl", "sal", "shr", "sar"):
        return _shift(name, ops, bits, st)
    if name == "imul" and len(ops) in (2, 3):
        return _imul(ops, bits, st, trace, mem_r)
    if name.startswith("cmov") and ins.condition_code:
        get = _source(ops[1], bits, st, trace)
        if get is None:
            return None
        cond = fl.CONDITIONS[ins.condition_code]

        def cmov() -> None:
            value = get()  # the source is read (and may fault) whether or not it moves
            g[n] = value if cond(f[0]) else g[n] & mask
        return Compiled(cmov, mem_r, 0)
    return None


def _store(ops: list[Operand], st: CpuState, trace: bool) -> Compiled | None:
    dst, src = ops
    if dst.size not in (1, 2, 4, 8):
        return None
    get = _source(src, dst.size * 8, st, trace)
    if get is None:
        return None
    addr, wview, size = address_fn(dst, st.gpr), st.mem.wview, dst.size
    mask = (1 << (8 * size)) - 1
    if not trace:
        put = operand_store(dst, st.gpr, st.mem)
        return Compiled(lambda: put((get() & mask).to_bytes(size, "little")), 0, size)

    def store() -> None:
        a = addr()
        if st.trace is not None:
            st.trace.append((a, size, 1))
        wview(a, size)[:] = np.frombuffer((get() & mask).to_bytes(size, "little"), np.uint8)
    return Compiled(store, 0, size)


def _arith(name: str, ops: list[Operand], bits: int, st: CpuState, trace: bool,
           mem_r: int) -> Compiled | None:
    g, f = st.gpr, st.flags
    n, mask, kind = ops[0].reg, (1 << bits) - 1, _ARITH[name]
    get = _source(ops[1], bits, st, trace)
    first = _getter(ops[0], st, trace)
    if get is None or first is None:
        return None
    write = name not in ("cmp", "test")
    if kind == fl.ADD:
        def add() -> None:
            a, b = g[n] & mask, get()
            r = (a + b) & mask
            g[n] = r
            f[0] = (fl.ADD, r, a, b, bits, 0)
        return Compiled(add, mem_r, 0)
    if kind == fl.SUB:
        def sub() -> None:
            a, b = first(), get()
            r = (a - b) & mask
            if write:
                g[n] = r
            f[0] = (fl.SUB, r, a, b, bits, 0)
        return Compiled(sub, mem_r, 0)
    op = {"and": int.__and__, "test": int.__and__, "or": int.__or__, "xor": int.__xor__}[name]

    def logic() -> None:
        r = op(first(), get())
        if write:
            g[n] = r
        f[0] = (fl.LOGIC, r, 0, 0, bits, 0)
    return Compiled(logic, mem_r, 0)


def _shift(name: str, ops: list[Operand], bits: int, st: CpuState) -> Compiled | None:
    g, f = st.gpr, st.flags
    n, mask = ops[0].reg, (1 << bits) - 1
    cmask = 63 if bits == 64 else 31
    if len(ops) != 2:
        return None
    if ops[1].kind == "imm":
        fixed = ops[1].value & cmask
        count: Callable[[], int] = lambda: fixed  # noqa: E731
    elif ops[1].kind == "gpr" and ops[1].reg == 1 and ops[1].size == 1:
        count = lambda: g[1] & cmask  # noqa: E731
    else:
        return None
    left, arith = name in ("shl", "sal"), name == "sar"
    kind = fl.SHL if left else (fl.SAR if arith else fl.SHR)

    def shift() -> None:
        c = count()
        a = g[n] & mask
        if c == 0:
            g[n] = a
            return
        if left:
            r = (a << c) & mask
            cf = (a >> (bits - c)) & 1
        elif arith:
            sa = _signed(a, bits)
            r = (sa >> c) & mask
            cf = (sa >> (c - 1)) & 1
        else:
            r = a >> c
            cf = (a >> (c - 1)) & 1
        g[n] = r
        f[0] = (kind, r, a, c, bits, cf)
    return Compiled(shift, 0, 0)


def _imul(ops: list[Operand], bits: int, st: CpuState, trace: bool, mem_r: int) -> Compiled | None:
    g, f = st.gpr, st.flags
    n, mask = ops[0].reg, (1 << bits) - 1
    if len(ops) == 2:
        ga = lambda: g[n] & mask  # noqa: E731
        gb = _source(ops[1], bits, st, trace)
    else:
        ga = _source(ops[1], bits, st, trace)
        gb = _source(ops[2], bits, st, trace)
    if ga is None or gb is None:
        return None

    def imul() -> None:
        full = _signed(ga(), bits) * _signed(gb(), bits)
        r = full & mask
        over = int(_signed(r, bits) != full)
        g[n] = r
        f[0] = (fl.MUL, r, 0, 0, bits, over)
    return Compiled(imul, mem_r, 0)


def branch_target_fn(ins: iced.Instruction, st: CpuState) -> Callable[[], int] | None:
    """For ``jmp rel`` / ``jcc rel``: a closure returning the next RIP; None for other flow."""
    fc = ins.flow_control
    if fc == iced.FlowControl.UNCONDITIONAL_BRANCH and ins.op0_kind in (
            iced.OpKind.NEAR_BRANCH64, iced.OpKind.NEAR_BRANCH32):
        target = ins.near_branch_target
        return lambda: target
    if fc == iced.FlowControl.CONDITIONAL_BRANCH and ins.is_jcc_short_or_near:
        taken, fall = ins.near_branch_target, ins.next_ip
        f = st.flags
        cc = ins.condition_code
        if cc in (5, 6):  # je / jne: ZF straight from the lazy state
            want_zero = cc == 5

            def jz() -> int:
                t = f[0]
                z = ((t[2] >> 6) & 1) if t[0] == fl.RAW else t[1] == 0
                return taken if bool(z) == want_zero else fall
            return jz
        cond = fl.CONDITIONS[cc]
        return lambda: taken if cond(f[0]) else fall
    return None
