"""Exact IEEE-754 rounding on Python integers, for the few operations numpy cannot round in every
MXCSR mode: fused multiply-add in double precision (the exact product needs 106 bits) and
float32 -> float16 conversion.

A finite value is ``(-1)**sign * mant * 2**exp`` with integer ``mant >= 0``. Rounding follows
x86: tininess is detected after rounding, underflow is flagged when the result is tiny and
inexact, FTZ flushes tiny results to zero (flags UE and PE).
"""

from __future__ import annotations

from dataclasses import dataclass

from tsar.sim.x86.fpenv import IE, OE, PE, RD, RN, RU, RZ, UE


@dataclass(frozen=True)
class Format:
    """A binary interchange format: ``frac`` fraction bits, ``exp`` exponent bits."""

    frac: int
    exp: int

    @property
    def bias(self) -> int:
        return (1 << (self.exp - 1)) - 1

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def sign_bit(self) -> int:
        return 1 << (self.frac + self.exp)

    @property
    def inf(self) -> int:
        return ((1 << self.exp) - 1) << self.frac

    @property
    def max_finite(self) -> int:
        return self.inf - 1

    @property
    def quiet_bit(self) -> int:
        return 1 << (self.frac - 1)

    def default_nan(self) -> int:
        return self.sign_bit | self.inf | self.quiet_bit


F16, F32, F64 = Format(10, 5), Format(23, 8), Format(52, 11)


def decompose(bits: int, fmt: Format) -> tuple[int, int, int, str]:
    """``(sign, mant, exp, kind)`` of an encoding; kind is ``zero``, ``finite``, ``inf`` or
    ``nan`` (mant is the raw fraction for NaNs)."""
    sign = bits >> (fmt.frac + fmt.exp) & 1
    biased = bits >> fmt.frac & ((1 << fmt.exp) - 1)
    frac = bits & ((1 << fmt.frac) - 1)
    if biased == (1 << fmt.exp) - 1:
        return sign, frac, 0, "nan" if frac else "inf"
    if biased == 0:
        return sign, frac, fmt.emin - fmt.frac, "finite" if frac else "zero"
    return sign, frac | (1 << fmt.frac), biased - fmt.bias - fmt.frac, "finite"


def _round_bits(mant: int, exp: int, q: int, sign: int, rc: int) -> tuple[int, int, bool]:
    """``mant * 2**exp`` rounded to a multiple of ``2**q``: ``(m, q, inexact)``."""
    if exp >= q:
        return mant << (exp - q), q, False
    shift = q - exp
    m, rem = mant >> shift, mant & ((1 << shift) - 1)
    if rem == 0:
        return m, q, False
    half = 1 << (shift - 1)
    if rc == RN:
        up = rem > half or (rem == half and m & 1)
    elif rc == RU:
        up = not sign
    elif rc == RD:
        up = bool(sign)
    else:
        up = False
    return m + up, q, True


def round_to_format(sign: int, mant: int, exp: int, fmt: Format, rc: int,
                    ftz: bool = False) -> tuple[int, int]:
    """Encoding and MXCSR flags of ``(-1)**sign * mant * 2**exp`` rounded to ``fmt``."""
    sign_bits = fmt.sign_bit if sign else 0
    if mant == 0:
        return sign_bits, 0
    p = fmt.frac + 1
    e = mant.bit_length() - 1 + exp  # value in [2**e, 2**(e+1))
    # tininess after rounding: round with an unbounded exponent range, compare with 2**emin
    mu, qu, _ = _round_bits(mant, exp, e - fmt.frac, sign, rc)
    tiny = mu.bit_length() - 1 + qu < fmt.emin
    m, q, inexact = _round_bits(mant, exp, max(e, fmt.emin) - fmt.frac, sign, rc)
    if m >> p:
        m, q = m >> 1, q + 1
    flags = PE if inexact else 0
    if tiny and ftz:
        return sign_bits, UE | PE
    if tiny and inexact:
        flags |= UE
    if m and m.bit_length() - 1 + q > fmt.bias:  # overflow
        to_inf = rc == RN or (rc == RU and not sign) or (rc == RD and sign)
        return sign_bits | (fmt.inf if to_inf else fmt.max_finite), OE | PE
    if m >> fmt.frac:
        return sign_bits | ((q + fmt.frac + fmt.bias) << fmt.frac) | (m - (1 << fmt.frac)), flags
    return sign_bits | m, flags


def fma(a: int, b: int, c: int, fmt: Format, rc: int, ftz: bool = False) -> tuple[int, int]:
    """``a * b + c`` with one rounding, for non-NaN encodings (denormals already handled by the
    caller: DAZ or DE). Returns the encoding and the flags."""
    sa, ma, ea, ka = decompose(a, fmt)
    sb, mb, eb, kb = decompose(b, fmt)
    sc, mc, ec, kc = decompose(c, fmt)
    sp = sa ^ sb
    if "inf" in (ka, kb):
        if "zero" in (ka, kb):
            return fmt.default_nan(), IE
        if kc == "inf" and sc != sp:
            return fmt.default_nan(), IE
        return (fmt.sign_bit if sp else 0) | fmt.inf, 0
    if kc == "inf":
        return c, 0
    mp, ep = ma * mb, ea + eb
    low = min(ep, ec)
    total = (-1 if sp else 1) * (mp << (ep - low)) + (-1 if sc else 1) * (mc << (ec - low))
    if total == 0:
        if mp == 0 and mc == 0 and sp == sc:
            return fmt.sign_bit if sp else 0, 0
        return fmt.sign_bit if rc == RD else 0, 0
    return round_to_format(int(total < 0), abs(total), low, fmt, rc, ftz)


def convert(bits: int, src: Format, dst: Format, rc: int, ftz: bool = False) -> tuple[int, int]:
    """A format conversion (e.g. float32 -> float16) of a non-NaN encoding."""
    sign, mant, exp, kind = decompose(bits, src)
    if kind == "inf":
        return (dst.sign_bit if sign else 0) | dst.inf, 0
    if kind == "zero":
        return dst.sign_bit if sign else 0, 0
    return round_to_format(sign, mant, exp, dst, rc, ftz)


__all__ = ["F16", "F32", "F64", "RD", "RN", "RU", "RZ", "Format", "convert", "decompose", "fma",
           "round_to_format"]
