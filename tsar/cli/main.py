"""The ``tsar`` command line. Each sub-command lives in its own module under ``tsar.cli.commands``.

A command module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``.
Errors a user can cause derive from :class:`tsar.errors.UserError` (or are listed in
``USER_ERRORS``) and are printed as one line without a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tsar import __version__
from tsar.cli import commands
from tsar.console import detail, set_verbosity
from tsar.errors import user_errors

if TYPE_CHECKING:
    from tsar.isa.config import TsarConfig


def command_modules() -> list[str]:
    """Names of the modules in ``tsar.cli.commands`` (one sub-command each), sorted."""
    return sorted(info.name for info in pkgutil.iter_modules(commands.__path__))


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line (``tsar CMD: error: ...``, exit 2); ``--help``
    shows the usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tsar",
        description="T-SAR co-design environment: assemble, simulate, synthesize and compare "
                    "ternary-LLM ISA extensions.",
    )
    parser.add_argument("--version", action="version", version=f"tsar {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more detail on stderr (e.g. the guest registers of a simulator fault)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--isa", action="append", default=[], metavar="FILE",
                        help="register the T-SAR configurations of a TOML file (one [[config]] table "
                             "each; docs/dse.md) before the command runs; may be repeated")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in command_modules():
        module = importlib.import_module(f"tsar.cli.commands.{name}")
        cmd = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(cmd)
        cmd.set_defaults(handler=module.run)
    return parser


def load_isa_files(argv: Sequence[str] | None) -> list[TsarConfig]:
    """Register the configurations of every ``--isa FILE`` before the command modules (and the
    kernel lists they derive from the registered configurations) are imported; returns them, in
    file order (commands see them as ``args.isa_configs``)."""
    from tsar.isa.isafile import load_isa_file

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--isa", action="append", default=[])
    known, _ = pre.parse_known_args(argv)
    return [cfg for path in known.isa for cfg in load_isa_file(path)]


def main(argv: Sequence[str] | None = None) -> int:
    try:
        isa_configs = load_isa_files(argv)
    except user_errors() as exc:
        print(f"tsar: --isa: {exc}", file=sys.stderr)
        return 1
    args = build_parser().parse_args(argv)
    args.isa_configs = isa_configs
    set_verbosity(-1 if args.quiet else args.verbose)
    try:
        return int(args.handler(args) or 0)
    except user_errors() as exc:
        print(f"tsar {args.command}: {exc}", file=sys.stderr)
        dump = getattr(exc, "register_dump", None)
        if dump is not None and getattr(exc, "registers", None):
            detail(dump())
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
