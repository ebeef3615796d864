"""Validation of the timing model against native code measured on this host.

For each native AVX2 integer GEMV core of the simulator library (:mod:`tsar.kernels.simbuild`:
TL2, TL1, I2_S, int2) and each shape, the *same shared object* is

1. simulated once (one token, execution counts per address) and its time predicted with
   :func:`tsar.sim.timing.predict.predict` on the measured host platform (:func:`tsar.sim.platforms.host`),
2. run natively through ctypes: batches of calls, the median per batch, the smallest batch
   median kept (the machine is shared: the least disturbed batch is the best estimate of the
   undisturbed time).

Two variants per shape: **cache** (the same weights every call: after the first call they live in
the caches; the model places them by capacity) and **DRAM** (calls rotate through copies of the
weights totalling more than twice the last-level cache). The model's data (activations, tables,
outputs, stack) and, in the cache variant, the weights are placed by an LRU simulation of the
traced call (:func:`tsar.sim.timing.predict.cache_traffic`, warm caches); in the DRAM variant the
weights' lines are evicted before the counted pass, so they come from DRAM.

**T-SAR kernels** (``TSAR_KERNELS``) are validated the same way through the proxy engine
(:mod:`tsar.sim.proxy`): modelled by :func:`tsar.layer_time.modelled` from their simulated counts
(the estimator ``compare`` uses; DRAM variant: a weight footprint of twice the last-level cache),
measured by running their proxy code on the host with the same harness as the natives.

Every measured time carries its spread: (max - min) / min of the batch medians.

Nothing is fitted per kernel: the platform's clock and bandwidths are the host measurements.
"""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tsar.console import Steps
from tsar.frames import Tabular
from tsar.kernels.registry import NATIVE_KERNELS, SIMULATED
from tsar.sim.timing.predict import Prediction, cache_traffic, predict

if TYPE_CHECKING:
    from tsar.sim.platforms import Platform

KERNELS = SIMULATED
FULL_SHAPES = ((2560, 2560), (6912, 2560), (2560, 6912))
"""(M, K): outputs x inputs, one token: BitNet-2B's QKV/O, gate/up and down projections."""
TSAR_KERNELS = ("tsar-c2s4-op", "tsar-c4s4-op", "tsar-c2s4-ap-min")
"""T-SAR kernels validated through the proxy engine."""
TINY_SHAPES = ((64, 384),)


@dataclass(frozen=True)
class Case:
    """One validated case: predicted vs measured seconds of one call."""

    kernel: str
    M: int
    K: int
    variant: str            # "cache" or "DRAM"
    weight_bytes: int
    predicted: float        # seconds
    measured: float         # seconds
    prediction: Prediction | None = field(repr=False)
    spread: float = 0.0     # (max - min) / min of the measured batch medians
    bound: str = ""

    @property
    def family(self) -> str:
        """Kernel family for the bias summary: the native kernel, or ``tsar-<config>``."""
        if self.kernel.startswith("tsar-"):
            from tsar.kernels.tsar_plan import parse_kernel_name

            return f"tsar-{parse_kernel_name(self.kernel)[0].name}"
        return self.kernel

    @property
    def error(self) -> float:
        """Signed relative error (predicted - measured) / measured."""
        return (self.predicted - self.measured) / self.measured


