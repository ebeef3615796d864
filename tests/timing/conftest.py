"""Helpers for the timing-model tests."""

from __future__ import annotations

import pytest

from tsar.sim.timing import InstructionForm


def vec(mnemonic: str, dst: int, *srcs: int | str, width: str = "ymm") -> InstructionForm:
    """A 3-operand vector form ``mnemonic dst, src1, src2``; a string source is a memory kind."""
    kinds = [width] + [s if isinstance(s, str) else width for s in srcs]
    reads = [f"v{s}" for s in srcs if not isinstance(s, str)]
    addr = ["rsi"] if any(isinstance(s, str) for s in srcs) else []
    return InstructionForm(mnemonic, tuple(kinds), reads=tuple(reads), writes=(f"v{dst}",),
                           address_reads=tuple(addr))


LOOP_TAIL = (
    InstructionForm("dec", ("r64",), reads=("rcx",), writes=("rcx", "flags")),
    InstructionForm("jne", ("rel8",), reads=("flags",)),
)


@pytest.fixture
def loop_tail() -> tuple[InstructionForm, ...]:
    return LOOP_TAIL
