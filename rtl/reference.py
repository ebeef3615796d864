"""Instruction-level reference model of the slice plus register file, in numpy.

Base operations are defined here; TLUT and TGEMV call the golden semantics of
:mod:`tsar.isa.semantics`, so the RTL is checked against the ISA definition itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tsar.isa import semantics
from tsar.isa.config import ADDER_TREE_FAN_IN, LANE_BITS, TsarConfig

from .base import REGISTERS, SliceOp


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

    def writes(self) -> range:
        """Registers this instruction writes."""
        n = self.cfg.group_regs if self.op is SliceOp.TLUT else 1
        return range(self.dst, self.dst + n) if self.op is not SliceOp.NOP else range(0)


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


class Machine:
    """Architectural state: ``REGISTERS`` registers of ``vector_bits`` as Python ints."""

    def __init__(self, vector_bits: int = 256):
        self.vector_bits = vector_bits
        self.lanes = vector_bits // LANE_BITS
        self.regs = [0] * REGISTERS

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
            acc = to_words(regs[instr.dst], trees, 2 * LANE_BITS)
            dots = (a * b).reshape(trees, ADDER_TREE_FAN_IN).sum(axis=1)
            regs[instr.dst] = from_words(acc + dots, 2 * LANE_BITS)
        elif instr.op is SliceOp.TLUT:
            cfg = instr.cfg
            act = to_bytes(regs[instr.src2], cfg.register_bytes)[:cfg.k].view(np.int8)
            words = semantics.tlut(cfg, act).reshape(cfg.group_regs, n)
            for i in range(cfg.group_regs):
                regs[instr.dst + i] = from_words(words[i])
        elif instr.op is SliceOp.TGEMV:
            cfg = instr.cfg
            group = np.concatenate([to_words(regs[instr.src1 + i], n) for i in range(cfg.group_regs)])
            raw = b"".join(regs[instr.src2 + i].to_bytes(cfg.register_bytes, "little")
                           for i in range(cfg.weight_regs))
            weights = np.frombuffer(raw[:cfg.weight_bytes], np.uint8)
            acc = to_words(regs[instr.dst], n).astype(np.int16)
            regs[instr.dst] = from_words(semantics.tgemv(cfg, acc, group.astype(np.int16), weights))
        else:
            raise ValueError(f"unknown op {instr.op}")
