"""``tsar report``: an HTML page with the comparison's plots and tables."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "report"
HELP = "write an HTML report: roofline, speedups, memory traffic, thread scaling, models, RTL area"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", default="tsar-report.html", help="HTML file to write")
    parser.add_argument("--repeats", type=int, default=20, help="native timing repeats (median)")
    parser.add_argument("--no-area", action="store_true", help="skip RTL synthesis (about 2 min uncached)")


def run(args: argparse.Namespace) -> int:
    from tsar.report import collect, write

    def progress(msg: str) -> None:
        print(f"  .. {msg}", file=sys.stderr, flush=True)

    data = collect(repeats=args.repeats, progress=progress, with_area=not args.no_area)
    path = write(Path(args.output), data)
    print(f"wrote {path}")
    return 0
