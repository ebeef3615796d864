"""Validation of the timing model against code measured on this host.

For each native integer GEMV core of the simulator library (:mod:`tsar.kernels.simbuild`:
TL2, TL1, I2_S, int2, AVX2 rows; and the rows of other ISA levels the registry lists, such as
int2's AVX-512 VNNI rows as ``int2-avx512``, where the host runs them) and each shape, the
*same shared object* is simulated once (one token,
execution counts per address, memory trace) and its time predicted with
:func:`tsar.sim.timing.predict.predict` on the measured host platform
(:func:`tsar.sim.platforms.host`); then it runs natively through ctypes.

Two variants per GEMV shape: **cache** (the same weights every call: after the first call they live
in the caches; the model places them by capacity) and **DRAM** (calls rotate through copies of the
weights totalling more than twice the last-level cache). The model's data (activations, tables,
outputs, stack) and, in the cache variant, the weights are placed by an LRU simulation of the
traced call (:func:`tsar.sim.timing.predict.cache_traffic`, warm caches); in the DRAM variant the
weights' lines are evicted before the counted pass, so they come from DRAM.

**T-SAR kernels** (``TSAR_KERNELS``) are validated the same way through the proxy engine
(:mod:`tsar.sim.proxy_engine`): modelled by :func:`tsar.estimate.layer.modelled` from their simulated counts
(the estimator ``compare`` uses; DRAM variant: a weight footprint of twice the last-level cache),
measured by running their proxy code on the host.

**GEMM** (``GEMM_TOKENS`` = :data:`~tsar.models.PREFILL_TOKENS` = 128 tokens, weights
cache-resident): the natives' token-blocked GEMM entries of the same library and the token-blocked
T-SAR dataflows (``TSAR_GEMM_KERNELS``, through the proxy), both modelled by
:func:`tsar.estimate.layer.modelled` from one simulated block of tokens, as ``compare`` does.

Measurement: every case's calls are timed alternately with all the other cases', round after round
(:func:`tsar.estimate.host.interleaved`), so that a disturbance from other processes falls on every
case rather than on a whole one; a case's time is, per round, its fastest call (the least
disturbed: a 20-40 ms GEMM call is rarely undisturbed on a shared machine), the median of those
over the rounds; its spread (max - min) / median of them. Native times have the ctypes cost of an empty call
subtracted.

Nothing is fitted per kernel: the platform's clock and bandwidths are the host measurements; the
core clock (a chain of dependent adds) and the single-core streaming read bandwidth of every level
(the probe of :func:`tsar.sim.platforms.host`) are measured again *in the same rounds* as the cases
(both vary on a shared machine: 2.7 to 3.7 GHz, 10 to 30 GB/s from DRAM seen here), and the model
uses them (summarised as the kernels are).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tsar.console import Steps
from tsar.frames import Tabular
from tsar.isa.config import PAPER_CONFIGS, WIDE_CONFIGS
from tsar.kernels.registry import (
    NATIVE_KERNELS,
    SIMULATED,
    native_label,
    runs_build,
    sim_entry,
    split_native_label,
)
from tsar.kernels.tsar_plan import KERNEL_PREFIX, kernel_name, parse_kernel_name
from tsar.models import BITNET_2B_LAYERS, PREFILL_TOKENS
from tsar.sim.timing.predict import Prediction, cache_traffic, predict

if TYPE_CHECKING:
    from tsar.sim.platforms import Platform

KERNELS = SIMULATED
FULL_SHAPES = BITNET_2B_LAYERS
"""(M, K): outputs x inputs, one token: BitNet-2B's QKV/O, gate/up and down projections."""
TSAR_KERNELS = tuple(kernel_name(cfg, flow) for flow in ("op", "ap-min") for cfg in PAPER_CONFIGS)
"""T-SAR kernels validated through the proxy engine (``tsar-c2s4-op``, ``tsar-c4s4-op``,
``tsar-c2s4-ap-min``, ``tsar-c4s4-ap-min``)."""
WIDE_TSAR_KERNELS = tuple(kernel_name(cfg, "op") for cfg in WIDE_CONFIGS)
"""The 512-bit configurations' OP kernels, validated through the proxy where the host has AVX-512
(:func:`host_tsar_kernels`)."""
TINY_SHAPES = ((64, 384),)
GEMM_TOKENS = PREFILL_TOKENS
TSAR_GEMM_KERNELS = tuple(kernel_name(cfg, "ap-tokens") for cfg in PAPER_CONFIGS)
"""Token-blocked T-SAR dataflows validated on GEMM through the proxy engine."""
THREAD_KERNELS = ("i2s", "int2")
"""Natives whose multi-thread scaling is validated (``threads``): the fastest AVX2 GEMV and GEMM
cores, measured through the native library's threaded calls (:func:`tsar.estimate.host.native_timer`)."""
THREAD_SHAPE = max(BITNET_2B_LAYERS, key=lambda s: s[0] * s[1])
"""The layer of the thread-scaling cases: BitNet-2B's largest (6912 x 2560, gate and up)."""
OPERATOR_MODEL = "bitnet-b1.58-2b-4t"
"""The model whose other operators of a token are validated (``operators``), at their sizes in it."""
OPERATOR_CONTEXT = 1024
"""Context length of the validated attention."""
DATA = ("cache", "DRAM", "GEMM")
TARGETS = {"cache": 7.0, "overall": 12.0, "isa_speedup": 10.0}
"""The model's accuracy targets on the host (percent): MAPE in cache and over all cases, and each
ISA speedup (an AVX-512 or AVX-VNNI build over its AVX2 build) predicted within this much."""


