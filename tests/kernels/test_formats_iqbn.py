import numpy as np
import pytest

from tsar.kernels.formats import iq1_bn, iq2_bn


@pytest.mark.parametrize("mod", [iq1_bn, iq2_bn])
@pytest.mark.parametrize("m,k", [(1, 64), (5, 192), (64, 2560), (3, 6912)])
def test_roundtrip_and_size(mod, m, k):
    w = np.random.default_rng(m * k).integers(-1, 2, (m, k), dtype=np.int8)
    p = mod.pack(w)
    assert p.data.dtype == np.uint8
    assert p.data.size == p.nbytes == m * (mod.ROW_SCALE_BYTES + k // 64 * mod.BLOCK_BYTES)
    assert (mod.unpack(p) == w).all()


def test_bits_per_weight_of_the_blocks():
    assert 8 * iq1_bn.BLOCK_BYTES / iq1_bn.BLOCK == 1.625
    assert 8 * iq2_bn.BLOCK_BYTES / iq2_bn.BLOCK == 2.0


def test_iq2_bn_bit_positions_and_row_scale():
    w = np.zeros((1, 128), np.int8)              # code 1 everywhere: 0b01010101
    w[0, 0], w[0, 16 + 3], w[0, 64 + 48 + 15] = 1, -1, 1
    d = iq2_bn.pack(w, scale=0.5).data
    assert d[:4].view(np.float32)[0] == 0.5
    assert d[4] == 2 | 0x54                      # weight 0: block 0, byte 0, bits 0-1
    assert d[4 + 3] == 0x55 & ~(3 << 2)          # weight 19: byte 3, bits 2-3 -> code 0
    assert d[4 + 16 + 15] == 0x55 & 0x3F | (2 << 6)


def test_iq1_bn_trit_positions_and_row_scale():
    def byte(*digits):                           # most significant first
        return -(-sum(t * 3 ** (4 - i) for i, t in enumerate(digits)) * 256 // 243)

    w = np.zeros((1, 64), np.int8)
    w[0, 0] = 1                                  # byte 0, least significant trit
    w[0, 16 + 5 + 4] = -1                        # group 1, byte 3 + 1, most significant trit
    w[0, 15] = -1                                # extra byte, least significant trit
    w[0, 48 + 15] = 1                            # extra byte, fourth trit
    d = iq1_bn.pack(w, scale=0.5).data
    assert d[:2].view(np.float16)[0] == 0.5
    q = d[2:]
    assert q[0] == byte(1, 1, 1, 1, 2)
    assert q[4] == byte(0, 1, 1, 1, 1)
    assert q[1] == byte(1, 1, 1, 1, 1) == 128
    assert q[12] == byte(0, 2, 1, 1, 0)


@pytest.mark.parametrize("mod", [iq1_bn, iq2_bn])
def test_row_scales(mod):
    w = np.ones((2, 128), np.int8)
    w[1] = 0                                     # an all-zero row gets scale 0, as the public quantizer
    stored = np.float16(0.37) if mod is iq1_bn else np.float32(0.37)       # fp16 / float32 row scale
    assert mod.pack(w, scale=0.37).scales.tolist() == [float(stored), 0.0]


@pytest.mark.parametrize("mod", [iq1_bn, iq2_bn])
def test_errors(mod):
    with pytest.raises(ValueError, match="multiple of 64"):
        mod.pack(np.zeros((2, 96), np.int8))
    with pytest.raises(ValueError, match="weights must be in"):
        mod.pack(np.full((1, 64), -2, np.int8))
    with pytest.raises(ValueError, match="positive finite"):
        mod.pack(np.zeros((1, 64), np.int8), scale=float("nan"))
