import itertools

import numpy as np
import pytest

from tsar.kernels.formats import base3, tq1_0, tq2_0


def test_base3_bytes_roundtrip_every_value():
    digits = np.array(list(itertools.product(range(3), repeat=5)), np.uint8)      # (243, 5)
    data = base3.encode(digits)
    assert len(set(data.tolist())) == 243
    assert (base3.decode(data) == digits).all()
    four = np.array(list(itertools.product(range(3), repeat=4)), np.uint8)
    assert (base3.decode(base3.encode(four), 4) == four).all()


@pytest.mark.parametrize("mod", [tq1_0, tq2_0])
@pytest.mark.parametrize("m,k", [(1, 256), (5, 512), (64, 2560), (3, 6912)])
def test_roundtrip_and_size(mod, m, k):
    w = np.random.default_rng(m * k).integers(-1, 2, (m, k), dtype=np.int8)
    p = mod.pack(w)
    assert p.data.dtype == np.uint8 and p.data.size == p.nbytes == m * (k // 256) * mod.BLOCK_BYTES
    assert (mod.unpack(p) == w).all()


def test_bits_per_weight():
    w = np.ones((4, 1024), np.int8)
    assert 8 * tq1_0.pack(w).nbytes / w.size == 1.6875
    assert 8 * tq2_0.pack(w).nbytes / w.size == 2.0625


def test_tq2_0_bit_positions_and_scale():
    w = np.zeros((1, 256), np.int8)              # code 1 everywhere: 0b01010101
    w[0, 0], w[0, 32], w[0, 133] = 1, -1, 1      # byte 0 bits 0-1 / 2-3; byte 32 + 5 bits 0-1
    d = tq2_0.pack(w, scale=1.0).data
    assert d[0] == 2 | (0 << 2) | (1 << 4) | (1 << 6)
    assert d[37] == 2 | 0x54
    assert d[1] == 0x55
    assert d[64:66].tolist() == [0x00, 0x3C]     # fp16 1.0, little endian


def test_tq1_0_trit_positions():
    def byte(*digits):                           # most significant first
        return -(-sum(t * 3 ** (4 - i) for i, t in enumerate(digits)) * 256 // 243)

    w = np.zeros((1, 256), np.int8)
    w[0, 0] = 1                                  # byte 0, first (most significant) trit
    w[0, 32 * 4 + 1] = -1                        # byte 1, last trit
    w[0, 160 + 16 * 2 + 3] = 1                   # byte 32 + 3, middle trit
    w[0, 240 + 4 * 3 + 2] = -1                   # qh byte 2, fourth trit
    d = tq1_0.pack(w).data
    assert d[0] == byte(2, 1, 1, 1, 1)
    assert d[1] == byte(1, 1, 1, 1, 0)
    assert d[35] == byte(1, 1, 2, 1, 1)
    assert d[2] == d[32] == byte(1, 1, 1, 1, 1) == 128
    assert d[48 + 2] == byte(1, 1, 1, 0, 0) and d[48] == byte(1, 1, 1, 1, 0) == 127


@pytest.mark.parametrize("mod", [tq1_0, tq2_0])
def test_block_scales(mod):
    w = np.ones((2, 512), np.int8)
    w[1, 256:] = 0                               # an all-zero block gets scale 0, as the public quantizer
    assert mod.pack(w, scale=0.37).scales.tolist() == [[np.float16(0.37)] * 2, [np.float16(0.37), 0.0]]


@pytest.mark.parametrize("mod", [tq1_0, tq2_0])
def test_errors(mod):
    with pytest.raises(ValueError, match="multiple of 256"):
        mod.pack(np.zeros((2, 128), np.int8))
    with pytest.raises(ValueError, match="weights must be in"):
        mod.pack(np.full((1, 256), 2, np.int8))
    with pytest.raises(ValueError, match="positive finite"):
        mod.pack(np.zeros((1, 256), np.int8), scale=0.0)
