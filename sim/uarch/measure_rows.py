"""Table rows (:class:`tsar.sim.uarch.measured.TableRow`) from a :class:`~tsar.sim.uarch.measure.Measurement`.

Measured: ``latency``, ``latency_max`` (memory forms: plus the measured load-to-use latency),
``recip_throughput``. Not measured (no performance counters): ``uops``, taken from the base table's
row of the same form (or its fallback), else 1. ``ports``: ``pairing`` where pairing resolved the
register form's ports (:mod:`tsar.sim.uarch.pairing`; memory forms add their load/store uops:
``pairing+mem``), else ``derived`` as for the other tables without port data
(``data/README.md``): the base core's class port group, its count raised to reproduce the
measured throughput (:func:`tsar.sim.uarch.build.derive_ports`).
"""

from __future__ import annotations

import math
from dataclasses import replace

from tsar.sim.uarch.build import Row, derive_ports, exec_class, is_pure_move, memory_role
from tsar.sim.uarch.measure import Measurement, VariantResult
from tsar.sim.uarch.measured import TableRow
from tsar.sim.uarch.ports import add_usage
from tsar.sim.uarch.table import InstrTiming, Uarch, UarchDataMissing
from tsar.sim.x86.forms import Form

UNSTEADY = 0.10
"""A spread ((max - min) / median over trials) above which a row's notes say so."""
_OWN_FAMILY = ("AVX", "AVX2", "FMA", "F16C", "BMI1", "BMI2", "AVX_VNNI")


def family(form: Form) -> str:
    """The tables' ``family`` of a form (``AVX512EVEX`` for every EVEX form)."""
    if form.evex:
        return "AVX512EVEX"
    if form.extension in _OWN_FAMILY:
        return form.extension
    return "AVX512VEX" if form.extension.startswith("AVX512") else form.extension


def source(m: Measurement) -> str:
    """The ``source`` column: ``measured:<CPU model name>``."""
    return f"measured:{m.cpu.name or m.cpu.key}"


def _uops(base: Uarch, r: VariantResult, notes: list[str]) -> float:
    mnemonic, operands = r.key
    exact = base.row(mnemonic, operands)
    if exact is not None:
        return exact.uops
    try:
        found = base.lookup(mnemonic, operands)
    except UarchDataMissing:
        notes.append(f"uops: assumed 1 (no {base.name} row)")
        return 1.0
    notes.append(f"uops from {base.name} ({found.source})")
    return found.uops


def _with_memory(usage: dict[str, float], row: Row, base: Uarch) -> dict[str, float]:
    """A register form's port usage plus the load/store uops of ``row``'s memory operand."""
    role, bits = memory_role(row)
    extra = {}
    if role in ("load", "rmw"):
        extra[base.core.load] = float(math.ceil(bits / base.core.load_bits))
    if role in ("store", "rmw"):
        extra[base.core.store] = float(math.ceil(bits / base.core.store_bits))
    return add_usage(usage, extra)


def _paired_usage(ports: dict[str, float], uops: float, base: Uarch, notes: list[str]) -> dict[str, float]:
    """Pairing's usage of a register form, plus the uops it cannot see (a form of several uops
    shows only its bottleneck port): those beyond its count go on the whole vector group."""
    rest = round(uops - sum(ports.values()), 2)
    if rest < 0.5:
        return dict(ports)
    notes.append(f"ports: pairing sees the bottleneck, {rest:g} more uop(s) of the base table's count "
                 f"on {base.core.vector}")
    return add_usage(ports, {base.core.vector: rest})


def table_rows(m: Measurement, base: Uarch) -> list[TableRow]:
    """One row per measured variant (failed and empty ones left out)."""
    rows = []
    register_tp: dict[tuple[str, str], float] = {}
    register_usage: dict[tuple[str, str], dict[str, float]] = {}
    for r in m.results:  # a form's register variant comes before its memory variant
        if r.failed or (r.latency is None and r.throughput is None):
            continue
        twin = (r.form.name, r.key[0])
        notes = list(r.notes)
        for what, sample in (("latency", r.latency), ("throughput", r.throughput)):
            if sample is not None and sample.spread > UNSTEADY:
                notes.append(f"{what} spread {100 * sample.spread:.0f} % over trials")
        uops = _uops(base, r, notes)
        lat = None if r.latency is None else round(r.latency.value, 2)
        lat_max = None if r.latency_max is None else round(r.latency_max, 2)
        tp = None if r.throughput is None else round(r.throughput.value, 3)
        fam = family(r.form)
        row = Row(r.key[0], r.key[1], fam, lat, lat_max, tp, uops, None, {}, "")
        if not r.memory and tp is not None:
            register_tp[twin] = tp
        if not r.memory and lat is not None and lat < 0.5 and is_pure_move(r.key[0]):
            ports, how = {}, "none"  # a register move eliminated at rename: no execution port
            notes.append("move eliminated at rename (latency < 0.5 cycles): no port")
        elif r.ports:
            ports, how = _paired_usage(r.ports, uops, base, notes), "pairing"
            register_usage[twin] = ports
        elif r.memory and twin in register_usage and exec_class(row) != "none":  # not a pure load/store
            ports, how = _with_memory(register_usage[twin], row, base), "pairing+mem"
        else:
            ports = derive_ports(row, base.core, register_tp.get(twin) if r.memory else None) \
                if tp is not None else {}
            how = "derived" if ports else "none"
        rows.append(TableRow(r.key[0], r.key[1], lat, lat_max, tp, uops, ports, how, fam, source(m),
                             tuple(notes), r.latency_how))
    return rows


def comparable(rows: list[TableRow]) -> list[InstrTiming]:
    """``rows`` as the lookup returns them, for :func:`tsar.sim.uarch.agreement.compare`: latencies
    that no chain measured (pure loads, memory forms that took their register form's) left out."""
    return [replace(r.timing(), latency=r.latency if r.latency_how == "chain" else None) for r in rows]
