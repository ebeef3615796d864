"""Platform TOML loading and validation."""

from __future__ import annotations

from pathlib import Path

import pytest

import tsar.sim.platforms as platforms
from tsar.sim.platforms import PlatformError


@pytest.mark.parametrize("name", platforms.SHIPPED)
def test_shipped_platforms_load(name: str) -> None:
    p = platforms.load(name)
    assert p.name == name
    assert [c.name for c in p.caches] == ["L1D", "L2", "L3"]
    assert p.levels[-1] == "DRAM"
    p.uarch()  # the data set exists


def test_table_i_values() -> None:
    ws, lt, mb = (platforms.load(n) for n in ("workstation", "laptop", "mobile"))
    assert (ws.core.cores, ws.core.frequency_ghz) == (16, 5.7)
    assert (ws.cache("L1D").size, ws.l1i_size) == (48 << 10, 32 << 10)
    assert ws.cache("L3").size == 64 << 20 and ws.dram.peak_gbs == pytest.approx(102.4)
    assert ws.core.uarch == "zen5" and not ws.core.uarch_proxy
    assert (lt.core.cores, lt.core.frequency_ghz) == (8, 5.1)
    assert (lt.cache("L1D").size, lt.cache("L3").size) == (32 << 10, 16 << 20)
    assert lt.dram.peak_gbs == pytest.approx(70.4)
    assert (mb.core.cores, mb.core.frequency_ghz) == (4, 3.8)
    assert (mb.l1i_size, mb.cache("L2").size) == (64 << 10, 2 << 20)
    assert mb.cache("L2").shared_by == 4 and mb.cache("L3").size == 6 << 20
    assert mb.core.uarch == "gracemont" and not mb.core.uarch_proxy
    assert mb.dram.peak_gbs == pytest.approx(35.2)
    assert (ws.threads, lt.threads, mb.threads) == (16, 8, 4)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def _shipped_text(name: str = "laptop") -> str:
    from importlib import resources

    return resources.files("tsar.sim.platforms").joinpath(f"{name}.toml").read_text()


def test_load_by_path_round_trip(tmp_path: Path) -> None:
    p = platforms.load(_write(tmp_path, _shipped_text()))
    assert p.core.model == "AMD Ryzen 7 7840U" and p.path.endswith("p.toml")


@pytest.mark.parametrize(("edit", "key"), [
    (("bandwidth_bytes_per_cycle = 64", "bandwidth_bytes_per_cycle = 64\nbogus = 1"), "caches.L1D.bogus"),
    (("frequency_ghz = 5.1", 'frequency_ghz = "fast"'), "core.frequency_ghz"),
    (('uarch = "zen4"', 'uarch = "zen9"'), "core.uarch"),
    (("per_core_gbs = 40", ""), "dram.per_core_gbs"),
    (("usable_fraction = 0.75", "usable_fraction = 1.5"), "usable_fraction"),
    (("size_kib = 32                    # Table I\nshared_by", "size_kib = 32\nsize_mib = 1\nshared_by"),
     "caches.L1D"),
])
def test_validation_names_file_and_key(tmp_path: Path, edit: tuple[str, str], key: str) -> None:
    text = _shipped_text()
    assert edit[0] in text
    path = _write(tmp_path, text.replace(edit[0], edit[1], 1))
    with pytest.raises(PlatformError) as err:
        platforms.load(path)
    assert str(path) in str(err.value) and key in str(err.value)


def test_bad_toml_and_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(PlatformError, match="not valid TOML"):
        platforms.load(_write(tmp_path, "name = [unclosed"))
    with pytest.raises(PlatformError, match="unknown platform"):
        platforms.load("supercomputer")


def test_uarch_for_cpu_mapping() -> None:
    from tsar.sim.platforms.detect import uarch_for_cpu

    assert uarch_for_cpu("GenuineIntel", 6, 207)[0] == "alderlakep"
    assert uarch_for_cpu("GenuineIntel", 6, 143)[0] == "alderlakep"
    assert uarch_for_cpu("AuthenticAMD", 0x19, 0x11) == ("zen4", False, "Zen 4")
    name, proxy, _ = uarch_for_cpu("AuthenticAMD", 0x1A, 0x44)  # Ryzen 9 9950X (Granite Ridge)
    assert (name, proxy) == ("zen5", False)


