"""Timing of the T-SAR instructions (TLUT / TGEMV), derived from the ISA definition.

Assumptions (also in docs/timing.md):

* uops: the cycles the instruction occupies the port back to back, measured on the RTL with the
  LUT group latched (:func:`tsar.isa.measured_cycles.rtl_timing`, ``isa/data/rtl_cycles.json``);
  for a configuration the RTL table does not cover, ``cfg.tlut_uops`` / ``cfg.tgemv_uops`` from
  :mod:`tsar.isa.config` (paper section III-C). The two agree for every measured configuration
  but c4s4-512's TLUT: 8 cycles for 4 registers, each zmm written in two passes because it holds
  a whole block's D and S tables (``tsar.rtl.schedule.tlut_cycles``, docs/dse.md).
* ports: each uop occupies the vector ports of the dot-product path, i.e. the port usage of one
  VPMADDWD (register form, same vector width) on that microarchitecture, for as many port-cycles
  as one VPMADDWD takes (so on Gracemont, with 128-bit units, a 256-bit uop takes two passes).
* a memory operand adds ``ceil(bytes*8 / load_bits)`` load uops on the load ports.
* latency (assumption, no silicon exists): VPMADDWD latency (multiply/adder-tree pipeline depth)
  plus one cycle per further uop, as the uops issue back to back: ``L = L_vpmaddwd + uops - 1``,
  from every source (accumulator included: like VPDPBUSD, no early accumulator forwarding).
  Memory forms add the machine's L1 load-to-use latency in ``latency_max``.
* front end: every uop takes one fused-domain slot (micro-sequenced; the load is micro-fused).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tsar.sim.uarch.ports import add_usage
from tsar.sim.uarch.table import InstrTiming, Uarch

if TYPE_CHECKING:
    from tsar.isa.config import TsarConfig

DOT_PRODUCT_REFERENCE = "vpmaddwd"


def is_tsar_mnemonic(mnemonic: str) -> bool:
    from tsar.isa.instructions import by_mnemonic

    return bool(by_mnemonic(mnemonic.lower()))


def tsar_config_for(mnemonic: str, register_class: str | None = None) -> tuple[TsarConfig, str]:
    """(configuration, "tlut" | "tgemv") of a T-SAR mnemonic; ``register_class`` picks the width."""
    from tsar.isa.instructions import by_mnemonic

    specs = by_mnemonic(mnemonic.lower())
    if not specs:
        raise KeyError(f"{mnemonic!r} is not a T-SAR mnemonic")
    for spec in specs:
        if register_class is None or spec.register_class == register_class:
            return spec.config, spec.kind.value
    raise KeyError(f"{mnemonic}: no {register_class} configuration")


def issue_cycles(cfg: TsarConfig, kind: str) -> int:
    """Port cycles of one TLUT (``kind="tlut"``) or TGEMV: the RTL's measured throughput (latch
    policy) where the table has this configuration, else the ISA's uop count."""
    from tsar.isa.measured_cycles import has_rtl_timing, rtl_timing

    mnemonic = cfg.tlut_mnemonic if kind == "tlut" else cfg.tgemv_mnemonic
    if has_rtl_timing(cfg):
        return round(rtl_timing(cfg.name, mnemonic)[1])
    return cfg.tlut_uops if kind == "tlut" else cfg.tgemv_uops


def tsar_timing(uarch: Uarch, mnemonic: str, operands: tuple[str, ...]) -> InstrTiming:
    """Timing of a T-SAR form, e.g. ``("tgemv8x16", ("ymm", "ymm", "m256"))``."""
    from tsar.isa.config import VECTOR_WIDTHS

    classes = {cls for cls, _ in VECTOR_WIDTHS.values()}
    reg_class = operands[0] if operands and operands[0] in classes else None
    cfg, kind = tsar_config_for(mnemonic, reg_class)
    vec = cfg.register_class
    ref = uarch.lookup(DOT_PRODUCT_REFERENCE, (vec, vec, vec))
    uops = issue_cycles(cfg, kind)
    # Port-cycles one VPMADDWD takes on each of its groups: at least its uops, and enough to
    # reproduce its measured reciprocal throughput on the group.
    per_uop: dict[str, float] = {}
    for group, n in ref.ports.items():
        width = len(uarch.core.ports(group))
        tp = ref.recip_throughput or 0.0
        per_uop[group] = max(n, tp * width if len(ref.ports) == 1 else n)
    ports = {g: n * uops for g, n in per_uop.items()}
    mem = [k for k in operands if k.startswith("m")]
    notes = [f"ports: {uops} uops x port use of {DOT_PRODUCT_REFERENCE} {vec} (assumption)"]
    m = uarch.core
    if mem:
        bits = int(mem[0][1:])
        ports = add_usage(ports, {m.load: float(math.ceil(bits / m.load_bits))})
    lat = (ref.latency or 0.0) + uops - 1
    tp = max(n / len(m.ports(g)) for g, n in ports.items())
    return InstrTiming(
        latency=lat, latency_max=lat + m.load_latency if mem else lat, recip_throughput=tp,
        uops=float(uops), ports=ports, mnemonic=mnemonic.lower(), operands=tuple(operands),
        source="tsar-model", ports_source="assumed", notes=(
            *notes, f"latency = {DOT_PRODUCT_REFERENCE} latency {ref.latency:g} + {uops - 1} (assumption)"))
