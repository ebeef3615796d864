"""Measured cycles of every registered configuration as data (:mod:`tsar.isa.measured_cycles`).

:func:`measure_all` runs :func:`~tsar.rtl.bench.measure_timing` on a port per vector width
(carrying every configuration of that width) for both LUT-group read policies, on the compiled
backend; :func:`measure_variants` measures DSE variants (``--isa`` files), each on a port of its
own, with their definitions; :func:`document` stamps it (generator, Verilator version, SHA-256 of
each port's Verilog); :func:`write` stores it where :mod:`tsar.isa.measured_cycles` reads it (the
cache, or the shipped table in a source checkout).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tsar.common.toolchain import write_atomic
from tsar.isa.config import TsarConfig, configs
from tsar.isa.measured_cycles import LUT_READ, config_key, variant_key
from tsar.rtl.bench import measure_timing

GENERATOR = "tsar rtl cycles --write"


def _by_width(cfgs: Sequence[TsarConfig]) -> dict[int, list[TsarConfig]]:
    out: dict[int, list[TsarConfig]] = {}
    for c in cfgs:
        out.setdefault(c.vector_bits, []).append(c)
    return out


def measure_all(cfgs: Sequence[TsarConfig] | None = None, backend: str = "verilator") -> dict:
    """``{config: {lut_read: {mnemonic: [latency, throughput]}}}`` (base ops under each config)."""
    units: dict[str, dict] = {}
    for bits, group in _by_width(cfgs or configs()).items():
        for policy in LUT_READ:
            timing = measure_timing(group, policy, vector_bits=bits, backend=backend)
            tsar_names = {n for c in group for n in (c.tlut_mnemonic, c.tgemv_mnemonic)}
            base = {n: [t.latency, t.throughput] for n, t in timing.items() if n not in tsar_names}
            for c in group:
                ops = {n: [timing[n].latency, timing[n].throughput]
                       for n in (c.tlut_mnemonic, c.tgemv_mnemonic)}
                units.setdefault(c.name, {})[policy] = ops | base
    return units


def _verilog_hash(bits: int, group: Sequence[TsarConfig], policy: str) -> str:
    from tsar.rtl.verilator import unit_verilog

    return hashlib.sha256(unit_verilog(bits, group, policy).encode()).hexdigest()[:16]


def measure_variants(cfgs: Sequence[TsarConfig], backend: str = "verilator") -> dict:
    """``{variant: {"definition": ..., "verilog_sha256": {lut_read: ...}, lut_read: {mnemonic:
    [latency, throughput]}}}``, each variant on a port that carries it alone; ValueError for a
    variant the RTL does not build."""
    from tsar.rtl.extension import OperandPlan

    out: dict[str, dict] = {}
    for cfg in cfgs:
        OperandPlan(cfg.vector_bits, (cfg,))  # ValueError naming the axis the RTL does not build
        entry: dict = {"definition": variant_key(cfg), "verilog_sha256": {}}
        for policy in LUT_READ:
            timing = measure_timing((cfg,), policy, vector_bits=cfg.vector_bits, backend=backend)
            entry[policy] = {n: [t.latency, t.throughput] for n, t in timing.items()}
            entry["verilog_sha256"][policy] = _verilog_hash(cfg.vector_bits, (cfg,), policy)
        out[cfg.name] = entry
    return out


def same_measurement(a: dict, b: dict) -> bool:
    """Whether two variant entries hold the same definition and cycles (hashes aside)."""
    return all(a.get(k) == b.get(k) for k in ("definition", *LUT_READ))


def document(units: dict, cfgs: Sequence[TsarConfig] | None = None,
             variants: dict | None = None) -> dict:
    from tsar.rtl.verilator import verilator_command

    version = subprocess.run([*verilator_command(), "--version"], capture_output=True,
                             text=True).stdout.strip()
    hashes = {}
    for bits, group in _by_width(cfgs or configs()).items():
        for policy in LUT_READ:
            key = f"{bits}-{'+'.join(c.name for c in group)}-{policy}"
            hashes[key] = _verilog_hash(bits, group, policy)
    doc = {"stamp": {"generator": GENERATOR, "simulator": version, "verilog_sha256": hashes,
                     "configs": {c.name: config_key(c) for c in cfgs or configs()},
                     "units": "cycles; latency = issue to the issue of a dependent instruction, "
                              "throughput = cycles per instruction back to back"},
           "units": units}
    if variants:
        doc["variants"] = variants
    return doc


def write(doc: dict, path: Path) -> Path:
    """Store ``doc`` at ``path`` (atomically; the cache or, in a source checkout, the shipped table)."""
    write_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path
