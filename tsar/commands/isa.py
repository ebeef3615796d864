"""``tsar isa``: the instruction table, or the Markdown ISA reference page."""

from __future__ import annotations

import argparse
from pathlib import Path

from tsar.isa import reference

NAME = "isa"
HELP = "print the T-SAR instruction table (mnemonics, encodings, operands, uops)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--markdown", nargs="?", const="-", metavar="PATH",
                        help="write the ISA reference page as Markdown to PATH (stdout if omitted)")


def run(args: argparse.Namespace) -> int:
    if args.markdown is None:
        print(reference.text_table())
    elif args.markdown == "-":
        print(reference.markdown())
    else:
        Path(args.markdown).write_text(reference.markdown() + "\n")
        print(f"wrote {args.markdown}")
    return 0
