"""llama.cpp TQ1_0: base-3 ternary codes in 256-weight blocks with an fp16 scale (1.6875 bits/weight).

Layout (from ggml-org/llama.cpp ``ggml/src/ggml-common.h``, ``block_tq1_0``, and
``ggml/src/ggml-quants.c``, ``quantize_row_tq1_0_ref`` / ``dequantize_row_tq1_0``): each row of K
weights (K % 256 == 0) is K/256 blocks of 54 bytes, rows stored one after another. Codes are
c = w + 1 (0, 1, 2); a byte holds five trits as ``ceil(256 * v / 243)`` with ``v`` their base-3
value, the first listed the most significant (see :mod:`.base3`):

    bytes  0..31   qs[0..32):  byte m: weights m + 32n, n = 0..4 (weights 0..159)
    bytes 32..47   qs[32..48): byte 32 + m: weights 160 + m + 16n, n = 0..4 (weights 160..239)
    bytes 48..51   qh[0..4):   byte 48 + j: weights 240 + j + 4n, n = 0..3, as the top four of five
                   trits (the last trit is 0) (weights 240..255)
    bytes 52..53   d: fp16 block scale, little endian (the block's max |weight|; 0 for an all-zero block)

The weight is ``(c - 1) * d``. For a BitNet tensor every block of a nonzero row carries the same d
(the per-tensor scale); the native kernel computes the exact integer product of the ternary codes and
the float path applies the per-tensor scale, so it does not read d.

Checked byte for byte against ``quantize_row_tq1_0_ref`` of llama.cpp at commit
01243c587feceaa5d6a6c2305535ef2f549c48b8, compiled with gcc and fed ``scale * w`` (scales 1.0, 0.37,
2.5; 5 %, 66 % and 100 % nonzero weights; shapes 1 x 256, 3 x 512, 64 x 2560, 7 x 6912 and
2560 x 2560; all-zero blocks included): byte-identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tsar.kernels.formats import base3
from tsar.kernels.formats._common import RowBlockWeights, check_multiple, check_ternary
from tsar.kernels.formats.tq2_0 import block_scales

BLOCK = 256
BLOCK_BYTES = 54


@dataclass(frozen=True)
class TQ1Weights(RowBlockWeights):
    """Packed TQ1_0 weights: M rows of K/256 blocks of 54 bytes (uint8)."""

    BLOCK: ClassVar[int] = BLOCK
    BLOCK_BYTES: ClassVar[int] = BLOCK_BYTES

    @property
    def scales(self) -> np.ndarray:
        """float32 (M, K/256) block scales."""
        d = self.data.reshape(self.m, self.k // BLOCK, BLOCK_BYTES)[:, :, 52:54]
        return np.ascontiguousarray(d).view(np.float16)[..., 0].astype(np.float32)


def packed_nbytes(m: int, k: int) -> int:
    """Bytes of :func:`pack`'s ``data`` for an (M, K) matrix:
    ``M * 54 K / 256`` (K / 256 blocks of 54 bytes a row, their fp16 scales included).
    ValueError for a K that :func:`pack` refuses."""
    check_multiple(k, BLOCK, "K", "TQ1_0 pack")
    return m * (k // BLOCK * BLOCK_BYTES)


def pack(w_t: np.ndarray, scale: float = 1.0) -> TQ1Weights:
    """Pack ternary int8 (M, K), K % 256 == 0; ``scale`` goes in the block scales."""
    w = check_ternary(w_t, "TQ1_0 pack")
    m, k = w.shape
    check_multiple(k, BLOCK, "K", "TQ1_0 pack")
    nb = k // BLOCK
    c = (w.astype(np.uint8) + 1).reshape(m, nb, BLOCK)
    blocks = np.empty((m, nb, BLOCK_BYTES), np.uint8)
    blocks[:, :, 0:32] = base3.encode(c[:, :, :160].reshape(m, nb, 5, 32).transpose(0, 1, 3, 2))
    blocks[:, :, 32:48] = base3.encode(c[:, :, 160:240].reshape(m, nb, 5, 16).transpose(0, 1, 3, 2))
    blocks[:, :, 48:52] = base3.encode(c[:, :, 240:].reshape(m, nb, 4, 4).transpose(0, 1, 3, 2))
    blocks[:, :, 52:] = block_scales(w, scale, BLOCK)[..., None].view(np.uint8)
    return TQ1Weights(blocks.reshape(-1), m, k)


def unpack(p: TQ1Weights) -> np.ndarray:
    """TQ1Weights -> ternary int8 (M, K)."""
    b = p.data.reshape(p.m, p.k // BLOCK, BLOCK_BYTES)
    head = base3.decode(b[:, :, 0:32]).transpose(0, 1, 3, 2).reshape(p.m, -1, 160)
    mid = base3.decode(b[:, :, 32:48]).transpose(0, 1, 3, 2).reshape(p.m, -1, 80)
    tail = base3.decode(b[:, :, 48:52], 4).transpose(0, 1, 3, 2).reshape(p.m, -1, 16)
    return (np.concatenate([head, mid, tail], axis=2).astype(np.int8) - 1).reshape(p.m, p.k)
