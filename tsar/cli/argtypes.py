"""Argument types for the CLI: numbers checked at parse time, so a bad value is a one-line usage
error naming the option (argparse puts the option's name in front of these messages)."""

from __future__ import annotations

import argparse


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def address(text: str) -> int:
    """A code address such as 0x1000 (decimal, 0x hex, 0o octal, 0b binary)."""
    value = _int(text) if text.strip() else -1
    if not 0 <= value < 1 << 64:
        raise argparse.ArgumentTypeError(f"expected an address such as 0x1000, got {text!r}")
    return value


def seed(text: str) -> int:
    """A random seed (numpy takes non-negative integers)."""
    return non_negative_int(text)
