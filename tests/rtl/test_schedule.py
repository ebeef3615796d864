"""The uop schedules, executed in numpy, against the golden semantics."""

import numpy as np
import pytest

from tsar.isa import C2S4, C2S4_128, C2S4_512, C4S4, C4S4_512, TsarConfig, config, semantics
from tsar.rtl.extension import OperandPlan
from tsar.rtl.schedule import (
    LANE_CHAIN,
    ScheduleError,
    SrcKind,
    check_schedules,
    check_tgemv,
    format_schedule,
    run_tgemv_schedule,
    run_tlut_schedule,
    tgemv_schedule,
    tlut_cycles,
    tlut_schedule,
)

CONFIGS = [C2S4, C4S4, C2S4_128, C2S4_512, C4S4_512]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_tlut_schedule_matches_semantics(cfg):
    rng = np.random.default_rng(1)
    act = rng.integers(-128, 128, (4000, cfg.k)).astype(np.int8)
    np.testing.assert_array_equal(run_tlut_schedule(cfg, act), semantics.tlut(cfg, act))


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_tgemv_schedule_matches_semantics(cfg):
    rng = np.random.default_rng(2)
    n = 4000
    group = semantics.tlut(cfg, rng.integers(-128, 128, (n, cfg.k)).astype(np.int8))
    acc = rng.integers(-(1 << 15), 1 << 15, (n, cfg.m)).astype(np.int16)
    weights = rng.integers(0, 256, (n, cfg.weight_bytes)).astype(np.uint8)
    np.testing.assert_array_equal(run_tgemv_schedule(cfg, acc, group, weights),
                                  semantics.tgemv(cfg, acc, group, weights))


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_one_register_per_uop(cfg):
    """One uop per group register (the ISA's count); a register that holds a c = 4 block's D and
    S tables (512 bits) is written in two passes, so TLUT4x4 takes 8 cycles there."""
    uops = tlut_schedule(cfg)
    assert sorted({u.reg for u in uops}) == list(range(cfg.group_regs)) and cfg.tlut_uops == cfg.group_regs
    assert all(len(u.steps) == cfg.lanes for u in uops)
    shared = cfg.c == 4 and cfg.block_words * cfg.lut_bits == cfg.vector_bits
    assert len(uops) == tlut_cycles(cfg) == cfg.tlut_uops * (2 if shared else 1)


def test_c4s4_512_writes_s_then_reads_it_back():
    """c4s4-512: per register (block b: D_b then S_b), a first pass writes S_b and zero D words,
    the second writes D_b = 2*S_b - S_b[15] from the first pass's S words and S_b again."""
    cfg = C4S4_512
    uops = tlut_schedule(cfg)
    assert [u.reg for u in uops] == [r for r in range(cfg.group_regs) for _ in range(2)]
    for first, second in zip(uops[::2], uops[1::2], strict=True):
        for lane in range(cfg.lanes):
            block, table, pattern = cfg.word_meaning(first.reg * cfg.lanes + lane)
            if table == "D":
                assert str(first.steps[lane]) == "zero + zero"
                s_reg, s_word = divmod(cfg.word_index(block, "S", pattern), cfg.lanes)
                _, all_word = divmod(cfg.word_index(block, "S", cfg.patterns - 1), cfg.lanes)
                assert s_reg == first.reg
                assert str(second.steps[lane]) == f"(g{s_reg}[{s_word}]<<1) - g{s_reg}[{all_word}]"
            else:
                assert first.steps[lane] == second.steps[lane]
    assert "8 cycles" in format_schedule(cfg)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_read_back_only_of_earlier_uops(cfg):
    written: set[int] = set()
    for uop in tlut_schedule(cfg):
        for step in uop.steps:
            for src in (step.a, step.b):
                if src.kind is SrcKind.GROUP:
                    assert src.reg in written
        written.add(uop.reg)


def test_unschedulable_configs_are_refused():
    with pytest.raises(ScheduleError):
        tlut_schedule(TsarConfig("c3s8", c=3, s=8))
    with pytest.raises(ScheduleError):
        check_tgemv(TsarConfig("c2s8", c=2, s=8))


def test_format_schedule_names_every_word():
    text = format_schedule(C2S4)
    assert "D0[0]    = zero - lane3" in text
    assert text.count("lane ") == C2S4.group_words


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_check_schedules_of_registered_configs(cfg):
    check_schedules(cfg)


@pytest.fixture
def c3s2():
    """A test-only configuration whose s = 2 is a proper divisor of the adder trees' fan-in."""
    cfg = config.register_config(TsarConfig("c3s2", c=3, s=2, vector_bits=256, slot=9))
    yield cfg
    config.unregister_config(cfg.name)


def test_split_tree_tgemv_schedule(c3s2):
    """s = 2 < fan-in 4: each tree finishes two outputs, so a uop finishes lanes / s = 8 (the ISA's
    outputs_per_uop) and TGEMV takes the ISA's 2 uops; the schedules match the golden semantics."""
    assert (c3s2.m, c3s2.tgemv_uops, c3s2.outputs_per_uop) == (16, 2, 8)
    uops = tgemv_schedule(c3s2)
    assert [u.outputs for u in uops] == [tuple(range(8)), tuple(range(8, 16))]
    assert uops[0].trees == (0, 0, 1, 1, 2, 2, 3, 3)
    assert uops[1].lanes[:4] == ((8, 0), (8, 1), (9, 0), (9, 1))
    # c = 3: D[0] = -(a0+a1+a2) shares its register with the S table and needs three chained lane
    # operations; the datapath chains two, so the TLUT schedule exists only with a longer chain
    with pytest.raises(ScheduleError, match="D0\\[0\\] chains 3 lane operations"):
        check_schedules(c3s2)
    check_schedules(c3s2, lane_chain=LANE_CHAIN + 1)
    with pytest.raises(ValueError, match="split adder trees"):
        OperandPlan(256, (c3s2,))


def test_rtl_refuses_compact_lut_with_int32_accumulators():
    """A compact LUT with int32 accumulators needs the doubled S word exact beyond 16 bits (an
    18-bit lane); the lanes give 17, so it is refused naming both axes, not computed wrapped."""
    cfg = TsarConfig("c2s4-cd", c=2, s=4, lut_layout="compact", acc_bits=32)
    with pytest.raises(ValueError, match="lut_layout='compact' with acc_bits=32 needs 18-bit"):
        OperandPlan(256, (cfg,))
