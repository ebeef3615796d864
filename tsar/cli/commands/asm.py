"""``tsar asm``: assemble Intel-syntax x86-64 + T-SAR to machine code."""

from __future__ import annotations

import argparse
from pathlib import Path

from tsar.cli.argtypes import address
from tsar.isa.assembler import assemble_file

NAME = "asm"
HELP = "assemble a kernel (Intel syntax, AVX2 + T-SAR mnemonics) to raw machine code"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="assembly source")
    parser.add_argument("-o", "--output", help="write the raw code bytes to this file")
    parser.add_argument("--listing", action="store_true",
                        help="print a listing: line, address, bytes (T marks T-SAR), source")
    parser.add_argument("--base", type=address, default=0,
                        help="load address of the first byte (default 0)")


def run(args: argparse.Namespace) -> int:
    program = assemble_file(args.file, base=args.base)
    if args.listing:
        print(program.listing_text())
        print()
    tsar_lines = sum(entry.tsar for entry in program.listing)
    print(f"{args.file}: {len(program.code)} bytes at {program.base:#x}, "
          f"{tsar_lines} T-SAR instruction(s)")
    for name, addr in program.symbols.items():
        print(f"  {addr:#010x}  {name}")
    if args.output:
        Path(args.output).write_bytes(program.code)
        print(f"wrote {args.output}")
    return 0
