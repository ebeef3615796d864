"""Measure instruction forms on the host CPU: latency (dependency chains) and reciprocal throughput
(independent streams), in core cycles, of the VEX/EVEX forms the simulator supports
(:func:`tsar.sim.x86.forms.all_forms`) that the CPU executes.

Method (``docs/timing.md``, "Measuring a core"): each form's bodies
(:mod:`tsar.sim.uarch.microbench`) run natively in loops unrolled once and twice as far
(:mod:`tsar.sim.uarch.loops`; the difference removes the loop's overhead), in a forked child
pinned to one CPU (:mod:`tsar.sim.uarch.forked`; a faulting form costs that form only), timed with
``rdtsc`` and converted to core cycles by a chain of 1-cycle adds timed in the same trial. Every
trial runs all of a form's bodies in turn; the median over trials is kept and the spread
((max - min) / median) reported. Registers and memory start at 1.0 (1.0f per 32-bit lane, or 1.0
per 64-bit lane for double-precision forms), opmasks all ones, MXCSR at its default: a fixed
point of multiplication, division and square root, so chains stay on normal numbers.

The register form's latency is the lowest over the chains through each source of the
destination's register class; a memory form's is the chain through its register operand (as the
tables' ``latency``), and its ``latency_max`` adds the L1 load-to-use latency measured in the same
run. Uop counts are not measured (no performance counters are read): they come from a shipped
base table. Ports: inferred by pairing with single-port blockers where the base table names
such blockers that hold here (:mod:`tsar.sim.uarch.pairing`), else derived from the base core's
class port groups (:mod:`tsar.sim.uarch.measure_rows`).
"""

from __future__ import annotations

import itertools
import re
import statistics
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from tsar.common.errors import UserError
from tsar.sim.platforms.detect import CpuIdentity
from tsar.sim.uarch import pairing
from tsar.sim.uarch.forked import TaskFailed, default_cpu, run_isolated
from tsar.sim.uarch.loops import LoopRunner, initial_state, measure_bodies, tsc_hz
from tsar.sim.uarch.microbench import Plan, is_double, load_to_use_bodies, plan, variants
from tsar.sim.uarch.table import Uarch
from tsar.sim.vector_spill import HOST_AVX512
from tsar.sim.x86.forms import ALL_EXTENSIONS, CPU_FLAGS, Form, all_forms, required_cpu_flags

F32_ONE = struct.pack("<f", 1.0)
F64_ONE = struct.pack("<d", 1.0)
GPR_VALUE = 0x3F80_0000
QUICK_FORMS = ("VEX_VPADDD_YMM_YMM_YMMM256", "VEX_VPMULLD_YMM_YMM_YMMM256", "VEX_VPDPBUSD_YMM_YMM_YMMM256",
               "VEX_VPSHUFB_YMM_YMM_YMMM256", "VEX_VFMADD231PS_YMM_YMM_YMMM256")
"""``--quick``: a handful of well-known forms (those the host executes)."""
QUICK_TRIALS = 3


@dataclass(frozen=True)
class Settings:
    """``trials`` per form; runs sized to about ``target_ticks`` time-stamp-counter ticks;
    ``cpu`` the CPU the measuring process is pinned to; ``timeout`` seconds per form."""

    trials: int = 5
    target_ticks: int = 100_000
    cpu: int | None = None
    timeout: float = 120.0


@dataclass(frozen=True)
class Sample:
    """Median over trials (cycles) and spread ((max - min) / median)."""

    value: float
    spread: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Sample | None:
        vals = [v for v in values if v == v]  # NaN: a trial without a clock
        if not vals:
            return None
        mid = statistics.median(vals)
        return cls(mid, (max(vals) - min(vals)) / mid if mid > 0 else 0.0)


@dataclass
class VariantResult:
    """The measurement of one variant (register or memory) of a form."""

    form: Form
    memory: bool
    key: tuple[str, tuple[str, ...]]
    latency: Sample | None = None
    latency_how: str = ""
    """``chain`` (measured here), ``register form`` (a memory form without a register source: the
    register variant's), ``load`` (a pure load: 0 by the tables' convention), or empty."""
    latency_via: int | None = None
    latency_max: float | None = None
    throughput: Sample | None = None
    copies: int = 0
    notes: list[str] = field(default_factory=list)
    failed: str | None = None
    ports: dict[str, float] = field(default_factory=dict)
    """Port usage inferred by pairing (empty: not inferred)."""
    pairing: dict[str, float] = field(default_factory=dict)
    """Slowdown against each blocked port."""

    @property
    def text(self) -> str:
        return f"{self.key[0]} {' '.join(self.key[1])}"


