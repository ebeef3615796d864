"""Input data structures of the timing model: instruction forms and loop profiles.

A :class:`LoopProfile` is what the functional simulator will produce for one loop: the static
instructions of the loop body in program order, each with the number of times it executed, plus
the number of loop iterations. Registers are *architectural* names normalized by
:func:`normalize_register` (``eax`` -> ``rax``, ``xmm3``/``ymm3``/``zmm3`` -> ``v3``) so that
partial-register aliases carry dependencies; ``"flags"`` stands for the arithmetic flags.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_GPR_ALIASES = {
    "rax": ("eax", "ax", "al", "ah"), "rbx": ("ebx", "bx", "bl", "bh"),
    "rcx": ("ecx", "cx", "cl", "ch"), "rdx": ("edx", "dx", "dl", "dh"),
    "rsi": ("esi", "si", "sil"), "rdi": ("edi", "di", "dil"), "rbp": ("ebp", "bp", "bpl"),
    "rsp": ("esp", "sp", "spl"),
}
_ALIAS_TO_FULL = {a: full for full, aliases in _GPR_ALIASES.items() for a in (full, *aliases)}


def normalize_register(name: str) -> str:
    """Canonical register name: 64-bit GPR, ``vN`` for x/y/zmmN, ``kN``, ``flags``, ``rip``."""
    n = name.lower()
    if n in _ALIAS_TO_FULL:
        return _ALIAS_TO_FULL[n]
    m = re.fullmatch(r"r(\d+)[dwb]?", n)
    if m:
        return f"r{m.group(1)}"
    m = re.fullmatch(r"[xyz]mm(\d+)", n)
    if m:
        return f"v{m.group(1)}"
    if n in ("rflags", "eflags", "flags"):
        return "flags"
    return n


@dataclass(frozen=True)
class InstructionForm:
    """One static instruction as the timing model sees it.

    ``mnemonic``: lower-case, iced-x86 / Intel spelling (``vpshufb``, ``jne``, ``tgemv8x16``).
    ``operands``: operand kinds in Intel order (``("ymm", "ymm", "m256")``); kinds are ``r8``..
    ``r64``, ``xmm``/``ymm``/``zmm``, ``m8``..``m512`` (``m32_1to8`` for broadcasts),
    ``imm8``/``imm16``/``imm32``/``imm64``, ``rel8``/``rel32``.
    ``reads`` / ``writes``: normalized data registers read / written (``flags`` included);
    ``address_reads``: registers that form a memory address (their dependency goes through the
    load, so it costs ``latency_max``). ``mem_read_bytes`` / ``mem_write_bytes``: bytes moved by
    one execution. ``address``: the instruction's address, if known (links simulator counts).
    ``mem_key``: the memory operand's address expression (``rsp+0x6e8``), empty if none or
    RIP-relative: a store and a later load with the same key and loop-invariant address registers
    form a dependency through memory (store-to-load forwarding). ``isa``: the CPU flags
    (``/proc/cpuinfo`` spelling, e.g. ``avx512bw``) a core needs to execute it.
    """

    mnemonic: str
    operands: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    address_reads: tuple[str, ...] = ()
    mem_read_bytes: int = 0
    mem_write_bytes: int = 0
    address: int | None = None
    text: str = ""
    mem_key: str = ""
    isa: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "mnemonic", self.mnemonic.lower())
        object.__setattr__(self, "operands", tuple(k.lower() for k in self.operands))
        for name in ("reads", "writes", "address_reads"):
            object.__setattr__(self, name, tuple(normalize_register(r) for r in getattr(self, name)))

    @property
    def label(self) -> str:
        return self.text or f"{self.mnemonic} {', '.join(self.operands)}".strip()


@dataclass(frozen=True)
class LoopEntry:
    """A static instruction of a loop body and how many times it executed in total."""

    form: InstructionForm
    count: float


@dataclass(frozen=True)
class LoopProfile:
    """A loop body (program order) with execution counts and the loop's iteration count.

    ``per_iteration`` weights are ``count / iterations``; instructions of the steady-state body
    have weight 1. Instructions with weight < 1 (conditional paths, loop prologue code that the
    simulator attributed to the loop) add port pressure in proportion and are left out of the
    dependency analysis when below one half (see :mod:`tsar.sim.timing.core`).
    """

    entries: tuple[LoopEntry, ...]
    iterations: float
    name: str = ""
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.iterations <= 0:
            raise ValueError(f"loop {self.name!r}: iterations must be > 0, got {self.iterations}")

    @classmethod
    def from_forms(cls, body: Iterable[InstructionForm | tuple[InstructionForm, float]],
                   iterations: float | None = None, name: str = "") -> LoopProfile:
        """Build from forms (count 1 each) or ``(form, count)`` pairs; iterations default to the
        largest count (the loop branch executes once per iteration)."""
        entries = tuple(LoopEntry(*item) if isinstance(item, tuple) else LoopEntry(item, 1.0)
                        for item in body)
        if not entries:
            raise ValueError(f"loop {name!r}: empty body")
        its = iterations if iterations is not None else max(e.count for e in entries)
        return cls(entries, float(its), name)

    def per_iteration(self) -> list[tuple[InstructionForm, float]]:
        return [(e.form, e.count / self.iterations) for e in self.entries]

    def scaled(self, iterations: float) -> LoopProfile:
        """The same loop run ``iterations`` times (counts scaled in proportion)."""
        k = iterations / self.iterations
        return LoopProfile(tuple(LoopEntry(e.form, e.count * k) for e in self.entries),
                           iterations, self.name, self.notes)
