"""Native (C) TLUT and TGEMV on a register image, bit-exact with the golden semantics
(:mod:`tsar.isa.semantics`) and the Python engine (:func:`tsar.sim.python_engine.tsar_exec.compile_tsar`).

:func:`helper_source` generates, per configuration, freestanding C (``<stdint.h>`` and GCC vector
extensions / x86 builtins only) with every constant baked in and every loop unrolled:

* ``void tsar_tlut_<x>(uint8_t *regs, int dst, int src_reg, const int8_t *act)``;
* ``void tsar_tgemv_<x>(uint8_t *regs, int dst, int lut, int src_reg, const uint8_t *weights)``.

``regs`` is the register image of :mod:`tsar.sim.vector_spill` (register ``i`` at
``REGISTER_BYTES * i``, little-endian: the rows of ``CpuState.zmm``, zmm0..31). An operand
comes from register ``src_reg`` (and the following ones: the low ``register_bytes`` of each) when
``src_reg >= 0``, else from the pointer, of which exactly the operand's bytes are read. Every
operand is read before anything is written (operands may alias the destination); like every VEX
write, an instruction zeroes the bytes of the registers it writes above its width, up to byte 63
(a 512-bit, EVEX, configuration writes whole rows).

The helpers compute with vectors of at most :data:`SLICE_BITS` (AVX2 builtins; the library is
built with ``-mavx2``): a 512-bit register is computed as two 256-bit slices (words / outputs
``[0, 16)`` and ``[16, 32)``), each exactly as a 256-bit configuration's register, so the
helpers run on hosts without AVX-512 too.

TLUT: the activations, biased to unsigned (``a + 128``), are shuffled into byte pairs
(``vpshufb``) and multiplied with the pairs' ``tlut_matrix`` coefficients (``vpmaddubsw``); the
bias ``128 * sum(coefficients)`` is subtracted per word. TGEMV (codes of 8, 16 or 32 bits per
output, i.e. ``c`` in 1, 2, 4): one int16 lane per output; each (block, table) field becomes a
``vpshufb`` index into the table's 16-byte window of the LUT group, and the picked words are added
(D) or subtracted (S) with int16 wrap-around. Other layouts (e.g. ``c = 3``) and trit codes use
unrolled scalar code; trit codes are decoded there through two byte tables of every code value
(``dec_d`` / ``dec_s``, :attr:`~tsar.isa.config.TsarConfig.code_table`), the datapath's decoder.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tsar.common.toolchain import build_shared, cache_dir, write_atomic
from tsar.isa.config import TsarConfig
from tsar.isa.semantics import fast_tables, tlut_matrix
from tsar.sim.compile import DEFAULT_FLAGS
from tsar.sim.x86.state import REGISTER_BYTES

FLAGS = ("-O3", *(f for f in DEFAULT_FLAGS if not f.startswith("-O")),
         "-fno-tree-loop-distribute-patterns")
"""gcc flags of the helper library (freestanding: no memcpy/memset calls are generated)."""

SLICE_BITS = 256
"""Widest vector the helpers compute with (AVX2): wider registers are computed in slices of it."""

__all__ = ["FLAGS", "SLICE_BITS", "build_helpers", "c_name", "helper_source", "helper_symbols"]

_PRELUDE = """\
#include <stdint.h>
#ifndef TSAR_NATIVE_PRELUDE
#define TSAR_NATIVE_PRELUDE
typedef char tsar_v32qi __attribute__((vector_size(32)));
typedef char tsar_v16qi __attribute__((vector_size(16)));
typedef uint8_t tsar_v32qu __attribute__((vector_size(32)));
typedef uint8_t tsar_v16qu __attribute__((vector_size(16)));
typedef uint8_t tsar_v8qu __attribute__((vector_size(8)));
typedef uint16_t tsar_v16hu __attribute__((vector_size(32)));
typedef uint16_t tsar_v8hu __attribute__((vector_size(16)));
typedef uint64_t tsar_v4du __attribute__((vector_size(32)));
typedef uint64_t tsar_v2du __attribute__((vector_size(16)));
typedef tsar_v16hu tsar_v16hu_u __attribute__((aligned(1), may_alias));
typedef tsar_v8hu tsar_v8hu_u __attribute__((aligned(1), may_alias));
typedef tsar_v16qu tsar_v16qu_u __attribute__((aligned(1), may_alias));
typedef tsar_v8qu tsar_v8qu_u __attribute__((aligned(1), may_alias));
typedef uint64_t tsar_u64u __attribute__((aligned(1), may_alias));
typedef uint32_t tsar_u32u __attribute__((aligned(1), may_alias));
typedef uint16_t tsar_u16u __attribute__((aligned(1), may_alias));
typedef uint8_t tsar_u8u __attribute__((may_alias));
#define TSAR_BIAS8 0x8080808080808080ull
/* 16 bytes at p in both 128-bit halves. */
static inline __attribute__((always_inline)) tsar_v32qi tsar_bcast16(const uint8_t *p) {
    uint64_t lo = ((const tsar_u64u *)p)[0], hi = ((const tsar_u64u *)p)[1];
    return (tsar_v32qi)(tsar_v4du){lo, hi, lo, hi};
}
static inline __attribute__((always_inline)) tsar_v16qi tsar_load16(const uint8_t *p) {
    return (tsar_v16qi)*(const tsar_v16qu_u *)p;
}
#endif
"""


@dataclass(frozen=True)
class _Vec:
    """C spelling of one datapath width's vectors and builtins."""

    qi: str  # signed bytes (builtin operands)
    qu: str  # unsigned bytes
    hu: str  # uint16 lanes
    hu_u: str  # unaligned uint16 vector (loads / stores)
    shuf: str  # vpshufb
    madd: str  # vpmaddubsw
    window: str  # 16 bytes at a pointer, as a vector of this width
    pair: str  # two uint64 (low, high 8 bytes) as a vector of this width, format fields lo, hi


