"""Semantics of the AVX-512 integer instructions without a VEX twin (compress/expand, AVX512CD,
IFMA, VBMI, VBMI2, BITALG, VPOPCNTDQ, VP2INTERSECT) and of GFNI, VAES and VPCLMULQDQ (VEX and EVEX
forms), as batched numpy functions in the shape of :mod:`tsar.sim.x86.vecops` (see
:class:`~tsar.sim.x86.opdefs.Op`).

Forms the table cannot express are compiled by :data:`SPECIAL`: compress to memory and expand from
memory (which touch only the active elements, contiguously) and vp2intersect (a pair of opmask
destinations).

The GF(2^8) arithmetic (GFNI, AES) is computed at import from its definition: the field
GF(2)[x] / (x^8 + x^4 + x^3 + x + 1), the AES S-box as the affine map of the field inverse.
"""

from __future__ import annotations

from collections.abc import Callable

import iced_x86 as iced
import numpy as np

from tsar.sim.x86.decode import address_fn, operands
from tsar.sim.x86.opdefs import (
    I16,
    U8,
    U16,
    U32,
    U64,
    Compiled,
    Op,
    Unsupported,
    flat,
    lanes,
    mask_bools,
    mask_value,
)
from tsar.sim.x86.state import CpuState
from tsar.sim.x86.vecexec import writer
from tsar.sim.x86.vecops import inlane

_UDT = {"b": U8, "w": U16, "d": U32, "q": U64}
_ELEMENT_DTYPES = {1: U8, 2: U16, 4: U32, 8: U64}
POPCOUNT8 = np.unpackbits(np.arange(256, dtype=U8)[:, None], axis=1).sum(axis=1).astype(U8)
"""Set bits of each byte value."""


# --- GF(2^8) and AES tables, from their definitions ---------------------------------------------

def _gf_mul_table() -> np.ndarray:
    """``(256, 256)`` uint8: products in GF(2^8) modulo x^8 + x^4 + x^3 + x + 1 (0x11B)."""
    a = np.arange(256, dtype=U16)[:, None]
    b = np.arange(256, dtype=U16)[None, :]
    res = np.zeros((256, 256), U16)
    for i in range(8):
        res ^= np.where((b >> i) & 1, a, 0).astype(U16)
        a = ((a << 1) ^ np.where(a & 0x80, 0x11B, 0)).astype(U16)  # a * x, reduced
    return res.astype(U8)


GF_MUL = _gf_mul_table()
"""``GF_MUL[a, b]``: the product of bytes ``a`` and ``b`` in GF(2^8) (the AES/GFNI field)."""


def _gf_inverse() -> np.ndarray:
    """x^254 = x^-1 for x != 0 (the multiplicative group has order 255), and 0 -> 0."""
    x = np.arange(256, dtype=U8)
    res, power = np.ones(256, U8), x.copy()
    for bit in range(8):  # square and multiply over the exponent 254
        if 254 >> bit & 1:
            res = GF_MUL[res, power]
        power = GF_MUL[power, power]
    return res


GF_INV = _gf_inverse()
"""``GF_INV[a]``: the inverse of ``a`` in GF(2^8), 0 for 0."""


def _rotl8(x: np.ndarray, n: int) -> np.ndarray:
    return ((x << n) | (x >> (8 - n))).astype(U8)


def _aes_sbox() -> tuple[np.ndarray, np.ndarray]:
    """The AES S-box (FIPS-197: the field inverse, then b ^ rotl(b, 1..4) ^ 0x63) and its inverse."""
    b = GF_INV
    sbox = (b ^ _rotl8(b, 1) ^ _rotl8(b, 2) ^ _rotl8(b, 3) ^ _rotl8(b, 4) ^ 0x63).astype(U8)
    inverse = np.zeros(256, U8)
    inverse[sbox] = np.arange(256, dtype=U8)
    return sbox, inverse


AES_SBOX, AES_INV_SBOX = _aes_sbox()
_MIX = ((2, 3, 1, 1), (1, 2, 3, 1), (1, 1, 2, 3), (3, 1, 1, 2))
_INV_MIX = ((14, 11, 13, 9), (9, 14, 11, 13), (13, 9, 14, 11), (11, 13, 9, 14))
# state byte i is row i % 4, column i // 4; ShiftRows rotates row r left by r columns
_SHIFT_ROWS = [r + 4 * ((c + r) % 4) for c in range(4) for r in range(4)]
_INV_SHIFT_ROWS = [r + 4 * ((c - r) % 4) for c in range(4) for r in range(4)]


