"""ik_llama.cpp IQ1_BN: base-3 ternary codes in 64-weight blocks of 13 bytes, one fp16 scale per row
(1.625 bits/weight).

Layout (from ikawrakow/ik_llama.cpp ``ggml/src/ggml-common.h``, ``block_iq1_bn``, the type traits in
``ggml/src/ggml.c`` (``row_meta_size = 2``) and ``ggml/src/iqk/iqk_quantize.cpp``,
``quantize_row_iq1_bn_ref`` / ``dequantize_row_iq1_bn``): each row of K weights (K % 64 == 0) is

    bytes 0..1         the row scale: fp16, little endian (the row's max |weight|; 0 for an all-zero row)
    then K/64 blocks of 13 bytes. Codes are c = w + 1 (0, 1, 2); a byte holds up to five trits as
    ``ceil(256 * v / 243)`` with ``v`` their base-3 value (see :mod:`.base3`). In block b, with
    g = 0..3 the 16-weight group and base = 64b + 16g:
        byte 3g + i (i = 0..2)  weights base + 5i + j, j = 0..4, weight base + 5i the least significant
        byte 12                 weights 64b + 16g + 15, g = 0..3, g = 0 the least significant
                                (its most significant trit is 0)

so a row takes 2 + 13 K/64 bytes; rows are stored one after another. The weight is
``(c - 1) * scale``; the native kernel computes the exact integer product of the ternary codes and
the float path applies the per-tensor scale (for a BitNet tensor every nonzero row carries it), so it
does not read the row scale. The public quantizer writes code 2 for every weight of an all-zero row
(its threshold is 0 there) where this packer writes code 1; both dequantize to zeros (scale 0).

Checked byte for byte against ``quantize_row_iq1_bn_ref`` of ik_llama.cpp at commit
8337e4cd3861406fc04e0854b1409cd1b027fbc9, compiled with g++ and fed ``scale * w`` (scales 1.0, 0.37,
2.5; 5 %, 66 % and 100 % nonzero weights; shapes 1 x 64, 3 x 192, 64 x 2560, 7 x 6912 and
2560 x 2560): byte-identical for every row with a nonzero weight.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tsar.kernels.formats import base3
from tsar.kernels.formats._common import RowBlockWeights, check_multiple, check_ternary
from tsar.kernels.formats.iq2_bn import row_scales

BLOCK = 64
BLOCK_BYTES = 13
ROW_SCALE_BYTES = 2


@dataclass(frozen=True)
class IQ1BNWeights(RowBlockWeights):
    """Packed IQ1_BN weights: M rows of 2 + 13 K/64 bytes (uint8)."""

    BLOCK: ClassVar[int] = BLOCK
    BLOCK_BYTES: ClassVar[int] = BLOCK_BYTES
    ROW_HEADER_BYTES: ClassVar[int] = ROW_SCALE_BYTES

    @property
    def scales(self) -> np.ndarray:
        """float32 (M,) row scales."""
        rows = self.data.reshape(self.m, self.row_bytes)
        return np.ascontiguousarray(rows[:, :ROW_SCALE_BYTES]).view(np.float16)[:, 0].astype(np.float32)


def packed_nbytes(m: int, k: int) -> int:
    """Bytes of :func:`pack`'s ``data`` for an (M, K) matrix:
    ``M * (2 + 13 K / 64)`` (a 2-byte fp16 scale and K / 64 blocks of 13 bytes a row).
    ValueError for a K that :func:`pack` refuses."""
    check_multiple(k, BLOCK, "K", "IQ1_BN pack")
    return m * (ROW_SCALE_BYTES + k // BLOCK * BLOCK_BYTES)


def pack(w_t: np.ndarray, scale: float = 1.0) -> IQ1BNWeights:
    """Pack ternary int8 (M, K), K % 64 == 0; ``scale`` goes in the row scales (as fp16)."""
    w = check_ternary(w_t, "IQ1_BN pack")
    m, k = w.shape
    check_multiple(k, BLOCK, "K", "IQ1_BN pack")
    nb = k // BLOCK
    c = (w.astype(np.uint8) + 1).reshape(m, nb, 4, 16)                 # (row, block, g, 16)
    blocks = np.empty((m, nb, BLOCK_BYTES), np.uint8)
    # five weights per byte, least significant first: reverse to the most-significant-first order
    blocks[:, :, :12] = base3.encode(c[..., :15].reshape(m, nb, 4, 3, 5)[..., ::-1]).reshape(m, nb, 12)
    extra = np.zeros((m, nb, 5), np.uint8)                             # top trit 0, then g = 3..0
    extra[..., 1:] = c[..., 15][..., ::-1]
    blocks[:, :, 12] = base3.encode(extra)
    rows = np.empty((m, ROW_SCALE_BYTES + nb * BLOCK_BYTES), np.uint8)
    rows[:, :ROW_SCALE_BYTES] = row_scales(w, scale).astype(np.float16)[:, None].view(np.uint8)
    rows[:, ROW_SCALE_BYTES:] = blocks.reshape(m, nb * BLOCK_BYTES)
    return IQ1BNWeights(rows.reshape(-1), m, k)


def unpack(p: IQ1BNWeights) -> np.ndarray:
    """IQ1BNWeights -> ternary int8 (M, K)."""
    b = p.data.reshape(p.m, p.row_bytes)[:, ROW_SCALE_BYTES:].reshape(p.m, -1, BLOCK_BYTES)
    c = np.empty((p.m, b.shape[1], 4, 16), np.uint8)
    c[..., :15] = base3.decode(b[:, :, :12])[..., ::-1].reshape(p.m, -1, 4, 15)
    c[..., 15] = base3.decode(b[:, :, 12])[..., :0:-1]
    return (c.astype(np.int8) - 1).reshape(p.m, p.k)
