"""Zero padding of K up to whole chunks (``KernelPlan.K_pad``): c3s2-trits (k = 6) at K = 1024 and
2560, c4s4 and c4s4-512 (k = 16) at K = 1032; every dataflow, both engines (the native one for
512 bits where the host has AVX-512), against the numpy reference.

The padded inputs are made inert twice, and each is checked on its own: the packer writes zero
weights there (round trip; a stream with +1 padding weights is refused by the unpacker), and the
kernel writes zero activations there (a stream with +1 padding weights, run on a workspace full of
127s, is still exact). Adversarial layers (every activation +-127, every weight +1) make any
leak visible in every output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tsar.isa.config import configs, unregister_config
from tsar.isa.isafile import load_isa_file
from tsar.isa.semantics import pack_tile
from tsar.kernels.formats.tsar import pack_weights, unpack_weights
from tsar.kernels.tsar_plan import FLOWS, KernelPlan

VARIANTS_TOML = Path(__file__).resolve().parents[2] / "docs" / "dse" / "variants.toml"
CASES = [("c3s2-trits", 1024, 1026), ("c3s2-trits", 2560, 2562), ("c4s4", 1032, 1040),
         ("c4s4-512", 1032, 1040)]
TILES, N = 3, 3  # M = 3 tiles of the configuration's m, 3 tokens


@pytest.fixture(scope="module", autouse=True)
def variants():
    before = {cfg.name for cfg in configs()}
    cfgs = load_isa_file(VARIANTS_TOML)
    yield
    for cfg in cfgs:
        if cfg.name not in before:
            unregister_config(cfg.name)


def _plan(config: str, flow: str, K: int) -> KernelPlan:
    from tsar.isa.config import get_config
    from tsar.simulate.tsar_kernel import plan_for

    return plan_for(f"tsar-{config}-{flow}", TILES * get_config(config).m, K)


def _stream_with_ones_in_padding(plan: KernelPlan, w: np.ndarray) -> np.ndarray:
    """The weight stream of ``w`` with +1 (not 0) weights in the padding columns."""
    cfg = plan.cfg
    w_pad = np.pad(w, ((0, 0), (0, plan.padding)), constant_values=1)
    blocks = w_pad.reshape(plan.tiles, cfg.m, plan.chunks, cfg.k).transpose(0, 2, 1, 3)
    tiles, chunks = plan.stream_order
    return np.ascontiguousarray(pack_tile(cfg, blocks)[tiles, chunks]).reshape(-1)


def _adversarial(M: int, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Activations +-1 (quantized to +-127), weights all +1: output n is ``sum(signs of token n)``."""
    x = np.where(np.random.default_rng(K).random((N, K)) < 0.5, 1.0, -1.0).astype(np.float32)
    return x, np.ones((M, K), np.int8)


@pytest.mark.parametrize("config, K, K_pad", CASES)
@pytest.mark.parametrize("flow", FLOWS)
def test_plan_pads_k_and_counts_the_padded_bytes(config: str, K: int, K_pad: int, flow: str) -> None:
    plan = _plan(config, flow, K)
    cfg, M = plan.cfg, plan.M
    assert (plan.K_pad, plan.padding, plan.chunks) == (K_pad, K_pad - K, K_pad // cfg.k)
    assert plan.weight_bytes == M * K_pad * cfg.weight_bits // (cfg.m * cfg.k) // 8  # padding read too
    assert plan.workspace_layout["xq"][1] == K_pad
    assert sum(w.chunks for w in plan.windows) == plan.chunks
    tiles, chunks = plan.stream_order
    assert np.array_equal(np.sort(tiles * plan.chunks + chunks), np.arange(plan.tiles * plan.chunks))
    w = np.random.default_rng(K).integers(-1, 2, (M, K)).astype(np.int8)
    stream = pack_weights(plan, w)
    assert stream.shape == (plan.weight_bytes,) and np.array_equal(unpack_weights(plan, stream), w)
    with pytest.raises(ValueError, match=rf"nonzero weights in the padding columns {K}\.\.{K_pad - 1}"):
        unpack_weights(plan, _stream_with_ones_in_padding(plan, w))


@pytest.mark.native
@pytest.mark.parametrize("config, K, K_pad", CASES)
@pytest.mark.parametrize("flow", FLOWS)
def test_padded_layers_bit_exact_in_both_engines(config: str, K: int, K_pad: int, flow: str) -> None:
    from tsar.kernels import quant, reference
    from tsar.sim import create_machine
    from tsar.sim.platforms.detect import cpu_flags
    from tsar.simulate.tsar_kernel import simulate

    plan = _plan(config, flow, K)
    M = plan.M
    rng = np.random.default_rng(K + len(flow))
    w, w_scale = quant.ternarize(rng.standard_normal((M, K)).astype(np.float32))
    x = (rng.standard_normal((N, K)) * rng.uniform(0.1, 10, (N, 1))).astype(np.float32)
    garbage = rng.integers(0, 256, plan.workspace_bytes).astype(np.uint8)
    sevens = np.full(plan.workspace_bytes, 127, np.uint8)  # int8 127 wherever xq is not written
    x_adv, w_adv = _adversarial(M, K)
    expected = np.repeat(x_adv.sum(axis=1, keepdims=True), M, axis=1)  # acc = 127 * sum, / 127
    assert np.array_equal(reference.bitlinear(x_adv, w_adv, 1.0), expected)
    natively = plan.cfg.runs_on(cpu_flags())  # the host executes the kernel's base ISA
    for machine in (None, create_machine("native")) if natively else (None,):
        for xs, ws, scale, stream, workspace in [
                (x, w, w_scale, None, garbage),
                (x_adv, w_adv, 1.0, None, sevens),
                (x_adv, w_adv, 1.0, _stream_with_ones_in_padding(plan, w_adv), sevens)]:
            run = simulate(plan, xs, ws, scale, stream=stream, machine=machine, memory_stats=False,
                           workspace=workspace.copy())
            assert run.exact, f"{run.mismatches} of {run.y.size} outputs differ"
            if machine is None:  # the padded chunk is run like any other
                assert run.stats.by_mnemonic[plan.cfg.tgemv_mnemonic] == N * plan.tiles * plan.chunks
        assert np.array_equal(run.y, expected)