def _mix_columns(state: np.ndarray, matrix: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """Each 4-byte column (``(..., 16)`` state, column-major) multiplied by ``matrix`` over GF(2^8)."""
    cols = state.reshape(*state.shape[:-1], 4, 4)  # (..., column, row)
    out = np.zeros_like(cols)
    for r, row in enumerate(matrix):
        for k, coeff in enumerate(row):
            out[..., r] ^= GF_MUL[coeff][cols[..., k]]
    return out.reshape(state.shape)


def _aes(decrypt: bool, last: bool) -> Op:
    """vaesenc/vaesenclast/vaesdec/vaesdeclast: one AES round on each 128-bit lane of src1 (the
    state) with the round key in the same lane of src2."""
    shift_rows = _INV_SHIFT_ROWS if decrypt else _SHIFT_ROWS
    sbox = AES_INV_SBOX if decrypt else AES_SBOX
    matrix = _INV_MIX if decrypt else _MIX

    def f(state: np.ndarray, key: np.ndarray, imm: int | None) -> np.ndarray:
        state = sbox[state[..., shift_rows]]
        if not last:
            state = _mix_columns(state, matrix)
        return state ^ key
    return inlane(f)


def _clmul(a: np.ndarray, b: np.ndarray, imm: int | None) -> np.ndarray:
    """vpclmulqdq on one 128-bit lane: the carry-less product of qword imm[0] of src1 and qword
    imm[4] of src2 (128 bits)."""
    x = a.view(U64)[..., imm & 1]
    y = b.view(U64)[..., (imm >> 4) & 1]
    lo, hi = np.zeros_like(x), np.zeros_like(x)
    for i in range(64):
        term = x & np.negative((y >> U64(i)) & U64(1))
        lo ^= term << U64(i)
        if i:
            hi ^= term >> U64(64 - i)
    return np.stack([lo, hi], axis=-1)


def _gf2p8mul(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    """vgf2p8mulb: byte-wise products in GF(2^8)."""
    return GF_MUL[s[0].view(U8), s[1].view(U8)]


def _affine(inverse: bool) -> Op:
    """vgf2p8affineqb / vgf2p8affineinvqb: bit ``i`` of result byte ``x`` (of qword ``j``) is the
    parity of ``x & A.byte[7 - i]`` (``A`` = qword ``j`` of src2) xor imm bit ``i``; the inv form
    first replaces ``x`` by its field inverse."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        x = s[0].view(U8)
        if inverse:
            x = GF_INV[x]
        x = x.reshape(*x.shape[:-1], -1, 8)
        matrix = s[1].view(U8).reshape(x.shape)
        res = np.zeros_like(x)
        for i in range(8):
            res |= (POPCOUNT8[matrix[..., 7 - i, None] & x] & 1) << U8(i)
        return res ^ U8(imm)
    return Op(fn)


# --- compress / expand ---------------------------------------------------------------------------

def _compress(dt: type) -> Op:
    """vpcompress*/vcompressp* to a register: the active elements of src packed into the low
    elements; the rest keep the destination's (merging) or become zero (zeroing). Sources: the
    destination's old value, src."""
    def fn(s: list[np.ndarray], imm: int | None, out: int, mask: np.ndarray, zeroing: bool) -> np.ndarray:
        old, x = s[0].view(dt), s[1].view(dt)
        m = np.broadcast_to(mask, x.shape)
        packed = np.take_along_axis(x, np.argsort(~m, axis=-1, kind="stable"), axis=-1)
        filled = np.arange(x.shape[-1]) < m.sum(axis=-1, keepdims=True)
        return np.where(filled, packed, np.zeros_like(old) if zeroing else old)
    return Op(fn, reads_dst=True, uses_mask=True)


def _expand(dt: type) -> Op:
    """vpexpand*/vexpandp*: the low elements of src placed, in order, at the active element
    positions; inactive ones keep the destination's (merging) or become zero (zeroing). Sources:
    the destination's old value, src."""
    def fn(s: list[np.ndarray], imm: int | None, out: int, mask: np.ndarray, zeroing: bool) -> np.ndarray:
        old, x = s[0].view(dt), s[1].view(dt)
        m = np.broadcast_to(mask, x.shape)
        rank = np.maximum(np.cumsum(m, axis=-1) - 1, 0)
        picked = np.take_along_axis(x, rank, axis=-1)
        return np.where(m, picked, np.zeros_like(old) if zeroing else old)
    return Op(fn, reads_dst=True, uses_mask=True)


# --- AVX512CD, BITALG, VPOPCNTDQ --------------------------------------------------------------------

def _conflict(dt: type) -> Op:
    """vpconflictd/q: bit ``i`` of element ``j`` set where ``i < j`` and src[i] == src[j]."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        x = s[0].view(dt)
        n = x.shape[-1]
        earlier = np.tril(np.ones((n, n), bool), -1)  # [j, i]: i < j
        weights = U64(1) << np.arange(n, dtype=U64)
        hits = (x[..., :, None] == x[..., None, :]) & earlier
        return (hits * weights).sum(axis=-1, dtype=U64).astype(dt)
    return Op(fn)


def _lzcnt(dt: type) -> Op:
    """vplzcntd/q: leading zero bits of each element (its width for 0)."""
    bits = np.dtype(dt).itemsize * 8

    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        x = s[0].view(dt)
        count = np.zeros_like(x)
        step = bits // 2
        while step:  # binary search: shift the top set bit up in halving steps
            empty = (x >> dt(bits - step)) == 0
            count += np.where(empty, dt(step), dt(0))
            x = np.where(empty, x << dt(step), x)
            step //= 2
        return count + (x >> dt(bits - 1) == 0).astype(dt)
    return Op(fn)


def _popcnt(dt: type) -> Op:
    """vpopcntb/w/d/q: set bits of each element."""
    size = np.dtype(dt).itemsize

    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        counts = POPCOUNT8[s[0].view(U8)]
        return counts.reshape(*counts.shape[:-1], -1, size).sum(axis=-1, dtype=dt)
    return Op(fn)


def _broadcastm(dt: type, bits: int) -> Op:
    """vpbroadcastmb2q / vpbroadcastmw2d: the opmask's low ``bits`` bits, zero-extended, in every
    element."""
    size = np.dtype(dt).itemsize

    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        value = (s[0].view(U8)[..., :8].view(U64) & U64((1 << bits) - 1)).astype(dt)
        return np.repeat(value, out // size, axis=-1)
    return Op(fn)


def _shufbitqmb(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    """vpshufbitqmb: mask bit ``8j + b`` is bit (byte ``b`` of qword ``j`` of src2) & 63 of qword
    ``j`` of src1."""
    data = s[0].view(U64)[..., None]
    index = s[1].view(U8).reshape(*data.shape[:-1], 8) & U8(63)
    bits = (data >> index.astype(U64)) & U64(1)
    return bits.astype(bool).reshape(*bits.shape[:-2], -1)


# --- IFMA, VBMI, VBMI2 ---------------------------------------------------------------------------

_LOW52, _LOW26 = U64((1 << 52) - 1), U64((1 << 26) - 1)


def _madd52(high: bool) -> Op:
    """vpmadd52luq / vpmadd52huq: the destination plus bits 51:0 (103:52) of the 104-bit product of
    the low 52 bits of src1 and src2, per qword (mod 2^64). Sources: dst, src1, src2."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        acc, a, b = (x.view(U64) for x in s)
        a0, a1 = a & _LOW26, (a & _LOW52) >> U64(26)
        b0, b1 = b & _LOW26, (b & _LOW52) >> U64(26)
        mid = a0 * b1 + a1 * b0  # < 2^53: 26-bit halves keep every partial product exact
        low = a0 * b0 + ((mid & _LOW26) << U64(26))
        part = a1 * b1 + (mid >> U64(26)) + (low >> U64(52)) if high else low & _LOW52
        return acc + part
    return Op(fn, reads_dst=True)


def _multishift(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    """vpmultishiftqb: byte ``b`` of qword ``j`` is the 8 bits of qword ``j`` of src2 starting at
    bit (byte ``b`` of qword ``j`` of src1) & 63, wrapping around."""
    data = s[1].view(U64)[..., None]
    ctrl = (s[0].view(U8).reshape(*data.shape[:-1], 8) & U8(63)).astype(U64)
    rotated = (data >> ctrl) | ((data << U64(1)) << (U64(63) - ctrl))
    res = (rotated & U64(0xFF)).astype(U8)
    return res.reshape(*res.shape[:-2], -1)


def _double_shift(dt: type, left: bool, variable: bool) -> Op:
    """vpshld/vpshrd (count imm8) and vpshldv/vpshrdv (count per element in src3), modulo the
    element width. Left: the upper half of (a:b) << count; right: the lower half of (b:a) >> count,
    with (a, b) = (src1, src2), or (dst, src2) for the variable forms (which read the destination)."""
    bits = np.dtype(dt).itemsize * 8

    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        a, b = s[0].view(dt), s[1].view(dt)
        count = s[2].view(dt) & dt(bits - 1) if variable else dt(imm & (bits - 1))
        rest = dt(bits - 1) - count  # the other source moves by bits - count, in two steps
        if left:
            return (a << count) | ((b >> dt(1)) >> rest)
        return (a >> count) | ((b << dt(1)) << rest)
    return Op(fn, reads_dst=variable)


_SAD_SRC1 = np.array([[8 * (w // 4) + 4 * (w % 4 // 2) + k for k in range(4)] for w in range(8)])
_SAD_TMP = np.array([[8 * (w // 4) + w % 4 + k for k in range(4)] for w in range(8)])


def _dbpsadbw(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    """vdbpsadbw: per 128-bit lane, src2's dwords shuffled by imm8 (2 bits each) into ``t``; word
    ``w`` of qword ``q`` is the sum of |src1 byte - t byte| over four bytes: src1 bytes
    ``8q + 4 (w // 2) + k``, t bytes ``8q + w + k``, k = 0..3."""
    a = lanes(s[0].view(U8)).astype(I16)
    t = lanes(s[1].view(U8)).view(U32)[..., [(imm >> (2 * i)) & 3 for i in range(4)]]
    t = np.ascontiguousarray(t).view(U8).astype(I16)
    sums = np.abs(a[..., _SAD_SRC1] - t[..., _SAD_TMP]).sum(axis=-1).astype(U16)
    return flat(sums)


# --- the tables ----------------------------------------------------------------------------------

def int_ops() -> dict[str, Op]:
    """Lower-case EVEX mnemonic -> semantics (EVEX-only instructions)."""
    t: dict[str, Op] = {}
    for s, dt in _UDT.items():
        t[f"vpcompress{s}"] = _compress(dt)
        t[f"vpexpand{s}"] = _expand(dt)
        t[f"vpopcnt{s}"] = _popcnt(dt)
    for p, dt in (("s", U32), ("d", U64)):
        t[f"vcompressp{p}"] = _compress(dt)
        t[f"vexpandp{p}"] = _expand(dt)
    for s in "dq":
        t[f"vpconflict{s}"] = _conflict(_UDT[s])
        t[f"vplzcnt{s}"] = _lzcnt(_UDT[s])
    for s in "wdq":
        for d, left in (("l", True), ("r", False)):
            t[f"vpsh{d}d{s}"] = _double_shift(_UDT[s], left, False)
            t[f"vpsh{d}dv{s}"] = _double_shift(_UDT[s], left, True)
    t["vpbroadcastmb2q"] = _broadcastm(U64, 8)
    t["vpbroadcastmw2d"] = _broadcastm(U32, 16)
    t["vpmadd52luq"] = _madd52(False)
    t["vpmadd52huq"] = _madd52(True)
    t["vpmultishiftqb"] = Op(_multishift)
    t["vpshufbitqmb"] = Op(_shufbitqmb, to_mask=True)
    t["vdbpsadbw"] = Op(_dbpsadbw)
    return t


def vex_ops() -> dict[str, Op]:
    """Lower-case mnemonic -> semantics of GFNI, VAES and VPCLMULQDQ (their VEX and EVEX forms)."""
    return {"vgf2p8mulb": Op(_gf2p8mul), "vgf2p8affineqb": _affine(False),
            "vgf2p8affineinvqb": _affine(True),
            "vaesenc": _aes(False, False), "vaesenclast": _aes(False, True),
            "vaesdec": _aes(True, False), "vaesdeclast": _aes(True, True),
            "vpclmulqdq": inlane(_clmul)}


# --- compilers for the forms the table cannot express ------------------------------------------

def _mask_reader(ins: iced.Instruction, st: CpuState, count: int) -> Callable[[], np.ndarray]:
    """The write mask as ``count`` bools (all True without one)."""
    if ins.op_mask == iced.Register.NONE:
        everything = np.ones(count, bool)
        return lambda: everything
    n, k = iced.RegisterExt.number(ins.op_mask), st.k
    return lambda: mask_bools(k[n], count)


def _element_bytes(ins: iced.Instruction) -> int:
    return iced.MemorySizeExt.element_size(iced.OpCodeInfo(ins.code).memory_size)


def _compile_compress(ins: iced.Instruction, st: CpuState, trace: bool) -> Compiled | None:
    """vpcompress*/vcompressp* to memory: the active elements stored contiguously from the
    address; nothing else is written (so nothing beyond them can fault)."""
    dst, src = operands(ins)
    if dst.kind != "mem":
        return None
    size, esize = src.size, _element_bytes(ins)
    active = _mask_reader(ins, st, size // esize)
    addr, row, wview = address_fn(dst, st.gpr), st.zmm[src.reg, :size], st.mem.wview

    def run() -> None:
        m = active()
        n = int(m.sum()) * esize
        if not n:
            return
        a = addr()
        if st.trace is not None:
            st.trace.append((a, n, 1))
        wview(a, n)[:] = row.reshape(-1, esize)[m].reshape(-1)
    return Compiled(run, 0, size)


def _compile_expand(ins: iced.Instruction, st: CpuState, trace: bool) -> Compiled | None:
    """vpexpand*/vexpandp* from memory: as many elements read, contiguously, as are active."""
    dst, src = operands(ins)
    if src.kind != "mem":
        return None
    size, esize = dst.size, _element_bytes(ins)
    fn = _expand(_ELEMENT_DTYPES[esize]).fn
    active = _mask_reader(ins, st, size // esize)
    addr, row, view = address_fn(src, st.gpr), st.zmm[dst.reg, :size], st.mem.view
    write, zeroing = writer(dst, st, False, False), ins.zeroing_masking

    def run() -> None:
        m = active()
        n = int(m.sum()) * esize
        packed = np.zeros(size, U8)
        if n:
            a = addr()
            if st.trace is not None:
                st.trace.append((a, n, 0))
            packed[:n] = view(a, n)
        write(fn([row, packed], None, size, m, zeroing))
    return Compiled(run, size, 0)


def intersect(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """vp2intersectd/q on element arrays ``(..., n)``: (elements of ``a`` equal to some element of
    ``b``, elements of ``b`` equal to some element of ``a``) as bools."""
    eq = a[..., :, None] == b[..., None, :]
    return eq.any(axis=-1), eq.any(axis=-2)


def _compile_intersect(ins: iced.Instruction, st: CpuState, trace: bool) -> Compiled:
    """vp2intersectd/q k, src1, src2: the match bits of src1's elements go to the even register of
    the pair (the encoded one with bit 0 cleared), those of src2's to the odd one; bits above the
    element count are zeroed. A broadcast memory source repeats its one element."""
    dst, src1, src2 = operands(ins)
    if src2.kind not in ("vec", "mem"):  # e.g. an fs/gs-relative source
        raise Unsupported("vp2intersect with a segment-relative source")
    esize = _element_bytes(ins)
    dt = _ELEMENT_DTYPES[esize]
    first, k = dst.reg & ~1, st.k
    a_row = st.zmm[src1.reg, :src1.size]
    size = src1.size
    if src2.kind == "vec":
        b_row = st.zmm[src2.reg, :size].view(dt)

        def run_reg() -> None:
            left, right = intersect(a_row.view(dt), b_row)
            k[first], k[first + 1] = mask_value(left), mask_value(right)
        return Compiled(run_reg, 0, 0)
    addr, view, width = address_fn(src2, st.gpr), st.mem.view, esize if ins.is_broadcast else size

    def run_mem() -> None:
        a = addr()
        if st.trace is not None:
            st.trace.append((a, width, 0))
        left, right = intersect(a_row.view(dt), np.tile(view(a, width), size // width).view(dt))
        k[first], k[first + 1] = mask_value(left), mask_value(right)
    return Compiled(run_mem, width, 0)


SPECIAL: dict[str, Callable[[iced.Instruction, CpuState, bool], Compiled | None]] = {
    **{name: _compile_compress for name in ("vpcompressb", "vpcompressw", "vpcompressd", "vpcompressq",
                                            "vcompressps", "vcompresspd")},
    **{name: _compile_expand for name in ("vpexpandb", "vpexpandw", "vpexpandd", "vpexpandq",
                                          "vexpandps", "vexpandpd")},
    "vp2intersectd": _compile_intersect, "vp2intersectq": _compile_intersect,
}
"""Mnemonic -> a compiler for forms the table cannot express (e.g. compress to memory, which writes
only the active elements, contiguously); it returns None to leave a form to the table."""