_VEC = {
    256: _Vec("tsar_v32qi", "tsar_v32qu", "tsar_v16hu", "tsar_v16hu_u", "__builtin_ia32_pshufb256",
              "__builtin_ia32_pmaddubsw256", "tsar_bcast16",
              "(tsar_v32qi)(tsar_v4du){{{lo}, {hi}, {lo}, {hi}}}"),
    128: _Vec("tsar_v16qi", "tsar_v16qu", "tsar_v8hu", "tsar_v8hu_u", "__builtin_ia32_pshufb128",
              "__builtin_ia32_pmaddubsw128", "tsar_load16", "(tsar_v16qi)(tsar_v2du){{{lo}, {hi}}}"),
}


def c_name(name: str) -> str:
    """``name`` as a C identifier fragment, injectively: letters and digits stay, ``_`` becomes
    ``__`` and any other character ``_<hex code point>_`` (``c2s4-128`` -> ``c2s4_2d_128``)."""
    out = []
    for ch in name:
        if ch.isascii() and ch.isalnum():
            out.append(ch)
        elif ch == "_":
            out.append("__")
        else:
            out.append(f"_{ord(ch):x}_")
    return "".join(out)


def helper_symbols(cfg: TsarConfig) -> tuple[str, str]:
    """``(tlut, tgemv)`` C function names of ``cfg``'s helpers."""
    x = c_name(cfg.name)
    return f"tsar_tlut_{x}", f"tsar_tgemv_{x}"


# --- code generation -----------------------------------------------------------------------------
def _init(values: Sequence[int]) -> str:
    return "{" + ", ".join(str(int(v)) for v in values) + "}"


def _load_u64s(ptr: str, offset: int, nbytes: int) -> tuple[str, str]:
    """Two uint64 expressions (bytes 0..7, 8..15) reading exactly ``nbytes`` (<= 16) bytes at
    ``ptr + offset``; the missing bytes are zero."""
    parts = []
    for start in (0, 8):
        n = max(0, min(8, nbytes - start))
        terms, pos = [], 0
        while pos < n:
            size = next(s for s in (8, 4, 2, 1) if pos + s <= n)
            load = f"*(const tsar_u{8 * size}u *)({ptr} + {offset + start + pos})" if size > 1 \
                else f"((const tsar_u8u *){ptr})[{offset + start + pos}]"
            terms.append(f"((uint64_t){load} << {8 * pos})" if pos else f"(uint64_t){load}")
            pos += size
        parts.append(" | ".join(terms) if terms else "0")
    return parts[0], parts[1]


def _operand_ptrs(name: str, arg: str, chunks: int, cfg: TsarConfig) -> list[str]:
    """C declarations of the pointers to the operand's ``register_bytes`` chunks."""
    rb = cfg.register_bytes
    return [f"    const uint8_t *{name}{i} = src_reg < 0 ? (const uint8_t *){arg} + {i * rb} : "
            f"regs + {REGISTER_BYTES} * (src_reg + {i});" for i in range(chunks)]


