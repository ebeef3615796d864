"""The native engine: x86-64 + AVX2 (+ AVX-512) + T-SAR code executed by the host CPU itself.

Code is loaded into an executable arena; every T-SAR instruction is rewritten into a jump to a
stub (:mod:`tsar.sim.native_engine.rewrite`) that runs the configuration's C helper
(:mod:`tsar.sim.native_engine.tsar_stubs`, bit-exact with the golden semantics) on an image of the vector
registers. Everything else runs at native speed. By default calls execute in a contained worker
process (:mod:`tsar.sim.native_engine.worker`: forked, the arenas shared memory, the code
read-only, every system call but reads and writes of its own pipes refused by a seccomp filter),
so a guest fault or system call becomes a :class:`SimulationError` naming the guest RIP and
instruction instead of killing the caller or reaching the host. The system calls the load-time
decode finds (:data:`~tsar.sim.errors.SYSTEM_CALL_MNEMONICS`) are rewritten into ``ud2`` and
reported as system calls when reached. ``in_process=True`` runs calls in the calling process
(faster per call; a fault kills it): **for trusted code only**, since nothing contains it there;
code with a system call the decode finds is refused when loaded.

Implements :class:`tsar.sim.engine.Machine`, as the Python engine does. Statistics are cheap ones: calls,
wall time, T-SAR instructions executed per site. Limits: x86-64 hosts with AVX2 only, and
AVX-512 F/BW for the 512-bit (EVEX, zmm) configurations (refused when loaded elsewhere); no
instruction counts, memory traces or guard regions (the Python engine has them).
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import signal
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tsar.isa.assembler import Program, assemble
from tsar.isa.config import TsarConfig
from tsar.isa.stream import decode_one, decode_stream
from tsar.sim.elf import load_elf_image
from tsar.sim.engine import call_options, engine_options, refuse_options
from tsar.sim.errors import SYSTEM_CALL_MNEMONICS, SimulationError, system_call_error
from tsar.sim.native_engine.faults import AUDIT_ARCH_X86_64, FAULT_EXIT, GPR_WORDS, RECORD_WORDS, SIGNALS
from tsar.sim.native_engine.rewrite import Site, assemble_stub, patch, refusal_patch
from tsar.sim.native_engine.worker import Arguments, Worker, WorkerEnded, library
from tsar.sim.vector_spill import HOST_AVX512, IMAGE_BYTES
from tsar.sim.x86.decode import mnemonic
from tsar.sim.x86.state import GPR_NAMES, MASK64

PAGE = 4096
_RETURNS = {"i64": ctypes.c_int64, "u64": ctypes.c_uint64, "i32": ctypes.c_int32,
            "u32": ctypes.c_uint32, "f32": ctypes.c_float, "f64": ctypes.c_double, "none": None}


def _round_up(value: int, align: int) -> int:
    return (value + align - 1) // align * align


@dataclass
class NativeStats:
    """Cheap statistics of the last call: wall time and T-SAR executions per site address."""

    calls: int = 0
    wall_seconds: float = 0.0
    tsar_per_site: dict[int, int] = field(default_factory=dict)
    call_seconds: float = 0.0
    """``wall_seconds``: the native function alone; ``call_seconds``: the whole call (argument
    copies and the worker round trip included)."""

    @property
    def tsar_instructions(self) -> int:
        return sum(self.tsar_per_site.values())

    def summary(self) -> str:
        return (f"{self.calls} call(s), {self.wall_seconds * 1e3:.3f} ms, "
                f"{self.tsar_instructions:,} T-SAR instructions at {len(self.tsar_per_site)} sites")


class _Arena:
    """A shared, executable mapping with a bump allocator (visible to a forked worker)."""

    def __init__(self, size: int, executable: bool) -> None:
        prot = mmap.PROT_READ | mmap.PROT_WRITE | (mmap.PROT_EXEC if executable else 0)
        self.map = mmap.mmap(-1, size, flags=mmap.MAP_SHARED, prot=prot)
        self.buf = np.frombuffer(self.map, np.uint8)
        self.base = self.buf.ctypes.data
        self.size, self.top = size, 0

    def alloc(self, nbytes: int, align: int = 64) -> int:
        start = _round_up(self.top, align)
        if start + nbytes > self.size:
            raise SimulationError("memory", f"native arena full ({self.size >> 20} MiB)")
        self.top = start + nbytes
        return self.base + start

    def write(self, address: int, data: bytes | np.ndarray) -> None:
        raw = np.frombuffer(data, np.uint8) if isinstance(data, bytes | bytearray) else data
        off = address - self.base
        self.buf[off:off + raw.size] = raw.reshape(-1)

    def read(self, address: int, nbytes: int) -> np.ndarray:
        off = address - self.base
        return self.buf[off:off + nbytes]

    def contains(self, address: int) -> bool:
        return self.base <= address < self.base + self.size


class NativeMachine:
    """x86-64 + AVX2 + T-SAR at native speed (see the module docstring)."""

    engine = "native"

    def __init__(self, *, code_size: int = 16 << 20, stub_size: int = 8 << 20,
                 data_size: int = 1 << 30, timeout: float = 3600.0, in_process: bool = False,
                 **unsupported: object) -> None:
        refuse_options(self.engine, unsupported, engine_options(self.engine), "creation")
        self.code = _Arena(code_size + stub_size, executable=True)
        self.code_limit = code_size
        self.stub_top = code_size
        self.data = _Arena(data_size, executable=False)
        self.control = _Arena(PAGE * 64, executable=False)  # register image, counters, fault record
        self.image = self.control.alloc(IMAGE_BYTES, 64)
        self.fault_record = self.control.alloc(8 * RECORD_WORDS)
        self.current_site = self.control.alloc(8, 8)  # the site whose helper runs, else 0
        self.timeout, self.in_process = timeout, in_process
        self.symbols: dict[str, int] = {}
        self.sites: dict[int, Site] = {}
        self.refused: dict[int, tuple[int, str]] = {}  # system call -> (length, text); now ud2
        self._stub_of: list[tuple[int, int, int]] = []  # (stub start, stub end, site address)
        self._counter_of: dict[int, int] = {}
        self._helpers: dict[str, tuple[int, int]] = {}
        self._libs: list[ctypes.CDLL] = []
        self.stats = NativeStats()
        self.heartbeat = None  # never called: a native call is not interrupted to report progress
        self._worker: Worker | None = None
        self._loaded_since_fork = True

    # --- loading ---------------------------------------------------------------------------------
    def _alloc_code(self, nbytes: int) -> int:
        addr = self.code.alloc(nbytes, 64)
        if addr + nbytes > self.code.base + self.code_limit:
            raise SimulationError("memory", "native code region full")
        return addr

    def load_code(self, code: bytes, symbols: Mapping[str, int] | None = None,
                  base: int | None = None) -> int:
        """Copy position-independent code into the arena; ``symbols`` are offsets from its start.
        Returns the load address."""
        addr = self._alloc_code(len(code)) if base is None else base
        self.code.write(addr, code)
        self._rewrite(addr, addr + len(code))
        for name, offset in (symbols or {}).items():
            self.symbols[name] = addr + offset
        return addr

    def load_asm(self, source: str, filename: str = "<input>") -> dict[str, int]:
        """Assemble Intel-syntax AVX2 + T-SAR source into the arena; returns its labels."""
        size = len(assemble(source, base=0, filename=filename).code)
        addr = self._alloc_code(size)
        return self._place(assemble(source, base=addr, filename=filename), addr)

    def load_program(self, program: Program) -> dict[str, int]:
        """Load an assembled program (reassembled position-independently at a free address)."""
        addr = self._alloc_code(len(program.code))
        offsets = {k: v - program.base for k, v in program.symbols.items()}
        self.load_code(program.code, offsets, base=addr)
        return {k: addr + v for k, v in offsets.items()}

    def _place(self, program: Program, addr: int) -> dict[str, int]:
        offsets = {k: v - program.base for k, v in program.symbols.items()}
        self.load_code(program.code, offsets, base=addr)
        return {k: addr + v for k, v in offsets.items()}

    def load_elf(self, path: str | Path) -> dict[str, int]:
        """Load a shared object (no libc: undefined symbols are an error); returns its symbols."""
        image = load_elf_image(Path(path).read_bytes(), Path(path).name)
        addr = _round_up(self.code.top, PAGE) + self.code.base
        self.code.top = addr - self.code.base
        addr = self._alloc_code(image.size)
        self.code.write(addr, image.relocated(addr))
        for start, end in image.exec_ranges:
            self._rewrite(addr + start, addr + end)
        for name, offset in image.symbols.items():
            self.symbols[name] = addr + offset
        return {name: addr + off for name, off in image.symbols.items()}

    def address(self, function: str | int) -> int:
        if isinstance(function, int):
            return function
        if function not in self.symbols:
            raise SimulationError("argument", f"no function named '{function}' is loaded")
        return self.symbols[function]

    def _rewrite(self, start: int, end: int) -> None:
        """Rewrite the T-SAR sites of ``[start, end)`` into jumps to stubs and its system calls
        into ``ud2`` (refused when loaded in process)."""
        code = bytes(self.code.read(start, end - start))
        decoded = list(decode_stream(code, base=start))
        calls = [d for d in decoded if d.x86 is not None and mnemonic(d.x86) in SYSTEM_CALL_MNEMONICS]
        if calls and self.in_process:
            raise SimulationError("syscall", "the code makes a system call, and in_process=True runs "
                                  "trusted code only (nothing contains it there); the worker "
                                  "refuses it when reached", rip=calls[0].address,
                                  instruction=calls[0].asm)
        for d in calls:
            self.code.write(d.address, refusal_patch(d.length))
            self.refused[d.address] = (d.length, d.asm)
        sites = [Site(d.address, d.length, d.tsar, d.asm) for d in decoded
                 if d.is_tsar and d.tsar is not None]
        if not sites:
            return
        evex = next((s for s in sites if s.inst.spec.encoding == "evex"), None)
        if evex is not None and not HOST_AVX512:
            raise SimulationError("ud", f"{evex.inst.spec.config.name} is a 512-bit (zmm) configuration "
                                  "and this host lacks AVX-512 F/BW, so its registers cannot live "
                                  "here; run it in the Python engine", rip=evex.address,
                                  instruction=evex.text)
        self._ensure_helpers({s.inst.spec.config for s in sites})
        for site in sites:
            cfg = site.inst.spec.config
            tlut, tgemv = self._helpers[cfg.name]
            helper = tlut if site.inst.spec.kind.name == "TLUT" else tgemv
            counter = self.control.alloc(8, 8)
            at = self.code.base + _round_up(self.stub_top, 16)
            stub = assemble_stub(site, at, helper, self.image, counter, self.current_site)
            if at + len(stub) > self.code.base + self.code.size:
                raise SimulationError("memory", "native stub region full")
            self.code.write(at, stub)
            self.stub_top = at + len(stub) - self.code.base
            self.code.write(site.address, patch(site, at))
            self.sites[site.address] = site
            self._stub_of.append((at, at + len(stub), site.address))
            self._counter_of[site.address] = counter
        self._loaded_since_fork = True

    def _ensure_helpers(self, configs: set[TsarConfig]) -> None:
        from tsar.sim.native_engine.tsar_stubs import build_helpers, helper_symbols

        missing = sorted((c for c in configs if c.name not in self._helpers), key=lambda c: c.name)
        if not missing:
            return
        lib = ctypes.CDLL(str(build_helpers(missing)))
        self._libs.append(lib)
        for cfg in missing:
            names = helper_symbols(cfg)
            self._helpers[cfg.name] = tuple(  # type: ignore[assignment]
                ctypes.cast(getattr(lib, n), ctypes.c_void_p).value for n in names)

    # --- calling ---------------------------------------------------------------------------------
    def call(self, function: str | int, *args: object, returns: str = "i64",
             timeout: float | None = None, **unsupported: object) -> int | float | None:
        """Call ``function`` with System V arguments (as the Python engine's ``call``: numpy
        arrays are copied to 64-byte-aligned memory and back when writeable; ints, float and
        np.float32 scalars); ``returns``: i64, u64, i32, u32, f32, f64 or none."""
        refuse_options(self.engine, unsupported, call_options(self.engine), "call")
        if returns not in _RETURNS:
            raise SimulationError("argument", f"unknown return kind '{returns}' "
                                  f"(expected one of {', '.join(_RETURNS)})")
        entry = self.address(function)
        mark = self.data.top
        buffers: list[tuple[np.ndarray, int]] = []
        spec: list[tuple[str, int | float]] = []
        for arg in args:
            if isinstance(arg, np.ndarray):
                addr = self.data.alloc(arg.nbytes, 64)
                self.data.write(addr, np.ascontiguousarray(arg).view(np.uint8).reshape(-1))
                buffers.append((arg, addr))
                spec.append(("u64", addr))
            elif isinstance(arg, np.float32):
                spec.append(("f32", float(arg)))
            elif isinstance(arg, float):
                spec.append(("f64", arg))
            elif isinstance(arg, int | np.integer):
                spec.append(("u64", int(arg) & MASK64))
            else:
                raise SimulationError("argument", f"unsupported argument type {type(arg).__name__}")
        counters = {site: self.control.read(c, 8).view(np.uint64) for site, c in self._counter_of.items()}
        for view in counters.values():
            view[0] = 0
        start = time.perf_counter()
        try:
            if self.in_process:
                result, seconds = _invoke(entry, spec, returns)
            else:
                result, seconds = self._invoke_worker(entry, spec, returns, timeout or self.timeout)
            for arr, addr in buffers:
                if arr.flags.writeable:
                    arr.reshape(-1).view(np.uint8)[:] = self.data.read(addr, arr.nbytes)
        finally:
            self.data.top = mark
        elapsed = time.perf_counter() - start
        self.stats = NativeStats(1, seconds, {s: int(v[0]) for s, v in counters.items() if v[0]},
                                 elapsed)
        return result

    def _invoke_worker(self, entry: int, spec: list, returns: str, timeout: float):
        arguments = Arguments.place(spec)
        if self._worker is None or self._loaded_since_fork or self._worker.pending():
            self._start_worker()
        try:
            rax, xmm0, seconds = self._worker.call(entry, arguments, returns in ("f32", "f64"), timeout)
        except TimeoutError as exc:
            self.close()
            raise SimulationError("limit", str(exc)) from None
        except WorkerEnded:
            raise self._fault() from None
        except (SimulationError, KeyboardInterrupt):  # a Ctrl-C leaves the guest running: stop it
            self.close()
            raise
        return _returned(returns, rax, xmm0), seconds

    def _start_worker(self) -> None:
        self.close()
        record = self.control.read(self.fault_record, 8 * RECORD_WORDS).view(np.uint64)
        record[:] = 0
        self.control.read(self.current_site, 8)[:] = 0
        library()  # built and loaded before the fork
        self._worker = Worker(self.code.base, self.code.size, self.fault_record)
        self._loaded_since_fork = False

    def _fault(self) -> SimulationError:
        """The guest fault, system call or exit that ended the worker, from the fault record."""
        worker, self._worker = self._worker, None
        code = worker.exit_code() if worker is not None else None
        if worker is not None:
            worker.close()
        record = self.control.read(self.fault_record, 8 * RECORD_WORDS).view(np.uint64).copy()
        if code != FAULT_EXIT or record[0] == 0:
            return SimulationError("native", _ending(code))
        sig, rip, addr = int(record[0]), int(record[1]), int(record[2])
        registers = dict(zip(GPR_NAMES, (int(v) for v in record[GPR_WORDS]), strict=True))
        name = SIGNALS.get(sig, "")
        if name == "SIGSYS":
            site, text = self._call_before(rip)
            return system_call_error(site, text, addr & 0xFFFFFFFF,
                                     compat=addr >> 32 != AUDIT_ARCH_X86_64, registers=registers,
                                     how="stopped by the worker's seccomp filter, which ended the worker")
        if name == "SIGILL" and rip in self.refused:
            return system_call_error(rip, self.refused[rip][1], registers["rax"], registers=registers,
                                     how="replaced by a trap when the code was loaded: it did not execute")
        interrupt = self._interrupt(rip, name)
        if interrupt is not None:  # int n reached at run time: #GP (no gate), or int 3's trap
            at, text = interrupt
            how = "a breakpoint trap on the host" if name == "SIGTRAP" else \
                "no such interrupt gate on the host: #GP"
            return system_call_error(at, text, registers=registers, how=how)
        at = rip - 1 if name == "SIGTRAP" else rip  # after int3, RIP is past it
        entered = self._rewritten_site(at)
        if entered is not None:
            site, text = entered
            return SimulationError("ud", f"execution entered the instruction at {site:#x} ({text}) "
                                   f"{at - site} bytes after its start; the native engine rewrote "
                                   "that instruction, so code that jumps into it cannot run here "
                                   "(the Python engine runs it)", rip=at, registers=registers)
        if name == "SIGTRAP" and self.code.contains(rip - 1) and self.code.read(rip - 1, 1)[0] == 0xCC:
            return SimulationError("trap", "breakpoint (int3)", rip=rip - 1, instruction="int3",
                                   registers=registers)
        rip, text = self._guest_instruction(rip)
        kind = {"SIGSEGV": "memory", "SIGBUS": "memory", "SIGILL": "ud", "SIGFPE": "de"}.get(name, "native")
        what = name or f"signal {sig}"
        if kind == "memory":
            what += f" accessing {addr:#x}"
            if self.code.contains(addr):
                what += " (a write to the code, which is read-only while guest code runs)"
            elif addr == rip:
                what += " (a jump to memory that is not code: data and the stack are not executable)"
        return SimulationError(kind, what, rip=rip, instruction=text, registers=registers,
                               address=addr if kind == "memory" else None)

    def _rewritten_site(self, address: int) -> tuple[int, str] | None:
        """The rewritten T-SAR instruction or system call whose bytes hold ``address`` past its
        first byte (the bytes there are the rewrite's, not the program's)."""
        for start, length, text in (*((s.address, s.length, s.text) for s in self.sites.values()),
                                    *((a, n, t) for a, (n, t) in self.refused.items())):
            if start < address < start + length:
                return start, text
        return None

    def _interrupt(self, rip: int, signal_name: str) -> tuple[int, str] | None:
        """The ``int n`` that raised ``signal_name`` with RIP ``rip``: SIGSEGV at the instruction,
        SIGTRAP after it (``int 3``)."""
        at = rip - 2 if signal_name == "SIGTRAP" else rip if signal_name == "SIGSEGV" else None
        if at is None or not self.code.contains(at):
            return None
        d = decode_one(bytes(self.code.read(at, 2)), 0, at)
        return (at, d.asm) if d.x86 is not None and mnemonic(d.x86) == "int" else None

    def _call_before(self, rip: int) -> tuple[int, str]:
        """The system call that returns to ``rip`` (its address and text), else ``rip``."""
        for length in (2, 3):
            at = rip - length
            if self.code.contains(at):
                d = decode_one(bytes(self.code.read(at, length)), 0, at)
                if d.x86 is not None and d.length == length and mnemonic(d.x86) in SYSTEM_CALL_MNEMONICS:
                    return at, d.asm
        return self._guest_instruction(rip)

    def _guest_instruction(self, rip: int) -> tuple[int, str]:
        """A fault inside a stub is the T-SAR instruction's; else the instruction at ``rip``."""
        for start, end, site in self._stub_of:
            if start <= rip < end:
                return site, self.sites[site].text
        current = int(self.control.read(self.current_site, 8).view(np.uint64)[0])
        if current in self.sites:  # inside the C helper: its operand address was bad
            return current, self.sites[current].text
        if self.code.contains(rip):
            d = decode_one(bytes(self.code.read(rip, 15)), 0, rip)
            return rip, d.asm if d.x86 is not None or d.tsar is not None else "(bad)"
        return rip, "?"

    @property
    def worker_pid(self) -> int | None:
        """The process id of the worker serving calls (None before the first call, after a
        fault and in process)."""
        return self._worker.pid if self._worker is not None else None

    def close(self) -> None:
        """Stop the worker process (a later call starts a new one)."""
        if self._worker is not None:
            self._worker.close()
        self._worker = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            self.close()


