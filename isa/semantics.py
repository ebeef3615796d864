"""Golden semantics of TLUT and TGEMV in numpy (DESIGN.md section 3), and the weight packer.

These functions are the architectural definition: the simulator executes T-SAR instructions
through them, and the RTL testbenches compare against them. All functions accept leading batch
dimensions so that thousands of random operands can be checked at once.

Layouts (little-endian throughout):

* activations: ``k`` int8, activation ``i`` of block ``b`` is ``src[b*c + i]``;
* LUT group: ``s * 2^(c+1)`` int16 words; block ``b`` occupies words ``[b*2^(c+1), (b+1)*2^(c+1))``,
  ``D_b[0..2^c)`` then ``S_b[0..2^c)``, with ``D_b[p] = sum_i (bit_i(p) ? +a_i : -a_i)`` and
  ``S_b[p] = sum_i bit_i(p) * a_i`` (bit 0 of ``p`` belongs to the block's first activation);
  the compact layout stores ``S_b`` only (``s * 2^c`` words), and TGEMV uses
  ``D_b[p] = 2*S_b[p] - S_b[2^c-1]``;
* weight operand: ``m * s`` codes of ``code_bits`` bits; output ``j``'s codes at bits
  ``[j*s*code_bits, (j+1)*s*code_bits)``, block ``b`` at offset ``b*code_bits``; split codes
  ``code = idxD | idxS << c`` (``2c`` bits), trit codes ``code = sum_i (w_i + 1) * 3^i``
  (``ceil(c log2 3)`` bits) that TGEMV decodes into the same ``(idxD, idxS)``
  (:meth:`~tsar.isa.config.TsarConfig.code_indices`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from math import gcd

import numpy as np

from tsar.isa.config import TsarConfig


def _pattern_bits(c: int) -> np.ndarray:
    """(2^c, c) matrix: ``bits[p, i] = bit i of p``."""
    p = np.arange(1 << c)[:, None]
    return ((p >> np.arange(c)[None, :]) & 1).astype(np.int32)


@dataclass(frozen=True)
class FastTables:
    """Per-configuration constants of the fast paths (built once per :class:`TsarConfig`).

    TLUT is one matrix product: ``words = act @ tlut_matrix``. TGEMV splits the weight operand
    into *symbols*: its bytes when every code sits inside one byte (c = 1, 2, 4), else the codes.
    Symbol ``t`` of value ``v`` names the group words ``gather[offset[t] + v]``: for each of its
    codes, the words of the layout's terms (:meth:`TsarConfig.tgemv_terms`), in code order. The
    words picked for all symbols, read as ``(m, s * terms)``, are multiplied with ``sign`` (the
    terms' coefficients) in the accumulator's width and added to the outputs.
    """

    tlut_matrix: np.ndarray  # (k, group_words) int16 in {-1, 0, +1}
    tlut_float: np.ndarray  # the same in float32
    byte_symbols: bool
    offset: np.ndarray  # (symbols,) intp: first gather row of each symbol position
    gather: np.ndarray  # (period * 2^symbol_bits, terms * codes per symbol) intp group-word indices
    sign: np.ndarray  # (s * terms,) acc dtype: the terms' coefficients, repeated per block
    acc_shape: tuple[int]  # (m,)
    group_shape: tuple[int]  # (group_words,)
    weight_shape: tuple[int]  # (weight_bytes,)
    picked_shape: tuple[int, int]  # (m, s * terms)


def tlut_matrix(cfg: TsarConfig) -> np.ndarray:
    """``(k, group_words)`` int16 coefficients in {-1, 0, +1}: word ``w`` of the group is
    ``sum_i act[i] * matrix[i, w]`` (D entries: ``+-1`` per activation, S entries: ``0 / 1``)."""
    bits = _pattern_bits(cfg.c)
    matrix = np.zeros((cfg.k, cfg.group_words), np.int16)
    for b in range(cfg.s):
        for table in cfg.lut_tables:
            word = cfg.word_index(b, table, 0)
            for i in range(cfg.c):
                column = 2 * bits[:, i] - 1 if table == "D" else bits[:, i]
                matrix[b * cfg.c + i, word:word + cfg.patterns] = column
    return matrix


@cache
def fast_tables(cfg: TsarConfig) -> FastTables:
    if cfg.lut_bits != 16:
        raise ValueError(f"{cfg.name}: the golden semantics implement int16 LUT entries, not "
                         f"lut_bits={cfg.lut_bits}")
    s = cfg.s
    matrix = tlut_matrix(cfg)
    terms = cfg.tgemv_terms()
    byte_symbols = 8 % cfg.code_bits == 0
    symbol_bits = 8 if byte_symbols else cfg.code_bits
    per_symbol = symbol_bits // cfg.code_bits  # codes per symbol
    period = s // gcd(s, per_symbol)  # symbols after which the blocks repeat
    values = np.arange(1 << symbol_bits)
    gather = np.zeros((period, values.size, per_symbol, len(terms)), np.intp)
    for q in range(period):
        for u in range(per_symbol):
            code = (values >> (u * cfg.code_bits)) & ((1 << cfg.code_bits) - 1)
            block = (q * per_symbol + u) % s  # the code's block
            for t, (table, index, _) in enumerate(terms):
                pattern = [cfg.term_pattern(index, int(v)) for v in code]
                gather[q, :, u, t] = cfg.word_index(block, table, 0) + np.asarray(pattern, np.intp)
    symbols = cfg.weight_bits // symbol_bits
    offset = (np.arange(symbols) % period * values.size).astype(np.intp)
    sign = np.tile(np.array([coef for _, _, coef in terms], cfg.acc_dtype), s)
    return FastTables(matrix, matrix.astype(np.float32), byte_symbols, offset,
                   gather.reshape(period * values.size, -1), sign, (cfg.m,), (cfg.group_words,),
                   (cfg.weight_bytes,), (cfg.m, len(terms) * s))


def _int16(x: np.ndarray) -> np.ndarray:
    """``x`` as int16 with two's-complement wrap-around (non-integers truncate via int32 first)."""
    return _wrap(x, np.int16)


def _wrap(x: np.ndarray, dtype: type) -> np.ndarray:
    """``x`` as ``dtype`` (int16 / int32) with two's-complement wrap-around (non-integers truncate
    via int64 first)."""
    if x.dtype == dtype:
        return x
    if x.dtype.kind not in "biu":
        x = x.astype(np.int64)
    return x.astype(dtype)


def tlut(cfg: TsarConfig, activations: np.ndarray) -> np.ndarray:
    """TLUT: ``(..., k)`` int8 activations -> ``(..., s * 2^(c+1))`` int16 LUT-group words."""
    act = np.asarray(activations)
    if act.shape[-1:] != (cfg.k,):
        raise ValueError(f"{cfg.tlut_mnemonic}: expected (..., {cfg.k}) activations, got {act.shape}")
    tab = fast_tables(cfg)
    if act.dtype == np.int8:  # |word| <= c * 128 <= 512: exact in float32 (and a BLAS product)
        return np.dot(act.astype(np.float32), tab.tlut_float).astype(np.int16)
    return np.matmul(_int16(act), tab.tlut_matrix)  # int16 products wrap like the int32 sums


def weight_codes(cfg: TsarConfig, operand: np.ndarray) -> np.ndarray:
    """Split a TGEMV weight operand into its codes.

    ``operand``: ``(..., weight_bytes)`` uint8 as it sits in memory / registers.
    Returns ``(..., m, s)`` integer codes ``idxD | idxS << c``.
    """
    raw = np.asarray(operand, dtype=np.uint8)
    if raw.shape[-1:] != (cfg.weight_bytes,):
        raise ValueError(
            f"{cfg.tgemv_mnemonic}: expected (..., {cfg.weight_bytes}) weight bytes, got {raw.shape}"
        )
    lead = raw.shape[:-1]
    width = cfg.code_bits
    if 8 % width == 0:  # whole codes per byte: c=4 is the byte itself, c=2 its two nibbles
        shifts = np.arange(0, 8, width, dtype=np.uint8)
        codes = (raw[..., None] >> shifts) & ((1 << width) - 1)
    else:
        bits = np.unpackbits(raw, axis=-1, bitorder="little").reshape(*lead, -1, width)
        codes = bits.astype(np.intp) << np.arange(width)
        codes = codes.sum(axis=-1)
    return codes.astype(np.intp).reshape(*lead, cfg.m, cfg.s)


def tgemv(cfg: TsarConfig, acc: np.ndarray, group: np.ndarray, operand: np.ndarray) -> np.ndarray:
    """TGEMV: ``acc[j] += sum_b (D_b[idxD(j,b)] - S_b[idxS(j,b)])`` with wrap-around in the
    accumulator's width (int16 like VPADDW, or int32); the compact layout derives ``D_b`` from
    ``S_b`` (:meth:`TsarConfig.tgemv_terms`).

    ``acc``: ``(..., m)`` ``cfg.acc_dtype``; ``group``: ``(..., group_words)`` int16 words as TLUT
    wrote them; ``operand``: ``(..., weight_bytes)`` uint8. Returns the new ``(..., m)`` accumulator.
    """
    tab = fast_tables(cfg)
    acc = np.asarray(acc)
    group = np.asarray(group)
    if acc.shape[-1:] != tab.acc_shape:
        raise ValueError(f"{cfg.tgemv_mnemonic}: expected (..., {cfg.m}) accumulators, got {acc.shape}")
    if group.shape[-1:] != tab.group_shape:
        raise ValueError(
            f"{cfg.tgemv_mnemonic}: expected (..., {cfg.group_words}) LUT words, got {group.shape}"
        )
    if tab.byte_symbols:
        symbols = np.asarray(operand, dtype=np.uint8)
        if symbols.shape[-1:] != tab.weight_shape:
            raise ValueError(f"{cfg.tgemv_mnemonic}: expected (..., {cfg.weight_bytes}) weight bytes, "
                             f"got {symbols.shape}")
    else:
        symbols = weight_codes(cfg, operand)
        symbols = symbols.reshape(*symbols.shape[:-2], -1)
    words = _int16(group)
    index = tab.gather.take(symbols + tab.offset, axis=0)  # (..., symbols, 2 * codes per symbol)
    lead = symbols.shape[:-1]
    if words.ndim > 1:  # a LUT group per batch element: index into the flattened groups
        if words.shape[:-1] != lead:
            lead = np.broadcast_shapes(words.shape[:-1], lead)
            words = np.broadcast_to(words, (*lead, cfg.group_words))
        words = words.reshape(-1)
        index = index + _row_offsets(words.size // cfg.group_words, cfg.group_words).reshape(
            *lead, 1, 1)
    picked = words.take(index).reshape(lead + tab.picked_shape)  # (..., m, s * terms)
    acc_type = tab.sign.dtype.type
    if acc_type is not np.int16:
        picked = picked.astype(acc_type)
    return np.add(_wrap(acc, acc_type), np.matmul(picked, tab.sign))  # wraps in the lane width


@lru_cache(maxsize=64)
def _row_offsets(rows: int, stride: int) -> np.ndarray:
    return np.arange(rows, dtype=np.intp) * stride


def _check_ternary(w: np.ndarray) -> None:
    if not w.size:
        return
    in_range = w.min() >= -1 and w.max() <= 1
    if not in_range or (not np.issubdtype(w.dtype, np.integer) and not np.isin(w, (-1, 0, 1)).all()):
        raise ValueError("weights must be ternary (-1, 0, +1)")


@cache
def _code_of_pattern(cfg: TsarConfig) -> np.ndarray:
    """``(3^c,)`` uint8: the code of every ternary block, indexed by ``sum_i (w_i + 1) * 3^i``."""
    table = np.zeros(3 ** cfg.c, np.uint8)
    for key in range(3 ** cfg.c):
        digits = [key // 3 ** i % 3 for i in range(cfg.c)]  # w_i + 1
        idx_d = sum(1 << i for i, d in enumerate(digits) if d != 0)
        idx_s = sum(1 << i for i, d in enumerate(digits) if d == 1)
        table[key] = cfg.make_code(idx_d, idx_s)
    return table


def encode_codes(cfg: TsarConfig, weights: np.ndarray) -> np.ndarray:
    """Ternary weights ``(..., s, c)`` in {-1, 0, +1} -> uint8 codes ``(..., s)``.

    Each block's ``(idxD, idxS)`` (dense bit set where ``w != -1``, sparse bit set where ``w == 0``)
    encoded by :meth:`TsarConfig.make_code` (split: ``idxD | idxS << c``; trits:
    ``sum_i (w_i + 1) * 3^i``), looked up by the block's base-3 pattern."""
    w = np.asarray(weights)
    _check_ternary(w)
    key = np.zeros(w.shape[:-1], np.min_scalar_type(3 ** cfg.c - 1))
    for i in reversed(range(cfg.c)):
        key *= 3
        key += (w[..., i] + 1).astype(key.dtype)
    return _code_of_pattern(cfg)[key]


def pack_tile(cfg: TsarConfig, tile: np.ndarray) -> np.ndarray:
    """Pack a ternary ``(..., m, k)`` tile into TGEMV weight operands ``(..., weight_bytes)`` uint8.

    Row ``j`` of the tile feeds accumulator lane ``j``; column ``i`` multiplies activation ``i``.
    """
    w = np.asarray(tile)
    if w.shape[-2:] != (cfg.m, cfg.k):
        raise ValueError(f"{cfg.tgemv_mnemonic}: expected a (..., {cfg.m}, {cfg.k}) tile, got {w.shape}")
    codes = encode_codes(cfg, w.reshape(*w.shape[:-1], cfg.s, cfg.c))  # (..., m, s)
    codes = codes.reshape(*w.shape[:-2], cfg.m * cfg.s)  # code n = output n // s, block n % s
    if cfg.code_bits == 8:
        return codes
    if cfg.code_bits == 4:
        return codes[..., 0::2] | (codes[..., 1::2] << 4)
    bits = (codes[..., None] >> np.arange(cfg.code_bits, dtype=np.uint8)) & 1
    return np.packbits(bits.reshape(*w.shape[:-2], cfg.weight_bits), axis=-1, bitorder="little")


def unpack_tile(cfg: TsarConfig, operand: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_tile`: weight operands -> ternary ``(..., m, k)`` int8 tile.

    Each code decodes through :meth:`~tsar.isa.config.TsarConfig.code_indices`: weight ``i`` is
    ``(2 * dense bit - 1) - sparse bit``. A split code with ``idxS`` set and ``idxD`` clear never
    comes out of the packer and decodes as ``-1 - 1 = -2`` (not ternary), which :func:`tgemv`
    nonetheless executes faithfully; reserved trit codes decode as zero weights.
    """
    idx_d, idx_s = cfg.code_indices(weight_codes(cfg, operand))  # (..., m, s) each
    i = np.arange(cfg.c)
    dense = 2 * ((idx_d[..., None] >> i) & 1) - 1
    sparse = (idx_s[..., None] >> i) & 1
    w = (dense - sparse).reshape(*idx_d.shape[:-2], cfg.m, cfg.k)
    return w.astype(np.int8)


def tile_matvec(cfg: TsarConfig, tile: np.ndarray, activations: np.ndarray) -> np.ndarray:
    """Reference for one TLUT + TGEMV pair: ``tile @ activations`` in int32 (no wrap-around)."""
    return np.einsum("...jk,...k->...j", np.asarray(tile, np.int32), np.asarray(activations, np.int32))
