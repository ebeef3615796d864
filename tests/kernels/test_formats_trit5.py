import numpy as np
import pytest

from tsar.kernels.formats import trit5


@pytest.mark.parametrize("m,k", [(32, 5), (32, 7), (64, 2560), (32, 6912), (96, 391)])
def test_roundtrip(m, k):
    w = np.random.default_rng(m + k).integers(-1, 2, (m, k), dtype=np.int8)
    p = trit5.pack(w)
    assert p.kp == -(-k // 20) * 20                       # whole dwords of four groups
    assert p.nbytes == m * p.kp // 5
    assert (trit5.unpack(p) == w).all()


def test_code_values():
    """Sign-magnitude bytes, magnitude offset by 3; a row's dword holds its four groups."""
    w = np.zeros((32, 20), np.int8)
    w[0, :5] = (1, 1, 1, 1, 1)                            # v = 121
    w[1, :5] = (-1, 0, 0, 0, -1)                          # v = -82
    w[2, :5] = (0, 1, -1, 0, 0)                           # v = -6
    w[0, 5:10] = (0, 0, 0, 0, 1)                          # row 0, group 1: v = 81
    codes = trit5.pack(w).data
    assert codes[[0, 4, 8]].tolist() == [121 + 3, 0x80 | 85, 0x80 | 9]
    assert codes[1] == 84 and codes[2] == codes[3] == 3   # a zero group is 3
    assert codes[64] == 3                                 # row 16 starts the second 64 bytes


def test_all_codes_roundtrip():
    v = np.arange(-121, 122)
    b = trit5.encode(v)
    assert len(set(b.tolist())) == 243 and (trit5.decode(b) == v).all()
    assert ((b & 0x7F) >= 3).all() and ((b & 0x7F) <= 124).all()
    # the top trit (with its sign) is a function of b >> 2: |v| >= 41 <=> (b & 127) >= 44
    assert (((b & 0x7F) >= 44) == (np.abs(v) >= 41)).all()


def test_errors():
    with pytest.raises(ValueError, match="M must be a multiple of 32"):
        trit5.pack(np.zeros((8, 5), np.int8))
