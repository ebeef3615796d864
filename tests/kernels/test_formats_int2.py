import numpy as np
import pytest

from tsar.kernels.formats import int2_vnni


@pytest.mark.parametrize("m,k", [(32, 4), (64, 36), (96, 2560)])
def test_roundtrip(m, k):
    w = np.random.default_rng(m + k).integers(-1, 2, (m, k), dtype=np.int8)
    p = int2_vnni.pack(w)
    assert p.nbytes == m * k // 4
    assert (int2_vnni.unpack(p) == w).all()


def test_interleaving():
    w = np.zeros((32, 8), np.int8)             # code 1 = zero weight
    w[8 * 2 + 3, 4 + 1] = 1                    # row 8f + d (f=2, d=3), column 4*kq + kk (kq=1, kk=1)
    p = int2_vnni.pack(w)
    byte = p.data[32 * 1 + 4 * 3 + 1]
    assert (byte >> 4) & 3 == 2 and byte & 0b11001111 == 0b01000101


def test_errors():
    with pytest.raises(ValueError, match="M must be a multiple of 32"):
        int2_vnni.pack(np.zeros((16, 8), np.int8))
