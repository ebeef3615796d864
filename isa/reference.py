"""The ISA reference: a plain-text instruction table and the Markdown reference page.

Both are generated from the registered configurations; worked examples are computed by the golden
semantics, so the page cannot drift from the definition.
"""

from __future__ import annotations

import numpy as np

from tsar.isa import codec, semantics
from tsar.isa.config import ACTIVATION_ABS_MAX, TsarConfig, configs
from tsar.isa.instructions import (
    TGEMV_OPCODE_BASE,
    TLUT_OPCODE_BASE,
    VEX_MAP,
    Field,
    InstructionSpec,
    Kind,
    instructions,
)
from tsar.isa.operands import Memory, Register


def example_instruction(spec: InstructionSpec) -> codec.TsarInstruction:
    """A representative instruction of ``spec`` (memory source, first aligned groups)."""
    cls = spec.register_class
    if spec.kind is Kind.TLUT:
        return codec.make(spec.mnemonic, Register(cls, spec.config.group_regs),
                          Memory(base="rsi", size=spec.config.k))
    return codec.make(spec.mnemonic, Register(cls, 0), Register(cls, spec.config.group_regs),
                      Memory(base="rdx", size=spec.config.weight_bytes))


def table_rows() -> list[dict[str, str]]:
    rows = []
    for spec in instructions():
        example = example_instruction(spec)
        rows.append({
            "mnemonic": spec.mnemonic,
            "config": spec.config.name,
            "width": str(spec.config.vector_bits),
            "operands": ", ".join(f"{op.name}:{op.kind_text(spec.register_class)}"
                                  for op in spec.operands),
            "encoding": spec.encoding_text,
            "uops": str(spec.uops),
            "example": f"{codec.encode(example).hex(' ')}  {example}",
        })
    return rows


def text_table() -> str:
    """The instruction table for a terminal."""
    rows = table_rows()
    cols = ["mnemonic", "config", "width", "uops", "encoding", "operands"]
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols),
             "  ".join("-" * widths[c] for c in cols)]
    lines += ["  ".join(r[c].ljust(widths[c]) for c in cols) for r in rows]
    lines.append("")
    lines.append("examples:")
    lines += [f"  {r['example']}" for r in rows]
    return "\n".join(lines)


def _config_section(cfg: TsarConfig) -> list[str]:
    reg = cfg.register_class
    out = [
        f"### {cfg.name}: {cfg.title}",
        "",
        "| property | value |",
        "|---|---|",
        f"| block size c, blocks s, inputs k, outputs m | {cfg.c}, {cfg.s}, {cfg.k}, {cfg.m} |",
        f"| vector width | {cfg.vector_bits} bits ({reg}, {cfg.lanes} int16 lanes) |",
        f"| LUT group | {cfg.group_words} int16 words = {cfg.group_regs} {reg} register(s), "
        f"base aligned to {cfg.group_regs} |",
        f"| TLUT source | {cfg.k} int8 activations (m{cfg.k * 8} or low {cfg.k} bytes of a {reg}) |",
        f"| TGEMV weights | {cfg.m} x {cfg.s} codes x {cfg.code_bits} bits = {cfg.weight_bits} bits "
        f"(m{cfg.weight_bits} or {cfg.weight_regs} aligned {reg}) |",
        f"| storage | {cfg.bits_per_weight:g} bits per weight |",
        f"| micro-ops | {cfg.tlut_mnemonic.upper()}: {cfg.tlut_uops}, "
        f"{cfg.tgemv_mnemonic.upper()}: {cfg.tgemv_uops} ({cfg.outputs_per_uop} outputs per uop) |",
        f"| widen int16 -> int32 | at least every {cfg.max_tgemv_per_widen()} TGEMVs "
        f"({cfg.tgemv_max_step()} per TGEMV at most) |",
        "",
        "LUT group word map (word index: table entry):",
        "",
        "```",
    ]
    for b in range(cfg.s):
        lo = b * cfg.block_words
        first, last = lo // cfg.lanes, (lo + cfg.block_words - 1) // cfg.lanes
        where = f"group register {first}" if first == last else f"group registers {first}..{last}"
        out.append(f"words {lo:3d}..{lo + cfg.patterns - 1:3d}: D_{b}[0..{cfg.patterns})   "
                   f"words {lo + cfg.patterns:3d}..{lo + cfg.block_words - 1:3d}: S_{b}[0..{cfg.patterns})"
                   f"   ({where})")
    out += ["```", "", "Weight-operand bit map (output j, block b):", "", "```"]
    for j in (0, 1, cfg.m - 1):
        for b in range(cfg.s):
            lo = j * cfg.output_code_bits + b * cfg.code_bits
            if cfg.weight_code == "trits":
                fields = (f"trit code sum_i (w_i + 1) * 3^i, i < {cfg.c} "
                          f"(codes {cfg.code_values}..{(1 << cfg.code_bits) - 1} reserved: zero weights)")
            else:
                fields = f"idxD = bits {lo}..{lo + cfg.c - 1}, idxS = bits {lo + cfg.c}..{lo + 2 * cfg.c - 1}"
            out.append(f"bits {lo:3d}..{lo + cfg.code_bits - 1:3d}: output {j:2d} block {b}: {fields}")
        if j == 1 and cfg.m > 3:
            out.append("...")
    out += ["```", ""]
    out += _worked_example(cfg)
    return out


