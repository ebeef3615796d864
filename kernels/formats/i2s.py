"""bitnet.cpp I2_S: 2-bit codes ``w + 1`` (0, 1, 2), 4 per byte, per-tensor float scale.

Layout facts from microsoft/BitNet ``src/ggml-bitnet-mad.cpp`` (quantize_i2_s, x86 with the default
``ACT_PARALLEL`` from ``include/gemm-config.h``; ``QK_I2_S = 128``) and ``quantize_to_i2_s`` in
``utils/convert-hf-to-gguf-bitnet.py``: the row-major weights are cut into blocks of 128 values; block
b is 32 bytes where byte j holds values ``128b + j`` (bits 7-6), ``128b + 32 + j`` (bits 5-4),
``128b + 64 + j`` (bits 3-2) and ``128b + 96 + j`` (bits 1-0). After the ``M*K/4`` code bytes come 32
bytes whose first 4 hold the float32 scale. We require K % 128 == 0 so blocks never straddle rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tsar.kernels.formats._common import check_multiple, check_ternary

BLOCK = 128
CODES_PER_BYTE = 4
"""2-bit codes per byte."""
TAIL_BYTES = 32
"""Bytes after the codes; the first 4 hold the float32 scale."""


@dataclass(frozen=True)
class I2SWeights:
    """Packed I2_S weights: ``data`` = M*K/4 code bytes + 32-byte tail holding the float32 scale."""

    data: np.ndarray
    m: int
    k: int

    @property
    def nbytes(self) -> int:
        return self.m * self.k // CODES_PER_BYTE

    @property
    def scale(self) -> float:
        return float(self.data[self.nbytes:self.nbytes + 4].view(np.float32)[0])


def packed_nbytes(m: int, k: int) -> int:
    """Bytes of :func:`pack`'s ``data`` for an (M, K) matrix: ``M * K / 4`` code bytes (2 bits a
    weight) and the 32-byte tail. ValueError for a K that :func:`pack` refuses."""
    check_multiple(k, BLOCK, "K", "I2_S pack")
    return m * k // CODES_PER_BYTE + TAIL_BYTES


def pack(w_t: np.ndarray, scale: float = 1.0) -> I2SWeights:
    """Pack ternary int8 (M, K), K % 128 == 0, with the per-tensor ``scale`` in the tail."""
    w = check_ternary(w_t, "I2_S pack")
    m, k = w.shape
    check_multiple(k, BLOCK, "K", "I2_S pack")
    q = (w.astype(np.uint8) + 1).reshape(-1, CODES_PER_BYTE, BLOCK // CODES_PER_BYTE)
    codes = (q[:, 0] << 6) | (q[:, 1] << 4) | (q[:, 2] << 2) | q[:, 3]
    ncode = m * k // CODES_PER_BYTE
    data = np.zeros(ncode + TAIL_BYTES, np.uint8)
    data[:ncode] = codes.reshape(-1)
    data[ncode:ncode + 4] = np.array([scale], np.float32).view(np.uint8)
    return I2SWeights(data, m, k)


def unpack(p: I2SWeights) -> np.ndarray:
    """I2SWeights -> ternary int8 (M, K)."""
    b = p.data[:p.nbytes].reshape(-1, 1, 32)
    q = (b >> np.array([6, 4, 2, 0], np.uint8)[None, :, None]) & 3
    return (q.astype(np.int8) - 1).reshape(p.m, p.k)
