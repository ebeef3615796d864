"""VEX3 and EVEX encoder and decoder of the T-SAR family (field assignment in
:mod:`tsar.isa.instructions`: VEX map 8 for 128 and 256 bits, EVEX map 0 for 512 bits)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from tsar.common.errors import UserError
from tsar.isa.instructions import (
    EVEX_MAP,
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
EVEX = 0x62
PREFIX_BYTES = {"vex": 3, "evex": 4}
"""Bytes of each prefix before the opcode byte."""


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
            want = MEMORY_SIZE_NAMES.get(op_spec.mem_bytes)
            want = f"{want} ptr" if want else "an address with no size keyword"
            got = MEMORY_SIZE_NAMES.get(value.size, f"{value.size}-byte")
            raise EncodingError(f"{where} must be {want} ({op_spec.mem_bytes} bytes), not {got} ptr")
        return
    if value.cls != spec.register_class:
        raise EncodingError(f"{where} must be {kind}, not {value.name}")
    count = spec.config.addressable_registers
    if not 0 <= value.num < count:
        raise EncodingError(f"{where}: {value.name} is not addressable with {spec.encoding.upper()} "
                            f"(0..{count - 1} only)")
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
    evex = spec.encoding == "evex"
    rm_spec = spec.operand(Field.MODRM_RM)
    assert rm_spec is not None
    try:
        rm = encode_rm(reg_op.num, rm_op, force_disp32=has_symbol,
                       disp8_scale=rm_spec.disp8_scale if evex else 1)
    except AddressingError as exc:
        raise EncodingError(f"{spec.mnemonic}: {exc}") from None
    if evex:
        p0 = (~rm.r & 1) << 7 | (~rm.x & 1) << 6 | (~rm.b & 1) << 5 | (~reg_op.num >> 4 & 1) << 4 | EVEX_MAP
        p1 = 0 << 7 | (~vvvv & 0xF) << 3 | 1 << 2 | 0b00
        p2 = spec.vex_l << 5 | (~vvvv >> 4 & 1) << 3
        code = bytearray([EVEX, p0, p1, p2, spec.opcode]) + rm.tail
    else:
        b1 = (~rm.r & 1) << 7 | (~rm.x & 1) << 6 | (~rm.b & 1) << 5 | VEX_MAP
        b2 = 0 << 7 | (~vvvv & 0xF) << 3 | spec.vex_l << 2 | 0b00
        code = bytearray([VEX3, b1, b2, spec.opcode]) + rm.tail
    if isinstance(rm_op, Memory) and rm_op.rip_relative and has_symbol:
        if symbols is None or rm_op.symbol not in symbols:
            raise EncodingError(f"undefined label {rm_op.symbol!r}")
        disp = symbols[rm_op.symbol] + rm_op.disp - (address + len(code))
        if not -(1 << 31) <= disp < (1 << 31):
            raise EncodingError(f"label {rm_op.symbol!r} is out of RIP-relative reach ({disp:#x})")
        pos = PREFIX_BYTES[spec.encoding] + 1 + rm.disp_offset
        code[pos:pos + 4] = disp.to_bytes(4, "little", signed=True)
    return bytes(code)


def _encoding_at(data: bytes, offset: int) -> str | None:
    """``"vex"`` / ``"evex"`` when the bytes at ``offset`` start a prefix in a T-SAR opcode map."""
    if len(data) <= offset + 1:
        return None
    if data[offset] == VEX3 and (data[offset + 1] & 0x1F) == VEX_MAP:
        return "vex"
    if data[offset] == EVEX and (data[offset + 1] & 0x0F) == EVEX_MAP:
        return "evex"
    return None


def is_tsar(data: bytes, offset: int = 0) -> bool:
    """True when the bytes at ``offset`` start a VEX3 prefix in map 8 or an EVEX prefix in map 0."""
    return _encoding_at(data, offset) is not None


def encoded_length(data: bytes, offset: int = 0) -> int | None:
    """Length of the T-SAR-map instruction at ``offset`` from its ModRM form, valid or not
    (None when the bytes end first). Lets a disassembler step over an invalid encoding whole."""
    encoding = _encoding_at(data, offset)
    head = PREFIX_BYTES[encoding or "vex"] + 1
    try:
        _, _, rm_len = decode_rm(data, offset + head, 0, 0, 0, "ymm")
    except AddressingError:
        return None
    return head + rm_len


def decode(data: bytes, offset: int = 0) -> TsarInstruction:
    """Decode the T-SAR instruction at ``data[offset]``.

    Raises :class:`InvalidInstruction` (the CPU would raise #UD) for reserved opcodes, ``pp``,
    ``W`` or length values, a used ``vvvv`` in TLUT, an opmask, zeroing or broadcast in the EVEX
    form, misaligned register groups and truncated bytes.
    """
    encoding = _encoding_at(data, offset)
    if encoding is None:
        raise InvalidInstruction(f"not a T-SAR instruction (no VEX3 prefix in map {VEX_MAP}, "
                                 f"no EVEX prefix in map {EVEX_MAP})")
    head = PREFIX_BYTES[encoding] + 1
    if offset + head > len(data):
        raise InvalidInstruction("instruction truncated")
    if encoding == "evex":
        p0, p1, p2, opcode = data[offset + 1:offset + 5]
        r, x, b, r_hi = (~p0 >> 7) & 1, (~p0 >> 6) & 1, (~p0 >> 5) & 1, (~p0 >> 4) & 1
        w, vvvv, pp = p1 >> 7, (~p1 >> 3) & 0xF | ((~p2 >> 3) & 1) << 4, p1 & 3
        length, where = (p2 >> 5) & 3, f"L'L={(p2 >> 5) & 3:02b} in EVEX map {EVEX_MAP}"
    else:
        b1, b2, opcode = data[offset + 1], data[offset + 2], data[offset + 3]
        r, x, b, r_hi = (~b1 >> 7) & 1, (~b1 >> 6) & 1, (~b1 >> 5) & 1, 0
        w, vvvv, length, pp = b2 >> 7, (~b2 >> 3) & 0xF, (b2 >> 2) & 1, b2 & 3
        where = f"VEX.L={length} in map {VEX_MAP}"
    spec = by_opcode(opcode, length, encoding)
    if spec is None:
        raise InvalidInstruction(f"reserved opcode {opcode:#04x} with {where}")
    prefix = encoding.upper()
    if w or pp:
        raise InvalidInstruction(f"{spec.mnemonic}: reserved {prefix}.W={w} / {prefix}.pp={pp}")
    if encoding == "evex":
        if not p1 >> 2 & 1:
            raise InvalidInstruction(f"{spec.mnemonic}: EVEX P1 bit 2 must be 1")
        if p2 & 0x97:
            raise InvalidInstruction(f"{spec.mnemonic}: no opmask, zeroing or broadcast "
                                     f"(EVEX.z={p2 >> 7}, b={p2 >> 4 & 1}, aaa={p2 & 7:03b})")
    rm_spec = spec.operand(Field.MODRM_RM)
    assert rm_spec is not None
    try:
        reg_field, rm_op, rm_len = decode_rm(
            data, offset + head, r, x, b, spec.register_class,
            disp8_scale=rm_spec.disp8_scale if encoding == "evex" else 1,
            x_extends_register=encoding == "evex")
    except AddressingError as exc:
        raise InvalidInstruction(f"{spec.mnemonic}: {exc}") from None
    values: dict[Field, Operand] = {
        Field.MODRM_REG: Register(spec.register_class, reg_field | r_hi << 4),
        Field.MODRM_RM: rm_op,
    }
    if spec.operand(Field.VEX_VVVV) is not None:
        values[Field.VEX_VVVV] = Register(spec.register_class, vvvv)
    elif vvvv != 0:
        raise InvalidInstruction(f"{spec.mnemonic}: {prefix}.vvvv must be 1111b (unused)"
                                 + (" and EVEX.V' 1" if encoding == "evex" else ""))
    operands = []
    for op_spec in spec.operands:
        value = values[op_spec.field]
        if isinstance(value, Memory):
            value = replace(value, size=op_spec.mem_bytes)
        operands.append(value)
    inst = TsarInstruction(spec, tuple(operands), length=head + rm_len)
    try:
        validate(inst)
    except EncodingError as exc:
        raise InvalidInstruction(str(exc)) from None
    return inst
