"""SSE4.2 string compares in their VEX forms: vpcmpestri/vpcmpestrm (explicit lengths in
eax/edx, rax/rdx with VEX.W1) and vpcmpistri/vpcmpistrm (lengths up to the first zero element).

imm8: [1:0] element format (unsigned bytes, unsigned words, signed bytes, signed words);
[3:2] aggregation (equal any, ranges, equal each, equal ordered); [5:4] polarity (positive,
negative, masked positive, masked negative); [6] index: most significant instead of least /
mask: expanded to elements instead of bits. Results: ecx (index, the element count when no bit
is set) or xmm0 (mask, bits 255:128 zeroed); CF = result nonzero, ZF = src2 shorter than the
register, SF = src1 shorter, OF = result bit 0, AF = PF = 0.
"""

from __future__ import annotations

import iced_x86 as iced
import numpy as np

from tsar.sim.x86 import flags as fl
from tsar.sim.x86.decode import address_fn, mnemonic, operands
from tsar.sim.x86.opdefs import I8, I16, U8, U16, Compiled, Unsupported
from tsar.sim.x86.state import CpuState

_FORMATS = (U8, U16, I8, I16)


def _length(value: int, bits: int, n: int) -> int:
    value &= (1 << bits) - 1
    if value >> (bits - 1):
        value = (1 << bits) - value  # |negative|
    return min(value, n)


def _implicit(x: np.ndarray) -> int:
    zeros = np.flatnonzero(x == 0)
    return int(zeros[0]) if zeros.size else len(x)


def string_compare(a: np.ndarray, b: np.ndarray, la: int, lb: int, imm: int) -> int:
    """IntRes2 as an integer (bit ``j`` for element ``j``) of the two element vectors."""
    n = len(a)
    va, vb = np.arange(n) < la, np.arange(n) < lb
    agg = (imm >> 2) & 3
    eq = a[:, None] == b[None, :]  # [i, j]
    if agg == 0:  # equal any
        res = (eq & va[:, None] & vb[None, :]).any(axis=0)
    elif agg == 1:  # ranges: pairs (a[2k] <= b[j] <= a[2k+1])
        ge = (a[0::2, None] <= b[None, :]) & va[0::2, None] & vb[None, :]
        le = (a[1::2, None] >= b[None, :]) & va[1::2, None] & vb[None, :]
        res = (ge & le).any(axis=0)
    elif agg == 2:  # equal each
        res = np.where(va & vb, a == b, ~va & ~vb)
    else:  # equal ordered: a (as a substring) starts at b[j]
        res = np.ones(n, bool)
        for j in range(n):
            for i in range(n - j):
                if not va[i]:
                    continue
                if not vb[j + i] or a[i] != b[j + i]:
                    res[j] = False
                    break
    value = int(np.packbits(res.astype(np.uint8), bitorder="little").view(np.uint16)[0]
                if n == 16 else np.packbits(res.astype(np.uint8), bitorder="little")[0])
    full = (1 << n) - 1
    polarity = (imm >> 4) & 3
    if polarity == 1:
        value ^= full
    elif polarity == 3:
        value ^= int(np.packbits(vb.astype(np.uint8), bitorder="little").view(np.uint16)[0]
                     if n == 16 else np.packbits(vb.astype(np.uint8), bitorder="little")[0])
    return value


def compile_pcmpstr(ins: iced.Instruction, st: CpuState, trace: bool = False) -> Compiled:
    full = mnemonic(ins)
    name = full.removesuffix("64")
    if name not in ("vpcmpestri", "vpcmpestrm", "vpcmpistri", "vpcmpistrm"):
        raise Unsupported(full)
    ops = operands(ins)
    imm = ins.immediate8
    explicit = name[5] == "e"
    wide = full.endswith("64")  # VEX.W1: lengths in rax/rdx
    dt = _FORMATS[imm & 3]
    n = 16 // np.dtype(dt).itemsize
    y, g, f = st.zmm, st.gpr, st.flags
    arow = y[ops[0].reg, :16]
    src = ops[1]
    if src.kind == "vec":
        brow = y[src.reg, :16]

        def read_b() -> np.ndarray:
            return brow
    else:
        addr, view = address_fn(src, g), st.mem.view

        def read_b() -> np.ndarray:
            a = addr()
            if trace and st.trace is not None:
                st.trace.append((a, 16, 0))
            return view(a, 16)
    index_out = name.endswith("i")
    bits = 64 if wide else 32

    def run() -> None:
        a, b = arow.view(dt), read_b().view(dt)
        if explicit:
            la, lb = _length(g[0], bits, n), _length(g[2], bits, n)
        else:
            la, lb = _implicit(a), _implicit(b)
        res = string_compare(a.copy(), b.copy(), la, lb, imm)
        if index_out:
            if res == 0:
                g[1] = n
            else:
                g[1] = res.bit_length() - 1 if imm & 0x40 else (res & -res).bit_length() - 1
        else:
            out = np.zeros(len(y[0]), U8)
            if imm & 0x40:
                lanes = np.array([(res >> j) & 1 for j in range(n)], np.uint8)
                out[:16] = np.repeat(lanes * np.uint8(0xFF), 16 // n)
            else:
                out[:2] = np.frombuffer(res.to_bytes(2, "little"), U8)
            y[0] = out
        flags = (fl.CF if res else 0) | (fl.ZF if lb < n else 0) | (fl.SF if la < n else 0) \
            | (fl.OF if res & 1 else 0)
        f[0] = fl.raw((st.rflags_base & ~fl.ARITH_MASK) | flags)
    return Compiled(run, 16 if src.kind == "mem" else 0, 0)
