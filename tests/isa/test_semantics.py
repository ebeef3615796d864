"""Golden semantics: TLUT + TGEMV equals the ternary matrix-vector product, overflow bounds."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tsar.isa import (
    C2S4,
    C2S4_128,
    C2S4_512,
    C4S4,
    C4S4_512,
    configs,
    pack_tile,
    tgemv,
    tlut,
    unpack_tile,
    weight_codes,
)
from tsar.isa.config import TsarConfig
from tsar.isa.semantics import tile_matvec

CONFIGS = [pytest.param(cfg, id=cfg.name) for cfg in configs()]
int8s = st.integers(-128, 127)
trits = st.integers(-1, 1)


@pytest.mark.parametrize("cfg", CONFIGS)
@given(data=st.data())
def test_tlut_then_tgemv_is_matvec(cfg: TsarConfig, data: st.DataObject) -> None:
    act = data.draw(arrays(np.int8, cfg.k, elements=int8s))
    tile = data.draw(arrays(np.int8, (cfg.m, cfg.k), elements=trits))
    acc = tgemv(cfg, np.zeros(cfg.m, np.int16), tlut(cfg, act), pack_tile(cfg, tile))
    assert np.array_equal(acc, tile_matvec(cfg, tile, act))


@pytest.mark.parametrize("cfg", CONFIGS)
@given(data=st.data())
def test_pack_unpack_roundtrip(cfg: TsarConfig, data: st.DataObject) -> None:
    tile = data.draw(arrays(np.int8, (cfg.m, cfg.k), elements=trits))
    packed = pack_tile(cfg, tile)
    assert packed.dtype == np.uint8 and packed.shape == (cfg.weight_bytes,)
    assert np.array_equal(unpack_tile(cfg, packed), tile)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_batched_matches_single(cfg: TsarConfig) -> None:
    rng = np.random.default_rng(1)
    act = rng.integers(-127, 128, (5, cfg.k), dtype=np.int8)
    tiles = rng.integers(-1, 2, (5, cfg.m, cfg.k)).astype(np.int8)
    acc = rng.integers(-1000, 1000, (5, cfg.m)).astype(np.int16)
    batched = tgemv(cfg, acc, tlut(cfg, act), pack_tile(cfg, tiles))
    for i in range(5):
        single = tgemv(cfg, acc[i], tlut(cfg, act[i]), pack_tile(cfg, tiles[i]))
        assert np.array_equal(batched[i], single)


def test_tlut_layout_by_hand() -> None:
    """c2s4 block 0 of activations (3, 5): D = [-8, -2, 2, 8], S = [0, 3, 5, 8]."""
    act = np.array([3, 5, 0, 0, 0, 0, 0, 0], np.int8)
    words = tlut(C2S4, act)
    assert words.dtype == np.int16 and words.shape == (32,)
    assert words[:8].tolist() == [-8, -2, 2, 8, 0, 3, 5, 8]
    assert not words[8:].any()


def test_weight_code_layout_by_hand() -> None:
    """Output 0, block 0 of c2s4: weights (+1, 0) -> idxD = 0b11, idxS = 0b10 -> code 0b1011."""
    tile = np.zeros((16, 8), np.int8)
    tile[:, :] = 0
    tile[0, :2] = [1, 0]
    tile[1, :2] = [-1, -1]
    codes = weight_codes(C2S4, pack_tile(C2S4, tile))
    assert codes[0, 0] == 0b1011
    assert codes[1, 0] == 0b0000  # both -1: dense bits clear, sparse clear
    assert codes[0, 1] == 0b1111  # (0, 0): dense +1 +1, sparse 1 1


def test_tgemv_wraps_like_vpaddw() -> None:
    cfg = C2S4
    act = np.full(cfg.k, 127, np.int8)
    tile = np.ones((cfg.m, cfg.k), np.int8)
    acc = np.full(cfg.m, 32000, np.int16)
    got = tgemv(cfg, acc, tlut(cfg, act), pack_tile(cfg, tile))
    assert (got == np.int16(np.int32(32000 + 8 * 127) - 65536)).all()


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("sign", [1, -1])
def test_overflow_bound_edge(cfg: TsarConfig, sign: int) -> None:
    """``max_tgemv_per_widen`` TGEMVs at the extreme never wrap; one more does."""
    n = cfg.max_tgemv_per_widen()
    assert n == {C2S4: 32, C4S4: 16, C2S4_128: 32, C2S4_512: 32, C4S4_512: 16}[cfg]
    act = np.full(cfg.k, 127, np.int8)
    tile = np.full((cfg.m, cfg.k), sign, np.int8)
    group, packed = tlut(cfg, act), pack_tile(cfg, tile)
    acc = np.zeros(cfg.m, np.int16)
    for _ in range(n):
        acc = tgemv(cfg, acc, group, packed)
    assert (acc.astype(np.int64) == sign * n * cfg.k * 127).all()
    beyond = tgemv(cfg, acc, group, packed)
    assert (beyond.astype(np.int64) != sign * (n + 1) * cfg.k * 127).all()  # wrapped


def test_derived_parameters() -> None:
    assert (C2S4.group_regs, C2S4.tlut_uops, C2S4.tgemv_uops, C2S4.weight_bits) == (2, 2, 4, 256)
    assert (C4S4.group_regs, C4S4.tlut_uops, C4S4.tgemv_uops, C4S4.weight_bits) == (8, 8, 4, 512)
    assert (C2S4_128.m, C2S4_128.group_regs, C2S4_128.tgemv_uops) == (8, 4, 4)
    assert C2S4.tgemv_mnemonic == "tgemv8x16" and C4S4.tgemv_mnemonic == "tgemv16x16"
    assert C2S4.bits_per_weight == 2
    assert (C2S4_512.group_regs, C2S4_512.m, C2S4_512.weight_bits, C2S4_512.encoding) == (1, 32, 512, "evex")
    wide = C4S4_512
    assert (wide.group_regs, wide.weight_regs, wide.weight_bytes, wide.tgemv_uops) == (4, 2, 128, 4)
    assert C2S4_512.tgemv_mnemonic == "tgemv8x32" and C4S4_512.tlut_mnemonic == "tlut4x4"
    assert C4S4_512.addressable_registers == 32 and C4S4.addressable_registers == 16


def test_widths_run_where_their_base_isa_is() -> None:
    """512-bit configurations need AVX-512 F/BW; an undeclared ISA (no flags) counts as AVX2."""
    avx512 = ("avx2", "avx512f", "avx512bw", "avx512vl")
    assert C2S4_512.runs_on(avx512) and C4S4_512.runs_on(avx512) and C2S4.runs_on(avx512)
    assert not C2S4_512.runs_on(("avx2", "avx_vnni")) and not C4S4_512.runs_on(())
    assert not C2S4_512.runs_on(("avx512f",))  # the kernels widen with AVX-512BW
    assert C2S4.runs_on(()) and C2S4_128.runs_on(("avx2",))


def test_bad_shapes_and_values() -> None:
    with pytest.raises(ValueError, match="expected"):
        tlut(C2S4, np.zeros(7, np.int8))
    with pytest.raises(ValueError, match="ternary"):
        pack_tile(C2S4, np.full((16, 8), 2))
    with pytest.raises(ValueError, match="tile"):
        pack_tile(C2S4, np.zeros((8, 16)))
    with pytest.raises(ValueError, match="weight bytes"):
        tgemv(C2S4, np.zeros(16, np.int16), np.zeros(32, np.int16), np.zeros(31, np.uint8))


@pytest.mark.parametrize("kwargs", [dict(c=5, s=4), dict(c=2, s=3), dict(c=2, s=4, vector_bits=1024),
                                    dict(c=1, s=1)])
def test_invalid_configs_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        TsarConfig("bad", **kwargs)


# --- the fast paths against a plain per-element reference ----------------------------------------
EXTRA_CONFIGS = [TsarConfig("c1s4", c=1, s=4), TsarConfig("c3s8", c=3, s=8),  # bytes of 4 codes;
                 TsarConfig("c1s2-128", c=1, s=2, vector_bits=128)]  # codes across bytes; 2 outputs/byte


def _tlut_loop(cfg: TsarConfig, act: np.ndarray) -> np.ndarray:
    words = []
    for b in range(cfg.s):
        a = [int(act[b * cfg.c + i]) for i in range(cfg.c)]
        dense = [sum(x if (p >> i) & 1 else -x for i, x in enumerate(a)) for p in range(cfg.patterns)]
        sparse = [sum(x for i, x in enumerate(a) if (p >> i) & 1) for p in range(cfg.patterns)]
        words += dense + sparse
    return np.array([(w + 32768) % 65536 - 32768 for w in words], np.int16)


def _tgemv_loop(cfg: TsarConfig, acc: np.ndarray, group: np.ndarray, operand: np.ndarray) -> np.ndarray:
    bits = int.from_bytes(bytes(operand), "little")
    out = []
    for j in range(cfg.m):
        total = int(acc[j])
        for b in range(cfg.s):
            code = (bits >> (j * cfg.output_code_bits + b * cfg.code_bits)) & ((1 << cfg.code_bits) - 1)
            base = b * cfg.block_words
            total += int(group[base + (code & (cfg.patterns - 1))])
            total -= int(group[base + cfg.patterns + (code >> cfg.c)])
        out.append((total + 32768) % 65536 - 32768)
    return np.array(out, np.int16)


@pytest.mark.parametrize("cfg", CONFIGS + [pytest.param(c, id=c.name) for c in EXTRA_CONFIGS])
def test_fast_paths_equal_a_plain_loop(cfg: TsarConfig) -> None:
    """Unbatched, batched, broadcast groups, extreme words (wrap-around) and any weight bytes."""
    rng = np.random.default_rng(cfg.c * 100 + cfg.s)
    n = 6
    act = rng.integers(-128, 128, (n, cfg.k)).astype(np.int8)
    act[0] = -128
    group = rng.integers(-32768, 32768, (n, cfg.group_words)).astype(np.int16)
    group[1] = -32768
    acc = rng.integers(-32768, 32768, (n, cfg.m)).astype(np.int16)
    weights = rng.integers(0, 256, (n, cfg.weight_bytes)).astype(np.uint8)
    weights[2] = 0xFF
    want_lut = np.stack([_tlut_loop(cfg, a) for a in act])
    want = np.stack([_tgemv_loop(cfg, acc[i], group[i], weights[i]) for i in range(n)])
    shared = np.stack([_tgemv_loop(cfg, acc[i], group[0], weights[i]) for i in range(n)])
    np.testing.assert_array_equal(tlut(cfg, act), want_lut)
    np.testing.assert_array_equal(tlut(cfg, act.reshape(2, 3, cfg.k)), want_lut.reshape(2, 3, -1))
    np.testing.assert_array_equal(tlut(cfg, act.astype(np.int64)), want_lut)  # other dtypes
    for i in range(n):
        assert tlut(cfg, act[i]).dtype == np.int16
        got = tgemv(cfg, acc[i], group[i], weights[i])
        assert got.dtype == np.int16 and got.shape == (cfg.m,)
        np.testing.assert_array_equal(got, want[i])
    np.testing.assert_array_equal(tgemv(cfg, acc, group, weights), want)
    np.testing.assert_array_equal(tgemv(cfg, acc, group[0], weights), shared)
    np.testing.assert_array_equal(
        tgemv(cfg, acc.reshape(2, 3, -1), group.reshape(2, 3, -1), weights.reshape(2, 3, -1)),
        want.reshape(2, 3, -1))
    zero = np.stack([_tgemv_loop(cfg, np.zeros(cfg.m, np.int16), group[0], weights[i]) for i in range(n)])
    np.testing.assert_array_equal(tgemv(cfg, np.zeros(cfg.m, np.int16), group[0], weights), zero)
    np.testing.assert_array_equal(tgemv(cfg, acc.astype(np.int32), group.astype(np.int64), weights), want)
    codes = weight_codes(cfg, weights)
    bits = [int.from_bytes(bytes(w), "little") for w in weights]
    for i in range(n):
        for j in range(cfg.m):
            for b in range(cfg.s):
                shift = j * cfg.output_code_bits + b * cfg.code_bits
                assert codes[i, j, b] == (bits[i] >> shift) & ((1 << cfg.code_bits) - 1)
