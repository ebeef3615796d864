"""VEX3 encoder and decoder of the T-SAR family (field assignment in :mod:`tsar.isa.instructions`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from tsar.common.errors import UserError
from tsar.isa.config import VECTOR_REGISTERS
from tsar.isa.instructions import (
    MEMORY_SIZE_NAMES,
    VEX_MAP,
    Field,
    InstructionSpec,
    OperandSpec,
    by_mnemonic,
    by_opcode,
)
from tsar.isa.modrm import AddressingError, decode_rm, encode_rm
from tsar.isa.operands import GPR_NUMBER, Memory, Operand, Register

VEX3 = 0xC4


class EncodingError(UserError, ValueError):
    """The operands cannot be encoded (wrong kind, misaligned group, unencodable address)."""


class InvalidInstruction(UserError, ValueError):
    """Bytes in the T-SAR opcode space that do not form a valid instruction (#UD)."""


@dataclass(frozen=True)
class TsarInstruction:
    """A T-SAR instruction with concrete operands, in the spec's operand order."""

    spec: InstructionSpec
    operands: tuple[Operand, ...]
    length: int | None = None  # set by the decoder

    @property
    def mnemonic(self) -> str:
        return self.spec.mnemonic

    def operand(self, field: Field) -> Operand:
        for spec, value in zip(self.spec.operands, self.operands, strict=True):
            if spec.field is field:
                return value
        raise KeyError(field)

    def __str__(self) -> str:
        return f"{self.mnemonic} " + ", ".join(_operand_text(op) for op in self.operands)

    def _registers(self, access: str) -> tuple[Register, ...]:
        out: list[Register] = []
        for spec, value in zip(self.spec.operands, self.operands, strict=True):
            if isinstance(value, Register):
                if access in spec.access:
                    out += [Register(value.cls, value.num + i) for i in range(spec.regs)]
            elif access == "r":  # an address reads its base and index registers
                out += [Register("gpr", GPR_NUMBER[r]) for r in (value.base, value.index)
                        if r and r != "rip"]
        return tuple(dict.fromkeys(out))

    @property
    def registers_read(self) -> tuple[Register, ...]:
        """Every register the instruction reads: whole register groups of its ``r``/``rw`` operands
        and the base/index GPRs of a memory operand (derived from the operand specs)."""
        return self._registers("r")

    @property
    def registers_written(self) -> tuple[Register, ...]:
        """Every register the instruction writes (a TLUT's whole group, a TGEMV's accumulator)."""
        return self._registers("w")

    @property
    def memory_operand(self) -> Memory | None:
        """The memory operand, if any."""
        return next((v for v in self.operands if isinstance(v, Memory)), None)


def _operand_text(op: Operand) -> str:
    return op.text(MEMORY_SIZE_NAMES) if isinstance(op, Memory) else op.name


def make(mnemonic: str, *operands: Operand) -> TsarInstruction:
    """Build a T-SAR instruction, choosing the configuration width from the first operand's class.

    Raises :class:`EncodingError` for unknown mnemonics and operands of the wrong kind.
    """
    specs = by_mnemonic(mnemonic)
    if not specs:
        raise EncodingError(f"unknown T-SAR mnemonic {mnemonic!r}")
    first = operands[0] if operands else None
    cls = first.cls if isinstance(first, Register) else None
    for spec in specs:
        if spec.register_class == cls:
            inst = TsarInstruction(spec, tuple(operands))
            validate(inst)
            return TsarInstruction(spec, tuple(
                replace(value, size=op.mem_bytes) if isinstance(value, Memory) else value
                for op, value in zip(spec.operands, operands, strict=True)))
    classes = " or ".join(sorted({s.register_class for s in specs}))
    got = _operand_text(first) if first is not None else "nothing"
    raise EncodingError(f"{mnemonic}: first operand must be a {classes} register, got {got}")


def validate(inst: TsarInstruction) -> None:
    """Check operand count, kinds, register classes, group alignment and memory sizes."""
    spec = inst.spec
    if len(inst.operands) != len(spec.operands):
        raise EncodingError(
            f"{spec.mnemonic} takes {len(spec.operands)} operands "
            f"({', '.join(o.name for o in spec.operands)}), got {len(inst.operands)}"
        )
    for op_spec, value in zip(spec.operands, inst.operands, strict=True):
        _check_operand(spec, op_spec, value)


def _check_operand(spec: InstructionSpec, op_spec: OperandSpec, value: Operand) -> None:
    where = f"{spec.mnemonic} operand '{op_spec.name}'"
    kind = op_spec.kind_text(spec.register_class)
    if isinstance(value, Memory):
        if not op_spec.allows_memory:
            raise EncodingError(f"{where} must be {kind}, not memory")
        if value.size is not None and value.size != op_spec.mem_bytes:
            want = MEMORY_SIZE_NAMES[op_spec.mem_bytes]
            got = MEMORY_SIZE_NAMES.get(value.size, f"{value.size}-byte")
            raise EncodingError(f"{where} must be {want} ptr ({op_spec.mem_bytes} bytes), not {got} ptr")
        return
    if value.cls != spec.register_class:
        raise EncodingError(f"{where} must be {kind}, not {value.name}")
    if not 0 <= value.num < VECTOR_REGISTERS:
        raise EncodingError(f"{where}: {value.name} is not addressable with VEX "
                            f"(0..{VECTOR_REGISTERS - 1} only)")
    if value.num % op_spec.regs:
        raise EncodingError(
            f"{where}: group base {value.name} is misaligned; {op_spec.regs}-register groups start "
            f"at a multiple of {op_spec.regs}"
        )


def encode(inst: TsarInstruction, address: int = 0,
           symbols: Mapping[str, int] | None = None) -> bytes:
    """Encode ``inst`` placed at ``address``. RIP-relative symbols are looked up in ``symbols``.

    An operand that names a symbol is always encoded with a 32-bit displacement, so the length
    of an instruction never depends on where its symbol lands.
    """
    validate(inst)
    spec = inst.spec
    reg_op = inst.operand(Field.MODRM_REG)
    rm_op = inst.operand(Field.MODRM_RM)
    assert isinstance(reg_op, Register)
    vvvv = 0
    if spec.operand(Field.VEX_VVVV) is not None:
        lut = inst.operand(Field.VEX_VVVV)
        assert isinstance(lut, Register)
        vvvv = lut.num
    has_symbol = isinstance(rm_op, Memory) and rm_op.symbol is not None
    if has_symbol and not rm_op.rip_relative:
        raise EncodingError(f"label {rm_op.symbol!r} must be addressed RIP-relative: [rip + {rm_op.symbol}]")
    try:
        rm = encode_rm(reg_op.num, rm_op, force_disp32=has_symbol)
    except AddressingError as exc:
        raise EncodingError(f"{spec.mnemonic}: {exc}") from None
    b1 = (~rm.r & 1) << 7 | (~rm.x & 1) << 6 | (~rm.b & 1) << 5 | VEX_MAP
    b2 = 0 << 7 | (~vvvv & 0xF) << 3 | spec.vex_l << 2 | 0b00
    code = bytearray([VEX3, b1, b2, spec.opcode]) + rm.tail
    if isinstance(rm_op, Memory) and rm_op.rip_relative and has_symbol:
        if symbols is None or rm_op.symbol not in symbols:
            raise EncodingError(f"undefined label {rm_op.symbol!r}")
        disp = symbols[rm_op.symbol] + rm_op.disp - (address + len(code))
        if not -(1 << 31) <= disp < (1 << 31):
            raise EncodingError(f"label {rm_op.symbol!r} is out of RIP-relative reach ({disp:#x})")
        pos = 4 + rm.disp_offset
        code[pos:pos + 4] = disp.to_bytes(4, "little", signed=True)
    return bytes(code)


def is_tsar(data: bytes, offset: int = 0) -> bool:
    """True when the bytes at ``offset`` start a VEX3 prefix in the T-SAR opcode map."""
    return len(data) > offset + 1 and data[offset] == VEX3 and (data[offset + 1] & 0x1F) == VEX_MAP


def encoded_length(data: bytes, offset: int = 0) -> int | None:
    """Length of the T-SAR-map instruction at ``offset`` from its ModRM form, valid or not
    (None when the bytes end first). Lets a disassembler step over an invalid encoding whole."""
    try:
        _, _, rm_len = decode_rm(data, offset + 4, 0, 0, 0, "ymm")
    except AddressingError:
        return None
    return 4 + rm_len


def decode(data: bytes, offset: int = 0) -> TsarInstruction:
    """Decode the T-SAR instruction at ``data[offset]``.

    Raises :class:`InvalidInstruction` (the CPU would raise #UD) for reserved opcodes, ``pp``,
    ``W`` or ``L`` values, a used ``vvvv`` in TLUT, misaligned register groups and truncated bytes.
    """
    if not is_tsar(data, offset):
        raise InvalidInstruction("not a T-SAR instruction (no VEX3 prefix in map 8)")
    if offset + 4 > len(data):
        raise InvalidInstruction("instruction truncated")
    b1, b2, opcode = data[offset + 1], data[offset + 2], data[offset + 3]
    r, x, b = (~b1 >> 7) & 1, (~b1 >> 6) & 1, (~b1 >> 5) & 1
    w, vvvv, vex_l, pp = b2 >> 7, (~b2 >> 3) & 0xF, (b2 >> 2) & 1, b2 & 3
    spec = by_opcode(opcode, vex_l)
    if spec is None:
        raise InvalidInstruction(f"reserved opcode {opcode:#04x} with VEX.L={vex_l} in map {VEX_MAP}")
    if w or pp:
        raise InvalidInstruction(f"{spec.mnemonic}: reserved VEX.W={w} / VEX.pp={pp}")
    try:
        reg_field, rm_op, rm_len = decode_rm(data, offset + 4, r, x, b, spec.register_class)
    except AddressingError as exc:
        raise InvalidInstruction(f"{spec.mnemonic}: {exc}") from None
    values: dict[Field, Operand] = {
        Field.MODRM_REG: Register(spec.register_class, reg_field),
        Field.MODRM_RM: rm_op,
    }
    if spec.operand(Field.VEX_VVVV) is not None:
        values[Field.VEX_VVVV] = Register(spec.register_class, vvvv)
    elif vvvv != 0:
        raise InvalidInstruction(f"{spec.mnemonic}: VEX.vvvv must be 1111b (unused)")
    operands = []
    for op_spec in spec.operands:
        value = values[op_spec.field]
        if isinstance(value, Memory):
            value = replace(value, size=op_spec.mem_bytes)
        operands.append(value)
    inst = TsarInstruction(spec, tuple(operands), length=4 + rm_len)
    try:
        validate(inst)
    except EncodingError as exc:
        raise InvalidInstruction(str(exc)) from None
    return inst
