"""Intel's VNNI4-interleaved int2 layout (intel-aipc-lowbit-paper.md, section III-B, Fig. 1).

Codes are ``w + 1`` (0, 1, 2) in 2 bits. The logical weights are blocked by 32 rows and 4 columns;
each block is one 32-byte vector ``[M8][k4][m4]``: byte ``4*d + kk`` (d = 0..7, kk = 0..3) holds, in
bits ``2f..2f+1`` (f = 0..3), the code of row ``8*f + d`` and column ``4*kq + kk``. Blocks are stored
``[M/32][K/4]`` (the paper's ``[M/32][K/bk][bk/4]`` for any bk dividing K is the same byte order).
Up-convert: ``(v >> 2f) & 3`` gives a vector whose dword d is row ``8f + d``'s 4 consecutive codes,
ready for vpdpbusd / vpmaddubsw against 4 broadcast activations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tsar.kernels.formats._common import check_multiple, check_ternary


@dataclass(frozen=True)
class Int2Weights:
    """Packed interleaved int2 weights (M*K/4 bytes)."""

    data: np.ndarray
    m: int
    k: int

    @property
    def nbytes(self) -> int:
        return self.data.size


def pack(w_t: np.ndarray) -> Int2Weights:
    """Pack ternary int8 (M, K) with M % 32 == 0 and K % 4 == 0."""
    w = check_ternary(w_t, "int2 pack")
    m, k = w.shape
    check_multiple(m, 32, "M", "int2 pack")
    check_multiple(k, 4, "K", "int2 pack")
    q = (w.astype(np.uint8) + 1).reshape(m // 32, 4, 8, k // 4, 4)      # (MB, f, d, kq, kk)
    v = q[:, 0] | (q[:, 1] << 2) | (q[:, 2] << 4) | (q[:, 3] << 6)       # (MB, d, kq, kk)
    return Int2Weights(np.ascontiguousarray(v.transpose(0, 2, 1, 3)).reshape(-1), m, k)


def unpack(p: Int2Weights) -> np.ndarray:
    """Int2Weights -> ternary int8 (M, K)."""
    v = p.data.reshape(p.m // 32, p.k // 4, 8, 4)                        # (MB, kq, d, kk)
    q = (v[:, None] >> (2 * np.arange(4, dtype=np.uint8))[None, :, None, None, None]) & 3
    return (q.transpose(0, 1, 3, 2, 4).astype(np.int8) - 1).reshape(p.m, p.k)
