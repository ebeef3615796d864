"""Instruction-level reference model of the port plus register file.

Base operations are not defined here: the model takes their semantics as a function
(the front end and the tests pass the simulator's vector layer, ``tsar.sim.x86.vecops``,
which is checked against silicon), so the RTL is checked against an independent
definition. TLUT and TGEMV call the golden semantics of :mod:`tsar.isa.semantics`, so the RTL
is checked against the ISA definition itself. Which registers a T-SAR instruction reads and
writes comes from its ISA operand specs
(:attr:`Instr.isa` -> :class:`~tsar.isa.codec.TsarInstruction`), and the words' widths from its
configuration (``lut_bits``, ``acc_bits``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tsar.isa import semantics
from tsar.isa.codec import TsarInstruction, validate
from tsar.isa.config import TsarConfig
from tsar.isa.instructions import Field, Kind, instructions
from tsar.isa.operands import Register
from tsar.rtl.alu import WORD_BITS as LANE_BITS
from tsar.rtl.base import SliceOp
from tsar.rtl.ops import base_op
from tsar.rtl.regfile import vector_registers

BaseSemantics = Callable[[str, bytes, bytes], bytes]
"""``(mnemonic, src1 bytes, src2 bytes) -> result bytes`` of a base operation (little-endian)."""

_FIELDS = {"dst": Field.MODRM_REG, "src1": Field.VEX_VVVV, "src2": Field.MODRM_RM}
"""Which slice operand carries which encoding field (see :class:`~tsar.rtl.base.SliceOp`)."""


@dataclass(frozen=True)
class Instr:
    """One port instruction: ``func`` (a base mnemonic) for ``BASE``, ``cfg`` for TLUT / TGEMV;
    ``mem``: ``src2`` (and its pair register) comes from the load data ``load`` instead."""

    op: SliceOp
    dst: int
    src1: int = 0
    src2: int = 0
    cfg: TsarConfig | None = None
    func: str = ""
    mem: bool = False
    load: int = 0

    @classmethod
    def base(cls, mnemonic: str, dst: int, src1: int, src2: int, **kw) -> Instr:
        base_op(mnemonic)
        return cls(SliceOp.BASE, dst, src1, src2, func=mnemonic, **kw)

    @property
    def name(self) -> str:
        if self.op is SliceOp.TLUT:
            return self.cfg.tlut_mnemonic
        if self.op is SliceOp.TGEMV:
            return self.cfg.tgemv_mnemonic
        return self.func or self.op.name.lower()

    def __str__(self) -> str:
        src2 = "[mem]" if self.mem else f"r{self.src2}"
        if self.op is SliceOp.TLUT:
            return f"{self.name} r{self.dst}, {src2}"
        return f"{self.name} r{self.dst}, r{self.src1}, {src2}"

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
    """Reference model of a :class:`~tsar.rtl.unit.VectorUnit` (port plus register file):
    architectural state of the registers of ``vector_bits``
    (:func:`~tsar.rtl.regfile.vector_registers`), as Python ints;
    ``base_semantics`` executes the base operations."""

    def __init__(self, vector_bits: int = 256, base_semantics: BaseSemantics | None = None):
        self.vector_bits = vector_bits
        self.lanes = vector_bits // LANE_BITS
        self.regs = [0] * vector_registers(vector_bits)
        self.base_semantics = base_semantics

    def _src2(self, instr: Instr, i: int = 0) -> int:
        if instr.mem:
            return (instr.load >> (i * self.vector_bits)) & ((1 << self.vector_bits) - 1)
        return self.regs[instr.src2 + i]

    def execute(self, instr: Instr) -> None:
        regs, nbytes = self.regs, self.vector_bits // 8
        if instr.op is SliceOp.NOP:
            return
        if instr.op is SliceOp.BASE:
            if self.base_semantics is None:
                raise ValueError("SliceModel needs base_semantics to execute base operations")
            out = self.base_semantics(instr.func, regs[instr.src1].to_bytes(nbytes, "little"),
                                      self._src2(instr).to_bytes(nbytes, "little"))
            regs[instr.dst] = int.from_bytes(out[:nbytes], "little")
        elif instr.op is SliceOp.TLUT:
            self._tlut(instr)
        elif instr.op is SliceOp.TGEMV:
            self._tgemv(instr)
        else:
            raise ValueError(f"unknown op {instr.op}")

    def _tlut(self, instr: Instr) -> None:
        cfg, regs = instr.cfg, self.regs
        act = to_bytes(self._src2(instr), cfg.register_bytes)[:cfg.k].view(np.int8)
        group = instr.operand_registers(Field.MODRM_REG)
        words = semantics.tlut(cfg, act).reshape(len(group), cfg.lanes)
        for r, w in zip(group, words, strict=True):
            regs[r] = from_words(w, cfg.lut_bits)

    def _tgemv(self, instr: Instr) -> None:
        cfg, regs = instr.cfg, self.regs
        group = np.concatenate([to_words(regs[r], cfg.lanes, cfg.lut_bits)
                                for r in instr.operand_registers(Field.VEX_VVVV)])
        raw = b"".join(self._src2(instr, i).to_bytes(cfg.register_bytes, "little")
                       for i in range(len(instr.operand_registers(Field.MODRM_RM))))
        weights = np.frombuffer(raw[:cfg.weight_bytes], np.uint8)
        (acc_reg,) = instr.operand_registers(Field.MODRM_REG)
        acc = to_words(regs[acc_reg], cfg.acc_lanes, cfg.acc_bits).astype(cfg.acc_dtype)
        out = semantics.tgemv(cfg, acc, group.astype(cfg.lut_dtype), weights)
        regs[acc_reg] = from_words(out, cfg.acc_bits)
