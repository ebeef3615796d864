"""The weight formats' ``packed_nbytes`` formulas against the bytes ``pack`` lays out, and
``packed_weight_bytes`` taking the formula rather than packing."""

import itertools
import re

import numpy as np
import pytest

from tsar.kernels.formats import tl1, tl2
from tsar.kernels.registry import NATIVE_KERNELS
from tsar.simulate.native_kernel import packed_weight_bytes

SIZED = [name for name, spec in NATIVE_KERNELS.items() if hasattr(spec.packer, "packed_nbytes")]

# Rows around every row block (32 and its multiples up to TL1's default 256 / 320 / 160 blocks),
# and unrestricted ones for the row-major formats; columns 0..40 (every remainder of trit5's
# 20-column padding and int2's 4-column blocks), around 64 and 128, and multiples of 64..256.
ROWS = (0, 1, 2, 3, 16, 31, 32, 33, 64, 96, 128, 160, 192, 256, 320, 480)
COLS = (*range(41), 44, 60, 63, 64, 65, 96, 100, 127, 128, 129, 160, 192, 256, 320, 384, 512, 640, 768, 1024)


def _pack_bytes(pack, m: int, k: int, **options) -> int | str:
    """``pack``'s data bytes for an (M, K) zero matrix, or the message of the ValueError it raises."""
    try:
        return int(pack(np.zeros((m, k), np.int8), **options).data.nbytes)
    except ValueError as exc:
        return str(exc)


def _check(module, m: int, k: int, **options) -> bool:
    """Assert ``packed_nbytes`` agrees with ``pack``; return whether ``pack`` took the shape."""
    want = _pack_bytes(module.pack, m, k, **options)
    where = f"{module.__name__} M {m} K {k} {options}"
    if isinstance(want, str):
        with pytest.raises(ValueError, match=re.escape(want)):
            module.packed_nbytes(m, k, **options)
        return False
    got = module.packed_nbytes(m, k, **options)
    assert type(got) is int, where
    assert got == want, where
    return True


def test_every_format_has_a_formula():
    assert set(SIZED) == set(NATIVE_KERNELS)


@pytest.mark.parametrize("kernel", SIZED)
def test_formula_matches_pack(kernel):
    module = NATIVE_KERNELS[kernel].packer
    taken = [m * k for m, k in itertools.product(ROWS, COLS) if _check(module, m, k)]
    assert any(taken) and len(taken) < len(ROWS) * len(COLS)    # shapes it packs and shapes it refuses


def test_tl1_blocks():
    options = [{"bm": bm, "bk": bk, "bmm": bmm} for bm in (None, 16, 32, 64, 96, 128, 256)
               for bk in (0, 2, 4, 8, 16, 32, 64, 128, 256) for bmm in (8, 16, 32, 64, 128)]
    shapes = [(m, k, o) for m in (0, 32, 64, 96, 128, 256) for k in (0, 32, 64, 128, 192, 256, 512)
              for o in options]
    taken = [m * k for m, k, o in shapes if _check(tl1, m, k, **o)]
    assert any(taken) and len(taken) < len(shapes)


def test_tl2_blocks():
    """TL2's streams, or bitnet.cpp's padded size where that is larger (small K), at each block."""
    options = [{"bm": bm, "bk": bk} for bm in (None, 32, 64, 96, 128, 256) for bk in (0, 24, 48, 96, 192)]
    shapes = [(m, k, o) for m in (32, 64, 128, 256) for k in (96, 128, 192, 288, 352, 416, 1024)
              for o in options]
    taken = [m * k for m, k, o in shapes if _check(tl2, m, k, **o)]
    assert any(taken) and len(taken) < len(shapes)


def _tl2_bytes(m: int, k: int) -> int:
    k3 = k - k % 96
    return max(m * k3 // 6 + m * k3 // 24 + m * (k - k3) // 4,
               (k - 256) * m // 3 * 5 // 8 + 256 * m // 2 * 4 // 8)


LARGE = (8192, 45568)
EXPECTED = {   # bytes of the LARGE layer, from each format's documented layout
    "dense": lambda m, k: m * k,
    "i2s": lambda m, k: m * k // 4 + 32,
    "int2": lambda m, k: m * k // 4,
    "tl1": lambda m, k: m * k // 4,
    "trit5": lambda m, k: m * -(-k // 20) * 4,
    "tq1_0": lambda m, k: m * k // 256 * 54,
    "tq2_0": lambda m, k: m * k // 256 * 66,
    "iq1_bn": lambda m, k: m * (2 + k // 64 * 13),
    "iq2_bn": lambda m, k: m * (4 + k // 64 * 16),
    "tl2": _tl2_bytes,
}


def test_large_layer_is_not_packed(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("packed a zero matrix")

    for kernel in SIZED:
        monkeypatch.setattr(NATIVE_KERNELS[kernel].packer, "pack", refuse)
    packed_weight_bytes.cache_clear()
    for kernel in SIZED:
        formula = EXPECTED.get(kernel, NATIVE_KERNELS[kernel].packer.packed_nbytes)
        want = formula(*LARGE)
        assert packed_weight_bytes(kernel, *LARGE) == want, kernel
    assert packed_weight_bytes("int2-avx512", *LARGE) == EXPECTED["int2"](*LARGE)
    packed_weight_bytes.cache_clear()


@pytest.mark.parametrize("kernel", list(NATIVE_KERNELS))
def test_packed_weight_bytes_small(kernel):
    """Formula or packing (a format without the formula), the bytes are the packed ones."""
    m, k = 256, 768
    assert packed_weight_bytes(kernel, m, k) == NATIVE_KERNELS[kernel].packer.pack(
        np.zeros((m, k), np.int8)).data.nbytes
