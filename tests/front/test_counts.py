"""Simulated counts: native cores bit-exact in the simulator, extrapolation exact, cache reused."""

import pytest

from tsar.simulate.counts import ROW_UNIT, simulated_counts
from tsar.simulate.native_kernel import NATIVE_SIM_KERNELS, packed_weight_bytes, simulate_native


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TSAR_CACHE_DIR", str(tmp_path))


@pytest.mark.parametrize("kernel", NATIVE_SIM_KERNELS)
def test_extrapolated_counts_equal_direct_simulation(kernel: str) -> None:
    m, k = 4 * ROW_UNIT, 384
    extrapolated = simulated_counts(kernel, m, k)
    direct = simulate_native(kernel, m, k)
    assert direct.exact
    assert extrapolated.stats.per_address == direct.stats.per_address
    assert extrapolated.stats.instructions == direct.stats.instructions
    for field in ("vector_bytes_read", "vector_bytes_written", "scalar_bytes_read", "scalar_bytes_written"):
        assert getattr(extrapolated.stats, field) == getattr(direct.stats, field)
    assert extrapolated.weight_bytes == direct.weight_bytes == packed_weight_bytes(kernel, m, k)


def test_cache_is_reused_and_keyed_by_code(tmp_path) -> None:
    first = simulated_counts("tsar-c2s4-op", 32, 64)
    entries = list((tmp_path / "counts").glob("*.pkl"))
    assert len(entries) == 1
    again = simulated_counts("tsar-c2s4-op", 32, 64)
    assert again.stats.per_address == first.stats.per_address
    simulated_counts("tsar-c2s4-op", 48, 64)  # another shape is another kernel
    assert len(list((tmp_path / "counts").glob("*.pkl"))) == 2


def test_tl2_moves_more_bytes_than_it_stores_weights() -> None:
    """TL2 reads its activation tables for every row block: traffic well above its weights."""
    tl2 = simulated_counts("tl2", 256, 768)
    tsar = simulated_counts("tsar-c2s4-op", 256, 768)
    assert tl2.bytes_moved > 2 * tl2.weight_bytes
    assert tsar.bytes_moved < tl2.bytes_moved


@pytest.mark.parametrize("kernel", ["int2", "tl2", "tsar-c2s4-op-tokens"])
def test_gemm_block_counts(kernel: str) -> None:
    """A block of tokens is simulated through the GEMM path, cached under its own key, and its
    per-token traffic is no more than one token's (weights are reused across the block)."""
    from tsar.estimate.layer import counts_for

    one = simulated_counts(kernel, 256, 384)
    block = counts_for(kernel, 128, 256, 384)
    assert block.tokens == 16 and one.tokens == 1
    assert block.bytes_moved <= one.bytes_moved
    assert counts_for("tsar-c2s4-op", 128, 256, 384).tokens == 1   # per-token dataflow: one token
