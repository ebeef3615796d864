"""Semantics of the supported AVX/AVX2/FMA instructions as batched numpy functions.

Every operation is ``fn(srcs, imm, out) -> array``: ``srcs`` are the source operands in Intel
operand order (the destination first when the instruction also reads it), each a C-contiguous
``uint8`` array of shape ``(..., nbytes)`` (leading batch dimensions allowed); ``imm`` is the
8-bit immediate or None; ``out`` the destination size in bytes. The result is any C-contiguous
array whose bytes, ``(..., out)``, are the destination value. The executor applies the VEX rule
(an xmm destination zeroes bits 255:128), and the differential tests call these same functions.

Tables are built from a few generic families (element-wise, per-128-bit-lane, permutes, width
changes); each instruction is one table line.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tsar.sim.x86.fpops import float_ops
from tsar.sim.x86.opdefs import I8, I16, I32, I64, U8, U16, U32, U64, Op, flat, lanes

_DT = {"b": I8, "w": I16, "d": I32, "q": I64}
_UDT = {"b": U8, "w": U16, "d": U32, "q": U64}
_lanes, _flat = lanes, flat


_BOUNDS: dict[type, tuple[int, int]] = {}


def _sat(x: np.ndarray, dt: type) -> np.ndarray:
    bounds = _BOUNDS.get(dt)
    if bounds is None:
        info = np.iinfo(dt)
        bounds = _BOUNDS[dt] = (info.min, info.max)
    return np.minimum(np.maximum(x, bounds[0]), bounds[1]).astype(dt)


def _mask(cond: np.ndarray, dt: type) -> np.ndarray:
    """Boolean -> all-ones / all-zeros lanes of ``dt``."""
    return np.negative(cond.astype(dt))


# --- element-wise families ------------------------------------------------------------------------

def ew(dt: type, f: Callable[[np.ndarray, np.ndarray], np.ndarray], ufunc: np.ufunc | None = None) -> Op:
    """Binary element-wise op on lanes of ``dt`` (two sources)."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        return f(s[0].view(dt), s[1].view(dt))
    return Op(fn, ufunc=ufunc, dtype=dt if ufunc is not None else None)


def ew1(dt: type, f: Callable[[np.ndarray], np.ndarray]) -> Op:
    """Unary element-wise op on lanes of ``dt``."""
    return Op(lambda s, imm, out: f(s[0].view(dt)))