def _worked_example(cfg: TsarConfig) -> list[str]:
    rng = np.random.default_rng(2024)
    act = rng.integers(-ACTIVATION_ABS_MAX, ACTIVATION_ABS_MAX + 1, cfg.k, dtype=np.int8)
    tile = rng.integers(-1, 2, (cfg.m, cfg.k))
    group = semantics.tlut(cfg, act)
    packed = semantics.pack_tile(cfg, tile)
    acc = semantics.tgemv(cfg, np.zeros(cfg.m, np.int16), group, packed)
    first_block = group[: cfg.block_words]
    return [
        "Worked example (computed by the golden semantics):",
        "",
        "```",
        f"activations a       = {act.tolist()}",
        f"group block 0 D|S   = {first_block[:cfg.patterns].tolist()} | "
        f"{first_block[cfg.patterns:].tolist()}",
        f"tile row 0          = {tile[0].tolist()}",
        f"weight bytes (row 0)= {packed[: cfg.output_code_bits // 8].tobytes().hex(' ')}",
        f"TGEMV from acc = 0  = {acc.tolist()}",
        f"tile @ a            = {(tile @ act.astype(np.int64)).tolist()}",
        "```",
        "",
    ]


def markdown() -> str:
    """The full ISA reference page."""
    lines = [
        "# T-SAR ISA reference",
        "",
        "_Generated by `tsar isa --markdown` from the definitions in `isa/config.py` and "
        "`isa/instructions.py`; do not edit by hand._",
        "",
        "T-SAR adds two instructions per configuration: **TLUT** builds, inside SIMD registers, the "
        "dense (D) and sparse (S) binary lookup tables of `s` blocks of `c` activations; **TGEMV** "
        "looks them up with 2c-bit weight codes and accumulates a ternary GEMV tile into int16 lanes. "
        "A ternary weight w splits into dense `wD = w if w != 0 else +1` and sparse `wS = (w == 0)`, "
        "so that `w*a = wD*a - wS*a` and each block contributes `D[idxD] - S[idxS]`.",
        "",
        "## Semantics",
        "",
        "```",
        "TLUT{c}x{s} group, src            ; src: k = c*s int8 activations a[0..k)",
        "  for b in 0..s, p in 0..2^c:",
        "    D_b[p] = sum_i (bit_i(p) ? +a[b*c+i] : -a[b*c+i])",
        "    S_b[p] = sum_i  bit_i(p) *  a[b*c+i]",
        "  group words [b*2^(c+1) .. +2^c) = D_b,  [b*2^(c+1)+2^c .. +2^c) = S_b   (int16)",
        "",
        "TGEMV{k}x{m} acc, group, weights  ; weights: m*s codes of 2c bits, code = idxD | idxS << c",
        "  for j in 0..m:",
        "    acc[j] = wrap16(acc[j] + sum_b (D_b[idxD(j,b)] - S_b[idxS(j,b)]))",
        "",
        "trit codes (weight_code = trits, suffix t): code = sum_i (w_i + 1) * 3^i in ceil(c log2 3) bits,",
        "  decoded in TGEMV: idxD bit i = (digit_i != 0), idxS bit i = (digit_i == 1);",
        "  codes >= 3^c are reserved and decode as zero weights (idxD = idxS = 2^c - 1)",
        "```",
        "",
        f"One TGEMV adds at most `k * {ACTIVATION_ABS_MAX}` in magnitude for BitNet's symmetric "
        "int8 activations, so a zeroed int16 accumulator survives `floor(32767 / (127*k))` TGEMVs; "
        "kernels widen to int32 at least that often. Activations of -128 can reach `128*k`; BitNet's "
        "absmax quantizer never produces them.",
        "",
        "## Encoding",
        "",
        "VEX3: `C4 [R X B mmmmm] [W vvvv L pp] opcode ModRM [SIB] [disp8/disp32]`.",
        "",
        f"* `mmmmm = {VEX_MAP}`: an opcode map that no shipping x86 extension uses; iced-x86 decodes it "
        "as invalid and current CPUs raise #UD (both checked by the test suite).",
        f"* opcode `{TLUT_OPCODE_BASE:#04x} | slot` = TLUT, `{TGEMV_OPCODE_BASE:#04x} | slot` = TGEMV, "
        "where `slot` is the configuration's encoding slot; `VEX.L` = vector width (1: 256, 0: 128).",
        "* `W = 0`, `pp = 00`; other values are reserved (#UD).",
        f"* `{Field.MODRM_REG.value}` (+`VEX.R`): TLUT destination group base / TGEMV accumulator.",
        f"* `{Field.VEX_VVVV.value}`: TGEMV LUT group base; must be `1111b` (unused) for TLUT.",
        f"* `{Field.MODRM_RM.value}` (+`VEX.B`, `VEX.X`, SIB, displacement): activations / weights, "
        "memory with any x86-64 addressing form (base, index, scale, disp8/disp32, RIP-relative) or "
        "register(s).",
        "* A misaligned group base (TLUT destination, TGEMV LUT group, or a multi-register weight "
        "operand) is refused by the assembler and decodes as #UD.",
        "",
        "| mnemonic | config | encoding | operands | uops | example |",
        "|---|---|---|---|---|---|",
    ]
    for row in table_rows():
        lines.append(f"| `{row['mnemonic']}` | {row['config']} | `{row['encoding']}` | "
                     f"{row['operands']} | {row['uops']} | `{row['example']}` |")
    lines += ["", "## Configurations", ""]
    for cfg in configs():
        lines += _config_section(cfg)
    lines += [
        "## Assembly syntax",
        "",
        "Intel syntax as keystone-engine takes it; T-SAR register groups are named by their base "
        "register (`ymm8` for the c2s4 group ymm8..ymm9), a 512-bit c4s4 weight operand is "
        "`zmmword ptr [...]` or an even register naming an aligned pair. Memory sizes may be omitted "
        "(`[rsi]`); when given they must match the operand. A label in an address is RIP-relative "
        "(`[rip + table]`, or `[table]`).",
        "",
    ]
    return "\n".join(lines)