@dataclass
class Measurement:
    """A run: the CPU, the settings, per-variant results, forms skipped (name, reason), the
    clock (time-stamp counter and core, GHz) and the L1 load-to-use latencies (cycles)."""

    cpu: CpuIdentity
    settings: Settings
    results: list[VariantResult]
    skipped: list[tuple[str, str]]
    tsc_ghz: float
    core_ghz: float
    load_to_use: dict[str, float]
    blockers: dict[str, str] = field(default_factory=dict)
    """Port -> the blocker form pairing used (empty: no pairing)."""
    blocker_checks: dict[str, float] = field(default_factory=dict)
    """Slowdown of each mix of two blockers (1.0: disjoint ports, as assumed)."""


# --- selection ------------------------------------------------------------------------------------
def _runs_on(form: Form, flags: frozenset[str]) -> bool:
    if CPU_FLAGS[form.extension] not in flags:
        return False
    import iced_x86 as iced

    p = plan(form, False)
    if p.skip:
        return True  # reported as skipped, with its reason
    code = p.encode(p.assign({}, {}))
    return set(required_cpu_flags(iced.Decoder(64, code).decode())) <= flags


def select_forms(flags: frozenset[str], pattern: str | None = None, extensions: Sequence[str] | None = None,
                 quick: bool = False) -> list[Form]:
    """The forms to measure: supported forms whose CPU flags the host has, of ``extensions``
    (names of :data:`~tsar.sim.x86.forms.ALL_EXTENSIONS`, any case), whose mnemonic
    ``pattern`` (a regular expression) matches from its start; ``quick``: only
    :data:`QUICK_FORMS`. Raises :class:`UserError` on a bad pattern or extension, or when
    nothing is left."""
    forms = list(all_forms())
    if extensions:
        known = {e.lower(): e for e in ALL_EXTENSIONS}
        unknown = [e for e in extensions if e.lower() not in known]
        if unknown:
            raise UserError(f"unknown extension(s) {', '.join(unknown)} (known: {', '.join(ALL_EXTENSIONS)})")
        wanted = {known[e.lower()] for e in extensions}
        missing = sorted(e for e in wanted if CPU_FLAGS[e] not in flags)
        if missing:
            raise UserError(f"this CPU does not execute {', '.join(missing)} (no "
                            f"{', '.join(CPU_FLAGS[e] for e in missing)} in /proc/cpuinfo)")
        forms = [f for f in forms if f.extension in wanted]
    if quick:
        forms = [f for f in forms if f.name in QUICK_FORMS]
    if pattern:
        try:
            rx = re.compile(pattern, re.IGNORECASE)
        except re.error as exc:
            raise UserError(f"--forms {pattern!r}: not a regular expression ({exc})") from None
        forms = [f for f in forms if rx.match(f.mnemonic)]
        if not forms:
            raise UserError(f"--forms {pattern!r} matches no supported form's mnemonic (e.g. vpaddd, "
                            "vpdp, 'vpmul(ld|lq)$')")
    runnable = [f for f in forms if _runs_on(f, flags)]
    if not runnable:
        raise UserError("none of the selected forms runs on this CPU (its flags lack their extensions)")
    return runnable


# --- the child's work -----------------------------------------------------------------------------
_RUNNER: list[LoopRunner] = []


def _runner() -> LoopRunner:
    if not _RUNNER:
        _RUNNER.append(LoopRunner(slots=32, slot_bytes=1 << 14))
    return _RUNNER[0]


