"""Native TQ1_0 / TQ2_0 / IQ1_BN / IQ2_BN kernels: exact integer products on every token-group and
block remainder, int16 extremes at K = 6912, uneven thread splits, the float path's scale."""

import numpy as np
import pytest

from tsar.kernels import baselines as B
from tsar.kernels import reference as R

pytestmark = pytest.mark.native

NAMES = ["tq1_0", "tq2_0", "iq1_bn", "iq2_bn"]
BLOCK = {"tq1_0": 256, "tq2_0": 256, "iq1_bn": 64, "iq2_bn": 64}
ISAS = [isa for isa in B.ISAS if isa != "auto"]   # every level of the native library


def _isa_or_skip(name, isa):
    if B.kernel_isa(name, isa) is None:
        pytest.skip(f"{name} has no {isa} variant usable on this CPU ({B.cpu_isa()})")


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", NAMES)
def test_exact_on_token_and_block_remainders(name, isa):
    """Token counts around the groups of four (and the paired one- and two-token paths), odd and
    even block counts, row counts that split unevenly over two and three threads."""
    _isa_or_skip(name, isa)
    rng = np.random.default_rng(len(name) + len(isa))
    for m, blocks in ((64, 1), (37, 3), (130, 4)):
        k = blocks * BLOCK[name]
        w = rng.integers(-1, 2, (m, k), dtype=np.int8)
        kern = B.prepare(name, w)
        for n in (1, 2, 3, 4, 5, 8, 9):
            a = rng.integers(-127, 128, (n, k), dtype=np.int8)
            ref = R.ternary_matmul(w, a)
            for threads in (1, 2, 3):
                assert (kern.matmul_int(a, threads, isa) == ref).all(), (m, k, n, threads)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", NAMES)
def test_int16_extremes_at_k6912(name, isa):
    """All weights +1 or -1 against activations +-127 at K = 6912 (and a 90 % mixture), for one to
    five tokens (both int16 accumulation schemes of the AVX2 path): sums must be widened in time."""
    _isa_or_skip(name, isa)
    m, k = 32, 6912
    for sign in (1, -1):
        kern = B.prepare(name, np.full((m, k), sign, np.int8))
        for value in (127, -127):
            for n in (1, 2, 3, 5):
                out = kern.matmul_int(np.full((n, k), value, np.int8), 2, isa)
                assert (out == sign * value * k).all(), (sign, value, n)
    rng = np.random.default_rng(3)
    w = np.where(rng.random((m, k)) < 0.9, 1, rng.integers(-1, 2, (m, k))).astype(np.int8)
    a = np.where(rng.random((3, k)) < 0.9, 127, -127).astype(np.int8)
    assert (B.prepare(name, w).matmul_int(a, 2, isa) == R.ternary_matmul(w, a)).all()


@pytest.mark.parametrize("name", NAMES)
def test_float_path_applies_the_tensor_scale(name):
    """The block / row scales in the packed bytes are not read: the float path uses w_scale."""
    rng = np.random.default_rng(5)
    m, k = 40, 2 * BLOCK[name]
    w = rng.integers(-1, 2, (m, k), dtype=np.int8)
    x = rng.standard_normal((3, k), dtype=np.float32)
    kern = B.prepare(name, w, 0.25)
    assert np.array_equal(kern.matmul(x, 2), R.bitlinear(x, w, 0.25))
    assert kern.packed.scales.max() == 1.0        # the packer's default scale field


def test_bits_per_weight_with_row_scales():
    w = np.ones((8, 2560), np.int8)
    assert B.prepare("tq1_0", w).bits_per_weight == 1.6875
    assert B.prepare("tq2_0", w).bits_per_weight == 2.0625
    assert B.prepare("iq1_bn", w).bits_per_weight == pytest.approx((2 + 13 * 40) * 8 / 2560)
    assert B.prepare("iq2_bn", w).bits_per_weight == pytest.approx((4 + 16 * 40) * 8 / 2560)


def test_shape_rules():
    with pytest.raises(ValueError, match="multiple of 256"):
        B.prepare("tq1_0", np.zeros((4, 192), np.int8))
    with pytest.raises(ValueError, match="multiple of 64"):
        B.prepare("iq2_bn", np.zeros((4, 96), np.int8))
