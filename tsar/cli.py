"""The ``tsar`` command line. Each sub-command lives in its own module under ``tsar.commands``.

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

from . import commands
from .errors import user_errors


def command_modules() -> list[str]:
    """Names of the modules in ``tsar.commands`` (one sub-command each), sorted."""
    return sorted(info.name for info in pkgutil.iter_modules(commands.__path__))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tsar",
        description="T-SAR co-design environment: assemble, simulate, synthesize and compare "
                    "ternary-LLM ISA extensions.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in command_modules():
        module = importlib.import_module(f"tsar.commands.{name}")
        cmd = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(cmd)
        cmd.set_defaults(handler=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except user_errors() as exc:
        print(f"tsar {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
