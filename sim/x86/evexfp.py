"""Semantics of the AVX-512 floating-point instructions without a VEX twin (AVX512F/DQ/BF16), as
batched numpy functions in the shape of :mod:`tsar.sim.x86.vecops` (``fn(srcs, imm, out, env)``,
``fp=True``; see :class:`~tsar.sim.x86.opdefs.Op`).

Families (``ps``/``pd`` packed, ``ss``/``sd`` scalar: element 0 computed from the last source(s),
bits 127:element from the first vector source):

* exponent and mantissa extraction (``vgetexp``, ``vgetmant``), rounding to ``2**-M`` multiples
  (``vrndscale``) and the remainder (``vreduce``), ``vrange``, ``vscalef``, ``vfixupimm``, and
  ``vfpclass`` (an opmask bit per element);
* conversions between floats and unsigned or 64-bit integers (packed and to/from GPRs);
* BF16: ``vcvtne2ps2bf16``, ``vcvtneps2bf16``, ``vdpbf16ps``, which ignore the MXCSR (round to
  nearest even, denormal inputs as zero, tiny results flushed to zero, no flags) and so are
  integer-style ops (``fp=False``);
* the reciprocal estimates ``vrcp14`` and ``vrsqrt14`` (see :func:`_estimate14`).

Every operation honours the guest's DAZ, rounding control and FTZ where the instruction does, and
signals its exception flags through ``env`` (:class:`~tsar.sim.x86.fpenv.FpEnv`): explicitly for
results computed exactly, through ``env.host`` for the one rounding step of arithmetic results.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tsar.sim.x86.fpenv import (
    DAZ,
    FTZ,
    IE,
    MASKS,
    PE,
    RC_MASK,
    RC_SHIFT,
    RD,
    RN,
    RU,
    RZ,
    ZE,
    FpEnv,
    default_nan,
    denormal_inputs,
    is_denormal,
    is_snan,
    quiet,
)
from tsar.sim.x86.fpops import fma32, merge_low, to_int
from tsar.sim.x86.opdefs import F32, F64, I64, U8, U16, U32, U64, Op
from tsar.sim.x86.vecops import resize

Kernel = Callable[[list[np.ndarray], int, FpEnv], np.ndarray]
"""``kernel(lanes, imm, env)``: float lanes of each source (same shape) -> result lanes."""

_UINT = {np.dtype(F32): U32, np.dtype(F64): U64}
_FRAC = {np.dtype(F32): 23, np.dtype(F64): 52}
_ROUNDERS = {RN: np.rint, RD: np.floor, RU: np.ceil, RZ: np.trunc}


def _size(dt: type) -> int:
    return np.dtype(dt).itemsize


def _signal_snan(env: FpEnv, *xs: np.ndarray) -> None:
    if any(is_snan(x).any() for x in xs):
        env.signal(IE)


def _const(dt: type, value: float) -> np.ndarray:
    return np.array(value, dt)


def _lanewise(kernel: Kernel, dt: type, n_in: int, scalar: bool, reads_dst: bool = False) -> Op:
    """An op applying ``kernel`` to the last ``n_in`` sources viewed as ``dt`` lanes. Scalar forms:
    element 0 of each, the result merged into the first vector source (``srcs[1]`` when the
    destination's old value comes first)."""
    size = _size(dt)

    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        imm = imm or 0
        if scalar:
            r = kernel([x[..., :size].view(dt) for x in s[-n_in:]], imm, env)
            return merge_low(s[1] if reads_dst else s[0], r)
        return kernel([x.view(dt) for x in s[-n_in:]], imm, env)
    return Op(fn, reads_dst=reads_dst, fp=True)


# --- vgetexp / vgetmant ------------------------------------------------------------------------

def _getexp(xs: list[np.ndarray], imm: int, env: FpEnv) -> np.ndarray:
    """floor(log2|x|) as a float: -inf for zeros, +inf for infinities; DE for denormals (DAZ:
    they count as zero)."""
    x = xs[0]
    _signal_snan(env, x)
    (x,) = denormal_inputs(env, x)
    with np.errstate(all="ignore"):
        _, e = np.frexp(x)
        r = (e - 1).astype(x.dtype)
        r = np.where(x == 0, _const(x.dtype, -np.inf), r)
        r = np.where(np.isinf(x), _const(x.dtype, np.inf), r)
    return np.where(np.isnan(x), quiet(x), r)


def _getmant(xs: list[np.ndarray], imm: int, env: FpEnv) -> np.ndarray:
    """The significand normalised to the interval imm[1:0] ([1,2), [1/2,2) keeping the exponent
    even, [1/2,1), [3/4,3/2)); zeros and infinities give 1.0. Sign: positive when imm[2] is set,
    else the source's; imm[3] set: a negative non-zero source (-inf too) is invalid (default NaN,
    IE, no DE). Denormals raise DE (DAZ: they count as zeros, -0 included)."""
    x = xs[0]
    interval, sc = imm & 3, (imm >> 2) & 3
    nan = np.isnan(x)
    _signal_snan(env, x)
    neg = np.signbit(x) & ~nan
    invalid = neg & (x != 0) if sc & 2 else np.zeros(x.shape, bool)
    (x,) = denormal_inputs(env, x, skip=invalid)
    if sc & 2:
        invalid = neg & (x != 0)
        if invalid.any():
            env.signal(IE)
    with np.errstate(all="ignore"):
        m, e = np.frexp(np.abs(x))  # |x| = m * 2**e, m in [1/2, 1)
        one = m + m
        if interval == 0:
            r = one
        elif interval == 1:
            r = np.where((e - 1) & 1, m, one)
        elif interval == 2:
            r = m
        else:
            r = np.where(one >= 1.5, m, one)
        r = np.where((x == 0) | np.isinf(x), _const(x.dtype, 1.0), r).astype(x.dtype)
    if not sc & 1:
        r = np.where(neg, -r, r)
    r = np.where(invalid, default_nan(x.dtype), r)
    return np.where(nan, quiet(x), r)


# --- vrndscale / vreduce ------------------------------------------------------------------------

def _round_scaled(x: np.ndarray, m: int, mode: int) -> np.ndarray:
    """``2**-m * round(2**m * x)`` (``mode`` an RC value), exact, for finite ``x``; other lanes
    unchanged."""
    big = 2.0 ** _FRAC[x.dtype]
    wide = x.astype(F64)
    with np.errstate(all="ignore"):
        scale = 2.0 ** m
        y = _ROUNDERS[mode](wide * scale) / scale
        y = np.where(np.isfinite(wide) & (np.abs(wide) < big), y, wide)
    return y.astype(x.dtype)


def _mode(imm: int, env: FpEnv) -> int:
    return env.rc if imm & 4 else imm & 3


def _rndscale(xs: list[np.ndarray], imm: int, env: FpEnv) -> np.ndarray:
    """x rounded to a multiple of 2**-imm[7:4] in mode imm[1:0] (imm[2]: MXCSR.RC); imm[3]
    suppresses PE. DAZ applies; no DE."""
    x = xs[0]
    _signal_snan(env, x)
    if env.daz:
        x = np.where(is_denormal(x), np.copysign(np.zeros((), x.dtype), x), x)
    y = _round_scaled(x, imm >> 4, _mode(imm, env))
    if not imm & 8:
        with np.errstate(invalid="ignore"):
            if (np.isfinite(x) & (y != x)).any():
                env.signal(PE)
    return np.where(np.isnan(x), quiet(x), y)


def _with_rc(env: FpEnv, mode: int, f: Callable[..., np.ndarray], *args: np.ndarray) -> np.ndarray:
    """``env.host(f, *args)`` under rounding mode ``mode`` instead of the MXCSR's."""
    saved = env.mxcsr
    env.mxcsr = (saved & ~RC_MASK) | (mode << RC_SHIFT)
    try:
        return env.host(f, *args)
    finally:
        env.mxcsr = saved


def _reduce(xs: list[np.ndarray], imm: int, env: FpEnv) -> np.ndarray:
    """x - 2**-M * round(2**M * x) (M = imm[7:4], rounding as :func:`_rndscale`), the subtraction
    rounded in the same mode (IEEE signed zeros: -0 only when rounding down). Infinities give +0.
    Flags: IE for SNaN, PE when the result is inexact (imm[3] suppresses it); DAZ applies, no DE;
    a tiny result (necessarily exact: x itself) is flushed to zero by FTZ with PE but no UE."""
    x = xs[0]
    dt = x.dtype
    nan, inf = np.isnan(x), np.isinf(x)
    _signal_snan(env, x)
    if env.daz:
        x = np.where(is_denormal(x), np.copysign(np.zeros((), dt), x), x)
    mode = _mode(imm, env)
    y = _round_scaled(x, imm >> 4, mode)
    zero = np.zeros((), dt)
    itself = (y == 0) & (x != 0)  # x - 0: x, exactly
    host = ~(nan | inf | itself)
    before = env.raised
    d = _with_rc(env, mode, np.subtract, np.where(host, x, zero), np.where(host, y, zero))
    env.raised = before | (env.raised & PE)
    d = np.where(itself, x, d)
    tiny = is_denormal(d)
    if env.ftz and tiny.any():
        d = np.where(tiny, np.copysign(zero, d), d)
        env.signal(PE)
    if imm & 8:
        env.raised = (env.raised & ~PE) | (before & PE)
    d = np.where(inf, zero, d)
    return np.where(nan, quiet(x), d)


# --- vrange ---------------------------------------------------------------------------------------

def _range(xs: list[np.ndarray], imm: int, env: FpEnv) -> np.ndarray:
    """imm[1:0]: min, max, min by magnitude, max by magnitude (ties: the smaller / larger signed
    value, -0 below +0); imm[3:2]: sign of src1, of the pick, cleared, set. A signalling NaN
    gives itself quieted (IE; src1 first, no sign control); a quiet NaN loses to a number (both
    quiet: src1)."""
    a, b = xs
    sa, sb = is_snan(a), is_snan(b)
    snan = sa | sb
    if snan.any():
        env.signal(IE)
    na, nb = np.isnan(a), np.isnan(b)
    src1, src2 = a, b
    a, b = denormal_inputs(env, a, b)  # DE only for lanes without a NaN
    a, b = np.where(na & ~nb, b, a), np.where(nb & ~na, a, b)
    op, sc = imm & 3, (imm >> 2) & 3
    with np.errstate(invalid="ignore"):
        ka, kb = (np.abs(a), np.abs(b)) if op & 2 else (a, b)
        a_small = np.where(ka == kb, _signed_le(a, b), ka < kb)
    take_a = a_small if not op & 1 else ~a_small
    r = np.where(take_a | (na & nb), a, b)
    if sc == 0:
        r = np.copysign(r, src1)
    elif sc == 2:
        r = np.abs(r)
    elif sc == 3:
        r = -np.abs(r)
    return np.where(snan, quiet(np.where(sa, src1, src2)), r)


def _signed_le(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a <= b`` with -0 < +0."""
    sa, sb = np.signbit(a), np.signbit(b)
    return np.where(a == b, sa | ~sb, a < b)


# --- vscalef --------------------------------------------------------------------------------------

def _scalef(xs: list[np.ndarray], imm: int, env: FpEnv) -> np.ndarray:
    """``a * 2**floor(b)`` rounded once (MXCSR RC, FTZ, OE/UE/PE). 0 * 2**+inf and
    inf * 2**-inf are invalid; other infinite or zero operands give exact results. A NaN src1
    wins over src2, except that a quiet NaN src1 with src2 = +inf (-inf) gives +inf (+0). DAZ
    applies to both; DE only for a denormal src1."""
    a, b = xs
    dt = a.dtype
    _signal_snan(env, a, b)
    nan = np.isnan(a) | np.isnan(b)
    pick = quiet(np.where(np.isnan(a), a, b))
    if env.daz:
        b = np.where(is_denormal(b), np.copysign(np.zeros((), dt), b), b)
    (a,) = denormal_inputs(env, a, skip=np.isnan(b))
    with np.errstate(all="ignore"):
        invalid = ~nan & ((np.isinf(a) & (b == -np.inf)) | ((a == 0) & (b == np.inf)))
        if invalid.any():
            env.signal(IE)
        exact = ~nan & ((a == 0) | np.isinf(a) | np.isinf(b))
        special = np.where(np.isinf(b), np.where(b > 0, a * _const(dt, np.inf), a * 0), a).astype(dt)
        ordinary = ~(nan | exact)
        sa = np.where(ordinary, a, _const(dt, 1.0))
        k = np.clip(np.floor(np.where(ordinary, b, 0)), -5000, 5000).astype(np.int64)
    if dt == np.dtype(F32):
        wide = sa.astype(F64) * np.ldexp(1.0, np.clip(k, -400, 400))
        r = env.host(lambda v: v.astype(F32), wide)
    else:
        f, e = np.frexp(sa)
        t = np.clip(e + k, -1200, 1100)
        c = np.where(t < 0, -1000, 100)
        r = env.host(np.multiply, f * np.ldexp(1.0, t - c), np.ldexp(1.0, c))
    r = np.where(ordinary, r, special)
    r = np.where(invalid, default_nan(dt), r)
    r = np.where(nan, pick, r)
    # silicon: a quiet NaN scaled by 2**+-inf gives +inf / +0
    quiet_inf = np.isnan(xs[0]) & ~is_snan(xs[0]) & np.isinf(b)
    return np.where(quiet_inf, np.where(b > 0, _const(dt, np.inf), _const(dt, 0.0)), r)


# --- vfixupimm ------------------------------------------------------------------------------------

def _fixup_constants(dt: type) -> np.ndarray:
    """Responses 0x3..0xF of the token table that do not depend on the source (0x3 and 0x6 are
    placeholders)."""
    f = np.finfo(dt)
    half_pi = np.array(np.pi / 2, dt)
    return np.array([np.nan, -np.inf, np.inf, np.nan, -0.0, 0.0, -1.0, 1.0, 0.5, 90.0, half_pi,
                     f.max, -f.max], dt)


def _fixupimm(xs: list[np.ndarray], imm: int, env: FpEnv) -> np.ndarray:
    """vfixupimm dst, src, table: src classified (QNaN 0, SNaN 1, zero 2, +1.0 3, -inf 4, +inf 5,
    negative 6, positive 7; DAZ: denormals count as signed zeros; no DE), that class's 4-bit
    response in the table element selects the result (0 dst, 1 src, 2 src with exponent and
    quiet bit set, 3 default NaN, 4..15 constants, 6 inf signed as src); imm[7:0] raise ZE/IE for
    classes (zero: ZE bit 0, IE bit 1; +1.0: ZE bit 2, IE bit 3; SNaN bit 4, -inf bit 5,
    negative bit 6, +inf bit 7: IE)."""
    dst, x, table = xs
    dt = x.dtype
    udt = _UINT[dt]
    frac = _FRAC[dt]
    if env.daz:
        x = np.where(is_denormal(x), np.copysign(np.zeros((), dt), x), x)
    nan = np.isnan(x)
    snan = is_snan(x)
    with np.errstate(invalid="ignore"):
        token = np.select([nan & ~snan, snan, x == 0, x == 1, x == -np.inf, x == np.inf, x < 0],
                          [0, 1, 2, 3, 4, 5, 6], 7)
    tbl = table.view(udt).astype(np.int64)
    response = (tbl >> (4 * token)) & 15
    consts = _fixup_constants(dt)
    r = consts[np.clip(response - 3, 0, None)]
    r = np.where(response == 3, default_nan(dt), r)
    r = np.where(response == 6, np.where(np.signbit(x), _const(dt, -np.inf), _const(dt, np.inf)), r)
    nan_bits = udt(((1 << (8 * _size(dt) - 1 - frac)) - 1) << frac | 1 << (frac - 1))
    r = np.where(response == 2, (x.view(udt) | nan_bits).view(dt), r)  # any source: a QNaN
    r = np.where(response == 1, x, r)
    r = np.where(response == 0, dst, r)
    flags = 0
    for cls, bit, flag in ((2, 0, ZE), (2, 1, IE), (3, 2, ZE), (3, 3, IE), (1, 4, IE), (4, 5, IE),
                           (6, 6, IE), (5, 7, IE)):
        if imm >> bit & 1 and (token == cls).any():
            flags |= flag
    env.signal(flags)
    return r.astype(dt)


# --- vfpclass -------------------------------------------------------------------------------------

def _fpclass(dt: type, scalar: bool) -> Op:
    """One bool per element: the OR of the classes imm selects (bit 0 QNaN, 1 +0, 2 -0, 3 +inf,
    4 -inf, 5 denormal, 6 negative non-zero finite, 7 SNaN). No flags; DAZ makes denormals
    zeros."""
    size = _size(dt)

    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        x = s[-1][..., :size].view(dt) if scalar else s[-1].view(dt)
        imm = imm or 0
        if env.daz:
            x = np.where(is_denormal(x), np.copysign(np.zeros((), dt), x), x)
        nan, neg = np.isnan(x), np.signbit(x)
        snan = is_snan(x)
        zero, inf = x == 0, np.isinf(x)
        classes = (nan & ~snan, zero & ~neg, zero & neg, inf & ~neg, inf & neg, is_denormal(x),
                   neg & ~nan & ~inf & ~zero, snan)
        r = np.zeros(x.shape, bool)
        for i, c in enumerate(classes):
            if imm >> i & 1:
                r |= c
        return r
    return Op(fn, fp=True, to_mask=True)


# --- conversions ----------------------------------------------------------------------------------

def _to_uint(x: np.ndarray, bits: int, mode: int, env: FpEnv) -> np.ndarray:
    """Float lanes -> unsigned ``bits``-bit integers rounded by ``mode``; NaN or out of range
    (below 0 or from 2**bits after rounding): all ones and IE; inexact: PE. DAZ applies."""
    if env.daz:
        x = np.where(is_denormal(x), np.zeros((), x.dtype), x)
    wide = x.astype(F64)
    udt = U32 if bits == 32 else U64
    with np.errstate(invalid="ignore"):
        r = _ROUNDERS[mode](wide)
        ok = (r >= 0) & (r < 2.0 ** bits)
    if not ok.all():
        env.signal(IE)
    if (ok & (r != wide)).any():
        env.signal(PE)
    return np.where(ok, np.where(ok, r, 0).astype(udt), np.iinfo(udt).max).astype(udt)


def _cvt_to_int(dt: type, signed: bool, bits: int, truncate: bool, gpr: bool = False) -> Op:
    """vcvt[t]{ps,pd}2{udq,qq,uqq}: the source lanes that fit the destination (``out`` bytes,
    zero-filled beyond); ``gpr``: vcvt[t]{ss,sd}2usi, element 0 into a GPR of ``out`` bytes."""
    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        width = 8 * out if gpr else bits
        x = s[-1].view(dt)
        x = x[..., :1] if gpr else x[..., :min(x.shape[-1], out * 8 // width)]
        mode = RZ if truncate else env.rc
        r = to_int(x, width, mode, env) if signed else _to_uint(x, width, mode, env)
        return resize([np.ascontiguousarray(r).view(U8)], None, out)
    return Op(fn, fp=True)


def _int_to_float(v: np.ndarray, dst: type, env: FpEnv) -> np.ndarray:
    """Integer lanes (signed or unsigned, 32 or 64 bits) -> ``dst``, rounded once by the MXCSR
    (PE when inexact)."""
    if v.dtype.itemsize == 4:
        wide = v.astype(F64)  # exact
        return wide if dst is F64 else env.host(lambda w: w.astype(F32), wide)
    if dst is F64:  # high and low halves exact in float64; their sum rounds once
        high = (v >> v.dtype.type(32)).astype(F64) * 2.0 ** 32
        low = (v & v.dtype.type(0xFFFFFFFF)).astype(F64)
        return env.host(np.add, high, low)
    neg = v < 0
    mag = np.where(neg, (~v.view(U64)) + U64(1), v.view(U64)).astype(U64)
    big = mag >= U64(1 << 53)
    # above 2**53: keep 52 high bits and a sticky bit, exact in float64, same float32 rounding
    packed = ((mag >> U64(12)) << U64(1)) | ((mag & U64(0xFFF)) != 0).astype(U64)
    wide = np.where(big, packed.astype(F64) * 2.0 ** 11, mag.astype(F64))
    wide = np.where(neg, -wide, wide)
    return env.host(lambda w: w.astype(F32), wide)


def _cvt_from_int(src: type, dst: type) -> Op:
    """vcvt{udq,qq,uqq}2{ps,pd}: the source lanes that fit the destination, zero-filled beyond."""
    ratio_src, ratio_dst = _size(src), _size(dst)

    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        x = s[0]
        n = min(x.shape[-1] // ratio_src, out // ratio_dst)
        r = _int_to_float(x[..., :n * ratio_src].view(src), dst, env)
        return resize([np.ascontiguousarray(r).view(U8)], None, out)
    return Op(fn, fp=True)


def _cvt_usi(dst: type) -> Op:
    """vcvtusi2ss / vcvtusi2sd xmm1, xmm2, r/m32 or r/m64: element 0 converted from the unsigned
    integer, the rest from xmm2."""
    def fn(s: list[np.ndarray], imm: int | None, out: int, env: FpEnv) -> np.ndarray:
        x = s[1]
        v = x.view(U32 if x.shape[-1] == 4 else U64)[..., :1]
        return merge_low(s[0], _int_to_float(v, dst, env).astype(dst))
    return Op(fn, fp=True)


# --- BF16 -----------------------------------------------------------------------------------------

def _to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 bits -> bfloat16 bits: round to nearest even, denormals (and zeros) to signed
    zero, NaNs quieted (payload truncated)."""
    x = x.astype(U32)
    sign = (x >> U32(16)) & U32(0x8000)
    nan = (x & U32(0x7FFFFFFF)) > U32(0x7F800000)
    rounded = (x + U32(0x7FFF) + ((x >> U32(16)) & U32(1))) >> U32(16)
    r = np.where((x & U32(0x7F800000)) == 0, sign, rounded)
    return np.where(nan, (x >> U32(16)) | U32(0x40), r).astype(U16)


def _cvtneps2bf16(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    """vcvtneps2bf16: each float32 of the source, the destination zero-filled beyond."""
    x = s[0].view(U32)
    return resize([_to_bf16(x[..., :out // 2]).view(U8)], None, out)


def _cvtne2ps2bf16(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    """vcvtne2ps2bf16 dst, src1, src2: the low half of dst from src2, the high half from src1."""
    return np.concatenate([_to_bf16(s[1].view(U32)).view(U8), _to_bf16(s[0].view(U32)).view(U8)],
                          axis=-1)


_BF16_ENV = MASKS | DAZ | FTZ
"""MXCSR of the BF16 dot product: round to nearest even, DAZ, FTZ, exceptions masked."""


def _dpbf16ps(s: list[np.ndarray], imm: int | None, out: int) -> np.ndarray:
    """vdpbf16ps acc, a, b: per float32 lane, acc += a.odd * b.odd, then acc += a.even * b.even,
    each a fused multiply-add (bfloat16 products are exact) under RNE with denormal inputs as
    zero and tiny results flushed; no flags. A NaN operand propagates quieted (a, then b, then
    acc; ahead of an invalid product or sum's default NaN)."""
    env = FpEnv()
    env.mxcsr = _BF16_ENV
    acc = s[0].view(F32)

    def widen(v: np.ndarray, half: int) -> np.ndarray:
        f = (v.view(U16)[..., half::2].astype(U32) << U32(16)).view(F32)
        return np.where(is_denormal(f), np.copysign(np.zeros((), F32), f), f)

    a_odd, a_even = widen(s[1], 1), widen(s[1], 0)
    b_odd, b_even = widen(s[2], 1), widen(s[2], 0)
    for x, y in ((a_odd, b_odd), (a_even, b_even)):
        acc = np.where(is_denormal(acc), np.copysign(np.zeros((), F32), acc), acc)
        nan = np.isnan(x) | np.isnan(y) | np.isnan(acc)
        pick = quiet(np.where(np.isnan(x), x, np.where(np.isnan(y), y, acc)))
        one = np.ones((), F32)
        r = fma32(np.where(nan, one, x), np.where(nan, one, y), np.where(nan, one, acc), env)
        acc = np.where(nan, pick, r)
    env.raised = 0
    return acc


# --- reciprocal estimates -------------------------------------------------------------------------

def _estimate14(rsqrt: bool) -> Kernel:
    """vrcp14 / vrsqrt14: the architecture bounds the relative error by 2**-14 and leaves the
    bits to the implementation; the simulator returns the correctly rounded (to nearest) 1/x or
    1/sqrt(x), within the bound. Zeros give signed infinities, +inf gives +0 (rcp14: signed zero
    for -inf), negative non-zero inputs of rsqrt14 the default NaN, NaNs are quieted. DAZ and FTZ
    apply (tiny results flush to zero); the MXCSR's rounding control does not; no flags."""
    def kernel(xs: list[np.ndarray], imm: int, env: FpEnv) -> np.ndarray:
        x = xs[0]
        dt = x.dtype
        if env.daz:
            x = np.where(is_denormal(x), np.copysign(np.zeros((), dt), x), x)
        with np.errstate(all="ignore"):
            if dt == np.dtype(F32):
                w = x.astype(F64)
                r = (1.0 / np.sqrt(w) if rsqrt else 1.0 / w).astype(F32)
            else:
                r = _rcp64(x, rsqrt)
            if env.ftz:
                r = np.where(is_denormal(r), np.copysign(np.zeros((), dt), r), r)
            if rsqrt:
                r = np.where((x < 0), default_nan(dt), r)
        return np.where(np.isnan(x), quiet(x), r).astype(dt)
    return kernel


def _rcp64(x: np.ndarray, rsqrt: bool) -> np.ndarray:
    """Round-to-nearest float64 1/x (1/sqrt(x)) under the host's default MXCSR."""
    env = FpEnv()
    return env.host(lambda v: 1.0 / np.sqrt(v) if rsqrt else 1.0 / v, x)


# --- the table ------------------------------------------------------------------------------------

def fp_ops() -> dict[str, Op]:
    """Lower-case EVEX mnemonic -> semantics."""
    t: dict[str, Op] = {}
    for p, dt in (("s", F32), ("d", F64)):
        for name, kernel, n in (("vgetexp", _getexp, 1), ("vgetmant", _getmant, 1),
                                ("vrndscale", _rndscale, 1), ("vreduce", _reduce, 1),
                                ("vrange", _range, 2), ("vscalef", _scalef, 2),
                                ("vrcp14", _estimate14(False), 1),
                                ("vrsqrt14", _estimate14(True), 1)):
            t[f"{name}p{p}"] = _lanewise(kernel, dt, n, False)
            t[f"{name}s{p}"] = _lanewise(kernel, dt, n, True)
        t[f"vfixupimmp{p}"] = _lanewise(_fixupimm, dt, 3, False, reads_dst=True)
        t[f"vfixupimms{p}"] = _lanewise(_fixupimm, dt, 3, True, reads_dst=True)
        t[f"vfpclassp{p}"] = _fpclass(dt, False)
        t[f"vfpclasss{p}"] = _fpclass(dt, True)
        for t_, truncate in (("", False), ("t", True)):
            t[f"vcvt{t_}s{p}2usi"] = _cvt_to_int(dt, False, 0, truncate, gpr=True)
            for target, signed, bits in (("udq", False, 32), ("qq", True, 64), ("uqq", False, 64)):
                t[f"vcvt{t_}p{p}2{target}"] = _cvt_to_int(dt, signed, bits, truncate)
        t[f"vcvtusi2s{p}"] = _cvt_usi(dt)
        for source, idt in (("udq", U32), ("qq", I64), ("uqq", U64)):
            t[f"vcvt{source}2p{p}"] = _cvt_from_int(idt, dt)
    t["vcvtneps2bf16"] = Op(_cvtneps2bf16)
    t["vcvtne2ps2bf16"] = Op(_cvtne2ps2bf16)
    t["vdpbf16ps"] = Op(_dpbf16ps, reads_dst=True)
    return t


APPROXIMATE = frozenset(f"v{name}{kind}" for name in ("rcp14", "rsqrt14")
                        for kind in ("ps", "pd", "ss", "sd"))
"""The estimates whose bits the architecture leaves open (relative error below 2**-14)."""
