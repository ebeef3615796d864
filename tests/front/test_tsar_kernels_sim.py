"""The T-SAR BitLinear kernels, simulated, bit-exact against the integer reference."""

import numpy as np
import pytest

from tsar.isa.config import PAPER_CONFIGS, WIDE_CONFIGS
from tsar.kernels import quant
from tsar.kernels.tsar_plan import PARTIAL_SUM_BYTES, TOKEN_BLOCK, TOKEN_BLOCKED, parse_kernel_name
from tsar.simulate.tsar_kernel import KERNEL_NAMES, plan_for, simulate

# (N, tiles, K), M = tiles * m of the kernel's configuration: 13 tiles leave a tail after the
# 256-bit OP passes and AP tile blocks (test_pass_tails covers every kernel's); K = 1032 is
# zero-padded to whole chunks where k = 16 (c4s4: K_pad = 1040).
SHAPES = [(1, 1, 16), (3, 3, 96), (2, 13, 1040), (2, 3, 1032)]
CONFIGS = [cfg.name for cfg in (*PAPER_CONFIGS, *WIDE_CONFIGS)]
"""The GEMM tests' configurations: the paper's two and their 512-bit (EVEX) forms."""


def _m(kernel: str, tiles: int) -> int:
    """M of ``tiles`` output tiles of the kernel's configuration."""
    return tiles * parse_kernel_name(kernel)[0].m


def _layer(rng: np.random.Generator, n: int, m: int, k: int) -> tuple[np.ndarray, np.ndarray, float]:
    w_t, w_scale = quant.ternarize(rng.standard_normal((m, k)).astype(np.float32))
    x = (rng.standard_normal((n, k)) * rng.uniform(0.1, 10, (n, 1))).astype(np.float32)
    return x, w_t, w_scale


@pytest.mark.parametrize("kernel", KERNEL_NAMES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_random_layers_bit_exact(kernel: str, shape: tuple[int, int, int]) -> None:
    n, tiles, k = shape
    m = _m(kernel, tiles)
    x, w_t, w_scale = _layer(np.random.default_rng(16 * tiles * k + n), n, m, k)
    run = simulate(plan_for(kernel, m, k), x, w_t, w_scale)
    assert run.exact, f"{run.mismatches} of {run.y.size} outputs differ"
    cfg = run.plan.cfg
    assert run.stats.by_mnemonic[cfg.tgemv_mnemonic] == n * (m // cfg.m) * -(-k // cfg.k)


@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_pass_tails(kernel: str) -> None:
    """One tile more than a pass holds (OP: R accumulators, ap-max: U, ap-tokens: a tile block),
    so that every kernel runs its tail code; N = 3 tokens."""
    k = 64
    unit = plan_for(kernel, _m(kernel, 1024), k).pass_tiles
    plan = plan_for(kernel, _m(kernel, unit + 1), k)
    assert [tiles for _, tiles in plan.passes] == [unit, 1]
    x, w_t, w_scale = _layer(np.random.default_rng(unit), 3, plan.M, k)
    assert simulate(plan, x, w_t, w_scale, memory_stats=False).exact


@pytest.mark.parametrize("kernel", KERNEL_NAMES)
@pytest.mark.parametrize("sign", [1, -1])
def test_accumulators_at_their_bounds(kernel: str, sign: int) -> None:
    """All activations +-127 and all weights equal: every int16 window is driven to its bound
    (32 * 8 * 127 = 32512 for c2s4, 16 * 16 * 127 for c4s4, at any width) and must not wrap."""
    m, k = _m(kernel, 3), 1024
    x = np.full((2, k), 3.5, np.float32)
    x[1] = -3.5
    w_t = np.full((m, k), sign, np.int8)
    run = simulate(plan_for(kernel, m, k), x, w_t, 1.0)
    assert run.exact
    expected = sign * 127 * k * (3.5 / 127)  # dequantized: acc * amax / 127 * w_scale
    assert np.allclose(run.y[0], expected) and np.allclose(run.y[1], -expected)


@pytest.mark.parametrize("kernel", ["tsar-c2s4-op", "tsar-c4s4-ap-min", "tsar-c2s4-512-ap-max",
                                    "tsar-c4s4-512-op"])
def test_zero_and_tiny_activations(kernel: str) -> None:
    m, k = _m(kernel, 2), 64
    w_t = np.random.default_rng(0).integers(-1, 2, (m, k)).astype(np.int8)
    x = np.zeros((2, k), np.float32)
    x[1, 5] = 1e-7  # below the 1e-5 absmax floor
    run = simulate(plan_for(kernel, m, k), x, w_t, 0.25)
    assert run.exact and not run.y[0].any()


@pytest.mark.parametrize("kernel", ["tsar-c2s4-op", "tsar-c4s4-512-ap-tokens"])
def test_no_tokens_is_a_no_op(kernel: str) -> None:
    m = _m(kernel, 1)
    run = simulate(plan_for(kernel, m, 16), np.zeros((0, 16), np.float32), np.ones((m, 16), np.int8), 1.0)
    assert run.y.shape == (0, m) and run.exact


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNEL_NAMES)
@pytest.mark.parametrize("n", [1, 8])
def test_bitnet_2b_layer(kernel: str, n: int) -> None:
    """BitNet-b1.58-2B-4T attention projection: 1 x 2560 x 2560 GEMV and an N = 8 GEMM."""
    x, w_t, w_scale = _layer(np.random.default_rng(n), n, 2560, 2560)
    run = simulate(plan_for(kernel, 2560, 2560), x, w_t, w_scale)
    assert run.exact


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["tsar-c2s4-op", "tsar-c4s4-op", "tsar-c2s4-ap-max", "tsar-c2s4-ap-tokens",
                                    "tsar-c4s4-ap-tokens", "tsar-c2s4-512-ap-max", "tsar-c4s4-512-op",
                                    "tsar-c2s4-512-ap-tokens", "tsar-c4s4-512-ap-tokens"])
