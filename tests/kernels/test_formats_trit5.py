import numpy as np
import pytest

from tsar.kernels.formats import trit5


@pytest.mark.parametrize("m,k", [(32, 5), (32, 7), (64, 2560), (32, 6912)])
def test_roundtrip(m, k):
    w = np.random.default_rng(m + k).integers(-1, 2, (m, k), dtype=np.int8)
    p = trit5.pack(w)
    assert p.nbytes == m * (-(-k // 5))
    assert (trit5.unpack(p) == w).all()


def test_code_values():
    w = np.zeros((32, 5), np.int8)
    w[0] = (1, 1, 1, 1, 1)
    w[1] = (-1, 0, 0, 0, -1)
    w[2] = (0, 1, -1, 0, 0)
    codes = trit5.pack(w).data.view(np.int8)
    assert codes[:3].tolist() == [121, -82, 3 - 9]


def test_errors():
    with pytest.raises(ValueError, match="M must be a multiple of 32"):
        trit5.pack(np.zeros((8, 5), np.int8))
