"""Timed native loops: machine code that runs an unrolled body ``iterations`` times between two
``rdtsc`` reads, and an in-process runner for it (call it inside a forked child: a faulting body
kills the process that runs it; :mod:`tsar.sim.uarch.forked`).

A program is ``uint64_t run(uint8_t *state, uint64_t iterations)``; it returns the elapsed
time-stamp-counter ticks of the loop. Before the first ``rdtsc`` it loads MXCSR, the vector and
opmask registers (:mod:`tsar.sim.vector_spill`'s image), and afterwards the harness GPRs
(:data:`tsar.sim.x86.forms.GPR64`) from ``state`` (layout: :class:`StateLayout`); ``rdx`` points at
a 64-byte-aligned buffer of :data:`BUFFER_BYTES` inside ``state``, the memory operands' base. The
loop counter is ``r15`` (``dec r15; jnz``); ``r12``-``r14`` and ``rbp`` belong to the harness.
The loop start is 64-byte aligned.
"""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Collection
from dataclasses import dataclass
from functools import cache

import numpy as np

from tsar.isa.assembler import keystone_code
from tsar.sim.vector_spill import HOST_AVX512, IMAGE_BYTES, K_OFFSET, spill_lines
from tsar.sim.x86.forms import GPR64

BUFFER_BYTES = 4096
"""Bytes of the memory operands' buffer (every access of a measured loop stays inside it)."""
MXCSR_DEFAULT = 0x1F80
"""MXCSR at reset: round to nearest, every exception masked, no DAZ/FTZ."""
ALIGN = 64
_TAIL = bytes.fromhex("49ffcf")            # dec r15
_JNZ_REL32 = bytes.fromhex("0f85")         # jnz rel32
_NOPS = {1: "90", 2: "6690", 3: "0f1f00", 4: "0f1f4000", 5: "0f1f440000", 6: "660f1f440000",
         7: "0f1f8000000000", 8: "0f1f840000000000", 9: "660f1f840000000000"}


