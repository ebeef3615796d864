"""Semantics of the EVEX-only (AVX-512) instructions, as batched numpy functions in the shape of
:mod:`tsar.sim.x86.vecops` (``fn(srcs, imm, out)``; see :class:`~tsar.sim.x86.opdefs.Op` for the
``to_mask`` and ``uses_mask`` variants), and the facts the EVEX executor needs per mnemonic:
:data:`ALIASES` (EVEX names of VEX semantics) and :func:`mask_element_bytes`.

A VEX instruction that also has EVEX forms (``vpaddd``, ``vpshufb``, ``vfmadd231ps``...) keeps its
:mod:`~tsar.sim.x86.vecops` semantics, which hold at any vector length; this table holds what
differs or is new at 512 bits. Opmask sources arrive as 8 little-endian bytes.
"""

from __future__ import annotations

from collections.abc import Callable

import iced_x86 as iced
import numpy as np

from tsar.sim.x86.evexfp import fp_ops
from tsar.sim.x86.evexint import int_ops
from tsar.sim.x86.opdefs import I8, I16, I32, I64, U8, U16, U32, U64, Op, lanes
from tsar.sim.x86.vecops import OPS, ew, ew1, resize, shift

_DT = {"b": I8, "w": I16, "d": I32, "q": I64}
_UDT = {"b": U8, "w": U16, "d": U32, "q": U64}
_SIZE = {"b": 1, "w": 2, "d": 4, "q": 8}

ALIASES: dict[str, str] = {
    **{f"vmovdqu{b}": "vmovdqu" for b in (8, 16, 32, 64)},
    **{f"vmovdqa{b}": "vmovdqa" for b in (32, 64)},
    **{f"vp{op}{s}": f"vp{op}" for op in ("and", "andn", "or", "xor") for s in "dq"},
    "vbroadcasti32x4": "vbroadcasti128", "vbroadcastf32x4": "vbroadcastf128",
    "vbroadcasti64x2": "vbroadcasti128", "vbroadcastf64x2": "vbroadcastf128",
}
"""EVEX mnemonic -> the VEX mnemonic whose semantics it has (the element size, which only the
write mask sees, is the EVEX name's)."""


# --- the write mask's element -------------------------------------------------------------------

_CVT_TARGET = {"ps": 4, "pd": 8, "dq": 4, "qq": 8, "udq": 4, "uqq": 8, "ph": 2, "bf16": 2,
               "ss": 4, "sd": 8}
_ELEMENT_BY_NAME = {"vpmaddwd": 4, "vpmaddubsw": 2, "vpacksswb": 1, "vpackuswb": 1, "vpackssdw": 2,
                    "vpackusdw": 2, "vdbpsadbw": 2, "vpmultishiftqb": 1, "vgf2p8affineqb": 1,
                    "vgf2p8affineinvqb": 1, "vgf2p8mulb": 1, "vpshufbitqmb": 1, "vdpbf16ps": 4,
                    "vpdpbusd": 4, "vpdpbusds": 4, "vpdpwssd": 4, "vpdpwssds": 4, "vmovddup": 8,
                    "vpmadd52luq": 8, "vpmadd52huq": 8}
_SUFFIX = (("ps", 4), ("pd", 8), ("ss", 4), ("sd", 8), ("b", 1), ("w", 2), ("d", 4), ("q", 8))


def mask_element_bytes(name: str, info: iced.OpCodeInfo, dst_size: int) -> int:
    """Bytes of the destination element one write-mask bit covers, for EVEX mnemonic ``name``
    (before :data:`ALIASES`): the destination's element type, which is the memory operand's
    except for width-changing instructions."""
    if name in _ELEMENT_BY_NAME:
        return _ELEMENT_BY_NAME[name]
    if name.startswith(("vpmovzx", "vpmovsx")):
        return _SIZE[name[-1]]
    if name.startswith("vpmov") and name[-2] in "bwdq" and name[-1] in "bwdq":  # narrowing
        return _SIZE[name[-1]]
    if name.startswith("vcvt") and "2" in name:
        target = name.rsplit("2", 1)[1]
        if target in _CVT_TARGET:
            return _CVT_TARGET[target]
    for kind in ("32x", "64x"):
        if kind in name:
            return 4 if kind == "32x" else 8
    if info.can_broadcast:
        return iced.MemorySizeExt.element_size(info.broadcast_memory_size)
    ms = info.memory_size
    if ms != iced.MemorySize.UNKNOWN and iced.MemorySizeExt.is_packed(ms):
        return iced.MemorySizeExt.element_size(ms)
    for suffix, size in _SUFFIX:
        if name.endswith(suffix):
            return size
    return 1


