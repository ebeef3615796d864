"""Memory bound: hand calculations, monotonicity and thread scaling."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

import tsar.sim.platforms as platforms
from tsar.sim.timing.memory import DataStream, kernel_time, linear_streams, memory_time, place, thread_scaling

LAPTOP = platforms.load("laptop")


def test_hand_calculation_dram_stream() -> None:
    # 64 MiB of weights pinned in DRAM, read once, one thread on the laptop (5.1 GHz):
    w = 64 << 20
    mt = memory_time([DataStream("w", w, read=w, level="DRAM")], LAPTOP, mode="ecm")
    hz = 5.1e9
    expect = {"L1D": w / 64, "L2": w / 32, "L3": w / 32, "DRAM": w / (40e9) * hz}
    for level, cycles in expect.items():
        assert mt.level_cycles[level] == pytest.approx(cycles)
    assert mt.cycles == pytest.approx(sum(expect.values()))
    roof = memory_time([DataStream("w", w, read=w, level="DRAM")], LAPTOP, mode="roofline")
    assert roof.cycles == pytest.approx(expect["DRAM"])


def test_residence_by_capacity() -> None:
    s = [DataStream("small", 8 << 10, read=1 << 20), DataStream("mid", 512 << 10, read=1 << 20),
         DataStream("big", 8 << 20, read=8 << 20), DataStream("huge", 1 << 30, read=1 << 30)]
    assert place(s, LAPTOP) == {"small": "L1D", "mid": "L2", "big": "L3", "huge": "DRAM"}


def test_writes_cost_twice_beyond_l1_unless_nontemporal() -> None:
    out = DataStream("out", 1 << 30, write=1 << 20)
    mt = memory_time([out], LAPTOP)
    assert mt.level_bytes["DRAM"] == 2 << 20
    nt = memory_time([dataclasses.replace(out, nontemporal=True)], LAPTOP)
    assert nt.level_bytes["DRAM"] == 1 << 20 and nt.level_bytes["L2"] == 0


@pytest.mark.parametrize("name", platforms.SHIPPED)
def test_monotonic_in_bytes_and_footprint(name: str) -> None:
    p = platforms.load(name)
    prev = 0.0
    for fp in (16 << 10, 256 << 10, 4 << 20, 64 << 20, 1 << 30):
        t = memory_time([DataStream("d", fp, read=1 << 30)], p).cycles
        assert t >= prev - 1e-6
        prev = t
    a = memory_time(linear_streams(2560, 2560), p).cycles
    b = memory_time(linear_streams(6912, 2560), p).cycles
    assert b > a


@pytest.mark.parametrize("name", platforms.SHIPPED)
def test_thread_scaling_saturates_at_shared_dram(name: str) -> None:
    p = platforms.load(name)
    streams = linear_streams(6912, 2560, weight_footprint=1e9)  # decode: weights from DRAM
    runs = thread_scaling(0.0, streams, p)
    times = [r.seconds for r in runs]
    assert all(b <= a + 1e-15 for a, b in itertools.pairwise(times))
    weight_bytes = 6912 * 2560 * 2 / 8
    assert runs[-1].seconds >= weight_bytes / (p.dram.sustained_gbs * 1e9) * (1 - 1e-9)
    assert runs[-1].bound.startswith("memory")


def test_kernel_time_max_of_core_and_memory() -> None:
    streams = [DataStream("a", 4 << 10, read=1 << 20)]
    mem = memory_time(streams, LAPTOP).cycles
    assert kernel_time(10 * mem, streams, LAPTOP).bound == "core"
    kt = kernel_time(mem / 10, streams, LAPTOP)
    assert kt.cycles == pytest.approx(mem) and kt.bound.startswith("memory")
    assert kernel_time(10 * mem, streams, LAPTOP, threads=2).core_cycles == pytest.approx(5 * mem)


def test_replicated_activations_do_not_split() -> None:
    act = DataStream("act", 2560, read=2560, partitioned=False)
    assert act.per_thread(4) == (2560, 2560, 0)
    lut = DataStream("lut", 26_600, read=26_600 * 100, partitioned=False, reads_split=True)
    assert lut.per_thread(4) == (26_600, 26_600 * 25, 0)