def _invoke(entry: int, spec: list[tuple[str, int | float]],
            returns: str) -> tuple[int | float | None, float]:
    """Call the native function; returns its result and its wall time in seconds."""
    types = {"u64": ctypes.c_uint64, "f32": ctypes.c_float, "f64": ctypes.c_double}
    fn = ctypes.CFUNCTYPE(_RETURNS[returns], *(types[t] for t, _ in spec))(entry)
    values = [v for _, v in spec]
    start = time.perf_counter()
    result = fn(*values)
    seconds = time.perf_counter() - start
    if returns in ("f32", "f64"):
        return float(result), seconds
    return (None if returns == "none" else int(result)), seconds


def _returned(returns: str, rax: int, xmm0: int) -> int | float | None:
    """The value of a worker call as ``_invoke`` returns it (ctypes' conversions)."""
    if returns == "none":
        return None
    if returns == "f32":
        return struct.unpack("<f", (xmm0 & 0xFFFFFFFF).to_bytes(4, "little"))[0]
    if returns == "f64":
        return struct.unpack("<d", xmm0.to_bytes(8, "little"))[0]
    bits = 64 if returns.endswith("64") else 32
    value = rax & ((1 << bits) - 1)
    if returns.startswith("i") and value >> (bits - 1):
        value -= 1 << bits
    return value


def _ending(code: int | None) -> str:
    """Why the worker ended when no fault was recorded."""
    if code is None:
        return "the worker process stopped answering"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        why = {"SIGKILL": " (out of memory, or killed from outside)",
               "SIGSYS": " (a system call its seccomp filter refused)"}.get(name, "")
        return f"the worker process was killed by {name}{why}"
    if code == FAULT_EXIT:
        return "the worker process died (its fault record is empty)"
    return f"the guest ended the worker process (exit code {code})"
