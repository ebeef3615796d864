"""Dataflow selection ranks the simulated kernels by their estimated cycles."""

import pytest

from tsar.dataflow import platform_for, select, stream_cycles
from tsar.kernel_sim import KERNEL_NAMES
from tsar.kernels.tsar_plan import (
    FLOWS,
    TOKEN_BLOCK,
    TOKEN_BLOCKED,
    kernel_name,
    make_plan,
    parse_kernel_name,
)
from tsar.models import MODELS, LinearShape


def test_selection_ranks_every_kernel() -> None:
    sel = select(64, 256)
    assert {c.kernel for c in sel.candidates} == set(KERNEL_NAMES)
    best = sel.best
    assert all(best.cycles <= c.cycles for c in sel.candidates)
    assert "<- selected" in sel.table() and best.kernel in sel.table()
    by_name = {c.kernel: c for c in sel.candidates}
    # AP-max builds each LUT once like AP-min but touches the partial sums G times less often
    assert by_name["tsar-c2s4-ap-max"].vector_bytes < by_name["tsar-c2s4-ap-min"].vector_bytes
    # OP keeps accumulators in registers: the least memory traffic, but TLUTs are rebuilt per pass
    assert by_name["tsar-c2s4-op"].vector_bytes <= by_name["tsar-c2s4-ap-max"].vector_bytes
    assert by_name["tsar-c2s4-op"].tsar_uops >= by_name["tsar-c2s4-ap-min"].tsar_uops


def test_selection_scales_with_tokens() -> None:
    one = select(32, 64, N=1, kernels=("tsar-c2s4-op",))
    many = select(32, 64, N=8, kernels=("tsar-c2s4-op",))
    assert many.best.cycles == one.best.cycles  # per token
    assert f"{one.best.cycles * 8:,.0f}" in many.table()


def test_ap_tokens_counts_come_from_a_block_of_tokens() -> None:
    """c2s4 ap-tokens shares each weight load among 7 tokens, so its per-token counts come from one
    block of tokens; c4s4 (one token's LUT group at a time) and per-token flows run one token."""
    kernels = ("tsar-c2s4-ap-tokens", "tsar-c4s4-ap-tokens", "tsar-c2s4-ap-min")
    by_name = {c.kernel: c for c in select(32, 128, N=32, kernels=kernels).candidates}
    assert [by_name[k].simulated_tokens for k in kernels] == [TOKEN_BLOCK, 1, 1]
    alone = select(32, 128, N=1, kernels=kernels[:1]).best
    block = by_name[kernels[0]]
    assert alone.simulated_tokens == 1 and block.tsar_uops == alone.tsar_uops
    assert block.instructions < alone.instructions and block.vector_bytes < alone.vector_bytes


@pytest.mark.parametrize("shape", MODELS["bitnet-b1.58-2b-4t"].gemm_shapes(), ids=lambda s: s.name)
def test_gemm_flows_stream_the_weights_once_per_block(shape: LinearShape) -> None:
    """At N = 128 the token-blocked flows read the layer from its level once per block of 16 tokens;
    ap-tokens re-reads the rest from L1 (one chunk of a tile block), op-tokens from the level holding
    one pass over K. At N = 1 there is nothing to share."""
    plat = platform_for("zen4")
    for cfg in ("c2s4", "c4s4"):
        per_token, op_tokens, ap_tokens = (
            stream_cycles(make_plan(cfg, flow, shape.m, shape.k), shape.n, plat)
            for flow in ("ap-max", "op-tokens", "ap-tokens"))
        assert ap_tokens < op_tokens <= per_token and ap_tokens < per_token / 1.8
        assert stream_cycles(make_plan(cfg, "ap-tokens", shape.m, shape.k), 1, plat) == pytest.approx(
            stream_cycles(make_plan(cfg, "ap-max", shape.m, shape.k), 1, plat))


BITNET_13B_FFN = [s for s in MODELS["bitnet-13b"].gemm_shapes() if s.name in ("gate", "down")]


@pytest.mark.slow
@pytest.mark.parametrize("shape", BITNET_13B_FFN, ids=lambda s: s.name)
def test_selection_picks_a_gemm_dataflow_for_prefill(shape: LinearShape) -> None:
    """BitNet-13B's FFN at N = 128: its layers (17.7 MB at 2 bits) do not fit the L3, so the
    per-token dataflows re-stream them from DRAM for every token and the selection picks a
    token-blocked GEMM dataflow (the c4s4 kernels, the fastest per weight; c2s4's block of 16
    simulated tokens is too slow for this tier)."""
    kernels = tuple(kernel_name("c4s4", flow) for flow in FLOWS)
    sel = select(shape.m, shape.k, shape.n, kernels=kernels)
    assert parse_kernel_name(sel.best.kernel)[1] in TOKEN_BLOCKED, sel.table()
