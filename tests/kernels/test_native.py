import numpy as np
import pytest

from tsar.kernels import baselines as B
from tsar.kernels import reference as R

pytestmark = pytest.mark.native

# (M, K) per kernel that satisfy every layout rule, including TL2 tails and uneven thread splits.
SHAPES = {
    "tl2": [(32, 96), (64, 352), (320, 288), (256, 2560)],
    "tl1": [(32, 128), (96, 384), (256, 2560)],
    "i2s": [(4, 128), (12, 384), (256, 2560)],
    "dense": [(4, 64), (13, 192), (256, 2560)],
    "int2": [(32, 4), (96, 388), (256, 2560)],
    "trit5": [(32, 3), (96, 391), (256, 2560)],
    "tq1_0": [(32, 256), (37, 768), (256, 2560)],
    "tq2_0": [(32, 256), (37, 768), (256, 2560)],
    "iq1_bn": [(32, 64), (37, 320), (256, 2560)],
    "iq2_bn": [(32, 64), (37, 320), (256, 2560)],
}
ISAS = [isa for isa in B.ISAS if isa != "auto"]   # every level of the native library


def _isa_or_skip(name, isa):
    if B.kernel_isa(name, isa) is None:
        pytest.skip(f"{name} has no {isa} variant usable on this CPU ({B.cpu_isa()})")


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", B.KERNELS)
def test_integer_core_exact(name, isa):
    _isa_or_skip(name, isa)
    rng = np.random.default_rng(hash((name, isa)) % 2**32)
    for m, k in SHAPES[name]:
        w = rng.integers(-1, 2, (m, k), dtype=np.int8)
        kern = B.prepare(name, w)
        for n, threads in ((1, 1), (3, 2), (2, 3)):
            a = rng.integers(-127, 128, (n, k), dtype=np.int8)
            assert (kern.matmul_int(a, threads, isa) == R.ternary_matmul(w, a)).all(), (m, k, n, threads)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", B.KERNELS)
def test_float_path_bit_exact(name, isa):
    _isa_or_skip(name, isa)
    rng = np.random.default_rng(7)
    m, k = SHAPES[name][1]
    w = rng.integers(-1, 2, (m, k), dtype=np.int8)
    x = (rng.standard_normal((4, k)) * 3).astype(np.float32)
    x[2] = 0.0                                  # all-zero token: scale clamps to 1e-5 / 127
    kern = B.prepare(name, w, 0.125)
    for threads in (1, 2):
        assert np.array_equal(kern.matmul(x, threads, isa), R.bitlinear(x, w, 0.125))


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", B.KERNELS)
@pytest.mark.parametrize("sign", [1, -1])
def test_adversarial_no_wrap(name, isa, sign):
    """All weights +1 (or -1), all activations 127 / -127 at K = 6912: int16 sums must be widened."""
    _isa_or_skip(name, isa)
    m, k = 32, 6912
    w = np.full((m, k), sign, np.int8)
    kern = B.prepare(name, w)
    for value in (127, -127):
        a = np.full((2, k), value, np.int8)
        assert (kern.matmul_int(a, 2, isa) == sign * value * k).all()


def test_random_mixture_of_extremes():
    rng = np.random.default_rng(3)
    m, k = 64, 6912
    w = np.where(rng.random((m, k)) < 0.9, 1, rng.integers(-1, 2, (m, k))).astype(np.int8)
    a = np.where(rng.random((1, k)) < 0.9, 127, -127).astype(np.int8)
    ref = R.ternary_matmul(w, a)
    for name in B.KERNELS:
        assert (B.prepare(name, w).matmul_int(a) == ref).all(), name


@pytest.mark.slow
@pytest.mark.parametrize("name", B.KERNELS)
def test_bitnet_layer_shapes(name):
    rng = np.random.default_rng(11)
    for m, k in ((2560, 2560), (6912, 2560), (2560, 6912)):
        w = rng.integers(-1, 2, (m, k), dtype=np.int8)
        x = rng.standard_normal((2, k), dtype=np.float32)
        assert np.array_equal(B.prepare(name, w, 0.5).matmul(x, 2), R.bitlinear(x, w, 0.5))