@dataclass(frozen=True)
class Validation(Tabular):
    cases: tuple[Case, ...]
    platform: str
    frequency_ghz: float
    notes: tuple[str, ...] = ()

    @property
    def mape(self) -> float:
        """Mean absolute percentage error over all cases (percent)."""
        return 100.0 * sum(abs(c.error) for c in self.cases) / len(self.cases) if self.cases else math.nan

    def mape_of(self, variant: str) -> float:
        """MAPE (percent) over the cases of one variant ("cache" or "DRAM")."""
        errs = [abs(c.error) for c in self.cases if c.variant == variant]
        return 100.0 * sum(errs) / len(errs) if errs else math.nan

    def bias(self) -> dict[str, float]:
        """Mean signed error (percent) per kernel family."""
        fams: dict[str, list[float]] = {}
        for c in self.cases:
            fams.setdefault(c.family, []).append(c.error)
        return {f: 100.0 * sum(e) / len(e) for f, e in fams.items()}

    def family_error(self) -> dict[str, float]:
        """MAPE (percent) per kernel family: the error bar of a modelled time of that family."""
        fams: dict[str, list[float]] = {}
        for c in self.cases:
            fams.setdefault(c.family, []).append(abs(c.error))
        return {f: 100.0 * sum(e) / len(e) for f, e in fams.items()}

    def records(self) -> list[dict]:
        return [{"kernel": c.kernel, "M": c.M, "K": c.K, "variant": c.variant,
                 "weight_bytes": c.weight_bytes, "predicted_s": c.predicted, "measured_s": c.measured,
                 "spread": c.spread, "error": c.error, "bound": c.bound, "platform": self.platform}
                for c in self.cases]

    def table(self) -> str:
        rows = [f"{'kernel':16} {'M x K':>12} {'weights':>8} {'data':>6} {'predicted us':>13} "
                f"{'measured us':>12} {'spread':>7} {'error':>8}  bound"]
        for c in self.cases:
            rows.append(f"{c.kernel:16} {f'{c.M} x {c.K}':>12} {c.weight_bytes / 2**20:6.2f}MB "
                        f"{c.variant:>6} {c.predicted * 1e6:13.1f} {c.measured * 1e6:12.1f} "
                        f"{100 * c.spread:6.1f}% {100 * c.error:+7.1f}%  {c.bound}")
        rows.append("bias by family (mean signed error): " + ", ".join(
            f"{f} {b:+.1f} %" for f, b in self.bias().items()))
        parts = [f"{v} {self.mape_of(v):.1f} %" for v in ("cache", "DRAM")
                 if any(c.variant == v for c in self.cases)]
        rows.append(f"MAPE {self.mape:.1f} % over {len(self.cases)} cases ({', '.join(parts)}; "
                    f"platform {self.platform}, {self.frequency_ghz:g} GHz)")
        return "\n".join(rows)


# --- kernel calls ----------------------------------------------------------------------------------
@dataclass
class _Kernel:
    name: str
    M: int
    K: int
    weights: np.ndarray      # packed bytes
    sim_args: Callable[[np.ndarray], tuple]
    native_args: Callable[[np.ndarray], tuple]
    work_bytes: int
    keep: list = field(default_factory=list)


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def _make(lib: ctypes.CDLL, name: str, M: int, K: int, seed: int = 0) -> _Kernel:
    from tsar.kernels.baselines import aligned_empty
    from tsar.native_sim import pack_native

    rng = np.random.default_rng(seed)
    w = rng.integers(-1, 2, (M, K), dtype=np.int8)
    a = rng.integers(-127, 128, K, dtype=np.int8)
    out = np.zeros(M, np.int32)
    packed = pack_native(name, w)
    if NATIVE_KERNELS[name].blocked:
        size_fn = getattr(lib, f"tsar_sim_{name}_work_size")
        size_fn.restype = ctypes.c_ulong
        work_bytes = int(size_fn(M, K, packed.bm, packed.bk))
        work = aligned_empty(work_bytes + 64)
        bm, bk = packed.bm, packed.bk
        return _Kernel(name, M, K, packed.data,
                       lambda d: (d, M, K, bm, bk, a, np.zeros(work_bytes + 64, np.uint8), out),
                       lambda d: (_ptr(d), M, K, bm, bk, _ptr(a), _ptr(work), _ptr(out)),
                       work_bytes, [a, out, work])
    return _Kernel(name, M, K, packed.data, lambda d: (d, M, K, a, out),
                   lambda d: (_ptr(d), M, K, _ptr(a), _ptr(out)), 0, [a, out])


def _simulate(path: Path, kern: _Kernel):
    from tsar.sim import Machine
    from tsar.sim.elf import load_elf_image

    image = load_elf_image(path.read_bytes(), path.name)
    machine = Machine()
    symbols = machine.load_elf(path)
    fn = f"tsar_sim_{kern.name}_gemv"
    base = symbols[fn] - image.symbols[fn]
    rc = machine.call(fn, *kern.sim_args(kern.weights), returns="i32", memory_stats=True, trace=True)
    weights_at = machine.arguments[0].start  # the guest address of the first array argument
    if rc != 0:
        raise RuntimeError(f"{fn} returned {rc} in the simulator")
    assert machine.trace is not None
    return machine.stats, machine.trace, image.relocated(base), base, weights_at


