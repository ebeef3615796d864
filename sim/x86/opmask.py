"""The VEX-encoded opmask instructions of AVX512F/BW/DQ (``kmov``, ``kand``, ``kor``, ``kxor``,
``kxnor``, ``kandn``, ``knot``, ``kadd``, ``kshiftl``/``kshiftr``, ``kunpck``, ``kortest``,
``ktest``) on :attr:`CpuState.k` (Python ints).

The suffix gives the width (``b`` 8, ``w`` 16, ``d`` 32, ``q`` 64 bits): sources are read at that
width and results zero-extended to 64 bits (and to a GPR's 64 bits by ``kmov r32, k``).
"""

from __future__ import annotations

from collections.abc import Callable

import iced_x86 as iced
import numpy as np

from tsar.sim.x86 import flags as fl
from tsar.sim.x86.decode import Operand, address_fn, mnemonic, operands
from tsar.sim.x86.opdefs import Compiled, Unsupported
from tsar.sim.x86.state import MASK64, CpuState

WIDTHS = {"b": 8, "w": 16, "d": 32, "q": 64}
_BINARY: dict[str, Callable[[int, int], int]] = {
    "kand": lambda a, b: a & b, "kandn": lambda a, b: ~a & b, "kor": lambda a, b: a | b,
    "kxor": lambda a, b: a ^ b, "kxnor": lambda a, b: ~(a ^ b), "kadd": lambda a, b: a + b,
}
MNEMONICS = frozenset({*(f"{op}{s}" for op in (*_BINARY, "kmov", "knot", "kshiftl", "kshiftr",
                                                   "kortest", "ktest") for s in WIDTHS),
                       "kunpckbw", "kunpckwd", "kunpckdq"})
"""Every opmask mnemonic this module executes."""


def is_opmask(ins: iced.Instruction) -> bool:
    return mnemonic(ins) in MNEMONICS


def compile_opmask(ins: iced.Instruction, st: CpuState, trace: bool = False) -> Compiled:
    """Closure for an opmask instruction; raises :class:`Unsupported` for anything else."""
    name = mnemonic(ins)
    if name not in MNEMONICS:
        raise Unsupported(name)
    ops = operands(ins)
    k = st.k
    if name.startswith("kunpck"):
        half = WIDTHS[name[6]]
        low = (1 << half) - 1
        d, a, b = (o.reg for o in ops)

        def unpack() -> None:
            k[d] = ((k[a] & low) << half) | (k[b] & low)
        return Compiled(unpack, 0, 0)
    width = WIDTHS[name[-1]]
    ones = (1 << width) - 1
    base = name[:-1]
    if base == "kmov":
        return _kmov(ops, st, width, trace)
    if base in _BINARY:
        f = _BINARY[base]
        d, a, b = (o.reg for o in ops)

        def binary() -> None:
            k[d] = f(k[a] & ones, k[b] & ones) & ones
        return Compiled(binary, 0, 0)
    if base == "knot":
        d, a = (o.reg for o in ops)

        def knot() -> None:
            k[d] = ~k[a] & ones
        return Compiled(knot, 0, 0)
    if base in ("kshiftl", "kshiftr"):
        d, a = ops[0].reg, ops[1].reg
        count = ops[2].value & 0xFF
        left = base == "kshiftl"

        def kshift() -> None:
            v = k[a] & ones
            k[d] = 0 if count >= width else ((v << count) if left else (v >> count)) & ones
        return Compiled(kshift, 0, 0)
    a, b = ops[0].reg, ops[1].reg
    flags, rflags = st.flags, st
    test = base == "ktest"

    def ktest() -> None:
        x, y = k[a] & ones, k[b] & ones
        if test:
            zf, cf = (x & y) == 0, (~x & y & ones) == 0
        else:  # kortest
            zf, cf = (x | y) == 0, (x | y) == ones
        value = (fl.ZF if zf else 0) | (fl.CF if cf else 0)
        flags[0] = fl.raw((rflags.rflags_base & ~fl.ARITH_MASK) | value)
    return Compiled(ktest, 0, 0)


def _kmov(ops: list[Operand], st: CpuState, width: int, trace: bool) -> Compiled:
    """kmov k, k/m/r32/r64; kmov m, k; kmov r32/r64, k (zero-extended)."""
    dst, src = ops
    k, g, mem = st.k, st.gpr, st.mem
    ones = (1 << width) - 1
    nbytes = width // 8
    if src.kind == "mem":
        addr = address_fn(src, g)

        def load() -> None:
            a = addr()
            if st.trace is not None:
                st.trace.append((a, nbytes, 0))
            k[dst.reg] = int.from_bytes(mem.view(a, nbytes).tobytes(), "little")
        return Compiled(load, nbytes, 0)
    if dst.kind == "mem":
        addr = address_fn(dst, g)

        def store() -> None:
            a = addr()
            if st.trace is not None:
                st.trace.append((a, nbytes, 1))
            mem.wview(a, nbytes)[:] = np.frombuffer((k[src.reg] & ones).to_bytes(nbytes, "little"), np.uint8)
        return Compiled(store, 0, nbytes)
    if dst.kind == "gpr":
        d, s = dst.reg, src.reg

        def to_gpr() -> None:
            g[d] = k[s] & ones & MASK64
        return Compiled(to_gpr, 0, 0)
    if src.kind == "gpr":
        d, s = dst.reg, src.reg

        def from_gpr() -> None:
            k[d] = g[s] & ones
        return Compiled(from_gpr, 0, 0)
    if dst.kind == "k" and src.kind == "k":
        d, s = dst.reg, src.reg

        def copy() -> None:
            k[d] = k[s] & ones
        return Compiled(copy, 0, 0)
    raise Unsupported("kmov")
