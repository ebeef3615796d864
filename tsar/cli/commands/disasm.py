"""``tsar disasm``: disassemble raw machine code, T-SAR included."""

from __future__ import annotations

import argparse
from pathlib import Path

from tsar.errors import UserError
from tsar.isa.disassembler import disassemble, format_lines

NAME = "disasm"
HELP = "disassemble raw x86-64 machine code (T-SAR instructions included)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("file", nargs="?", help="raw binary file")
    src.add_argument("--hex", help="code as hex digits, spaces allowed (e.g. 'c4 68 7c 20 06')")
    parser.add_argument("--base", type=lambda t: int(t, 0), default=0,
                        help="address of the first byte (default 0)")


def parse_hex(text: str) -> bytes:
    digits = "".join(text.replace("0x", " ").replace(",", " ").split())
    try:
        return bytes.fromhex(digits)
    except ValueError:
        raise UserError(f"--hex: not an even number of hex digits: {text!r}") from None


def run(args: argparse.Namespace) -> int:
    code = parse_hex(args.hex) if args.hex is not None else Path(args.file).read_bytes()
    if not code:
        raise UserError("nothing to disassemble (no bytes)")
    print(format_lines(disassemble(code, args.base)))
    return 0