def _measure(fn: Callable, args_for: Callable[[np.ndarray], tuple], copies: Sequence[np.ndarray],
             calls: int, batches: int) -> tuple[float, float]:
    """Smallest batch median of single-call wall times (seconds), rotating through ``copies``,
    and the spread of the batch medians ((max - min) / min)."""
    arg_sets = [args_for(c) for c in copies]
    for args in arg_sets[: min(len(arg_sets), 4)]:
        fn(*args)  # warm-up
    medians = []
    i = 0
    for _ in range(batches):
        times = []
        for _ in range(calls):
            args = arg_sets[i % len(arg_sets)]
            i += 1
            t0 = time.perf_counter_ns()
            fn(*args)
            times.append(time.perf_counter_ns() - t0)
        medians.append(float(np.median(times)) * 1e-9)
    return min(medians), (max(medians) - min(medians)) / min(medians)


def host_clock_ghz(window_cycles: float = 4e5, trials: int = 300) -> float | None:
    """The core clock (GHz) from many short chains of dependent adds (about ``window_cycles``
    each), the fastest kept: on a shared machine a short window is more likely to run
    undisturbed. None when the native probe is unavailable."""
    from tsar.sim.platforms.detect import measure_frequency_ghz
    from tsar.sim.platforms.native import probes

    lib = probes(True)
    if lib is None:
        return None
    return measure_frequency_ghz(lib[1], iterations=max(1000, int(window_cycles / 8)), trials=trials)


def with_clock(platform: Platform, ghz: float) -> Platform:
    """``platform`` at clock ``ghz``: cache bandwidths (bytes/cycle) rescaled so that the measured
    bytes/second are kept; DRAM bandwidths are in GB/s already."""
    k = platform.core.frequency_ghz / ghz
    caches = tuple(replace(c, bandwidth=c.bandwidth * k,
                           shared_bandwidth=None if c.shared_bandwidth is None else c.shared_bandwidth * k)
                   for c in platform.caches)
    return replace(platform, core=replace(platform.core, frequency_ghz=ghz), caches=caches)


def call_overhead(lib: ctypes.CDLL, calls: int = 2000) -> float:
    """Seconds of one ctypes call of an entry point that returns at once (int2 with M = 1 fails
    its shape check): the harness cost subtracted from every native measurement."""
    a = np.zeros(64, np.uint8)
    fn = lib.tsar_sim_int2_gemv
    fn.restype = ctypes.c_int
    return _measure(fn, lambda d: (_ptr(d), 1, 4, _ptr(a), _ptr(a)), [a], calls, 3)[0]


def _proxy_cases(kernel: str, M: int, K: int, platform: Platform, llc: int, dram: bool,
                 calls: int, batches: int, overhead: float) -> list[Case]:
    """A T-SAR kernel modelled (:func:`tsar.layer_time.modelled`) and proxy-measured on the host."""
    from tsar.kernel_sim import plan_for, program_for
    from tsar.kernels.formats.tsar import pack_weights
    from tsar.kernels.tsar_codegen import function_name
    from tsar.layer_time import counts_for, modelled
    from tsar.sim import Machine

    plan = plan_for(kernel, M, K)
    rng = np.random.default_rng(0)
    stream = pack_weights(plan, rng.integers(-1, 2, (M, K), dtype=np.int8))
    counts = counts_for(kernel, 1, M, K)
    machine = Machine(engine="proxy", in_process=True)
    entry = machine.load_program(program_for(plan))[function_name(plan)]
    n = max(2, math.ceil(2 * llc / stream.nbytes) + 1) if dram else 1
    arena = machine.data

    def place(a: np.ndarray) -> int:
        addr = arena.alloc(a.nbytes, 64)
        arena.write(addr, np.ascontiguousarray(a).view(np.uint8).reshape(-1))
        return addr

    x = place(rng.standard_normal(K).astype(np.float32))
    y = place(np.zeros(M, np.float32))
    work = place(np.zeros(max(64, plan.workspace_bytes), np.uint8))
    scale = place(np.ones(1, np.float32))
    weights = [place(stream) for _ in range(n)]
    fn = ctypes.CFUNCTYPE(None, *[ctypes.c_uint64] * 6)(entry)
    out = []
    variants = [("cache", weights[:1], None)] + ([("DRAM", weights, 2.0 * llc)] if dram else [])
    for variant, copies, footprint in variants:
        seconds, bound = modelled(counts, platform, 1, 1, weight_footprint=footprint)
        measured, spread = _measure(fn, lambda w: (x, w, y, 1, work, scale),
                                    copies, calls, batches)  # type: ignore[arg-type]
        out.append(Case(kernel, M, K, variant, int(stream.nbytes), seconds, measured - overhead,
                        None, spread, bound))
    return out


