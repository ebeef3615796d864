"""Port groups by pairing: which vector ports a form uses, inferred from throughput alone (no
performance counters), by running it together with *blockers*, forms that use one known port.

Blockers come from the base table (a register form that table gives exactly one vector port, one
uop and a reciprocal throughput of 1 cycle, e.g. ``vpermd ymm`` on p5 of Intel cores), and are
accepted only if they measure 1 cycle here too and two blockers of different ports do not slow
each other down. A form X (register variant, vector operands only, pipelined: measured
throughput ``t`` <= 1 cycle) then runs as ``k`` copies interleaved with ``j`` copies of a blocker
B, sized so that each alone would take the same time (``k t = j``). If X does not use B's port
the mix takes that time; if it does, its work and B's share X's ports, and the mix takes
``1 + 1/|S|`` times as long (``|S|``: the number of ports X can use). So X's ports are the blocked
ports it slows down, plus the one vector port without a blocker where the slowdown says X has
more ports than those (or where it slows none). The usage written is ``t * |S|`` port-cycles on
that group (``ports_source`` ``pairing``). Forms it cannot resolve keep derived ports.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tsar.sim.uarch.microbench import Plan, plan
from tsar.sim.uarch.table import Uarch
from tsar.sim.x86.forms import Form

CONFLICT = 1.2
"""A mix at least this much slower than its parts alone means a shared port (a shared port makes
it 1 + 1/|S| times slower: at least 1.25 for the up to four vector ports of current cores)."""
CANDIDATES = 3
"""Blocker candidates tried per port."""


@dataclass(frozen=True)
class Blocker:
    """A single-port form measured here at ``recip_throughput`` cycles."""

    port: str
    plan: Plan
    recip_throughput: float


def vector_ports(base: Uarch) -> tuple[str, ...]:
    """The base core's vector ports (``p0``, ``p1``, ``p5`` on Intel cores)."""
    return base.core.ports(base.core.vector)


def _blocker_form(p: Plan) -> bool:
    regs = p.registers
    return (not p.memory and not p.skip and p.dest is not None and not p.dest.read
            and p.dest.cls in ("vec", "gpr") and all(o.cls == "vec" for o in regs if o is not p.dest))


def blocker_candidates(base: Uarch, forms: Iterable[Form]) -> dict[str, list[Plan]]:
    """Per vector port of the base core, up to :data:`CANDIDATES` register forms the base table
    puts on that port alone (one uop, 1 cycle), vector destinations and low latency first."""
    ports = set(vector_ports(base))
    plans: dict[tuple[str, tuple[str, ...]], Plan] = {}
    for form in forms:
        if form.evex:
            continue
        p = plan(form, False)
        if p.skip is None and p.key not in plans and "ymm" in p.kinds:
            plans[p.key] = p
    found: dict[str, list[tuple[tuple[int, float], Plan]]] = {}
    for key, p in plans.items():
        row = base.row(*key)
        if row is None or row.uops != 1 or row.recip_throughput != 1 or len(row.ports) != 1:
            continue
        (group, count), = row.ports.items()
        members = base.core.ports(group)
        if count != 1 or len(members) != 1 or members[0] not in ports or not _blocker_form(p):
            continue
        found.setdefault(members[0], []).append(((p.dest.cls != "vec", row.latency or 0.0), p))
    return {port: [p for _, p in sorted(c, key=lambda t: t[0])[:CANDIDATES]] for port, c in found.items()}


def counts(x_tp: float, b_tp: float, rw_latency: float | None, margin: float = 1.3) -> tuple[int, int]:
    """(copies of X, copies of the blocker) per period, so that each alone takes the same time;
    a read-write destination's chain (``rw_latency``) must fit in the period with a ``margin``,
    or the chain, not the ports, would set the pace."""
    if rw_latency:
        low = math.ceil(margin * rw_latency / x_tp)

        def imbalance(k: int) -> float:
            j = max(1, round(k * x_tp / b_tp))
            return abs(k * x_tp - j * b_tp) / (j * b_tp)

        k = min(range(low, low + 4), key=lambda n: (imbalance(n) > 0.05, n))
        return k, max(1, round(k * x_tp / b_tp))
    return max(1, round(4 * b_tp / x_tp)), 4


