import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tsar.kernels import quant, reference


def test_ternarize_absmean():
    w = np.array([[0.5, -2.0, 0.01, 1.0]], np.float32)
    w_t, scale = quant.ternarize(w)
    assert scale == pytest.approx(np.abs(w).mean())
    assert w_t.dtype == np.int8
    assert w_t.tolist() == [[1, -1, 0, 1]]


def test_ternarize_zero_and_errors():
    w_t, scale = quant.ternarize(np.zeros((2, 3), np.float32))
    assert scale == pytest.approx(1e-5) and not w_t.any()
    with pytest.raises(ValueError, match="float32"):
        quant.ternarize(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="2-D"):
        quant.ternarize(np.zeros(3, np.float32))


def test_quantize_activations_absmax():
    x = np.array([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0]], np.float32)
    a_q, scales = quant.quantize_activations(x)
    assert a_q.tolist() == [[64, -127, 32], [0, 0, 0]]   # 63.5 rounds half to even
    assert scales.dtype == np.float32
    assert scales[0] == np.float32(2.0) / np.float32(127)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 4), st.integers(1, 70), st.integers(0, 2**31 - 1))
def test_bitlinear_close_to_float(n, k, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, k), dtype=np.float32)
    w_t = rng.integers(-1, 2, (5, k), dtype=np.int8)
    a_q, scales = quant.quantize_activations(x)
    assert np.abs(a_q.astype(np.float32) * scales[:, None] - x).max() <= scales.max() / 2 + 1e-6
    y = reference.bitlinear(x, w_t, 0.25)
    exact = x @ w_t.T.astype(np.float32) * 0.25
    assert np.abs(y - exact).max() <= 0.25 * k * scales.max() / 2 + 1e-4


def test_reference_matmul_exact_and_checks():
    rng = np.random.default_rng(0)
    w = rng.integers(-1, 2, (7, 300), dtype=np.int8)
    a = rng.integers(-127, 128, (3, 300), dtype=np.int8)
    ref = a.astype(np.int64) @ w.astype(np.int64).T
    assert (reference.ternary_matmul(w, a) == ref).all()
    assert (reference.ternary_gemv(w, a[0]) == ref[0]).all()
    with pytest.raises(ValueError, match="K mismatch"):
        reference.ternary_matmul(w, a[:, :10])
    with pytest.raises(ValueError, match="int8"):
        reference.ternary_matmul(w.astype(np.int16), a)


def test_native_quantizer_matches_numpy():
    from tsar.kernels.baselines import ffi, lib  # the compiled library (tsar.kernels._native)
    rng = np.random.default_rng(1)
    for k in (5, 64, 2560, 2593):
        x = (rng.standard_normal((3, k)) * rng.uniform(0.01, 100)).astype(np.float32)
        x[1, 7 % k] = 0.5 + 127  # exercise rounding near the top
        q = np.empty((3, k), np.int8)
        s = np.empty(3, np.float32)
        lib.tsar_quantize_rows(ffi.from_buffer("float[]", x), ffi.from_buffer("int8_t[]", q),
                               ffi.from_buffer("float[]", s), 3, k)
        a_q, scales = quant.quantize_activations(x)
        assert (q == a_q).all() and (s == scales).all()