def test_adversarial_down_projection(kernel: str) -> None:
    """K = 6912 (BitNet-2B down projection input), all weights +1, all activations 127."""
    m, k = 32, 6912
    run = simulate(plan_for(kernel, m, k), np.ones((1, k), np.float32), np.ones((m, k), np.int8), 1.0)
    assert run.exact
    assert np.allclose(run.y, 6912.0)


@pytest.mark.parametrize("flow", TOKEN_BLOCKED)
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("n", [8, 32, pytest.param(128, marks=pytest.mark.slow)])
def test_token_blocked_gemm_bit_exact(flow: str, config: str, n: int) -> None:
    """The GEMM dataflows over blocks of tokens (32 and 128 cross block boundaries), random and
    adversarial (all weights +1, activations at +-127 after quantization), in the Python engine."""
    kernel, k = f"tsar-{config}-{flow}", 256
    m = _m(kernel, 3)
    plan = plan_for(kernel, m, k)
    x, w_t, w_scale = _layer(np.random.default_rng(n), n, m, k)
    assert simulate(plan, x, w_t, w_scale, memory_stats=False).exact
    x = np.where(np.random.default_rng(1).random((n, k)) < 0.5, 1.0, -1.0).astype(np.float32)
    assert simulate(plan, x, np.ones((m, k), np.int8), 1.0, memory_stats=False).exact


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("n, sign", [(8, 1), (32, -1), pytest.param(128, 1, marks=pytest.mark.slow),
                                     pytest.param(128, -1, marks=pytest.mark.slow)])
def test_ap_tokens_widens_at_the_bound(config: str, n: int, sign: int) -> None:
    """ap-tokens at K = 512 (two int16 windows for every configuration): all weights equal, every
    activation +-127, so each window reaches its bound and the int32 sums exceed int16."""
    kernel, k = f"tsar-{config}-ap-tokens", 512
    m = _m(kernel, 2)
    plan = plan_for(kernel, m, k)
    assert len(plan.windows) == 2
    signs = np.where(np.random.default_rng(n).random((n, 1)) < 0.5, 1.0, -1.0)
    x = np.broadcast_to(signs, (n, k)).astype(np.float32)
    run = simulate(plan, x, np.full((m, k), sign, np.int8), 1.0, memory_stats=False)
    assert run.exact
    assert np.allclose(run.y, sign * signs * k)  # acc = +-127 * k, dequantized by 1 / 127


@pytest.mark.parametrize("config", CONFIGS)
def test_ap_tokens_tile_blocks_and_partial_token_groups(config: str) -> None:
    """A full tile block and a 1-tile remainder (33 tiles at 256 bits, 17 at 512: the block's
    partial-sum rows fill ``PARTIAL_SUM_BYTES``) and N = 23 (a block of 16, then 7: partial groups
    of tokens) in one run; each weight operand is read once per group of tokens whose LUT groups
    live together, each TLUT once per token, chunk and tile block."""
    kernel, n, k = f"tsar-{config}-ap-tokens", 23, 64
    cfg = parse_kernel_name(kernel)[0]
    block = PARTIAL_SUM_BYTES // (TOKEN_BLOCK * cfg.m * cfg.acc_bits // 8)
    plan = plan_for(kernel, _m(kernel, block + 1), k)
    assert [tb for _, tb in plan.passes] == [block, 1]
    x, w_t, w_scale = _layer(np.random.default_rng(5), n, plan.M, k)
    run = simulate(plan, x, w_t, w_scale, memory_stats=False)
    assert run.exact
    assert run.stats.by_mnemonic[cfg.tgemv_mnemonic] == n * plan.tiles * plan.chunks
    assert run.stats.by_mnemonic[cfg.tlut_mnemonic] == n * len(plan.passes) * plan.chunks
