"""Exceptions that mean "bad input", printed by the CLI as one line without a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A problem with what the user asked for (bad file, bad option, bad shape)."""


def user_errors() -> tuple[type[BaseException], ...]:
    """Every exception type the CLI reports as a one-line error."""
    from tsar.isa.assembler import AssemblyError
    from tsar.isa.codec import EncodingError, InvalidInstruction
    from tsar.isa.syntax import SyntaxProblem
    from tsar.platforms.schema import PlatformError

    return (UserError, AssemblyError, EncodingError, InvalidInstruction, SyntaxProblem, PlatformError,
            FileNotFoundError, IsADirectoryError, PermissionError)