def host_tsar_kernels(flags: frozenset[str] | set[str]) -> tuple[str, ...]:
    """The T-SAR kernels validate-model times through the proxy on a CPU with ``flags``: the paper's
    configurations', and the 512-bit ones' where it runs them (:meth:`TsarConfig.runs_on`)."""
    return TSAR_KERNELS + tuple(k for k in WIDE_TSAR_KERNELS if parse_kernel_name(k)[0].runs_on(flags))


def host_isas(name: str, flags: frozenset[str] | set[str]) -> tuple[str, ...]:
    """The ISA levels of ``name``'s simulator rows that a CPU with ``flags`` runs natively."""
    return tuple(isa for isa in NATIVE_KERNELS[name].sim_isas if runs_build(name, isa, flags))


def family_of(kernel: str) -> str:
    """Kernel family: the native kernel's name, or ``tsar-<config>`` for every T-SAR dataflow."""
    if kernel.startswith(KERNEL_PREFIX):
        return f"{KERNEL_PREFIX}{parse_kernel_name(kernel)[0].name}"
    return kernel


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
    spread: float = 0.0     # (max - min) / median of the per-round fastest calls
    bound: str = ""
    N: int = 1              # tokens (N > 1: GEMM)
    threads: int = 1

    @property
    def family(self) -> str:
        """Kernel family for the bias summary: the native kernel, or ``tsar-<config>``."""
        return family_of(self.kernel)

    @property
    def data(self) -> str:
        """``cache``, ``DRAM`` or ``GEMM`` (N tokens, weights cache-resident); an operator's
        variant is ``<data>:<size>``."""
        return "GEMM" if self.N > 1 else self.variant.split(":", 1)[0]

    @property
    def error(self) -> float:
        """Signed relative error (predicted - measured) / measured."""
        return (self.predicted - self.measured) / self.measured


