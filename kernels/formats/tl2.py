"""bitnet.cpp TL2: 3 ternary weights per 4-bit magnitude index plus a sign bit (~1.67 bits/weight).

Layout facts from microsoft/BitNet ``utils/convert-hf-to-gguf-bitnet.py`` (preprocess_weights_tl2 and
its three/two-weight helpers), consumed by the kernels that ``utils/codegen_tl2.py`` generates:

* K splits into ``K3 = K - K % BK`` (3-weight part, block ``BK``, 96 in every preset) and a
  ``K - K3`` tail (a multiple of 32) coded TL1-style, 2 weights per 4-bit index.
* 3-weight group ``(w0, w1, w2)`` (consecutive k): ``v = 9*w0 + 3*w1 + w2``; index ``|v|`` (0..13),
  sign bit 1 iff ``v < 0``.
* Index stream, flat uint8, order ``[M/BM][K3/BK][BM/32][BK/6][32 bytes]``: one byte holds the
  index of group 2j (high nibble) and 2j+1 (low nibble) of one row; the 32 rows of a tile are stored
  in the order rows 0-7, 16-23, 8-15, 24-31.
* Sign stream, ``[M/BM][K3/BK][BM/32][BK/24][16 x uint16 little-endian]``: for the 8 groups of a
  24-column sub-block, word ``l`` bit ``15 - (2*g + h)`` is the sign of group g of row ``16*h + l``.
* Tail stream: 2-weight index ``3*w0 + w1 + 4`` (0..8), order ``[M/BM][(K-K3)/32][BM/32][8][32]``,
  same byte and row order as the index stream.
* The three streams are concatenated (index, sign, tail) and zero-padded to bitnet.cpp's tensor size
  ``(K-256)*M//3*5//8 + 256*M//2*4//8`` when that is larger. The per-tensor scale is kept apart.

BM and BK are per shape: bitnet.cpp's ``utils/codegen_tl2.py`` writes them to
``include/kernel_config.ini`` (sections ``[Kernels_i]``, keys ``m``, ``k``, ``bm`` = BM, ``bk`` = BK,
``bmm``), and the converter packs each (M, K) matrix with the first section of its shape.
:func:`read_config` reads such a file; :data:`PRESETS` holds bitnet.cpp's published ones. The
converter's inner block is ``bmm`` rows by ``192 // bmm`` columns; only ``bmm = 32`` packs (with 64,
a 3-column block holds one 3-weight group and its nibble pairing fails), and it is implied here.
"""

from __future__ import annotations

import configparser
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tsar.kernels.formats._common import check_multiple, check_ternary, pack_nibble_tiles, unpack_nibble_tiles

DEFAULT_BK = 96
TAIL_BLOCK = 32
BMM = 32
"""The only ``bmm`` of a kernel config that bitnet.cpp's converter can pack."""

PRESETS: dict[tuple[int, int], tuple[int, int]] = {
    # Llama3-8B-1.58-100B-tokens
    (14336, 4096): (256, 96), (4096, 14336): (128, 96), (1024, 4096): (256, 96), (4096, 4096): (128, 96),
    # bitnet_b1_58-3B
    (3200, 8640): (160, 96), (3200, 3200): (320, 96), (8640, 3200): (320, 96),
    # bitnet_b1_58-large (its third entry, M 4096 x K 1536, has bmm 64: not packable, left out)
    (1536, 4096): (256, 96), (1536, 1536): (128, 192),
}
"""(M, K) -> (BM, BK) of bitnet.cpp's published TL2 kernels, microsoft/BitNet
``preset_kernels/<model>/kernel_config_tl2.ini`` for the three models named above."""


@dataclass(frozen=True)
class TL2Weights:
    """Packed TL2 weights: ``data`` is the bitnet.cpp byte stream; offsets are in bytes."""

    data: np.ndarray
    m: int
    k: int
    bm: int
    bk: int

    @property
    def k3(self) -> int:
        return self.k - self.k % self.bk

    @property
    def sign_offset(self) -> int:
        return self.m * self.k3 // 6

    @property
    def tail_offset(self) -> int:
        return self.sign_offset + self.m * self.k3 // 24

    @property
    def nbytes(self) -> int:
        """Bytes a kernel reads (index + sign + tail streams, without padding)."""
        return self.tail_offset + self.m * (self.k - self.k3) // 4


def default_bm(m: int) -> int:
    """Largest preset-like row block (256, 320, 160, 128, 64, 32) dividing M."""
    for bm in (256, 320, 160, 128, 64, 32):
        if m % bm == 0:
            return bm
    raise ValueError(f"TL2: M must be a multiple of 32, got {m}")


def check_blocks(m: int, k: int, bm: int, bk: int, name: str = "TL2 pack") -> None:
    """Raise ValueError unless BM ``bm`` and BK ``bk`` can pack an (M, K) matrix."""
    if bm < 1 or bk < 1:
        raise ValueError(f"{name}: bm and bk must be positive, got bm {bm}, bk {bk}")
    check_multiple(bm, 32, "bm", name)
    check_multiple(m, bm, "M", name)
    check_multiple(bk, 24, "bk", name)
    check_multiple(k % bk, TAIL_BLOCK, "K % bk (the 2-weight tail)", name)