def fit(x: Plan, b: Plan, x_tp: float, b_tp: float,
        rw_latency: float | None) -> tuple[int, int, list[bytes]] | None:
    """(k, j, period) of the mix of X and B, the margin of a read-write chain lowered from 1.3 to
    1.1 where registers are short; None where even that does not fit."""
    for margin in (1.3, 1.2, 1.1):
        k, j = counts(x_tp, b_tp, rw_latency, margin)
        body = mixed(x, b, k, j)
        if body is not None:
            return k, j, body
        if not rw_latency:
            break
    return None


def mixed(x: Plan, b: Plan, k: int, j: int) -> list[bytes] | None:
    """A period of ``k`` copies of X and ``j`` of blocker B, interleaved evenly; X's read-write
    destinations distinct (else two, rotating), B's registers apart from X's and within B's
    register file (an EVEX X uses registers 16-31, a VEX B 0-15), every source a register the
    period never writes. None if the registers do not suffice."""
    assert x.dest is not None and b.dest is not None
    pool = x.pool("vec")
    others = [o for o in x.registers if o.index != x.dest.index]
    n_dest = k if x.dest.read else 2
    b_sources = [o for o in b.registers if o.cls == "vec" and o.index != b.dest.index]
    apart = len(pool) > b.form.vector_registers
    x_pool = pool[b.form.vector_registers:] if apart else pool
    top = x_pool[::-1]
    fixed = {o.index: top[i] for i, o in enumerate(others)}
    dests = x_pool[:n_dest]
    if apart:
        if n_dest + len(others) > len(x_pool) or 1 + len(b_sources) > b.form.vector_registers:
            return None
        b_dest, readable = 0, list(range(1, b.form.vector_registers))
    else:
        b_dest = x_pool[n_dest] if b.dest.cls == "vec" else 0  # a GPR destination: rax
        if n_dest + 1 + len(others) > len(pool) or b_dest >= b.form.vector_registers:
            return None
        # B reads X's fixed registers (never written in the period), else registers above its dest
        readable = [r for r in fixed.values() if r < b.form.vector_registers]
        readable += [r for r in range(n_dest + 1, b.form.vector_registers) if r not in fixed.values()]
    if len(readable) < len(b_sources):
        return None
    b_regs = {b.dest.index: b_dest, **{o.index: readable[i] for i, o in enumerate(b_sources)}}
    xs = [x.encode({**fixed, x.dest.index: dests[i % n_dest]}) for i in range(k)]
    bs = b.encode(b_regs)
    out: list[bytes] = []
    done_x = done_b = 0
    while done_x < k or done_b < j:  # even interleave: whichever is behind its share goes next
        if done_b >= j or (done_x < k and done_x * j <= done_b * k):
            out.append(xs[done_x])
            done_x += 1
        else:
            out.append(bs)
            done_b += 1
    return out


def slowdown(period_cycles: float, k: int, j: int, x_tp: float, b_tp: float) -> float:
    """How much slower the mix ran than its slower part alone."""
    return period_cycles / max(k * x_tp, j * b_tp)


def sharing_ports(period_cycles: float, k: int, j: int, x_tp: float, b_tp: float) -> float:
    """The number of ports X spreads over, from a mix that shares B's port: X's ``k t`` cycles of
    work on ``|S|`` ports plus B's ``j t_B`` on one of them take ``k t + j t_B / |S|``."""
    return j * b_tp / max(period_cycles - k * x_tp, 1e-3)


@dataclass(frozen=True)
class Mix:
    """A measured mix of X with one blocker: cycles per period, copies, the blocker's throughput."""

    period: float
    k: int
    j: int
    b_tp: float


def infer(mixes: Mapping[str, Mix], blocked: Iterable[str], ports: tuple[str, ...], x_tp: float,
          prefix: str) -> dict[str, float] | None:
    """Port usage from the mixes with each port of ``blocked`` (see the module docstring), or
    None where they do not determine it."""
    blocked = set(blocked)
    if set(mixes) != blocked:
        return None  # a mix was not measured
    unblocked = [p for p in ports if p not in blocked]
    used = {p for p, m in mixes.items() if slowdown(m.period, m.k, m.j, x_tp, m.b_tp) >= CONFLICT}
    if not used:
        if len(unblocked) != 1:
            return None
        chosen = set(unblocked)
    else:
        size = statistics.median(sharing_ports(m.period, m.k, m.j, x_tp, m.b_tp)
                                 for p, m in mixes.items() if p in used)
        chosen = used | (set(unblocked) if round(size) > len(used) and len(unblocked) == 1 else set())
    group = prefix + "".join(p[len(prefix):] for p in ports if p in chosen)
    return {group: round(x_tp * len(chosen), 2)}
