"""The C header ``tsar.h``: T-SAR instructions from C through GNU inline assembly.

:func:`header_text` is the header; :func:`header_dir` writes it into the cache and returns the
directory to put on the include path. ``kernels/c/tsar.h`` is a copy kept for readers.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .toolchain import cache_dir

_HEADER = r"""/*
 * tsar.h: T-SAR instructions (TLUT / TGEMV, VEX map 8) from C through GNU inline assembly.
 *
 * The assembler knows no T-SAR mnemonics, so the macros below emit the encoding as .byte
 * sequences computed by GNU as from the registers the compiler picked: asm macros map the
 * operand names (%ymm0..%ymm15, %rax..%r15) to their numbers, then build the VEX3 prefix
 * C4 [R X B 01000] [W vvvv L pp], the opcode and a [base] ModRM/SIB/disp8 memory operand.
 * Encodings follow the ISA definition in tsar.isa.instructions (opcodes 0x20|slot for TLUT,
 * 0x30|slot for TGEMV); the tests check these macros against tsar.isa.encode.
 *
 * LUT groups are consecutive registers with an aligned base; pin them with local register
 * variables, e.g. register __m256i lut0 __asm__("ymm8"), lut1 __asm__("ymm9");
 * the macros check the alignment at assembly time.
 *
 *   TSAR_TLUT2X4(lut0, lut1, act_ptr)            tlut2x4   {lut0,lut1}, qword ptr [act_ptr]
 *   TSAR_TGEMV8X16(acc, lut0, lut1, w_ptr)       tgemv8x16 acc, lut0, ymmword ptr [w_ptr]
 */
#ifndef TSAR_H
#define TSAR_H

#include <stdint.h>
#include <immintrin.h>

/* one line of the GPR name -> number table of the tsar_num asm macro */
#define TSAR_GPR_(name, n) "  .ifc \\reg, %" #name "\n    .set \\sym, " #n "\n  .endif\n"

__asm__(
    ".ifndef tsar_h_macros\n"
    ".set tsar_h_macros, 1\n"
    /* tsar_num SYM, REG: SYM = encoding number of %ymmN / %xmmN / 64-bit GPR REG */
    ".macro tsar_num sym, reg\n"
    "  .set \\sym, -1\n"
    "  .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
    "    .ifc \\reg, %ymm\\n\n      .set \\sym, \\n\n    .endif\n"
    "    .ifc \\reg, %xmm\\n\n      .set \\sym, \\n\n    .endif\n"
    "  .endr\n"
    TSAR_GPR_(rax, 0) TSAR_GPR_(rcx, 1) TSAR_GPR_(rdx, 2) TSAR_GPR_(rbx, 3)
    TSAR_GPR_(rsp, 4) TSAR_GPR_(rbp, 5) TSAR_GPR_(rsi, 6) TSAR_GPR_(rdi, 7)
    TSAR_GPR_(r8, 8) TSAR_GPR_(r9, 9) TSAR_GPR_(r10, 10) TSAR_GPR_(r11, 11)
    TSAR_GPR_(r12, 12) TSAR_GPR_(r13, 13) TSAR_GPR_(r14, 14) TSAR_GPR_(r15, 15)
    "  .if \\sym < 0\n    .error \"tsar.h: unknown register \\reg\"\n  .endif\n"
    ".endm\n"
    /* tsar_vex_mem OPC, REG, VVVV, BASE: VEX3 map 8, W0, L1, pp 00, ModRM.reg = REG,
       memory operand [BASE] (SIB for rsp/r12, disp8 0 for rbp/r13) */
    ".macro tsar_vex_mem opc, reg, vvvv, base\n"
    "  .byte 0xC4\n"
    "  .byte ((((~(\\reg >> 3)) & 1) << 7) | (1 << 6) | (((~(\\base >> 3)) & 1) << 5) | 8)\n"
    "  .byte ((((~\\vvvv) & 15) << 3) | (1 << 2))\n"
    "  .byte \\opc\n"
    "  .if (\\base & 7) == 4\n"
    "    .byte (((\\reg & 7) << 3) | 4), 0x24\n"
    "  .elseif (\\base & 7) == 5\n"
    "    .byte ((1 << 6) | ((\\reg & 7) << 3) | 5), 0\n"
    "  .else\n"
    "    .byte (((\\reg & 7) << 3) | (\\base & 7))\n"
    "  .endif\n"
    ".endm\n"
    ".macro tsar_group2 lo, hi\n"
    "  .if (\\lo & 1) || (\\hi != \\lo + 1)\n"
    "    .error \"tsar.h: a c2s4 LUT group is two consecutive registers with an even base\"\n"
    "  .endif\n"
    ".endm\n"
    ".macro tsar_tlut2x4 lo, hi, base\n"
    "  tsar_num tsar_lo, \\lo\n  tsar_num tsar_hi, \\hi\n  tsar_num tsar_base, \\base\n"
    "  tsar_group2 tsar_lo, tsar_hi\n"
    "  tsar_vex_mem 0x20, tsar_lo, 0, tsar_base\n"
    ".endm\n"
    ".macro tsar_tgemv8x16 acc, lo, hi, base\n"
    "  tsar_num tsar_acc, \\acc\n  tsar_num tsar_lo, \\lo\n  tsar_num tsar_hi, \\hi\n"
    "  tsar_num tsar_base, \\base\n"
    "  tsar_group2 tsar_lo, tsar_hi\n"
    "  tsar_vex_mem 0x30, tsar_acc, tsar_lo, tsar_base\n"
    ".endm\n"
    ".endif\n");

/* tlut2x4: the 2-register LUT group (lut0, lut1) from 8 int8 activations at act_ptr. */
#define TSAR_TLUT2X4(lut0, lut1, act_ptr)                                                  \
    __asm__("tsar_tlut2x4 %0, %1, %2"                                                        \
            : "=x"(lut0), "=x"(lut1)                                                         \
            : "r"(act_ptr), "m"(*(const int8_t(*)[8])(act_ptr)))

/* tgemv8x16: acc (16 x int16) += the 16x8 ternary tile at w_ptr (32 bytes) . activations. */
#define TSAR_TGEMV8X16(acc, lut0, lut1, w_ptr)                                             \
    __asm__("tsar_tgemv8x16 %0, %1, %2, %3"                                                  \
            : "+x"(acc)                                                                      \
            : "x"(lut0), "x"(lut1), "r"(w_ptr), "m"(*(const uint8_t(*)[32])(w_ptr)))

#endif /* TSAR_H */
"""


def header_text() -> str:
    """The text of ``tsar.h``."""
    return _HEADER


def header_dir() -> Path:
    """A directory holding ``tsar.h`` (in the cache, named by the header's hash)."""
    text = header_text()
    path = cache_dir("include") / hashlib.sha256(text.encode()).hexdigest()[:16]
    header = path / "tsar.h"
    if not header.is_file() or header.read_text() != text:
        path.mkdir(parents=True, exist_ok=True)
        tmp = header.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(header)
    return path
