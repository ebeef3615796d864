"""The trit-code variant (docs/dse/variants.toml ``c3s2-trits``, k = 6) through the kernel generator
at BitNet shapes, bit-exact in both engines: the down projection of BitNet b1.58 2B4T (2560 x 6912,
k divides K) and its attention projection (2560 x 2560, K zero-padded to 2562)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tsar.errors import UserError
from tsar.isa.config import configs, unregister_config
from tsar.isa.isafile import load_isa_file

VARIANTS_TOML = Path(__file__).resolve().parents[2] / "docs" / "dse" / "variants.toml"


@pytest.fixture(scope="module")
def trits():
    before = {cfg.name for cfg in configs()}
    cfgs = load_isa_file(VARIANTS_TOML)
    yield next(cfg for cfg in cfgs if cfg.weight_code == "trits")
    for cfg in cfgs:
        if cfg.name not in before:
            unregister_config(cfg.name)


@pytest.mark.native
@pytest.mark.parametrize("K, K_pad", [(6912, 6912), (2560, 2562)])
def test_bitnet_projections_bit_exact_in_both_engines(trits, K: int, K_pad: int) -> None:
    from tsar.sim import create_machine
    from tsar.simulate.tsar_kernel import plan_for, simulate

    M = 2560
    plan = plan_for(f"tsar-{trits.name}-op", M, K)
    assert (plan.K_pad, plan.chunks) == (K_pad, K_pad // 6)
    assert plan.weight_bytes == M * K_pad * 5 // 3 // 8  # 1.67 bits per weight, padding included
    rng = np.random.default_rng(K)
    x = rng.standard_normal((1, K)).astype(np.float32)
    w = rng.integers(-1, 2, (M, K)).astype(np.int8)
    garbage = rng.integers(0, 256, plan.workspace_bytes).astype(np.uint8)
    assert simulate(plan, x, w, 0.25, workspace=garbage).exact
    assert simulate(plan, x, w, 0.25, machine=create_machine("native"), memory_stats=False,
                    workspace=garbage).exact


def test_k_the_quantization_cannot_take_is_refused(trits) -> None:
    from tsar.simulate.tsar_kernel import plan_for

    with pytest.raises(UserError, match=r"K=2564 must be a positive multiple of 8 for c3s2-trits"):
        plan_for(f"tsar-{trits.name}-op", 2560, 2564)
    with pytest.raises(UserError, match=r"M=2568 must be a positive multiple of 16 for c3s2-trits"):
        plan_for(f"tsar-{trits.name}-op", 2568, 2560)
