"""Semantics of the floating-point AVX, FMA and F16C instructions, with MXCSR behaviour.

Every op is ``fn(srcs, imm, out, env)`` (see :mod:`tsar.sim.x86.opdefs`; ``env`` is the guest's
:class:`~tsar.sim.x86.fpenv.FpEnv`). Arithmetic the host rounds correctly under the guest's RC, DAZ
and FTZ runs inside ``env.host`` (its exception flags are collected); compares, min/max,
conversions to integers, rounding, reciprocal estimates, double-precision FMA and half-precision
conversions compute their results and flags explicitly.

x86 rules reproduced: a NaN operand propagates quieted, the first source winning; invalid
operations give the negative "real indefinite" QNaN; out-of-range float -> integer conversions
give the "integer indefinite" (most negative integer) and raise IE; MAX/MIN return the second
source when either is NaN or both are zeros; DAZ turns denormal inputs into signed zeros (no DE);
tininess is detected after rounding.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import numpy as np

from tsar.sim.x86 import softfloat as sf
from tsar.sim.x86.fpenv import (
    IE,
    PE,
    RD,
    RN,
    RU,
    RZ,
    UE,
    FpEnv,
    default_nan,
    denormal_inputs,
    is_denormal,
    is_snan,
    quiet,
)
from tsar.sim.x86.opdefs import F32, F64, I32, I64, U8, U16, U32, U64, Op, flat, lanes

_UINT = {np.dtype(F32): U32, np.dtype(F64): U64}
_SOFT = {np.dtype(F32): sf.F32, np.dtype(F64): sf.F64}


def _size(dt: type) -> int:
    return np.dtype(dt).itemsize


def merge_low(upper: np.ndarray, low: np.ndarray) -> np.ndarray:
    """An xmm value: ``low``'s bytes in element 0, the rest of the 16 bytes from ``upper``."""
    res = np.array(upper[..., :16])
    b = np.ascontiguousarray(low).view(U8)
    res[..., :b.shape[-1]] = b
    return res


