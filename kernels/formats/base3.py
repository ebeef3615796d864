"""Base-3 bytes shared by TQ1_0 and IQ1_BN: five trits per byte, stored scaled to the byte range.

Five trits d_0..d_4 (each 0, 1 or 2; d_0 the most significant) have the value
``v = sum_i d_i * 3**(4 - i)`` in [0, 242], stored as the byte ``ceil(256 * v / 243)``. Digit i comes
back as ``floor(3 * ((byte * 3**i) mod 256) / 256)``: multiplying by 3**i moves digit i to the top of
the byte's fixed-point fraction ``v / 243``, which the ceiling keeps exact.
"""

from __future__ import annotations

import numpy as np

POW3_MS_FIRST = np.array([81, 27, 9, 3, 1], np.uint16)


def encode(digits: np.ndarray) -> np.ndarray:
    """Trits (..., n), n <= 5, values 0..2, most significant first (missing low digits are 0) ->
    uint8 (...,) bytes ``ceil(256 * v / 243)``."""
    d = np.asarray(digits).astype(np.uint16)
    n = d.shape[-1]
    if n > 5:
        raise ValueError(f"base-3 byte: at most 5 trits, got {n}")
    v = (d * POW3_MS_FIRST[:n]).sum(axis=-1, dtype=np.uint16)
    return ((v * 256 + 242) // 243).astype(np.uint8)


def decode(data: np.ndarray, n: int = 5) -> np.ndarray:
    """uint8 (...,) -> trits (..., n) as uint8 0..2, most significant first."""
    b = np.asarray(data, np.uint8)[..., None].astype(np.uint16)
    x = (b * POW3_MS_FIRST[::-1][:n]) & 0xFF
    return ((x * 3) >> 8).astype(np.uint8)
