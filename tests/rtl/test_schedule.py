"""The uop schedules, executed in numpy, against the golden semantics."""

import numpy as np
import pytest

from tsar.isa import C2S4, C2S4_128, C4S4, TsarConfig, semantics
from tsar.rtl.schedule import (
    ScheduleError,
    SrcKind,
    check_tgemv,
    format_schedule,
    run_tgemv_schedule,
    run_tlut_schedule,
    tlut_schedule,
)

CONFIGS = [C2S4, C4S4, C2S4_128]


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
    uops = tlut_schedule(cfg)
    assert len(uops) == cfg.tlut_uops
    assert sorted(u.reg for u in uops) == list(range(cfg.group_regs))
    assert all(len(u.steps) == cfg.lanes for u in uops)


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