def stored_nbytes(m: int, k: int, bk: int) -> int:
    """Bytes of an (M, K) TL2 tensor as bitnet.cpp's converter stores it (streams and zero padding)."""
    k3 = k - k % bk
    streams = m * k3 // 6 + m * k3 // 24 + m * (k - k3) // 4
    return max(streams, (k - 256) * m // 3 * 5 // 8 + 256 * m // 2 * 4 // 8)


def packed_nbytes(m: int, k: int, bm: int | None = None, bk: int = DEFAULT_BK) -> int:
    """Bytes of :func:`pack`'s ``.data`` for an (M, K) layer without packing it: the three streams
    (M*K3/6 index + M*K3/24 sign + M*(K-K3)/4 tail bytes) or bitnet.cpp's padded size, whichever is
    larger (:func:`stored_nbytes`); the same checks as :func:`pack`."""
    check_blocks(m, k, default_bm(m) if bm is None else bm, bk)
    return stored_nbytes(m, k, bk)


def read_config(path: str | Path) -> dict[tuple[int, int], tuple[int, int]]:
    """(M, K) -> (BM, BK) of a bitnet.cpp ``kernel_config.ini``; the first section of a shape wins,
    as in the converter. Raises a one-line ValueError naming the file and section at fault."""
    path = Path(path)
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(path.read_text(encoding="utf-8"), source=str(path))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the TL2 kernel config ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, configparser.Error) as exc:
        raise ValueError(f"{path}: not a kernel_config.ini ({' '.join(str(exc).split())})") from None
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for section in parser.sections():
        where = f"{path}: section [{section}]"
        v: dict[str, int] = {}
        for key in ("m", "k", "bm", "bk", "bmm"):
            text = parser[section].get(key)
            if text is None:
                raise ValueError(f"{where}: missing key {key!r}")
            try:
                v[key] = int(text)
            except ValueError:
                raise ValueError(f"{where}: {key} = {text!r} is not an integer") from None
            if v[key] < 1:
                raise ValueError(f"{where}: {key} = {v[key]} is not a positive integer")
        if v["bmm"] != BMM:
            raise ValueError(f"{where}: bmm = {v['bmm']} is not supported (bitnet.cpp's converter packs "
                             f"TL2 with bmm = {BMM} only)")
        check_blocks(v["m"], v["k"], v["bm"], v["bk"], f"{where} (M {v['m']}, K {v['k']}, bm {v['bm']}, "
                                                       f"bk {v['bk']})")
        out.setdefault((v["m"], v["k"]), (v["bm"], v["bk"]))
    if not out:
        raise ValueError(f"{path}: no [Kernels_i] sections (not a bitnet.cpp kernel_config.ini)")
    return out


def pack(w_t: np.ndarray, bm: int | None = None, bk: int = DEFAULT_BK) -> TL2Weights:
    """Pack ternary int8 (M, K) weights into TL2. M % bm == 0, bm % 32 == 0, (K % bk) % 32 == 0."""
    w = check_ternary(w_t, "TL2 pack")
    m, k = w.shape
    bm = default_bm(m) if bm is None else bm
    check_blocks(m, k, bm, bk)
    k3 = k - k % bk
    g = w[:, :k3].reshape(m, k3 // 3, 3).astype(np.int16)
    v = 9 * g[..., 0] + 3 * g[..., 1] + g[..., 2]
    index = pack_nibble_tiles(np.abs(v), bm, bk // 3)
    sign = (v < 0).astype(np.uint16).reshape(m // bm, bm // 32, 2, 16, k3 // bk, bk // 24, 8)
    shift = (15 - 2 * np.arange(8)[None, :] - np.arange(2)[:, None]).astype(np.uint16)  # (h, g)
    words = (sign << shift[None, None, :, None, None, None, :]).sum(axis=(2, 6), dtype=np.uint16)
    sign_bytes = np.ascontiguousarray(words.transpose(0, 3, 1, 4, 2)).astype("<u2").view(np.uint8)
    t = w[:, k3:].reshape(m, (k - k3) // 2, 2).astype(np.int16)
    tail = pack_nibble_tiles(3 * t[..., 0] + t[..., 1] + 4, bm, TAIL_BLOCK // 2) if k > k3 else \
        np.zeros(0, np.uint8)
    body = np.concatenate([index, sign_bytes.reshape(-1), tail])
    data = np.zeros(stored_nbytes(m, k, bk), np.uint8)
    data[:body.size] = body
    return TL2Weights(data, m, k, bm, bk)


def unpack(p: TL2Weights) -> np.ndarray:
    """TL2Weights -> ternary int8 (M, K)."""
    m, k, bm, bk, k3 = p.m, p.k, p.bm, p.bk, p.k3
    mag = unpack_nibble_tiles(p.data[:p.sign_offset], m, k3 // 3, bm, bk // 3).astype(np.int16)
    words = p.data[p.sign_offset:p.tail_offset].view("<u2").reshape(m // bm, k3 // bk, bm // 32, bk // 24, 16)
    shift = (15 - 2 * np.arange(8)[None, :] - np.arange(2)[:, None]).astype(np.uint16)
    bits = (words[..., None, None] >> shift) & 1                      # (MB, KB, C, S, l, h, g)
    sign = bits.transpose(0, 2, 5, 4, 1, 3, 6).reshape(m, k3 // 3)
    v = np.where(sign == 1, -mag, mag)
    digits = np.stack([(v + 13) // 9 - 1, (v + 13) // 3 % 3 - 1, (v + 13) % 3 - 1], axis=-1)
    out = np.empty((m, k), np.int8)
    out[:, :k3] = digits.reshape(m, k3)
    if k > k3:
        idx = unpack_nibble_tiles(p.data[p.tail_offset:p.nbytes], m, (k - k3) // 2, bm, TAIL_BLOCK // 2)
        out[:, k3:] = np.stack([idx // 3 - 1, idx % 3 - 1], axis=-1).reshape(m, k - k3)
    return out
