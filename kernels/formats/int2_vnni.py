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

ROWS = 32
"""Rows per block (M must be a multiple)."""
COLS = 4
"""Columns per block (K must be a multiple)."""
CODES_PER_BYTE = 4
"""2-bit codes per byte: a block is one ``ROWS * COLS / 4``-byte vector."""


@dataclass(frozen=True)
class Int2Weights:
    """Packed interleaved int2 weights (M*K/4 bytes)."""

    data: np.ndarray
    m: int
    k: int

    @property
    def nbytes(self) -> int:
        return self.data.size


def _check_shape(m: int, k: int) -> None:
    check_multiple(m, ROWS, "M", "int2 pack")
    check_multiple(k, COLS, "K", "int2 pack")


def packed_nbytes(m: int, k: int) -> int:
    """Bytes of :func:`pack`'s ``data`` for an (M, K) matrix: 2 bits a weight, ``M * K / 4``.
    ValueError for a shape that :func:`pack` refuses."""
    _check_shape(m, k)
    return m * k // CODES_PER_BYTE


def pack(w_t: np.ndarray) -> Int2Weights:
    """Pack ternary int8 (M, K) with M % 32 == 0 and K % 4 == 0."""
    w = check_ternary(w_t, "int2 pack")
    m, k = w.shape
    _check_shape(m, k)
    q = (w.astype(np.uint8) + 1).reshape(m // ROWS, 4, 8, k // COLS, COLS)      # (MB, f, d, kq, kk)
    v = q[:, 0] | (q[:, 1] << 2) | (q[:, 2] << 4) | (q[:, 3] << 6)       # (MB, d, kq, kk)
    return Int2Weights(np.ascontiguousarray(v.transpose(0, 2, 1, 3)).reshape(-1), m, k)


def unpack(p: Int2Weights) -> np.ndarray:
    """Int2Weights -> ternary int8 (M, K)."""
    v = p.data.reshape(p.m // ROWS, p.k // COLS, 8, COLS)                # (MB, kq, d, kk)
    q = (v[:, None] >> (2 * np.arange(4, dtype=np.uint8))[None, :, None, None, None]) & 3
    return (q.transpose(0, 1, 3, 2, 4).astype(np.int8) - 1).reshape(p.m, p.k)
