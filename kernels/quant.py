"""BitNet b1.58 quantizers, shared by the reference, the native baselines and the T-SAR kernels.

Weights (per tensor, "absmean"): ``scale = max(mean|W|, 1e-5)``,
``W_t = clip(rint(W / scale), -1, 1)`` as int8, so ``W ~= W_t * scale``.

Activations (per token, "absmax", as BitLinear does): ``amax = max(max|x|, 1e-5)``,
``a_q = clip(rint(x * (127 / amax)), -127, 127)`` as int8, and the returned dequantization scale is
``amax / 127`` so ``x ~= a_q * scale``. All arithmetic is float32 in exactly this order (rint is
round-half-even), so the native kernels, which do the same operations in C, match bit for bit.
"""

from __future__ import annotations

import numpy as np

EPS = np.float32(1e-5)
QMAX = np.float32(127)


def _matrix(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array, got shape {x.shape}")
    if x.dtype != np.float32:
        raise ValueError(f"{name}: expected dtype float32, got {x.dtype}")
    return x


def ternarize(w: np.ndarray) -> tuple[np.ndarray, float]:
    """Ternarize float32 weights (M, K) -> (int8 (M, K) in {-1, 0, 1}, float scale = mean|W|)."""
    w = _matrix(w, "ternarize")
    scale = np.maximum(np.float32(np.abs(w).mean(dtype=np.float64)), EPS)
    w_t = np.clip(np.rint(w / scale), -1, 1).astype(np.int8)
    return w_t, float(scale)


def activation_scales(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-token ``(127 / amax, amax / 127)`` as float32 (N,) arrays for float32 x (N, K)."""
    amax = np.maximum(np.abs(x).max(axis=1), EPS).astype(np.float32)
    return (QMAX / amax).astype(np.float32), (amax / QMAX).astype(np.float32)


def quantize_activations(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quantize float32 activations (N, K) -> (int8 (N, K) in [-127, 127], float32 (N,) scales).

    ``scales[n] = amax_n / 127`` is the dequantization factor: ``x[n] ~= a_q[n] * scales[n]``.
    """
    x = _matrix(x, "quantize_activations")
    inv, scales = activation_scales(x)
    a_q = np.clip(np.rint(x * inv[:, None]), -127, 127).astype(np.int8)
    return a_q, scales


def dequantize(acc: np.ndarray, act_scales: np.ndarray, w_scale: float) -> np.ndarray:
    """int32 products (N, M) -> float32: ``float32(acc) * (act_scales[n] * w_scale)`` (float32 ops)."""
    deq = (act_scales.astype(np.float32) * np.float32(w_scale)).astype(np.float32)
    return acc.astype(np.float32) * deq[:, None]
