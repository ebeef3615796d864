"""The shape of one instruction's semantics (:class:`Op`) and the lane helpers every semantics
module shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Fn = Callable[..., np.ndarray]
Closure = Callable[[], None]
"""``fn(srcs, imm, out) -> array`` (and ``fn(srcs, imm, out, env)`` for floating-point ops)."""

I8, I16, I32, I64 = np.int8, np.int16, np.int32, np.int64
U8, U16, U32, U64 = np.uint8, np.uint16, np.uint32, np.uint64
F32, F64 = np.float32, np.float64


@dataclass(frozen=True)
class Op:
    """One instruction's semantics.

    ``reads_dst``: the destination's old value is passed as the first source (FMA, inserts into
    merged scalars). ``ufunc``/``dtype``: the operation is ``ufunc(src1, src2)`` on lanes of
    ``dtype``, which lets the executor run it in place with ``out=`` (fast path).
    ``writes_flags``: the instruction writes RFLAGS (``vptest``), result is the flags word.
    ``fp``: a floating-point instruction; ``fn`` takes a fourth argument, the guest's
    :class:`~tsar.sim.x86.fpenv.FpEnv` (rounding, DAZ/FTZ, raised exception flags).
    ``to_mask`` (EVEX): the result is one bool per element, written to an opmask register.
    ``uses_mask`` (EVEX): ``fn`` takes a fifth argument, the write mask as bools per element
    (compress, expand), and applies it itself.
    """

    fn: Fn
    reads_dst: bool = False
    ufunc: np.ufunc | None = None
    dtype: type | None = None
    writes_flags: bool = False
    fp: bool = False
    to_mask: bool = False
    uses_mask: bool = False


@dataclass(frozen=True)
class Compiled:
    """A compiled instruction: its closure and its static memory traffic in bytes."""

    run: Closure
    bytes_read: int
    bytes_written: int


class Unsupported(Exception):
    """The instruction is outside the simulator's coverage."""


def lanes(x: np.ndarray) -> np.ndarray:
    """``(..., n)`` -> ``(..., n/16, 16)``: 128-bit lanes as a batch axis."""
    return x.reshape(*x.shape[:-1], -1, 16)


def flat(x: np.ndarray) -> np.ndarray:
    """Inverse of :func:`lanes` for any dtype: merge the last two axes."""
    return np.ascontiguousarray(x).reshape(*x.shape[:-2], -1)


def mask_bools(value: int, n: int) -> np.ndarray:
    """The low ``n`` bits of an opmask value as bools, bit 0 first."""
    raw = np.frombuffer(value.to_bytes(8, "little"), np.uint8)
    return np.unpackbits(raw, bitorder="little")[:n].astype(bool)


def mask_value(bits: np.ndarray) -> int:
    """Bools (bit 0 first) as an opmask value."""
    return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")
