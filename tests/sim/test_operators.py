"""The token operators (``kernels/native/ops.c``) in the simulator: results equal the numpy references
(:mod:`tsar.simulate.operators` states the tolerances: exact for embedding, quantize, sampling and the
stored f16 cache rows; float64 references for the float operators), quantize bit-exact against
``tsar.kernels.quant``, extrapolated counts equal to whole simulations, bad sizes refused, and the
LM head timed as memory-bound on the workstation."""

from __future__ import annotations

import numpy as np
import pytest

from tsar.common.toolchain import cache_dir
from tsar.errors import UserError
from tsar.kernels.quant import quantize_activations
from tsar.sim.timing.predict import predict
from tsar.simulate.native_kernel import loaded_machine
from tsar.simulate.operators import (
    OPERATORS,
    SIZES,
    OperatorCounts,
    bases,
    cache_path,
    operator_counts,
    simulate_operator,
)

STATS = ("per_address", "instructions", "by_class", "by_mnemonic", "tsar_uops", "vector_bytes_read",
         "vector_bytes_written", "scalar_bytes_read", "scalar_bytes_written", "scalar_memory_counted")

SMALL = {"embedding": {"n": 64}, "rmsnorm": {"n": 72}, "quantize": {"n": 104}, "rope": {"heads": 2, "hd": 32},
         "attention": {"heads": 4, "kv_heads": 2, "hd": 40, "ctx": 16}, "ffn_act": {"n": 64, "kind": 1},
         "lm_head": {"m": 3, "k": 96}, "sampling": {"n": 136}}
LARGER = [("embedding", {"n": 232}), ("rmsnorm", {"n": 232}), ("quantize", {"n": 200}),
          ("rope", {"heads": 3, "hd": 48}), ("rope", {"heads": 3, "hd": 40}),
          ("rope", {"heads": 3, "hd": 24}),
          ("attention", {"heads": 4, "kv_heads": 2, "hd": 40, "ctx": 32}),
          ("attention", {"heads": 2, "kv_heads": 2, "hd": 24, "ctx": 24}),
          ("attention", {"heads": 6, "kv_heads": 3, "hd": 32, "ctx": 24}), ("ffn_act", {"n": 232, "kind": 0}),
          ("ffn_act", {"n": 200, "kind": 1}), ("lm_head", {"m": 5, "k": 96}), ("sampling", {"n": 232})]
"""Third sizes, at least two periods beyond the first simulated one (remainders 40 and 8 modulo 64
for ``n``: the 8-element tail loops run; ``hd`` 40, 24, 32: attention's 32-column blocks and its
8-column tail, the tail only, the blocks only; three K/V heads: its two runs along ``ctx``
extrapolated along ``kv_heads`` in turn)."""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """A counts cache of this test's own; the simulator library from the usual build cache."""
    build = cache_dir("build")
    monkeypatch.setenv("TSAR_CACHE_DIR", str(tmp_path))
    (tmp_path / "build").symlink_to(build, target_is_directory=True)


def _entry(name: str, *args, returns: str = "i32") -> int:
    machine, symbols = loaded_machine()
    return int(machine.call(symbols[f"tsar_sim_op_{name}"], *args, returns=returns))


@pytest.mark.parametrize("op", OPERATORS)
def test_simulated_result_equals_reference(op: str) -> None:
    counts, result = simulate_operator(op, **SMALL[op])
    assert isinstance(counts, OperatorCounts) and counts.op == op
    assert counts.size == tuple(SMALL[op][name] for name in SIZES[op])
    assert counts.stats.instructions > 0 and counts.stats.scalar_memory_counted
    assert counts.read_bytes > 0
    assert counts.code_address <= min(counts.stats.per_address)
    assert max(counts.stats.per_address) < counts.code_address + len(counts.code)
    assert result is not None


def test_another_seed() -> None:
    for op in ("attention", "lm_head"):
        simulate_operator(op, seed=7, **SMALL[op])


def test_quantize_bit_exact() -> None:
    """Random tokens, ties at .5 (round half to even), a zero token (amax 1e-5) and large values."""
    rng = np.random.default_rng(3)
    ties = np.array([127, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5] * 4, np.float32)
    tokens = [rng.standard_normal(64).astype(np.float32) * s for s in (1e-3, 1.0, 50.0)]
    tokens += [ties, np.zeros(16, np.float32), np.full(8, -3e4, np.float32)]
    for x in tokens:
        q, scale = np.zeros(x.size, np.int8), np.zeros(1, np.float32)
        assert _entry("quantize", x, q, scale, x.size) == 0
        want_q, want_scale = quantize_activations(x[None])
        assert np.array_equal(q, want_q[0])
        assert scale.view(np.uint32)[0] == want_scale.view(np.uint32)[0]
    q, scale = simulate_operator("quantize", n=200)[1]
    assert q.dtype == np.int8 and scale.dtype == np.float32


