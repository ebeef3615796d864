"""Help texts that match the code: the lists they show (kernels, platforms, models, engines,
configurations) are read from the registries when the parser is built (after ``--isa`` files are
registered, so their variants are listed too), and names such as ``tsar-c2s4-ap-min`` are never
broken at their hyphens when argparse wraps a line. ``tests/cli/test_help_lists.py`` parses every
command's help and checks each list against its registry."""

from __future__ import annotations

import argparse
import re
import textwrap
from collections.abc import Iterable

_SPACE = re.compile(r"\s+")


def names(items: Iterable[str]) -> str:
    """``a, b, c``: a registry's names as help texts list them."""
    return ", ".join(items)


def tsar_kernels() -> tuple[str, ...]:
    """The T-SAR kernels of the configurations registered now."""
    from tsar.kernels.tsar_plan import kernel_names

    return tuple(kernel_names())


def configurations(vector_bits: int | None = None) -> tuple[str, ...]:
    """The names of the T-SAR configurations registered now (of one vector width if given)."""
    from tsar.isa.config import configs

    return tuple(c.name for c in configs() if vector_bits is None or c.vector_bits == vector_bits)


def models() -> tuple[str, ...]:
    from tsar.models import MODELS

    return tuple(MODELS)


def platforms() -> tuple[str, ...]:
    from tsar.sim.platforms import PLATFORM_NAMES

    return tuple(PLATFORM_NAMES)


def native_kernels() -> tuple[str, ...]:
    from tsar.kernels.registry import KERNELS

    return tuple(KERNELS)


def call_engines() -> tuple[str, ...]:
    """The engines of :data:`tsar.sim.ENGINES` that run a call and return its results: all but the
    proxy engine, whose results are meaningless (it replaces T-SAR instructions by timing proxies)."""
    from tsar.sim import ENGINES

    return tuple(e for e in ENGINES if e != "proxy")


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter without breaking words at hyphens (kernel and model names)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(_SPACE.sub(" ", text).strip(), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(_SPACE.sub(" ", text).strip(), width, initial_indent=indent,
                             subsequent_indent=indent, break_on_hyphens=False)


class RawEpilogFormatter(HelpFormatter):
    """:class:`HelpFormatter` that keeps the description's and epilog's own line breaks (a line
    too long for the terminal is wrapped at its own indentation)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for line in text.splitlines():
            lead = indent + line[:len(line) - len(line.lstrip())]
            out.append(textwrap.fill(line.strip(), width, initial_indent=lead, subsequent_indent=lead,
                                     break_on_hyphens=False) if line.strip() else "")
        return "\n".join(out)