@pytest.mark.parametrize(("vendor", "family", "model", "stepping", "expected"), [
    ("AuthenticAMD", 0x19, 0x01, 1, ("zen3", False)),    # EPYC Milan
    ("AuthenticAMD", 0x19, 0x21, 0, ("zen3", False)),    # Ryzen 5000 Vermeer
    ("AuthenticAMD", 0x19, 0x44, 0, ("zen3", False)),    # Rembrandt (Zen 3+)
    ("AuthenticAMD", 0x19, 0x61, 0, ("zen4", False)),    # Raphael
    ("AuthenticAMD", 0x19, 0x74, 0, ("zen4", False)),    # Phoenix (Ryzen 7840U)
    ("AuthenticAMD", 0x17, 0x31, 0, ("zen2", False)),    # EPYC Rome
    ("AuthenticAMD", 0x17, 0x01, 0, ("zen2", True)),     # Zen 1: proxy
    ("GenuineIntel", 6, 63, 2, ("haswell", False)),
    ("GenuineIntel", 6, 79, 1, ("haswell", True)),       # Broadwell-EP: proxy
    ("GenuineIntel", 6, 85, 4, ("skylakex", False)),
    ("GenuineIntel", 6, 85, 7, ("cascadelake", False)),
    ("GenuineIntel", 6, 85, 11, ("cascadelake", True)),  # Cooper Lake
    ("GenuineIntel", 6, 140, 1, ("tigerlake", False)),
    ("GenuineIntel", 6, 167, 1, ("rocketlake", False)),
    ("GenuineIntel", 6, 106, 6, ("icelake", False)),
    ("GenuineIntel", 6, 158, 10, ("skylake", False)),
    ("GenuineIntel", 6, 190, 0, ("gracemont", False)),   # Intel N250 class
    ("GenuineIntel", 6, 151, 2, ("alderlakep", False)),
])
def test_uarch_for_cpu_families(vendor: str, family: int, model: int, stepping: int,
                                expected: tuple[str, bool]) -> None:
    from tsar.sim import uarch
    from tsar.sim.platforms.detect import uarch_for_cpu

    name, proxy, _ = uarch_for_cpu(vendor, family, model, stepping)
    assert (name, proxy) == expected
    u = uarch.load(name)  # every mapped data set ships and times the kernels' key forms
    assert u.lookup("vpshufb", ("ymm", "ymm", "ymm")).recip_throughput > 0
    assert uarch.timing_of(u, "tgemv8x16", ("ymm", "ymm", "m256")).uops >= 1


def test_host_detection_without_measurement() -> None:
    h = platforms.host(measure=False)
    assert h.name == "host" and h.core.cores >= 1 and h.caches[0].name == "L1D"
    assert h.caches[0].size > 0 and h.measured.get("cpuinfo_mhz") is not None


@pytest.mark.slow
def test_host_measurement() -> None:
    h = platforms.host(refresh=True)
    bw = h.measured["read_gbs"]
    assert set(bw) >= {"L1D", "DRAM"} and bw["L1D"] > bw["DRAM"] > 0
    assert 0.5 < h.core.frequency_ghz < 7
    assert h.dram.per_core_gbs > 0 and h.dram.sustained_gbs >= h.dram.per_core_gbs


def test_read_bandwidths_rederive_the_ecm_terms() -> None:
    """End-to-end read bandwidths (GB/s) per level become per-boundary terms whose times per byte
    add up to the end-to-end time (as host() derives them); levels not given keep their terms."""
    from tsar.sim.platforms import load
    from tsar.sim.platforms.detect import with_read_bandwidths

    p = load("laptop")
    hz = p.core.frequency_ghz * 1e9
    same = with_read_bandwidths(p, {})
    assert [c.bandwidth for c in same.caches] == pytest.approx([c.bandwidth for c in p.caches], rel=1e-2)
    assert same.dram.per_core_gbs == pytest.approx(p.dram.per_core_gbs, rel=1e-6)
    q = with_read_bandwidths(p, {"DRAM": 10.0})
    per_byte = sum(1 / c.bandwidth for c in q.caches) + hz / (q.dram.per_core_gbs * 1e9)
    assert per_byte == pytest.approx(hz / 10e9, rel=1e-2)
    assert [c.bandwidth for c in q.caches] == pytest.approx([c.bandwidth for c in p.caches], rel=1e-2)


def test_masked_model_number_is_a_proxy() -> None:
    """A virtual CPU reporting Rocket Lake's model number with Sapphire Rapids' features is not a
    Cypress Cove: Golden Cove data as a proxy (so a table measured on it is used instead)."""
    from tsar.sim.platforms.detect import uarch_for_cpu

    flags = frozenset({"avx2", "avx512_fp16", "amx_tile"})
    name, proxy, note = uarch_for_cpu("GenuineIntel", 6, 167, 1, flags)
    assert (name, proxy) == ("alderlakep", True) and "amx_tile, avx512_fp16" in note and "masked" in note
    plain = frozenset({"avx2", "avx512f"})
    assert uarch_for_cpu("GenuineIntel", 6, 167, 1, plain)[:2] == ("rocketlake", False)