def test_validation_messages():
    w = np.random.default_rng(0).integers(-1, 2, (32, 96), dtype=np.int8)
    kern = B.prepare("tl2", w)
    x = np.zeros((1, 96), np.float32)
    with pytest.raises(ValueError, match=r"expected dtype float32, got float64"):
        kern.matmul(x.astype(np.float64))
    with pytest.raises(ValueError, match=r"expected shape \(N, 96\) with N >= 1, got \(1, 95\)"):
        kern.matmul(np.zeros((1, 95), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        kern.matmul(np.zeros((96, 2), np.float32).T)
    with pytest.raises(ValueError, match="threads must be an int in"):
        kern.matmul(x, threads=0)
    with pytest.raises(ValueError, match="unknown isa"):
        kern.matmul(x, isa="sse")
    with pytest.raises(ValueError, match="expected dtype int8"):
        kern.matmul_int(x)
    with pytest.raises(ValueError, match="unknown kernel"):
        B.prepare("tl3", w)
    with pytest.raises(ValueError, match=r"\|w\| <= 64"):
        B.prepare("dense", np.full((4, 64), 100, np.int8))
    if B.cpu_isa() != "avx512":
        with pytest.raises(ValueError, match="not available on this CPU"):
            B.prepare("int2", w).matmul(x, isa="avx512")


def test_copy_and_metadata():
    w = np.random.default_rng(0).integers(-1, 2, (64, 2560), dtype=np.int8)
    kern = B.prepare("tl2", w)
    twin = kern.copy()
    a = np.ones((1, 2560), np.int8)
    assert (twin.matmul_int(a) == kern.matmul_int(a)).all()
    assert kern.bits_per_weight == pytest.approx(1.675, abs=1e-3)
    assert B.prepare("trit5", w).bits_per_weight == pytest.approx(1.6)
    assert B.kernel_isa("tl2") == "avx2"


def test_timing_and_bandwidth_helpers():
    w = np.random.default_rng(0).integers(-1, 2, (64, 256), dtype=np.int8)
    kern = B.prepare("int2", w)
    seconds = B.time_matmul([kern, kern.copy()], np.ones((1, 256), np.float32), repeats=5)
    assert seconds.shape == (5,) and (seconds > 0).all()
    assert B.stream_read_bandwidth(1 << 22, threads=2, repeats=2) > 1e8


@pytest.mark.native
def test_int8_peak_and_percent_of_peak():
    from tsar.kernels import bench

    peak = B.int8_peak("avx2", iterations=200_000, repeats=2)
    assert 50e9 < peak < 5e12  # ops/s of vpmaddubsw on one core: tens to thousands of Gop/s
    with pytest.raises(ValueError, match="no int8 multiply-add peak"):
        B.int8_peak("sse2")
    case = bench.Case("int2", 8, 256, 1024, 1, "cache")
    result = bench.run_case(case, 30e9, repeats=3)
    pct = bench.peak_pct(result, {result.isa: peak * 10, "avx512": peak * 10})
    assert 0 < pct < 100
    table = bench.format_table({1: 30e9}, [result], {result.isa: peak})
    assert "% peak" in table and "int8 multiply-add peak" in table


@pytest.mark.parametrize("isa", ["avx2", "avx512", "avxvnni"])
@pytest.mark.parametrize("name", ["int2", "dense", "trit5", "i2s"])
def test_token_blocked_gemm_paths_exact(name, isa):
    """Token and row counts that exercise every block remainder of the GEMM paths (int2: decoded
    blocks x token quads on AVX2, token triples on AVX-512; dense: 4 x 2 row-token tiles on AVX2,
    4 x 4 on AVX-512; i2s: token pairs and an odd block count on AVX-512; trit5: 12-, 8- and
    4-token groups of decoded codes on AVX-512, token pairs on AVX2 and AVX-VNNI, K not a multiple
    of 20), random and adversarial (K = 6912 through the token-blocked paths)."""
    _isa_or_skip(name, isa)
    rng = np.random.default_rng(5)
    m, k = 96, {"trit5": 1013, "i2s": 1152}.get(name, 1024)
    w = rng.integers(-1, 2, (m, k)).astype(np.int8)
    kern = B.prepare(name, w)
    for n in (1, 2, 3, 4, 5, 7, 9, 16) + ((13, 25, 30) if name == "trit5" else ()):
        a = rng.integers(-127, 128, (n, k), dtype=np.int8)
        for threads in (1, 3):  # three threads split the rows unevenly
            assert (kern.matmul_int(a, threads, isa) == R.ternary_matmul(w, a)).all(), (n, threads)
    ones = B.prepare(name, np.ones((m, k), np.int8))
    a = np.full((7, k), 127, np.int8)
    assert (ones.matmul_int(a, 1, isa) == 127 * k).all()
    for sign in (1, -1):
        extreme = B.prepare(name, np.full((64, 6912), sign, np.int8))
        for value in (127, -127):
            a = np.full((5, 6912), value, np.int8)
            assert (extreme.matmul_int(a, 1, isa) == sign * value * 6912).all(), (sign, value)
