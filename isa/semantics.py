"""Golden semantics of TLUT and TGEMV in numpy (DESIGN.md section 3), and the weight packer.

These functions are the architectural definition: the simulator executes T-SAR instructions
through them, and the RTL testbenches compare against them. All functions accept leading batch
dimensions so that thousands of random operands can be checked at once.

Layouts (little-endian throughout):

* activations: ``k`` int8, activation ``i`` of block ``b`` is ``src[b*c + i]``;
* LUT group: ``s * 2^(c+1)`` int16 words; block ``b`` occupies words ``[b*2^(c+1), (b+1)*2^(c+1))``,
  ``D_b[0..2^c)`` then ``S_b[0..2^c)``, with ``D_b[p] = sum_i (bit_i(p) ? +a_i : -a_i)`` and
  ``S_b[p] = sum_i bit_i(p) * a_i`` (bit 0 of ``p`` belongs to the block's first activation);
* weight operand: ``m * s`` codes of ``2c`` bits; output ``j``'s codes at bits
  ``[j*s*2c, (j+1)*s*2c)``, block ``b`` at offset ``b*2c``, ``code = idxD | idxS << c``.
"""

from __future__ import annotations

import numpy as np

from .config import TsarConfig


def _pattern_bits(c: int) -> np.ndarray:
    """(2^c, c) matrix: ``bits[p, i] = bit i of p``."""
    p = np.arange(1 << c)[:, None]
    return ((p >> np.arange(c)[None, :]) & 1).astype(np.int32)


def tlut(cfg: TsarConfig, activations: np.ndarray) -> np.ndarray:
    """TLUT: ``(..., k)`` int8 activations -> ``(..., s * 2^(c+1))`` int16 LUT-group words."""
    act = np.asarray(activations)
    if act.shape[-1:] != (cfg.k,):
        raise ValueError(f"{cfg.tlut_mnemonic}: expected (..., {cfg.k}) activations, got {act.shape}")
    blocks = act.astype(np.int32).reshape(*act.shape[:-1], cfg.s, cfg.c)
    bits = _pattern_bits(cfg.c)
    dense = blocks @ (2 * bits - 1).T  # (..., s, 2^c)
    sparse = blocks @ bits.T
    words = np.concatenate([dense, sparse], axis=-1)  # (..., s, 2^(c+1))
    return words.reshape(*act.shape[:-1], cfg.group_words).astype(np.int16)


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
    bits = np.unpackbits(raw, axis=-1, bitorder="little")
    bits = bits.reshape(*raw.shape[:-1], cfg.m, cfg.s, cfg.code_bits).astype(np.int32)
    return (bits << np.arange(cfg.code_bits)).sum(axis=-1)


def tgemv(cfg: TsarConfig, acc: np.ndarray, group: np.ndarray, operand: np.ndarray) -> np.ndarray:
    """TGEMV: ``acc[j] += sum_b (D_b[idxD(j,b)] - S_b[idxS(j,b)])`` with int16 wrap-around.

    ``acc``: ``(..., m)`` int16; ``group``: ``(..., s * 2^(c+1))`` int16 words as TLUT wrote them;
    ``operand``: ``(..., weight_bytes)`` uint8. Returns the new ``(..., m)`` int16 accumulator.
    """
    acc = np.asarray(acc)
    group = np.asarray(group)
    if acc.shape[-1:] != (cfg.m,):
        raise ValueError(f"{cfg.tgemv_mnemonic}: expected (..., {cfg.m}) accumulators, got {acc.shape}")
    if group.shape[-1:] != (cfg.group_words,):
        raise ValueError(
            f"{cfg.tgemv_mnemonic}: expected (..., {cfg.group_words}) LUT words, got {group.shape}"
        )
    codes = weight_codes(cfg, operand)  # (..., m, s)
    mask = cfg.patterns - 1
    base = np.arange(cfg.s) * cfg.block_words  # word offset of block b
    idx_d = base + (codes & mask)
    idx_s = base + cfg.patterns + (codes >> cfg.c)
    table = group.astype(np.int32)[..., None, :]  # broadcast over the m outputs
    table = np.broadcast_to(table, (*codes.shape[:-1], cfg.group_words))
    dense = np.take_along_axis(table, idx_d, axis=-1)
    sparse = np.take_along_axis(table, idx_s, axis=-1)
    total = acc.astype(np.int32) + (dense - sparse).sum(axis=-1)
    return total.astype(np.int16)  # two's-complement wrap, like VPADDW


def _check_ternary(w: np.ndarray) -> None:
    if not w.size:
        return
    in_range = w.min() >= -1 and w.max() <= 1
    if not in_range or (not np.issubdtype(w.dtype, np.integer) and not np.isin(w, (-1, 0, 1)).all()):
        raise ValueError("weights must be ternary (-1, 0, +1)")


def encode_codes(cfg: TsarConfig, weights: np.ndarray) -> np.ndarray:
    """Ternary weights ``(..., s, c)`` in {-1, 0, +1} -> uint8 codes ``(..., s)``
    (``idxD | idxS << c``: dense bit set where ``w != -1``, sparse bit set where ``w == 0``)."""
    w = np.asarray(weights)
    _check_ternary(w)
    codes = np.zeros(w.shape[:-1], np.uint8)
    for i in range(cfg.c):
        wi = w[..., i]
        codes |= (wi != -1).view(np.uint8) << i
        codes |= (wi == 0).view(np.uint8) << (cfg.c + i)
    return codes


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

    The code ``idxD | idxS << c`` with both bits set for a weight means 0; ``idxS`` set with
    ``idxD`` clear never comes out of the packer and decodes as ``-1 - 1 = -2`` (not ternary),
    which :func:`tgemv` nonetheless executes faithfully.
    """
    codes = weight_codes(cfg, operand)  # (..., m, s)
    i = np.arange(cfg.c)
    dense = 2 * ((codes[..., None] >> i) & 1) - 1
    sparse = (codes[..., None] >> (i + cfg.c)) & 1
    w = (dense - sparse).reshape(*codes.shape[:-2], cfg.m, cfg.k)
    return w.astype(np.int8)


def tile_matvec(cfg: TsarConfig, tile: np.ndarray, activations: np.ndarray) -> np.ndarray:
    """Reference for one TLUT + TGEMV pair: ``tile @ activations`` in int32 (no wrap-around)."""
    return np.einsum("...jk,...k->...j", np.asarray(tile, np.int32), np.asarray(activations, np.int32))
