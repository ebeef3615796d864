"""ik_llama.cpp IQ2_BN: 2-bit ternary codes in 64-weight blocks, one float32 scale per row (2.0 bits/weight).

Layout (from ikawrakow/ik_llama.cpp ``ggml/src/ggml-common.h``, ``block_iq2_bn``, the type traits in
``ggml/src/ggml.c`` (``row_meta_size = 4``) and ``ggml/src/iqk/iqk_quantize.cpp``,
``quantize_row_iq2_bn_ref`` / ``dequantize_row_iq2_bn``): each row of K weights (K % 64 == 0) is

    bytes 0..3         the row scale: float32, little endian (the row's max |weight|; 0 for an all-zero row)
    then K/64 blocks of 16 bytes: code c = w + 1 (0, 1, 2) in 2 bits; byte j (j = 0..15) of block b
                       holds weight 64b + 16s + j in bits 2s..2s+1 (s = 0..3)

so a row takes 4 + K/4 bytes; rows are stored one after another. The weight is ``(c - 1) * scale``;
the native kernel computes the exact integer product of the ternary codes and the float path applies
the per-tensor scale (for a BitNet tensor every nonzero row carries it), so it does not read the row
scale. The public quantizer writes code 2 for every weight of an all-zero row (its threshold is
0 there) where this packer writes code 1; both dequantize to zeros (scale 0).

Checked byte for byte against ``quantize_row_iq2_bn_ref`` of ik_llama.cpp at commit
8337e4cd3861406fc04e0854b1409cd1b027fbc9, compiled with g++ and fed ``scale * w`` (scales 1.0, 0.37,
2.5; 5 %, 66 % and 100 % nonzero weights; shapes 1 x 64, 3 x 192, 64 x 2560, 7 x 6912 and
2560 x 2560): byte-identical for every row with a nonzero weight.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tsar.kernels.formats._common import RowBlockWeights, check_multiple, check_ternary

BLOCK = 64
BLOCK_BYTES = 16
ROW_SCALE_BYTES = 4


def row_scales(w: np.ndarray, scale: float) -> np.ndarray:
    """Per-row scale (float32): ``scale`` for a row with a nonzero weight, else 0."""
    if not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive finite float, got {scale}")
    return np.where((w != 0).any(axis=1), np.float32(scale), np.float32(0)).astype(np.float32)


@dataclass(frozen=True)
class IQ2BNWeights(RowBlockWeights):
    """Packed IQ2_BN weights: M rows of 4 + K/4 bytes (uint8)."""

    BLOCK: ClassVar[int] = BLOCK
    BLOCK_BYTES: ClassVar[int] = BLOCK_BYTES
    ROW_HEADER_BYTES: ClassVar[int] = ROW_SCALE_BYTES

    @property
    def scales(self) -> np.ndarray:
        """float32 (M,) row scales."""
        rows = self.data.reshape(self.m, self.row_bytes)
        return np.ascontiguousarray(rows[:, :ROW_SCALE_BYTES]).view(np.float32)[:, 0]


def packed_nbytes(m: int, k: int) -> int:
    """Bytes of :func:`pack`'s ``data`` for an (M, K) matrix:
    ``M * (4 + 16 K / 64)`` (a 4-byte float32 scale and K / 64 blocks of 16 bytes a row).
    ValueError for a K that :func:`pack` refuses."""
    check_multiple(k, BLOCK, "K", "IQ2_BN pack")
    return m * (ROW_SCALE_BYTES + k // BLOCK * BLOCK_BYTES)


def pack(w_t: np.ndarray, scale: float = 1.0) -> IQ2BNWeights:
    """Pack ternary int8 (M, K), K % 64 == 0; ``scale`` goes in the row scales."""
    w = check_ternary(w_t, "IQ2_BN pack")
    m, k = w.shape
    check_multiple(k, BLOCK, "K", "IQ2_BN pack")
    c = (w.astype(np.uint8) + 1).reshape(m, k // BLOCK, 4, 16)        # (row, block, s, j)
    qs = c[:, :, 0] | (c[:, :, 1] << 2) | (c[:, :, 2] << 4) | (c[:, :, 3] << 6)
    rows = np.empty((m, ROW_SCALE_BYTES + k // 4), np.uint8)
    rows[:, :ROW_SCALE_BYTES] = row_scales(w, scale)[:, None].view(np.uint8)
    rows[:, ROW_SCALE_BYTES:] = qs.reshape(m, k // BLOCK * BLOCK_BYTES)
    return IQ2BNWeights(rows.reshape(-1), m, k)


def unpack(p: IQ2BNWeights) -> np.ndarray:
    """IQ2BNWeights -> ternary int8 (M, K)."""
    qs = p.data.reshape(p.m, p.row_bytes)[:, ROW_SCALE_BYTES:].reshape(p.m, -1, 1, 16)
    c = (qs >> (2 * np.arange(4, dtype=np.uint8))[:, None]) & 3         # (row, block, s, j)
    return (c.astype(np.int8) - 1).reshape(p.m, p.k)
