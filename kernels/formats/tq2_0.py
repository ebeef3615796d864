"""llama.cpp TQ2_0: 2-bit ternary codes in 256-weight blocks with an fp16 scale (2.0625 bits/weight).

Layout (from ggml-org/llama.cpp ``ggml/src/ggml-common.h``, ``block_tq2_0``, and
``ggml/src/ggml-quants.c``, ``quantize_row_tq2_0_ref`` / ``dequantize_row_tq2_0``): each row of K
weights (K % 256 == 0) is K/256 blocks of 66 bytes, rows stored one after another:

    bytes  0..63   qs: code c = w + 1 (0, 1, 2) in 2 bits; byte 32h + m (h = 0, 1; m = 0..31) holds
                   weight 128h + 32n + m in bits 2n..2n+1 (n = 0..3)
    bytes 64..65   d: fp16 block scale, little endian (the block's max |weight|; 0 for an all-zero block)

The weight is ``(c - 1) * d``. For a BitNet tensor every block of a nonzero row carries the same d
(the per-tensor scale); the native kernel computes the exact integer product of the ternary codes and
the float path applies the per-tensor scale, so it does not read d.

Checked byte for byte against ``quantize_row_tq2_0_ref`` of llama.cpp at commit
01243c587feceaa5d6a6c2305535ef2f549c48b8, compiled with gcc and fed ``scale * w`` (scales 1.0, 0.37,
2.5; 5 %, 66 % and 100 % nonzero weights; shapes 1 x 256, 3 x 512, 64 x 2560, 7 x 6912 and
2560 x 2560; all-zero blocks included): byte-identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tsar.kernels.formats._common import RowBlockWeights, check_multiple, check_ternary

BLOCK = 256
BLOCK_BYTES = 66


def block_scales(w: np.ndarray, scale: float, block: int) -> np.ndarray:
    """fp16 (uint16 bits) scale per ``block`` weights of each row: ``scale`` where the block has a
    nonzero weight, else 0 (what the public quantizers write for ``scale * w``)."""
    if not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive finite float, got {scale}")
    m, k = w.shape
    nonzero = (w.reshape(m, k // block, block) != 0).any(axis=2)
    return np.where(nonzero, np.float16(scale), np.float16(0)).astype(np.float16).view(np.uint16)


@dataclass(frozen=True)
class TQ2Weights(RowBlockWeights):
    """Packed TQ2_0 weights: M rows of K/256 blocks of 66 bytes (uint8)."""

    BLOCK: ClassVar[int] = BLOCK
    BLOCK_BYTES: ClassVar[int] = BLOCK_BYTES

    @property
    def scales(self) -> np.ndarray:
        """float32 (M, K/256) block scales."""
        d = self.data.reshape(self.m, self.k // BLOCK, BLOCK_BYTES)[:, :, 64:66]
        return np.ascontiguousarray(d).view(np.float16)[..., 0].astype(np.float32)


def packed_nbytes(m: int, k: int) -> int:
    """Bytes of :func:`pack`'s ``data`` for an (M, K) matrix:
    ``M * 66 K / 256`` (K / 256 blocks of 66 bytes a row, their fp16 scales included).
    ValueError for a K that :func:`pack` refuses."""
    check_multiple(k, BLOCK, "K", "TQ2_0 pack")
    return m * (k // BLOCK * BLOCK_BYTES)


def pack(w_t: np.ndarray, scale: float = 1.0) -> TQ2Weights:
    """Pack ternary int8 (M, K), K % 256 == 0; ``scale`` goes in the block scales."""
    w = check_ternary(w_t, "TQ2_0 pack")
    m, k = w.shape
    check_multiple(k, BLOCK, "K", "TQ2_0 pack")
    nb = k // BLOCK
    c = (w.astype(np.uint8) + 1).reshape(m, nb, 2, 4, 32)            # (row, block, h, n, m)
    qs = c[:, :, :, 0] | (c[:, :, :, 1] << 2) | (c[:, :, :, 2] << 4) | (c[:, :, :, 3] << 6)
    blocks = np.empty((m, nb, BLOCK_BYTES), np.uint8)
    blocks[:, :, :64] = qs.reshape(m, nb, 64)
    blocks[:, :, 64:] = block_scales(w, scale, BLOCK)[..., None].view(np.uint8)
    return TQ2Weights(blocks.reshape(-1), m, k)


def unpack(p: TQ2Weights) -> np.ndarray:
    """TQ2Weights -> ternary int8 (M, K)."""
    qs = p.data.reshape(p.m, p.k // BLOCK, BLOCK_BYTES)[:, :, :64].reshape(p.m, -1, 2, 1, 32)
    c = (qs >> (2 * np.arange(4, dtype=np.uint8))[:, None]) & 3        # (row, block, h, n, m)
    return (c.astype(np.int8) - 1).reshape(p.m, p.k)