def saturating(dt: type, f: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Op:
    return ew(dt, lambda a, b: _sat(f(a.astype(I32), b.astype(I32)), dt))


def _sign(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(b < 0, np.negative(a), np.where(b == 0, 0, a)).astype(a.dtype)


def _mulh(dt: type, wide: type, bits: int = 16) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    return lambda a, b: ((a.astype(wide) * b.astype(wide)) >> bits).astype(dt)


def _mulhrs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return ((((a.astype(I32) * b) >> 14) + 1) >> 1).astype(I16)


def _mul_even(dt: type) -> Op:
    """vpmuldq / vpmuludq: 32x32 -> 64-bit products of the even dword lanes."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        a, b = (x.view(dt)[..., ::2].astype(I64) for x in s)
        return (a * b).view(I64)
    return Op(fn)


# --- per-128-bit-lane families -----------------------------------------------------------------------

def inlane(f: Callable[..., np.ndarray]) -> Op:
    """Apply ``f(*lanes, imm)`` to each 128-bit lane; ``f`` gets ``(..., 16)`` uint8 arrays."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        res = f(*[_lanes(x) for x in s], imm)
        return _flat(np.ascontiguousarray(res).view(U8))
    return Op(fn)


def _unpack(dt: type, high: bool) -> Callable[..., np.ndarray]:
    def f(a: np.ndarray, b: np.ndarray, imm: int | None) -> np.ndarray:
        a, b = a.view(dt), b.view(dt)
        half = a.shape[-1] // 2
        sl = slice(half, None) if high else slice(0, half)
        return np.stack([a[..., sl], b[..., sl]], axis=-1).reshape(a.shape)
    return f


def _pack(src: type, dst: type) -> Callable[..., np.ndarray]:
    def f(a: np.ndarray, b: np.ndarray, imm: int | None) -> np.ndarray:
        return _sat(np.concatenate([a.view(src), b.view(src)], axis=-1), dst)
    return f


def _hop(dt: type, sub: bool, sat: bool) -> Callable[..., np.ndarray]:
    def f(a: np.ndarray, b: np.ndarray, imm: int | None) -> np.ndarray:
        x = np.concatenate([a.view(dt), b.view(dt)], axis=-1).astype(I64)
        r = x[..., 0::2] - x[..., 1::2] if sub else x[..., 0::2] + x[..., 1::2]
        return _sat(r, dt) if sat else r.astype(dt)
    return f


def _pshufb(a: np.ndarray, b: np.ndarray, imm: int | None) -> np.ndarray:
    picked = np.take_along_axis(a, (b & 0x0F).astype(np.intp), axis=-1)
    return np.where(b & 0x80, 0, picked).astype(U8)


def _palignr(a: np.ndarray, b: np.ndarray, imm: int | None) -> np.ndarray:
    both = np.concatenate([b, a, np.zeros_like(a), np.zeros_like(a)], axis=-1)  # b is the low half
    n = min(imm, 32)
    return both[..., n:n + 16]


def _byte_shift(left: bool) -> Callable[..., np.ndarray]:
    def f(a: np.ndarray, imm: int | None) -> np.ndarray:
        n = min(imm, 16)
        z = np.zeros_like(a)
        return np.concatenate([z, a], axis=-1)[..., 16 - n:32 - n] if left else \
            np.concatenate([a, z], axis=-1)[..., n:n + 16]
    return f


def _pshufd(a: np.ndarray, imm: int | None) -> np.ndarray:
    sel = [(imm >> (2 * i)) & 3 for i in range(4)]
    return a.view(U32)[..., sel]


def _pshufw(high: bool) -> Callable[..., np.ndarray]:
    def f(a: np.ndarray, imm: int | None) -> np.ndarray:
        w = a.view(U16)
        sel = [(imm >> (2 * i)) & 3 for i in range(4)]
        if high:
            return np.concatenate([w[..., :4], w[..., [4 + s for s in sel]]], axis=-1)
        return np.concatenate([w[..., sel], w[..., 4:]], axis=-1)
    return f


def _shufps(a: np.ndarray, b: np.ndarray, imm: int | None) -> np.ndarray:
    x, y = a.view(U32), b.view(U32)
    sel = [(imm >> (2 * i)) & 3 for i in range(4)]
    return np.concatenate([x[..., sel[:2]], y[..., sel[2:]]], axis=-1)


def _blend_imm(dt: type, per_lane: bool) -> Op:
    """vpblendw (8 selector bits reused per 128-bit lane), vpblendd / vblendps / vblendpd."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        a, b = s[0].view(dt), s[1].view(dt)
        n = a.shape[-1]
        bits = np.array([(imm >> (i % 8 if per_lane else i)) & 1 for i in range(n)], bool)
        return np.where(bits, b, a)
    return Op(fn)


def _blendv(dt: type) -> Op:
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        a, b, m = (x.view(dt) for x in s)
        return np.where(m < 0, b, a)
    return Op(fn)


# --- shifts ---------------------------------------------------------------------------------------

def shift(kind: str, dt: type, variable: bool = False) -> Op:
    """Shift lanes of ``dt``: count from imm8, the low qword of an xmm, or per lane (variable).

    Counts >= the lane width give 0 (logical) or the sign fill (arithmetic).
    """
    bits = np.dtype(dt).itemsize * 8
    udt = np.dtype(dt).str.replace("i", "u")

    def apply(a: np.ndarray, count: np.ndarray | int) -> np.ndarray:
        count = np.asarray(count, dtype=U64)
        big = count >= bits
        cnt = np.where(big, 0, count).astype(a.dtype.str.replace("i", "u")).astype(a.dtype)
        if kind == "sll":
            r = np.left_shift(a.view(udt), cnt.view(udt)).view(dt)
            return np.where(big, 0, r).astype(dt)
        if kind == "srl":
            r = np.right_shift(a.view(udt), cnt.view(udt)).view(dt)
            return np.where(big, 0, r).astype(dt)
        return np.right_shift(a, np.where(big, bits - 1, cnt).astype(dt))  # sra: arithmetic

    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        a = s[0].view(dt)
        if imm is not None:
            return apply(a, imm)
        if variable:
            return apply(a, s[1].view(udt).astype(U64))
        count = s[1][..., :8].view(U64)  # (..., 1): broadcasts over the lanes
        return apply(a, count)
    return Op(fn)


# --- cross-lane permutes, width changes, moves -----------------------------------------------------

def _permd(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    idx, data = s[0].view(U32), s[1].view(U32)
    return np.take_along_axis(data, (idx & 7).astype(np.intp), axis=-1)


def _permq(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    return s[0].view(U64)[..., [(imm >> (2 * i)) & 3 for i in range(4)]]


def _perm2x128(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    halves = np.concatenate([_lanes(s[0]), _lanes(s[1])], axis=-2)  # (..., 4, 16)
    parts = []
    for sel in (imm & 0xF, imm >> 4):
        part = halves[..., sel & 3, :]
        parts.append(np.zeros_like(part) if sel & 8 else part)
    return np.concatenate(parts, axis=-1)


def _extract128(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    return _lanes(s[0])[..., imm & 1, :]


def _insert128(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    res = np.array(_lanes(s[0]))
    res[..., imm & 1, :] = s[1][..., :16]
    return _flat(res)


def resize(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    """The source's low ``out`` bytes, zero-extended (moves, vmovd/vmovq, extraction to memory)."""
    x = s[-1]
    n = x.shape[-1]
    if n >= out:
        return x[..., :out]
    return np.concatenate([x, np.zeros((*x.shape[:-1], out - n), U8)], axis=-1)


def _broadcast(size: int) -> Op:
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        return np.tile(s[0][..., :size], out // size)
    return Op(fn)


def _extend(src: str, dst: str, signed: bool) -> Op:
    """vpmovsx / vpmovzx: the low lanes of the source widened to ``out`` bytes."""
    sdt = (_DT if signed else _UDT)[src]
    ddt = _DT[dst]
    count_ratio = np.dtype(ddt).itemsize

    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        n = out // count_ratio
        return s[0].view(U8)[..., : n * np.dtype(sdt).itemsize].view(sdt).astype(ddt)
    return Op(fn)


def _movemask(dt: type) -> Op:
    """vpmovmskb / vmovmskps / vmovmskpd: sign bits to an integer, zero-extended to ``out``."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        signs = (s[0].view(dt) < 0).astype(U64)
        value = (signs << np.arange(signs.shape[-1], dtype=U64)).sum(axis=-1, dtype=U64)
        return value[..., None].view(U8)[..., :out]
    return Op(fn)


def _extract(dt: type) -> Op:
    """vpextrb/w/d/q: lane ``imm`` zero-extended into a GPR (or stored at its size)."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        lanes = s[0][..., :16].view(dt)
        value = lanes[..., (imm % lanes.shape[-1]):(imm % lanes.shape[-1]) + 1]
        return resize([np.ascontiguousarray(value).view(U8)], None, out)
    return Op(fn)


def _insert(dt: type) -> Op:
    size = np.dtype(dt).itemsize

    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        res = np.array(s[0][..., :16])
        pos = (imm % (16 // size)) * size
        res[..., pos:pos + size] = s[1][..., :size]
        return res
    return Op(fn)


def _movss(size: int) -> Op:
    """vmovss / vmovsd: load/store forms move ``size`` bytes (zero-extended); the 3-operand register
    form merges the low element of src2 into src1."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        if len(s) == 1:
            return resize([s[0][..., :size]], None, out)
        res = np.array(s[0][..., :16])
        res[..., :size] = s[1][..., :size]
        return res
    return Op(fn)


def _movlhps(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    return np.concatenate([s[0][..., :8], s[1][..., :8]], axis=-1)


def _movhlps(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    return np.concatenate([s[1][..., 8:16], s[0][..., 8:16]], axis=-1)


def _movshdup(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    d = s[0].view(U32)
    return np.repeat(d[..., 1::2], 2, axis=-1)


def _movsldup(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    d = s[0].view(U32)
    return np.repeat(d[..., 0::2], 2, axis=-1)


def _movddup(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    """vmovddup: the even qwords of the source, each twice (128: qw0 qw0; 256: qw0 qw0 qw2 qw2)."""
    d = s[0].view(U64)
    return np.repeat(d[..., 0:out // 8:2], 2, axis=-1)


def _permil(dt: type, control: Callable[[np.ndarray], np.ndarray],
            imm_select: Callable[[int, int], list[int]]) -> Op:
    """vpermilps / vpermilpd: elements picked within each 128-bit lane by an immediate
    (``imm_select(imm, per_lane)``, the same for every lane) or by a control vector (``control``
    maps each control element to its index)."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        data = _lanes(s[0]).view(dt)
        if imm is None:
            idx = control(_lanes(s[1]).view(dt)).astype(np.intp)
            return _flat(np.ascontiguousarray(np.take_along_axis(data, idx, axis=-1)).view(U8))
        n = data.shape[-1]
        if dt is U32:
            sel = imm_select(imm, n)
            return _flat(np.ascontiguousarray(data[..., sel]).view(U8))
        sel = np.array([[(imm >> (lane * n + i)) & 1 for i in range(n)]
                        for lane in range(data.shape[-2])])
        picked = np.take_along_axis(data, np.broadcast_to(sel, data.shape), axis=-1)
        return _flat(np.ascontiguousarray(picked).view(U8))
    return Op(fn)


def _ptest(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    """vptest: ZF = (a & b) == 0, CF = (~a & b) == 0; returns RFLAGS arithmetic bits (uint64)."""
    a, b = s[0].view(U64), s[1].view(U64)
    zf = ((a & b) == 0).all(axis=-1)
    cf = ((~a & b) == 0).all(axis=-1)
    return (zf.astype(U64) << 6) | cf.astype(U64)


def _movlh(high: bool) -> Op:
    """vmovlps/pd, vmovhps/pd: load ``xmm1, xmm2, m64`` puts m64 in the low (high) qword and keeps
    the other qword of xmm2; store ``m64, xmm1`` writes its low (high) qword."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        if len(s) == 1:
            return s[0][..., 8:16] if high else s[0][..., :8]
        keep = s[0][..., :8] if high else s[0][..., 8:16]
        parts = [keep, s[1][..., :8]] if high else [s[1][..., :8], keep]
        return np.concatenate(parts, axis=-1)
    return Op(fn)


def _shufpd(a: np.ndarray, b: np.ndarray, imm: int | None) -> np.ndarray:
    """Per 128-bit lane ``l``: qword imm[2l] of src1, qword imm[2l+1] of src2."""
    x, y = a.view(U64), b.view(U64)
    n = x.shape[-2]
    lo = np.array([(imm >> (2 * lane)) & 1 for lane in range(n)])
    hi = np.array([(imm >> (2 * lane + 1)) & 1 for lane in range(n)])
    first = np.take_along_axis(x, np.broadcast_to(lo[:, None], (*x.shape[:-1], 1)), axis=-1)
    second = np.take_along_axis(y, np.broadcast_to(hi[:, None], (*y.shape[:-1], 1)), axis=-1)
    return np.concatenate([first, second], axis=-1)


def _shufpd_op(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    res = _shufpd(_lanes(s[0]), _lanes(s[1]), imm)
    return _flat(np.ascontiguousarray(res).view(U8))


def _testp(dt: type) -> Op:
    """vtestps/pd: ZF = no element of src1 & src2 has its sign set, CF = none of ~src1 & src2."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        a, b = s[0].view(dt), s[1].view(dt)
        zf = ((a & b) >= 0).all(axis=-1)
        cf = ((~a & b) >= 0).all(axis=-1)
        return (zf.astype(U64) << 6) | cf.astype(U64)
    return Op(fn, writes_flags=True)


def _phminposuw(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    """The smallest unsigned word of the xmm source in word 0, its (first) index in bits 18:16."""
    w = s[0][..., :16].view(U16)
    res = np.zeros((*w.shape[:-1], 8), U16)
    res[..., 0] = w.min(axis=-1)
    res[..., 1] = w.argmin(axis=-1)
    return res


def _extractps(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    """vextractps r32/r64/m32, xmm, imm: dword imm[1:0], zero-extended."""
    d = s[0][..., :16].view(U32)[..., (imm & 3):(imm & 3) + 1]
    return resize([np.ascontiguousarray(d).view(U8)], None, out)


def _insertps(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    """vinsertps xmm1, xmm2, xmm3/m32, imm: dword imm[7:6] of a register source (the m32 itself
    for memory) into dword imm[5:4] of xmm2, then dwords set in imm[3:0] cleared."""
    res = np.array(s[0][..., :16]).view(U32)
    src = s[1].view(U32)
    value = src[..., 0] if src.shape[-1] == 1 else src[..., (imm >> 6) & 3]
    res[..., (imm >> 4) & 3] = value
    for i in range(4):
        if imm >> i & 1:
            res[..., i] = 0
    return res


def _mpsadbw(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    """vmpsadbw: per 128-bit lane (the upper lane uses imm[5:3]), eight sums of absolute
    differences of 4-byte groups: src1 bytes from offset imm[2]*4 + i, src2 block imm[1:0]*4."""
    a, b = _lanes(s[0]).astype(I16), _lanes(s[1]).astype(I16)
    parts = []
    for lane in range(a.shape[-2]):
        sel = imm >> (3 * lane)
        off1, off2 = (sel >> 2 & 1) * 4, (sel & 3) * 4
        blk = b[..., lane, off2:off2 + 4]
        rows = np.stack([a[..., lane, off1 + i:off1 + i + 4] for i in range(8)], axis=-2)
        parts.append(np.abs(rows - blk[..., None, :]).sum(axis=-1).astype(U16))
    return np.concatenate(parts, axis=-1)


# --- the table ------------------------------------------------------------------------------------

def _madd_wd(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    p = s[0].view(I16).astype(I64) * s[1].view(I16)
    return (p[..., 0::2] + p[..., 1::2]).astype(I32)


def _maddubs(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    p = s[0].view(U8).astype(I32) * s[1].view(I8)
    return _sat(p[..., 0::2] + p[..., 1::2], I16)


def _sad(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    d = np.abs(s[0].astype(I16) - s[1].astype(I16))
    sums = d.reshape(*d.shape[:-1], -1, 8).sum(axis=-1)
    return sums.astype(U64)


def _logic(f: Callable[[np.ndarray, np.ndarray], np.ndarray], ufunc: np.ufunc | None = None) -> Op:
    return ew(U64, f, ufunc)


def _build() -> dict[str, Op]:
    t: dict[str, Op] = {}
    for s, dt in _DT.items():
        udt = _UDT[s]
        t[f"vpadd{s}"] = ew(dt, np.add, np.add)
        t[f"vpsub{s}"] = ew(dt, np.subtract, np.subtract)
        t[f"vpcmpeq{s}"] = ew(dt, lambda a, b, dt=dt: _mask(a == b, dt))
        t[f"vpcmpgt{s}"] = ew(dt, lambda a, b, dt=dt: _mask(a > b, dt))
        if s != "q":
            t[f"vpmins{s}"] = ew(dt, np.minimum, np.minimum)
            t[f"vpmaxs{s}"] = ew(dt, np.maximum, np.maximum)
            t[f"vpminu{s}"] = ew(udt, np.minimum, np.minimum)
            t[f"vpmaxu{s}"] = ew(udt, np.maximum, np.maximum)
            t[f"vpabs{s}"] = ew1(dt, np.abs)
            t[f"vpsign{s}"] = ew(dt, _sign)
        if s in "bw":
            t[f"vpadds{s}"] = saturating(dt, np.add)
            t[f"vpsubs{s}"] = saturating(dt, np.subtract)
            t[f"vpaddus{s}"] = saturating(udt, np.add)
            t[f"vpsubus{s}"] = saturating(udt, np.subtract)
            t[f"vpavg{s}"] = ew(udt, lambda a, b, udt=udt: ((a.astype(I32) + b + 1) >> 1).astype(udt))
        if s in "wdq":
            t[f"vpsll{s}"] = shift("sll", dt)
            t[f"vpsrl{s}"] = shift("srl", dt)
        if s in "wd":
            t[f"vpsra{s}"] = shift("sra", dt)
        if s in "dq":
            t[f"vpsllv{s}"] = shift("sll", dt, variable=True)
            t[f"vpsrlv{s}"] = shift("srl", dt, variable=True)
    t["vpsravd"] = shift("sra", I32, variable=True)
    t["vpmullw"] = ew(I16, np.multiply, np.multiply)
    t["vpmulld"] = ew(I32, np.multiply, np.multiply)
    t["vpmulhw"] = ew(I16, _mulh(I16, I32))
    t["vpmulhuw"] = ew(U16, _mulh(U16, U32))
    t["vpmulhrsw"] = ew(I16, _mulhrs)
    t["vpmuldq"] = _mul_even(I32)
    t["vpmuludq"] = _mul_even(U32)
    t["vpmaddwd"] = Op(_madd_wd)
    t["vpmaddubsw"] = Op(_maddubs)
    t["vpsadbw"] = Op(_sad)
    for name in ("vpand", "vandps", "vandpd"):
        t[name] = _logic(np.bitwise_and, np.bitwise_and)
    for name in ("vpor", "vorps", "vorpd"):
        t[name] = _logic(np.bitwise_or, np.bitwise_or)
    for name in ("vpxor", "vxorps", "vxorpd"):
        t[name] = _logic(np.bitwise_xor, np.bitwise_xor)
    for name in ("vpandn", "vandnps", "vandnpd"):
        t[name] = _logic(lambda a, b: ~a & b)
    # per-lane shuffles
    for s, dt in (("bw", U8), ("wd", U16), ("dq", U32), ("qdq", U64)):
        t[f"vpunpckl{s}"] = inlane(_unpack(dt, False))
        t[f"vpunpckh{s}"] = inlane(_unpack(dt, True))
    t["vunpcklps"], t["vunpckhps"] = t["vpunpckldq"], t["vpunpckhdq"]
    t["vunpcklpd"], t["vunpckhpd"] = t["vpunpcklqdq"], t["vpunpckhqdq"]
    t["vpacksswb"] = inlane(_pack(I16, I8))
    t["vpackssdw"] = inlane(_pack(I32, I16))
    t["vpackuswb"] = inlane(_pack(I16, U8))
    t["vpackusdw"] = inlane(_pack(I32, U16))
    for s, dt in (("w", I16), ("d", I32)):
        t[f"vphadd{s}"] = inlane(_hop(dt, False, False))
        t[f"vphsub{s}"] = inlane(_hop(dt, True, False))
    t["vphaddsw"] = inlane(_hop(I16, False, True))
    t["vphsubsw"] = inlane(_hop(I16, True, True))
    t["vpshufb"] = inlane(_pshufb)
    t["vpalignr"] = inlane(_palignr)
    t["vpslldq"] = inlane(_byte_shift(True))
    t["vpsrldq"] = inlane(_byte_shift(False))
    t["vpshufd"] = inlane(_pshufd)
    t["vpermilps"] = _permil(U32, lambda c: c & 3, lambda imm, n: [(imm >> (2 * i)) & 3 for i in range(n)])
    t["vpermilpd"] = _permil(U64, lambda c: (c >> 1) & 1, lambda imm, n: [])
    t["vpshuflw"] = inlane(_pshufw(False))
    t["vpshufhw"] = inlane(_pshufw(True))
    t["vshufps"] = inlane(_shufps)
    t["vpblendw"] = _blend_imm(U16, per_lane=True)
    t["vpblendd"] = t["vblendps"] = _blend_imm(U32, per_lane=False)
    t["vblendpd"] = _blend_imm(U64, per_lane=False)
    t["vpblendvb"] = _blendv(I8)
    t["vblendvps"] = _blendv(I32)
    t["vblendvpd"] = _blendv(I64)
    # cross-lane
    t["vpermd"] = t["vpermps"] = Op(_permd)
    t["vpermq"] = t["vpermpd"] = Op(_permq)
    t["vperm2i128"] = t["vperm2f128"] = Op(_perm2x128)
    t["vextracti128"] = t["vextractf128"] = Op(_extract128)
    t["vinserti128"] = t["vinsertf128"] = Op(_insert128)
    for name, size in (("vpbroadcastb", 1), ("vpbroadcastw", 2), ("vpbroadcastd", 4),
                       ("vpbroadcastq", 8), ("vbroadcastss", 4), ("vbroadcastsd", 8),
                       ("vbroadcasti128", 16), ("vbroadcastf128", 16)):
        t[name] = _broadcast(size)
    for src, dsts in (("b", "wdq"), ("w", "dq"), ("d", "q")):
        for dst in dsts:
            t[f"vpmovsx{src}{dst}"] = _extend(src, dst, True)
            t[f"vpmovzx{src}{dst}"] = _extend(src, dst, False)
    t["vpmovmskb"] = _movemask(I8)
    t["vmovmskps"] = _movemask(I32)
    t["vmovmskpd"] = _movemask(I64)
    for name in ("vmovdqa", "vmovdqu", "vmovaps", "vmovups", "vmovapd", "vmovupd", "vlddqu",
                 "vmovntdq", "vmovntdqa", "vmovntps", "vmovntpd"):
        t[name] = Op(resize)
    t["vmovd"] = _movss(4)  # the low dword / qword, zero-extended to the destination
    t["vmovq"] = _movss(8)
    t["vmovss"] = _movss(4)
    t["vmovsd"] = _movss(8)
    for s, dt in (("b", U8), ("w", U16), ("d", U32), ("q", U64)):
        t[f"vpextr{s}"] = _extract(dt)
        t[f"vpinsr{s}"] = _insert(dt)
    t["vmovlhps"] = Op(_movlhps)
    t["vmovhlps"] = Op(_movhlps)
    t["vmovshdup"] = Op(_movshdup)
    t["vmovsldup"] = Op(_movsldup)
    t["vmovddup"] = Op(_movddup)
    t["vptest"] = Op(_ptest, writes_flags=True)
    t["vtestps"] = _testp(I32)
    t["vtestpd"] = _testp(I64)
    t["vmovlps"] = t["vmovlpd"] = _movlh(False)
    t["vmovhps"] = t["vmovhpd"] = _movlh(True)
    t["vshufpd"] = Op(_shufpd_op)
    t["vphminposuw"] = Op(_phminposuw)
    t["vextractps"] = Op(_extractps)
    t["vinsertps"] = Op(_insertps)
    t["vmpsadbw"] = Op(_mpsadbw)
    t.update(float_ops())
    return t


OPS: dict[str, Op] = _build()
"""Lower-case iced-x86 mnemonic -> semantics."""

ALIGNED_MOVES = frozenset({"vmovdqa", "vmovaps", "vmovapd", "vmovntdq", "vmovntdqa", "vmovntps",
                           "vmovntpd"})
"""Moves whose memory operand must be aligned to its size (#GP otherwise)."""

SPECIAL = frozenset({"vzeroupper", "vzeroall", "vpmaskmovd", "vpmaskmovq", "vmaskmovps",
                     "vmaskmovpd", "vldmxcsr", "vstmxcsr"})
"""Supported instructions executed by dedicated code in the executor (not a table entry)."""


def supported_mnemonics() -> frozenset[str]:
    return frozenset(OPS) | SPECIAL
