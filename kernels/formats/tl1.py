"""bitnet.cpp TL1: 2 ternary weights per 4-bit index ``3*w0 + w1 + 4`` (0..8), 2 bits/weight.

Layout facts from microsoft/BitNet ``utils/convert-hf-to-gguf-bitnet.py`` (preprocess_weights_tl1,
process_tl1) with blocks ``BM`` (rows), ``BK`` (columns), ``bm`` (rows per tile) and ``by = 256 // bm``
(columns per tile): flat uint8 in the order
``[M/BM][K/BK][BM/bm][BK/by][bm/16][by/4][16 rows]``, where one byte holds the indices of the pairs
``2q`` (high nibble) and ``2q+1`` (low nibble) of its ``by/4`` slot q, for one row. The presets use
``bm`` = 32 or 64; our kernel supports ``bm = 32`` (``by = 8``), bitnet.cpp's most common choice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tsar.kernels.formats._common import check_multiple, check_ternary
from tsar.kernels.formats.tl2 import default_bm

DEFAULT_BK = 128
BMM = 32
BMMS = (16, 32, 64)
"""The tile heights ``bmm`` the layout holds: whole 16-row groups, and tiles of ``256 / bmm`` columns
that are whole 4-column slots."""
WEIGHTS_PER_BYTE = 4
"""Two 2-weight indices (4 bits each) per byte."""


@dataclass(frozen=True)
class TL1Weights:
    """Packed TL1 weights (``data`` is bitnet.cpp's byte stream, M*K/4 bytes)."""

    data: np.ndarray
    m: int
    k: int
    bm: int
    bk: int
    bmm: int = BMM

    @property
    def nbytes(self) -> int:
        return self.data.size


def _dims(m: int, k: int, bm: int, bk: int, bmm: int) -> tuple[int, ...]:
    by = 256 // bmm
    return (m // bm, bm // bmm, bmm // 16, 16, k // bk, bk // by, by // 4, 2)


def _blocks(m: int, k: int, bm: int | None, bk: int, bmm: int) -> int:
    """Check the blocks for an (M, K) matrix (ValueError where they do not fit); return bm."""
    bm = default_bm(m) if bm is None else bm
    if bmm not in BMMS:
        raise ValueError(f"TL1 pack: bmm must be one of {', '.join(map(str, BMMS))}, got {bmm}")
    check_multiple(bm, bmm, "bm", "TL1 pack")
    check_multiple(m, bm, "M", "TL1 pack")
    check_multiple(bk, 256 // bmm, "bk", "TL1 pack")
    check_multiple(k, bk, "K", "TL1 pack")
    return bm


def packed_nbytes(m: int, k: int, bm: int | None = None, bk: int = DEFAULT_BK, bmm: int = BMM) -> int:
    """Bytes of :func:`pack`'s ``data`` for an (M, K) matrix: 2 bits a weight, ``M * K / 4`` (no
    padding: the blocks must divide M and K). ValueError for a shape or blocks :func:`pack` refuses."""
    _blocks(m, k, bm, bk, bmm)
    return m * k // WEIGHTS_PER_BYTE


def pack(w_t: np.ndarray, bm: int | None = None, bk: int = DEFAULT_BK, bmm: int = BMM) -> TL1Weights:
    """Pack ternary int8 (M, K) into TL1; M % bm == 0, bm % bmm == 0, K % bk == 0, bk % (256/bmm) == 0."""
    w = check_ternary(w_t, "TL1 pack")
    m, k = w.shape
    bm = _blocks(m, k, bm, bk, bmm)
    pairs = w.reshape(m, k // 2, 2).astype(np.int16)
    idx = (3 * pairs[..., 0] + pairs[..., 1] + 4).astype(np.uint8)
    d = idx.reshape(_dims(m, k, bm, bk, bmm))   # (MB, C, U, r, KB, Y, Q, h)
    byte = (d[..., 0] << 4) | d[..., 1]          # (MB, C, U, r, KB, Y, Q)
    data = np.ascontiguousarray(byte.transpose(0, 4, 1, 5, 2, 6, 3)).reshape(-1)
    return TL1Weights(data, m, k, bm, bk, bmm)


def unpack(p: TL1Weights) -> np.ndarray:
    """TL1Weights -> ternary int8 (M, K)."""
    mb, c, u, r, kb, y, q, _ = _dims(p.m, p.k, p.bm, p.bk, p.bmm)
    byte = p.data.reshape(mb, kb, c, y, u, q, r).transpose(0, 2, 4, 6, 1, 3, 5)
    idx = np.stack([byte >> 4, byte & 15], axis=-1).astype(np.int16).reshape(p.m, p.k // 2)
    return np.stack([idx // 3 - 1, idx % 3 - 1], axis=-1).reshape(p.m, p.k).astype(np.int8)
