"""Declarative instruction table of the T-SAR family, derived from the registered configurations.

Each configuration contributes two instructions. Their operands, encodings and micro-op counts are
built here from :class:`~tsar.isa.config.TsarConfig`; nothing is restated by hand.

Encoding (VEX3, ``C4 RXBmmmmm WvvvvLpp opcode ModRM [SIB] [disp]``):

* map ``mmmmm = 8``: a VEX opcode map no shipping x86 extension uses (iced-x86 and capstone decode
  it as invalid; the host CPU raises #UD);
* opcode ``0x20 | slot`` is TLUT, ``0x30 | slot`` is TGEMV, ``slot`` being the configuration's
  encoding slot; ``VEX.L`` gives the vector width (1: 256-bit, 0: 128-bit); ``pp = 00`` and
  ``W = 0`` (other values are reserved and raise #UD);
* ``ModRM.reg`` (+``VEX.R``) is the destination group / accumulator, ``VEX.vvvv`` the TGEMV LUT
  group base (``1111``, i.e. unused, for TLUT), ``ModRM.rm`` (+``VEX.B``/``VEX.X``, SIB,
  displacement) the activation or weight source.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cache

from tsar.isa.config import TsarConfig, configs

VEX_MAP = 8
TLUT_OPCODE_BASE = 0x20
TGEMV_OPCODE_BASE = 0x30


class Field(Enum):
    """Where an operand lives in the encoding."""

    MODRM_REG = "ModRM.reg"
    VEX_VVVV = "VEX.vvvv"
    MODRM_RM = "ModRM.rm"


class Kind(Enum):
    TLUT = "tlut"
    TGEMV = "tgemv"


MEMORY_SIZE_NAMES = {1: "byte", 2: "word", 4: "dword", 8: "qword", 16: "xmmword", 32: "ymmword",
                     64: "zmmword"}
"""Intel ``... ptr`` keyword for each memory operand size in bytes."""


@dataclass(frozen=True)
class OperandSpec:
    """One operand of a T-SAR instruction.

    ``regs`` consecutive registers form the register form of the operand; the base register must
    be a multiple of ``regs``. ``mem_bytes`` is the size of the memory form, or None when only a
    register is allowed. ``access`` is ``"r"``, ``"w"`` or ``"rw"``.
    """

    name: str
    field: Field
    access: str
    regs: int
    mem_bytes: int | None
    description: str

    @property
    def allows_memory(self) -> bool:
        return self.mem_bytes is not None

    def kind_text(self, reg_class: str) -> str:
        """Human-readable operand kind, e.g. ``ymm (group of 2)`` or ``ymm/m256``."""
        reg = reg_class if self.regs == 1 else f"{reg_class} group of {self.regs}"
        if self.mem_bytes is None:
            return reg
        return f"{reg} / m{self.mem_bytes * 8}"


@dataclass(frozen=True)
class InstructionSpec:
    """One T-SAR instruction of one configuration."""

    kind: Kind
    config: TsarConfig
    operands: tuple[OperandSpec, ...]

    @property
    def mnemonic(self) -> str:
        cfg = self.config
        return cfg.tlut_mnemonic if self.kind is Kind.TLUT else cfg.tgemv_mnemonic

    @property
    def opcode(self) -> int:
        base = TLUT_OPCODE_BASE if self.kind is Kind.TLUT else TGEMV_OPCODE_BASE
        return base | self.config.slot

    @property
    def vex_l(self) -> int:
        return 1 if self.config.vector_bits == 256 else 0

    @property
    def uops(self) -> int:
        cfg = self.config
        return cfg.tlut_uops if self.kind is Kind.TLUT else cfg.tgemv_uops

    @property
    def register_class(self) -> str:
        return self.config.register_class

    def operand(self, field: Field) -> OperandSpec | None:
        for op in self.operands:
            if op.field is field:
                return op
        return None

    @property
    def syntax(self) -> str:
        """Intel-syntax template, e.g. ``tlut2x4 ymm{dst}, qword ptr [mem]``."""
        parts = [op.kind_text(self.register_class) for op in self.operands]
        return f"{self.mnemonic} " + ", ".join(parts)

    @property
    def encoding_text(self) -> str:
        """Opcode notation in the style of the Intel SDM."""
        width = "256" if self.vex_l else "128"
        vvvv = "LUT group" if self.operand(Field.VEX_VVVV) else "1111b"
        return f"VEX.{width}.NP.M{VEX_MAP}.W0 {self.opcode:02X} /r, vvvv={vvvv}"

    @property
    def summary(self) -> str:
        cfg = self.config
        if self.kind is Kind.TLUT:
            tables = "/".join(cfg.lut_tables) + (" table pairs" if len(cfg.lut_tables) == 2 else " tables")
            return (f"build {cfg.s} {tables} of {cfg.patterns} {cfg.lut_dtype} entries from "
                    f"{cfg.k} int8 activations into {cfg.group_regs} {cfg.register_class} registers")
        return (f"acc[0..{cfg.m}) += ternary ({cfg.m} x {cfg.k}) tile . activations, "
                f"looked up in the LUT group; {cfg.acc_dtype} wrap-around")


def _tlut_spec(cfg: TsarConfig) -> InstructionSpec:
    return InstructionSpec(
        Kind.TLUT,
        cfg,
        (
            OperandSpec("dst", Field.MODRM_REG, "w", cfg.group_regs, None,
                        f"LUT group: {cfg.group_regs} consecutive registers, {cfg.group_words} "
                        f"{cfg.lut_dtype} words, base aligned to {cfg.group_regs}"),
            OperandSpec("src", Field.MODRM_RM, "r", 1, cfg.k,
                        f"{cfg.k} int8 activations (memory, or the low {cfg.k} bytes of a "
                        "register)"),
        ),
    )


def _tgemv_spec(cfg: TsarConfig) -> InstructionSpec:
    return InstructionSpec(
        Kind.TGEMV,
        cfg,
        (
            OperandSpec("acc", Field.MODRM_REG, "rw", 1, None,
                        f"{cfg.m} {cfg.acc_dtype} accumulators, read-modify-write"),
            OperandSpec("lut", Field.VEX_VVVV, "r", cfg.group_regs, None,
                        f"LUT group written by {cfg.tlut_mnemonic} (base aligned to "
                        f"{cfg.group_regs})"),
            OperandSpec("weights", Field.MODRM_RM, "r", cfg.weight_regs, cfg.weight_bytes,
                        f"{cfg.m} x {cfg.s} weight codes of {cfg.code_bits} bits "
                        f"({cfg.weight_bits} bits)"),
        ),
    )


def instructions() -> tuple[InstructionSpec, ...]:
    """Every T-SAR instruction of every registered configuration."""
    return _specs(configs())


@cache
def _specs(cfgs: tuple[TsarConfig, ...]) -> tuple[InstructionSpec, ...]:
    """The instructions of ``cfgs``, built once per set of registered configurations (the
    assembler, the decoders and the timing model look them up per instruction)."""
    out: list[InstructionSpec] = []
    for cfg in cfgs:
        out += [_tlut_spec(cfg), _tgemv_spec(cfg)]
    return tuple(out)


@cache
def _by_mnemonic(cfgs: tuple[TsarConfig, ...]) -> dict[str, tuple[InstructionSpec, ...]]:
    out: dict[str, tuple[InstructionSpec, ...]] = {}
    for spec in _specs(cfgs):
        out[spec.mnemonic] = (*out.get(spec.mnemonic, ()), spec)
    return out


def mnemonics() -> frozenset[str]:
    return frozenset(_by_mnemonic(configs()))


def by_mnemonic(mnemonic: str) -> tuple[InstructionSpec, ...]:
    """The specs sharing a mnemonic (one per vector width), empty if unknown."""
    return _by_mnemonic(configs()).get(mnemonic.lower(), ())


def by_opcode(opcode: int, vex_l: int) -> InstructionSpec | None:
    """The spec a decoder selects from the opcode byte and VEX.L, or None (reserved: #UD)."""
    for spec in instructions():
        if spec.opcode == opcode and spec.vex_l == vex_l:
            return spec
    return None
