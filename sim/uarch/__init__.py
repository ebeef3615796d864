"""Microarchitecture data: per-instruction latency/throughput/port tables and their lookup.

``tsar.sim.uarch.load(name)`` returns a :class:`Uarch` for one of :data:`UARCH_NAMES` (``zen5``,
``zen4``, ``zen3``, ``zen2``, ``alderlakep`` = Golden Cove, ``gracemont``, ``icelake``,
``tigerlake``, ``rocketlake``, ``skylake``, ``skylakex``, ``cascadelake``, ``haswell``);
or for a table file (``load(path)``, :func:`load_table`: e.g. one ``tsar uarch measure`` measured
on the host, laid over the shipped table it names as its base);
``Uarch.lookup(mnemonic, operand_kinds)``
returns an :class:`InstrTiming`. T-SAR instructions are timed by :func:`timing_of` /
:func:`tsar_timing` from the ISA definition. Data provenance: ``data/README.md``.
"""

from __future__ import annotations

from tsar.sim.uarch.cores import CoreDescription, core_description, core_descriptions
from tsar.sim.uarch.ports import format_usage, parse_usage, split_group
from tsar.sim.uarch.table import (
    UARCH_NAMES,
    InstrTiming,
    Uarch,
    UarchDataMissing,
    UarchTableError,
    canonical_mnemonic,
    load,
    load_table,
)
from tsar.sim.uarch.tsar_ops import is_tsar_mnemonic, tsar_timing


def timing_of(uarch: Uarch, mnemonic: str, operands: tuple[str, ...]) -> InstrTiming:
    """Table lookup for x86 forms, the T-SAR model for TLUT/TGEMV."""
    if is_tsar_mnemonic(mnemonic):
        return tsar_timing(uarch, mnemonic, tuple(operands))
    return uarch.lookup(mnemonic, tuple(operands))


__all__ = [
    "UARCH_NAMES",
    "CoreDescription",
    "InstrTiming",
    "Uarch",
    "UarchDataMissing",
    "UarchTableError",
    "canonical_mnemonic",
    "core_description",
    "core_descriptions",
    "format_usage",
    "is_tsar_mnemonic",
    "load",
    "load_table",
    "parse_usage",
    "split_group",
    "timing_of",
    "tsar_timing",
]
