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


def test_presets_pack_their_shapes():
    """bitnet.cpp's published presets (bmm 32 entries): each (bm, bk) can pack its shape."""
    assert tl2.PRESETS[14336, 4096] == (256, 96) and tl2.PRESETS[3200, 8640] == (160, 96)
    assert len(tl2.PRESETS) == 9
    for (m, k), (bm, bk) in tl2.PRESETS.items():
        tl2.check_blocks(m, k, bm, bk)


def test_wrong_bm_or_bk_gives_other_weights():
    """Unpacking with another valid preset's bm (or bk) scrambles the weights."""
    w = np.random.default_rng(7).integers(-1, 2, (512, 608), dtype=np.int8)  # K = 96 * 6 + 32
    p = tl2.pack(w, bm=tl2.PRESETS[14336, 4096][0])
    assert (tl2.unpack(p) == w).all()
    other_bm = tl2.TL2Weights(p.data, p.m, p.k, tl2.PRESETS[4096, 4096][0], p.bk)
    assert not (tl2.unpack(other_bm) == w).all()
    q = tl2.pack(w[:, :576], bm=128, bk=tl2.PRESETS[1536, 1536][1])
    other_bk = tl2.TL2Weights(q.data, q.m, q.k, q.bm, tl2.DEFAULT_BK)
    assert (tl2.unpack(q) == w[:, :576]).all() and not (tl2.unpack(other_bk) == w[:, :576]).all()


def test_read_config(tmp_path):
    path = tmp_path / "kernel_config.ini"
    path.write_text("[Kernels_0]\nm = 14336\nk = 4096\nbm = 256\nbk = 96\nbmm = 32\n\n"
                    "[Kernels_1]\nm = 1024\nk = 4096\nbm = 256\nbk = 96\nbmm = 32\n\n"
                    "[Kernels_2]\nm = 1024\nk = 4096\nbm = 128\nbk = 96\nbmm = 32\n")
    assert tl2.read_config(path) == {(14336, 4096): (256, 96), (1024, 4096): (256, 96)}  # first wins


@pytest.mark.parametrize("body,match", [
    ("m = 3200\nk = 8640\nbm = 160\nbk = 96\nbmm = 64\n", r"section \[K\]: bmm = 64 is not supported"),
    ("m = 3200\nk = 8640\nbm = 160\nbmm = 32\n", r"section \[K\]: missing key 'bk'"),
    ("m = 3200\nk = 8640\nbm = 160\nbk = 9.6\nbmm = 32\n", r"section \[K\]: bk = '9.6' is not an integer"),
    ("m = 3200\nk = 8640\nbm = 0\nbk = 96\nbmm = 32\n", r"bm = 0 is not a positive integer"),
    ("m = 3200\nk = 8640\nbm = 256\nbk = 96\nbmm = 32\n", r"M must be a multiple of 256"),
    ("m = 3200\nk = 8640\nbm = 160\nbk = 100\nbmm = 32\n", r"bk must be a multiple of 24"),
    ("m = 3200\nk = 8650\nbm = 160\nbk = 96\nbmm = 32\n", r"tail"),
])
def test_read_config_errors(tmp_path, body, match):
    path = tmp_path / "kernel_config.ini"
    path.write_text("[K]\n" + body)
    with pytest.raises(ValueError, match=match) as info:
        tl2.read_config(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("text,match", [("", r"no \[Kernels_i\] sections"),
                                        ("m = 1\n", "not a kernel_config.ini"), (None, "cannot read")])
def test_read_config_not_a_config(tmp_path, text, match):
    path = tmp_path / "kernel_config.ini"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ValueError, match=match) as info:
        tl2.read_config(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
