"""Times of kernels on this host, measured alternately so that neighbours do not bias one kernel.

A *timer* is a callable ``timer(calls) -> seconds of each call`` (wall time of single calls).
:func:`interleaved` runs every timer for ``calls`` calls per round, round after round, the order
rotated each round: a disturbance (another process on the machine) lasting a while falls on every
kernel rather than on a whole case. :class:`Measured` summarises one timer: per round the fastest
call, the median of those over the rounds, and their spread ((max - min) / median). The core
clock and the read bandwidths measured in the same rounds are summarised the same way.

Timers:

* :func:`proxy_timer`: a T-SAR kernel through the proxy engine (:mod:`tsar.sim.proxy_engine`), the whole
  BitLinear call (quantize, T-SAR core, dequantize) of the generated kernel, timed from Python
  around each ctypes call, the ctypes cost of an empty call (:func:`call_overhead`) subtracted;
* :func:`native_timer`: a native baseline (:mod:`tsar.kernels.baselines`), the whole BitLinear
  call (quantize and dequantize included), timed in C around each call.
"""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tsar.sim.platforms import Platform

Timer = Callable[[int], Sequence[float]]


@dataclass(frozen=True)
class Measured:
    """One kernel's measured time (seconds): per round its fastest call (the least disturbed by
    other processes; a long call on a shared machine is rarely undisturbed), the median of those
    over the rounds; ``spread``: (max - min) / median of the per-round fastest calls."""

    seconds: float
    spread: float
    rounds: int
    calls: int             # timed calls in all
    median: float = 0.0    # median of the round medians, for reference

    @classmethod
    def of(cls, rounds: Sequence[Sequence[float]]) -> Measured:
        best = np.array([min(r) for r in rounds])
        mid = float(np.median(best))
        return cls(mid, float((best.max() - best.min()) / mid), len(rounds), sum(len(r) for r in rounds),
                   float(np.median([np.median(r) for r in rounds])))


def interleaved(timers: Mapping[str, Timer], rounds: int, calls: int | Mapping[str, int],
                progress: Callable[[str], None] | None = None) -> dict[str, Measured]:
    """Run every timer for ``calls`` calls (one count for all, or per timer) per round, for
    ``rounds`` rounds, alternating (order rotated each round); each batch starts with one untimed
    call (the previous kernel may have evicted this one's data). The :class:`Measured` of each."""
    names = list(timers)
    count = (lambda n: calls) if isinstance(calls, int) else (lambda n: calls[n])
    samples: dict[str, list[Sequence[float]]] = {n: [] for n in names}
    for r in range(rounds):
        if progress:
            progress(f"measuring round {r + 1}/{rounds} ({len(names)} cases alternating)")
        order = names[r % len(names):] + names[: r % len(names)] if names else []
        for n in order:
            samples[n].append(list(timers[n](count(n) + 1))[1:])
    return {n: Measured.of(samples[n]) for n in names}


def ctypes_timer(fn: Callable, arg_sets: Sequence[tuple], overhead: float = 0.0,
                 keep: object = None) -> Timer:
    """Timer of a ctypes function, rotating through ``arg_sets`` (one per weight copy), minus
    ``overhead`` seconds per call; ``keep``: an object the timer must keep alive (the machine
    whose memory the arguments point into)."""
    state = {"i": 0, "keep": keep}

    def timer(calls: int) -> list[float]:
        out = []
        i = state["i"]
        for _ in range(calls):
            args = arg_sets[i % len(arg_sets)]
            i += 1
            t0 = time.perf_counter_ns()
            fn(*args)
            out.append((time.perf_counter_ns() - t0) * 1e-9 - overhead)
        state["i"] = i
        return out

    return timer


@lru_cache(maxsize=1)
def call_overhead() -> float:
    """Seconds of one ctypes call (from Python, timed as :func:`ctypes_timer` times) of a C entry
    point that returns at once: the simulator library's int2 GEMV with a rejected shape."""
    from tsar.kernels import simbuild

    lib = ctypes.CDLL(str(simbuild.build_sim_library()))
    fn = lib.tsar_sim_int2_gemv
    fn.restype = ctypes.c_int
    a = np.zeros(64, np.uint8)
    p = ctypes.c_void_p(a.ctypes.data)
    timer = ctypes_timer(fn, [(p, 1, 4, p, p)])
    timer(200)
    return min(float(np.median(timer(1000))) for _ in range(3))


def weight_copies(nbytes: int, dram_bytes: float | None) -> int:
    """Copies of ``nbytes`` of weights to rotate through: 1 (cache-resident) or enough to exceed
    ``dram_bytes`` (at least 2)."""
    return 1 if dram_bytes is None else max(2, math.ceil(dram_bytes / nbytes) + 1)


