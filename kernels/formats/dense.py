"""Dense int8 weights (the ``dense`` native kernel): row-major (M, K) bytes with |w| <= 64, the
per-row weight sums and the int16 flush step of the AVX2 rows.

The kernel offsets each token's activations to u8 (``a + 128``) so that ``pmaddubsw`` / ``vpdpbusd``
take them as the unsigned operand, and subtracts ``128 * rowsum(w)`` (``aux``). AVX2 accumulates
int16 pair sums (``2 * 255 * max|w|`` a step) for ``bk`` steps of 32 columns before widening them,
so ``bk * 2 * 255 * max|w| <= 32767``; the VNNI levels accumulate int32 and ignore it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_ABS = 64
"""Largest weight magnitude (``pmaddubsw``'s pair sums 2 * 255 * 64 stay below 32768)."""
K_STEP = 64
"""Columns per step of the native rows' loops: K must be a multiple."""


@dataclass(frozen=True)
class DenseWeights:
    """``data``: the M * K weight bytes (int8 viewed as uint8); ``aux``: int32 row sums (M);
    ``bk``: the int16 flush step in 32-column steps."""

    data: np.ndarray
    aux: np.ndarray
    bk: int
    m: int
    k: int

    @property
    def nbytes(self) -> int:
        return self.data.size


def flush_steps(k: int, maxabs: int) -> int:
    """The AVX2 rows' int16 flush step for K columns and weights of at most ``maxabs``."""
    return max(1, min(k // 32, 32767 // (2 * 255 * max(maxabs, 1))))


def _check_k(k: int) -> None:
    if k % K_STEP:
        raise ValueError(f"dense: K must be a multiple of {K_STEP}, got {k}")


def packed_nbytes(m: int, k: int) -> int:
    """Bytes of :func:`pack`'s ``data`` for an (M, K) matrix: one byte per weight, ``M * K``
    (the row sums are ``aux``, not counted). ValueError for a K that :func:`pack` refuses."""
    _check_k(k)
    return m * k


def pack(w_t: np.ndarray) -> DenseWeights:
    """Pack int8 (M, K) weights with K % 64 == 0 and |w| <= 64."""
    w = np.asarray(w_t)
    if w.ndim != 2 or w.dtype != np.int8:
        raise ValueError(f"dense: expected int8 (M, K) weights, got {w.dtype} {w.shape}")
    m, k = w.shape
    _check_k(k)
    maxabs = int(np.abs(w.astype(np.int16)).max()) if w.size else 0
    if maxabs > MAX_ABS:
        raise ValueError(f"dense: weights must satisfy |w| <= {MAX_ABS} (pmaddubsw range), "
                         f"got max |w| = {maxabs}")
    w = np.ascontiguousarray(w)
    return DenseWeights(w.reshape(-1).view(np.uint8), w.astype(np.int32).sum(axis=1, dtype=np.int32),
                        flush_steps(k, maxabs), m, k)
