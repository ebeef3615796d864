"""Trit weight codes (``weight_code = "trits"``): each block's c weights as one base-3 number
``sum_i (w_i + 1) * 3^i``, decoded by TGEMV into the split code's ``(idxD, idxS)``. Checked against
independent oracles: the split code of the same weights (the paper's definition), the int64
ternary product, every one of the 3^c block patterns, accumulators near the int16 wrap and
adversarial +-127 activations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tsar.isa import assemble, decode, pack_tile, tgemv, tlut, unpack_tile
from tsar.isa.config import TsarConfig, free_slots, register_config, unregister_config
from tsar.isa.semantics import encode_codes, tile_matvec, weight_codes

SHAPES = [(1, 16), (2, 4), (3, 2), (4, 1), (3, 2, 128), (2, 4, 128)]  # (c, s[, vector_bits])
BLOCKS = {1: 16, 2: 4, 3: 2, 4: 1}  # c -> an s whose 256-bit configuration is valid


@pytest.fixture(scope="module")
def trit_configs():
    free = iter(free_slots())
    added = []
    try:
        for c, s, *width in SHAPES:
            bits = width[0] if width else 256
            added.append(register_config(TsarConfig(f"tc{c}s{s}-{bits}", c=c, s=s, vector_bits=bits,
                                                    slot=next(free), weight_code="trits")))
        yield added
    finally:
        for cfg in added:
            unregister_config(cfg.name)


def _split(cfg: TsarConfig) -> TsarConfig:
    return TsarConfig(cfg.name + "-split", c=cfg.c, s=cfg.s, vector_bits=cfg.vector_bits)


def _all_blocks(c: int) -> np.ndarray:
    """(3^c, c) every ternary block, in code order (weight i is base-3 digit i, minus 1)."""
    return np.array([w[::-1] for w in itertools.product((-1, 0, 1), repeat=c)], np.int8)


def test_code_widths():
    widths = {c: TsarConfig("x", c=c, s=BLOCKS[c], weight_code="trits").code_bits for c in (1, 2, 3, 4)}
    assert widths == {1: 2, 2: 4, 3: 5, 4: 7}  # ceil(c * log2 3)
    cfg = TsarConfig("x", c=3, s=2, weight_code="trits")
    assert (cfg.weight_bits, cfg.variant_suffix, cfg.code_values) == (160, "t", 27)
    with pytest.raises(ValueError, match="not whole"):  # 16 * 4 * 5 = 320 bits: not whole registers
        TsarConfig("x", c=3, s=4, weight_code="trits")


@pytest.mark.parametrize("c", [1, 2, 3, 4])
def test_decoder_table_against_the_split_code(c):
    """Every code decodes to the split code's fields for the same weights; reserved codes to zero
    weights; make_code inverts it and refuses non-ternary pairs."""
    cfg = TsarConfig("x", c=c, s=BLOCKS[c], weight_code="trits")
    blocks = _all_blocks(c)
    split = encode_codes(_split(cfg), blocks[:, None, :])[:, 0].astype(int)
    codes = encode_codes(cfg, blocks[:, None, :])[:, 0].astype(int)
    assert codes.tolist() == list(range(3 ** c))  # the base-3 number, digit i = w_i + 1
    for code, s_code in zip(codes, split, strict=True):
        d, s = cfg.code_indices(int(code))
        assert (d, s) == (s_code & (cfg.patterns - 1), s_code >> c)
        assert cfg.make_code(d, s) == code
    ones = cfg.patterns - 1
    assert all(cfg.code_indices(v) == (ones, ones) for v in range(3 ** c, 1 << cfg.code_bits))
    arr_d, arr_s = cfg.code_indices(np.arange(1 << cfg.code_bits))
    assert arr_d.tolist() == list(cfg.code_table[0]) and arr_s.tolist() == list(cfg.code_table[1])
    if c > 1:
        with pytest.raises(ValueError, match="not a ternary block"):
            cfg.make_code(0b10, 0b01)


def test_semantics_equal_the_int64_product(trit_configs):
    for cfg in trit_configs:
        rng = np.random.default_rng(cfg.slot)
        n = 400
        tiles = rng.integers(-1, 2, (n, cfg.m, cfg.k)).astype(np.int8)
        # every block pattern at every (output, block) position at least once
        blocks = _all_blocks(cfg.c)
        rows = tiles[: len(blocks)].reshape(len(blocks), cfg.m, cfg.s, cfg.c)
        rows[:] = blocks[:, None, None, :]
        act = rng.integers(-127, 128, (n, cfg.k)).astype(np.int8)
        act[-50:] = rng.choice(np.array([-127, 127], np.int8), (50, cfg.k))  # adversarial extremes
        tiles[-25:] = 1
        tiles[-50:-25] = -1
        start = rng.integers(-32768, 32768, (n, cfg.m)).astype(np.int16)
        start[: n // 2] = rng.choice(np.array([32767, -32768, 32700, -32700], np.int16), (n // 2, cfg.m))
        packed = pack_tile(cfg, tiles)
        assert packed.shape == (n, cfg.weight_bytes)
        assert np.array_equal(unpack_tile(cfg, packed), tiles)
        got = tgemv(cfg, start, tlut(cfg, act), packed)
        want = (start.astype(np.int64) + tile_matvec(cfg, tiles, act)).astype(np.int16)  # wraps
        assert np.array_equal(got, want), cfg.name
        # the same weights as split codes give the same accumulators
        split = _split(cfg)
        assert np.array_equal(tgemv(split, start, tlut(split, act), pack_tile(split, tiles)), got)


def test_reserved_codes_contribute_zero(trit_configs):
    cfg = next(c for c in trit_configs if c.c == 3 and c.vector_bits == 256)
    rng = np.random.default_rng(1)
    operand = np.full(cfg.weight_bytes, 0xFF, np.uint8)  # every 5-bit code = 31 (reserved)
    assert (weight_codes(cfg, operand) == 31).all()
    act = rng.integers(-128, 128, cfg.k).astype(np.int8)
    start = rng.integers(-32768, 32768, cfg.m).astype(np.int16)
    assert np.array_equal(tgemv(cfg, start, tlut(cfg, act), operand), start)
    assert (unpack_tile(cfg, operand) == 0).all()


def test_code_bit_layout(trit_configs):
    """Output j, block b: bits [j*s*5 + b*5, +5) of the 20-byte operand, little-endian."""
    cfg = next(c for c in trit_configs if c.c == 3 and c.vector_bits == 256)
    tile = np.zeros((cfg.m, cfg.k), np.int8)
    tile[1, 3:6] = (1, -1, 0)  # output 1, block 1: code 2 + 0 * 3 + 1 * 9 = 11 at bit 15
    packed = pack_tile(cfg, tile)
    zero = 1 + 3 + 9  # the code of three zero weights
    value = int.from_bytes(packed.tobytes(), "little")
    for j in range(cfg.m):
        for b in range(cfg.s):
            offset, bits = cfg.code_field(j, b)
            assert value >> offset & (1 << bits) - 1 == (11 if (j, b) == (1, 1) else zero)


def test_assembler_round_trip(trit_configs):
    cfg = next(c for c in trit_configs if c.c == 3 and c.vector_bits == 256)
    assert cfg.tgemv_mnemonic == "tgemv6x16t"
    program = assemble("tlut3x2t ymm4, [rsi + 6]\ntgemv6x16t ymm1, ymm4, [rdx + 20]\n"
                       "tgemv6x16t ymm2, ymm4, ymm6\nret\n")
    first = decode(program.code)
    second = decode(program.code, first.length)
    third = decode(program.code, first.length + second.length)
    assert str(first) == "tlut3x2t ymm4, [rsi+0x6]"
    assert second.mnemonic == "tgemv6x16t" and second.operands[2].size == 20
    assert str(third) == "tgemv6x16t ymm2, ymm4, ymm6"
