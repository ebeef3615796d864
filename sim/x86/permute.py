"""Data-movement instructions as one gather over the register file.

For a shuffle, unpack, extract, insert, blend or byte shift with an immediate, every destination
byte is a fixed source byte or zero. Rather than restating each instruction's layout, the byte map
is derived from the op's own definition (:mod:`tsar.sim.x86.vecops`,
:mod:`tsar.sim.x86.evexops`): run once on sources whose bytes carry distinct random labels, it
tells which source byte lands where, and a second labelling confirms that the op only moved bytes.
The compiled instruction is then one ``np.take`` from the flattened register file (plus clearing
the zero bytes), whatever the op's own evaluation costs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tsar.sim.x86.decode import Operand
from tsar.sim.x86.state import REGISTER_BYTES, CpuState

MOVEMENT_PREFIXES = ("vpunpck", "vunpck", "vpalignr", "vpslldq", "vpsrldq", "vpshufd", "vpshuflw",
                     "vpshufhw", "vshufp", "vshufi", "vshuff", "vpblendw", "vpblendd", "vblendp",
                     "vpermq", "vpermpd", "vperm2", "vextracti", "vextractf", "vinserti",
                     "vinsertf", "vinsertps", "vmovlhps", "vmovhlps", "vmovshdup", "vmovsldup",
                     "vmovddup", "valign", "vpermilp")
"""Mnemonic prefixes tried as byte maps (only register operands; the derivation still checks
that each one is: an op whose result is not a movement of source bytes is left to its own
closure)."""
_IMMEDIATE_ONLY = ("vpermq", "vpermpd", "vpermilp")
"""Prefixes of mnemonics that also have a form with the selectors in a register: only their
immediate form is a fixed byte map."""

_SEEDS = (0x7A11, 0x5EED)
_MAX_RUNS = 4
"""Byte maps of at most this many contiguous runs are executed as slice copies."""


def _runs(flat_index: np.ndarray, zero: np.ndarray) -> list[tuple[int, int, int]]:
    """Maximal runs ``(start, end, first source byte)`` of destination bytes copied from
    consecutive flat register-file bytes (first source byte -1: a run of zero bytes)."""
    runs: list[tuple[int, int, int]] = []
    for i, (f, z) in enumerate(zip(flat_index.tolist(), zero.tolist(), strict=True)):
        f = -1 if z else f
        if runs:
            a, _, g = runs[-1]
            if (g < 0 and f < 0) or (g >= 0 and f == g + (i - a)):
                runs[-1] = (a, i + 1, g)
                continue
        runs.append((i, i + 1, f))
    return runs


def byte_map(fn: Callable, imm: int | None, sizes: list[int], out: int) -> np.ndarray | None:
    """For ``fn(sources, imm, out)`` on sources of ``sizes`` bytes: per destination byte the
    index of its source byte in the concatenated sources, or -1 for a zero byte; None when the
    op is not a pure byte movement for this immediate (or has more than 255 source bytes)."""
    total = sum(sizes)
    if total > 255:
        return None
    maps = []
    for seed in _SEEDS:
        labels = np.random.default_rng(seed).permutation(np.arange(1, 256, dtype=np.uint8))[:total]
        parts, at = [], 0
        for n in sizes:
            parts.append(labels[at:at + n].copy())
            at += n
        try:
            res = np.ascontiguousarray(fn(parts, imm, out)).reshape(-1).view(np.uint8)[:out]
        except (ValueError, IndexError, TypeError):
            return None
        if res.size != out:
            return None
        where = np.full(256, -1, np.int64)
        where[labels] = np.arange(total)
        maps.append(where[res])  # label 0 (a zero byte) maps to -1: no label is 0
    if not np.array_equal(maps[0], maps[1]):
        return None
    return maps[0]


def movement_closure(name: str, fn: Callable, imm: int | None, dst: Operand, srcs: list[Operand],
                     st: CpuState, zero_high: bool) -> Callable[[], None] | None:
    """The closure of a register-to-register data movement (``name`` among
    :data:`MOVEMENT_PREFIXES`) as one gather, or None when it is not one."""
    if not name.startswith(MOVEMENT_PREFIXES) or dst.kind != "vec" \
            or not srcs or any(o.kind != "vec" for o in srcs) \
            or (imm is None and name.startswith(_IMMEDIATE_ONLY)):
        return None
    size = dst.size
    found = byte_map(fn, imm, [o.size for o in srcs], size)
    if found is None:
        return None
    starts = np.cumsum([0] + [o.size for o in srcs])
    owner = np.searchsorted(starts, np.maximum(found, 0), side="right") - 1
    regs = np.array([o.reg for o in srcs])
    flat_index = regs[owner] * REGISTER_BYTES + (np.maximum(found, 0) - starts[owner])
    zeros = np.flatnonzero(found < 0)
    flat = st.zmm.reshape(-1)
    assert np.shares_memory(flat, st.zmm)
    row, high = st.zmm[dst.reg, :size], st.zmm[dst.reg, size:]
    runs = _runs(flat_index, found < 0)
    overlap = dst.reg in regs and len(runs) > 1
    if len(runs) <= _MAX_RUNS and not overlap:  # a few slice copies beat one gather
        copies = [(row[a:b], flat[f:f + b - a]) for a, b, f in runs if f >= 0]
        blanks = [row[a:b] for a, b, f in runs if f < 0]
        if len(copies) == 1 and not blanks:
            part, source = copies[0]
            if not zero_high:
                return lambda: part.__setitem__(Ellipsis, source)
            return lambda: (part.__setitem__(Ellipsis, source), high.fill(0))

        def copy_runs() -> None:
            for part, source in copies:
                part[...] = source
            for part in blanks:
                part.fill(0)
            if zero_high:
                high.fill(0)
        return copy_runs
    take = np.take
    if zeros.size == 0:
        if not zero_high:
            return lambda: take(flat, flat_index, None, row)  # mode "raise" buffers: dst may be a source
        return lambda: (take(flat, flat_index, None, row), high.fill(0))
    keep = (found >= 0).astype(np.uint8)
    multiply = np.multiply
    return lambda: (take(flat, flat_index, None, row), multiply(row, keep, row),
                    zero_high and high.fill(0))