@dataclass(frozen=True)
class Validation(Tabular):
    """The single-thread cases (``cases``: the MAPE, targets and error bars) and the thread-scaling
    cases (``scaling``: natives through the threaded library calls, at every thread count asked)."""

    cases: tuple[Case, ...]
    platform: str
    frequency_ghz: float
    notes: tuple[str, ...] = ()
    scaling: tuple[Case, ...] = ()
    operators: tuple[Case, ...] = ()

    def operators_mape(self) -> float:
        """MAPE (percent) of the other operators' cases."""
        errs = [abs(c.error) for c in self.operators]
        return 100.0 * sum(errs) / len(errs) if errs else math.nan

    def thread_speedups(self) -> list[tuple[Case, Case, float, float]]:
        """Per scaling case at more than one thread with a one-thread twin (same kernel, shape and
        data): ``(one-thread case, case, predicted speedup, measured speedup)``."""
        one = {(c.kernel, c.N, c.M, c.K, c.variant): c for c in self.scaling if c.threads == 1}
        return [(twin, c, twin.predicted / c.predicted, twin.measured / c.measured)
                for c in self.scaling if c.threads > 1
                and (twin := one.get((c.kernel, c.N, c.M, c.K, c.variant))) is not None]

    def scaling_mape(self) -> float:
        """MAPE (percent) of the scaling cases' times, every thread count."""
        errs = [abs(c.error) for c in self.scaling]
        return 100.0 * sum(errs) / len(errs) if errs else math.nan

    @property
    def mape(self) -> float:
        """Mean absolute percentage error over all cases (percent)."""
        return 100.0 * sum(abs(c.error) for c in self.cases) / len(self.cases) if self.cases else math.nan

    def mape_of(self, data: str) -> float:
        """MAPE (percent) over the cases of one kind of data ("cache", "DRAM" or "GEMM")."""
        errs = [abs(c.error) for c in self.cases if c.data == data]
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

    def isa_speedups(self) -> list[tuple[Case, Case, float, float]]:
        """Per case of a native's non-AVX2 rows with an AVX2 twin (same kernel, shape and data):
        ``(avx2 case, case, predicted speedup, measured speedup)``, speedup = AVX2 time / time."""
        base = {(c.kernel, c.N, c.M, c.K, c.variant): c for c in self.cases}
        out = []
        for c in self.cases:
            try:
                name, isa = split_native_label(c.kernel)
            except KeyError:  # a T-SAR kernel
                continue
            twin = base.get((name, c.N, c.M, c.K, c.variant)) if isa != "avx2" else None
            if twin is not None:
                out.append((twin, c, twin.predicted / c.predicted, twin.measured / c.measured))
        return out

    def records(self) -> list[dict]:
        return [{"kernel": c.kernel, "N": c.N, "M": c.M, "K": c.K, "variant": c.variant,
                 "threads": c.threads, "weight_bytes": c.weight_bytes, "predicted_s": c.predicted,
                 "measured_s": c.measured, "spread": c.spread, "error": c.error, "bound": c.bound,
                 "platform": self.platform}
                for c in (*self.cases, *self.scaling)]

    def table(self) -> str:
        return "\n".join([*self._single_rows(), *self._scaling_rows(), *self._operator_rows()])

    def _operator_rows(self) -> list[str]:
        if not self.operators:
            return []
        rows = ["", f"the other operators of a token ({OPERATOR_MODEL}'s sizes; the same code the model "
                    "simulates, run natively; data: DRAM = the big data from DRAM)",
                f"{'operator':12} {'size':>28} {'data':>6} {'predicted us':>13} {'measured us':>12} "
                f"{'spread':>7} {'error':>8}  bound"]
        rows += [f"{c.kernel:12} {c.variant.split(':', 1)[1]:>28} {c.data:>6} {c.predicted * 1e6:13.2f} "
                 f"{c.measured * 1e6:12.2f} {100 * c.spread:6.1f}% {100 * c.error:+7.1f}%  {c.bound}"
                 for c in self.operators]
        rows.append(f"operators MAPE {self.operators_mape():.1f} % over {len(self.operators)} cases")
        return rows

    def _single_rows(self) -> list[str]:
        if not self.cases:
            return []
        rows = [f"{'kernel':20} {'N x M x K':>16} {'weights':>8} {'data':>6} {'predicted us':>13} "
                f"{'measured us':>12} {'spread':>7} {'error':>8}  bound"]
        for c in self.cases:
            rows.append(f"{c.kernel:20} {f'{c.N} x {c.M} x {c.K}':>16} {c.weight_bytes / 2**20:6.2f}MB "
                        f"{c.data:>6} {c.predicted * 1e6:13.1f} {c.measured * 1e6:12.1f} "
                        f"{100 * c.spread:6.1f}% {100 * c.error:+7.1f}%  {c.bound}")
        for twin, c, pred, meas in self.isa_speedups():
            rows.append(f"{c.kernel} over {twin.kernel}, {c.M} x {c.K} {c.data}: speedup predicted "
                        f"{pred:.2f}x, measured {meas:.2f}x ({100 * (pred / meas - 1):+.1f} %)")
        rows.append("bias by family (mean signed error): " + ", ".join(
            f"{f} {b:+.1f} %" for f, b in self.bias().items()))
        parts = [f"{v} {self.mape_of(v):.1f} %" for v in DATA if any(c.data == v for c in self.cases)]
        rows.append(f"MAPE {self.mape:.1f} % over {len(self.cases)} cases ({', '.join(parts)}; "
                    f"platform {self.platform}, {self.frequency_ghz:g} GHz)")
        rows.append("targets: " + "; ".join(
            f"{what} {'met' if ok else 'missed'} ({got})" for what, ok, got in self.targets()))
        return rows

    def _scaling_rows(self) -> list[str]:
        rows: list[str] = []
        if self.scaling:
            rows += ["" if self.cases else None,
                     "thread scaling (natives through the library's threaded calls; data: DRAM = GEMV with "
                     "weights from DRAM, GEMM = weights in cache)",
                     f"{'kernel':20} {'N x M x K':>16} {'data':>6} {'threads':>7} {'predicted us':>13} "
                     f"{'measured us':>12} {'spread':>7} {'error':>8}  bound"]
            rows += [f"{c.kernel:20} {f'{c.N} x {c.M} x {c.K}':>16} {c.data:>6} {c.threads:7d} "
                     f"{c.predicted * 1e6:13.1f} {c.measured * 1e6:12.1f} {100 * c.spread:6.1f}% "
                     f"{100 * c.error:+7.1f}%  {c.bound}" for c in self.scaling]
            rows += [f"{c.kernel} {c.data} {c.N} x {c.M} x {c.K}, {c.threads} threads over 1: speedup "
                     f"predicted {pred:.2f}x, measured {meas:.2f}x ({100 * (pred / meas - 1):+.1f} %)"
                     for _, c, pred, meas in self.thread_speedups()]
            rows.append(f"thread scaling MAPE {self.scaling_mape():.1f} % over {len(self.scaling)} cases")
        return [r for r in rows if r is not None]

    def targets(self) -> list[tuple[str, bool, str]]:
        """``(target, met, figure)`` for :data:`TARGETS` (a target without cases is left out)."""
        out = []
        if any(c.data == "cache" for c in self.cases):
            got = self.mape_of("cache")
            out.append((f"in cache <= {TARGETS['cache']:g} %", got <= TARGETS["cache"], f"{got:.1f} %"))
        if self.cases:
            out.append((f"overall <= {TARGETS['overall']:g} %", self.mape <= TARGETS["overall"],
                        f"{self.mape:.1f} %"))
        speedups = self.isa_speedups()
        if speedups:
            within = sum(abs(p / m - 1) * 100 <= TARGETS["isa_speedup"] for _, _, p, m in speedups)
            out.append((f"ISA speedups within {TARGETS['isa_speedup']:g} %", within == len(speedups),
                        f"{within} of {len(speedups)}"))
        return out


