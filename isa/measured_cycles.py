"""Cycles of the T-SAR and base instructions measured on the RTL port.

The shipped table (``isa/data/rtl_cycles.json``, :data:`SHIPPED_PATH`) is generated from the RTL by
the developer command ``tsar rtl cycles --write-source`` in a source checkout (``tsar.rtl.cycles``:
every registered configuration, both LUT-group read policies, compiled simulation) and checked
against a fresh measurement by a test. ``tsar rtl cycles --write`` stores a user's own measurement
in the cache (:func:`cache_path`), which then takes precedence on that machine
(:func:`table_path`); nothing writes into the installed package at run time. This module only
reads (``isa`` imports nothing from the layers above it).

Layout: ``{"stamp": {...}, "units": {"<config>": {"<lut_read>": {"<mnemonic>": [latency,
throughput]}}}, "variants": {...}}`` (cycles; latency: issue to the issue of a dependent
instruction; throughput: cycles per instruction, independent copies back to back). Base operations
are listed under every configuration's port.

``units`` holds the configurations the ISA registers itself (what a plain ``tsar rtl cycles``
measures; ``stamp.configs`` has their parameters). ``variants`` holds DSE variants declared in
``--isa`` files (``tsar --isa docs/dse/variants.toml rtl cycles --write``), each measured on a port
of its own and stored with its definition: ``{"<name>": {"definition": {<TsarConfig fields but
name and slot>}, "verilog_sha256": {"<lut_read>": ...}, "<lut_read>": {"<mnemonic>": [latency,
throughput]}}}``. A variant is looked up only while a configuration of that name and definition is
registered (:func:`has_rtl_timing`).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from tsar.common.errors import UserError
from tsar.common.toolchain import cache_dir

if TYPE_CHECKING:
    from tsar.isa.config import TsarConfig

SHIPPED_PATH = Path(__file__).parent / "data" / "rtl_cycles.json"
"""The table shipped with the package (regenerated in a source checkout only)."""
LUT_READ = ("latch", "ports")


def cache_path() -> Path:
    """Where ``tsar rtl cycles --write`` stores this machine's own measurement."""
    return cache_dir("rtl") / "rtl_cycles.json"


def table_path() -> Path:
    """The table in force: this machine's measurement if there is one, else the shipped table."""
    own = cache_path()
    return own if own.is_file() else SHIPPED_PATH


def source_path() -> Path:
    """:data:`SHIPPED_PATH` when this package is a source checkout (its ``pyproject.toml`` beside
    it); else a :class:`UserError`: an installed package is never written."""
    if not (SHIPPED_PATH.parents[2] / "pyproject.toml").is_file():
        raise UserError(f"{SHIPPED_PATH.parent}: not a source checkout; --write stores the table in "
                        "the cache instead")
    return SHIPPED_PATH


@cache
def _read(path: Path, mtime_ns: int) -> dict:
    return json.loads(path.read_text())


def read_table(path: Path) -> dict:
    """One table document (re-read when the file changes; FileNotFoundError if absent)."""
    return _read(path, path.stat().st_mtime_ns)


def table() -> dict:
    """The document in force (:func:`table_path`; FileNotFoundError if there is none)."""
    return read_table(table_path())


def variants() -> dict[str, dict]:
    """The stored DSE-variant measurements (``{}`` when there are none)."""
    return table().get("variants", {})


def rtl_timing(config_name: str, mnemonic: str, lut_read: str = "latch") -> tuple[int, float]:
    """``(latency, throughput)`` in cycles of ``mnemonic`` on the RTL port of ``config_name`` (a
    configuration of ``units`` or a stored variant); KeyError naming what is missing."""
    if lut_read not in LUT_READ:
        raise KeyError(f"lut_read={lut_read!r}: expected one of {', '.join(LUT_READ)}")
    units = table()["units"] | variants()
    if config_name not in units:
        raise KeyError(f"{config_name}: no RTL measurement in {table_path()} "
                       f"(measured: {', '.join(units)})")
    ops = units[config_name][lut_read]
    if mnemonic.lower() not in ops:
        raise KeyError(f"{mnemonic}: not measured on the {config_name} port ({table_path()})")
    latency, throughput = ops[mnemonic.lower()]
    return int(latency), float(throughput)


def config_key(cfg: TsarConfig) -> dict[str, int]:
    """The parameters a measurement depends on (stored in the stamp, compared on lookup)."""
    return {"vector_bits": cfg.vector_bits, "group_regs": cfg.group_regs,
            "weight_regs": cfg.weight_regs, "tlut_uops": cfg.tlut_uops, "tgemv_uops": cfg.tgemv_uops}


def variant_key(cfg: TsarConfig) -> dict[str, object]:
    """The definition a variant's measurement is stored with (its fields but name and slot: the
    encoding slot does not change the port)."""
    return {k: v for k, v in cfg.definition().items() if k not in ("name", "slot")}


def has_rtl_timing(cfg: TsarConfig) -> bool:
    """Whether the table has measurements of ``cfg``: same name and same parameters (a
    configuration of ``units``) or same name and definition (a stored variant); a configuration
    redefined since the table was generated has none."""
    try:
        doc = table()
    except FileNotFoundError:
        return False
    if doc["stamp"]["configs"].get(cfg.name) == config_key(cfg):
        return True
    stored = doc.get("variants", {}).get(cfg.name)
    return stored is not None and stored["definition"] == variant_key(cfg)
