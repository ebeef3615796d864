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
    parser.add_argument("--json", action="store_true",
                        help="print the instructions and configurations as JSON (docs/json.md)")
    parser.add_argument("--csv", action="store_true", help="print the instruction table as CSV")


def run(args: argparse.Namespace) -> int:
    if args.csv:
        from tsar.jsonout import emit_csv

        emit_csv(reference.table_rows())
        return 0
    if args.json:
        from tsar.isa.config import configs
        from tsar.jsonout import emit

        emit("isa", instructions=reference.table_rows(),
             configurations=[{**{k: v for k, v in c.definition().items() if k != "slot"},
                              "k": c.k, "m": c.m, "group_regs": c.group_regs,
                              "weight_bytes": c.weight_bytes, "tlut": c.tlut_mnemonic,
                              "tgemv": c.tgemv_mnemonic, "tlut_uops": c.tlut_uops,
                              "tgemv_uops": c.tgemv_uops} for c in configs()])
        return 0
    if args.markdown is None:
        print(reference.text_table())
    elif args.markdown == "-":
        print(reference.markdown())
    else:
        Path(args.markdown).write_text(reference.markdown() + "\n")
        print(f"wrote {args.markdown}")
    return 0