# --- kernel calls ----------------------------------------------------------------------------------
@dataclass
class _Kernel:
    name: str
    stem: str                # simulator entry stem: the name, or name_<isa> (registry.sim_entry)
    M: int
    K: int
    weights: np.ndarray      # packed bytes
    sim_args: Callable[[np.ndarray], tuple]
    native_args: Callable[[np.ndarray], tuple]
    work_bytes: int
    keep: list = field(default_factory=list)


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def _make(lib: ctypes.CDLL, name: str, M: int, K: int, seed: int = 0, isa: str = "avx2") -> _Kernel:
    from tsar.kernels.baselines import aligned_empty
    from tsar.simulate.native_kernel import pack_native

    rng = np.random.default_rng(seed)
    w = rng.integers(-1, 2, (M, K), dtype=np.int8)
    a = rng.integers(-127, 128, K, dtype=np.int8)
    out = np.zeros(M, np.int32)
    packed = pack_native(name, w)
    spec = NATIVE_KERNELS[name]
    if spec.gemv_work:  # LUT tables (blocked: takes bm, bk) or one token's prepared activations
        blocks = (packed.bm, packed.bk) if spec.blocked else ()
        size_fn = getattr(lib, f"tsar_sim_{sim_entry(name, isa)}_work_size")
        size_fn.restype = ctypes.c_ulong
        work_bytes = int(size_fn(M, K, *(blocks or (0, 0))))
        work = aligned_empty(work_bytes + 64)
        return _Kernel(name, sim_entry(name, isa), M, K, packed.data,
                       lambda d: (d, M, K, *blocks, a, np.zeros(work_bytes + 64, np.uint8), out),
                       lambda d: (_ptr(d), M, K, *blocks, _ptr(a), _ptr(work), _ptr(out)),
                       work_bytes, [a, out, work])
    return _Kernel(name, sim_entry(name, isa), M, K, packed.data, lambda d: (d, M, K, a, out),
                   lambda d: (_ptr(d), M, K, _ptr(a), _ptr(out)), 0, [a, out])