def _probe_task(settings: Settings) -> dict[str, object]:
    """The clock and the load-to-use chains (on a zeroed buffer)."""
    runner = _runner()
    hz = tsc_hz(runner)
    bodies = load_to_use_bodies(HOST_AVX512)
    state = initial_state(b"\0" * 8, 0)
    times = measure_bodies(runner, bodies, state, trials=settings.trials, target_ticks=settings.target_ticks)
    links = {name: statistics.median(v) * len(bodies[name]) for name, v in times.cycles.items()}
    return {"tsc_hz": hz, "ticks_per_cycle": statistics.median(times.ticks_per_cycle), "links": links}


def _tag(p: Plan) -> str:
    return "m" if p.memory else "r"


def _pairable(p: Plan) -> bool:
    """A register variant whose operands are all vector registers (pairing's forms)."""
    return (not p.memory and p.dest is not None and p.dest.cls == "vec"
            and all(o.cls == "vec" for o in p.registers))


def _blocker_task(candidates: dict[str, list[Plan]], settings: Settings) -> dict[str, object]:
    """Measure the blocker candidates alone, keep per port the first at 1 cycle (+-10 %), and
    check that the kept ones do not slow each other down (a mix of two: 1.0 expected)."""
    bodies = {f"{port}:{i}": p.stream() for port, plans in candidates.items() for i, p in enumerate(plans)}
    if not bodies:
        return {"chosen": {}, "checks": {}}
    times = measure_bodies(_runner(), bodies, initial_state(F32_ONE, GPR_VALUE), trials=settings.trials,
                           target_ticks=settings.target_ticks).cycles
    chosen: dict[str, tuple[int, float]] = {}
    for port, plans in candidates.items():
        for i in range(len(plans)):
            tp = statistics.median(times[f"{port}:{i}"])
            if abs(tp - 1.0) <= 0.1:
                chosen[port] = (i, tp)
                break
    mixes: dict[str, tuple[int, int, list[bytes]]] = {}
    ports = sorted(chosen)
    for a, b in itertools.combinations(ports, 2):
        pa, pb = candidates[a][chosen[a][0]], candidates[b][chosen[b][0]]
        body = pairing.mixed(pa, pb, 4, 4) if pa.dest is not None and pa.dest.cls == "vec" else None
        if body is not None:
            mixes[f"{a}+{b}"] = (4, 4, body)
    checks: dict[str, float] = {}
    if mixes:
        t = measure_bodies(_runner(), {n: m[2] for n, m in mixes.items()}, initial_state(F32_ONE, GPR_VALUE),
                           trials=settings.trials, target_ticks=settings.target_ticks).cycles
        for name, (k, j, _) in mixes.items():
            a, b = name.split("+")
            period = statistics.median(t[name]) * (k + j)
            checks[name] = pairing.slowdown(period, k, j, chosen[a][1], chosen[b][1])
    return {"chosen": chosen, "checks": checks}


def _wide(plans: Sequence[Plan]) -> bool:
    """Whether a form's variants run 512-bit code on a CPU that lowers its clock for it (one with
    AVX512BW; :data:`tsar.sim.uarch.loops.CLOCK512`)."""
    from tsar.sim.platforms.detect import cpu_flags

    return "avx512bw" in cpu_flags() and any("zmm" in p.kinds or p.memory_bits > 256 for p in plans)


def _form_task(plans: Sequence[Plan], settings: Settings,
               blockers: Sequence[pairing.Blocker] = ()) -> dict[str, object]:
    """Cycles per instruction per trial of every body of ``plans`` (one form's variants); then,
    with ``blockers``, of the register variant mixed with each (``pairs``: port -> k, j, cycles)."""
    bodies: dict[str, list[bytes]] = {}
    for p in plans:
        for s in p.chain_sources:
            bodies[f"{_tag(p)}:chain:{s.index}"] = p.chain(s)
        bodies[f"{_tag(p)}:stream"] = p.stream()
    form = plans[0].form
    state = initial_state(F64_ONE if is_double(form.mnemonic) else F32_ONE, GPR_VALUE)
    # 512-bit code is timed in cycles of the clock the core runs it at (the model's convention)
    wide = set(bodies) if _wide(plans) else set()
    cycles = measure_bodies(_runner(), bodies, state, trials=settings.trials,
                            target_ticks=settings.target_ticks, wide=wide).cycles
    pairs: dict[str, tuple[int, int, list[float]]] = {}
    reg = next((p for p in plans if _pairable(p)), None)
    if reg is not None and blockers:
        tp = [v for v in cycles["r:stream"] if v == v]
        x_tp = statistics.median(tp) if tp else float("inf")
        rw = cycles.get(f"r:chain:{reg.dest.index}") if reg.dest is not None and reg.dest.read else None
        rw_latency = statistics.median(rw) if rw else None
        mixes = {}
        if x_tp <= 1.1:
            for b in blockers:
                try:
                    found = pairing.fit(reg, b.plan, x_tp, b.recip_throughput, rw_latency)
                except ValueError:  # a register the encoder refuses: no pairing for this form
                    found = None
                if found is not None:
                    mixes[b.port] = found
        if mixes:
            t = measure_bodies(_runner(), {port: m[2] for port, m in mixes.items()}, state,
                               trials=settings.trials, target_ticks=settings.target_ticks,
                               wide=set(mixes) if wide else ()).cycles
            pairs = {port: (k, j, t[port]) for port, (k, j, _) in mixes.items()}
    return {"cycles": cycles, "pairs": pairs}


