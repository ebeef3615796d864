"""5 trits per byte (1.6 bits/weight), after the lut_mm AVX-512 design (lut-mm-avx512-blog.md).

Byte for row r and 5-column group g: the signed int8 ``v = sum_i w[r, 5g + i] * 3**i`` (i = 0..4,
column 5g is the least significant trit), so |v| <= 121: the sign is the byte's sign and ``|v|``
indexes a 122-entry table. K is zero-padded to a multiple of 5 (``kp``). Bytes are stored
``[M/32][kp/5][32 rows]`` so one 32-byte load gives one group's code for 32 output rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tsar.kernels.formats._common import check_multiple, check_ternary

POW3 = np.array([1, 3, 9, 27, 81], np.int16)


@dataclass(frozen=True)
class Trit5Weights:
    """Packed 5-trit weights: int8 data of M * kp/5 bytes; ``k`` is the logical K."""

    data: np.ndarray
    m: int
    k: int

    @property
    def kp(self) -> int:
        return -(-self.k // 5) * 5

    @property
    def nbytes(self) -> int:
        return self.data.size


def pack(w_t: np.ndarray) -> Trit5Weights:
    """Pack ternary int8 (M, K) with M % 32 == 0 (any K)."""
    w = check_ternary(w_t, "trit5 pack")
    m, k = w.shape
    check_multiple(m, 32, "M", "trit5 pack")
    kp = -(-k // 5) * 5
    padded = np.zeros((m, kp), np.int16)
    padded[:, :k] = w
    v = (padded.reshape(m, kp // 5, 5) * POW3).sum(axis=2).astype(np.int8)       # (M, G)
    data = np.ascontiguousarray(v.reshape(m // 32, 32, kp // 5).transpose(0, 2, 1)).reshape(-1)
    return Trit5Weights(data, m, k)


def unpack(p: Trit5Weights) -> np.ndarray:
    """Trit5Weights -> ternary int8 (M, K)."""
    g = p.kp // 5
    v = p.data.reshape(p.m // 32, g, 32).transpose(0, 2, 1).reshape(p.m, g).astype(np.int16) + 121
    trits = (v[..., None] // POW3) % 3 - 1
    return trits.reshape(p.m, p.kp)[:, :p.k].astype(np.int8)
