"""Exceptions that mean "bad input", printed by the CLI as one line without a traceback."""

from __future__ import annotations

from tsar.common.errors import UserError

__all__ = ["UserError", "user_errors"]


def user_errors() -> tuple[type[BaseException], ...]:
    """Every exception type the CLI reports as a one-line error."""
    from tsar.isa.assembler import AssemblyError
    from tsar.isa.codec import EncodingError, InvalidInstruction
    from tsar.isa.syntax import SyntaxProblem
    from tsar.sim.platforms.schema import PlatformError

    return (UserError, AssemblyError, EncodingError, InvalidInstruction, SyntaxProblem, PlatformError,
            FileNotFoundError, IsADirectoryError, PermissionError)