def _slicing(cfg: TsarConfig) -> tuple[int, int, int]:
    """``(slices, slice bytes, words per slice)``: one register of ``cfg`` as host vectors of at most
    :data:`SLICE_BITS` (a 512-bit register: 2 slices of 32 bytes, 16 LUT words each)."""
    bits = min(cfg.vector_bits, SLICE_BITS)
    count = cfg.vector_bits // bits
    return count, bits // 8, cfg.lanes // count


def _store(cfg: TsarConfig, vec: _Vec, where: str, values: Sequence[str]) -> list[str]:
    """Store one register's slices ``values`` at ``where``, then zero its bytes above the width."""
    sb = _slicing(cfg)[1]
    lines = [f"    *({vec.hu_u} *)({where}{f' + {sb * h}' if h else ''}) = {value};"
             for h, value in enumerate(values)]
    return lines + _zero_upper(cfg, vec, where)


def _zero_upper(cfg: TsarConfig, vec: _Vec, where: str) -> list[str]:
    """Zero bytes ``register_bytes..REGISTER_BYTES`` of the register at ``where`` (none at 512 bits)."""
    sb = _slicing(cfg)[1]
    return [f"    *({vec.hu_u} *)({where} + {off}) = ({vec.hu}){{0}};"
            for off in range(cfg.register_bytes, REGISTER_BYTES, sb)]


