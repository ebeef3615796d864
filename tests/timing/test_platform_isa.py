"""Platforms declare the vector extensions their cores execute; the model refuses code that needs
one they lack, naming the instruction."""

from __future__ import annotations

import iced_x86 as iced
import pytest

from tsar.sim import platforms
from tsar.sim.platforms.schema import PlatformError, platform_from_dict
from tsar.sim.timing.adapters import form_from_iced
from tsar.sim.timing.predict import UnsupportedIsa, check_isa
from tsar.sim.x86.forms import VECTOR_ISA_FLAGS

VPDPBUSD_ZMM = "62f26d4850cb"    # vpdpbusd zmm1, zmm2, zmm3 (EVEX, AVX512_VNNI)
VPDPBUSD_VEX = "c4e26d50cb"      # {vex} vpdpbusd ymm1, ymm2, ymm3 (AVX-VNNI)
VPADDD_YMM = "c5edfecb"          # vpaddd ymm1, ymm2, ymm3 (AVX2)


def _forms(*hexes: str) -> dict[int, object]:
    out = {}
    for i, h in enumerate(hexes):
        ins = iced.Decoder(64, bytes.fromhex(h), ip=0x1000 + 16 * i).decode()
        out[ins.ip] = form_from_iced(ins)
    return out


def test_forms_carry_the_flags_they_need() -> None:
    forms = list(_forms(VPDPBUSD_ZMM, VPDPBUSD_VEX, VPADDD_YMM).values())
    assert forms[0].isa == ("avx512_vnni",) or set(forms[0].isa) == {"avx512_vnni", "avx512f"}
    assert forms[1].isa == ("avx_vnni",)
    assert forms[2].isa == ("avx2",)


def test_shipped_platforms_declare_their_isa() -> None:
    ws, lp, mb = (platforms.load(n).core.isa for n in ("workstation", "laptop", "mobile"))
    assert {"avx512f", "avx512_vnni", "avx512vbmi", "avx_vnni"} <= set(ws)
    assert {"avx512f", "avx512_vnni", "avx512vbmi"} <= set(lp) and "avx_vnni" not in lp
    assert "avx_vnni" in mb and not any(f.startswith("avx512") for f in mb)


def test_model_refuses_code_the_platform_cannot_execute() -> None:
    check_isa(_forms(VPDPBUSD_ZMM, VPDPBUSD_VEX), platforms.load("workstation"))
    check_isa(_forms(VPDPBUSD_ZMM, VPADDD_YMM), platforms.load("laptop"))
    with pytest.raises(UnsupportedIsa, match=r"laptop .* does not execute avx_vnni: vpdpbusd ymm1"):
        check_isa(_forms(VPADDD_YMM, VPDPBUSD_VEX), platforms.load("laptop"))
    with pytest.raises(UnsupportedIsa, match=r"mobile .* avx512.*zmm1.* at 0x1000"):
        check_isa(_forms(VPDPBUSD_ZMM, VPDPBUSD_VEX), platforms.load("mobile"))


def test_unknown_extension_in_a_platform_file_is_named() -> None:
    raw = platforms.load("laptop")
    assert raw.core.isa and set(raw.core.isa) <= set(VECTOR_ISA_FLAGS)
    table = {"name": "x", "core": {"model": "m", "cores": 1, "frequency_ghz": 1.0, "uarch": "zen4",
                                   "vector_bits": 256, "isa": ["avx2", "avx1024"]},
             "l1i": {"size_kib": 32}, "caches": {"L1D": {"size_kib": 32, "shared_by": 1,
                                                          "bandwidth_bytes_per_cycle": 64}},
             "dram": {"type": "DDR5", "per_core_gbs": 10.0}}
    with pytest.raises(PlatformError, match=r"x.toml: core.isa: unknown extension 'avx1024'"):
        platform_from_dict(table, "x.toml")


def test_validation_variants_follow_the_host_flags() -> None:
    from tsar.kernels.registry import SIM_ISAS, native_label
    from tsar.validation.validate import host_isas

    avx512 = set(SIM_ISAS["avx512"]) | set(SIM_ISAS["avx2"])
    assert host_isas("int2", avx512) == ("avx2", "avx512")
    assert host_isas("int2", set(SIM_ISAS["avx2"])) == ("avx2",)
    assert host_isas("tl2", avx512) == ("avx2",)
    assert (native_label("int2", "avx2"), native_label("int2", "avx512")) == ("int2", "int2-avx512")


def test_avx512_clock_ratio_slows_512_bit_code_only() -> None:
    """A platform whose cores lower the clock under heavy 512-bit code (Intel's AVX-512 license)
    times zmm code at the lowered clock and ymm code at the normal one; Zen 4/5 declare none."""
    import dataclasses

    from tsar.sim.timing.predict import predict
    from tsar.simulate.native_kernel import simulate_native

    assert {platforms.load(n).core.avx512_clock_ratio for n in ("workstation", "laptop")} == {1.0}
    plat = platforms.load("laptop")
    slow = dataclasses.replace(plat, core=dataclasses.replace(plat.core, avx512_clock_ratio=0.8))
    for isa, factor in (("avx512", 1 / 0.8), ("avx2", 1.0)):
        run = simulate_native("int2", 64, 512, isa=isa)
        a = predict(run.stats, run.code, run.code_address, plat)
        b = predict(run.stats, run.code, run.code_address, slow)
        assert b.core_cycles == a.core_cycles
        assert b.seconds == pytest.approx(a.seconds * factor, rel=1e-6), isa
        assert any("AVX-512 frequency license" in n for n in b.notes) == (isa == "avx512")


def test_avx512_clock_ratio_must_be_a_fraction() -> None:
    table = {"name": "x", "core": {"model": "m", "cores": 1, "frequency_ghz": 1.0, "uarch": "zen4",
                                   "vector_bits": 256, "avx512_clock_ratio": 1.2},
             "l1i": {"size_kib": 32}, "caches": {"L1D": {"size_kib": 32, "shared_by": 1,
                                                          "bandwidth_bytes_per_cycle": 64}},
             "dram": {"type": "DDR5", "per_core_gbs": 10.0}}
    with pytest.raises(PlatformError, match=r"x.toml: core.avx512_clock_ratio: must be in \(0, 1\]"):
        platform_from_dict(table, "x.toml")


def test_validation_reports_its_targets() -> None:
    from tsar.validation.validate import TARGETS, Case, Validation

    def case(kernel: str, predicted: float, measured: float) -> Case:
        return Case(kernel, 64, 384, "cache", 1, predicted, measured, None)

    v = Validation((case("int2", 1.0, 1.0), case("int2-avx512", 0.5, 0.6)), "host", 4.0)
    targets = {what.split()[0]: (ok, got) for what, ok, got in v.targets()}
    assert TARGETS == {"cache": 7.0, "overall": 12.0, "isa_speedup": 10.0}
    assert targets["in"] == (False, "8.3 %") and targets["ISA"] == (False, "0 of 1")
    assert "targets: in cache <= 7 % missed (8.3 %)" in v.table()
