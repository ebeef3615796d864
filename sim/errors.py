"""Errors raised by the simulator."""

from __future__ import annotations

from collections.abc import Mapping

from tsar.common.errors import UserError


class GuestFault(Exception):
    """Internal: a fault raised while executing one instruction; the machine adds the context."""

    def __init__(self, kind: str, message: str, address: int | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.address = kind, message, address


class SimulationError(UserError):
    """The guest program faulted, hit a limit, or used an instruction outside the simulator.

    ``kind`` is one of ``"memory"``, ``"ud"`` (invalid / unsupported instruction), ``"gp"``
    (alignment), ``"de"`` (division), ``"limit"``, ``"unicorn"``; ``rip`` the faulting
    instruction's address, ``instruction`` its disassembly, ``registers`` the 64-bit GPRs.
    """

    def __init__(self, kind: str, message: str, *, rip: int | None = None, instruction: str = "",
                 registers: Mapping[str, int] | None = None, address: int | None = None) -> None:
        self.kind, self.message, self.rip = kind, message, rip
        self.instruction, self.address = instruction, address
        self.registers = dict(registers or {})
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f" at rip={self.rip:#x}" if self.rip is not None else ""
        insn = f" ({self.instruction})" if self.instruction else ""
        return f"{self.kind}: {self.message}{where}{insn}"

    def register_dump(self) -> str:
        """The GPRs as ``name=value`` pairs, four per line."""
        items = [f"{k}={v:#018x}" for k, v in self.registers.items()]
        return "\n".join("  ".join(items[i:i + 4]) for i in range(0, len(items), 4))
