"""What the CLI prints besides results: progress on stderr (silenced by ``-q``) and details
(shown with ``-v``)."""

from __future__ import annotations

import sys

_verbosity = 0


def set_verbosity(level: int) -> None:
    """-1: quiet (no progress), 0: default, 1 and more: verbose."""
    global _verbosity
    _verbosity = level


def progress(message: str, *, end: str = "\n") -> None:
    """A progress line on stderr (``end="\\r"``-style updates allowed), unless quiet."""
    if _verbosity >= 0:
        print(message, end=end, file=sys.stderr, flush=True)


def detail(message: str) -> None:
    """A line on stderr shown with ``-v``."""
    if _verbosity > 0:
        print(message, file=sys.stderr, flush=True)


class Steps:
    """Numbered progress for a job of ``total`` steps: ``steps("what")`` reports
    ``[i/total] what`` with the time left estimated from the steps so far."""

    def __init__(self, total: int, say=None) -> None:
        import time

        self.total, self.done = max(total, 1), 0
        self.say = say or progress
        self._clock = time.perf_counter
        self._start = self._clock()

    def __call__(self, message: str) -> None:
        elapsed = self._clock() - self._start
        left = ""
        if self.done:
            left = f"  (~{elapsed / self.done * (self.total - self.done):.0f} s left)"
        self.done += 1
        self.say(f"[{min(self.done, self.total)}/{self.total}] {message}{left}")