def _simulate(path: Path, kern: _Kernel):
    from tsar.sim import create_machine
    from tsar.sim.elf import load_elf_image

    image = load_elf_image(path.read_bytes(), path.name)
    machine = create_machine()
    symbols = machine.load_elf(path)
    fn = f"tsar_sim_{kern.stem}_gemv"
    base = symbols[fn] - image.symbols[fn]
    rc = machine.call(fn, *kern.sim_args(kern.weights), returns="i32", memory_stats=True, trace=True)
    weights_at = machine.arguments[0].start  # the guest address of the first array argument
    if rc != 0:
        raise RuntimeError(f"{fn} returned {rc} in the simulator")
    assert machine.trace is not None
    return machine.stats, machine.trace, image.relocated(base), base, weights_at


def _gemm_timer(lib: ctypes.CDLL, name: str, N: int, M: int, K: int, overhead: float, seed: int = 0):
    """Timer of the library's token-blocked GEMM entry (``N`` tokens) and its weight bytes."""
    from tsar.estimate.host import ctypes_timer
    from tsar.kernels.baselines import aligned_empty
    from tsar.simulate.native_kernel import pack_native

    rng = np.random.default_rng(seed)
    packed = pack_native(name, rng.integers(-1, 2, (M, K), dtype=np.int8))
    data = np.concatenate([packed.data.view(np.uint8), np.zeros(NATIVE_KERNELS[name].overread + 64,
                                                                 np.uint8)])
    a = rng.integers(-127, 128, (N, K), dtype=np.int8)
    out = np.zeros((N, M), np.int32)
    blocked = NATIVE_KERNELS[name].blocked
    bm, bk = (packed.bm, packed.bk) if blocked else (0, 0)
    size_fn = getattr(lib, f"tsar_sim_{name}_gemm_work_size")
    size_fn.restype = ctypes.c_ulong
    work = aligned_empty(int(size_fn(M, K, bm, bk, N)) + 64)
    fn = getattr(lib, f"tsar_sim_{name}_gemm")
    fn.restype = ctypes.c_int
    shape = (M, K, bm, bk) if blocked else (M, K)
    args = (_ptr(data), *shape, _ptr(a), N, _ptr(work), _ptr(out))
    if fn(*args) != 0:
        raise RuntimeError(f"tsar_sim_{name}_gemm rejected {N} x {M} x {K}")
    return ctypes_timer(fn, [args], overhead, keep=(data, a, out, work)), int(packed.data.nbytes)


def _modelled(c, n: int, footprint: float | None, threads: int = 1):
    """The model of a counted kernel (:func:`tsar.estimate.layer.modelled`) as a function of the platform."""
    from tsar.estimate.layer import modelled

    def model(plat: Platform) -> tuple[float, str, None]:
        seconds, bound = modelled(c, plat, n, threads, weight_footprint=footprint)
        return seconds, bound, None

    return model


@dataclass
class _Pending:
    """A case modelled, waiting for its measurement."""

    kernel: str
    N: int
    M: int
    K: int
    variant: str
    weight_bytes: int
    model: Callable[[Platform], tuple[float, str, Prediction | None]]  # seconds, bound, details
    timer: Callable
    calls: int
    threads: int = 1


def operator_cases(llc: float) -> list[tuple[str, dict[str, int], float | None]]:
    """``(op, size, footprint)`` of the validated operator calls: every distinct call of a token of
    :data:`OPERATOR_MODEL` at :data:`OPERATOR_CONTEXT` (:func:`tsar.estimate.operators.operator_calls`),
    each measured on its own data (footprint None: in the caches, but for an LM head larger than the
    last-level cache) and the attention also on KV caches that come from DRAM (copies of twice the
    last-level cache)."""
    from tsar.estimate.operators import operator_calls
    from tsar.models import get_model
    out, seen = [], set()
    for op, size, per_token, _, _ in operator_calls(get_model(OPERATOR_MODEL), OPERATOR_CONTEXT):
        key = (op, tuple(sorted(size.items())))
        if not per_token or key in seen:
            continue
        seen.add(key)
        out.append((op, size, None))
        if op == "attention":  # (the LM head is larger than a last-level cache already)
            out.append((op, size, 2.0 * llc))
    return out


