"""The simulated machine: Unicorn runs scalar code, the Python layer runs vector and T-SAR code.

Every VEX-encoded instruction (including T-SAR's map-8 ones) gets a ``UC_HOOK_CODE`` hook bound to
its address, found by a linear sweep of the loaded code. When Unicorn reaches one, the Python
layer takes over: it loads the GPRs and flags, executes pre-compiled blocks (vector, T-SAR, and
the simple scalar subset of :mod:`tsar.sim.x86.scalar`, following ``jmp``/``jcc``) until it meets an
instruction only Unicorn can run, writes the registers back and sets RIP there. Unicorn therefore
never executes a VEX instruction (it cannot execute VEX.256 and mis-executes VEX.128).

Code the sweep does not see (a jump into the middle of an instruction, whose bytes decode into
another stream) is found when Unicorn first translates it: every new translation block is decoded
as Unicorn will run it, and a vector, T-SAR or other non-legacy instruction in it that has no hook
yet gets one, the block is dropped from Unicorn's cache and execution restarts at its start (no
instruction of it has run), so the Python layer executes the instruction. Code cannot be written
at run time: the code region is read-only and the data region and stack are not executable (a
write or fetch there is a memory fault naming the address).

System calls (:data:`~tsar.sim.errors.SYSTEM_CALL_MNEMONICS`) are refused: the sweep hooks each
one, and Unicorn's ``syscall`` / ``sysenter`` instruction hooks and interrupt hook catch those it
reaches otherwise; each is a :class:`~tsar.sim.errors.SimulationError` of kind ``syscall`` naming
the instruction (Unicorn alone would treat ``syscall`` as a no-op).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import unicorn
import unicorn.x86_const as X

from tsar.isa.assembler import Program, assemble
from tsar.isa.config import VECTOR_REGISTERS
from tsar.sim.elf import load_elf_image
from tsar.sim.engine import call_options, engine_options, refuse_options
from tsar.sim.errors import SYSTEM_CALL_MNEMONICS, GuestFault, SimulationError, system_call_error
from tsar.sim.memory import PAGE, GuestMemory, Span
from tsar.sim.python_engine.blocks import SCALAR, TSAR, VECTOR, BlockCache, Insn
from tsar.sim.python_engine.ucfast import GPR_IDS, XMM_IDS, Hooks, RegBatch, emu_stop, set_rip
from tsar.sim.stats import MemoryTrace, Stats
from tsar.sim.x86 import flags as fl
from tsar.sim.x86.state import GPR_NAMES, MASK64, REGISTER_BYTES, CpuState

_PERMS = {"rx": unicorn.UC_PROT_READ | unicorn.UC_PROT_EXEC,
          "rw": unicorn.UC_PROT_READ | unicorn.UC_PROT_WRITE}
_INT_ARG_REGS = (7, 6, 2, 1, 8, 9)  # rdi, rsi, rdx, rcx, r8, r9
_UC_ERROR_KIND = {
    unicorn.UC_ERR_READ_UNMAPPED: "memory", unicorn.UC_ERR_WRITE_UNMAPPED: "memory",
    unicorn.UC_ERR_FETCH_UNMAPPED: "memory", unicorn.UC_ERR_READ_PROT: "memory",
    unicorn.UC_ERR_WRITE_PROT: "memory", unicorn.UC_ERR_FETCH_PROT: "memory",
    unicorn.UC_ERR_READ_UNALIGNED: "memory", unicorn.UC_ERR_WRITE_UNALIGNED: "memory",
    unicorn.UC_ERR_INSN_INVALID: "ud", unicorn.UC_ERR_EXCEPTION: "exception",
}
_ACCESS = {unicorn.UC_MEM_READ: "read", unicorn.UC_MEM_WRITE: "write",
           unicorn.UC_MEM_READ_UNMAPPED: "read", unicorn.UC_MEM_WRITE_UNMAPPED: "write",
           unicorn.UC_MEM_FETCH_UNMAPPED: "fetch", unicorn.UC_MEM_READ_PROT: "read",
           unicorn.UC_MEM_WRITE_PROT: "write", unicorn.UC_MEM_FETCH_PROT: "fetch"}
_GPRS = len(GPR_NAMES)  # the register batch holds the GPRs, then RFLAGS
_SLACK_REACH = 32  # bytes before an array's end from which a Unicorn access is checked


_MISSING = object()


def _hook_error(exc: BaseException, rip: int | None = None) -> BaseException:
    """What a hook's exception becomes once Unicorn has stopped: a Ctrl-C stays a
    KeyboardInterrupt (the CLI prints "interrupted"), a guest fault stays itself, anything else
    is an internal error at ``rip``."""
    if isinstance(exc, SimulationError | KeyboardInterrupt):
        return exc
    return SimulationError("internal", f"{type(exc).__name__}: {exc}", rip=rip)


@dataclass
class _UBlock:
    """Instructions Unicorn executes in one translation block (up to the first hooked one)."""

    insns: list[Insn]
    hits: int = 0


class PythonMachine:
    """The Python engine (:class:`tsar.sim.engine.Machine`): an x86-64 machine with guest memory,
    loaded code and a System V ``call``.

    Array arguments, the stack and the code sit between unmapped guard pages, and an access that
    leaves them by even one byte is a :class:`SimulationError` naming the nearest array and the
    offset (Unicorn faults on the guard pages; the bytes between an array's end and its page's end
    are watched by a bounded memory hook; the Python layer checks every access).

    ``max_instructions`` and ``timeout`` (seconds) bound every call; ``python_scalar=False`` leaves
    all scalar instructions to Unicorn (slower; used to cross-check the Python scalar subset);
    ``batch_tsar=False`` executes T-SAR instructions one by one instead of in batches (same results
    and statistics; used to cross-check the batching).
    """

    engine = "python"

    def __init__(self, *, code_size: int = 16 << 20, data_size: int = 512 << 20,
                 stack_size: int = 1 << 20, max_instructions: int = 10**10,
                 timeout: float = 3600.0, python_scalar: bool = True,
                 batch_tsar: bool = True, **unsupported: object) -> None:
        refuse_options(self.engine, unsupported, engine_options(self.engine), "creation")
        self.mem = GuestMemory(code_size=code_size, data_size=data_size, stack_size=stack_size,
                               guarded=True)
        self.uc = unicorn.Uc(unicorn.UC_ARCH_X86, unicorn.UC_MODE_64)
        host = self.mem.host_address
        for start, size, perms in self.mem.regions():
            self.uc.mem_map_ptr(start, size, _PERMS[perms], host + (start - self.mem.base))
        self.st = CpuState(self.mem)
        self.python_scalar, self.batch_tsar = python_scalar, batch_tsar
        self.cache = BlockCache(self.st, trace=False, python_scalar=python_scalar, batch_tsar=batch_tsar)
        self.max_instructions, self.timeout = max_instructions, timeout
        self.symbols: dict[str, int] = {}
        self.stats = Stats()
        self.trace: MemoryTrace | None = None
        self.legacy_sse = False
        self.heartbeat: Callable[[int, float], None] | None = None
        """Called with (instructions so far, seconds) every ``heartbeat_seconds`` of a long call."""
        self.heartbeat_seconds = 2.0
        self._started = self._wall_deadline = 0.0
        self._hooks = Hooks(self.uc)
        self._gregs = RegBatch(self.uc, (*GPR_IDS, X.UC_X86_REG_EFLAGS))
        row = self.st.zmm.ctypes.data
        self._xregs = RegBatch(self.uc, XMM_IDS, [row + REGISTER_BYTES * i for i in range(VECTOR_REGISTERS)])
        self._hooked: dict[int, object] = {}  # address -> its vector hook
        self._ublocks: dict[tuple[int, int], _UBlock] = {}
        self._error: BaseException | None = None
        self._counted = 0
        self._limit = 0
        self._deadline = 0.0
        self._entries = 0
        self._scalar_mem = [0, 0]
        self._timeout = 0.0
        self.arguments: list[Span] = []  # where the last call's array arguments were placed
        self._mapped: dict[tuple[int, int], object] = {}  # Unicorn-mapped array -> its slack hook
        self._fast_tbs = True  # Unicorn may hold blocks translated without memory hooks
        self._bad_access: tuple[int, int, int] | None = None  # (access, address, size)
        self.ret_addr = self.mem.alloc_code(16)
        self.mem.write(self.ret_addr, b"\xcc" * 16, code=True)
        self._code_start = self.mem.code_top  # where a fresh machine loads its first code
        self._hooks.code(self._on_block, self.mem.code_start, self.mem.code_end - 1, block=True)
        self._hooks.invalid(self._on_invalid)
        self._hooks.invalid_memory(self._on_bad_access)
        self._refused: dict[int, object] = {}  # system-call sites hooked by the sweep -> hook
        for insn_id in (X.UC_X86_INS_SYSCALL, X.UC_X86_INS_SYSENTER):
            self.uc.hook_add(unicorn.UC_HOOK_INSN, self._on_system_instruction, None, 1, 0, insn_id)
        self.uc.hook_add(unicorn.UC_HOOK_INTR, self._on_interrupt)

    # --- loading ---------------------------------------------------------------------------------
    def load_code(self, code: bytes, symbols: Mapping[str, int] | None = None,
                  base: int | None = None) -> int:
        """Copy position-independent code into the code region; ``symbols`` are offsets from its
        start. Returns the load address."""
        addr = self.mem.alloc_code(len(code)) if base is None else base
        self.mem.write(addr, code, code=True)
        for name, offset in (symbols or {}).items():
            self.symbols[name] = addr + offset
        self._scan(addr, addr + len(code))
        return addr

    def load_asm(self, source: str, filename: str = "<input>") -> dict[str, int]:
        """Assemble Intel-syntax AVX2 + T-SAR source into the code region; returns its labels."""
        size = len(assemble(source, base=0, filename=filename).code)
        addr = self.mem.alloc_code(size)
        program = assemble(source, base=addr, filename=filename)
        return self.load_program(program)

    def load_program(self, program: Program) -> dict[str, int]:
        """Load an assembled :class:`~tsar.isa.assembler.Program` (relocated if its base is not a
        free code address; keystone output is position-independent for relative branches)."""
        if program.base >= self.mem.code_top and program.base + len(program.code) <= self.mem.code_end:
            self.mem.code_top = program.base + len(program.code)
            addr = program.base
        else:
            addr = self.mem.alloc_code(len(program.code))
        offsets = {k: v - program.base for k, v in program.symbols.items()}
        self.load_code(program.code, offsets, base=addr)
        return {k: addr + v for k, v in offsets.items()}

    def replace_program(self, program: Program) -> dict[str, int]:
        """Load ``program`` as the machine's only code, where a fresh machine loads its first code;
        returns its labels. Everything loaded before is unloaded: its symbols, hooks, Unicorn's
        translations, the blocks and their counts; its bytes past the new code's end are zeroed.
        Instructions compiled before at an address whose bytes are the same are kept
        (:meth:`BlockCache.replace_code`), so running variants of one kernel in turn (another
        shape changes a few immediates) decodes and compiles only what changed."""
        self._ublocks.clear()
        self.symbols.clear()
        self.legacy_sse = False
        old_top, self.mem.code_top = self.mem.code_top, self._code_start
        addr = self.mem.alloc_code(len(program.code))
        image = program.code + bytes(max(old_top - self.mem.code_top, 0))
        self.cache.replace_code(addr, self.mem.read(addr, len(image)), image)
        self.mem.write(addr, image, code=True)
        self.uc.ctl_flush_tb()
        offsets = {k: v - program.base for k, v in program.symbols.items()}
        for name, offset in offsets.items():
            self.symbols[name] = addr + offset
        hooked, refused = self._hooked, self._refused  # the hooks the new code needs again are kept
        self._hooked, self._refused = {}, {}
        self._scan(addr, addr + len(program.code), hooked, refused)
        for handle in [*hooked.values(), *refused.values()]:
            self._hooks.remove(handle)
        return {k: addr + v for k, v in offsets.items()}

    def load_elf(self, path: str | Path) -> dict[str, int]:
        """Load a shared object (no libc: undefined symbols are an error); returns its symbols."""
        image = load_elf_image(Path(path).read_bytes(), Path(path).name)
        addr = self.mem.alloc_code(image.size, align=4096)
        self.mem.write(addr, image.relocated(addr), code=True)
        for name, offset in image.symbols.items():
            self.symbols[name] = addr + offset
        for start, end in image.exec_ranges:
            self._scan(addr + start, addr + end)
        return {k: addr + v for k, v in image.symbols.items()}

    def _scan(self, start: int, end: int, hooked: dict[int, object] | None = None,
              refused: dict[int, object] | None = None) -> None:
        """Linear sweep: hook every VEX / T-SAR instruction and every system call (taking the hook
        of an address from ``hooked`` / ``refused`` where it has one already); note legacy SSE use."""
        hooked, refused = hooked or {}, refused or {}
        addr = start
        while addr < end:
            insn = self.cache.insn(addr)
            if insn.cls != SCALAR:
                if addr in hooked:
                    self._hooked[addr] = hooked.pop(addr)
                self._hook_vector(addr)
            elif insn.mnemonic in SYSTEM_CALL_MNEMONICS:
                if addr in refused:
                    self._refused[addr] = refused.pop(addr)
                if addr not in self._refused:
                    self._refused[addr] = self._hooks.code(self._on_refused, addr, addr)
            elif not self.legacy_sse and _legacy_sse(insn):
                self.legacy_sse = True
            addr += insn.length

    def _hook_vector(self, addr: int) -> None:
        """Let the Python layer execute the instruction at ``addr`` whenever Unicorn reaches it."""
        if addr not in self._hooked:
            self._hooked[addr] = self._hooks.code(self._on_vector, addr, addr)

    def close(self) -> None:
        """Nothing to release: guest memory and Unicorn go with the object."""

    # --- calling ---------------------------------------------------------------------------------
    def address(self, function: str | int) -> int:
        if isinstance(function, int):
            return function
        try:
            return self.symbols[function]
        except KeyError:
            known = ", ".join(sorted(self.symbols)) or "none loaded"
            raise SimulationError("symbol", f"no function {function!r} (known: {known})") from None

    def call(self, function: str | int, *args: object, returns: str = "i64", trace: bool = False,
             memory_stats: bool = False, max_instructions: int | None = None,
             timeout: float | None = None, **unsupported: object) -> int | float | None:
        """Call ``function`` with System V arguments and return its result.

        ``args``: numpy arrays are copied into 64-byte-aligned guest memory (their address is
        passed) and copied back afterwards when writeable; Python ints are integer arguments
        (rdi, rsi, rdx, rcx, r8, r9, then the stack); Python floats are ``double`` and
        ``np.float32`` values ``float`` arguments (xmm0..7). ``returns``: ``i64``, ``u64``,
        ``i32``, ``u32`` (rax), ``f32``/``f64`` (xmm0) or ``none``. Statistics of the call are in
        :attr:`stats`; with ``trace=True`` the memory accesses are in :attr:`trace`.
        """
        refuse_options(self.engine, unsupported, call_options(self.engine), "call")
        entry = self.address(function)
        data_mark = self.mem.data_top
        buffers: list[tuple[np.ndarray, int]] = []
        ints: list[int] = []
        floats: list[bytes] = []
        for index, arg in enumerate(args):
            if isinstance(arg, np.ndarray):
                addr = self.mem.alloc(arg.nbytes, 64, label=_array_label(index, arg))
                self.mem.write(addr, np.ascontiguousarray(arg).view(np.uint8).reshape(-1))
                buffers.append((arg, addr))
                ints.append(addr)
            elif isinstance(arg, np.float32):
                floats.append(np.float32(arg).tobytes())
            elif isinstance(arg, float):
                floats.append(np.float64(arg).tobytes())
            elif isinstance(arg, int | np.integer):
                ints.append(int(arg) & MASK64)
            else:
                raise SimulationError("argument", f"unsupported argument type {type(arg).__name__}")
        if len(floats) > 8:
            raise SimulationError("argument", "more than 8 floating-point arguments")
        try:
            self.arguments = [s for s in self.mem.allocations if s.start >= data_mark]
            self._map_arrays()
            self._prepare(ints, floats, trace)
            self._run(entry, max_instructions or self.max_instructions, timeout or self.timeout,
                      memory_stats)
            for arr, addr in buffers:
                if arr.flags.writeable:
                    arr.reshape(-1).view(np.uint8)[:] = self.mem.view(addr, arr.nbytes)
        finally:
            self.mem.release(data_mark)
        return self._result(returns)

    def _map_arrays(self) -> None:
        """Map each live data allocation into Unicorn (its pages only, so the guard pages between
        them fault) and watch the bytes between its end and its page's end with a bounded memory
        hook. Mappings of the previous call that are still wanted are kept."""
        wanted = {(s.start, s.size) for s in self.mem.allocations if s.size}
        for key in [k for k in self._mapped if k not in wanted]:
            hook = self._mapped.pop(key)
            if hook is not None:
                self._hooks.remove(hook)
            self.uc.mem_unmap(key[0], -(-key[1] // PAGE) * PAGE)
        host = self.mem.host_address - self.mem.base
        for start, size in sorted(wanted - self._mapped.keys()):
            mapped = -(-size // PAGE) * PAGE
            self.uc.mem_map_ptr(start, mapped, _PERMS["rw"], host + start)
            hook = None
            if size != mapped:
                hook = self._hooks.memory(self._on_slack, max(start, start + size - _SLACK_REACH),
                                          start + mapped - 1)
            self._mapped[start, size] = hook
        if self._fast_tbs and any(h is not None for h in self._mapped.values()):
            self.uc.ctl_flush_tb()  # blocks translated without memory hooks would skip them
            self._fast_tbs = False

    def _prepare(self, ints: list[int], floats: list[bytes], trace: bool) -> None:
        if trace != self.cache.trace:
            self.cache = BlockCache(self.st, trace=trace, python_scalar=self.python_scalar,
                                    batch_tsar=self.batch_tsar)
        self.st.trace = [] if trace else None
        self.trace = None
        stack_top = self.mem.end - 64
        extra = ints[6:]
        rsp = (stack_top - 8 * len(extra)) & ~0xF
        rsp -= 8
        self.mem.write(rsp, self.ret_addr.to_bytes(8, "little"))
        for i, value in enumerate(extra):
            self.mem.write(rsp + 8 + 8 * i, value.to_bytes(8, "little"))
        gpr = [0] * len(GPR_NAMES)
        gpr[4] = rsp
        for reg, value in zip(_INT_ARG_REGS, ints[:6], strict=False):
            gpr[reg] = value
        self.st.zmm[:] = 0
        self.st.k[:] = [0] * len(self.st.k)
        for i, raw in enumerate(floats):
            self.st.zmm[i, :len(raw)] = np.frombuffer(raw, np.uint8)
        vals = self._gregs.values
        vals[:_GPRS] = gpr
        vals[_GPRS] = 0x202
        self._gregs.write()
        self._xregs.write()

    def _run(self, entry: int, limit: int, timeout: float, memory_stats: bool) -> None:
        for block in self.cache.blocks.values():
            if block is not None:
                block.hits = 0
        self.cache.retired.clear()
        for ub in self._ublocks.values():
            ub.hits = 0
        self._error, self._counted, self._limit, self._entries = None, 0, limit, 0
        self._timeout, self._bad_access = timeout, None
        self._scalar_mem = [0, 0]
        mem_hook = self._hooks.memory(self._on_memory) if (memory_stats or self.st.trace is not None) \
            else None
        if mem_hook is not None:
            self.uc.ctl_flush_tb()  # blocks translated earlier carry no memory instrumentation
        start = time.perf_counter()
        self._started, self._wall_deadline = start, start + timeout
        self._deadline = start + min(timeout, self.heartbeat_seconds) if self.heartbeat else start + timeout
        try:
            try:
                with self.st.fp.session():
                    # no Unicorn timeout: its timer thread wakes every few microseconds and takes
                    # a core from parallel simulations; _on_block enforces the wall-time limit
                    self.uc.emu_start(entry, self.ret_addr)
            except unicorn.UcError as exc:
                if self._error is None:
                    self._error = self._unicorn_error(exc)
        finally:
            if mem_hook is not None:
                self._hooks.remove(mem_hook)
                self.uc.ctl_flush_tb()
            if all(h is None for h in self._mapped.values()):
                self._fast_tbs = True
        elapsed = time.perf_counter() - start
        if self._error is None and self.uc.reg_read(X.UC_X86_REG_RIP) != self.ret_addr:
            self._error = self._fault(self._limit_fault(True), self.uc.reg_read(X.UC_X86_REG_RIP),
                                      self._unicorn_registers())
        self._collect(elapsed, memory_stats)
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def _result(self, returns: str) -> int | float | None:
        if returns == "none":
            return None
        if returns in ("f32", "f64"):
            if self.legacy_sse:
                self._xregs.read()
            dt = np.float32 if returns == "f32" else np.float64
            return float(self.st.zmm[0, :np.dtype(dt).itemsize].view(dt)[0])
        rax = self.uc.reg_read(X.UC_X86_REG_RAX)
        if returns == "u64":
            return rax
        if returns == "i64":
            return rax - (1 << 64) if rax >> 63 else rax
        value = rax & 0xFFFFFFFF
        if returns == "u32":
            return value
        if returns == "i32":
            return value - (1 << 32) if value >> 31 else value
        raise SimulationError("argument", f"unknown return kind {returns!r}")

    # --- hooks (must never raise) ----------------------------------------------------------------
    def _on_vector(self, handle: int, address: int, size: int) -> None:
        try:
            self._python(address, handle)
        except BaseException as exc:
            self._error = _hook_error(exc, address)
            emu_stop(handle)

    def _on_invalid(self, handle: int) -> bool:
        try:
            rip = self.uc.reg_read(X.UC_X86_REG_RIP)
            insn = self.cache.insn(rip)
            if insn.cls == SCALAR:
                return False
            self._hook_vector(rip)
            self._python(rip, handle)
            return True
        except BaseException as exc:
            self._error = _hook_error(exc)
            emu_stop(handle)
            return True

    def _on_block(self, handle: int, address: int, size: int) -> None:
        try:
            key = (address, size)
            ub = self._ublocks.get(key)
            if ub is None:
                unseen = self._unseen(address, size)
                if unseen:  # code the sweep did not see: hook it, retranslate, start the block again
                    for addr in unseen:
                        self._hook_vector(addr)
                    self.uc.ctl_remove_cache(address, address + max(size, 1))
                    set_rip(handle, address)
                    return
                ub = self._ublocks[key] = self._unicorn_block(address, size)
            ub.hits += 1
            self._counted += len(ub.insns)
            if self._counted > self._limit:
                self._error = self._fault(self._limit_fault(False), address, self._unicorn_registers())
                emu_stop(handle)
            elif not ub.hits & 0x3FF and time.perf_counter() > self._deadline:
                try:
                    self._tick()
                except GuestFault as fault:
                    self._error = self._fault(fault, address, self._unicorn_registers())
                    emu_stop(handle)
        except BaseException as exc:
            self._error = _hook_error(exc, address)
            emu_stop(handle)

    def _on_slack(self, access: int, address: int, size: int) -> None:
        """An access near the end of an array whose last page has bytes past it."""
        write = access == unicorn.UC_MEM_WRITE
        if self._error is None and not self.mem.accessible(address, size, write):
            try:
                rip = self.uc.reg_read(X.UC_X86_REG_RIP)
                fault = GuestFault("memory", self.mem.describe(address, size, _ACCESS[access]),
                                   address)
                self._error = self._fault(fault, rip, self._unicorn_registers())
            except BaseException as exc:
                self._error = _hook_error(exc)
            self.uc.emu_stop()

    def _on_bad_access(self, access: int, address: int, size: int) -> bool:
        """An access to unmapped or protected memory: noted for the error message; it faults."""
        self._bad_access = (access, address, size)
        return False

    def _on_memory(self, access: int, address: int, size: int) -> None:
        write = int(access == unicorn.UC_MEM_WRITE)
        self._scalar_mem[write] += size
        if self.st.trace is not None:
            self.st.trace.append((address, size, write))

    def _on_refused(self, handle: int, address: int, size: int) -> None:
        """A system call the sweep found: refused before it executes."""
        self._error = self._system_call(address)
        emu_stop(handle)

    def _on_system_instruction(self, uc: unicorn.Uc, user_data: object) -> None:
        """``syscall`` / ``sysenter`` reached by a path the sweep did not see (RIP is its
        address); without this hook Unicorn would run it as a no-op."""
        try:
            if self._error is None:
                self._error = self._system_call(uc.reg_read(X.UC_X86_REG_RIP))
        except BaseException as exc:
            self._error = _hook_error(exc)
        uc.emu_stop()

    def _on_interrupt(self, uc: unicorn.Uc, number: int, user_data: object) -> None:
        """A CPU exception or ``int n``: #DE is reported at the division (RIP); after ``int n``
        and ``int3`` / ``int1`` RIP is past the instruction."""
        try:
            if self._error is None:
                self._error = self._interrupt_error(uc.reg_read(X.UC_X86_REG_RIP), number)
        except BaseException as exc:
            self._error = _hook_error(exc)
        uc.emu_stop()

    def _interrupt_error(self, rip: int, number: int) -> SimulationError:
        regs = self._unicorn_registers()
        before = self.mem.read(rip - 2, 2) if self.mem.accessible(rip - 2, 2, False) else b""
        if before == bytes([0xCD, number]):
            return self._system_call(rip - 2)
        if number in (1, 3) and before[-1:] == (b"\xcc" if number == 3 else b"\xf1"):
            return self._fault(GuestFault("trap", f"breakpoint (int{number})"), rip - 1, regs)
        if number == 0:
            return self._fault(GuestFault("de", "division error (#DE)"), rip, regs)
        return self._fault(GuestFault("exception", f"CPU exception {number}"), rip, regs)

    def _system_call(self, rip: int) -> SimulationError:
        regs = self._unicorn_registers()
        text = self._fault(GuestFault("syscall", ""), rip, regs).instruction
        return system_call_error(rip, text, regs["rax"], registers=regs)

    def _unseen(self, address: int, size: int) -> list[int]:
        """Instructions of Unicorn's new block at ``address`` that only the Python layer may
        execute but have no hook (code the load-time sweep did not decode). Legacy SSE there
        (which the sweep would have noted) makes the layers share the xmm registers from now."""
        out, addr = [], address
        while addr < address + max(size, 1):
            try:
                insn = self.cache.insn(addr)
            except GuestFault:
                break
            if insn.cls != SCALAR and addr not in self._hooked:
                out.append(addr)
            elif insn.cls == SCALAR and not self.legacy_sse and _legacy_sse(insn):
                self._xregs.write()  # the Python layer's vector registers are the current ones
                self.legacy_sse = True
            addr += insn.length
        return out

    def _unicorn_block(self, address: int, size: int) -> _UBlock:
        insns, addr = [], address
        while addr < address + size and addr not in self._hooked:
            try:
                insn = self.cache.insn(addr)
            except GuestFault:
                break
            insns.append(insn)
            addr += insn.length
        return _UBlock(insns)

    # --- the Python layer ------------------------------------------------------------------------
    def _python(self, address: int, handle: int) -> None:
        st, regs = self.st, self._gregs
        regs.read()
        vals = regs.values.tolist()
        st.gpr[:] = vals[:_GPRS]
        rflags = vals[_GPRS]
        st.rflags_base = rflags
        st.flags[0] = fl.raw(rflags)
        if self.legacy_sse:
            self._xregs.read()
        self._entries += 1
        nxt = self._execute(address)
        out = regs.values
        out[:_GPRS] = st.gpr
        out[_GPRS] = fl.materialize(st.flags[0], rflags)
        regs.write()
        set_rip(handle, nxt)
        if self.legacy_sse:
            self._xregs.write()

    def _execute(self, address: int) -> int:
        """Run blocks from ``address`` until an instruction for Unicorn; returns its address."""
        cache = self.cache
        blocks = cache.blocks
        limit, deadline = self._limit, self._deadline
        counted = self._counted
        clock = time.perf_counter
        addr = address
        try:
            while True:
                block = blocks.get(addr, _MISSING)
                if block is _MISSING:
                    block = cache.block(addr)
                if block is None:
                    break
                block.fn()
                block.hits += 1
                counted += block.n
                addr = block.branch() if block.branch is not None else block.exit
                if counted > limit:
                    raise self._limit_fault(False)
                if clock() > deadline:
                    self._counted = counted
                    self._tick()  # the wall-time limit, or a heartbeat
                    deadline = self._deadline
        except GuestFault as fault:
            self._counted = counted
            if fault.kind == "limit":
                raise self._fault(fault, addr) from None
            insn = block.faulting_insn(fault.__traceback__)
            raise self._fault(fault, insn.address) from None
        self._counted = counted
        return addr

    def _tick(self) -> None:
        """Past :attr:`_deadline`: raise the wall-time limit, or report a heartbeat
        (:attr:`heartbeat`, every ``heartbeat_seconds``) and move the deadline to the next one."""
        now = time.perf_counter()
        if now >= self._wall_deadline:
            raise self._limit_fault(True)
        if self.heartbeat is not None:
            self.heartbeat(self._counted, now - self._started)
        self._deadline = min(self._wall_deadline, now + self.heartbeat_seconds)

    # --- errors and statistics -------------------------------------------------------------------
    def _limit_fault(self, wall_time: bool) -> GuestFault:
        """The fault of the call's wall-time or instruction limit (checked after each block, so a
        call stops within one block of ``max_instructions``)."""
        if wall_time:
            return GuestFault("limit", f"wall-time limit of {self._timeout:g} s reached")
        return GuestFault("limit", f"instruction limit of {self._limit:,} reached")

    def _fault(self, fault: GuestFault, rip: int,
               registers: Mapping[str, int] | None = None) -> SimulationError:
        try:
            text = self.cache.insn(rip).text
        except GuestFault:
            text = "?"
        return SimulationError(fault.kind, fault.message, rip=rip, instruction=text,
                               registers=self.st.registers() if registers is None else registers,
                               address=fault.address)

    def _unicorn_registers(self) -> dict[str, int]:
        return {name: self.uc.reg_read(rid) for name, rid in zip(GPR_NAMES, GPR_IDS, strict=True)}

    def _unicorn_error(self, exc: unicorn.UcError) -> SimulationError:
        rip = self.uc.reg_read(X.UC_X86_REG_RIP)
        regs = self._unicorn_registers()
        if self._bad_access is not None and _UC_ERROR_KIND.get(exc.errno) == "memory":
            access, address, size = self._bad_access
            fault = GuestFault("memory", self.mem.describe(address, size, _ACCESS[access]), address)
            return self._fault(fault, rip, regs)
        try:
            insn = self.cache.insn(rip)
            text = insn.text
            if text.startswith(("div", "idiv")) and exc.errno == unicorn.UC_ERR_EXCEPTION:
                return SimulationError("de", "division error (#DE)", rip=rip, instruction=text,
                                       registers=regs)
        except GuestFault:
            text = "?"
        kind = _UC_ERROR_KIND.get(exc.errno, "unicorn")
        return SimulationError(kind, str(exc), rip=rip, instruction=text, registers=regs)

    def _collect(self, elapsed: float, memory_stats: bool) -> None:
        s = Stats(wall_seconds=elapsed, python_entries=self._entries,
                  scalar_memory_counted=memory_stats or self.st.trace is not None)
        counts: Counter = Counter()
        scalar_read, scalar_written = self._scalar_mem
        for block in self.cache.counted_blocks():
            if block.hits:
                s.python_instructions += block.hits * len(block.insns)
                for insn in block.insns:
                    counts[insn.address] += block.hits
                    if insn.cls == SCALAR:  # Python-executed scalar traffic is static per insn
                        scalar_read += block.hits * insn.bytes_read
                        scalar_written += block.hits * insn.bytes_written
        for ub in self._ublocks.values():
            if ub.hits:
                s.unicorn_instructions += ub.hits * len(ub.insns)
                for insn in ub.insns:
                    counts[insn.address] += ub.hits
        for addr, n in counts.items():
            insn = self.cache.insn(addr)
            s.by_mnemonic[insn.mnemonic] += n
            s.by_class[insn.cls] += n
            if insn.cls == TSAR:
                s.tsar_uops += n * insn.uops
            if insn.cls in (VECTOR, TSAR):
                s.vector_bytes_read += n * insn.bytes_read
                s.vector_bytes_written += n * insn.bytes_written
        s.scalar_bytes_read, s.scalar_bytes_written = scalar_read, scalar_written
        s.per_address = counts
        s.instructions = sum(counts.values())
        self.stats = s
        if self.st.trace is not None:
            self.trace = MemoryTrace.from_list(self.st.trace)


def _legacy_sse(insn: Insn) -> bool:
    """Whether a scalar-class (legacy-encoded) instruction names an xmm register."""
    return insn.mnemonic != "(bad)" and "xmm" in insn.text


def _array_label(index: int, arr: np.ndarray) -> str:
    """``arg 2 (i8[16x2560])``: an array argument in fault messages."""
    kind = {"i": "i", "u": "u", "f": "f"}.get(arr.dtype.kind)
    dtype = f"{kind}{8 * arr.dtype.itemsize}" if kind else arr.dtype.name
    return f"arg {index} ({dtype}[{'x'.join(map(str, arr.shape))}])"
