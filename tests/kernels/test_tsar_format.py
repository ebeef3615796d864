"""T-SAR weight streams: round trips, plan structure, and the overflow schedule."""

import numpy as np
import pytest

from tsar.isa import pack_tile
from tsar.isa.assembler import assemble
from tsar.isa.config import PAPER_CONFIGS, WIDE_CONFIGS, TsarConfig, get_config
from tsar.kernels.formats.tsar import pack_weights, unpack_weights
from tsar.kernels.tsar_codegen import function_name, generate
from tsar.kernels.tsar_plan import FLOWS, PARTIAL_SUM_BYTES, make_plan

PLANS = [(cfg.name, flow) for cfg in (*PAPER_CONFIGS, *WIDE_CONFIGS) for flow in FLOWS]
SHAPES = [(1, 16), (3, 96), (10, 512), (160, 2560)]
"""(tiles, K): M = tiles * m of the configuration."""


@pytest.mark.parametrize("cfg, flow", PLANS)
@pytest.mark.parametrize("tiles, K", SHAPES)
def test_stream_roundtrip_and_coverage(cfg: str, flow: str, tiles: int, K: int) -> None:
    M = tiles * get_config(cfg).m
    plan = make_plan(cfg, flow, M, K)
    w = np.random.default_rng(M + K).integers(-1, 2, (M, K)).astype(np.int8)
    stream = pack_weights(plan, w)
    assert stream.shape == (M * K * 2 // 8,)  # 2 bits per weight
    assert np.array_equal(unpack_weights(plan, stream), w)
    tiles, chunks = plan.stream_order
    pairs = tiles * plan.chunks + chunks
    assert np.array_equal(np.sort(pairs), np.arange(plan.tiles * plan.chunks))  # each operand once


@pytest.mark.parametrize("config", ["c2s4", "c2s4-512", "c4s4-512"])
def test_stream_operand_is_the_isa_tile(config: str) -> None:
    """Operand n of the stream is the ISA's tile of rows ``[m*t, m*t + m)`` and inputs
    ``[k*c, k*c + k)`` (m = 32 rows at 512 bits)."""
    cfg = get_config(config)
    M, K = 2 * cfg.m, 2 * cfg.k
    plan = make_plan(cfg, "op", M, K)
    w = np.random.default_rng(3).integers(-1, 2, (M, K)).astype(np.int8)
    stream = pack_weights(plan, w).reshape(-1, cfg.weight_bytes)
    tiles, chunks = plan.stream_order
    for n, (t, c) in enumerate(zip(tiles, chunks, strict=True)):
        block = w[cfg.m * t:cfg.m * (t + 1), cfg.k * c:cfg.k * (c + 1)]
        assert np.array_equal(stream[n], pack_tile(cfg, block))


@pytest.mark.parametrize("cfg, flow", PLANS)
@pytest.mark.parametrize("K", [8 * 16, 1032, 2560, 6912])
def test_every_lane_widens_within_the_overflow_bound(cfg: str, flow: str, K: int) -> None:
    plan = make_plan(cfg, flow, 2560, K)
    assert all(w.chunks <= plan.cfg.max_tgemv_per_widen() for w in plan.windows)
    assert sum(w.chunks for w in plan.windows) == plan.chunks
    assert all(len(w.batches) and max(w.batches) <= plan.groups for w in plan.windows)


@pytest.mark.parametrize("cfg, flow", PLANS)
def test_register_allocation_fits_and_aligns(cfg: str, flow: str) -> None:
    plan = make_plan(cfg, flow, 2560, 2560)
    groups = {plan.group_register(g) + r for g in range(plan.groups) for r in range(plan.cfg.group_regs)}
    accs = set(range(plan.accumulators))
    weights = set()
    if plan.weights_in_register:
        weights = set(range(plan.weight_register, plan.weight_register + plan.cfg.weight_regs))
        assert plan.weight_register % plan.cfg.weight_regs == 0
    assert not groups & accs and not weights & (groups | accs)
    assert max(groups | accs | weights) < plan.cfg.addressable_registers
    assert all(plan.group_register(g) % plan.cfg.group_regs == 0 for g in range(plan.groups))


@pytest.mark.parametrize("cfg, groups, in_register, block", [
    ("c2s4", 7, True, 32), ("c4s4", 1, False, 32), ("c2s4-512", 16, True, 16), ("c4s4-512", 7, True, 16)])
def test_ap_tokens_plan_derives_from_the_register_file(cfg: str, groups: int, in_register: bool,
                                                       block: int) -> None:
    """c2s4: 7 tokens' LUT groups beside the accumulator and a weight register; c4s4: two groups
    would fill all 16 registers, so one token at a time with memory weight operands. At 512 bits
    (32 registers): c2s4 30 groups would fit, capped at the 16 tokens of a block; c4s4 7 groups of
    4 beside the accumulator and the weight pair. The block's partial-sum rows fit the L1 budget
    (tile blocks of 32 tiles at m = 16, 16 at m = 32); the stream is tile block by tile block,
    chunk-major."""
    plan = make_plan(cfg, "ap-tokens", get_config(cfg).m * 70, 512)
    assert (plan.token_groups, plan.chunk_groups, plan.groups) == (groups, 1, groups)
    assert plan.weights_in_register == in_register and plan.accumulators == 1
    assert plan.token_block * plan.partial_row_bytes <= PARTIAL_SUM_BYTES
    assert [tb for _, tb in plan.passes] == [block] * (70 // block) + [70 % block]
    assert all(w.batches == (1,) * w.chunks for w in plan.windows)
    tiles, chunks = plan.stream_order
    first = slice(0, block * plan.chunks)
    assert np.array_equal(chunks[first], np.repeat(np.arange(plan.chunks), block))
    assert np.array_equal(tiles[first], np.tile(np.arange(block), plan.chunks))
    assert plan.reuse_bytes == block * plan.cfg.weight_bytes
    assert plan.tokens_for_counts(128) == (16 if groups > 1 else 1) and plan.tokens_for_counts(3) <= 3


@pytest.mark.parametrize("cfg, flow", PLANS)
def test_generated_kernels_assemble(cfg: str, flow: str) -> None:
    plan = make_plan(cfg, flow, 3 * get_config(cfg).m, 96)
    program = assemble(generate(plan), filename=plan.name)
    assert program.address_of(function_name(plan)) == 0
    assert sum(entry.tsar for entry in program.listing) >= 2


@pytest.mark.parametrize("args, message", [
    (("c2s4", "op", 40, 64), "multiple of 16"),
    (("c2s4-512", "op", 48, 64), "M=48 must be a positive multiple of 32 for c2s4-512"),
    (("c2s4", "op", 32, 12), "multiple of 8"),
    (("c4s4", "op", 32, 20), r"K=20 must be a positive multiple of 8 for c4s4 \(the kernels quantize"),
    (("c4s4", "op", 0, 32), "M=0 must be a positive multiple of 16"),
    (("c2s4", "diagonal", 32, 32), "dataflow"),
    ((TsarConfig("c2s4-i32-128", c=2, s=4, vector_bits=128, acc_bits=32), "op", 32, 32),
     "multiples of 8 outputs"),
])
def test_bad_plans(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_plan(*args)


def test_pack_rejects_bad_weights() -> None:
    plan = make_plan("c2s4", "op", 16, 8)
    with pytest.raises(ValueError, match="expected"):
        pack_weights(plan, np.zeros((16, 16), np.int8))
    with pytest.raises(ValueError):
        pack_weights(plan, np.full((16, 8), 2, np.int8))
