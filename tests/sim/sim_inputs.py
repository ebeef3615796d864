"""Random native-harness records with the edge values that matter for each lane type."""

from __future__ import annotations

import numpy as np

from tsar.sim.host_oracle import FLAGS_IN, MXCSR_IN, RECORD_BYTES
from tsar.sim.x86.fpenv import MXCSR_DEFAULT

_SPECIAL_BYTES = np.array([0, 1, 2, 0x7F, 0x80, 0x81, 0xFE, 0xFF], np.uint8)
_SPECIAL_I16 = np.array([0, 1, -1, 2, 0x7FFF, -0x8000, 0x7F, -0x80, 0xFF, 0x100, 0x4000, -0x4000],
                        np.int16)


def _floats(rng: np.random.Generator, n: int, dt: type) -> np.ndarray:
    base = rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, 1.5, 2.5, -2.5, 2.0**31, -2.0**31,
                        2.0**31 - 128, 1e-40, -1e-45, 3.4e38])
    halves = rng.integers(-50, 50, n) + 0.5
    pick = rng.integers(0, 3, n)
    vals = np.where(pick == 0, base, np.where(pick == 1, rng.choice(special, n), halves))
    return vals.astype(dt)


def _fma_edges(rng: np.random.Generator, n: int) -> np.ndarray:
    """float32 lanes whose products land on (or next to) rounding midpoints."""
    near_one = 1 + rng.integers(0, 9, n) * 2.0**-12
    tiny = rng.integers(-3, 4, n) * 2.0**-40
    ones = rng.choice([1.0, -1.0, -2.0, 2.0**-24, -(2.0**-24)], n)
    pick = rng.integers(0, 3, n)
    return np.where(pick == 0, near_one, np.where(pick == 1, tiny, ones)).astype(np.float32)


def make_records(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` records: a mix of uniform bytes and lane-typed edge values (eight equal groups)."""
    rec = rng.integers(0, 256, (n, RECORD_BYTES), dtype=np.uint8)
    groups = np.array_split(np.arange(n), 8)
    rec[groups[1]] = rng.choice(_SPECIAL_BYTES, (len(groups[1]), RECORD_BYTES))
    g = groups[2]
    rec[g] = rng.choice(_SPECIAL_I16, (len(g), RECORD_BYTES // 2)).view(np.uint8)
    g = groups[3]
    rec[g] = rng.integers(0, 70, (len(g), RECORD_BYTES // 4), dtype=np.uint32).view(np.uint8)
    g = groups[4]
    rec[g] = rng.integers(0, 70, (len(g), RECORD_BYTES // 8), dtype=np.uint64).view(np.uint8)
    g = groups[5]
    rec[g] = _floats(rng, len(g) * RECORD_BYTES // 4, np.float32).reshape(len(g), -1).view(np.uint8)
    g = groups[6]
    rec[g] = _floats(rng, len(g) * RECORD_BYTES // 8, np.float64).reshape(len(g), -1).view(np.uint8)
    g = groups[7]
    rec[g] = _fma_edges(rng, len(g) * RECORD_BYTES // 4).reshape(len(g), -1).view(np.uint8)
    flags = rng.integers(0, 2, (n, 6)) * np.array([0x1, 0x4, 0x10, 0x40, 0x80, 0x800])
    rec[:, FLAGS_IN:FLAGS_IN + 8] = (flags.sum(axis=1) | 0x2).astype(np.uint64)[:, None].view(np.uint8)
    rec[:, MXCSR_IN:MXCSR_IN + 4] = make_mxcsr(rng, n)[:, None].view(np.uint8)
    return rec


def make_mxcsr(rng: np.random.Generator, n: int) -> np.ndarray:
    """MXCSR values, every exception masked: half the default, half with a random rounding mode,
    DAZ, FTZ and sticky flags."""
    rc = rng.integers(0, 4, n) << 13
    daz = rng.integers(0, 2, n) * 0x40
    ftz = rng.integers(0, 2, n) * 0x8000
    sticky = rng.integers(0, 64, n)
    varied = MXCSR_DEFAULT | rc | daz | ftz | sticky
    return np.where(rng.integers(0, 2, n) == 0, MXCSR_DEFAULT, varied).astype(np.uint32)
