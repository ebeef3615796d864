"""What the CLI prints besides results: progress on stderr (silenced by ``-q``) and details
(shown with ``-v``)."""

from __future__ import annotations

import sys

_verbosity = 0


def set_verbosity(level: int) -> None:
    """-1: quiet (no progress), 0: default, 1 and more: verbose."""
    global _verbosity
    _verbosity = level


def verbosity() -> int:
    return _verbosity


def progress(message: str, *, end: str = "\n") -> None:
    """A progress line on stderr (``end="\\r"``-style updates allowed), unless quiet."""
    if _verbosity >= 0:
        print(message, end=end, file=sys.stderr, flush=True)


def detail(message: str) -> None:
    """A line on stderr shown with ``-v``."""
    if _verbosity > 0:
        print(message, file=sys.stderr, flush=True)
