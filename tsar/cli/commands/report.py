"""``tsar report``: an HTML page that opens with the answer (the best T-SAR kernel against TL2 and
the best native kernel, per platform and phase, like for like), then its plots and tables; the raw
data beside it as CSV (and Parquet with pyarrow)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tsar.cli.argtypes import positive_int
from tsar.errors import UserError

NAME = "report"
HELP = ("write an HTML report: the answer (T-SAR against TL2 and the best native kernel), roofline, "
        "speedups, memory traffic, thread scaling, models, RTL area; raw data as CSV beside it")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", default="tsar-report.html",
                        help="HTML file to write; its plots (PNG, SVG) and raw data (CSV, Parquet) go "
                             "beside it as <name>-<part>.<ext>")
    parser.add_argument("--repeats", type=positive_int, default=20, help="native timing repeats (median)")
    parser.add_argument("--no-area", action="store_true", help="skip RTL synthesis (about 2 min uncached)")
    parser.add_argument("--remeasure", action="store_true",
                        help="measure the host's kernels again (default: reuse the measurements of an "
                             "earlier report on the same machine and code)")
    parser.add_argument("--paper-models", action="store_true",
                        help="also every model of the paper's 125M-100B sweep on every modelled platform, "
                             "end to end (its Fig. 8 view; minutes more from an empty cache)")
    parser.add_argument("--sweep", metavar="RESULTS",
                        help="instead: Pareto plots of a `tsar sweep` CSV (docs/dse.md)")


def _check_output(path: Path) -> None:
    """The page's path, checked before any work: a writable directory must hold it."""
    if path.is_dir():
        raise UserError(f"-o {path}: is a directory (give the HTML file's path)")
    parent = path.resolve().parent
    if not parent.is_dir():
        raise UserError(f"-o {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UserError(f"-o {path}: cannot write in {parent}")


def run(args: argparse.Namespace) -> int:
    from tsar.report import collect, write

    _check_output(Path(args.output))
    if args.sweep:
        from tsar.sweep.report import write_sweep_report
        from tsar.sweep.run import read_csv

        print(f"wrote {write_sweep_report(Path(args.output), read_csv(Path(args.sweep)), args.sweep)}")
        return 0

    def progress(msg: str) -> None:
        print(f"  .. {msg}", file=sys.stderr, flush=True)

    data = collect(repeats=args.repeats, progress=progress, with_area=not args.no_area,
                   paper_models=args.paper_models, remeasure=args.remeasure)
    path = write(Path(args.output), data, repeats=args.repeats)
    print(f"wrote {path} (raw data beside it: {path.with_suffix('')}-*.csv)")
    return 0
