"""Core (in-core execution) bound of a loop: port pressure, front end and loop-carried chains.

Method (steady state, per loop iteration; all results in core cycles):

* **ports**: each instruction's port usage (``InstrTiming.ports``) times its per-iteration weight;
  uops are distributed optimally over their allowed ports (:mod:`tsar.sim.timing.ports`); the bound is
  the busiest port's load.
* **front end**: fused-domain uops / issue (rename) width. A conditional branch directly after a
  flag-setting ``cmp/test/add/sub/and/inc/dec`` on registers is macro-fused: the pair counts one
  slot and issues only the branch's port uop (assumption, true for Golden Cove and Zen 4).
* **taken branch**: a loop that contains a branch needs at least one cycle per iteration (one
  taken branch per cycle on every modelled core; assumption).
* **dependencies**: the longest loop-carried recurrence. The body (instructions executed at least
  once every two iterations, in program order) gives for each register the longest latency path
  from every register's value at iteration start; the recurrence bound is the maximum cycle mean
  of that register-to-register matrix (Karp's algorithm), so chains spanning several iterations
  are handled. Sources read as data cost ``latency``; address registers cost ``latency_max``
  (through the load). Zero idioms (``vpxor x, y, y`` ...) break dependencies. Dependencies through
  memory: a store and a load of the same address expression whose address registers the loop
  never writes (stack slots: ``[rsp+0x6e8]``) are linked, the load's value arriving the core's
  store-to-load forwarding latency after the store's data (plus the operation's own latency
  for a load-op form); stores through changing pointers are not linked.

``cycles = max(ports, front end, taken branch, dependencies)``: the usual throughput model
(OSACA / llvm-mca style), optimistic when several bounds are close.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache

from tsar.sim.timing.ports import port_bound
from tsar.sim.timing.profile import InstructionForm, LoopProfile
from tsar.sim.uarch import InstrTiming, Uarch, UarchDataMissing, timing_of

_FUSIBLE = {"cmp", "test", "add", "sub", "and", "inc", "dec"}
_ZERO_IDIOMS = {"xor", "sub", "pxor", "vpxor", "vpxord", "vpxorq", "xorps", "vxorps", "xorpd",
                "vxorpd", "psubb", "psubw", "psubd", "psubq", "vpsubb", "vpsubw", "vpsubd",
                "vpsubq", "pcmpgtb", "pcmpgtw", "pcmpgtd", "vpcmpgtb", "vpcmpgtw", "vpcmpgtd"}
_IGNORED_REGS = {"rip"}


@dataclass(frozen=True)
class CoreBound:
    """Core-bound estimate of one loop (cycles per iteration unless noted)."""

    cycles: float
    port_cycles: float
    frontend_cycles: float
    branch_cycles: float
    dependency_cycles: float
    bottleneck: str
    port_loads: dict[str, float]
    uops: float                           # fused-domain uops per iteration
    dependency_registers: tuple[str, ...]  # registers on the critical recurrence
    iterations: float
    timings: tuple[tuple[InstructionForm, float, InstrTiming], ...] = field(repr=False, default=())
    missing: tuple[str, ...] = ()
    fallbacks: tuple[str, ...] = ()
    fused_pairs: int = 0

    @property
    def total_cycles(self) -> float:
        """Cycles for all iterations of the profiled loop."""
        return self.cycles * self.iterations

    @property
    def complete(self) -> bool:
        return not self.missing


_MOVES = {"mov", "vmovdqa", "vmovdqu", "vmovdqa64", "vmovdqu8", "vmovaps", "vmovups", "vmovapd",
          "vmovupd", "movaps", "movups", "movdqa", "movdqu"}
ELIMINATED_MOVE = InstrTiming(latency=0.0, recip_throughput=0.0, uops=1.0, ports={}, latency_max=0.0,
                              source="move elimination (assumed)", ports_source="none",
                              notes=("register-to-register move renamed away: one front-end slot, "
                                     "no execution port, zero latency",))
"""Timing used for register-to-register moves that the tables lack (move elimination at rename,
done by Zen 4 and Golden Cove for full-width vector and 64-bit GPR moves)."""


def _eliminated_move(form: InstructionForm) -> bool:
    ops = form.operands
    return (form.mnemonic in _MOVES and len(ops) == 2 and ops[0] == ops[1]
            and ops[0] in ("xmm", "ymm", "zmm", "r64"))


def _is_cond_branch(mnemonic: str) -> bool:
    return mnemonic.startswith("j") and mnemonic != "jmp"


def _fusible(form: InstructionForm) -> bool:
    return form.mnemonic in _FUSIBLE and not any(k.startswith("m") for k in form.operands)


def core_bound(profile: LoopProfile, uarch: Uarch, *, issue_width: float | None = None,
               strict: bool = True) -> CoreBound:
    """Core bound of ``profile`` on ``uarch`` (see the module docstring for the method).

    ``issue_width`` overrides the machine's rename width (e.g. a platform whose core is wider
    than its proxy data set). With ``strict=False`` forms without data are skipped and listed in
    ``missing`` instead of raising :class:`UarchDataMissing`. The per-iteration bound depends on
    the body and its per-iteration weights only: it is computed once per (body, core, width) in a
    process (a layer modelled on several platforms, thread counts and models meets the same loops).
    """
    bound = _per_iteration(tuple(profile.per_iteration()), uarch, issue_width, strict)
    return replace(bound, iterations=profile.iterations)


@lru_cache(maxsize=16384)
def _per_iteration(body: tuple[tuple[InstructionForm, float], ...], uarch: Uarch,
                   issue_width: float | None, strict: bool) -> CoreBound:
    width = float(issue_width or uarch.core.issue_width)
    timed: list[tuple[InstructionForm, float, InstrTiming]] = []
    missing: list[str] = []
    for form, weight in body:
        try:
            timed.append((form, weight, timing_of(uarch, form.mnemonic, form.operands)))
        except UarchDataMissing:
            if _eliminated_move(form):
                timed.append((form, weight, ELIMINATED_MOVE))
                continue
            if strict:
                raise
            missing.append(form.label)
    fused = _fused_indices(timed)
    demands, uops, has_branch = [], 0.0, False
    for i, (form, weight, t) in enumerate(timed):
        has_branch |= form.mnemonic.startswith("j")
        if i in fused:  # the ALU half of a macro-fused pair: no slot, no port of its own
            continue
        uops += t.uops * weight
        demands += [(uarch.core.ports(g), n * weight) for g, n in t.ports.items()]
    port_cycles, loads = port_bound(demands)
    frontend = uops / width
    branch = 1.0 if has_branch else 0.0
    forward = uarch.core.store_forward_latency
    dep, regs = dependency_bound(timed, uarch.core.load_latency if forward is None else forward)
    parts = {"ports": port_cycles, "front end": frontend, "taken branch": branch, "dependency": dep}
    bottleneck = max(parts, key=lambda k: parts[k])
    if bottleneck == "ports" and loads:
        top = max(loads.values())
        bottleneck = "ports " + "+".join(p for p, v in sorted(loads.items()) if v >= top - 1e-6)
    return CoreBound(
        cycles=max(parts.values()), port_cycles=port_cycles, frontend_cycles=frontend,
        branch_cycles=branch, dependency_cycles=dep, bottleneck=bottleneck, port_loads=loads,
        uops=uops, dependency_registers=regs, iterations=1.0, timings=tuple(timed),
        missing=tuple(missing),
        fallbacks=tuple(f"{f.label}: {t.source}" for f, _, t in timed if t.source != "exact"),
        fused_pairs=len(fused))


def _fused_indices(timed: list[tuple[InstructionForm, float, InstrTiming]]) -> set[int]:
    out = set()
    for i in range(1, len(timed)):
        prev, cur = timed[i - 1][0], timed[i][0]
        if _is_cond_branch(cur.mnemonic) and _fusible(prev) and i - 1 not in out:
            out.add(i - 1)
    return out


def _is_zero_idiom(form: InstructionForm) -> bool:
    if form.mnemonic not in _ZERO_IDIOMS or form.address_reads:
        return False
    if any(k.startswith(("m", "imm")) and k != "mm" for k in form.operands):
        return False
    return len({r for r in form.reads if r != "flags"}) == 1


def dependency_bound(timed: list[tuple[InstructionForm, float, InstrTiming]],
                     forward_latency: float | None = None) -> tuple[float, tuple[str, ...]]:
    """(cycles per iteration, registers on the critical cycle) of the loop-carried chains;
    ``forward_latency``: store-to-load forwarding cycles (None: memory dependencies ignored).
    A memory slot takes part as the pseudo-register ``[<address expression>]``."""
    dist: dict[str, dict[str, float]] = {}  # reg -> {register at iteration start: longest path}
    body = [(f, w, t) for f, w, t in timed if w >= 0.5]
    written = {r for f, _, _ in body for r in f.writes}

    def slot(form: InstructionForm) -> str | None:
        if forward_latency is None or not form.mem_key or any(r in written for r in form.address_reads):
            return None
        return f"[{form.mem_key}]"

    def deps_of(reg: str) -> dict[str, float]:
        return dist.get(reg, {reg: 0.0})

    stored = {slot(f) for f, _, _ in body if f.mem_write_bytes > 0} - {None}
    for form, _, t in body:
        mem = slot(form)
        stores = mem is not None and form.mem_write_bytes > 0
        if not form.writes and not stores:
            continue
        lat = t.latency or 0.0
        lat_mem = t.latency_max if t.latency_max is not None else lat
        incoming: dict[str, float] = {}
        sources = [] if _is_zero_idiom(form) else [(r, lat) for r in form.reads]
        sources += [(r, lat_mem) for r in form.address_reads]
        if mem is not None and form.mem_read_bytes > 0 and mem in stored:
            # forwarded from a store earlier in this iteration or (through the cycle) the last
            op = lat if [r for r in form.reads if r not in form.address_reads and r != "flags"] else 0.0
            sources.append((mem, float(forward_latency or 0.0) + op))  # type: ignore[arg-type]
        for reg, cost in sources:
            if reg in _IGNORED_REGS:
                continue
            for origin, d in deps_of(reg).items():
                incoming[origin] = max(incoming.get(origin, -math.inf), d + cost)
        if stores:  # the slot holds the store's data: its sources at cost 0 (latency on the load)
            data: dict[str, float] = {}
            for reg in form.reads:
                if reg not in _IGNORED_REGS and reg not in form.address_reads:
                    for origin, d in deps_of(reg).items():
                        data[origin] = max(data.get(origin, -math.inf), d)
            dist[mem] = data  # type: ignore[index]
        for reg in form.writes:
            if reg not in _IGNORED_REGS:
                dist[reg] = dict(incoming)
    return _max_cycle_mean(dist)


def _max_cycle_mean(dist: dict[str, dict[str, float]]) -> tuple[float, tuple[str, ...]]:
    nodes = sorted(set(dist) | {o for d in dist.values() for o in d})
    if not nodes:
        return 0.0, ()
    edges = [(o, w, d) for w, deps in dist.items() for o, d in deps.items()]
    n = len(nodes)
    neg = -math.inf
    table = [dict.fromkeys(nodes, 0.0)]
    for _ in range(n):
        prev, cur = table[-1], dict.fromkeys(nodes, neg)
        for u, v, w in edges:
            if prev[u] > neg and prev[u] + w > cur[v]:
                cur[v] = prev[u] + w
        table.append(cur)
    best, arg = 0.0, None
    for v in nodes:
        if table[n][v] == neg:
            continue
        val = min((table[n][v] - table[k][v]) / (n - k) for k in range(n) if table[k][v] > neg)
        if val > best + 1e-12:
            best, arg = val, v
    if arg is None:
        return 0.0, ()
    on_cycle = tuple(r for r in nodes if dist.get(r, {}).get(r, neg) >= best - 1e-9)
    return best, on_cycle or (arg,)
