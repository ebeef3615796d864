"""Disassembler: objdump-like listings of mixed x86-64 / T-SAR code.

Decoding is :mod:`tsar.isa.stream`'s (iced-x86 for standard x86-64, :mod:`tsar.isa.codec` for the
T-SAR map); a line is a :class:`~tsar.isa.stream.Decoded` record (``address``, ``data``, ``text``,
``valid``, ``tsar``).
"""

from __future__ import annotations

from tsar.isa.stream import Decoded, decode_one, decode_stream, intel_formatter

DecodedLine = Decoded
"""One decoded instruction (or the undecodable bytes skipped, ``valid=False``)."""


def disassemble(code: bytes, base: int = 0) -> list[DecodedLine]:
    """Decode ``code`` placed at ``base`` from start to end."""
    return list(decode_stream(code, base))


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


__all__ = ["DecodedLine", "decode_one", "disassemble", "format_lines", "intel_formatter"]
