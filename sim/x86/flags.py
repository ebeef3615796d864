"""Lazily evaluated arithmetic flags for the Python-executed scalar subset.

A flag-setting instruction records ``(kind, res, a, b, bits, aux)`` instead of computing RFLAGS;
conditions and the materialized RFLAGS value are derived on demand. ``res``, ``a`` and ``b`` are
unsigned and already masked to ``bits``. ``aux`` carries CF where the kind cannot recompute it
(INC/DEC keep the previous CF; shifts record the last bit shifted out; MUL its overflow bit).
"""

from __future__ import annotations

from collections.abc import Callable

RAW, ADD, SUB, LOGIC, INC, DEC, SHL, SHR, SAR, MUL = range(10)

CF, PF, AF, ZF, SF, OF = 0x1, 0x4, 0x10, 0x40, 0x80, 0x800
ARITH_MASK = CF | PF | AF | ZF | SF | OF

FlagState = tuple[int, int, int, int, int, int]


def raw(rflags: int) -> FlagState:
    return (RAW, 0, rflags, 0, 64, 0)


def cf(t: FlagState) -> int:
    kind, res, a, b, _, aux = t
    if kind == ADD:
        return int(res < a)
    if kind == SUB:
        return int(a < b)
    if kind == RAW:
        return a & 1
    if kind == LOGIC:
        return 0
    return aux


def zf(t: FlagState) -> int:
    return (t[2] >> 6) & 1 if t[0] == RAW else int(t[1] == 0)


def sf(t: FlagState) -> int:
    return (t[2] >> 7) & 1 if t[0] == RAW else (t[1] >> (t[4] - 1)) & 1


def of(t: FlagState) -> int:
    kind, res, a, b, bits, aux = t
    top = bits - 1
    if kind == ADD:
        return (((a ^ res) & (b ^ res)) >> top) & 1
    if kind == SUB:
        return (((a ^ b) & (a ^ res)) >> top) & 1
    if kind == RAW:
        return (a >> 11) & 1
    if kind == INC:
        return int(res == 1 << top)
    if kind == DEC:
        return int(res == (1 << top) - 1)
    if kind == SHL:
        return ((res >> top) & 1) ^ aux if b == 1 else 0
    if kind == SHR:
        return (a >> top) & 1 if b == 1 else 0
    if kind == MUL:
        return aux
    return 0  # LOGIC, SAR


def pf(t: FlagState) -> int:
    if t[0] == RAW:
        return (t[2] >> 2) & 1
    return int(bin(t[1] & 0xFF).count("1") % 2 == 0)


def af(t: FlagState) -> int:
    kind, res, a, b, _, _ = t
    if kind == RAW:
        return (a >> 4) & 1
    if kind in (ADD, SUB, INC, DEC):
        return ((a ^ b ^ res) >> 4) & 1
    return 0


def materialize(t: FlagState, rflags: int) -> int:
    """RFLAGS with the six arithmetic flags of ``t`` merged into the other bits of ``rflags``."""
    if t[0] == RAW:
        return t[2]
    value = cf(t) * CF | pf(t) * PF | af(t) * AF | zf(t) * ZF | sf(t) * SF | of(t) * OF
    return (rflags & ~ARITH_MASK) | value


def _lt(t: FlagState) -> int:
    return sf(t) ^ of(t)


CONDITIONS: dict[int, Callable[[FlagState], int]] = {
    1: of, 2: lambda t: 1 - of(t),
    3: cf, 4: lambda t: 1 - cf(t),
    5: zf, 6: lambda t: 1 - zf(t),
    7: lambda t: cf(t) | zf(t), 8: lambda t: 1 - (cf(t) | zf(t)),
    9: sf, 10: lambda t: 1 - sf(t),
    11: pf, 12: lambda t: 1 - pf(t),
    13: _lt, 14: lambda t: 1 - _lt(t),
    15: lambda t: _lt(t) | zf(t), 16: lambda t: 1 - (_lt(t) | zf(t)),
}
"""iced-x86 ``ConditionCode`` -> predicate on a flag state (1 when the condition holds)."""
