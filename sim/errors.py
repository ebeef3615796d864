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
    (alignment), ``"de"`` (division), ``"syscall"`` (a system call: guest code runs without an
    operating system), ``"trap"`` (a breakpoint), ``"limit"``, ``"unicorn"``; ``rip`` the faulting
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


SYSTEM_CALL_MNEMONICS = frozenset({"syscall", "sysenter", "int"})
"""Instructions that enter the operating system (``int n`` for every ``n``, ``int 3`` in its
two-byte form included). Every engine refuses them: guest code runs without an operating system,
and the native engines must not let it reach the host's (docs/simulator.md, "Containment")."""

_LINUX_64 = {
    0: "read", 1: "write", 2: "open", 3: "close", 9: "mmap", 10: "mprotect", 11: "munmap",
    12: "brk", 13: "rt_sigaction", 15: "rt_sigreturn", 16: "ioctl", 21: "access", 22: "pipe",
    32: "dup", 33: "dup2", 39: "getpid", 41: "socket", 42: "connect", 56: "clone", 57: "fork",
    58: "vfork", 59: "execve", 60: "exit", 61: "wait4", 62: "kill", 76: "truncate", 82: "rename",
    83: "mkdir", 84: "rmdir", 85: "creat", 86: "link", 87: "unlink", 88: "symlink", 90: "chmod",
    101: "ptrace", 157: "prctl", 186: "gettid", 231: "exit_group", 257: "openat", 263: "unlinkat",
    317: "seccomp", 318: "getrandom", 322: "execveat", 435: "clone3",
}
_LINUX_32 = {1: "exit", 2: "fork", 3: "read", 4: "write", 5: "open", 6: "close", 8: "creat",
             10: "unlink", 11: "execve", 20: "getpid", 37: "kill", 120: "clone", 190: "vfork",
             252: "exit_group", 295: "openat"}


def system_call_error(rip: int | None, instruction: str, rax: int | None = None, *,
                      compat: bool | None = None, registers: Mapping[str, int] | None = None,
                      how: str = "") -> SimulationError:
    """The error of a guest system call at ``rip`` (``instruction`` its disassembly). ``rax``:
    the register selecting the call; for ``syscall`` it numbers the 64-bit Linux table, for
    ``int 0x80`` and ``sysenter`` the 32-bit one (``compat`` overrides: the table the kernel
    saw); other ``int n`` are no Linux calls. ``how`` says what stopped it."""
    what = "a system call"
    numbered = compat is not None or instruction.startswith(("syscall", "sysenter", "int 0x80"))
    if compat is None:
        compat = not instruction.startswith("syscall")
    if rax is not None and numbered:
        number = rax & 0xFFFFFFFF
        name = (_LINUX_32 if compat else _LINUX_64).get(number)
        what = f"system call {number}" + (f" ({name})" if name else "") + \
            (" of the 32-bit table" if compat else "")
    message = f"the guest made {what}; guest code runs without an operating system"
    return SimulationError("syscall", message + (f" ({how})" if how else ""), rip=rip,
                           instruction=instruction, registers=registers)
