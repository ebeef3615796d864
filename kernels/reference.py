"""Exact integer reference for ternary x int8 products and the float BitLinear built on it.

Shapes: weights ``w_t`` int8 (M, K) with values in {-1, 0, 1} (any int8 is accepted), activations
``a_q`` int8 (N, K); the product ``out[n, m] = sum_k a_q[n, k] * w_t[m, k]`` is int32 (N, M).
"""

from __future__ import annotations

import numpy as np

from tsar.kernels.quant import dequantize, quantize_activations

# float64 sums of integer terms are exact below 2**53; |a*w| <= 128*128.
_EXACT_LIMIT = 2**53 // (128 * 128)


def _int8_matrix(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 2 or x.dtype != np.int8:
        raise ValueError(f"{name}: expected a 2-D int8 array, got {x.dtype} array of shape {x.shape}")
    return x


def ternary_matmul(w_t: np.ndarray, a_q: np.ndarray) -> np.ndarray:
    """Exact ``a_q @ w_t.T``: int8 (M, K) weights, int8 (N, K) activations -> int32 (N, M).

    Computed with float64 BLAS on integer-valued operands, which is exact (every partial sum is an
    integer below 2**53, i.e. the same as int64 accumulation); the result must fit int32.
    """
    w_t = _int8_matrix(w_t, "ternary_matmul weights")
    a_q = _int8_matrix(a_q, "ternary_matmul activations")
    if w_t.shape[1] != a_q.shape[1]:
        raise ValueError(f"ternary_matmul: K mismatch, weights have K={w_t.shape[1]}, "
                         f"activations K={a_q.shape[1]}")
    if w_t.shape[1] > _EXACT_LIMIT:
        raise ValueError(f"ternary_matmul: K must be <= {_EXACT_LIMIT}, got {w_t.shape[1]}")
    acc = a_q.astype(np.float64) @ w_t.astype(np.float64).T
    if acc.size and np.abs(acc).max() > np.iinfo(np.int32).max:
        raise ValueError("ternary_matmul: result does not fit int32")
    return acc.astype(np.int32)


def ternary_gemv(w_t: np.ndarray, a_q: np.ndarray) -> np.ndarray:
    """Exact GEMV: int8 (M, K) weights, int8 (K,) activations -> int32 (M,)."""
    return ternary_matmul(w_t, np.asarray(a_q).reshape(1, -1))[0]


def bitlinear(x: np.ndarray, w_t: np.ndarray, w_scale: float) -> np.ndarray:
    """BitLinear forward: float32 x (N, K) -> float32 (N, M).

    Quantize x per token (absmax int8), integer product with the ternary weights, dequantize with
    ``act_scale[n] * w_scale``; see :mod:`tsar.kernels.quant` for the exact float32 operations.
    """
    a_q, scales = quantize_activations(x)
    return dequantize(ternary_matmul(w_t, a_q), scales, w_scale)
