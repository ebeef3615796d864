"""Shared checks and helpers for the weight formats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

# Position of row r (0..31) inside a 32-byte TL1/TL2 tile: rows 0-7, 16-23, 8-15, 24-31, so that
# AVX2 unpacklo/unpackhi (which work per 128-bit lane) yield rows 0-15 and 16-31 in order.
TILE_ROW_ORDER = np.array([0, 2, 1, 3])


@dataclass(frozen=True)
class RowBlockWeights:
    """Packed weights stored row after row (flat uint8 ``data``): each of the M rows is a header of
    ``ROW_HEADER_BYTES`` (a row scale, or nothing) and then K / ``BLOCK`` blocks of ``BLOCK_BYTES``
    bytes. Each row-major block format sets the three constants."""

    BLOCK: ClassVar[int]
    BLOCK_BYTES: ClassVar[int]
    ROW_HEADER_BYTES: ClassVar[int] = 0

    data: np.ndarray
    m: int
    k: int

    @property
    def row_bytes(self) -> int:
        return self.ROW_HEADER_BYTES + self.k // self.BLOCK * self.BLOCK_BYTES

    @property
    def nbytes(self) -> int:
        return self.m * self.row_bytes


def check_ternary(w: np.ndarray, name: str) -> np.ndarray:
    """Return w as an int8 (M, K) array after checking every value is in {-1, 0, 1}."""
    w = np.asarray(w)
    if w.ndim != 2 or w.dtype != np.int8:
        raise ValueError(f"{name}: expected int8 (M, K) ternary weights, got {w.dtype} {w.shape}")
    if w.size and (w.min() < -1 or w.max() > 1):
        raise ValueError(f"{name}: weights must be in {{-1, 0, 1}}, got range [{w.min()}, {w.max()}]")
    return w


def check_multiple(value: int, unit: int, what: str, name: str) -> None:
    if unit <= 0 or value % unit:
        raise ValueError(f"{name}: {what} must be a multiple of {unit}, got {value}")


def pack_nibble_tiles(codes: np.ndarray, bm: int, codes_per_block: int) -> np.ndarray:
    """Pack 4-bit codes (M, P) into bitnet.cpp's TL2 tile order, returned flat (uint8).

    Order: [M/bm][P/codes_per_block][bm/32][codes_per_block/2][32 tile bytes]; tile byte =
    code[2j] << 4 | code[2j+1] for one row, rows placed by TILE_ROW_ORDER.
    """
    m, p = codes.shape
    c = codes.astype(np.uint8).reshape(m // bm, bm // 32, 4, 8, p // codes_per_block, codes_per_block // 2, 2)
    c = c[:, :, TILE_ROW_ORDER]
    byte = (c[..., 0] << 4) | c[..., 1]                     # (MB, C, 4, 8, KB, J)
    return np.ascontiguousarray(byte.transpose(0, 4, 1, 5, 2, 3)).reshape(-1)


def unpack_nibble_tiles(data: np.ndarray, m: int, p: int, bm: int, codes_per_block: int) -> np.ndarray:
    """Inverse of :func:`pack_nibble_tiles`: flat uint8 -> 4-bit codes (M, P)."""
    byte = data.reshape(m // bm, p // codes_per_block, bm // 32, codes_per_block // 2, 4, 8)
    byte = byte.transpose(0, 2, 4, 5, 1, 3)[:, :, TILE_ROW_ORDER]   # order is its own inverse
    codes = np.stack([byte >> 4, byte & 15], axis=-1)
    return codes.reshape(m, p)
