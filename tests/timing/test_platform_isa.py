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
