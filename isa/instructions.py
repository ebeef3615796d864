"""Declarative instruction table of the T-SAR family, derived from the registered configurations.

Each configuration contributes two instructions. Their operands, encodings and micro-op counts are
built here from :class:`~tsar.isa.config.TsarConfig`; nothing is restated by hand.

Encoding of 128- and 256-bit configurations (VEX3, ``C4 RXBmmmmm WvvvvLpp opcode ModRM [SIB] [disp]``):

* map ``mmmmm = 8``: a VEX opcode map no shipping x86 extension uses (iced-x86 and capstone decode
  it as invalid; the host CPU raises #UD);
* opcode ``0x20 | slot`` is TLUT, ``0x30 | slot`` is TGEMV, ``slot`` being the configuration's
  encoding slot; ``VEX.L`` gives the vector width (1: 256-bit, 0: 128-bit); ``pp = 00`` and
  ``W = 0`` (other values are reserved and raise #UD);
* ``ModRM.reg`` (+``VEX.R``) is the destination group / accumulator, ``VEX.vvvv`` the TGEMV LUT
  group base (``1111``, i.e. unused, for TLUT), ``ModRM.rm`` (+``VEX.B``/``VEX.X``, SIB,
  displacement) the activation or weight source.

Encoding of 512-bit configurations (EVEX, ``62 [R X B R' 0 mmm] [W vvvv 1 pp] [z L'L b V' aaa]
opcode ModRM [SIB] [disp]``):

* map ``mmm = 0`` (:data:`EVEX_MAP`): reserved in every published EVEX map assignment (1-3: the
  0F maps, 4: APX, 5-6: AVX512-FP16, 7: USER_MSR); iced-x86 decodes all of it as invalid
  (tested opcode by opcode);
* the same opcodes, ``pp``, ``W`` and operand fields as the VEX form; ``L'L = 10`` (512 bits);
  ``EVEX.R'`` extends ModRM.reg, ``EVEX.V'`` extends vvvv and ``EVEX.X`` extends a register-form
  ModRM.rm, so zmm0..zmm31 are all addressable (LUT groups tile the 32 registers);
* no opmask, zeroing or broadcast (``aaa = 000``, ``z = 0``, ``b = 0``; anything else is #UD): a
  TLUT writes whole tables and a TGEMV a whole accumulator tile, so a masked lane would leave a
  table entry or output from another computation behind. Row tails are zero weights instead (a
  zero weight adds 0 exactly);
* an 8-bit displacement is scaled by :attr:`OperandSpec.disp8_scale` (EVEX's compressed disp8*N:
  N = the memory operand's bytes, at most 64, as the full-vector and tuple-1 forms scale).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cache

from tsar.isa.config import TsarConfig, configs, registry_version

VEX_MAP = 8
EVEX_MAP = 0
"""EVEX ``mmm`` of the 512-bit forms."""
EVEX_LENGTH_512 = 0b10
"""EVEX ``L'L`` of a 512-bit operation."""
DISP8_SCALE_MAX = 64
"""Largest EVEX disp8 scale N (one zmm)."""
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
"""Intel ``... ptr`` keyword for each memory operand size in bytes (a larger operand, such as
c4s4-512's 128-byte weights, has none: its address is written alone)."""


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

    @property
    def disp8_scale(self) -> int:
        """EVEX compressed-displacement factor N of the memory form: an 8-bit displacement counts
        units of N bytes (the operand's size, at most :data:`DISP8_SCALE_MAX`)."""
        return min(self.mem_bytes or 1, DISP8_SCALE_MAX)

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
    def encoding(self) -> str:
        """``"vex"`` or ``"evex"`` (:attr:`~tsar.isa.config.TsarConfig.encoding`)."""
        return self.config.encoding

    @property
    def vex_l(self) -> int:
        """The length field: ``VEX.L`` (1: 256-bit, 0: 128-bit) or EVEX ``L'L`` (``10``: 512-bit)."""
        return {128: 0, 256: 1, 512: EVEX_LENGTH_512}[self.config.vector_bits]

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
        vvvv = "LUT group" if self.operand(Field.VEX_VVVV) else "1111b"
        if self.encoding == "evex":
            return f"EVEX.512.NP.M{EVEX_MAP}.W0 {self.opcode:02X} /r, vvvv={vvvv}, no mask"
        return f"VEX.{self.config.vector_bits}.NP.M{VEX_MAP}.W0 {self.opcode:02X} /r, vvvv={vvvv}"

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


_CURRENT: list = [-1, {}, frozenset()]  # registry version, its specs by mnemonic, the mnemonics


def _current() -> list:
    """The specs by mnemonic of the registered configurations, looked up again only when the
    registry changed (:func:`~tsar.isa.config.registry_version`): a lookup hashes nothing."""
    version = registry_version()
    if _CURRENT[0] != version:
        table = _by_mnemonic(configs())
        _CURRENT[:] = [version, table, frozenset(table)]
    return _CURRENT


def mnemonics() -> frozenset[str]:
    return _current()[2]


def by_mnemonic(mnemonic: str) -> tuple[InstructionSpec, ...]:
    """The specs sharing a mnemonic (one per vector width), empty if unknown."""
    return _current()[1].get(mnemonic.lower(), ())


def by_opcode(opcode: int, vex_l: int, encoding: str = "vex") -> InstructionSpec | None:
    """The spec a decoder selects from the opcode byte, the length field (VEX.L or EVEX L'L) and
    the prefix, or None (reserved: #UD)."""
    for spec in instructions():
        if spec.opcode == opcode and spec.vex_l == vex_l and spec.encoding == encoding:
            return spec
    return None
