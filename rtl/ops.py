"""The base operations of the 256-bit AVX2 integer SIMD port: one table, from which the decoder's
control ROM, the reference checks and the measured-cycle export are all derived.

Each operation is an AVX2 instruction (lower-case iced-x86 mnemonic, as the simulator's vector
layer names it) executed on the ALU (``unit = "alu"``) or through the multipliers and the
dot-product adders (``unit = "mul"``). Latencies are those of the Golden Cove core (Alder Lake P)
in the project's uarch tables (``sim/uarch/data/alderlakep.csv``, uops.info measurements):
ALU 1 cycle, multiply and ``vpmaddwd`` / ``vpmaddubsw`` 5, ``vpmulld`` 10 (two uops there; one
pass with cross-term multipliers here). ``vpcmpgtq`` is 3 cycles on Golden Cove (port 5); here it
is an ALU operation of 1 cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class AluFn(IntEnum):
    """ALU result select (element size from :attr:`BaseOp.esize`)."""

    ADD = 0
    SUB = 1
    ADDS = 2     # signed saturating add
    SUBS = 3
    ADDUS = 4    # unsigned saturating add
    SUBUS = 5
    CMPEQ = 6
    CMPGT = 7    # signed
    MINS = 8
    MAXS = 9
    MINU = 10
    MAXU = 11
    AND = 12
    OR = 13
    XOR = 14
    ANDN = 15    # ~a & b


SUBTRACTING = frozenset({AluFn.SUB, AluFn.SUBS, AluFn.SUBUS, AluFn.CMPGT, AluFn.MINS, AluFn.MAXS,
                         AluFn.MINU, AluFn.MAXU})
"""ALU functions that run the adder as ``a - b`` (comparisons read its flags)."""


class MulFn(IntEnum):
    """Multiplier / dot-product result select."""

    MULLW = 0      # low 16 bits of signed 16 x 16
    MULHW = 1      # high 16 bits of signed 16 x 16
    MULLD = 2      # low 32 bits of 32 x 32
    MADDWD = 3     # d[i] = w[2i]*w[2i] + w[2i+1]*w[2i+1], signed, wraps to 32 bits
    MADDUBSW = 4   # w[i] = sat16(ub[2i]*sb[2i] + ub[2i+1]*sb[2i+1]), first source unsigned


ESIZE = {"b": 0, "w": 1, "d": 2, "q": 3}
"""Element size code: log2 of the element's bytes."""


@dataclass(frozen=True)
class BaseOp:
    """One base instruction: ``dst = src1 op src2`` (VEX: ``src1`` = vvvv, ``src2`` = ModRM.rm)."""

    mnemonic: str
    unit: str            # "alu" or "mul"
    fn: int              # AluFn or MulFn
    esize: int           # ESIZE code (ALU); 1 for the multiplier's word ops
    latency: int         # cycles, Golden Cove

    @property
    def code(self) -> int:
        """Index in :data:`BASE_OPS` (the instruction's ``func`` field)."""
        return BASE_OPS.index(self)


def _build() -> tuple[BaseOp, ...]:
    ops: list[BaseOp] = []

    def alu(mn: str, fn: AluFn, size: str = "q") -> None:
        ops.append(BaseOp(mn, "alu", int(fn), ESIZE[size], 1))

    for s in "bwdq":
        alu(f"vpadd{s}", AluFn.ADD, s)
        alu(f"vpsub{s}", AluFn.SUB, s)
        alu(f"vpcmpeq{s}", AluFn.CMPEQ, s)
        alu(f"vpcmpgt{s}", AluFn.CMPGT, s)
    for s in "bw":
        alu(f"vpadds{s}", AluFn.ADDS, s)
        alu(f"vpsubs{s}", AluFn.SUBS, s)
        alu(f"vpaddus{s}", AluFn.ADDUS, s)
        alu(f"vpsubus{s}", AluFn.SUBUS, s)
    for s in "bwd":
        alu(f"vpmins{s}", AluFn.MINS, s)
        alu(f"vpmaxs{s}", AluFn.MAXS, s)
        alu(f"vpminu{s}", AluFn.MINU, s)
        alu(f"vpmaxu{s}", AluFn.MAXU, s)
    for mn, fn in (("vpand", AluFn.AND), ("vpor", AluFn.OR), ("vpxor", AluFn.XOR),
                   ("vpandn", AluFn.ANDN)):
        alu(mn, fn)
    for mn, fn, lat in (("vpmullw", MulFn.MULLW, 5), ("vpmulhw", MulFn.MULHW, 5),
                        ("vpmulld", MulFn.MULLD, 10), ("vpmaddwd", MulFn.MADDWD, 5),
                        ("vpmaddubsw", MulFn.MADDUBSW, 5)):
        ops.append(BaseOp(mn, "mul", int(fn), ESIZE["w"], lat))
    return tuple(ops)


BASE_OPS: tuple[BaseOp, ...] = _build()
"""Every base operation, in ``func`` code order."""

BY_NAME: dict[str, BaseOp] = {op.mnemonic: op for op in BASE_OPS}

MUL_LATENCIES: tuple[int, ...] = tuple(sorted({op.latency for op in BASE_OPS if op.unit == "mul"}))
"""Distinct multiplier latencies (5, 10): the result pipeline has a write tap for each."""

MAX_LATENCY = max(op.latency for op in BASE_OPS)


def base_op(mnemonic: str) -> BaseOp:
    try:
        return BY_NAME[mnemonic]
    except KeyError:
        raise ValueError(f"{mnemonic!r} is not a base operation of the RTL port") from None