def _operator_args(op: str, s: dict[str, int], copies: int, rng: np.random.Generator
                   ) -> tuple[list[tuple], list]:
    """ctypes argument sets (one per copy of the KV cache; one for the other operators) for the
    library's entry of ``op``, and the arrays they point into."""
    c_int, c_float = ctypes.c_int, ctypes.c_float

    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    if op == "embedding":
        table = normal(4, s["n"]).astype(np.float16)
        y = np.zeros(s["n"], np.float32)
        return [(_ptr(table), c_int(1), _ptr(y), c_int(s["n"]))], [table, y]
    if op == "rmsnorm":
        x, w, y = normal(s["n"]), normal(s["n"]), np.zeros(s["n"], np.float32)
        return [(_ptr(x), _ptr(w), _ptr(y), c_int(s["n"]), c_float(1e-5))], [x, w, y]
    if op == "quantize":
        x, q, scale = normal(s["n"]), np.zeros(s["n"], np.int8), np.zeros(1, np.float32)
        return [(_ptr(x), _ptr(q), _ptr(scale), c_int(s["n"]))], [x, q, scale]
    if op == "rope":
        x, cos, sin = normal(s["heads"] * s["hd"]), normal(s["hd"] // 2), normal(s["hd"] // 2)
        return [(_ptr(x), _ptr(cos), _ptr(sin), c_int(s["heads"]), c_int(s["hd"]))], [x, cos, sin]
    if op == "attention":
        heads, kv, hd, ctx = s["heads"], s["kv_heads"], s["hd"], s["ctx"]
        q, kn, vn = normal(heads * hd), normal(kv * hd), normal(kv * hd)
        out, scores = np.zeros(heads * hd, np.float32), np.zeros(ctx, np.float32)
        caches = [(normal(ctx, kv, hd).astype(np.float16), normal(ctx, kv, hd).astype(np.float16))
                  for _ in range(copies)]
        sets = [(_ptr(q), _ptr(kn), _ptr(vn), _ptr(k), _ptr(v), _ptr(out), _ptr(scores), c_int(heads),
                 c_int(kv), c_int(hd), c_int(ctx)) for k, v in caches]
        return sets, [q, kn, vn, out, scores, caches]
    if op == "ffn_act":
        g, u, y = normal(s["n"]), normal(s["n"]), np.zeros(s["n"], np.float32)
        return [(_ptr(g), _ptr(u), _ptr(y), c_int(s["n"]), c_int(s["kind"]))], [g, u, y]
    if op == "lm_head":
        m, k = s["m"], s["k"]
        w = (normal(m, k) * np.float32(0.05)).astype(np.float16)
        x, y = normal(k), np.zeros(m, np.float32)
        return [(_ptr(w), _ptr(x), _ptr(y), c_int(m), c_int(k))], [w, x, y]
    x = normal(s["n"])  # sampling
    return [(_ptr(x), c_int(s["n"]))], [x]


def _operator_pending(lib: ctypes.CDLL, overhead: float, calls: int, llc: float, step: Callable,
                      platform_name: str) -> list[_Pending]:
    """The operator cases, modelled from their simulated counts and timed natively."""
    from tsar.estimate.host import ctypes_timer
    from tsar.sim.timing.predict import predict
    from tsar.simulate.operators import ENTRIES, operator_counts

    step(f"{platform_name}: simulating and modelling the other operators of a token ({OPERATOR_MODEL})")
    rng = np.random.default_rng(0)
    pending = []
    for op, size, footprint in operator_cases(llc):
        counts = operator_counts(op, **size)
        fn = getattr(lib, f"tsar_sim_op_{ENTRIES[op]}")
        fn.restype = ctypes.c_int
        big = counts.resident_bytes
        copies = 1 if footprint is None else max(2, math.ceil(footprint / max(big, 1)) + 1)
        sets, arrays = _operator_args(op, size, copies, rng)

        def model(plat, c=counts, fp=footprint):
            pred = predict(c.stats, c.code, c.code_address, plat, streams=c.data_streams(fp))
            return pred.seconds, pred.bound, pred

        label = ", ".join(f"{k} {v}" for k, v in size.items())
        data = "DRAM" if (footprint or big) > llc else "cache"
        pending.append(_Pending(op, 1, 0, 0, f"{data}:{label}", big, model,
                                ctypes_timer(fn, sets, overhead, keep=arrays), calls))
    return pending


def validate(kernels: Sequence[str] = KERNELS, shapes: Sequence[tuple[int, int]] = FULL_SHAPES, *,
             tsar_kernels: Sequence[str] = TSAR_KERNELS, gemm_kernels: Sequence[str] | None = None,
             tsar_gemm_kernels: Sequence[str] = TSAR_GEMM_KERNELS, gemm_tokens: int = GEMM_TOKENS,
             dram: bool = True, platform=None, calls: int = 20, rounds: int = 7,
             threads: Sequence[int] = (), thread_kernels: Sequence[str] = THREAD_KERNELS,
             thread_shape: tuple[int, int] = THREAD_SHAPE, operators: bool = False,
             progress: Callable[[str], None] | None = None) -> Validation:
    """Model and measure every kernel x shape (x cache / DRAM, and GEMM); see the module docstring.

    ``platform``: default :func:`tsar.sim.platforms.host` (measured). ``calls`` x ``rounds``: timed
    calls per GEMV case (GEMM cases: ``max(1, calls // 10)`` per round). ``gemm_kernels``: natives
    validated on GEMM (default ``kernels``); ``gemm_tokens = 0`` leaves GEMM out. ``threads``: the
    thread counts of the scaling cases (empty: none): each of ``thread_kernels`` (AVX2 builds) on
    ``thread_shape`` as GEMV from DRAM (unless ``dram`` is False) and as GEMM (unless it is left
    out), measured through the native library's threaded calls and modelled at that many threads.
    ``operators``: the other operators of a token (:func:`operator_cases`) too.
    """
    from tsar.estimate.host import (
        ProxyKernel,
        bandwidth_timers,
        call_overhead,
        clock_timers,
        ctypes_timer,
        interleaved,
        with_measured,
    )
    from tsar.estimate.layer import counts_for
    from tsar.kernels import simbuild
    from tsar.sim.platforms.detect import cpu_flags

    notes: list[str] = []
    on_host = platform is None
    if platform is None:
        from tsar.sim.platforms import host

        platform = host()
    gemm_kernels = kernels if gemm_kernels is None else gemm_kernels
    if not gemm_tokens:
        gemm_kernels = tsar_gemm_kernels = ()
    path = simbuild.build_sim_library()
    lib = ctypes.CDLL(str(path))
    llc = max(c.size for c in platform.caches)
    overhead = call_overhead()
    say = progress or (lambda _m: None)
    variants_of = {name: host_isas(name, cpu_flags()) if on_host else ("avx2",) for name in kernels}
    skipped = sorted({f"{native_label(n, i)}" for n in kernels for i in NATIVE_KERNELS[n].sim_isas
                      if i not in variants_of[n]})
    if skipped:
        notes.append(f"not validated: {', '.join(skipped)} (the host lacks the ISA to run it natively)")
    natives = [(name, isa) for name in kernels for isa in variants_of[name]]
    step = Steps(len(shapes) * (len(natives) + len(tsar_kernels) + len(gemm_kernels)
                                + len(tsar_gemm_kernels)) + len(thread_kernels) * bool(threads)
                 + operators + 1, say)
    pending: list[_Pending] = []
    gemm_calls = max(3, calls // 5)
    for M, K in shapes:
        for name, isa in natives:
            label = native_label(name, isa)
            kern = _make(lib, name, M, K, isa=isa)
            fn = getattr(lib, f"tsar_sim_{kern.stem}_gemv")
            fn.restype = ctypes.c_int
            step(f"{platform.name}: simulating and modelling {label} {M} x {K}")
            stats, trace, code, base, w_at = _simulate(path, kern)
            wbytes = int(kern.weights.nbytes)
            variants: list[tuple[str, list[np.ndarray], list[tuple[int, int]]]] = [
                ("cache", [kern.weights], [])]
            if dram:
                n = max(2, math.ceil(2 * llc / wbytes) + 1)
                variants.append(("DRAM", [kern.weights.copy() for _ in range(n)], [(w_at, w_at + wbytes)]))
            for variant, copies, cold in variants:
                streams = cache_traffic(trace, platform, cold=cold)

                def model(plat, stats=stats, code=code, base=base, streams=streams):
                    pred = predict(stats, code, base, plat, streams=streams)
                    return pred.seconds, pred.bound, pred

                timer = ctypes_timer(fn, [kern.native_args(c) for c in copies], overhead, keep=(kern, copies))
                pending.append(_Pending(label, 1, M, K, variant, wbytes, model, timer, calls))
        for name in tsar_kernels:
            step(f"{platform.name}: modelling {name} {M} x {K}, loading its proxy")
            c = counts_for(name, 1, M, K)
            for variant, footprint in [("cache", None)] + ([("DRAM", 2.0 * llc)] if dram else []):
                prox = ProxyKernel(name, 1, M, K, footprint)
                pending.append(_Pending(name, 1, M, K, variant, prox.weight_bytes,
                                        _modelled(c, 1, footprint), prox.timer(), calls))
        for name in (*gemm_kernels, *tsar_gemm_kernels):
            step(f"{platform.name}: modelling {name} GEMM {gemm_tokens} x {M} x {K}")
            c = counts_for(name, gemm_tokens, M, K)
            if name.startswith(KERNEL_PREFIX):
                prox = ProxyKernel(name, gemm_tokens, M, K)
                timer, wbytes = prox.timer(), prox.weight_bytes
            else:
                timer, wbytes = _gemm_timer(lib, name, gemm_tokens, M, K, overhead)
            pending.append(_Pending(name, gemm_tokens, M, K, "cache", wbytes,
                                    _modelled(c, gemm_tokens, None), timer, gemm_calls))
    scaling: list[_Pending] = []
    for name in thread_kernels if threads else ():
        from tsar.estimate.host import native_timer

        M, K = thread_shape
        step(f"{platform.name}: modelling {name} {M} x {K} at {', '.join(map(str, threads))} thread(s)")
        data = [("DRAM", 1, 2.0 * llc)] if dram else []
        data += [("cache", gemm_tokens, None)] if gemm_tokens else []
        for variant, n, footprint in data:
            c = counts_for(name, n, M, K)
            for t in threads:
                timer, wbytes = native_timer(name, n, M, K, t, dram_bytes=footprint)
                scaling.append(_Pending(name, n, M, K, variant, wbytes, _modelled(c, n, footprint, t), timer,
                                        calls if n == 1 else gemm_calls, t))
    pending += scaling
    ops = _operator_pending(lib, overhead, calls, llc, step, platform.name) if operators else []
    pending += ops
    step(f"{platform.name}: measuring {len(pending)} cases alternating, {rounds} rounds")
    timers = {str(i): p.timer for i, p in enumerate(pending)}
    counts = {str(i): p.calls for i, p in enumerate(pending)}
    clocks, clock = clock_timers() if on_host else ({}, None)
    bandwidths = bandwidth_timers(platform) if on_host else {}
    for name, timer in clocks.items():
        timers[name], counts[name] = timer, 20
    for name, (timer, _) in bandwidths.items():
        timers[f"bw:{name}"], counts[f"bw:{name}"] = timer, 3 if name == "DRAM" else 10
    measured = interleaved(timers, rounds, counts, progress=lambda m: say(f"  {m}"))
    platform, measured_notes = with_measured(platform, measured, clock, bandwidths)
    notes += [*measured_notes, "the model uses the clock and bandwidths measured in the rounds"]
    cases = []
    for i, p in enumerate(pending):
        seconds, bound, pred = p.model(platform)
        m = measured[str(i)]
        cases.append(Case(p.kernel, p.M, p.K, p.variant, p.weight_bytes, seconds, m.seconds, pred,
                          m.spread, bound, p.N, p.threads))
    single = tuple(cases[:len(pending) - len(scaling) - len(ops)])
    operator_cases = tuple(cases[len(pending) - len(ops):])
    return Validation(single, platform.name, platform.core.frequency_ghz,
                      (*notes, f"native times exclude the ctypes call overhead, {overhead * 1e6:.2f} us "
                       "(an entry point that returns at once)",
                       f"every case measured alternating with all others: {rounds} rounds of "
                       f"{calls} calls (GEMM {gemm_calls}); per case the median over rounds of each round's "
                       "fastest call"), tuple(cases[len(single):len(pending) - len(ops)]), operator_cases)


__all__ = [
    "DATA",
    "FULL_SHAPES",
    "GEMM_TOKENS",
    "KERNELS",
    "THREAD_KERNELS",
    "THREAD_SHAPE",
    "TINY_SHAPES",
    "TSAR_GEMM_KERNELS",
    "TSAR_KERNELS",
    "WIDE_TSAR_KERNELS",
    "Case",
    "Validation",
    "host_tsar_kernels",
    "validate",
]