# --- the parent's side ----------------------------------------------------------------------------
def load_to_use(links: dict[str, float]) -> dict[str, float]:
    """L1 load-to-use latencies (cycles) from the probe chains: ``scalar`` as measured; a vector
    width's as its link minus half the GPR <-> xmm round trip."""
    half = links.get("roundtrip", 0.0) / 2
    out = {"scalar": links["scalar"]}
    for width in ("xmm", "ymm", "zmm"):
        if width in links:
            out[width] = links[width] - half
    return out


def _load_latency(p: Plan, ltu: dict[str, float]) -> float:
    if not any(o.cls == "vec" for o in p.operands):
        return ltu["scalar"]
    width = "zmm" if p.memory_bits > 256 else "ymm" if p.memory_bits > 128 else "xmm"
    return ltu.get(width, ltu["xmm"])


def _variant(p: Plan, cycles: dict[str, list[float]], ltu: dict[str, float],
             twin: VariantResult | None) -> VariantResult:
    res = VariantResult(p.form, p.memory, p.key, copies=p.stream_copies())
    chains = {s.index: Sample.of(cycles.get(f"{_tag(p)}:chain:{s.index}", [])) for s in p.chain_sources}
    chains = {i: s for i, s in chains.items() if s is not None}
    if chains:
        res.latency_via = min(chains, key=lambda i: chains[i].value)
        res.latency, res.latency_how = chains[res.latency_via], "chain"
        if max(s.value for s in chains.values()) > 1.1 * res.latency.value + 0.05:
            res.notes.append("latency: lowest of the chains through operands "
                             + ", ".join(f"{i} ({s.value:.2f})" for i, s in sorted(chains.items())))
    elif p.no_latency:
        res.notes.append(f"no latency: {p.no_latency}")
    res.throughput = Sample.of(cycles.get(f"{_tag(p)}:stream", []))
    loads = p.memory and not p.memory_written
    if loads and res.latency is None and p.dest is not None:
        from tsar.sim.uarch.build import is_pure_move

        if is_pure_move(p.form.mnemonic):
            res.latency, res.latency_how = Sample(0.0, 0.0), "load"
            res.notes = [n for n in res.notes if not n.startswith("no latency")]
            res.notes.append("latency 0: a pure load (the tables' convention)")
        elif twin is not None and twin.latency is not None:
            res.latency, res.latency_how = twin.latency, "register form"
            res.notes = [n for n in res.notes if not n.startswith("no latency")]
            res.notes.append("latency of the register form")
    if res.latency is not None:
        res.latency_max = res.latency.value
        if loads:
            extra = _load_latency(p, ltu)
            res.latency_max += extra
            res.notes.append(f"latency_max = latency + {extra:.2f} (L1 load-to-use, measured)")
    dest_rw = p.dest is not None and p.dest.read
    bound = res.latency.value / max(res.copies, 1) if res.latency is not None else 0.0
    if dest_rw and res.throughput is not None and abs(res.throughput.value - bound) <= 0.1 * bound:
        res.notes.append(f"throughput may be bound by the read-write destination's latency "
                         f"({res.copies} copies)")
    return res


