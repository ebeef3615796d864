"""Kernel time from one simulated call: loops, per-loop core bounds, memory transfers.

:func:`predict` turns the simulator's per-address execution counts (``Stats.per_address``) of one
call into a time on a :class:`~tsar.sim.platforms.Platform`:

1. **Loops** (:func:`find_loops`). Every executed instruction inside ``code`` is decoded once (x86
   or T-SAR, :mod:`tsar.isa.stream`); loops and core bounds share the result. A taken-backwards
   direct branch (conditional or unconditional jump whose target lies at or before the branch and
   inside ``code``) is a back edge; the loop it closes spans ``[target, end of the branch)``. Back
   edges with the same target form one loop (the body ends at the last of them); loops that overlap
   without nesting (irreducible layouts) are merged. Every executed instruction belongs to the
   innermost loop whose range contains it, or else to the *straight-line* part. Iterations of a
   loop = ``max(count of its first instruction, count of its last back-edge branch)``: the first
   instruction runs once per iteration in a top-entered loop, the bottom branch once per iteration
   in a loop entered at its test.
2. **Core cycles**. Each loop's own instructions (inner loops excluded) become a
   :class:`~tsar.sim.timing.profile.LoopProfile` with per-iteration weights ``count / iterations``;
   :func:`~tsar.sim.timing.core.core_bound` gives cycles per iteration (ports, front end, taken
   branch, loop-carried chains) and the loop costs ``cycles x iterations``. Straight-line code
   (prologues, epilogues, code of callees outside any loop range) is throughput-bound:
   ``max(ports, front end)`` of all its executions. Core cycles = sum over loops + straight line
   (no overlap between a loop and the code around it: conservative for short inner loops).
3. **Memory**. ``streams`` if given; else derived from ``trace`` (:func:`cache_traffic`);
   else all accessed bytes are taken to be L1-resident (one pinned stream; a note says so).
   :func:`~tsar.sim.timing.memory.kernel_time` combines: ``T = max(T_core / threads, transfers)``
   (ECM on the platform's default overlap mode).

T-SAR instructions take their uop counts from the ISA (:mod:`tsar.sim.uarch.tsar_ops`); the RTL's
measured issue cycles equal them (``tests/rtl/test_sim.py`` asserts it) and ``check_rtl=measured_cycles``
re-checks it for the configurations the code uses before predicting.
Units: cycles are core clock cycles at ``platform.core.frequency_ghz``; seconds are wall time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING

from tsar.common.errors import UserError
from tsar.sim.timing.adapters import form_from_decoded
from tsar.sim.timing.core import CoreBound, core_bound
from tsar.sim.timing.memory import DataStream, MemoryTime, kernel_time
from tsar.sim.timing.profile import InstructionForm, LoopProfile

if TYPE_CHECKING:
    from tsar.isa.config import TsarConfig
    from tsar.sim import MemoryTrace, Stats
    from tsar.sim.platforms import Platform

@dataclass
class Loop:
    """A loop found in executed code: guest addresses ``[start, end)``; ``latches`` are the
    addresses of its back-edge branches; ``own`` the executed instructions attributed to it
    (inner loops excluded)."""

    start: int
    end: int
    latches: list[int]
    depth: int = 0
    parent: Loop | None = field(default=None, repr=False)
    own: list[int] = field(default_factory=list, repr=False)
    iterations: float = 0.0

    def contains(self, address: int) -> bool:
        return self.start <= address < self.end


@dataclass(frozen=True)
class LoopReport:
    """Timing of one loop (or of the straight-line code, ``depth = -1``).

    ``start``/``end``: guest address range; ``iterations``: loop iterations in the call;
    ``cycles_per_iteration`` and ``cycles`` (= per iteration x iterations) in core cycles;
    ``bottleneck``: the binding bound of :func:`core_bound`.
    """

    start: int
    end: int
    depth: int
    iterations: float
    instructions: int
    cycles_per_iteration: float
    cycles: float
    bottleneck: str
    core: CoreBound = field(repr=False)

    @property
    def label(self) -> str:
        if self.depth < 0:
            return "straight-line"
        return f"loop {self.start:#x}-{self.end:#x}"


@dataclass(frozen=True)
class Prediction:
    """Predicted time of one call on one platform.

    ``seconds`` / ``cycles``: the whole call (slowest thread); ``core_cycles``: single-thread core
    cycles (sum over loops and straight-line code); ``memory``: transfer estimate per thread
    (None if no memory model was applied); ``bound``: ``"core"`` or ``"memory (<level>)"``.
    """

    seconds: float
    cycles: float
    core_cycles: float
    memory: MemoryTime | None
    bound: str
    loops: list[LoopReport]
    threads: int = 1
    platform: str = ""
    frequency_ghz: float = 0.0
    streams: tuple[DataStream, ...] = ()
    notes: tuple[str, ...] = ()

    def table(self) -> str:
        """Per-loop report, one line per loop (innermost indented) plus totals."""
        rows = [f"{'part':34} {'iterations':>11} {'cyc/iter':>9} {'cycles':>12}  bottleneck"]
        for r in self.loops:
            name = "  " * max(r.depth, 0) + r.label
            rows.append(f"{name:34} {r.iterations:11,.0f} {r.cycles_per_iteration:9.2f} "
                        f"{r.cycles:12,.0f}  {r.bottleneck}")
        rows.append(f"{'core total':34} {'':11} {'':9} {self.core_cycles:12,.0f}")
        if self.memory is not None:
            terms = ", ".join(f"{k} {v:,.0f}" for k, v in self.memory.level_cycles.items())
            rows.append(f"{'memory (' + self.memory.mode + ')':34} {'':11} {'':9} "
                        f"{self.memory.cycles:12,.0f}  {terms}")
        rows.append(f"predicted {self.seconds * 1e6:,.2f} us = {self.cycles:,.0f} cycles at "
                    f"{self.frequency_ghz:g} GHz, {self.threads} thread(s), {self.bound}-bound")
        return "\n".join(rows)


# --- decoding --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Decoded:
    """One instruction of the timed code, as :func:`decode_at` decodes it."""

    form: InstructionForm
    length: int
    target: int | None      # direct jump target (conditional or unconditional), else None
    is_call: bool


@lru_cache(maxsize=1 << 16)
def decode_at(code: bytes, code_address: int, address: int) -> Decoded:
    """The instruction at ``address``, decoded once (:func:`tsar.isa.stream.decode_one`); kept per
    (code, address), since the same kernels are timed on many shapes and platforms (a ``bytes``
    object caches its hash, so a hit costs no pass over the code)."""
    import iced_x86 as ix

    from tsar.isa.stream import decode_one

    decoded = decode_one(code, address - code_address, code_address)
    form = form_from_decoded(decoded)
    instr = decoded.x86
    if instr is None:  # T-SAR: neither a branch nor a call
        return Decoded(form, decoded.length, None, False)
    fc = instr.flow_control
    target = None
    if fc in (ix.FlowControl.CONDITIONAL_BRANCH, ix.FlowControl.UNCONDITIONAL_BRANCH) and \
            instr.op0_kind in (ix.OpKind.NEAR_BRANCH16, ix.OpKind.NEAR_BRANCH32, ix.OpKind.NEAR_BRANCH64):
        target = instr.near_branch_target
    return Decoded(form, decoded.length, target, fc in (ix.FlowControl.CALL, ix.FlowControl.INDIRECT_CALL))


def _decode_executed(code: bytes, code_address: int, executed: Mapping[int, float]) -> dict[int, Decoded]:
    return {a: decode_at(code, code_address, a) for a in sorted(executed)}


def _executed(code: bytes, code_address: int, counts: Mapping[int, float]) -> dict[int, float]:
    end = code_address + len(code)
    return {a: float(c) for a, c in counts.items() if c > 0 and code_address <= a < end}


def find_loops(code: bytes, code_address: int, counts: Mapping[int, float]) -> tuple[list[Loop], list[int]]:
    """Loops of the executed part of ``code`` (loaded at ``code_address``).

    ``counts``: guest address -> execution count (``Stats.per_address``; addresses outside
    ``code`` are ignored). Returns ``(loops outermost first, sorted by start; addresses of the
    straight-line instructions)``; each loop has its ``own`` instructions, ``depth``, ``parent``
    and ``iterations`` set. Method: module docstring.
    """
    executed = _executed(code, code_address, counts)
    return _find_loops(code_address, executed, _decode_executed(code, code_address, executed))


def _find_loops(code_address: int, executed: Mapping[int, float],
                decoded: Mapping[int, Decoded]) -> tuple[list[Loop], list[int]]:
    """:func:`find_loops` on the executed instructions, decoded (in address order)."""
    by_header: dict[int, list[int]] = {}
    ends: dict[int, int] = {}
    for a, d in decoded.items():
        if d.target is not None and code_address <= d.target <= a and d.target in executed:
            by_header.setdefault(d.target, []).append(a)
            ends[d.target] = max(ends.get(d.target, 0), a + d.length)
    intervals = sorted(([h, ends[h], sorted(ls)] for h, ls in by_header.items()),
                       key=lambda x: (x[0], -x[1]))
    merged = True
    while merged:  # merge loops that overlap without nesting
        merged = False
        for i in range(len(intervals)):
            for j in range(i + 1, len(intervals)):
                a, b = intervals[i], intervals[j]
                if a[0] < b[0] < a[1] < b[1]:
                    intervals[i] = [a[0], b[1], sorted(a[2] + b[2])]
                    del intervals[j]
                    merged = True
                    break
            if merged:
                break
        intervals.sort(key=lambda x: (x[0], -x[1]))
    loops = [Loop(s, e, ls) for s, e, ls in intervals]
    for i, lp in enumerate(loops):  # parent: the smallest earlier-starting loop containing it
        for outer in reversed(loops[:i]):
            same = (outer.start, outer.end) == (lp.start, lp.end)
            if outer.start <= lp.start and lp.end <= outer.end and not same:
                lp.parent, lp.depth = outer, outer.depth + 1
                break
    straight: list[int] = []
    for a in decoded:
        inner = [lp for lp in loops if lp.contains(a)]
        if inner:
            max(inner, key=lambda lp: lp.depth).own.append(a)
        else:
            straight.append(a)
    for lp in loops:
        head = executed.get(lp.start, 0.0)
        latch = executed.get(max(lp.latches), 0.0)
        lp.iterations = max(head, latch, 1.0)
    return loops, straight


# --- memory streams --------------------------------------------------------------------------------
def cache_traffic(trace: MemoryTrace, platform: Platform, threads: int = 1, *,
                  cold: Sequence[tuple[int, int]] = (), warm: bool = True) -> list[DataStream]:
    """Data streams of a traced call from a trace-driven simulation of the cache hierarchy.

    Rule: every access of ``trace`` touches whole lines; each cache level is a fully associative
    LRU of ``size x usable_fraction`` bytes (a shared level: divided among ``min(shared_by,
    threads)`` threads), inclusive, private per thread. With ``warm`` the trace runs once to warm
    the caches (repeated calls: data that fits stays cached between calls), then is counted.
    ``cold`` guest address ranges ``[start, end)`` (e.g. weights that a real run streams from
    DRAM because the model's other layers evict them) are evicted from every level before the
    counted pass. Result: one stream per level that served accesses, *pinned* to that level, with
    the bytes it moved (a line fill = one line; writes that miss L1D are write streams, which
    the memory model charges twice beyond L1D); the L1D stream carries the remaining accessed
    bytes, so the L1D term sees all bytes. Streams are partitioned between threads.
    """
    from collections import OrderedDict

    import numpy as np

    levels = list(platform.caches)
    line = levels[0].line
    caps = [max(1, int(c.size * c.usable_fraction / (min(c.shared_by, threads) if c.shared_by > 1 else 1))
                // line) for c in levels]
    lrus: list[OrderedDict] = [OrderedDict() for _ in levels]
    names = [c.name for c in levels] + ["DRAM"]
    addr = trace.address.astype(np.int64)
    size = np.maximum(trace.size.astype(np.int64), 1)
    first = (addr // line).tolist()
    last = ((addr + size - 1) // line).tolist()
    writes = trace.write.tolist()

    def run(count: bool) -> tuple[list[float], list[float]]:
        rd = [0.0] * len(names)
        wr = [0.0] * len(names)
        for lo, hi, w in zip(first, last, writes, strict=True):
            for ln in range(lo, hi + 1):
                depth = len(levels)
                for d, lru in enumerate(lrus):
                    if ln in lru:
                        depth = d
                        break
                for d in range(min(depth + 1, len(levels))):
                    lru = lrus[d]
                    if ln in lru:
                        lru.move_to_end(ln)
                    else:
                        lru[ln] = None
                        if len(lru) > caps[d]:
                            lru.popitem(last=False)
                if count and depth > 0:
                    (wr if w else rd)[depth] += line
        return rd, wr

    if warm:
        run(False)
    for lo, hi in cold:
        for lru in lrus:
            for ln in [k for k in lru if lo <= k * line < hi]:
                del lru[ln]
    rd, wr = run(True)
    total_r = float(size[~trace.write].sum())
    total_w = float(size[trace.write].sum())
    out = [DataStream(f"served by {names[0]}", 0.0, read=max(total_r - sum(rd), 0.0),
                      write=max(total_w - sum(wr), 0.0), level=names[0])]
    for d in range(1, len(names)):
        if rd[d] or wr[d]:
            out.append(DataStream(f"served by {names[d]}", 0.0, read=rd[d], write=wr[d], level=names[d]))
    return out


def _default_streams(stats: Stats) -> list[DataStream]:
    read = float(stats.vector_bytes_read + stats.scalar_bytes_read)
    write = float(stats.vector_bytes_written + stats.scalar_bytes_written)
    return [DataStream("all accesses (L1D)", 0.0, read=read, write=write, partitioned=True, level="L1D")]


# --- RTL check -------------------------------------------------------------------------------------
def check_tsar_uops(mnemonics: Sequence[str],
                   measured_cycles: Callable[[TsarConfig], Mapping[str, int]]) -> dict[str, int]:
    """Issue cycles of the T-SAR ``mnemonics`` as ``measured_cycles(config)`` reports them (the RTL's
    ``tsar.rtl.bench.measured_cycles``, handed in by the caller: the simulator does not import the
    RTL); raises ValueError where they differ from the ISA uop counts the timing tables use."""
    from tsar.sim.uarch.tsar_ops import tsar_config_for

    out: dict[str, int] = {}
    done: set[str] = set()
    for m in mnemonics:
        cfg, _ = tsar_config_for(m)
        if cfg.name not in done:
            done.add(cfg.name)
            measured = measured_cycles(cfg)
            isa = {cfg.tlut_mnemonic: cfg.tlut_uops, cfg.tgemv_mnemonic: cfg.tgemv_uops}
            for name, uops in isa.items():
                if measured.get(name) != uops:
                    raise ValueError(f"{name}: RTL issues in {measured.get(name)} cycles, ISA says "
                                     f"{uops} uops; the timing tables would be wrong")
                out[name] = uops
    return out


# --- prediction ------------------------------------------------------------------------------------
def _profile(decoded_forms: list[tuple[InstructionForm, float]], iterations: float, name: str) -> LoopProfile:
    return LoopProfile.from_forms(decoded_forms, iterations, name)


class UnsupportedIsa(UserError, ValueError):
    """The code uses an extension the platform's cores do not execute."""


def check_isa(forms: Mapping[int, InstructionForm], platform: Platform) -> None:
    """Raise :class:`UnsupportedIsa` when an executed instruction needs a CPU flag that
    ``platform`` does not declare (``core.isa``; an undeclared ISA is not checked)."""
    have = set(platform.core.isa)
    if not have:
        return
    bad = {a: f for a, f in sorted(forms.items()) if set(f.isa) - have}
    if bad:
        first_address, first = next(iter(bad.items()))
        lacking = sorted({flag for f in bad.values() for flag in f.isa if flag not in have})
        more = f" and {len(bad) - 1} more instruction(s)" if len(bad) > 1 else ""
        raise UnsupportedIsa(
            f"{platform.name} ({platform.core.model}) does not execute {', '.join(lacking)}: "
            f"{first.text or first.label} at {first_address:#x}{more}; time this code on a platform "
            f"whose ISA has them, or build it for {platform.name}'s")


def predict(stats: Stats, code: bytes, code_address: int, platform: Platform | str, *,
            threads: int = 1, streams: Sequence[DataStream] | None = None,
            trace: MemoryTrace | None = None, mode: str | None = None,
            check_rtl: Callable[[TsarConfig], Mapping[str, int]] | None = None) -> Prediction:
    """Predict the time of the simulated call ``stats`` on ``platform``.

    ``code``: the code bytes the call executed, loaded at guest address ``code_address``
    (``KernelRun.code_address``; for an ELF, the load address and the image). ``platform``: a
    :class:`Platform` or a name for :func:`tsar.sim.platforms.load`. ``threads``: work split evenly
    (core cycles / threads), bandwidths shared per :func:`kernel_time`. ``streams``: the call's
    data (bytes, single-thread totals); default: derived from ``trace`` or, without a trace, all
    accesses in L1D. ``mode``: ``"ecm"`` / ``"roofline"`` (default: the platform's).
    ``check_rtl``: a per-configuration source of measured T-SAR issue cycles (the front end passes
    ``tsar.rtl.bench.measured_cycles``, about 1 s per config) to verify the uop counts against first.
    """
    from tsar.sim.platforms import load
    from tsar.sim.uarch.tsar_ops import is_tsar_mnemonic

    plat = load(platform) if isinstance(platform, str) else platform
    uarch = plat.uarch()
    width = plat.core.issue_width
    counts = _executed(code, code_address, stats.per_address)
    if not counts:
        raise ValueError("no executed instruction lies inside the given code range")
    decoded = _decode_executed(code, code_address, counts)
    loops, straight = _find_loops(code_address, counts, decoded)
    forms = {a: d.form for a, d in decoded.items()}
    check_isa(forms, plat)
    notes: list[str] = []
    ratio = plat.core.avx512_clock_ratio
    if ratio != 1.0 and any("zmm" in f.operands for f in forms.values()):
        plat = replace(plat, core=replace(plat.core, frequency_ghz=plat.core.frequency_ghz * ratio))
        notes.append(f"512-bit code: the core clock times {ratio:.3f} (the AVX-512 frequency "
                     f"license measured on {plat.name}): {plat.core.frequency_ghz:.3f} GHz")
    tsar_names = sorted({f.mnemonic for f in forms.values() if is_tsar_mnemonic(f.mnemonic)})
    if tsar_names:
        if check_rtl:
            check_tsar_uops(tsar_names, check_rtl)
            notes.append("T-SAR uops: ISA counts, checked equal to the RTL's issue cycles")
        else:
            notes.append("T-SAR uops: ISA counts (equal to the RTL's issue cycles, as the RTL "
                         "tests assert)")
    reports: list[LoopReport] = []
    for lp in loops:
        if not lp.own:
            continue
        body = [(forms[a], counts[a]) for a in sorted(lp.own)]
        cb = core_bound(_profile(body, lp.iterations, f"{lp.start:#x}"), uarch, issue_width=width,
                        strict=False)
        if cb.missing:
            notes.append(f"loop {lp.start:#x}: no timing data for {', '.join(cb.missing)} (ignored)")
        reports.append(LoopReport(lp.start, lp.end, lp.depth, lp.iterations, len(lp.own), cb.cycles,
                                  cb.cycles * lp.iterations, cb.bottleneck, cb))
    if straight:
        body = [(forms[a], counts[a]) for a in straight]
        cb = core_bound(_profile(body, 1.0, "straight-line"), uarch, issue_width=width, strict=False)
        cyc = max(cb.port_cycles, cb.frontend_cycles)
        bottleneck = "ports" if cb.port_cycles >= cb.frontend_cycles else "front end"
        reports.append(LoopReport(min(straight), max(straight) + 1, -1, 1.0, len(straight), cyc, cyc,
                                  bottleneck, cb))
    reports.sort(key=lambda r: (r.depth < 0, r.start, r.depth))
    core_cycles = sum(r.cycles for r in reports)
    if streams is None:
        if trace is not None:
            streams = cache_traffic(trace, plat, threads)
            notes.append("memory: bytes per level from an LRU simulation of the trace (warm caches)")
        else:
            streams = _default_streams(stats)
            notes.append("memory: no streams or trace given; all accessed bytes taken as L1D hits")
    kt = kernel_time(core_cycles, streams, plat, threads, mode)
    return Prediction(seconds=kt.seconds, cycles=kt.cycles, core_cycles=core_cycles, memory=kt.memory,
                      bound=kt.bound, loops=reports, threads=threads, platform=plat.name,
                      frequency_ghz=plat.core.frequency_ghz, streams=tuple(streams), notes=tuple(notes))


__all__ = ["Loop", "LoopReport", "Prediction", "cache_traffic", "check_tsar_uops", "find_loops",
           "predict"]
