"""T-SAR weight streams: round trips, plan structure, and the overflow schedule."""

import numpy as np
import pytest

from tsar.isa import C2S4, C4S4, pack_tile
from tsar.isa.assembler import assemble
from tsar.isa.config import TsarConfig
from tsar.kernels.formats.tsar import pack_weights, unpack_weights
from tsar.kernels.tsar_codegen import function_name, generate
from tsar.kernels.tsar_plan import FLOWS, PARTIAL_SUM_BYTES, make_plan

PLANS = [(cfg, flow) for cfg in ("c2s4", "c4s4") for flow in FLOWS]
SHAPES = [(16, 16), (48, 96), (160, 512), (2560, 2560)]


@pytest.mark.parametrize("cfg, flow", PLANS)
@pytest.mark.parametrize("M, K", SHAPES)
def test_stream_roundtrip_and_coverage(cfg: str, flow: str, M: int, K: int) -> None:
    plan = make_plan(cfg, flow, M, K)
    w = np.random.default_rng(M + K).integers(-1, 2, (M, K)).astype(np.int8)
    stream = pack_weights(plan, w)
    assert stream.shape == (M * K * 2 // 8,)  # 2 bits per weight
    assert np.array_equal(unpack_weights(plan, stream), w)
    tiles, chunks = plan.stream_order
    pairs = tiles * plan.chunks + chunks
    assert np.array_equal(np.sort(pairs), np.arange(plan.tiles * plan.chunks))  # each operand once


def test_stream_operand_is_the_isa_tile() -> None:
    plan = make_plan("c2s4", "op", 32, 16)
    w = np.random.default_rng(3).integers(-1, 2, (32, 16)).astype(np.int8)
    stream = pack_weights(plan, w).reshape(-1, C2S4.weight_bytes)
    tiles, chunks = plan.stream_order
    for n, (t, c) in enumerate(zip(tiles, chunks, strict=True)):
        block = w[16 * t:16 * t + 16, 8 * c:8 * c + 8]
        assert np.array_equal(stream[n], pack_tile(C2S4, block))


@pytest.mark.parametrize("cfg, flow", PLANS)
@pytest.mark.parametrize("K", [8 * 16, 1032, 2560, 6912])
def test_every_lane_widens_within_the_overflow_bound(cfg: str, flow: str, K: int) -> None:
    config = C2S4 if cfg == "c2s4" else C4S4
    plan = make_plan(cfg, flow, 2560, K)
    assert all(w.chunks <= config.max_tgemv_per_widen() for w in plan.windows)
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
    assert not groups & accs and not weights & (groups | accs) and max(groups | accs | weights) < 16
    assert all(plan.group_register(g) % plan.cfg.group_regs == 0 for g in range(plan.groups))


@pytest.mark.parametrize("cfg, groups, in_register", [("c2s4", 7, True), ("c4s4", 1, False)])
def test_ap_tokens_plan_derives_from_the_register_file(cfg: str, groups: int, in_register: bool) -> None:
    """c2s4: 7 tokens' LUT groups beside the accumulator and a weight register; c4s4: two groups
    would fill all 16 registers, so one token at a time with memory weight operands. The block's
    partial-sum rows fit the L1 budget; the stream is tile block by tile block, chunk-major."""
    plan = make_plan(cfg, "ap-tokens", 16 * 70, 512)
    assert (plan.token_groups, plan.chunk_groups, plan.groups) == (groups, 1, groups)
    assert plan.weights_in_register == in_register and plan.accumulators == 1
    assert plan.token_block * plan.partial_row_bytes <= PARTIAL_SUM_BYTES
    assert [tb for _, tb in plan.passes] == [32, 32, 6]
    assert all(w.batches == (1,) * w.chunks for w in plan.windows)
    tiles, chunks = plan.stream_order
    first = slice(0, 32 * plan.chunks)
    assert np.array_equal(chunks[first], np.repeat(np.arange(plan.chunks), 32))
    assert np.array_equal(tiles[first], np.tile(np.arange(32), plan.chunks))
    assert plan.reuse_bytes == 32 * plan.cfg.weight_bytes
    assert plan.tokens_for_counts(128) == (16 if groups > 1 else 1) and plan.tokens_for_counts(3) <= 3


@pytest.mark.parametrize("cfg, flow", PLANS)
def test_generated_kernels_assemble(cfg: str, flow: str) -> None:
    plan = make_plan(cfg, flow, 48, 96)
    program = assemble(generate(plan), filename=plan.name)
    assert program.address_of(function_name(plan)) == 0
    assert sum(entry.tsar for entry in program.listing) >= 2


@pytest.mark.parametrize("args, message", [
    (("c2s4", "op", 40, 64), "multiple of 16"),
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