def _nan_first(*xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(any NaN, the first NaN operand quieted)`` lane-wise, operands in priority order."""
    nan = [np.isnan(x) for x in xs]
    pick = xs[-1]
    for x, n in zip(reversed(xs), reversed(nan), strict=True):
        pick = np.where(n, x, pick)
    anyn = nan[0]
    for n in nan[1:]:
        anyn = anyn | n
    return anyn, quiet(pick)


def _signal_snan(env: FpEnv, *xs: np.ndarray) -> None:
    if any(is_snan(x).any() for x in xs):
        env.signal(IE)


# --- arithmetic the host rounds ------------------------------------------------------------------

def _packed(dt: type, f: Callable[..., np.ndarray], n: int = 2) -> Op:
    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        return env.host(f, *(x.view(dt) for x in s[:n]))
    binary = n == 2 and isinstance(f, np.ufunc)
    return Op(fn, fp=True, ufunc=f if binary else None, dtype=dt if binary else None)


def _scalar(dt: type, f: Callable[..., np.ndarray], n: int = 2) -> Op:
    """``op xmm1, xmm2, xmm3/m``: element 0 = f(src2[0], src3[0]) (``n`` = 2) or f(src3[0])
    (``n`` = 1); the rest of the xmm from src2."""
    size = _size(dt)

    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        args = [x[..., :size].view(dt) for x in (s if n == 2 else s[1:])]
        return merge_low(s[0], env.host(f, *args))
    return Op(fn, fp=True)


def _horizontal(dt: type, sub: bool) -> Op:
    """vhaddps/pd, vhsubps/pd: per 128-bit lane, pairs of src1 then pairs of src2."""
    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        x = np.concatenate([lanes(s[0]).view(dt), lanes(s[1]).view(dt)], axis=-1)
        r = env.host(np.subtract if sub else np.add, x[..., 0::2], x[..., 1::2])
        return flat(np.ascontiguousarray(r).view(U8))
    return Op(fn, fp=True)


def _addsub(dt: type) -> Op:
    """vaddsubps/pd: even elements src1 - src2, odd elements src1 + src2."""
    def both(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        r = np.empty_like(a)
        np.subtract(a[..., 0::2], b[..., 0::2], out=r[..., 0::2])
        np.add(a[..., 1::2], b[..., 1::2], out=r[..., 1::2])
        return r

    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        return env.host(both, s[0].view(dt), s[1].view(dt))
    return Op(fn, fp=True)


def _dot(dt: type) -> Op:
    """vdpps / vdppd: per 128-bit lane, products selected by imm[7:4] (others +0), summed
    pairwise ((p0 + p1) + (p2 + p3)), the sum written where imm[3:0] selects (others +0)."""
    def kernel(a: np.ndarray, b: np.ndarray, take: np.ndarray) -> np.ndarray:
        zero = np.zeros((), a.dtype)
        p = np.where(take, a, zero) * np.where(take, b, zero)
        if p.shape[-1] == 4:
            return (p[..., 0] + p[..., 1]) + (p[..., 2] + p[..., 3])
        return p[..., 0] + p[..., 1]

    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        a, b = lanes(s[0]).view(dt), lanes(s[1]).view(dt)
        n = a.shape[-1]
        take = np.array([(imm >> (4 + i)) & 1 for i in range(n)], bool)
        put = np.array([(imm >> i) & 1 for i in range(n)], bool)
        total = env.host(kernel, a, b, take)
        res = np.where(put, total[..., None], np.zeros((), dt)).astype(dt)
        return flat(np.ascontiguousarray(res).view(U8))
    return Op(fn, fp=True)


# --- fused multiply-add --------------------------------------------------------------------------

def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray, env: FpEnv) -> np.ndarray:
    """Correctly rounded float32 ``a*b + c`` (one rounding) with the guest's MXCSR.

    The product is exact in float64 and the float64 sum rounds in the guest's mode; for directed
    modes rounding twice gives the once-rounded result. Under round-to-nearest the sum's rounding
    error ``e`` (TwoSum) decides the one case where rounding twice differs: the float64 sum lands
    exactly halfway between two float32s.
    """
    # numpy casts clear the host's exception flags: widen outside the capture (exact; the caller
    # signals IE and DE for the inputs), then one capture for the arithmetic, one for the narrowing
    a64, b64, c64 = a.astype(F64), b.astype(F64), c.astype(F64)

    def exact_sum() -> tuple[np.ndarray, np.ndarray]:
        p = a64 * b64
        return p, p + c64

    p, s = env.host(exact_sum)
    r = env.host(lambda x: x.astype(F32), s)
    with np.errstate(all="ignore"):
        s_rn = s if env.rc == RN else p + c64
        bv = s_rn - p
        e = (p - (s_rn - bv)) + (c64 - bv)  # the exact sum is s_rn + e
        # a float64 sum that was inexact but converts exactly: underflow is still due
        tiny = np.isfinite(s_rn) & (e != 0) & (np.abs(r) < np.finfo(F32).tiny)
        if tiny.any():
            env.signal(UE | PE)
            if env.ftz:
                r = np.where(tiny, np.copysign(np.zeros((), F32), s_rn).astype(F32), r)
        if env.rc != RN:
            return r
        d = s - r.astype(F64)
        toward = np.nextafter(r, np.where(d > 0, np.inf, -np.inf).astype(F32))
        mid = (r.astype(F64) + toward.astype(F64)) * 0.5
        fix = np.isfinite(r) & np.isfinite(s) & (d != 0) & (s == mid) & (e != 0) \
            & (np.sign(e) == np.sign(d))
    return np.where(fix, toward, r)


def _fma_soft(a: np.ndarray, b: np.ndarray, c: np.ndarray, env: FpEnv) -> np.ndarray:
    """Lane by lane exact FMA (:func:`tsar.sim.x86.softfloat.fma`): double precision."""
    fmt, udt = _SOFT[a.dtype], _UINT[a.dtype]
    ab, bb, cb = (np.broadcast_to(x, a.shape).view(udt).reshape(-1) for x in (a, b, c))
    out = np.empty(ab.shape, udt)
    flags = 0
    for i in range(ab.shape[0]):
        bits, f = sf.fma(int(ab[i]), int(bb[i]), int(cb[i]), fmt, env.rc, env.ftz)
        out[i] = bits
        flags |= f
    env.signal(flags)
    return out.view(a.dtype).reshape(a.shape)


def _negated(neg_addend: bool | str, c: np.ndarray) -> np.ndarray | bool:
    """Which lanes' addend the form negates."""
    if neg_addend in (True, False):
        return bool(neg_addend)
    return np.arange(c.shape[-1]) % 2 == (0 if neg_addend == "even" else 1)


def _fma(dt: type, order: str, neg_product: bool, neg_addend: bool | str, scalar: bool) -> Op:
    """vf[n]m{add,sub}{132,213,231}{ps,pd,ss,sd} and vfm{addsub,subadd}: operands (dst, src2,
    src3) -> a*b + c in the order the digits give. ``neg_addend`` ``"even"``/``"odd"``: the
    lanes whose addend is negated (addsub forms)."""
    pick = {"132": (0, 2, 1), "213": (1, 0, 2), "231": (1, 2, 0)}[order]
    size = _size(dt)

    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        ops = [(x[..., :size] if scalar else x).view(dt) for x in s]
        a, b, c = (ops[i] for i in pick)
        _signal_snan(env, a, b, c)
        if env.daz:
            a, b, c = denormal_inputs(env, a, b, c)
        else:
            with np.errstate(all="ignore"):
                zero_inf = (np.isinf(a) & (b == 0)) | (np.isinf(b) & (a == 0))
                inf_p = (np.isinf(a) | np.isinf(b)) & ~zero_inf
                sign_p = np.signbit(a) ^ np.signbit(b) ^ neg_product
                sign_c = np.signbit(c) ^ _negated(neg_addend, c)
                invalid = zero_inf | (inf_p & np.isinf(c) & (sign_p != sign_c))
            a, b, c = denormal_inputs(env, a, b, c, skip=invalid)
        if neg_product:
            a = -a
        flip = _negated(neg_addend, c)
        if flip is True:
            c = -c
        elif flip is not False:
            c = np.where(flip, -c, c)
        nan, first = _nan_first(*(ops[i] for i in pick))  # unnegated, in digit order
        with np.errstate(all="ignore"):
            finite_a, finite_b, finite_c = (np.where(nan, np.zeros((), dt), x) for x in (a, b, c))
        res = fma32(finite_a, finite_b, finite_c, env) if dt is F32 else \
            _fma_soft(finite_a, finite_b, finite_c, env)
        res = np.where(nan, first, res)
        return merge_low(s[0], res) if scalar else res
    return Op(fn, reads_dst=True, fp=True)


# --- explicit-flag operations --------------------------------------------------------------------

_TINY = {np.dtype(F32): np.finfo(F32).tiny, np.dtype(F64): np.finfo(F64).tiny}


def _clean(a: np.ndarray, b: np.ndarray) -> bool:
    """No lane of ``a`` or ``b`` is a NaN or a denormal (compares and MIN/MAX raise nothing)."""
    ab = np.abs(np.concatenate((a.reshape(-1), b.reshape(-1))))
    return bool(((ab >= _TINY[a.dtype]) | (ab == 0)).all())


def _minmax(dt: type, is_max: bool, scalar: bool) -> Op:
    """vmax/vmin: ``src1 if src1 > src2 (<) else src2``; IE for any NaN, DE for denormals."""
    size = _size(dt)

    tiny = float(_TINY[np.dtype(dt)])

    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        if scalar and s[0].ndim == 1:  # one element: Python floats, when neither is NaN/denormal
            x, y = float(s[0][:size].view(dt)[0]), float(s[1][:size].view(dt)[0])
            if x == x and y == y and not 0 < abs(x) < tiny and not 0 < abs(y) < tiny:
                res = np.array(s[0][:16])
                if not (x > y if is_max else x < y):
                    res[:size] = s[1][:size]
                return res
        a, b = ((x[..., :size] if scalar else x).view(dt) for x in s)
        if not _clean(a, b):
            if (np.isnan(a) | np.isnan(b)).any():
                env.signal(IE)
            a, b = denormal_inputs(env, a, b)
        r = np.where(a > b if is_max else a < b, a, b)
        return merge_low(s[0], r) if scalar else r
    return Op(fn, fp=True)


PREDICATES = (  # (relation, result when unordered, signalling) for imm & 15; bit 4 flips signalling
    ("eq", False, False), ("lt", False, True), ("le", False, True), ("false", True, False),
    ("ne", True, False), ("ge", True, True), ("gt", True, True), ("true", False, False),
    ("eq", True, False), ("lt", True, True), ("le", True, True), ("false", False, False),
    ("ne", False, False), ("ge", False, True), ("gt", False, True), ("true", True, False),
)
_RELATIONS = {"eq": np.equal, "lt": np.less, "le": np.less_equal, "ne": np.not_equal,
              "ge": np.greater_equal, "gt": np.greater,
              "false": lambda a, b: np.zeros(a.shape, bool), "true": lambda a, b: np.ones(a.shape, bool)}


def _compare_lanes(a: np.ndarray, b: np.ndarray, imm: int, env: FpEnv) -> np.ndarray:
    relation, unordered, signalling = PREDICATES[imm & 15]
    if _clean(a, b):
        return _RELATIONS[relation](a, b)
    signalling ^= bool(imm & 16)
    unord = np.isnan(a) | np.isnan(b)
    if unord.any() and (signalling or is_snan(a).any() or is_snan(b).any()):
        env.signal(IE)
    a, b = denormal_inputs(env, a, b)
    with np.errstate(all="ignore"):
        return np.where(unord, unordered, _RELATIONS[relation](a, b))


PY_RELATIONS = {"eq": operator.eq, "lt": operator.lt, "le": operator.le, "ne": operator.ne,
                "ge": operator.ge, "gt": operator.gt, "false": lambda a, b: False,
                "true": lambda a, b: True}
"""The relations of :data:`PREDICATES` on Python scalars (the ordered, non-NaN case)."""


def _cmp(dt: type, scalar: bool) -> Op:
    """vcmpps/pd/ss/sd with the 32 AVX predicates: all-ones lanes where true."""
    size, udt = _size(dt), _UINT[np.dtype(dt)]
    tiny = float(_TINY[np.dtype(dt)])
    ones = np.full(size, 0xFF, U8)

    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        if scalar and s[0].ndim == 1:  # one element: Python floats, when neither is NaN/denormal
            x, y = float(s[0][:size].view(dt)[0]), float(s[1][:size].view(dt)[0])
            if x == x and y == y and not 0 < abs(x) < tiny and not 0 < abs(y) < tiny:
                res = np.array(s[0][:16])
                res[:size] = ones if PY_RELATIONS[PREDICATES[imm & 15][0]](x, y) else 0
                return res
        a, b = ((x[..., :size] if scalar else x).view(dt) for x in s)
        mask = np.negative(_compare_lanes(a, b, imm & 31, env).astype(udt))
        return merge_low(s[0], mask) if scalar else mask
    return Op(fn, fp=True)


def _comi(dt: type, signalling: bool) -> Op:
    """vcomiss/sd (IE on any NaN), vucomiss/sd (IE on SNaN): ZF PF CF = 111 unordered, 000
    greater, 001 less, 100 equal; OF SF AF cleared. Returns the RFLAGS arithmetic bits."""
    size = _size(dt)

    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        a, b = (x[..., :size].view(dt)[..., 0] for x in s)
        unord = np.isnan(a) | np.isnan(b)
        if unord.any() and (signalling or is_snan(a).any() or is_snan(b).any()):
            env.signal(IE)
        a, b = denormal_inputs(env, a, b)
        with np.errstate(all="ignore"):
            zf = unord | (a == b)
            cf = unord | (a < b)
        return (zf.astype(U64) << 6) | (unord.astype(U64) << 2) | cf.astype(U64)
    return Op(fn, writes_flags=True, fp=True)


_ROUNDERS = {RN: np.rint, RD: np.floor, RU: np.ceil, RZ: np.trunc}


def _round_mode(x: np.ndarray, mode: int) -> np.ndarray:
    return _ROUNDERS[mode](x)


def to_int(x: np.ndarray, bits: int, mode: int, env: FpEnv) -> np.ndarray:
    """Float lanes -> signed ``bits``-bit integers rounded by ``mode`` (a RC value); NaN or out of
    range: the integer indefinite and IE; inexact: PE. DAZ applies (no DE)."""
    if env.daz:
        x = np.where(is_denormal(x), np.zeros((), x.dtype), x)
    x64 = x.astype(F64)
    r = _round_mode(x64, mode)
    idt = I32 if bits == 32 else I64
    ok = (r >= -(2.0 ** (bits - 1))) & (r < 2.0 ** (bits - 1))
    if ok.all():
        if (r != x64).any():
            env.signal(PE)
        return r.astype(idt)
    env.signal(IE)
    if (ok & (r != x64)).any():
        env.signal(PE)
    return np.where(ok, np.where(ok, r, 0).astype(idt), np.iinfo(idt).min).astype(idt)


def _cvt_to_int(dt: type, bits: int, truncate: bool, count: int | None = None) -> Op:
    """vcvt(t)ps2dq / vcvt(t)pd2dq (``count`` None: every source lane) and vcvt(t)ss2si /
    sd2si (``count`` 1, into a GPR of ``bits``)."""
    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        x = s[-1].view(dt)
        if count is not None:
            x = x[..., :count]
        r = to_int(x, bits or 8 * out, 3 if truncate else env.rc, env)
        return _resize(np.ascontiguousarray(r).view(U8), out)
    return Op(fn, fp=True)


def _resize(b: np.ndarray, out: int) -> np.ndarray:
    n = b.shape[-1]
    if n >= out:
        return b[..., :out]
    return np.concatenate([b, np.zeros((*b.shape[:-1], out - n), U8)], axis=-1)


def _convert(src: type, dst: type, host: bool = True) -> Op:
    """Packed conversions between formats (vcvtdq2ps, vcvtps2pd, vcvtpd2ps, vcvtdq2pd): the
    source's lanes that fit the destination (``out`` bytes), zero-filled beyond."""
    ratio_num, ratio_den = _size(src), _size(dst)

    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        x = s[0]
        n = min(x.shape[-1] // ratio_num, out // ratio_den)
        v = x[..., :n * ratio_num].view(src)
        r = env.host(lambda v: v.astype(dst), v) if host else v.astype(dst)
        return _resize(np.ascontiguousarray(r).view(U8), out)
    return Op(fn, fp=True)


def _cvt_scalar(src: type, dst: type) -> Op:
    """vcvtss2sd / vcvtsd2ss / vcvtsi2ss / vcvtsi2sd: element 0 of the destination converted from
    src3 (a float element or a 32/64-bit integer), the rest from src2."""
    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        x = s[1]  # an integer source has the operand's width (r/m32 or r/m64)
        v = x.view(I32 if x.shape[-1] == 4 else I64) if src is I32 else x[..., :_size(src)].view(src)
        return merge_low(s[0], env.host(lambda v: v.astype(dst), v[..., :1]))
    return Op(fn, fp=True)


def _round(dt: type, scalar: bool) -> Op:
    """vroundps/pd/ss/sd: imm[1:0] rounding (imm[2] set: MXCSR.RC), imm[3] suppresses PE."""
    size = _size(dt)

    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        x = (s[1][..., :size] if scalar else s[0]).view(dt)
        _signal_snan(env, x)
        if env.daz:
            x = np.where(is_denormal(x), np.copysign(np.zeros((), dt), x), x)
        r = _round_mode(x, env.rc if imm & 4 else imm & 3)
        with np.errstate(all="ignore"):
            if not imm & 8 and (np.isfinite(x) & (r != x)).any():
                env.signal(PE)
        r = np.where(np.isnan(x), quiet(x), r).astype(dt)
        return merge_low(s[0], r) if scalar else r
    return Op(fn, fp=True)


def _estimate(rsqrt: bool, scalar: bool) -> Op:
    """vrcpps/ss, vrsqrtps/ss. The architecture bounds the relative error by 1.5 * 2**-12 and
    leaves the bits to the implementation; the simulator returns the correctly rounded float32
    of 1/x (1/sqrt(x)), which lies within the bound. Denormal inputs count as zero, results
    below the normal range flush to zero, no exception flags."""
    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        x = (s[1][..., :4] if scalar else s[0]).view(F32)
        x = np.where(is_denormal(x), np.copysign(np.zeros((), F32), x), x)
        with np.errstate(all="ignore"):
            x64 = x.astype(F64)
            r = (1.0 / np.sqrt(x64) if rsqrt else 1.0 / x64).astype(F32)
            r = np.where(np.abs(r) < np.finfo(F32).tiny, np.copysign(np.zeros((), F32), r), r)
            if rsqrt:
                r = np.where((x < 0), default_nan(F32), r)
        r = np.where(np.isnan(x), quiet(x), r).astype(F32)
        return merge_low(s[0], r) if scalar else r
    return Op(fn, fp=True)


# --- half precision ---------------------------------------------------------------------------------

def _ph2ps(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
    """vcvtph2ps: exact widening; a NaN keeps its payload, quieted (IE for a signalling one)."""
    h = s[0][..., :out // 2].view(np.uint16)
    r = h.view(np.float16).astype(F32)
    nan = (h & 0x7C00) == 0x7C00
    nan &= (h & 0x3FF) != 0
    if (nan & ((h & 0x200) == 0)).any():
        env.signal(IE)
    payload = ((h.astype(U32) & 0x8000) << 16) | 0x7FC00000 | ((h.astype(U32) & 0x3FF) << 13)
    return np.where(nan, payload.view(F32), r)


def _ps2ph(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
    """vcvtps2ph: imm[1:0] rounding (imm[2] set: MXCSR.RC); DAZ applies, FTZ does not."""
    x = s[0].view(F32)
    _signal_snan(env, x)
    (x,) = denormal_inputs(env, x)
    mode = env.rc if imm & 4 else imm & 3
    bits = x.view(U32).reshape(-1)
    res = np.empty(bits.shape, U16)
    flags = 0
    for i, b in enumerate(bits):
        b = int(b)
        if (b & 0x7F800000) == 0x7F800000 and b & 0x7FFFFF:
            res[i] = ((b >> 16) & 0x8000) | 0x7E00 | ((b >> 13) & 0x3FF)
            continue
        h, f = sf.convert(b, sf.F32, sf.F16, mode)
        res[i] = h
        flags |= f
    env.signal(flags)
    return _resize(res.reshape(x.shape).view(U8), out)


# --- the table -----------------------------------------------------------------------------------------

def float_ops() -> dict[str, Op]:
    """Lower-case iced-x86 mnemonic -> semantics, for every floating-point instruction."""
    t: dict[str, Op] = {}
    for p, dt in (("s", F32), ("d", F64)):
        for name, f in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                        ("div", np.divide)):
            t[f"v{name}p{p}"] = _packed(dt, f)
            t[f"v{name}s{p}"] = _scalar(dt, f)
        t[f"vsqrtp{p}"] = _packed(dt, np.sqrt, 1)
        t[f"vsqrts{p}"] = _scalar(dt, np.sqrt, 1)
        for name, is_max in (("max", True), ("min", False)):
            t[f"v{name}p{p}"] = _minmax(dt, is_max, False)
            t[f"v{name}s{p}"] = _minmax(dt, is_max, True)
        t[f"vcmpp{p}"] = _cmp(dt, False)
        t[f"vcmps{p}"] = _cmp(dt, True)
        t[f"vcomis{p}"] = _comi(dt, True)
        t[f"vucomis{p}"] = _comi(dt, False)
        t[f"vhaddp{p}"] = _horizontal(dt, False)
        t[f"vhsubp{p}"] = _horizontal(dt, True)
        t[f"vaddsubp{p}"] = _addsub(dt)
        t[f"vdpp{p}"] = _dot(dt)
        t[f"vroundp{p}"] = _round(dt, False)
        t[f"vrounds{p}"] = _round(dt, True)
        t[f"vcvtts{p}2si"] = _cvt_to_int(dt, 0, True, 1)
        t[f"vcvts{p}2si"] = _cvt_to_int(dt, 0, False, 1)
        for order in ("132", "213", "231"):
            for form, neg_p, neg_c in (("fmadd", False, False), ("fmsub", False, True),
                                       ("fnmadd", True, False), ("fnmsub", True, True)):
                t[f"v{form}{order}p{p}"] = _fma(dt, order, neg_p, neg_c, False)
                t[f"v{form}{order}s{p}"] = _fma(dt, order, neg_p, neg_c, True)
            t[f"vfmaddsub{order}p{p}"] = _fma(dt, order, False, "even", False)
            t[f"vfmsubadd{order}p{p}"] = _fma(dt, order, False, "odd", False)
    t["vcvtps2dq"] = _cvt_to_int(F32, 32, False)
    t["vcvttps2dq"] = _cvt_to_int(F32, 32, True)
    t["vcvtpd2dq"] = _cvt_to_int(F64, 32, False)
    t["vcvttpd2dq"] = _cvt_to_int(F64, 32, True)
    t["vcvtdq2ps"] = _convert(I32, F32)
    t["vcvtdq2pd"] = _convert(I32, F64, host=False)
    t["vcvtps2pd"] = _convert(F32, F64)
    t["vcvtpd2ps"] = _convert(F64, F32)
    t["vcvtss2sd"] = _cvt_scalar(F32, F64)
    t["vcvtsd2ss"] = _cvt_scalar(F64, F32)
    t["vcvtsi2ss"] = _cvt_scalar(I32, F32)
    t["vcvtsi2sd"] = _cvt_scalar(I32, F64)
    t["vrcpps"] = _estimate(False, False)
    t["vrcpss"] = _estimate(False, True)
    t["vrsqrtps"] = _estimate(True, False)
    t["vrsqrtss"] = _estimate(True, True)
    t["vcvtph2ps"] = Op(_ph2ps, fp=True)
    t["vcvtps2ph"] = Op(_ps2ph, fp=True)
    return t


APPROXIMATE = frozenset({"vrcpps", "vrcpss", "vrsqrtps", "vrsqrtss"})
"""Instructions whose results the architecture defines only within an error bound."""