_CVT_SOURCE = {"ps": 4, "pd": 8, "dq": 4, "qq": 8, "udq": 4, "uqq": 8, "ph": 2}


def result_elements(name: str, dst_elements: int, source_bytes: int) -> int:
    """Destination elements an instruction computes (and its write mask covers): all of the
    destination's, except for a narrowing one (``vpmovqb``, ``vcvtpd2ps xmm, xmm``...), which
    computes one per source element and zeroes the rest."""
    if name.startswith("vpmov") and name[-2] in "bwdq" and name[-1] in "bwdq" and \
            not name.startswith(("vpmovzx", "vpmovsx")):
        return min(dst_elements, source_bytes // _SIZE[name[-2]]) if source_bytes else dst_elements
    if name.startswith("vcvt") and "2" in name and source_bytes:
        source = name.rsplit("2", 1)[0].removeprefix("vcvtt").removeprefix("vcvtne").removeprefix("vcvt")
        if source in _CVT_SOURCE:
            return min(dst_elements, source_bytes // _CVT_SOURCE[source])
    return dst_elements


# --- families --------------------------------------------------------------------------------------

def _bits(x: np.ndarray, n: int) -> np.ndarray:
    """An opmask operand (8 bytes) as ``n`` bools, bit 0 first."""
    return np.unpackbits(np.ascontiguousarray(x).view(U8)[..., :8], axis=-1, bitorder="little")[..., :n] \
        .astype(bool)


def _to_mask(op: Op, dt: type) -> Op:
    """A VEX compare (all-ones lanes where true) as an EVEX compare into an opmask register."""
    fn = op.fn
    if op.fp:
        return Op(lambda s, imm, out, env: fn(s, imm, 16 if out < 16 else out, env).view(dt) != 0,
                  fp=True, to_mask=True)
    return Op(lambda s, imm, out: fn(s, imm, out).view(dt) != 0, to_mask=True)


_PREDICATES = (np.equal, np.less, np.less_equal, lambda a, b: np.zeros(a.shape, bool),
               np.not_equal, np.greater_equal, np.greater, lambda a, b: np.ones(a.shape, bool))
"""vpcmp / vpcmpu predicates 0..7: eq, lt, le, false, ne, nlt (ge), nle (gt), true."""


def _pcmp(dt: type) -> Op:
    return Op(lambda s, imm, out: _PREDICATES[imm & 7](s[0].view(dt), s[1].view(dt)), to_mask=True)


def _ptestm(dt: type, negate: bool) -> Op:
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        nonzero = (s[0].view(dt) & s[1].view(dt)) != 0
        return ~nonzero if negate else nonzero
    return Op(fn, to_mask=True)


def _movm2v(dt: type) -> Op:
    """vpmovm2b/w/d/q: each element all ones where its mask bit is set."""
    size = np.dtype(dt).itemsize

    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        return np.negative(_bits(s[0], out // size).astype(dt))
    return Op(fn)


def _movv2m(dt: type) -> Op:
    """vpmovb2m/w2m/d2m/q2m: the elements' sign bits."""
    return Op(lambda s, imm, out: s[0].view(dt) < 0, to_mask=True)


def _ternlog(dt: type) -> Op:
    """vpternlogd/q: each result bit is bit ``(a << 2) | (b << 1) | c`` of the immediate."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        a, b, c = (x.view(U64) for x in s)
        res = np.zeros_like(a)
        for i in range(8):
            if imm >> i & 1:
                res |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
        return res
    return Op(fn, reads_dst=True)


def _perm(dt: type) -> Op:
    """vpermb/w/d/q, vpermps/pd: ``dst[i] = table[index[i] mod n]`` (variable: src1 holds the
    indices, src2 the table); vpermq/pd with an immediate permute each 256-bit half by the same
    four 2-bit fields."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        if imm is not None:
            x = s[0].view(dt)
            halves = x.reshape(*x.shape[:-1], -1, 4)
            picked = halves[..., [(imm >> (2 * i)) & 3 for i in range(4)]]
            return np.ascontiguousarray(picked).reshape(x.shape)
        idx, table = s[0].view(dt), s[1].view(dt)
        n = table.shape[-1]
        return np.take_along_axis(table, (idx.astype(np.int64) & (n - 1)).astype(np.intp), axis=-1)
    return Op(fn)


def _perm2(dt: type, index_first: bool) -> Op:
    """vpermi2* (the destination holds the indices) / vpermt2* (the destination is the first
    table): two tables concatenated, indexed mod 2n."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        if index_first:
            idx, t1, t2 = (x.view(dt) for x in s)
        else:
            t1, idx, t2 = (x.view(dt) for x in s)
        n = t1.shape[-1]
        table = np.concatenate([t1, t2], axis=-1)
        return np.take_along_axis(table, (idx.astype(np.int64) & (2 * n - 1)).astype(np.intp), axis=-1)
    return Op(fn, reads_dst=True)


def _align(dt: type) -> Op:
    """valignd/q: (src1:src2) shifted right by ``imm`` elements (mod the element count)."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        a, b = s[0].view(dt), s[1].view(dt)
        n = a.shape[-1]
        both = np.concatenate([b, a], axis=-1)
        k = imm & (n - 1)
        return both[..., k:k + n]
    return Op(fn)


def _shuf128(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    """vshuff32x4/64x2, vshufi32x4/64x2: 128-bit blocks, the low half of the result from src1,
    the high half from src2, picked by 2-bit (1-bit for 256-bit) immediate fields."""
    a, b = lanes(s[0]), lanes(s[1])
    n = a.shape[-2]
    bits, mask = (2, 3) if n == 4 else (1, 1)
    picks = [(a if i < n // 2 else b)[..., (imm >> (bits * i)) & mask, :] for i in range(n)]
    return np.concatenate(picks, axis=-1)


def _extract(block: int) -> Op:
    """vextract{i,f}{32x4,64x2,32x8,64x4}: block ``imm`` of ``block`` bytes."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        x = s[0]
        count = x.shape[-1] // block
        i = imm % count
        return x[..., i * block:(i + 1) * block]
    return Op(fn)


def _insert(block: int) -> Op:
    """vinsert{i,f}{32x4,64x2,32x8,64x4}: src1 with block ``imm`` replaced by src2."""
    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        res = np.array(s[0])
        count = res.shape[-1] // block
        i = imm % count
        res[..., i * block:(i + 1) * block] = s[1][..., :block]
        return res
    return Op(fn)


def _broadcast(block: int) -> Op:
    return Op(lambda s, imm, out: np.tile(s[0][..., :block], out // block))


def _rotate(dt: type, left: bool, variable: bool) -> Op:
    """vprold/q, vprord/q (immediate count), vprolvd/q, vprorvd/q (a count per element)."""
    bits = np.dtype(dt).itemsize * 8
    udt = U32 if bits == 32 else U64

    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        a = s[0].view(udt)
        count = (s[1].view(udt) if variable else udt(imm)) % udt(bits)
        if not left:
            count = (udt(bits) - count) % udt(bits)
        return (a << count) | (a >> ((udt(bits) - count) % udt(bits)))
    return Op(fn)


def _blendm(s: list[np.ndarray], imm: int | None, out: int, mask: np.ndarray, zeroing: bool,
            dt: type = U8) -> np.ndarray:
    a, b = s[0].view(dt), s[1].view(dt)
    return np.where(mask, b, 0 if zeroing else a).astype(dt)


def _blend_op(dt: type) -> Op:
    return Op(lambda s, imm, out, m, z: _blendm(s, imm, out, m, z, dt), uses_mask=True)


def _dot(t1: type, t2: type, saturate: bool) -> Op:
    """vpdpbusd(s) (``t1`` u8, ``t2`` s8: four products per dword) and vpdpwssd(s) (s16 x s16:
    two): dword += the sum of its products, wrapping or signed-saturated."""
    per = 4 // np.dtype(t1).itemsize

    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        acc = s[0].view(I32).astype(I64)
        a = s[1].view(t1).astype(I64).reshape(*acc.shape, per)
        b = s[2].view(t2).astype(I64).reshape(*acc.shape, per)
        res = acc + (a * b).sum(axis=-1)
        return np.clip(res, -2**31, 2**31 - 1).astype(I32) if saturate else res.astype(I32)
    return Op(fn, reads_dst=True)


def vnni_ops() -> dict[str, Op]:
    """VNNI dot products (EVEX AVX512_VNNI and VEX AVX-VNNI share them)."""
    return {"vpdpbusd": _dot(U8, I8, False), "vpdpbusds": _dot(U8, I8, True),
            "vpdpwssd": _dot(I16, I16, False), "vpdpwssds": _dot(I16, I16, True)}


def _narrow(src: str, dst: str, mode: str) -> Op:
    """vpmov{,s,us}<src><dst>: elements narrowed (truncated, signed- or unsigned-saturated), the
    result ``out`` bytes (zero-extended to a register's width)."""
    sdt, ddt = (_UDT if mode != "s" else _DT)[src], (_UDT if mode != "s" else _DT)[dst]

    def fn(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
        x = s[0].view(sdt)
        if mode == "":
            res = x.astype(ddt)
        else:
            info = np.iinfo(ddt)
            res = np.clip(x, info.min, info.max).astype(ddt)
        return resize([np.ascontiguousarray(res).view(U8)], None, out)
    return Op(fn)


def _min_max(dt: type, f: Callable) -> Op:
    return ew(dt, f, f)


def _build() -> dict[str, Op]:
    t: dict[str, Op] = {}
    for s, dt in _DT.items():
        udt = _UDT[s]
        t[f"vpcmpeq{s}"] = _to_mask(OPS[f"vpcmpeq{s}"], dt)
        t[f"vpcmpgt{s}"] = _to_mask(OPS[f"vpcmpgt{s}"], dt)
        t[f"vpcmp{s}"] = _pcmp(dt)
        t[f"vpcmpu{s}"] = _pcmp(udt)
        t[f"vptestm{s}"] = _ptestm(udt, False)
        t[f"vptestnm{s}"] = _ptestm(udt, True)
        t[f"vpmovm2{s}"] = _movm2v(dt)
        t[f"vpmov{s}2m"] = _movv2m(dt)
        t[f"vpblendm{s}"] = _blend_op(udt)
        t[f"vperm{s}"] = _perm(udt)
        t[f"vpermi2{s}"] = _perm2(udt, True)
        t[f"vpermt2{s}"] = _perm2(udt, False)
    for p, dt in (("s", U32), ("d", U64)):
        t[f"vcmpp{p}"] = _to_mask(OPS[f"vcmpp{p}"], dt)
        t[f"vcmps{p}"] = _to_mask(OPS[f"vcmps{p}"], dt)
        t[f"vblendmp{p}"] = _blend_op(dt)
        t[f"vpermi2p{p}"] = _perm2(dt, True)
        t[f"vpermt2p{p}"] = _perm2(dt, False)
    t["vpermps"] = _perm(U32)
    t["vpermpd"] = _perm(U64)
    t["vpternlogd"] = _ternlog(U32)
    t["vpternlogq"] = _ternlog(U64)
    t["valignd"] = _align(U32)
    t["valignq"] = _align(U64)
    for name in ("vshuff32x4", "vshuff64x2", "vshufi32x4", "vshufi64x2"):
        t[name] = Op(_shuf128)
    for kind in ("i", "f"):
        for elems, block in (("32x4", 16), ("64x2", 16), ("32x8", 32), ("64x4", 32)):
            t[f"vextract{kind}{elems}"] = _extract(block)
            t[f"vinsert{kind}{elems}"] = _insert(block)
        for elems, block in (("32x2", 8), ("32x8", 32), ("64x4", 32)):
            t[f"vbroadcast{kind}{elems}"] = _broadcast(block)
    t["vpsraq"] = shift("sra", I64)
    t["vpsravq"] = shift("sra", I64, variable=True)
    t["vpsravw"] = shift("sra", I16, variable=True)
    t["vpsllvw"] = shift("sll", I16, variable=True)
    t["vpsrlvw"] = shift("srl", I16, variable=True)
    for s, dt in (("d", I32), ("q", I64)):
        t[f"vprol{s}"] = _rotate(dt, True, False)
        t[f"vpror{s}"] = _rotate(dt, False, False)
        t[f"vprolv{s}"] = _rotate(dt, True, True)
        t[f"vprorv{s}"] = _rotate(dt, False, True)
    t["vpabsq"] = ew1(I64, np.abs)
    t["vpmaxsq"] = _min_max(I64, np.maximum)
    t["vpminsq"] = _min_max(I64, np.minimum)
    t["vpmaxuq"] = _min_max(U64, np.maximum)
    t["vpminuq"] = _min_max(U64, np.minimum)
    t["vpmullq"] = ew(I64, np.multiply, np.multiply)
    for src, dsts in (("q", "bwd"), ("d", "bw"), ("w", "b")):
        for d in dsts:
            for mode in ("", "s", "us"):
                t[f"vpmov{mode}{src}{d}"] = _narrow(src, d, mode)
    t.update(fp_ops())
    t.update(int_ops())
    return t


EVEX_OPS: dict[str, Op] = _build()
"""Lower-case EVEX mnemonic -> semantics (only what :data:`~tsar.sim.x86.vecops.OPS` lacks or has
differently at 512 bits)."""
