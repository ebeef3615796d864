"""The InstLatx64-derived tables (zen5, gracemont): rows, provenance, and the platforms using them."""

from __future__ import annotations

import csv
import json
import re
from importlib import resources

import pytest

import tsar.sim.uarch as uarch
from tsar.sim import platforms
from tsar.sim.uarch import instlat

DATA = resources.files("tsar.sim.uarch").joinpath("data")

# (uarch, mnemonic, kinds, latency, recip_throughput, ports) as the InstLatx64 dumps give them.
MEASURED = [
    ("zen5", "vpdpbusd", ("zmm", "zmm", "zmm"), 3.98, 0.497, {"FP01": 1}),
    ("zen5", "vpdpbusd", ("ymm", "ymm", "ymm"), 3.98, 0.497, {"FP01": 1}),
    ("zen5", "vpshufb", ("zmm", "zmm", "zmm"), 1.99, 0.497, {"FP12": 1}),
    ("zen5", "vpaddd", ("zmm", "zmm", "zmm"), 1.10, 0.254, {"FP0123": 1}),
    ("gracemont", "vpshufb", ("ymm", "ymm", "ymm"), 1.99, 1.992, {"V012": 6}),
    ("gracemont", "vpdpbusd", ("ymm", "ymm", "ymm"), 3.98, 1.992, {"V012": 6}),
]


@pytest.mark.parametrize(("name", "mn", "kinds", "lat", "tp", "ports"), MEASURED)
def test_measured_rows(name: str, mn: str, kinds: tuple[str, ...], lat: float, tp: float,
                       ports: dict[str, float]) -> None:
    t = uarch.load(name).lookup(mn, kinds)
    assert t.exact and t.data_source == "instlatx64"
    assert t.latency == pytest.approx(lat) and t.recip_throughput == pytest.approx(tp)
    assert t.ports == ports


def test_zen5_is_full_width_not_double_pumped() -> None:
    z5, z4 = uarch.load("zen5"), uarch.load("zen4")
    assert z5.core.vector_datapath_bits == 512 and z4.core.vector_datapath_bits == 256
    ymm = z5.lookup("vpdpbusd", ("ymm", "ymm", "ymm")).recip_throughput
    assert z5.lookup("vpdpbusd", ("zmm", "zmm", "zmm")).recip_throughput == pytest.approx(ymm)


def test_zen5_ports_follow_llvm_or_measurement() -> None:
    z5 = uarch.load("zen5")
    # LLVM: integer multiply-add on FP0/FP1/FP3; measured 2 per cycle: port-cycles raised to 1.49
    t = z5.lookup("vpmaddwd", ("ymm", "ymm", "ymm"))
    assert t.ports_source == "llvm+tp" and t.ports == {"FP013": pytest.approx(1.49)}
    # LLVM: unpacks on the shuffle pipes FP1/FP2; measured 4 per cycle: the vector group is used
    t = z5.lookup("vpunpcklbw", ("ymm", "ymm", "ymm"))
    assert t.ports_source == "measured-tp" and t.ports == {"FP0123": 1}


def test_zen5_memory_forms() -> None:
    z5 = uarch.load("zen5")
    load = z5.lookup("vmovdqu", ("ymm", "m256"))
    assert load.exact and load.ports == {"LD01": 1} and load.latency_max == z5.core.load_latency
    t = z5.lookup("vpshufb", ("ymm", "ymm", "m256"))  # not in the dump: register form + one load
    assert t.source.startswith("synthesized") and t.ports == {"FP12": 1, "LD01": 1}
    assert t.latency_max == pytest.approx(1.99 + 7)
    assert z5.lookup("vmovdqu64", ("m512", "zmm")).ports == {"ST01": 2}  # zmm store: 1 per cycle


def test_zen4_splits_512_bit_operations_and_zen5_does_not() -> None:
    """Zen 4 executes a 512-bit operation in two 256-bit halves: half the ymm form's rate, twice
    its pipe occupancy, memory forms included (the 7950X dump: vpaddd zmm 0.50 c, ymm 0.25 c);
    Zen 5's 512-bit datapath runs zmm at the ymm rate."""
    z4, z5 = uarch.load("zen4"), uarch.load("zen5")
    for mnemonic, ymm_tp in (("vpaddd", 0.25), ("vpdpbusd", 0.5), ("vpshufb", 0.5)):
        y = z4.lookup(mnemonic, ("ymm", "ymm", "ymm"))
        z = z4.lookup(mnemonic, ("zmm", "zmm", "zmm"))
        zm = z4.lookup(mnemonic, ("zmm", "zmm", "m512"))
        assert y.recip_throughput == pytest.approx(ymm_tp, rel=0.06)
        assert z.recip_throughput == pytest.approx(2 * y.recip_throughput, rel=0.06)
        assert zm.recip_throughput >= z.recip_throughput
        fp = lambda t: sum(n for g, n in t.ports.items() if g.startswith("FP"))  # noqa: E731
        assert fp(z) == pytest.approx(2 * fp(y)) and fp(zm) == pytest.approx(fp(z))
        assert z5.lookup(mnemonic, ("zmm", "zmm", "zmm")).recip_throughput == pytest.approx(
            z5.lookup(mnemonic, ("ymm", "ymm", "ymm")).recip_throughput, rel=0.06)


