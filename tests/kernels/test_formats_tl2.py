import numpy as np
import pytest

from tsar.kernels.formats import tl2


@pytest.mark.parametrize("m,k,bm", [(32, 96, 32), (64, 2560, 64), (256, 352, 128), (320, 32, 160),
                                    (96, 192, 32)])
def test_roundtrip(m, k, bm):
    w = np.random.default_rng(m + k).integers(-1, 2, (m, k), dtype=np.int8)
    p = tl2.pack(w, bm=bm)
    assert (tl2.unpack(p) == w).all()
    k3 = k - k % 96
    assert p.nbytes == m * k3 // 6 + m * k3 // 24 + m * (k - k3) // 4
    assert p.data.size == max(p.nbytes, (k - 256) * m // 3 * 5 // 8 + 256 * m // 2 * 4 // 8)


def test_index_sign_and_tile_order():
    w = np.zeros((32, 96), np.int8)
    w[0, 0:3] = (1, -1, 1)    # v = 9 - 3 + 1 = 7 -> index 7, sign 0 (group 0 -> high nibble, byte of row 0)
    w[16, 3:6] = (-1, 0, -1)  # v = -10 -> index 10, sign 1 (group 1 -> low nibble, row 16 at byte 8)
    p = tl2.pack(w, bm=32)
    assert p.data[0] == 0x70
    assert p.data[8] == 0x0A
    words = p.data[p.sign_offset:p.sign_offset + 32].view("<u2")
    # row 16 = 16*h + l with h=1, l=0; group 1: bit 15 - (2*1 + 1) = 12
    assert words[0] == 1 << 12 and not words[1:].any()


def test_large_pack_is_fast():
    import time
    w = np.random.default_rng(0).integers(-1, 2, (6912, 2560), dtype=np.int8)
    t = time.perf_counter()
    p = tl2.pack(w)
    assert time.perf_counter() - t < 1.0
    assert p.bm == 256


@pytest.mark.parametrize("kw,match", [({"bm": 48}, "multiple of 32"), ({"bk": 100}, "multiple of 24")])
def test_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        tl2.pack(np.zeros((96, 96), np.int8), **kw)


def test_rejects_bad_tail_and_values():
    with pytest.raises(ValueError, match="tail"):
        tl2.pack(np.zeros((32, 100), np.int8))
    with pytest.raises(ValueError, match=r"\{-1, 0, 1\}"):
        tl2.pack(np.full((32, 96), 2, np.int8))
