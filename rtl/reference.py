"""Instruction-level reference model of the slice plus register file, in numpy.

Base operations are defined here; TLUT and TGEMV call the golden semantics of
:mod:`tsar.isa.semantics`, so the RTL is checked against the ISA definition itself. Which registers
a T-SAR instruction reads and writes comes from its ISA operand specs
(:attr:`Instr.isa` -> :class:`~tsar.isa.codec.TsarInstruction`), and the words' widths from its
configuration (``lut_bits``, ``acc_bits``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tsar.isa import semantics
from tsar.isa.codec import TsarInstruction, validate
from tsar.isa.config import ADDER_TREE_FAN_IN, VECTOR_REGISTERS, TsarConfig
from tsar.isa.instructions import Field, Kind, instructions
from tsar.isa.operands import Register

from .alu import LANE_BITS, WIDE_BITS
from .base import SliceOp

_FIELDS = {"dst": Field.MODRM_REG, "src1": Field.VEX_VVVV, "src2": Field.MODRM_RM}
"""Which slice operand carries which encoding field (see :class:`~tsar.rtl.base.SliceOp`)."""


@dataclass(frozen=True)
class Instr:
    """One slice instruction with register operands (``cfg`` for TLUT / TGEMV)."""

    op: SliceOp
    dst: int
    src1: int = 0
    src2: int = 0
    cfg: TsarConfig | None = None

    def __str__(self) -> str:
        if self.op is SliceOp.TLUT:
            return f"{self.cfg.tlut_mnemonic} r{self.dst}, r{self.src2}"
        if self.op is SliceOp.TGEMV:
            return f"{self.cfg.tgemv_mnemonic} r{self.dst}, r{self.src1}, r{self.src2}"
        return f"{self.op.name.lower()} r{self.dst}, r{self.src1}, r{self.src2}"

    @cached_property
    def isa(self) -> TsarInstruction | None:
        """The ISA instruction of a TLUT / TGEMV (register operands), None for a base op.

        Built from the registered instruction spec of ``cfg``: its operands (by encoding field:
        ``dst`` = ModRM.reg, ``src1`` = VEX.vvvv, ``src2`` = ModRM.rm) say which registers it
        touches. Raises ValueError for an unregistered configuration or misaligned groups."""
        if self.op not in (SliceOp.TLUT, SliceOp.TGEMV):
            return None
        kind = Kind.TLUT if self.op is SliceOp.TLUT else Kind.TGEMV
        spec = next((s for s in instructions() if s.config == self.cfg and s.kind is kind), None)
        if spec is None:
            raise ValueError(f"{self.cfg.name} is not a registered configuration")
        numbers = {field: getattr(self, name) for name, field in _FIELDS.items()}
        inst = TsarInstruction(spec, tuple(Register(self.cfg.register_class, numbers[op.field])
                                           for op in spec.operands))
        validate(inst)
        return inst

    def operand_registers(self, field: Field) -> range:
        """The registers of the ISA operand in ``field`` (a whole group for group operands)."""
        inst = self.isa
        first = inst.operand(field).num
        return range(first, first + inst.spec.operand(field).regs)

    def writes(self) -> tuple[int, ...]:
        """Registers this instruction writes."""
        if self.op is SliceOp.NOP:
            return ()
        if self.isa is None:
            return (self.dst,)
        return tuple(r.num for r in self.isa.registers_written)


def to_words(value: int, n: int, bits: int = LANE_BITS) -> np.ndarray:
    """Unsigned register value -> ``n`` signed ``bits``-bit words (int64)."""
    raw = np.array([(value >> (bits * i)) & ((1 << bits) - 1) for i in range(n)], np.int64)
    return raw - ((raw >> (bits - 1)) << bits)


def from_words(words: np.ndarray, bits: int = LANE_BITS) -> int:
    """Signed or unsigned words -> unsigned register value (each word wraps to ``bits``)."""
    mask = (1 << bits) - 1
    return sum((int(w) & mask) << (bits * i) for i, w in enumerate(words))


def to_bytes(value: int, n: int) -> np.ndarray:
    return np.frombuffer(value.to_bytes(n, "little"), np.uint8).copy()


class SliceModel:
    """Reference model of a :class:`~tsar.rtl.unit.VectorUnit` (slice plus register file):
    architectural state of ``VECTOR_REGISTERS`` registers of ``vector_bits``, as Python ints."""

    def __init__(self, vector_bits: int = 256):
        self.vector_bits = vector_bits
        self.lanes = vector_bits // LANE_BITS
        self.regs = [0] * VECTOR_REGISTERS

    def execute(self, instr: Instr) -> None:
        n, regs = self.lanes, self.regs
        if instr.op is SliceOp.NOP:
            return
        if instr.op in (SliceOp.VPADDW, SliceOp.VPSUBW, SliceOp.VPMULLW):
            a, b = to_words(regs[instr.src1], n), to_words(regs[instr.src2], n)
            r = {SliceOp.VPADDW: a + b, SliceOp.VPSUBW: a - b, SliceOp.VPMULLW: a * b}[instr.op]
            regs[instr.dst] = from_words(r)
        elif instr.op is SliceOp.VPDPW4:
            trees = n // ADDER_TREE_FAN_IN
            a, b = to_words(regs[instr.src1], n), to_words(regs[instr.src2], n)
            acc = to_words(regs[instr.dst], trees, WIDE_BITS)
            dots = (a * b).reshape(trees, ADDER_TREE_FAN_IN).sum(axis=1)
            regs[instr.dst] = from_words(acc + dots, WIDE_BITS)
        elif instr.op is SliceOp.TLUT:
            self._tlut(instr)
        elif instr.op is SliceOp.TGEMV:
            self._tgemv(instr)
        else:
            raise ValueError(f"unknown op {instr.op}")

    def _tlut(self, instr: Instr) -> None:
        cfg, regs = instr.cfg, self.regs
        (src,) = instr.operand_registers(Field.MODRM_RM)
        act = to_bytes(regs[src], cfg.register_bytes)[:cfg.k].view(np.int8)
        group = instr.operand_registers(Field.MODRM_REG)
        words = semantics.tlut(cfg, act).reshape(len(group), cfg.lanes)
        for r, w in zip(group, words, strict=True):
            regs[r] = from_words(w, cfg.lut_bits)

    def _tgemv(self, instr: Instr) -> None:
        cfg, regs = instr.cfg, self.regs
        group = np.concatenate([to_words(regs[r], cfg.lanes, cfg.lut_bits)
                                for r in instr.operand_registers(Field.VEX_VVVV)])
        raw = b"".join(regs[r].to_bytes(cfg.register_bytes, "little")
                       for r in instr.operand_registers(Field.MODRM_RM))
        weights = np.frombuffer(raw[:cfg.weight_bytes], np.uint8)
        (acc_reg,) = instr.operand_registers(Field.MODRM_REG)
        acc = to_words(regs[acc_reg], cfg.acc_lanes, cfg.acc_bits).astype(cfg.acc_dtype)
        out = semantics.tgemv(cfg, acc, group.astype(cfg.lut_dtype), weights)
        regs[acc_reg] = from_words(out, cfg.acc_bits)
