"""Disassembler: iced-x86 for standard x86-64, :mod:`tsar.isa.codec` for the T-SAR map."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import iced_x86

from . import codec
from .operands import Memory


@dataclass(frozen=True)
class DecodedLine:
    """One decoded instruction (or one undecodable byte, ``valid=False``)."""

    address: int
    data: bytes
    text: str
    valid: bool = True
    tsar: codec.TsarInstruction | None = None


@lru_cache(maxsize=1)
def intel_formatter() -> iced_x86.Formatter:
    """iced-x86 Intel-syntax formatter in the project's style (``0x`` hex, ``[rip+0x10]``)."""
    fmt = iced_x86.Formatter(iced_x86.FormatterSyntax.INTEL)
    fmt.hex_prefix = "0x"
    fmt.hex_suffix = ""
    fmt.space_after_operand_separator = True
    fmt.rip_relative_addresses = True
    fmt.uppercase_hex = False
    fmt.memory_size_options = iced_x86.MemorySizeOptions.ALWAYS
    fmt.show_branch_size = False
    fmt.branch_leading_zeros = False
    fmt.leading_zeros = False
    return fmt


def decode_one(code: bytes, offset: int = 0, base: int = 0) -> DecodedLine:
    """Decode the instruction at ``code[offset]`` (address ``base + offset``)."""
    address = base + offset
    if codec.is_tsar(code, offset):
        try:
            inst = codec.decode(code, offset)
        except codec.InvalidInstruction as exc:
            length = codec.encoded_length(code, offset) or 1
            return DecodedLine(address, code[offset:offset + length], f"(bad) ; {exc}", valid=False)
        text = str(inst)
        for op in inst.operands:
            if isinstance(op, Memory) and op.rip_relative:
                text += f"  ; {address + inst.length + op.disp:#x}"
        return DecodedLine(address, code[offset:offset + inst.length], text, tsar=inst)
    decoder = iced_x86.Decoder(64, code[offset:offset + 15], ip=address)
    ins = decoder.decode()
    if ins.is_invalid:
        return DecodedLine(address, code[offset:offset + 1], "(bad)", valid=False)
    text = intel_formatter().format(ins)
    if ins.is_ip_rel_memory_operand:
        text += f"  ; {ins.ip_rel_memory_address:#x}"
    return DecodedLine(address, code[offset:offset + ins.len], text)


def disassemble(code: bytes, base: int = 0) -> list[DecodedLine]:
    """Decode ``code`` placed at ``base`` from start to end."""
    lines, offset = [], 0
    while offset < len(code):
        line = decode_one(code, offset, base)
        lines.append(line)
        offset += len(line.data)
    return lines


def format_lines(lines: list[DecodedLine], symbols: dict[str, int] | None = None) -> str:
    """objdump-like text: ``address: bytes  instruction`` with label headers where known."""
    by_address: dict[int, list[str]] = {}
    for name, addr in (symbols or {}).items():
        by_address.setdefault(addr, []).append(name)
    out = []
    for line in lines:
        for name in by_address.get(line.address, []):
            out.append(f"\n{line.address:016x} <{name}>:")
        hexes = " ".join(f"{b:02x}" for b in line.data)
        out.append(f"{line.address:8x}:\t{hexes:<30} \t{line.text}")
    return "\n".join(out).lstrip("\n")
