"""One decoder for mixed instruction streams: :mod:`tsar.isa.codec` for the T-SAR map, iced-x86 for
everything else.

Whether the bytes at an offset are T-SAR or x86 is decided here and only here
(:func:`tsar.isa.codec.is_tsar`: a VEX3 prefix selecting map 8), and each instruction is decoded
once. The disassembler, the simulator's block builder and the timing model's adapters all consume
the :class:`Decoded` records this module produces.

Invalid bytes are reported, not raised: a reserved or truncated T-SAR encoding (the CPU raises #UD)
spans its whole ModRM form when the bytes hold it (:func:`tsar.isa.codec.encoded_length`), else one
byte; an x86 encoding iced-x86 rejects spans one byte. :meth:`Decoded.check` raises
:class:`~tsar.isa.codec.InvalidInstruction` for them where a caller needs a valid instruction.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache

import iced_x86

from tsar.isa import codec
from tsar.isa.operands import Memory

MAX_LENGTH = 15
"""Longest x86 instruction in bytes."""


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


@dataclass(frozen=True)
class Decoded:
    """One instruction of a stream, or the bytes a decoder skips over when they are invalid.

    ``address``: guest address; ``data``: its bytes (``length`` of them); ``is_tsar``: the bytes
    are in the T-SAR opcode map (valid or not). Exactly one of ``tsar`` (a
    :class:`~tsar.isa.codec.TsarInstruction`) and ``x86`` (an iced-x86 ``Instruction``) is set for
    a valid instruction; neither is set, and ``error`` gives the reason, for invalid bytes.
    """

    address: int
    data: bytes
    is_tsar: bool
    tsar: codec.TsarInstruction | None = None
    x86: iced_x86.Instruction | None = None
    error: str | None = None

    @property
    def valid(self) -> bool:
        return self.error is None

    @property
    def length(self) -> int:
        return len(self.data)

    @property
    def next(self) -> int:
        """Address of the following instruction."""
        return self.address + len(self.data)

    def check(self) -> Decoded:
        """``self`` when valid; else raises :class:`~tsar.isa.codec.InvalidInstruction`."""
        if self.error is not None:
            raise codec.InvalidInstruction(self.error)
        return self

    @cached_property
    def asm(self) -> str:
        """Intel-syntax instruction text (``(bad)`` for invalid bytes), without annotations."""
        if self.tsar is not None:
            return str(self.tsar)
        if self.x86 is not None:
            return intel_formatter().format(self.x86)
        return "(bad)"

    @cached_property
    def text(self) -> str:
        """The disassembler's text: :attr:`asm` plus the target of a RIP-relative operand
        (``  ; 0x1040``); for an invalid T-SAR encoding, the #UD reason (``(bad) ; reason``)."""
        if self.tsar is not None:
            text = self.asm
            for op in self.tsar.operands:
                if isinstance(op, Memory) and op.rip_relative:
                    text += f"  ; {self.next + op.disp:#x}"
            return text
        if self.x86 is not None:
            text = self.asm
            if self.x86.is_ip_rel_memory_operand:
                text += f"  ; {self.x86.ip_rel_memory_address:#x}"
            return text
        return f"(bad) ; {self.error}" if self.is_tsar else "(bad)"


def decode_one(code: bytes, offset: int = 0, base: int = 0) -> Decoded:
    """Decode the instruction at ``code[offset]``; ``code[0]`` lies at address ``base``, so the
    instruction's address is ``base + offset``. Bytes past the end of ``code`` do not exist (an
    instruction they would complete is truncated, hence invalid)."""
    address = base + offset
    if codec.is_tsar(code, offset):
        try:
            inst = codec.decode(code, offset)
        except codec.InvalidInstruction as exc:
            length = codec.encoded_length(code, offset) or 1
            return Decoded(address, bytes(code[offset:offset + length]), True, error=str(exc))
        return Decoded(address, bytes(code[offset:offset + inst.length]), True, tsar=inst)
    window = bytes(code[offset:offset + MAX_LENGTH])
    ins = iced_x86.Decoder(64, window, ip=address).decode()
    if ins.is_invalid:
        return Decoded(address, window[:1], False,
                       error=f"undecodable bytes at {address:#x}: {window[:8].hex()}")
    return Decoded(address, window[:ins.len], False, x86=ins)


def decode_stream(code: bytes, base: int = 0, start: int = 0, end: int | None = None) -> Iterator[Decoded]:
    """Decode ``code[start:end]`` (``code[0]`` at address ``base``) front to back, stepping over
    invalid bytes as :func:`decode_one` reports them. Bytes at or past ``end`` are not read."""
    if end is not None and end < len(code):
        code = code[:end]
    offset = start
    while offset < len(code):
        d = decode_one(code, offset, base)
        yield d
        offset += d.length


__all__ = ["MAX_LENGTH", "Decoded", "decode_one", "decode_stream", "intel_formatter"]
