"""A configuration defined in this file only (c3s2 on 256 bits: c = 3, s = 2, six-bit weight codes
that straddle bytes, 24-byte weight operands, a two-register LUT group) goes through the assembler,
the golden semantics, a generated T-SAR GEMV kernel in the Python simulator, the RTL schedule check
and the timing model with no change to the package (docs/extending.md)."""

from __future__ import annotations

import numpy as np
import pytest

from tsar.isa import AssemblyError, assemble, decode, tgemv, tlut
from tsar.isa.config import TsarConfig, configs, register_config, unregister_config
from tsar.isa.semantics import pack_tile, tile_matvec


@pytest.fixture(scope="module")
def c3s2():
    slot = next(s for s in range(16) if s not in {cfg.slot for cfg in configs()})
    cfg = register_config(TsarConfig("c3s2", c=3, s=2, vector_bits=256, slot=slot))
    yield cfg
    unregister_config(cfg.name)


def test_derived_shape(c3s2):
    assert (c3s2.k, c3s2.m, c3s2.group_regs, c3s2.code_bits, c3s2.weight_bytes) == (6, 16, 2, 6, 24)
    assert (c3s2.tlut_mnemonic, c3s2.tgemv_mnemonic) == ("tlut3x2", "tgemv6x16")
    assert (c3s2.tlut_uops, c3s2.tgemv_uops) == (2, 2)


def test_assembler_and_decoder_round_trip(c3s2):
    program = assemble("tlut3x2 ymm4, [rsi + 6]\n"
                       "tgemv6x16 ymm1, ymm4, [rdx + rax*8 + 24]\n"
                       "tgemv6x16 ymm2, ymm4, ymm6\nret\n")
    first = decode(program.code)
    second = decode(program.code, first.length)
    assert str(first) == "tlut3x2 ymm4, [rsi+0x6]"
    assert second.mnemonic == "tgemv6x16" and second.operands[2].size == 24
    with pytest.raises(AssemblyError, match=r"aligned"):
        assemble("tlut3x2 ymm5, [rsi]")


def test_semantics_equal_the_ternary_product(c3s2):
    rng = np.random.default_rng(3)
    tiles = rng.integers(-1, 2, (200, c3s2.m, c3s2.k)).astype(np.int8)
    act = rng.integers(-127, 128, (200, c3s2.k)).astype(np.int8)
    acc = tgemv(c3s2, np.zeros((200, c3s2.m), np.int16), tlut(c3s2, act), pack_tile(c3s2, tiles))
    assert (acc == tile_matvec(c3s2, tiles, act)).all()


@pytest.mark.parametrize("flow", ["op", "ap-min", "ap-max", "op-tokens", "ap-tokens"])
def test_generated_kernel_bit_exact_in_the_simulator(c3s2, flow):
    from tsar.simulate.tsar_kernel import plan_for, simulate

    rng = np.random.default_rng(5)
    M, K = 48, 192
    plan = plan_for(f"tsar-c3s2-{flow}", M, K)
    x = rng.standard_normal((2, K)).astype(np.float32)
    w = rng.integers(-1, 2, (M, K)).astype(np.int8)
    assert simulate(plan, x, w, 0.5).exact
    # adversarial: every weight +1, activations at the int8 extremes (widening must keep it exact)
    x_max = np.where(rng.random((2, K)) < 0.5, 1.0, -1.0).astype(np.float32)
    x_max[0] = 1.0
    assert simulate(plan, x_max, np.ones((M, K), np.int8), 1.0).exact


@pytest.mark.native
def test_generated_kernel_bit_exact_on_the_native_engine(c3s2):
    from tsar.sim import create_machine
    from tsar.simulate.tsar_kernel import plan_for, simulate

    rng = np.random.default_rng(6)
    plan = plan_for("tsar-c3s2-op", 48, 192)
    x = rng.standard_normal((3, 192)).astype(np.float32)
    w = rng.integers(-1, 2, (48, 192)).astype(np.int8)
    run = simulate(plan, x, w, 0.5, machine=create_machine("native"), memory_stats=False)
    assert run.exact


def test_rtl_schedules(c3s2):
    from tsar.rtl.schedule import LANE_CHAIN, check_schedules

    check_schedules(c3s2, samples=500, lane_chain=LANE_CHAIN + 1)  # c = 3 needs a 3-deep chain


def test_timing_model(c3s2):
    from tsar.sim.timing.predict import predict
    from tsar.simulate.tsar_kernel import plan_for, program_for, simulate

    plan = plan_for("tsar-c3s2-op", 32, 96)
    rng = np.random.default_rng(1)
    run = simulate(plan, rng.standard_normal((1, 96)).astype(np.float32),
                   rng.integers(-1, 2, (32, 96)).astype(np.int8), 1.0)
    assert run.exact
    p = predict(run.stats, program_for(plan).code, run.code_address, "laptop")
    assert p.cycles > 0 and p.seconds > 0


def test_int32_accumulators_are_computed_in_int32():
    from tsar.kernels.tsar_plan import make_plan

    acc32 = TsarConfig("c2s4-acc32", c=2, s=4, acc_bits=32)
    assert (acc32.m, acc32.needs_widening, acc32.tgemv_mnemonic) == (8, False, "tgemv8x8d")
    tiles = np.ones((4, acc32.m, acc32.k), np.int8)
    act = np.full((4, acc32.k), 127, np.int8)
    start = np.full((4, acc32.m), 2**31 - 500, np.int32)  # int32 wrap-around: 8 * 127 = 1016 more
    acc = tgemv(acc32, start, tlut(acc32, act), pack_tile(acc32, tiles))
    assert acc.dtype == np.int32 and (acc == (start.astype(np.int64) + 1016 - 2**32)).all()
    assert make_plan(acc32, "op", 16, 8).widen_every > 10**6
