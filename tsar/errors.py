"""Exceptions that mean "bad input", printed by the CLI as one line without a traceback.

Every such exception of the project derives from :class:`tsar.common.errors.UserError` (the
assembler's, the codec's, the platform files', the simulator's guest faults...); the operating
system's file errors are the only others the CLI reports that way.
"""

from __future__ import annotations

from tsar.common.errors import UserError

__all__ = ["UserError", "user_errors"]


def user_errors() -> tuple[type[BaseException], ...]:
    """Every exception type the CLI reports as a one-line error."""
    return (UserError, FileNotFoundError, IsADirectoryError, PermissionError, NotADirectoryError)