def test_argmax_first_maximum() -> None:
    """Ties anywhere (the four 32-element sets, the 8-element tail) give the first index."""
    for n, positions in [(72, (50, 10)), (72, (70, 65)), (72, (64, 71)), (40, (33, 1)), (8, (7, 3)),
                         (104, (96, 95, 3)), (136, (35, 3))]:
        x = np.zeros(n, np.float32)
        x[list(positions)] = 5.0
        assert _entry("argmax", x, n) == min(positions)
    rng = np.random.default_rng(1)
    for n in (8, 32, 48, 96, 264):
        x = rng.integers(-3, 4, n).astype(np.float32)
        assert _entry("argmax", x, n) == int(np.argmax(x))
    assert simulate_operator("sampling", n=264, seed=5)[1] >= 0


@pytest.mark.parametrize(("op", "size"), LARGER,
                         ids=[f"{op}-{'-'.join(map(str, s.values()))}" for op, s in LARGER])
def test_extrapolated_counts_equal_whole_simulation(op: str, size: dict[str, int]) -> None:
    assert bases(op, size) is not None  # extrapolated, not simulated whole
    got = operator_counts(op, **size)
    want = simulate_operator(op, **size)[0]
    for field in STATS:
        assert getattr(got.stats, field) == getattr(want.stats, field), field
    for field in ("op", "size", "code", "code_address", "read_bytes", "write_bytes", "resident_bytes"):
        assert getattr(got, field) == getattr(want, field), field
    assert cache_path(op, size).exists()
    assert operator_counts(op, **size) == got  # from the cache


BAD = [("embedding", {"n": 12}), ("rmsnorm", {"n": 60}), ("quantize", {"n": 4}),
       ("rope", {"heads": 2, "hd": 20}),
       ("attention", {"heads": 4, "kv_heads": 2, "hd": 32, "ctx": 12}),
       ("attention", {"heads": 4, "kv_heads": 2, "hd": 36, "ctx": 16}),
       ("attention", {"heads": 4, "kv_heads": 3, "hd": 32, "ctx": 16}), ("ffn_act", {"n": 20, "kind": 0}),
       ("ffn_act", {"n": 64, "kind": 2}), ("lm_head", {"m": 4, "k": 48}), ("sampling", {"n": 100}),
       ("rmsnorm", {"n": 0}), ("rmsnorm", {"m": 64})]


@pytest.mark.parametrize(("op", "size"), BAD)
def test_bad_size_is_an_error(op: str, size: dict[str, int]) -> None:
    with pytest.raises(UserError):
        operator_counts(op, **size)
    with pytest.raises(UserError):
        simulate_operator(op, **size)


def test_library_entries_refuse_bad_sizes() -> None:
    f32, f16 = np.zeros(64, np.float32), np.zeros(64, np.uint16)
    assert _entry("embed", f16, 0, f32, 12) == -1
    assert _entry("rmsnorm", f32, f32, f32, 60, np.float32(1e-5)) == -1
    assert _entry("quantize", f32, np.zeros(64, np.int8), f32, 4) == -1
    assert _entry("rope", f32, f32, f32, 2, 20) == -1
    assert _entry("attention", f32, f32, f32, f16, f16, f32, f32, 4, 2, 8, 12) == -1
    assert _entry("attention", f32, f32, f32, f16, f16, f32, f32, 4, 3, 8, 8) == -1
    assert _entry("ffn_act", f32, f32, f32, 20, 0) == -1
    assert _entry("ffn_act", f32, f32, f32, 64, 2) == -1
    assert _entry("f16_gemv", f16, f32, f32, 1, 48) == -1
    assert _entry("argmax", f32, 60) == -1
    assert _entry("argmax", f32, 0) == -1


def test_lm_head_on_the_workstation_is_memory_bound() -> None:
    counts = operator_counts("lm_head", m=128256, k=2560)
    assert counts.resident_bytes == 128256 * 2560 * 2 == 656_670_720
    streams = counts.data_streams(counts.resident_bytes)
    assert streams[0].name == "lm_head" and streams[0].read == counts.resident_bytes
    p = predict(counts.stats, counts.code, counts.code_address, "workstation", streams=streams)
    assert p.seconds > 0
    assert p.bound.startswith("memory")
    assert p.memory is not None and p.memory.residence["lm_head"] == "DRAM"
    # the matrix streamed once costs at least its bytes at the platform's sustained DRAM bandwidth
    assert p.seconds >= counts.resident_bytes / 200e9


def test_streams_of_attention() -> None:
    size = {"heads": 4, "kv_heads": 2, "hd": 32, "ctx": 32}
    counts = operator_counts("attention", **size)
    rows = 2 * 2 * 32 * 2 * 32      # K and V rows of both K/V heads, f16
    assert counts.resident_bytes == rows
    streams = {s.name: s for s in counts.data_streams(footprint=1e9)}
    assert streams["kv_cache"].footprint == 1e9 and streams["kv_cache"].read == rows
    assert streams["kv_reuse"].read == rows  # a group of two query heads reads each row twice
    assert streams["inputs"].read > 0 and streams["outputs"].write > 0
    total = sum(s.read for s in streams.values())
    assert total == counts.read_bytes
