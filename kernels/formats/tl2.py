"""bitnet.cpp TL2: 3 ternary weights per 4-bit magnitude index plus a sign bit (~1.67 bits/weight).

Layout facts from microsoft/BitNet ``utils/convert-hf-to-gguf-bitnet.py`` (preprocess_weights_tl2 and
its three/two-weight helpers), consumed by the kernels that ``utils/codegen_tl2.py`` generates:

* K splits into ``K3 = K - K % BK`` (3-weight part, block ``BK``, 96 in every preset) and a
  ``K - K3`` tail (a multiple of 32) coded TL1-style, 2 weights per 4-bit index.
* 3-weight group ``(w0, w1, w2)`` (consecutive k): ``v = 9*w0 + 3*w1 + w2``; index ``|v|`` (0..13),
  sign bit 1 iff ``v < 0``.
* Index stream, flat uint8, order ``[M/BM][K3/BK][BM/32][BK/6][32 bytes]``: one byte holds the
  index of group 2j (high nibble) and 2j+1 (low nibble) of one row; the 32 rows of a tile are stored
  in the order rows 0-7, 16-23, 8-15, 24-31.
* Sign stream, ``[M/BM][K3/BK][BM/32][BK/24][16 x uint16 little-endian]``: for the 8 groups of a
  24-column sub-block, word ``l`` bit ``15 - (2*g + h)`` is the sign of group g of row ``16*h + l``.
* Tail stream: 2-weight index ``3*w0 + w1 + 4`` (0..8), order ``[M/BM][(K-K3)/32][BM/32][8][32]``,
  same byte and row order as the index stream.
* The three streams are concatenated (index, sign, tail) and zero-padded to bitnet.cpp's tensor size
  ``(K-256)*M//3*5//8 + 256*M//2*4//8`` when that is larger. The per-tensor scale is kept apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tsar.kernels.formats._common import check_multiple, check_ternary, pack_nibble_tiles, unpack_nibble_tiles

DEFAULT_BK = 96
TAIL_BLOCK = 32


@dataclass(frozen=True)
class TL2Weights:
    """Packed TL2 weights: ``data`` is the bitnet.cpp byte stream; offsets are in bytes."""

    data: np.ndarray
    m: int
    k: int
    bm: int
    bk: int

    @property
    def k3(self) -> int:
        return self.k - self.k % self.bk

    @property
    def sign_offset(self) -> int:
        return self.m * self.k3 // 6

    @property
    def tail_offset(self) -> int:
        return self.sign_offset + self.m * self.k3 // 24

    @property
    def nbytes(self) -> int:
        """Bytes a kernel reads (index + sign + tail streams, without padding)."""
        return self.tail_offset + self.m * (self.k - self.k3) // 4


def default_bm(m: int) -> int:
    """Largest preset-like row block (256, 320, 160, 128, 64, 32) dividing M."""
    for bm in (256, 320, 160, 128, 64, 32):
        if m % bm == 0:
            return bm
    raise ValueError(f"TL2: M must be a multiple of 32, got {m}")


def pack(w_t: np.ndarray, bm: int | None = None, bk: int = DEFAULT_BK) -> TL2Weights:
    """Pack ternary int8 (M, K) weights into TL2. M % bm == 0, bm % 32 == 0, (K % bk) % 32 == 0."""
    w = check_ternary(w_t, "TL2 pack")
    m, k = w.shape
    bm = default_bm(m) if bm is None else bm
    check_multiple(bm, 32, "bm", "TL2 pack")
    check_multiple(m, bm, "M", "TL2 pack")
    check_multiple(bk, 24, "bk", "TL2 pack")
    k3 = k - k % bk
    check_multiple(k - k3, TAIL_BLOCK, "K % bk (the 2-weight tail)", "TL2 pack")
    g = w[:, :k3].reshape(m, k3 // 3, 3).astype(np.int16)
    v = 9 * g[..., 0] + 3 * g[..., 1] + g[..., 2]
    index = pack_nibble_tiles(np.abs(v), bm, bk // 3)
    sign = (v < 0).astype(np.uint16).reshape(m // bm, bm // 32, 2, 16, k3 // bk, bk // 24, 8)
    shift = (15 - 2 * np.arange(8)[None, :] - np.arange(2)[:, None]).astype(np.uint16)  # (h, g)
    words = (sign << shift[None, None, :, None, None, None, :]).sum(axis=(2, 6), dtype=np.uint16)
    sign_bytes = np.ascontiguousarray(words.transpose(0, 3, 1, 4, 2)).astype("<u2").view(np.uint8)
    t = w[:, k3:].reshape(m, (k - k3) // 2, 2).astype(np.int16)
    tail = pack_nibble_tiles(3 * t[..., 0] + t[..., 1] + 4, bm, TAIL_BLOCK // 2) if k > k3 else \
        np.zeros(0, np.uint8)
    body = np.concatenate([index, sign_bytes.reshape(-1), tail])
    size = max(body.size, (k - 256) * m // 3 * 5 // 8 + 256 * m // 2 * 4 // 8)
    data = np.zeros(size, np.uint8)
    data[:body.size] = body
    return TL2Weights(data, m, k, bm, bk)


def unpack(p: TL2Weights) -> np.ndarray:
    """TL2Weights -> ternary int8 (M, K)."""
    m, k, bm, bk, k3 = p.m, p.k, p.bm, p.bk, p.k3
    mag = unpack_nibble_tiles(p.data[:p.sign_offset], m, k3 // 3, bm, bk // 3).astype(np.int16)
    words = p.data[p.sign_offset:p.tail_offset].view("<u2").reshape(m // bm, k3 // bk, bm // 32, bk // 24, 16)
    shift = (15 - 2 * np.arange(8)[None, :] - np.arange(2)[:, None]).astype(np.uint16)
    bits = (words[..., None, None] >> shift) & 1                      # (MB, KB, C, S, l, h, g)
    sign = bits.transpose(0, 2, 5, 4, 1, 3, 6).reshape(m, k3 // 3)
    v = np.where(sign == 1, -mag, mag)
    digits = np.stack([(v + 13) // 9 - 1, (v + 13) // 3 % 3 - 1, (v + 13) % 3 - 1], axis=-1)
    out = np.empty((m, k), np.int8)
    out[:, :k3] = digits.reshape(m, k3)
    if k > k3:
        idx = unpack_nibble_tiles(p.data[p.tail_offset:p.nbytes], m, (k - k3) // 2, bm, TAIL_BLOCK // 2)
        out[:, k3:] = np.stack([idx // 3 - 1, idx % 3 - 1], axis=-1).reshape(m, k - k3)
    return out