def clock_timer(cycles: int = 400_000, avx512: bool = False):
    """(timer, cycles per call) of a chain of dependent adds (the host probe), or None; with
    ``avx512``, the chain beside heavy 512-bit operations (the clock under the AVX-512 frequency
    license; None on a host without AVX512BW)."""
    from tsar.sim.platforms.detect import cpu_flags
    from tsar.sim.platforms.host_probes import probes

    lib = probes(True)
    if lib is None or (avx512 and "avx512bw" not in cpu_flags()):
        return None
    chain = lib[1].tsar_chain512 if avx512 else lib[1].tsar_chain
    n = cycles // 8

    def timer(calls: int) -> list[float]:
        out = []
        for _ in range(calls):
            t0 = time.perf_counter()
            chain(n)
            out.append(time.perf_counter() - t0)
        return out

    return timer, 8 * n


def clock_timers(key: str = "clock") -> tuple[dict[str, Timer], tuple[Timer, int] | None]:
    """The clock probes to measure beside the kernels, keyed as :func:`with_measured` reads them:
    ``key`` (the add chain) and ``key + "512"`` (the chain beside heavy 512-bit code, on a host
    with AVX512BW); and the add chain's (timer, cycles per call), None without the probe."""
    clock = clock_timer()
    if clock is None:
        return {}, None
    timers = {key: clock[0]}
    clock512 = clock_timer(avx512=True)
    if clock512 is not None:
        timers[f"{key}512"] = clock512[0]
    return timers, clock


def with_clock(platform: Platform, ghz: float) -> Platform:
    """``platform`` at clock ``ghz``: cache bandwidths (bytes/cycle) rescaled so that the measured
    bytes/second are kept; DRAM bandwidths are in GB/s already."""
    k = platform.core.frequency_ghz / ghz
    caches = tuple(replace(c, bandwidth=c.bandwidth * k,
                           shared_bandwidth=None if c.shared_bandwidth is None else c.shared_bandwidth * k)
                   for c in platform.caches)
    return replace(platform, core=replace(platform.core, frequency_ghz=ghz), caches=caches)


