import numpy as np
import pytest

from tsar.kernels.formats import tl1


@pytest.mark.parametrize("m,k,bm,bk,bmm", [(32, 128, 32, 128, 32), (256, 2560, 256, 128, 32),
                                         (320, 256, 160, 64, 32), (128, 512, 128, 128, 64)])
def test_roundtrip(m, k, bm, bk, bmm):
    w = np.random.default_rng(m * k).integers(-1, 2, (m, k), dtype=np.int8)
    p = tl1.pack(w, bm=bm, bk=bk, bmm=bmm)
    assert p.nbytes == m * k // 4
    assert (tl1.unpack(p) == w).all()


def test_byte_layout():
    w = np.zeros((32, 128), np.int8)
    w[0, 0:4] = (1, 1, -1, 0)    # pair 0 -> 3+1+4 = 8 (high nibble), pair 1 -> -3+0+4 = 1 (low)
    w[1, 4:6] = (0, -1)          # pair 2 of row 1 -> slot q=1: byte 16 + 1, high nibble 0+(-1)+4 = 3
    p = tl1.pack(w, bm=32, bk=128)
    assert p.data[0] == 0x81
    assert p.data[17] == 0x34


def test_errors():
    with pytest.raises(ValueError, match="K must be a multiple of 128"):
        tl1.pack(np.zeros((32, 96), np.int8))
    with pytest.raises(ValueError, match="bmm"):
        tl1.pack(np.zeros((32, 128), np.int8), bmm=24)