def test_rows_carry_provenance() -> None:
    for name in ("zen5", "zen4", "gracemont"):
        with DATA.joinpath(f"{name}.csv").open(newline="") as f:
            rows = list(csv.DictReader(f))
        assert len(rows) > 2000
        other = "uops.info:" + ("zen4" if name == "zen5" else name)
        assert {r["source"] for r in rows} == {"instlatx64", other}
        assert sum(r["source"] == "instlatx64" for r in rows) > 1000
        assert all(r["ports_source"] for r in rows)
    meta = json.loads(DATA.joinpath("sources.json").read_text())["instlatx64"]
    assert meta["repository"] == "https://github.com/InstLatx64/InstLatx64"
    files = {name: t["file"] for name, t in meta["tables"].items()}
    assert files == {"zen5": "AuthenticAMD/AuthenticAMD0B40F40_K20_GraniteRidge_02_512b_InstLatX64.txt",
                     "zen4": "AuthenticAMD/AuthenticAMD0A60F12_K19_Raphael_04_InstLatX64.txt",
                     "gracemont": "GenuineIntel/GenuineIntel0090672_AlderLake_01_LC_InstLatX64.txt"}
    for t in meta["tables"].values():
        assert re.fullmatch(r"[0-9a-f]{40}", t["commit"]) and t["commit"] in t["url"]
    assert meta["zen5_ports"]["file"].endswith("X86ScheduleZnver5.td")
    readme = DATA.joinpath("README.md").read_text()
    assert "InstLatx64" in readme and meta["tables"]["zen5"]["commit"] in readme


def test_platforms_use_the_measured_tables() -> None:
    from tsar.sim.platforms.detect import uarch_for_cpu

    ws, mb = platforms.load("workstation"), platforms.load("mobile")
    assert (ws.uarch().name, ws.core.uarch_proxy) == ("zen5", False)
    assert (mb.uarch().name, mb.core.uarch_proxy) == ("gracemont", False)
    assert uarch_for_cpu("AuthenticAMD", 0x1A, 0x44)[:2] == ("zen5", False)
    assert uarch_for_cpu("GenuineIntel", 6, 190)[:2] == ("gracemont", False)
    assert "alderlake" not in uarch.UARCH_NAMES  # renamed: the uops.info "alderlake" data is Gracemont


def test_parse_dump_lines() -> None:
    text = "\n".join([
        "4231 AVX512_VNNI  :{EVEX} VPDPBUSD zmm, zmm, zmm  L:  0.92ns=  3.98c  T:  0.12ns=  0.497c",
        "4540 AVX_VNNI  :{VEX}  VPDPBUSD ymm, ymm, ymm  L:  0.92ns=  3.98c  T:  0.12ns=  0.497c",
        "4230 AVX512VL_VNNI  :{EVEX} VPDPBUSD ymm, ymm, ymm  L:  0.92ns=  3.98c  T:  0.12ns=  0.500c",
        "  27 AMD64  :{REX}  MOV r64, [m64]  L:  0.92ns=  3.98c  T:  0.06ns=  0.250c",
        "1904 AVX  :{VEX}  VMOVDQU ymm, [m256]  L: [memory dep.]  T:  0.12ns=  0.498c",
        "4517 AVX512F  :{EVEX} VPADDD zmm{k}, zmm, zmm  L:  0.25ns=  1.08c  T:  0.12ns=  0.518c",
        "1997 AVX  :VMOVDQA+VPADDD xm, xm, xm  L:  0.62ns=  1.99c  T:  0.21ns=  0.664c",
    ])
    rows = instlat.measured_rows(text)
    assert set(rows) == {("vpdpbusd", ("zmm", "zmm", "zmm")), ("vpdpbusd", ("ymm", "ymm", "ymm")),
                         ("mov", ("r64", "m64")), ("vmovdqu", ("ymm", "m256"))}
    vnni = rows[("vpdpbusd", ("ymm", "ymm", "ymm"))]
    assert (vnni.recip_throughput, vnni.family) == (0.497, "AVX_VNNI")  # the VEX form wins
    load = rows[("mov", ("r64", "m64"))]
    assert (load.latency, load.latency_max) == (0.0, 3.98)  # load-to-use is the memory latency
    assert rows[("vmovdqu", ("ymm", "m256"))].latency_max is None
