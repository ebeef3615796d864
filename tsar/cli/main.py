"""The ``tsar`` command line. Each sub-command lives in its own module under ``tsar.cli.commands``.

A command module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``.
Errors a user can cause derive from :class:`tsar.errors.UserError` (or are listed in
``USER_ERRORS``) and are printed as one line without a traceback. ``--isa FILE`` (T-SAR variants)
is taken before or after the command and registered before the command modules are imported;
no command defines an option of that name for anything else.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tsar import __version__
from tsar.cli import commands
from tsar.cli.helptext import HelpFormatter
from tsar.console import detail, set_verbosity, watch
from tsar.errors import user_errors

if TYPE_CHECKING:
    from tsar.isa.config import TsarConfig


def command_modules() -> list[str]:
    """Names of the modules in ``tsar.cli.commands`` (one sub-command each), sorted."""
    return sorted(info.name for info in pkgutil.iter_modules(commands.__path__))


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line (``tsar CMD: error: ...``, exit 2); ``--help``
    shows the usage; help texts wrap without breaking names at their hyphens."""

    def __init__(self, *args, formatter_class: type[argparse.HelpFormatter] = HelpFormatter,
                 **kwargs) -> None:
        super().__init__(*args, formatter_class=formatter_class, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


ISA_HELP = ("register the T-SAR configurations of a TOML file (one [[config]] table each; docs/dse.md) "
            "before the command runs; may be repeated, before or after the command")
_ISA_DEST = "isa_files_"
"""``--isa`` after a command (or an action of it) is stored as ``isa_files_<depth>``: argparse copies
a sub-parser's namespace over its parent's, so each level keeps its own list."""


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
    parser.add_argument("--isa", action="append", default=[], metavar="FILE", help=ISA_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in command_modules():
        module = importlib.import_module(f"tsar.cli.commands.{name}")
        cmd = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(cmd)
        cmd.set_defaults(handler=module.run)
        _add_isa_option(cmd, 1)
    return parser


def _add_isa_option(parser: argparse.ArgumentParser, depth: int) -> None:
    """``--isa FILE`` on a command's parser and on those of its actions (``rtl area``...)."""
    parser.add_argument("--isa", action="append", dest=f"{_ISA_DEST}{depth}", default=argparse.SUPPRESS,
                        metavar="FILE", help=ISA_HELP)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                _add_isa_option(child, depth + 1)


def isa_paths(args: argparse.Namespace) -> list[str]:
    """The ``--isa`` files of a parsed command line, before and after the command, in order."""
    levels = sorted(int(k[len(_ISA_DEST):]) for k in vars(args) if k.startswith(_ISA_DEST))
    return [*args.isa, *(path for d in levels for path in getattr(args, f"{_ISA_DEST}{d}"))]


def preparse_isa_paths(argv: Sequence[str] | None) -> list[str]:
    """The ``--isa FILE`` (or ``--isa=FILE``) values anywhere on the command line, in order, found
    before the parser exists (its commands' choices derive from the registered configurations)."""
    pre = _Parser(prog="tsar", add_help=False, allow_abbrev=False)
    pre.add_argument("--isa", action="append", default=[])
    known, _ = pre.parse_known_args(argv)
    return known.isa


def load_isa_files(paths: Sequence[str]) -> list[TsarConfig]:
    """Read and register the configurations of the ``--isa`` files; returns them in file order
    (commands see them as ``args.isa_configs``)."""
    from tsar.isa.isafile import load_isa_file

    return [cfg for path in paths for cfg in load_isa_file(path)]


def _isa_error(exc: BaseException, paths: Sequence[str]) -> int:
    """Report an ``--isa`` file that cannot be loaded; bench-native's former ``--isa avx2`` (now
    ``--simd``) is a usage error that says so."""
    from tsar.cli.commands.bench_native import SIMD_CHOICES

    simd = next((p for p in paths if p in SIMD_CHOICES and not Path(p).exists()), None)
    if simd is not None:
        print(f"tsar: error: --isa {simd}: no such file; --isa takes a T-SAR variant file (TOML), the "
              f"native kernels' instruction set is chosen with 'tsar bench-native --simd {simd}'",
              file=sys.stderr)
        return 2
    print(f"tsar: --isa: {exc}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    paths = preparse_isa_paths(argv)
    try:
        isa_configs = load_isa_files(paths)
    except user_errors() as exc:
        return _isa_error(exc, paths)
    args = build_parser().parse_args(argv)
    parsed = isa_paths(args)
    if parsed != paths:  # an abbreviated option (--is FILE) the exact pre-parse did not take
        try:
            isa_configs = load_isa_files(parsed)
        except user_errors() as exc:
            return _isa_error(exc, parsed)
    args.isa_configs = isa_configs
    set_verbosity(-1 if args.quiet else args.verbose)
    try:
        with watch():  # heartbeats while a command that said what it does is silent
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
