"""The trit-code variant (docs/dse/variants.toml ``c3s2-trits``) through the kernel generator at a
BitNet shape: the down projection of BitNet b1.58 2B4T (2560 x 6912), bit-exact in both engines;
a K that k = 6 does not divide is refused with the shape named."""

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
def test_bitnet_down_projection_bit_exact_in_both_engines(trits):
    from tsar.kernel_sim import plan_for, simulate
    from tsar.sim import Machine

    M, K = 2560, 6912
    plan = plan_for(f"tsar-{trits.name}-op", M, K)
    assert plan.weight_bytes == M * K * 5 // 3 // 8  # 1.67 bits per weight, nothing padded
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, K)).astype(np.float32)
    w = rng.integers(-1, 2, (M, K)).astype(np.int8)
    assert simulate(plan, x, w, 0.25).exact
    assert simulate(plan, x, w, 0.25, machine=Machine(engine="native"), memory_stats=False).exact


def test_k_not_a_multiple_of_k_is_refused(trits):
    from tsar.kernel_sim import plan_for

    with pytest.raises(UserError, match=r"K=2560 must be a positive multiple of 6 for c3s2-trits"):
        plan_for(f"tsar-{trits.name}-op", 2560, 2560)
