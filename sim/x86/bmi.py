"""BMI1 and BMI2: the VEX-encoded general-purpose-register instructions (andn, bextr, blsi,
blsmsk, blsr, bzhi, mulx, pdep, pext, rorx, sarx, shlx, shrx), executed on the Python GPR list.

Operands are 32- or 64-bit (a 32-bit destination zero-extends). Flags follow the SDM; the flags it
leaves undefined (:data:`UNDEFINED_FLAGS`) are written as 0.
"""

from __future__ import annotations

from collections.abc import Callable

from tsar.sim.x86 import flags as fl
from tsar.sim.x86.decode import Operand, address_fn
from tsar.sim.x86.state import MASK64, CpuState

CF, PF, AF, ZF, SF, OF = fl.CF, fl.PF, fl.AF, fl.ZF, fl.SF, fl.OF
UNDEFINED_FLAGS = {"andn": AF | PF, "bextr": AF | SF | PF, "blsi": AF | PF, "blsmsk": AF | PF,
                   "blsr": AF | PF, "bzhi": AF | PF}
"""Flags the architecture leaves undefined, per mnemonic (hardware differs between vendors)."""
MNEMONICS = frozenset({"andn", "bextr", "blsi", "blsmsk", "blsr", "bzhi", "mulx", "pdep", "pext",
                       "rorx", "sarx", "shlx", "shrx"})


def _pdep(src: int, mask: int) -> int:
    out, k = 0, 0
    while mask:
        low = mask & -mask
        if (src >> k) & 1:
            out |= low
        mask ^= low
        k += 1
    return out


def _pext(src: int, mask: int) -> int:
    out, k = 0, 0
    while mask:
        low = mask & -mask
        if src & low:
            out |= 1 << k
        mask ^= low
        k += 1
    return out


def _zs(value: int, bits: int) -> int:
    return (ZF if value == 0 else 0) | (SF if value >> (bits - 1) & 1 else 0)


def _value(bits: int, name: str, a: int, b: int, imm: int) -> tuple[int, int | None]:
    """``(result, flags or None)`` of the two-source instructions."""
    mask = (1 << bits) - 1
    if name == "andn":
        r = ~a & b & mask
        return r, _zs(r, bits)
    if name == "bextr":
        start, length = b & 0xFF, (b >> 8) & 0xFF
        r = (a >> start) & ((1 << length) - 1) if start < bits else 0
        return r, ZF if r == 0 else 0
    if name == "bzhi":
        n = b & 0xFF
        r = a & ((1 << n) - 1) if n < bits else a
        return r, _zs(r, bits) | (CF if n > bits - 1 else 0)
    if name == "pdep":
        return _pdep(a, b), None
    if name == "pext":
        return _pext(a, b), None
    if name in ("shlx", "shrx", "sarx"):
        n = b & (bits - 1)
        if name == "shlx":
            return (a << n) & mask, None
        if name == "shrx":
            return a >> n, None
        signed = a - (1 << bits) if a >> (bits - 1) else a
        return (signed >> n) & mask, None
    if name == "rorx":
        n = imm & (bits - 1)
        return ((a >> n) | (a << (bits - n))) & mask, None
    if name == "blsi":
        r = a & -a & mask
        return r, _zs(r, bits) | (CF if a else 0)
    if name == "blsmsk":
        r = (a ^ (a - 1)) & mask
        return r, (SF if r >> (bits - 1) & 1 else 0) | (CF if a == 0 else 0)
    if name == "blsr":
        r = a & (a - 1) & mask
        return r, _zs(r, bits) | (CF if a == 0 else 0)
    raise ValueError(name)


def _source(op: Operand, st: CpuState, trace: bool) -> Callable[[], int]:
    g, size = st.gpr, op.size
    if op.kind == "gpr":
        n, mask = op.reg, (1 << (8 * size)) - 1
        return lambda: g[n] & mask
    addr, view = address_fn(op, g), st.mem.view

    def load() -> int:
        a = addr()
        if trace and st.trace is not None:
            st.trace.append((a, size, 0))
        return int.from_bytes(view(a, size), "little")
    return load


def compile_bmi(name: str, ops: list[Operand], st: CpuState,
                trace: bool = False) -> tuple[Callable[[], None], int] | None:
    """``(closure, bytes read)`` for a BMI instruction (None for other mnemonics)."""
    if name not in MNEMONICS:
        return None
    g, f = st.gpr, st.flags
    regs = [o for o in ops if o.kind != "imm"]
    imm = next((o.value for o in ops if o.kind == "imm"), 0)
    mem_read = sum(o.size for o in regs[1:] if o.kind == "mem")
    if name == "mulx":  # mulx hi, lo, src: rdx * src
        hi, lo, src = regs
        bits = 8 * hi.size
        read = _source(src, st, trace)
        mask = (1 << bits) - 1

        def mulx() -> None:
            p = (g[2] & mask) * read()
            g[lo.reg] = p & mask
            g[hi.reg] = p >> bits
        return mulx, mem_read
    dst = regs[0]
    bits = 8 * dst.size
    n = dst.reg
    srcs = [_source(o, st, trace) for o in regs[1:]]
    if name in ("andn", "pdep", "pext") or len(srcs) == 2:  # dst, vvvv, r/m
        a_r, b_r = srcs
    else:  # dst, r/m (+ imm): blsi/blsmsk/blsr (vvvv is the destination), rorx
        a_r, b_r = srcs[0], (lambda: 0)

    def run() -> None:
        r, flags = _value(bits, name, a_r(), b_r(), imm)
        g[n] = r & MASK64
        if flags is not None:
            f[0] = fl.raw((st.rflags_base & ~fl.ARITH_MASK) | flags)
    return run, mem_read
