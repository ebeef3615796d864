"""Dataflow selection ranks the simulated kernels by their estimated cycles."""

import pytest

from tsar.compare import compare
from tsar.estimate.dataflow import select
from tsar.estimate.layer import platform_named
from tsar.isa.config import C2S4_512, C4S4
from tsar.kernels.tsar_plan import (
    FLOWS,
    TOKEN_BLOCKED,
    kernel_name,
    parse_kernel_name,
)
from tsar.models import MODELS, LinearShape
from tsar.simulate.counts import GEMM_BLOCK
from tsar.simulate.tsar_kernel import KERNEL_NAMES


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


def test_gemm_dataflows_are_timed_from_a_block_of_tokens() -> None:
    """For N > 1 the token-blocked dataflows' counts come from one block of tokens (c2s4 ap-tokens
    shares each weight load among 7 tokens, so it executes fewer instructions per token than alone);
    per-token flows run one token."""
    kernels = ("tsar-c2s4-ap-tokens", "tsar-c4s4-ap-tokens", "tsar-c2s4-ap-min")
    by_name = {c.kernel: c for c in select(32, 128, N=32, kernels=kernels).candidates}
    assert [by_name[k].simulated_tokens for k in kernels] == [GEMM_BLOCK, GEMM_BLOCK, 1]
    alone = select(32, 128, N=1, kernels=kernels[:1]).best
    block = by_name[kernels[0]]
    assert alone.simulated_tokens == 1 and block.tsar_uops == alone.tsar_uops
    assert block.instructions < alone.instructions and block.vector_bytes < alone.vector_bytes


@pytest.mark.parametrize("n", [1, 32])
def test_selection_ranks_as_compare_does(n: int) -> None:
    """One estimator: every candidate's time is the one ``tsar compare`` models on the same
    platform, so the selected kernel is compare's fastest T-SAR kernel (every dataflow of a 256- and
    a 512-bit configuration; test_selection_ranks_every_kernel ranks them all)."""
    kernels = tuple(kernel_name(cfg, flow) for cfg in (C4S4, C2S4_512) for flow in FLOWS)
    sel = select(64, 256, n, kernels=kernels, platform="laptop")
    cmp = compare(n, 64, 256, "laptop", tsar_kernels=kernels)
    freq = platform_named("laptop").core.frequency_ghz * 1e9
    for c in sel.candidates:
        assert c.cycles * n / freq == pytest.approx(cmp.row(c.kernel).seconds, rel=1e-9), c.kernel
    assert sel.best.kernel == cmp.best_tsar.kernel


def test_candidates_follow_the_platform_isa() -> None:
    """A selection ranks the 512-bit configurations where the platform has AVX-512 only."""
    from tsar.estimate.dataflow import candidates
    from tsar.kernels.tsar_plan import kernel_names, parse_kernel_name

    def widths(kernels):
        return {parse_kernel_name(k)[0].vector_bits for k in kernels}

    assert widths(candidates("laptop")) == widths(candidates("workstation")) == {128, 256, 512}
    assert widths(candidates("mobile")) == {128, 256}
    assert set(candidates("laptop")) == set(kernel_names())


def test_selection_rejects_no_tokens() -> None:
    with pytest.raises(ValueError, match="N must be at least 1"):
        select(64, 256, 0)


BITNET_2B_FFN = [s for s in MODELS["bitnet-b1.58-2b-4t"].gemm_shapes() if s.name in ("gate", "down")]


@pytest.mark.slow
@pytest.mark.parametrize("shape", BITNET_2B_FFN, ids=lambda s: s.name)
def test_selection_picks_a_gemm_dataflow_for_prefill(shape: LinearShape) -> None:
    """BitNet-2B's FFN at N = 128 (prefill): a token-blocked GEMM dataflow wins, as in
    ``tsar compare`` (the c4s4 kernels, the fastest per weight; c2s4's block of 16 simulated tokens
    is too slow for this tier). At N = 1 there is nothing to share and a per-token flow wins."""
    kernels = tuple(kernel_name("c4s4", flow) for flow in FLOWS)
    sel = select(shape.m, shape.k, shape.n, kernels=kernels)
    assert parse_kernel_name(sel.best.kernel)[1] in TOKEN_BLOCKED, sel.table()
    decode = select(shape.m, shape.k, 1, kernels=kernels)
    assert parse_kernel_name(decode.best.kernel)[1] not in TOKEN_BLOCKED, decode.table()