def bandwidth_timers(platform: Platform, levels: Sequence[str] | None = None
                     ) -> dict[str, tuple[Timer, int]]:
    """Per memory level (cache names and ``DRAM``, default all): a timer of one single-core
    streaming read (the host probe, :mod:`tsar.sim.platforms.host_probes`) over the buffer
    :func:`~tsar.sim.platforms.detect.probe_buffers` gives that level, and the bytes one call
    reads (cache levels: repeated passes, about 4 MB). Empty without the probe."""
    from tsar.sim.platforms.detect import aligned_buffer, probe_buffers
    from tsar.sim.platforms.host_probes import probes

    lib = probes(True)
    if lib is None:
        return {}
    ffi, c = lib
    out: dict[str, tuple[Timer, int]] = {}
    for name, size in probe_buffers([(c_.name, c_.size) for c_ in platform.caches]).items():
        if levels is not None and name not in levels:
            continue
        size -= size % 256
        buf = aligned_buffer(size)
        reps = 1 if name == "DRAM" else max(1, (4 << 20) // size)
        ptr = ffi.from_buffer(buf)

        def timer(calls: int, buf=buf, ptr=ptr, size=size, reps=reps) -> list[float]:
            times = []
            for _ in range(calls):
                t0 = time.perf_counter()
                c.tsar_read(ptr, size, reps)
                times.append(time.perf_counter() - t0)
            return times

        out[name] = (timer, size * reps)
    return out


def with_measured(platform: Platform, measured: Mapping[str, Measured],
                  clock: tuple[Timer, int] | None, bandwidths: Mapping[str, tuple[Timer, int]],
                  clock_key: str = "clock") -> tuple[Platform, list[str]]:
    """``platform`` at the clock and read bandwidths measured by :func:`clock_timer` (key
    ``clock_key``) and :func:`bandwidth_timers` (keys ``bw:<level>``) in the same rounds as the
    kernels; and a note per figure."""
    from tsar.sim.platforms.detect import with_read_bandwidths

    notes = []
    if clock is not None and clock_key in measured:
        ghz = clock[1] / measured[clock_key].seconds / 1e9
        notes.append(f"core clock measured in the same rounds: {ghz:.3f} GHz (spread "
                     f"{100 * measured[clock_key].spread:.0f} %; before: {platform.core.frequency_ghz:g})")
        platform = with_clock(platform, ghz)
        key512 = f"{clock_key}512"
        if key512 in measured:
            ratio = min(1.0, clock[1] / measured[key512].seconds / 1e9 / ghz)
            spread = 100 * measured[key512].spread
            notes.append(f"clock beside heavy 512-bit code measured in the same rounds: {ratio:.3f} x "
                         f"the clock (the AVX-512 frequency license; spread {spread:.0f} %)")
            platform = replace(platform, core=replace(platform.core, avx512_clock_ratio=ratio))
    gbs = {name: nbytes / measured[f"bw:{name}"].seconds / 1e9 for name, (_, nbytes) in bandwidths.items()
           if f"bw:{name}" in measured}
    if gbs:
        notes.append("single-core read bandwidths measured in the same rounds (GB/s, end to end): "
                     + ", ".join(f"{k} {v:.1f} (spread {100 * measured[f'bw:{k}'].spread:.0f} %)"
                                 for k, v in gbs.items()))
        platform = with_read_bandwidths(platform, gbs)
    return platform, notes


@lru_cache(maxsize=2)
def ternary_weights(M: int, K: int, seed: int = 0) -> np.ndarray:
    """The ``M x K`` ternary int8 weights every kernel of a layer is timed on (read-only; kept for
    the next kernel: drawing them takes about as long as packing them)."""
    w = np.random.default_rng(seed).integers(-1, 2, (M, K), dtype=np.int8)
    w.flags.writeable = False
    return w


class ProxyKernel:
    """A T-SAR kernel loaded in a proxy machine with its data, ready to time (see module doc).

    ``N`` tokens x ``M`` outputs x ``K`` inputs; ``dram_bytes``: rotate through weight copies
    totalling more than this (None: one copy, cache-resident after the first call)."""

    def __init__(self, kernel: str, N: int, M: int, K: int, dram_bytes: float | None = None,
                 seed: int = 0) -> None:
        from tsar.kernels.formats.tsar import pack_weights
        from tsar.kernels.tsar_codegen import function_name
        from tsar.sim import create_machine
        from tsar.simulate.tsar_kernel import plan_for, program_for

        self.kernel, self.N, self.M, self.K = kernel, N, M, K
        plan = plan_for(kernel, M, K)
        rng = np.random.default_rng([seed, 1])
        stream = pack_weights(plan, ternary_weights(M, K, seed))
        self.weight_bytes = int(stream.nbytes)
        copies = weight_copies(stream.nbytes, dram_bytes)
        need = N * (K + M) * 4 + plan.workspace_bytes + copies * stream.nbytes + (1 << 20)
        self.machine = create_machine("proxy", in_process=True, data_size=max(64 << 20, need + (16 << 20)))
        entry = self.machine.load_program(program_for(plan))[function_name(plan)]
        arena = self.machine.data

        def place(a: np.ndarray) -> int:
            addr = arena.alloc(a.nbytes, 64)
            arena.write(addr, np.ascontiguousarray(a).view(np.uint8).reshape(-1))
            return addr

        x = place(rng.standard_normal((N, K)).astype(np.float32))
        y = place(np.zeros((N, M), np.float32))
        work = place(np.zeros(max(64, plan.workspace_bytes), np.uint8))
        scale = place(np.ones(1, np.float32))
        self.arg_sets = [(x, place(stream), y, N, work, scale) for _ in range(copies)]
        self.fn = ctypes.CFUNCTYPE(None, *[ctypes.c_uint64] * 6)(entry)

    def timer(self) -> Timer:
        return ctypes_timer(self.fn, self.arg_sets, call_overhead(), keep=self)


def proxy_timer(kernel: str, N: int, M: int, K: int, dram_bytes: float | None = None) -> Timer:
    """Timer of a T-SAR kernel through the proxy engine (see :class:`ProxyKernel`)."""
    return ProxyKernel(kernel, N, M, K, dram_bytes).timer()


NATIVE_ISA = "avx2"
"""The natives are measured in their AVX2 builds: the code the simulator runs and the model times,
and the vector width of the T-SAR kernels (256 bits)."""


def native_timer(kernel: str, N: int, M: int, K: int, threads: int = 1,
                 dram_bytes: float | None = None, seed: int = 0,
                 isa: str = NATIVE_ISA) -> tuple[Timer, int]:
    """Timer of a native baseline's whole BitLinear call (timed in C per call) and its weight bytes.
    Raises ``ValueError`` when the format's block sizes do not divide the shape."""
    from tsar.kernels.baselines import prepare, time_matmul

    rng = np.random.default_rng([seed, 1])
    base = prepare(kernel, ternary_weights(M, K, seed), 0.5)
    copies = [base] + [base.copy() for _ in range(weight_copies(base.nbytes, dram_bytes) - 1)]
    x = rng.standard_normal((N, K), dtype=np.float32)
    state = {"i": 0}

    def timer(calls: int) -> list[float]:
        # rotate the copy list so that consecutive rounds continue the rotation
        i = state["i"] % len(copies)
        state["i"] += calls
        return list(time_matmul(copies[i:] + copies[:i], x, threads, isa, calls))

    return timer, int(base.nbytes)


__all__ = [
    "NATIVE_ISA",
    "Measured",
    "ProxyKernel",
    "Timer",
    "call_overhead",
    "clock_timer",
    "clock_timers",
    "ctypes_timer",
    "interleaved",
    "native_timer",
    "proxy_timer",
    "ternary_weights",
    "weight_copies",
    "with_clock",
]