@dataclass(frozen=True)
class StateLayout:
    """Byte offsets in the state block: register image at 0, the GPRs of ``GPR64`` (8 bytes
    each), MXCSR (4 bytes), then the memory buffer (64-byte aligned)."""

    gpr: int = IMAGE_BYTES
    mxcsr: int = IMAGE_BYTES + 8 * len(GPR64)
    buffer: int = -(-(IMAGE_BYTES + 8 * len(GPR64) + 4) // 64) * 64

    @property
    def size(self) -> int:
        return self.buffer + BUFFER_BYTES


LAYOUT = StateLayout()


def nops(n: int) -> bytes:
    """``n`` bytes of multi-byte NOPs (the recommended encodings)."""
    out = b""
    while n > 0:
        k = min(n, 9)
        out += bytes.fromhex(_NOPS[k])
        n -= k
    return out


@cache
def _prologue() -> bytes:
    _, load = spill_lines("r14", HOST_AVX512)
    gprs = [f"mov {r.lower()}, qword ptr [r14 + {LAYOUT.gpr + 8 * i}]" for i, r in enumerate(GPR64)]
    return keystone_code("\n".join([
        "push rbx", "push rbp", "push r12", "push r13", "push r14", "push r15",
        "sub rsp, 8", "stmxcsr dword ptr [rsp]",
        "mov r14, rdi", "mov r15, rsi",
        f"ldmxcsr dword ptr [r14 + {LAYOUT.mxcsr}]",
        *load,
        "lfence", "rdtsc", "shl rdx, 32", "or rax, rdx", "mov r12, rax", "lfence",
        *gprs,
        f"lea rdx, [r14 + {LAYOUT.buffer}]",
    ]))


@cache
def _epilogue() -> bytes:
    return keystone_code("\n".join([
        "lfence", "rdtsc", "shl rdx, 32", "or rax, rdx", "sub rax, r12",
        "vzeroupper", "ldmxcsr dword ptr [rsp]", "add rsp, 8",
        "pop r15", "pop r14", "pop r13", "pop r12", "pop rbp", "pop rbx", "ret",
    ]))


def program(body: bytes) -> bytes:
    """The machine code of a timed loop around ``body`` (placed at a 64-byte-aligned address)."""
    head = _prologue()
    head += nops(-len(head) % ALIGN)
    rel = -(len(body) + len(_TAIL) + len(_JNZ_REL32) + 4)
    return head + body + _TAIL + _JNZ_REL32 + rel.to_bytes(4, "little", signed=True) + _epilogue()


def loop_offset() -> int:
    """Offset of the loop body in every :func:`program`."""
    head = len(_prologue())
    return head + (-head % ALIGN)


def initial_state(vector_bytes: bytes, gpr_value: int, memory_bytes: bytes | None = None) -> np.ndarray:
    """A state block: every vector register = ``vector_bytes`` repeated (64 bytes per register),
    every opmask register all ones, every harness GPR = ``gpr_value``, MXCSR at its default and
    the buffer filled with ``memory_bytes`` (default: the vector pattern)."""
    state = np.zeros(LAYOUT.size, np.uint8)
    reg = np.frombuffer((vector_bytes * (64 // len(vector_bytes) + 1))[:64], np.uint8)
    state[:K_OFFSET] = np.tile(reg, K_OFFSET // 64)
    state[K_OFFSET:IMAGE_BYTES] = 0xFF
    state[LAYOUT.gpr:LAYOUT.gpr + 8 * len(GPR64)].view(np.uint64)[:] = gpr_value
    state[LAYOUT.mxcsr:LAYOUT.mxcsr + 4].view(np.uint32)[0] = MXCSR_DEFAULT
    fill = memory_bytes or vector_bytes
    state[LAYOUT.buffer:] = np.frombuffer((fill * (BUFFER_BYTES // len(fill) + 1))[:BUFFER_BYTES], np.uint8)
    return state


class LoopRunner:
    """Runs :func:`program` code in this process: one executable mapping with a slot per program
    and one 64-byte-aligned state block. Only for a child process (see the module docstring)."""

    def __init__(self, slots: int = 16, slot_bytes: int = 1 << 16) -> None:
        self.slot_bytes = slot_bytes
        self._map = mmap.mmap(-1, slots * slot_bytes,
                              prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        self._base = ctypes.addressof(ctypes.c_char.from_buffer(self._map))
        self._slots = slots
        raw = np.zeros(LAYOUT.size + 64, np.uint8)
        self._raw = raw
        off = (-raw.ctypes.data) % 64
        self.state = raw[off:off + LAYOUT.size]
        self._funcs: list[ctypes._CFuncPtr | None] = [None] * slots
        self._proto = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64)

    def load(self, slot: int, code: bytes) -> None:
        """Place ``code`` in slot ``slot``."""
        if not 0 <= slot < self._slots or len(code) > self.slot_bytes:
            raise ValueError(f"program of {len(code)} bytes does not fit slot {slot}")
        start = slot * self.slot_bytes
        self._map[start:start + len(code)] = code
        self._funcs[slot] = self._proto(self._base + start)

    def set_state(self, state: np.ndarray) -> None:
        self.state[:] = state

    def run(self, slot: int, iterations: int) -> int:
        """Ticks that ``iterations`` iterations of the program in ``slot`` took."""
        func = self._funcs[slot]
        if func is None:
            raise ValueError(f"slot {slot} is empty")
        return int(func(self.state.ctypes.data, iterations))


CLOCK = "clock"
"""Name of the calibration body in :class:`LoopTimes`: a chain of 1-cycle ``add rax, rcx``
(register-register: recent Intel cores fold adds of an immediate at rename)."""
ADD_CHAIN = bytes.fromhex("4801c8")
CLOCK512 = "clock512"
"""Name of the calibration body of 512-bit code: the :data:`CLOCK` chain beside two independent
``vpmaddwd zmm`` per eight links (10 instructions, 8 cycles), so that its cycles are those of the
clock the core runs heavy 512-bit code at (Intel cores lower it: the AVX-512 frequency license;
the timing model applies the same ratio, ``Core.avx512_clock_ratio``, to 512-bit code)."""
_CLOCK512_PERIOD = [ADD_CHAIN] * 4 + [bytes.fromhex("62f17548f5da")] + [ADD_CHAIN] * 4 + \
    [bytes.fromhex("62f17548f5e2")]  # vpmaddwd zmm3 / zmm4, zmm1, zmm2
_CYCLES_PER_INSTRUCTION = {CLOCK: 1.0, CLOCK512: 8 / 10}


@dataclass(frozen=True)
class LoopTimes:
    """Per body, cycles per instruction in each trial; the ticks per core cycle of every
    calibration; the attempts run again for an unsteady clock."""

    cycles: dict[str, list[float]]
    ticks_per_cycle: list[float]
    unsteady: int = 0


def _per_instruction(runner: LoopRunner, slot: int, added: int, iterations: int, best_of: int) -> float:
    """Ticks per added instruction: (long loop - short loop) / added instructions, each loop the
    best of ``best_of`` runs (a run the operating system interrupted is slower, never faster)."""
    short = long = 1 << 63
    for _ in range(best_of):  # alternating, so that both see the same conditions
        short = min(short, runner.run(slot, iterations))
        long = min(long, runner.run(slot + 1, iterations))
    return max(long - short, 0) / (iterations * added)


def measure_bodies(runner: LoopRunner, bodies: dict[str, list[bytes]], state: np.ndarray, *,
                   trials: int, target_ticks: int = 100_000, min_unroll: int = 32, best_of: int = 4,
                   steady: float = 0.03, retries: int = 3, wide: Collection[str] = ()) -> LoopTimes:
    """Time each body (a period of instructions, repeated to at least ``min_unroll``
    instructions) in loops unrolled once and twice as far; the difference of the two, divided by
    the instructions it adds, is free of the loop's overhead and of the harness's fixed cost.
    Runs are sized to about ``target_ticks``. In each trial every body runs once, between two
    runs of the :data:`CLOCK` chain (one link = one core cycle); the body's ticks divided by
    their mean are its cycles. Where the two differ by more than ``steady`` (the core's clock, or
    the share of it this process gets, changed meanwhile) the body is run again, up to
    ``retries`` times, and the attempt whose clock drifted least is kept. Bodies named in
    ``wide`` (512-bit code; a CPU with AVX512BW only) are timed against :data:`CLOCK512`."""
    calibrations = {CLOCK: [ADD_CHAIN], **({CLOCK512: _CLOCK512_PERIOD} if wide else {})}
    periods = {**calibrations, **bodies}
    runner.set_state(state)
    slots: dict[str, tuple[int, int]] = {}
    for i, (name, period) in enumerate(periods.items()):
        reps = -(-min_unroll // len(period))
        unit = b"".join(period)
        runner.load(2 * i, program(unit * reps))
        runner.load(2 * i + 1, program(unit * 2 * reps))
        slots[name] = (2 * i, reps * len(period))
    iterations = {}
    for name, (slot, _) in slots.items():
        runner.run(slot + 1, 4)
        ticks = max(1, min(runner.run(slot + 1, 16) for _ in range(2)))
        iterations[name] = int(min(max(target_ticks * 16 / ticks, 8), 1 << 22))

    def timed(name: str) -> float:
        slot, added = slots[name]
        return _per_instruction(runner, slot, added, iterations[name], best_of)

    def cycle(name: str) -> float:
        """Ticks per core cycle from a calibration body."""
        return timed(name) / _CYCLES_PER_INSTRUCTION[name]

    cycles: dict[str, list[float]] = {name: [] for name in bodies}
    clocks: list[float] = []
    unsteady = 0
    for _ in range(trials):
        last = {name: cycle(name) for name in calibrations}
        clocks.append(last[CLOCK])
        for name in bodies:
            calibration = CLOCK512 if name in wide else CLOCK
            before = last[calibration]
            best = (float("inf"), float("nan"))  # (clock drift, value) of the steadiest attempt
            for _ in range(1 + retries):
                ticks = timed(name)
                after = cycle(calibration)
                if calibration == CLOCK:
                    clocks.append(after)
                drift = abs(after - before) / max(min(after, before), 1e-12)
                if after > 0 and drift < best[0]:
                    best = (drift, ticks / ((before + after) / 2))
                before = after
                if drift <= steady:
                    break
                unsteady += 1
            last[calibration] = before
            cycles[name].append(best[1])
    return LoopTimes(cycles, clocks, unsteady)


def tsc_hz(runner: LoopRunner, seconds: float = 0.02) -> float:
    """The time-stamp counter's rate (ticks per second), from a run of about ``seconds``."""
    import time

    runner.load(0, program(ADD_CHAIN * 64))
    runner.run(0, 1000)
    start = time.perf_counter()
    ticks = runner.run(0, 1000)
    n = max(1000, int(1000 * seconds / max(time.perf_counter() - start, 1e-6)))
    start = time.perf_counter()
    ticks = runner.run(0, n)
    return ticks / (time.perf_counter() - start)