def _tlut_body(cfg: TsarConfig, vec: _Vec) -> list[str]:
    """TLUT: biased activations shuffled into pairs, ``vpmaddubsw`` with the coefficients; one
    output vector ``o{v}`` per slice (group words ``[v * lanes, (v + 1) * lanes)``)."""
    matrix = tlut_matrix(cfg).astype(int)  # (k, group_words) in {-1, 0, 1}
    c, k = cfg.c, cfg.k
    count, _, lanes = _slicing(cfg)
    windows = -(-k // 16)
    rb = cfg.register_bytes
    # k > register_bytes (no architectural register form; the Python engine refuses it): the
    # following registers' low bytes, wrapping at the last register so that the image is never overrun
    lines = [f"    const uint8_t *a{i} = src_reg < 0 ? (const uint8_t *)act + {i * rb} : "
             f"regs + {REGISTER_BYTES} * ((src_reg + {i}) % {cfg.addressable_registers});"
             for i in range(-(-k // rb))]
    for h in range(windows):
        chunk, offset = divmod(16 * h, rb)
        lo, hi = _load_u64s(f"a{chunk}", offset, min(16, k - 16 * h))
        lines.append(f"    uint64_t a{h}l = ({lo}) ^ TSAR_BIAS8, a{h}h = ({hi}) ^ TSAR_BIAS8;")
        lines.append(f"    {vec.qi} aw{h} = " + vec.pair.format(lo=f"a{h}l", hi=f"a{h}h") + ";")
    consts: list[str] = []
    pairs: dict[tuple, str] = {}  # activation index per byte -> shuffled vector name
    body: list[str] = []
    for v in range(cfg.group_regs * count):
        terms = []
        bias = []
        for w in range(lanes):
            word = v * lanes + w
            b = cfg.word_meaning(word)[0]
            rows = [i for i in range(k) if matrix[i, word]]
            assert all(b * c <= i < (b + 1) * c for i in rows), "TLUT coefficients leave the block"
            bias.append(-128 * int(matrix[b * c:(b + 1) * c, word].sum()) & 0xFFFF)
        for q in range(0, c, 2):
            act_of_byte, coef = [], []
            for w in range(lanes):
                word = v * lanes + w
                b = cfg.word_meaning(word)[0]
                for i in (q, q + 1):
                    inside = i < c
                    act_of_byte.append(b * c + i if inside else None)
                    coef.append(int(matrix[b * c + i, word]) if inside else 0)
            key = tuple(act_of_byte)
            if key not in pairs:
                name = pairs[key] = f"p{len(pairs)}"
                parts = []
                for h in range(windows):
                    idx = [(i % 16 if i is not None and i // 16 == h else 0x80) for i in key]
                    if any(x != 0x80 for x in idx):
                        consts.append(f"    static const {vec.qi} {name}i{h} = "
                                      f"{_init(x - 256 if x > 127 else x for x in idx)};")
                        parts.append(f"{vec.shuf}(aw{h}, {name}i{h})")
                body.append(f"    {vec.qi} {name} = {' | '.join(parts) or '(' + vec.qi + '){0}'};")
            cname = f"m{v}_{q // 2}"
            consts.append(f"    static const {vec.qi} {cname} = {_init(coef)};")
            terms.append(f"({vec.hu}){vec.madd}({pairs[key]}, {cname})")
        consts.append(f"    static const {vec.hu} b{v} = {_init(bias)};")
        body.append(f"    {vec.hu} o{v} = {' + '.join(terms)} + b{v};")
    for r in range(cfg.group_regs):
        body += _store(cfg, vec, f"regs + {REGISTER_BYTES} * dst + {REGISTER_BYTES * r}",
                       [f"o{r * count + h}" for h in range(count)])
    return consts + lines + body


def _tgemv_fast(cfg: TsarConfig) -> bool:
    """Whether TGEMV uses the vector path: int16 accumulators (one LUT lane per output) and each
    output's codes fill an 8-, 16- or 32-bit field."""
    return cfg.output_code_bits in (8, 16, 32) and cfg.acc_bits == cfg.lut_bits and \
        cfg.weight_code == "split"


def _table_windows(cfg: TsarConfig, block: int, table: str) -> tuple[list[int], int]:
    """Byte offsets (from the group's first register) of the 16-byte windows holding the table,
    and the table's byte offset in its window (0 when it spans two windows)."""
    base = cfg.word_index(block, table, 0)
    lanes = cfg.lanes
    offsets, inner = [], 0
    for h in range(max(1, cfg.patterns // 8)):
        word = base + 8 * h
        in_reg = 2 * (word % lanes)
        offsets.append(REGISTER_BYTES * (word // lanes) + (in_reg & ~15))
        inner = in_reg & 15
    assert inner + 2 * cfg.patterns <= 16 or (inner == 0 and cfg.patterns == 16)
    return offsets, inner


def _tgemv_vector_body(cfg: TsarConfig, vec: _Vec) -> list[str]:
    """TGEMV with one int16 lane per output and a ``vpshufb`` per (block, table) and slice (slice
    ``h``: outputs ``[h * lanes, (h + 1) * lanes)``, their codes at weight byte ``h * lanes * ocb / 8``)."""
    count, sb, lanes = _slicing(cfg)
    rb, ocb = cfg.register_bytes, cfg.output_code_bits
    chunks = -(-cfg.weight_bytes // rb)
    per_slice = lanes * ocb // 8  # weight bytes of one slice's outputs

    def weights_at(offset: int) -> str:
        return f"w{offset // rb} + {offset % rb}"

    lines = [f"    const uint8_t *g = regs + {REGISTER_BYTES} * lut;",
             *_operand_ptrs("w", "weights", chunks, cfg),
             *(f"    {vec.hu} acc{h} = *(const {vec.hu_u} *)(regs + {REGISTER_BYTES} * dst + {sb * h});"
               for h in range(count))]
    consts: dict[str, str] = {}
    if ocb == 32:  # low and high halves of each output's codes
        consts["even"] = f"    static const {vec.hu} even = {_init(range(0, 2 * lanes, 2))};"
        consts["odd"] = f"    static const {vec.hu} odd = {_init(range(1, 2 * lanes, 2))};"
    for h in range(count):
        at = h * per_slice
        if ocb == 8:  # one byte per output: output j's byte at byte j of each 128-bit half
            lo, hi = _load_u64s(f"w{at // rb}", at % rb, per_slice)
            lines.append(f"    {vec.hu} f0_{h} = ({vec.hu})" + vec.pair.format(lo=f"({lo})", hi=f"({hi})")
                         + ";")
        elif ocb == 16:
            lines.append(f"    {vec.hu} f0_{h} = *(const {vec.hu_u} *)({weights_at(at)});")
        else:
            lines.append(f"    {vec.hu} v0_{h} = *(const {vec.hu_u} *)({weights_at(at)}), "
                         f"v1_{h} = *(const {vec.hu_u} *)({weights_at(at + sb)});")
            lines.append(f"    {vec.hu} f0_{h} = __builtin_shuffle(v0_{h}, v1_{h}, even), "
                         f"f1_{h} = __builtin_shuffle(v0_{h}, v1_{h}, odd);")
    windows: dict[int, str] = {}
    dups: dict[tuple[int, int, int], str] = {}
    pos: list[list[str]] = [[] for _ in range(count)]
    neg: list[list[str]] = [[] for _ in range(count)]
    mask = cfg.patterns - 1
    for b in range(cfg.s):
        for table, index, coef in cfg.tgemv_terms():
            offsets, inner = _table_windows(cfg, b, table)
            names = []
            for off in offsets:
                if off not in windows:
                    windows[off] = f"t{len(windows)}"
                    lines.append(f"    {vec.qi} {windows[off]} = {vec.window}(g + {off});")
                names.append(windows[off])
            for h in range(count):
                x = f"x{h}_{b}_{len(pos[h]) + len(neg[h])}"
                if index == "all":  # a constant pattern: 2 * (2^c - 1) in both bytes
                    twice = f"({vec.hu}){{{', '.join([str((2 * mask) * 0x0101)] * lanes)}}}"
                else:
                    bit = b * cfg.code_bits + (cfg.c if index == "idxS" else 0)  # idxD: low c bits
                    piece, shift = divmod(bit, 16)
                    kb, shift = divmod(shift, 8)
                    if (h, piece, kb) not in dups:  # the code byte in both bytes of each output's lane
                        name = dups[h, piece, kb] = f"u{piece}{kb}_{h}"
                        idx = [j if ocb == 8 else 2 * (j % 8) + kb for j in range(lanes) for _ in (0, 1)]
                        consts[f"u{piece}{kb}i"] = f"    static const {vec.qi} u{piece}{kb}i = {_init(idx)};"
                        lines.append(f"    {vec.hu} {name} = ({vec.hu}){vec.shuf}(({vec.qi})f{piece}_{h}, "
                                     f"u{piece}{kb}i);")
                    # both bytes: 2 * field (shifted into bits 1..c, other bits masked off)
                    u = dups[h, piece, kb]
                    moved = f"({u} << 1)" if shift == 0 else u if shift == 1 else f"({u} >> {shift - 1})"
                    twice = f"({moved} & {(2 * mask) * 0x0101:#06x})"
                if len(names) == 1:  # byte pair (2 field + inner, 2 field + inner + 1)
                    lines.append(f"    {vec.hu} {x} = {twice} + {0x0100 + inner * 0x0101:#06x};")
                    pick = f"({vec.hu}){vec.shuf}({names[0]}, ({vec.qi}){x})"
                else:  # 16 entries over two windows: index bit 7 zeroes the other window's byte
                    lines.append(f"    {vec.qu} {x} = ({vec.qu}){twice};")
                    pick = (f"({vec.hu})({vec.shuf}({names[0]}, ({vec.qi})({x} + lo_win)) | "
                            f"{vec.shuf}({names[1]}, ({vec.qi})({x} + hi_win)))")
                    consts["lo_win"] = f"    static const {vec.qu} lo_win = {_init([0x70, 0x71] * lanes)};"
                    consts["hi_win"] = f"    static const {vec.qu} hi_win = {_init([0xF0, 0xF1] * lanes)};"
                (pos[h] if coef > 0 else neg[h]).extend([pick] * abs(coef))
    for h in range(count):
        lines.append(f"    {vec.hu} d{h} = {' + '.join(pos[h])};")
        lines.append(f"    {vec.hu} s{h} = {' + '.join(neg[h])};")
    sums = [f"acc{h} + d{h} - s{h}" for h in range(count)]
    lines += _store(cfg, vec, f"regs + {REGISTER_BYTES} * dst", sums)
    return list(consts.values()) + lines


def _tgemv_scalar_body(cfg: TsarConfig, vec: _Vec) -> list[str]:
    """TGEMV for any layout and accumulator width: unrolled scalar code over the codes, every
    output computed before any is stored (the weights may alias the accumulator)."""
    rb = cfg.register_bytes
    chunks = -(-cfg.weight_bytes // rb)
    acc_t, acc_u = f"uint{cfg.acc_bits}_t", f"tsar_u{cfg.acc_bits}u"
    lines = [*_operand_ptrs("w", "weights", chunks, cfg),
             f"    uint8_t *accp = regs + {REGISTER_BYTES} * dst;",
             f"    const {acc_u} *a = (const {acc_u} *)accp;"]
    if rb == REGISTER_BYTES:
        lines.append(f"    const tsar_u16u *g = (const tsar_u16u *)(regs + {REGISTER_BYTES} * lut);")
    else:  # gather the low halves into one array of words
        lines.append(f"    {vec.hu} g_[{cfg.group_regs}];")
        lines += [f"    g_[{r}] = *(const {vec.hu_u} *)(regs + {REGISTER_BYTES} * (lut + {r}));"
                  for r in range(cfg.group_regs)]
        lines.append("    const tsar_u16u *g = (const tsar_u16u *)g_;")

    def byte(n: int) -> str:
        return f"(uint32_t)w{n // rb}[{n % rb}]"

    if cfg.weight_code == "split":  # the code's bit fields
        fields = {"idxD": "({code} & {pm})", "idxS": "({code} >> {c})"}
    else:  # the decoder as a table of every code value (cfg.code_table)
        dense, sparse = cfg.code_table
        lines.insert(0, f"    static const uint8_t dec_d[{len(dense)}] = {_init(dense)};")
        lines.insert(1, f"    static const uint8_t dec_s[{len(sparse)}] = {_init(sparse)};")
        fields = {"idxD": "dec_d[{code}]", "idxS": "dec_s[{code}]"}

    def word(table: str, block: int, index: str, code: str) -> str:
        base = cfg.word_index(block, table, 0)
        pattern = str(pm) if index == "all" else fields[index].format(code=code, pm=pm, c=cfg.c)
        return f"({acc_t})(int16_t)g[{base} + {pattern}]"  # sign-extended to the lane width

    width, pm = cfg.code_bits, cfg.patterns - 1
    for j in range(cfg.m):
        terms = [f"a[{j}]"]
        for b in range(cfg.s):
            bit = cfg.code_field(j, b)[0]
            n, shift = divmod(bit, 8)
            raw = byte(n) if shift + width <= 8 else f"({byte(n)} | {byte(n + 1)} << 8)"
            code = f"c{j}_{b}"
            lines.append(f"    uint32_t {code} = ({raw} >> {shift}) & {(1 << width) - 1};")
            for table, index, coef in cfg.tgemv_terms():
                sign = "+" if coef > 0 else "-"
                scaled = word(table, b, index, code) if abs(coef) == 1 else \
                    f"({acc_t}){abs(coef)} * {word(table, b, index, code)}"
                terms.append(f"{sign} {scaled}")
        lines.append(f"    {acc_t} r{j} = ({acc_t})({' '.join(terms)});")
    lines += [f"    (({acc_u} *)accp)[{j}] = r{j};" for j in range(cfg.m)]
    return lines + _zero_upper(cfg, vec, "accp")


def helper_source(cfg: TsarConfig) -> str:
    """C source of ``cfg``'s TLUT and TGEMV helpers (see the module docstring). Raises
    ValueError for configurations the golden semantics do not implement."""
    fast_tables(cfg)  # refuses lut_bits / acc_bits other than 16, like the golden semantics
    vec = _VEC[_slicing(cfg)[1] * 8]
    tlut, tgemv = helper_symbols(cfg)
    fast = _tgemv_fast(cfg)
    tgemv_body = _tgemv_vector_body(cfg, vec) if fast else _tgemv_scalar_body(cfg, vec)
    return "\n".join([
        _PRELUDE,
        f"/* {cfg.name}: {cfg.title}; k={cfg.k} m={cfg.m} group_regs={cfg.group_regs} "
        f"weight_bytes={cfg.weight_bytes} code_bits={cfg.code_bits} "
        f"tgemv={'vector' if fast else 'scalar'} */",
        f"void {tlut}(uint8_t *regs, int dst, int src_reg, const int8_t *act) {{",
        *_tlut_body(cfg, vec),
        "}",
        f"void {tgemv}(uint8_t *regs, int dst, int lut, int src_reg, const uint8_t *weights) {{",
        *tgemv_body,
        "}",
        "",
    ])


def build_helpers(cfgs: Sequence[TsarConfig]) -> Path:
    """One shared object with the helpers of ``cfgs`` (:func:`helper_symbols` names them), built
    with :data:`FLAGS` through the project's build cache; returns its path."""
    unique: dict[str, TsarConfig] = {}
    for cfg in cfgs:
        other = unique.setdefault(helper_symbols(cfg)[0], cfg)
        if other != cfg:
            raise ValueError(f"configurations {other} and {cfg} share helper names")
    if not unique:
        raise ValueError("no configurations to build helpers for")
    text = "".join(helper_source(cfg) for cfg in unique.values())
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    source = cache_dir("src") / f"tsar_native-{digest}.c"
    if not source.is_file() or source.read_text() != text:
        write_atomic(source, text)
    return build_shared([source], FLAGS, name="tsar_native")
