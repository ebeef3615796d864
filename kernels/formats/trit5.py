"""5 trits per byte (1.6 bits/weight): one byte per row and group of five columns.

Code. Group g of row r holds ``v = sum_i w[r, 5g + i] * 3**i`` (i = 0..4, column 5g the least
significant trit), |v| <= 121, stored in sign-magnitude with the magnitude offset by 3: the byte is
``(0x80 if v < 0 else 0) | (|v| + 3)``. Negating the five weights flips only bit 7, so a decoder
reads the 7-bit magnitude index ``b & 127`` (3..124) and mirrors the digits when bit 7 is set; the
offset puts the top trit's boundary (|v| >= 41) at index 44, a multiple of 4, so that the top
trit (with its sign) is a function of ``b >> 2`` alone (a 64-entry table).

Layout. K is zero-padded to a multiple of 20 (``kp``: whole groups of four bytes), M must be a
multiple of 32. Bytes are stored ``[M/32][kp/20][32 rows][4 groups]``: for each 32-row block, a
128-byte record per four groups, in which the dword of a row holds its groups 4q .. 4q + 3 (as
``vpdpbusd`` pairs four bytes of a lane with four activations), rows 0-15 in the first 64 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tsar.kernels.formats._common import check_multiple, check_ternary

POW3 = np.array([1, 3, 9, 27, 81], np.int16)
GROUP = 5                 # trits per byte
QUAD = 4                  # groups per row dword
ROWS = 32                 # rows per block
MAG_OFFSET = 3            # stored magnitude = |v| + 3


@dataclass(frozen=True)
class Trit5Weights:
    """Packed 5-trit weights: uint8 data of M * kp/5 bytes; ``k`` is the logical K."""

    data: np.ndarray
    m: int
    k: int

    @property
    def kp(self) -> int:
        return padded_k(self.k)

    @property
    def nbytes(self) -> int:
        return self.data.size


def padded_k(k: int) -> int:
    """K rounded up to whole four-group dwords (a multiple of 20)."""
    unit = GROUP * QUAD
    return -(-k // unit) * unit


def encode(v: np.ndarray) -> np.ndarray:
    """Balanced values v (|v| <= 121) -> code bytes (uint8)."""
    v = np.asarray(v, np.int16)
    return (np.where(v < 0, 0x80, 0) | (np.abs(v) + MAG_OFFSET)).astype(np.uint8)


def decode(b: np.ndarray) -> np.ndarray:
    """Code bytes -> balanced values v (int16)."""
    b = np.asarray(b).astype(np.int16)
    mag = (b & 0x7F) - MAG_OFFSET
    return np.where(b & 0x80, -mag, mag).astype(np.int16)


def packed_nbytes(m: int, k: int) -> int:
    """Bytes of :func:`pack`'s ``data`` for an (M, K) matrix: one byte per row and group of five
    columns of the padded K, ``M * kp / 5`` (``kp``: :func:`padded_k`). ValueError for an M that
    :func:`pack` refuses."""
    check_multiple(m, ROWS, "M", "trit5 pack")
    return m * padded_k(k) // GROUP


def pack(w_t: np.ndarray) -> Trit5Weights:
    """Pack ternary int8 (M, K) with M % 32 == 0 (any K)."""
    w = check_ternary(w_t, "trit5 pack")
    m, k = w.shape
    check_multiple(m, ROWS, "M", "trit5 pack")
    kp = padded_k(k)
    padded = np.zeros((m, kp), np.int16)
    padded[:, :k] = w
    codes = encode((padded.reshape(m, kp // GROUP, GROUP) * POW3).sum(axis=2))       # (M, G)
    q = kp // (GROUP * QUAD)
    data = codes.reshape(m // ROWS, ROWS, q, QUAD).transpose(0, 2, 1, 3)
    return Trit5Weights(np.ascontiguousarray(data).reshape(-1), m, k)


def unpack(p: Trit5Weights) -> np.ndarray:
    """Trit5Weights -> ternary int8 (M, K)."""
    q = p.kp // (GROUP * QUAD)
    codes = p.data.reshape(p.m // ROWS, q, ROWS, QUAD).transpose(0, 2, 1, 3).reshape(p.m, q * QUAD)
    u = decode(codes) + 121                                  # sum_i (w_i + 1) 3^i, 0..242
    trits = (u[..., None] // POW3) % 3 - 1
    return trits.reshape(p.m, p.kp)[:, :p.k].astype(np.int8)
