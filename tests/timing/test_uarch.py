"""Instruction-table lookups against the source CSV values, fallbacks and T-SAR timings."""

from __future__ import annotations

import pytest

import tsar.sim.uarch as uarch
from tsar.isa.config import C2S4, C4S4

# (uarch, mnemonic, kinds, latency, recip_throughput, uops, ports) from the uops.info CSVs.
KNOWN = [
    ("alderlakep", "vpshufb", ("ymm", "ymm", "ymm"), 1, 0.5, 1, {"p15": 1}),
    ("alderlakep", "vpshufb", ("ymm", "ymm", "m256"), 1, 0.5, 2, {"p15": 1, "p23A": 1}),
    ("alderlakep", "vpmaddwd", ("ymm", "ymm", "ymm"), 5, 0.5, 1, {"p01": 1}),
    ("alderlakep", "vpaddw", ("ymm", "ymm", "ymm"), 1, 0.33, 1, {"p015": 1}),
    ("alderlakep", "vmovdqu", ("m256", "ymm"), 4, 0.5, 1, {"p49": 1, "p78": 1}),
    ("alderlakep", "jnz", ("rel8",), None, 0.5, 1, {"p06": 1}),
    ("zen4", "vpshufb", ("ymm", "ymm", "ymm"), 2, 0.5, 1, {"FP12": 1}),
    ("zen4", "vpmaddubsw", ("ymm", "ymm", "ymm"), 3, 0.5, 1, {"FP01": 1}),
    ("zen4", "vpaddd", ("ymm", "ymm", "ymm"), 1, 0.25, 1, {"FP0123": 1}),
    ("skylake", "vpshufb", ("ymm", "ymm", "ymm"), 1, 1.0, 1, {"p5": 1}),
    ("gracemont", "vpmaddwd", ("ymm", "ymm", "ymm"), 2.99, 1.992, 2, {"V012": 6}),  # InstLatx64
]


@pytest.mark.parametrize(("name", "mn", "kinds", "lat", "tp", "uops", "ports"), KNOWN)
def test_known_forms(name, mn, kinds, lat, tp, uops, ports) -> None:
    t = uarch.load(name).lookup(mn, kinds)
    assert t.exact and t.latency == lat and t.recip_throughput == pytest.approx(tp)
    assert t.uops == uops and t.ports == ports


def test_zen4_memory_form_gets_load_port() -> None:
    t = uarch.load("zen4").lookup("vpshufb", ("ymm", "ymm", "m256"))
    assert t.ports == {"FP12": 1, "LD012": 1} and t.ports_source == "measured+mem"
    assert (t.latency, t.latency_max) == (2, 11)


def test_iced_spellings_and_aliases() -> None:
    u = uarch.load("alderlakep")
    assert u.lookup("JNE", ("rel8",)).mnemonic == "jnz"
    assert uarch.canonical_mnemonic("cmovae") == "cmovnb"
    assert uarch.canonical_mnemonic("jg") == "jnle"


def test_fallback_other_width_is_flagged() -> None:
    u = uarch.load("alderlakep")
    t = u.lookup("add", ("r64", "imm16"))
    assert t.source.startswith("fallback") and t.notes


def test_fallback_scales_wider_than_datapath() -> None:
    g = uarch.load("gracemont")
    narrow = g.lookup("vpaddd", ("ymm", "ymm", "ymm"))
    wide = g.lookup("vpaddd", ("zmm", "zmm", "zmm"))  # Gracemont has no AVX-512: 4 passes of 128
    assert wide.source.startswith("fallback")
    assert wide.recip_throughput == pytest.approx(2 * narrow.recip_throughput)


def test_memory_form_synthesized_from_register_form() -> None:
    t = uarch.load("zen4").lookup("vpaddw", ("ymm", "ymm", "m32_1to8"))
    assert t.source.startswith("synthesized") and t.ports["LD012"] == 1


def test_missing_data_is_an_error() -> None:
    with pytest.raises(uarch.UarchDataMissing, match="no timing data for frobnicate"):
        uarch.load("zen4").lookup("frobnicate", ("ymm",))
    with pytest.raises(uarch.UarchDataMissing):
        uarch.load("skylake").lookup("vpdpbusd", ("ymm", "ymm", "ymm"))  # no VNNI on Skylake


@pytest.mark.parametrize("name", uarch.UARCH_NAMES)
def test_tsar_uops_and_ports_follow_isa(name: str) -> None:
    u = uarch.load(name)
    ref = u.lookup("vpmaddwd", ("ymm", "ymm", "ymm"))
    tl = uarch.timing_of(u, "tlut2x4", ("ymm", "m64"))
    tg = uarch.timing_of(u, "tgemv8x16", ("ymm", "ymm", "ymm"))
    tg4 = uarch.timing_of(u, "tgemv16x16", ("ymm", "ymm", "m512"))
    assert (tl.uops, tg.uops, tg4.uops) == (C2S4.tlut_uops, C2S4.tgemv_uops, C4S4.tgemv_uops)
    assert set(tg.ports) == set(ref.ports)  # the dot-product ports
    assert tg.latency == ref.latency + C2S4.tgemv_uops - 1
    assert u.core.load in tl.ports and u.core.load in tg4.ports


def test_tsar_golden_cove_numbers() -> None:
    tg = uarch.timing_of(uarch.load("alderlakep"), "tgemv8x16", ("ymm", "ymm", "ymm"))
    assert tg.ports == {"p01": 4} and tg.recip_throughput == 2 and tg.latency == 8