def validate(kernels: Sequence[str] = KERNELS, shapes: Sequence[tuple[int, int]] = FULL_SHAPES, *,
             tsar_kernels: Sequence[str] = TSAR_KERNELS,
             dram: bool = True, platform=None, calls: int = 60, batches: int = 5,
             progress: Callable[[str], None] | None = None) -> Validation:
    """Predict and measure every kernel x shape (x cache / DRAM); see the module docstring.

    ``platform``: default :func:`tsar.sim.platforms.host` (measured). ``calls`` x ``batches``: native
    calls per case (DRAM cases rotate through the weight copies).
    """
    from tsar.kernels import simbuild

    notes: list[str] = []
    if platform is None:
        from tsar.sim.platforms import host

        platform = host()
        clock = host_clock_ghz()
        if clock is not None and abs(clock / platform.core.frequency_ghz - 1) > 0.02:
            notes.append(f"host clock re-measured with short windows: {clock:.3f} GHz (host() said "
                         f"{platform.core.frequency_ghz:g}); cache bandwidths kept in bytes/s")
            platform = with_clock(platform, clock)
    path = simbuild.build_sim_library()
    lib = ctypes.CDLL(str(path))
    llc = max(c.size for c in platform.caches)
    overhead = call_overhead(lib)
    cases: list[Case] = []
    step = Steps(len(shapes) * (len(kernels) * (2 + dram) + len(tsar_kernels)),
                 progress or (lambda _m: None))
    for M, K in shapes:
        for name in kernels:
            kern = _make(lib, name, M, K)
            fn = getattr(lib, f"tsar_sim_{name}_gemv")
            fn.restype = ctypes.c_int
            step(f"{platform.name}: simulating {name} {M} x {K}")
            stats, trace, code, base, w_at = _simulate(path, kern)
            wbytes = int(kern.weights.nbytes)
            variants: list[tuple[str, list[np.ndarray], list[tuple[int, int]]]] = [
                ("cache", [kern.weights], [])]
            if dram:
                n = max(2, math.ceil(2 * llc / wbytes) + 1)
                variants.append(("DRAM", [kern.weights.copy() for _ in range(n)], [(w_at, w_at + wbytes)]))
            for variant, copies, cold in variants:
                streams = cache_traffic(trace, platform, cold=cold)
                pred = predict(stats, code, base, platform, streams=streams)
                step(f"{platform.name}: measuring {name} {M} x {K} ({variant})")
                measured, spread = _measure(fn, kern.native_args, copies, calls, batches)
                cases.append(Case(name, M, K, variant, wbytes, pred.seconds, measured - overhead, pred,
                                  spread, pred.bound))
        for name in tsar_kernels:
            step(f"{platform.name}: proxy-measuring {name} {M} x {K}")
            cases += _proxy_cases(name, M, K, platform, llc, dram, calls, batches, overhead)
    return Validation(tuple(cases), platform.name, platform.core.frequency_ghz,
                      (*notes, f"native times exclude the ctypes call overhead, {overhead * 1e6:.2f} us "
                       "(same entry point, rejected shape: returns at once)",))


__all__ = ["FULL_SHAPES", "KERNELS", "TINY_SHAPES", "TSAR_KERNELS", "Case", "Validation", "validate"]
