import numpy as np
import pytest

from tsar.kernels.formats import i2s


@pytest.mark.parametrize("m,k", [(1, 128), (5, 256), (64, 2560)])
def test_roundtrip_and_scale(m, k):
    w = np.random.default_rng(k).integers(-1, 2, (m, k), dtype=np.int8)
    p = i2s.pack(w, scale=0.75)
    assert p.data.size == m * k // 4 + 32
    assert p.scale == pytest.approx(0.75)
    assert (i2s.unpack(p) == w).all()


def test_bit_positions():
    w = np.zeros((1, 128), np.int8)          # code 1 everywhere = 0b01010101
    w[0, 0], w[0, 32], w[0, 64], w[0, 96] = 1, -1, 1, -1
    p = i2s.pack(w)
    assert p.data[0] == (2 << 6) | (0 << 4) | (2 << 2) | 0
    assert p.data[1] == 0x55


def test_errors():
    with pytest.raises(ValueError, match="multiple of 128"):
        i2s.pack(np.zeros((2, 96), np.int8))
