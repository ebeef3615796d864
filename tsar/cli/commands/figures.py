"""``tsar figures``: measure again every figure the README quotes and keep them as data
(docs/figures.json), stamped with the CPU, core count, date and commit (:mod:`tsar.cli.figures`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tsar.errors import UserError

NAME = "figures"
HELP = ("measure the README's figures again (simulator and native speeds, native kernels, comparisons, "
        "model error, RTL area, demo time, the front end's times) into docs/figures.json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tsar.cli.figures import DEFAULT_PATH, GROUPS

    parser.add_argument("-o", "--output", default=str(DEFAULT_PATH),
                        help=f"the JSON file to write (default {DEFAULT_PATH})")
    parser.add_argument("--only", default="",
                        help=f"comma-separated groups to measure: {','.join(GROUPS)} (default all)")
    parser.add_argument("--readme", metavar="FILE",
                        help="also rewrite FILE's generated figures table (between its markers)")
    parser.add_argument("--note", default="",
                        help="a sentence kept in the stamp (e.g. that the machine was shared)")
    parser.add_argument("--no-measure", action="store_true",
                        help="measure nothing: read -o's file (with --readme: rewrite the table from it)")


def run(args: argparse.Namespace) -> int:
    from tsar import console
    from tsar.cli.figures import markdown, measure, merged, read, rewrite_readme

    out = Path(args.output)
    if args.readme and not Path(args.readme).is_file():
        raise UserError(f"--readme {args.readme}: no such file")
    if args.no_measure:
        figs = read(out)
    else:
        if out.is_dir() or not out.resolve().parent.is_dir():
            raise UserError(f"-o {out}: not a file in an existing directory")
        groups = [g for g in args.only.split(",") if g] or None
        command = "tsar figures" + (f" --only {args.only}" if groups else "")
        figs = measure(groups, console.progress, command=command, note=args.note)
        if groups and out.is_file():  # the other groups' figures are kept, with their stamps
            figs = merged(read(out), figs)
        out.write_text(figs.to_json())
        print(f"wrote {out}", file=sys.stderr)
    if args.readme:
        rewrite_readme(Path(args.readme), figs)
        print(f"rewrote the figures table of {args.readme}", file=sys.stderr)
    print(markdown(figs))
    return 0
