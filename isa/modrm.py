"""x86-64 ModRM / SIB / displacement encoding and decoding of the ``r/m`` operand.

Pure x86 addressing rules (Intel SDM vol. 2, section 2.1 and 2.2.1), independent of T-SAR.
"""

from __future__ import annotations

from dataclasses import dataclass

from tsar.common.errors import UserError
from tsar.isa.operands import GPR64, GPR_NUMBER, Memory, Register

_SCALE_BITS = {1: 0, 2: 1, 4: 2, 8: 3}
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


class AddressingError(UserError, ValueError):
    """An operand that x86-64 cannot encode, or bytes that do not form a whole operand."""


@dataclass(frozen=True)
class EncodedRM:
    """The ModRM-and-after bytes of an operand plus the REX/VEX extension bits they need."""

    r: int
    x: int
    b: int
    tail: bytes
    disp_offset: int | None  # offset of a disp32 inside ``tail`` (for RIP fix-ups), else None


def encode_rm(reg_field: int, rm: Register | Memory, *, force_disp32: bool = False,
              disp8_scale: int = 1) -> EncodedRM:
    """Encode ``ModRM.reg = reg_field`` and the r/m operand ``rm``.

    ``r`` is bit 3 of ``reg_field`` (bit 4 is EVEX.R', the caller's); a register ``rm`` puts its bit 3
    in ``b`` and bit 4 in ``x`` (EVEX.X extends a register-form rm). ``disp8_scale`` is EVEX's
    compressed-displacement N: an 8-bit displacement is used only for multiples of N, stored / N.
    """
    r = reg_field >> 3 & 1
    if isinstance(rm, Register):
        modrm = 0xC0 | (reg_field & 7) << 3 | (rm.num & 7)
        return EncodedRM(r, rm.num >> 4 & 1, rm.num >> 3 & 1, bytes([modrm]), None)

    if rm.scale not in _SCALE_BITS:
        raise AddressingError(f"scale {rm.scale} is not 1, 2, 4 or 8")
    if not INT32_MIN <= rm.disp <= INT32_MAX:
        raise AddressingError(f"displacement {rm.disp:#x} does not fit in a signed 32-bit field")
    reg_bits = (reg_field & 7) << 3

    if rm.base == "rip":
        if rm.index is not None:
            raise AddressingError("RIP-relative addressing cannot use an index register")
        return EncodedRM(r, 0, 0, bytes([reg_bits | 0b101]) + _d32(rm.disp), 1)

    index = _gpr(rm.index, "index") if rm.index is not None else None
    if index == GPR_NUMBER["rsp"]:
        raise AddressingError("rsp cannot be an index register")
    ss = _SCALE_BITS[rm.scale]
    if rm.index is None and rm.scale != 1:
        raise AddressingError("a scale needs an index register")

    if rm.base is None:  # [index*scale + disp32] or absolute [disp32]: SIB with base=101, mod=00
        idx = 0b100 if index is None else index & 7
        x = 0 if index is None else index >> 3
        sib = ss << 6 | idx << 3 | 0b101
        return EncodedRM(r, x, 0, bytes([reg_bits | 0b100, sib]) + _d32(rm.disp), 2)

    base = _gpr(rm.base, "base")
    if rm.disp == 0 and (base & 7) != 0b101 and not force_disp32:
        mod, disp = 0b00, b""
    elif rm.disp % disp8_scale == 0 and -128 <= rm.disp // disp8_scale <= 127 and not force_disp32:
        mod, disp = 0b01, (rm.disp // disp8_scale).to_bytes(1, "little", signed=True)
    else:
        mod, disp = 0b10, _d32(rm.disp)
    needs_sib = index is not None or (base & 7) == 0b100
    if needs_sib:
        idx = 0b100 if index is None else index & 7
        head = bytes([mod << 6 | reg_bits | 0b100, ss << 6 | idx << 3 | (base & 7)])
    else:
        head = bytes([mod << 6 | reg_bits | (base & 7)])
    x = 0 if index is None else index >> 3
    return EncodedRM(r, x, base >> 3, head + disp, len(head) if mod == 0b10 else None)


def decode_rm(data: bytes, offset: int, r: int, x: int, b: int, reg_class: str, *,
              disp8_scale: int = 1, x_extends_register: bool = False) -> tuple[int, Register | Memory, int]:
    """Decode ModRM at ``data[offset]``; returns ``(reg_field, rm_operand, bytes_consumed)``.

    Register-form ``rm`` operands are returned as ``Register(reg_class, n)``, ``x`` giving bit 4 of
    ``n`` when ``x_extends_register`` (EVEX). An 8-bit displacement is multiplied by
    ``disp8_scale`` (EVEX's compressed disp8*N).
    """
    modrm = _byte(data, offset)
    mod, reg, rm = modrm >> 6, (modrm >> 3) & 7, modrm & 7
    reg_field = reg | r << 3
    pos = offset + 1
    if mod == 0b11:
        return reg_field, Register(reg_class, rm | b << 3 | (x << 4 if x_extends_register else 0)), 1

    base: str | None
    index: str | None = None
    scale = 1
    if rm == 0b100:
        sib = _byte(data, pos)
        pos += 1
        scale = 1 << (sib >> 6)
        idx = (sib >> 3) & 7 | x << 3
        index = None if idx == 0b100 else GPR64[idx]
        if index is None:
            scale = 1  # SIB.ss is ignored without an index
        sib_base = sib & 7
        if sib_base == 0b101 and mod == 0b00:
            base, disp_len = None, 4
        else:
            base, disp_len = GPR64[sib_base | b << 3], {0: 0, 1: 1, 2: 4}[mod]
    elif rm == 0b101 and mod == 0b00:
        base, disp_len = "rip", 4
    else:
        base, disp_len = GPR64[rm | b << 3], {0: 0, 1: 1, 2: 4}[mod]

    if pos + disp_len > len(data):
        raise AddressingError("instruction truncated inside its displacement")
    disp = int.from_bytes(data[pos:pos + disp_len], "little", signed=True) if disp_len else 0
    if disp_len == 1:
        disp *= disp8_scale
    pos += disp_len
    return reg_field, Memory(base=base, index=index, scale=scale, disp=disp), pos - offset


def _gpr(name: str, role: str) -> int:
    try:
        return GPR_NUMBER[name]
    except KeyError:
        raise AddressingError(f"{name!r} cannot be a {role} register (64-bit GPRs only)") from None


def _d32(value: int) -> bytes:
    return value.to_bytes(4, "little", signed=True)


def _byte(data: bytes, pos: int) -> int:
    if pos >= len(data):
        raise AddressingError("instruction truncated")
    return data[pos]