def _pair_ports(res: VariantResult, pairs: dict[str, tuple[int, int, list[float]]],
                blockers: Sequence[pairing.Blocker], base: Uarch) -> None:
    """Infer ``res.ports`` from the mixes with each blocker (:mod:`tsar.sim.uarch.pairing`)."""
    if res.throughput is None or not pairs:
        return
    tp = {b.port: b.recip_throughput for b in blockers}
    mixes = {}
    for port, (k, j, cycles) in pairs.items():
        sample = Sample.of(cycles)
        if sample is not None:
            mixes[port] = pairing.Mix(sample.value * (k + j), k, j, tp[port])
    x_tp = res.throughput.value
    res.pairing = {port: round(pairing.slowdown(m.period, m.k, m.j, x_tp, m.b_tp), 3)
                   for port, m in mixes.items()}
    prefix = base.core.port_prefixes[0]
    usage = pairing.infer(mixes, tp, pairing.vector_ports(base), x_tp, prefix)
    if usage is not None:
        res.ports = usage


def measure(forms: Sequence[Form], cpu: CpuIdentity, settings: Settings | None = None,
            progress: Callable[..., None] | None = None, base: Uarch | None = None,
            flags: frozenset[str] = frozenset()) -> Measurement:
    """Measure ``forms`` on this CPU (see the module docstring). A form's variant whose table key
    an earlier form has (the EVEX twin of a VEX form) is measured once, VEX first. With ``base``
    (the table whose core the ports are named after; ``flags``: the CPU's), ports are inferred by
    pairing where blockers are found (:mod:`tsar.sim.uarch.pairing`). ``progress``: a
    :data:`tsar.console.WorkHook` (forms done, forms in all, the form's name)."""
    settings = settings or Settings(cpu=default_cpu())
    skipped: list[tuple[str, str]] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    work: list[list[Plan]] = []
    for form in sorted(forms, key=lambda f: f.evex):
        plans = []
        for memory in variants(form):
            p = plan(form, memory)
            if p.skip:
                skipped.append((form.name + (" (memory)" if memory and form.register_only else ""), p.skip))
            elif p.key not in seen:
                seen.add(p.key)
                plans.append(p)
        if plans:
            work.append(plans)
    total = len(work) + 1
    candidates = {}
    if base is not None:
        candidates = pairing.blocker_candidates(base, (f for f in all_forms() if _runs_on(f, flags)))
    first = [partial(_probe_task, settings), partial(_blocker_task, candidates, settings)]
    probe, found = [out for _, out in run_isolated(first, cpu=settings.cpu, timeout=settings.timeout)]
    if isinstance(probe, TaskFailed):
        raise UserError(f"cannot time native code on this machine: {probe.reason}")
    if progress is not None:
        progress(1, total, "clock, load-to-use, blockers")
    ltu = load_to_use(probe["links"])
    blockers: list[pairing.Blocker] = []
    checks: dict[str, float] = {}
    if not isinstance(found, TaskFailed):
        blockers = [pairing.Blocker(port, candidates[port][i], tp)
                    for port, (i, tp) in found["chosen"].items()]
        checks = found["checks"]
        if any(r >= pairing.CONFLICT for r in checks.values()):
            blockers = []  # two "single-port" blockers share a port here: the base's ports do not hold
    tasks = [partial(_form_task, plans, settings, blockers) for plans in work]
    results: list[VariantResult] = []
    for i, out in run_isolated(tasks, cpu=settings.cpu, timeout=settings.timeout):
        plans = work[i]
        if isinstance(out, TaskFailed):
            results += [VariantResult(p.form, p.memory, p.key, failed=out.reason) for p in plans]
        else:
            twin = None
            for p in plans:
                r = _variant(p, out["cycles"], ltu, twin)
                if not p.memory:
                    twin = r
                    if base is not None and _pairable(p):
                        _pair_ports(r, out["pairs"], blockers, base)
                results.append(r)
        if progress is not None:
            progress(i + 2, total, plans[0].form.name)
    tsc = float(probe["tsc_hz"]) / 1e9
    return Measurement(cpu, settings, results, skipped, tsc, tsc / float(probe["ticks_per_cycle"]), ltu,
                       {b.port: f"{b.plan.key[0]} {' '.join(b.plan.key[1])}" for b in blockers}, checks)
