"""Execution statistics and memory-address traces of one simulated call."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np


@dataclass
class MemoryTrace:
    """Guest memory accesses in program order: ``address`` (uint64), ``size`` in bytes (uint16),
    ``write`` (bool). Vector and T-SAR accesses are one entry per instruction operand; scalar
    accesses one per Unicorn or Python-executed load/store."""

    address: np.ndarray
    size: np.ndarray
    write: np.ndarray

    @classmethod
    def from_list(cls, entries: list[tuple[int, int, int]]) -> MemoryTrace:
        arr = np.array(entries, dtype=np.uint64).reshape(-1, 3)
        return cls(arr[:, 0].copy(), arr[:, 1].astype(np.uint16), arr[:, 2].astype(bool))

    def __len__(self) -> int:
        return int(self.address.size)


@dataclass
class Stats:
    """Counts of one call. Bytes are guest memory traffic; ``scalar_bytes_*`` include Unicorn's
    scalar accesses only when the call asked for memory statistics (they need memory hooks).

    Who executed what (the Python engine): ``python_instructions`` ran in the Python layer (every
    vector and T-SAR instruction, and the scalar code of the loops that contain them, which stays
    there to spare the switches); ``unicorn_instructions`` ran in Unicorn (scalar code outside vector
    loops); ``python_entries`` counts the switches from Unicorn into the Python layer."""

    instructions: int = 0
    by_class: Counter = field(default_factory=Counter)
    by_mnemonic: Counter = field(default_factory=Counter)
    per_address: Counter = field(default_factory=Counter)
    tsar_uops: int = 0
    vector_bytes_read: int = 0
    vector_bytes_written: int = 0
    scalar_bytes_read: int = 0
    scalar_bytes_written: int = 0
    scalar_memory_counted: bool = False
    python_instructions: int = 0
    unicorn_instructions: int = 0
    python_entries: int = 0
    wall_seconds: float = 0.0

    @property
    def instructions_per_second(self) -> float:
        return self.instructions / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def summary(self, top: int = 12) -> str:
        """A human-readable multi-line report."""
        lines = [
            f"instructions      {self.instructions:,} in {self.wall_seconds * 1e3:.1f} ms "
            f"({self.instructions_per_second / 1e6:.3f} M simulated instr/s)",
            "  by class        " + ", ".join(f"{k} {v:,}" for k, v in sorted(self.by_class.items())),
            f"  Python layer    {self.python_instructions:,}: vector and T-SAR instructions and the scalar "
            "code between them",
            f"  Unicorn         {self.unicorn_instructions:,}: scalar code outside vector loops",
            f"  layer entries   {self.python_entries:,}: switches from Unicorn into the Python layer",
            f"T-SAR micro-ops   {self.tsar_uops:,}",
            f"vector memory     {self.vector_bytes_read:,} B read, {self.vector_bytes_written:,} B written",
        ]
        if self.scalar_memory_counted:
            lines.append(f"scalar memory     {self.scalar_bytes_read:,} B read, "
                         f"{self.scalar_bytes_written:,} B written")
        else:
            lines.append("scalar memory     not counted (ask for memory statistics)")
        lines.append("top mnemonics     " + ", ".join(
            f"{m} {c:,}" for m, c in self.by_mnemonic.most_common(top)))
        return "\n".join(lines)
