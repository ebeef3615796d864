"""``tsar sweep SPEC.toml``: ISA variants x models x platforms x threads x phases (docs/dse.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tsar import console
from tsar.cli.argtypes import positive_int
from tsar.errors import UserError

NAME = "sweep"
HELP = "sweep ISA variants x models x platforms x threads x phases; a tidy CSV (+ Parquet) table"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="sweep spec (.toml; docs/dse.md)")
    parser.add_argument("-o", "--output", default="sweep.csv",
                        help="CSV to write (Parquet beside it, same stem, when pyarrow is installed)")
    parser.add_argument("--dask", metavar="ADDRESS",
                        help="run on a Dask cluster: a scheduler address, or local:N for a LocalCluster "
                             "of N workers (default: a local process pool)")
    parser.add_argument("--workers", type=positive_int, help="local pool size (default: every CPU)")
    parser.add_argument("--no-cache", action="store_true", help="recompute every point")
    parser.add_argument("--no-area", action="store_true", help="skip RTL synthesis for the area columns")


def run(args: argparse.Namespace) -> int:
    from tsar.sweep.run import load_spec, run_sweep, write_csv, write_parquet

    out = Path(args.output)
    if out.is_dir() or not out.resolve().parent.is_dir():
        raise UserError(f"-o {out}: not a file path in an existing directory")
    spec = load_spec(args.spec)
    rows = run_sweep(spec, dask=args.dask, workers=args.workers, use_cache=not args.no_cache,
                     with_area=not args.no_area, progress=lambda m: console.progress(f"  .. {m}"))
    write_csv(rows, out)
    written = [str(out)]
    if write_parquet(rows, out.with_suffix(".parquet")):
        written.append(str(out.with_suffix(".parquet")))
    print(f"{len(rows)} rows -> {', '.join(written)}")
    return 0
