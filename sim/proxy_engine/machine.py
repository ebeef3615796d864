"""The proxy engine: T-SAR kernels timed on the host's silicon through uop-equivalent AVX2 / AVX-512
code.

``create_machine("proxy")`` loads assembly (``load_asm``, ``load_program``) with every T-SAR
instruction replaced *in line* by a sequence of the configuration's width (AVX2 on xmm / ymm;
AVX-512 F/BW on zmm for the 512-bit, EVEX, configurations) that has what the timing model
(:func:`tsar.sim.uarch.tsar_timing`) assumes of that instruction: its uops on the dot-product
ports (one ``vpmaddwd`` of the configuration's width per uop), its memory operand (same bytes,
same address), its register reads and writes, and its accumulator latency. The program is then
reassembled, so labels, branches and loop layout stay those of the kernel (no jump to a stub and
back, unlike the native engine), and the host's out-of-order core, caches and prefetchers run it
(:class:`~tsar.sim.native_engine.machine.NativeMachine` executes it). **Results are meaningless**: only
the time is of use, measured as the natives are. Other instructions pass through unchanged,
AVX-512 ones included (given as ``.byte`` lines: the assembler has no EVEX). The zmm stand-ins are
emitted as ``.byte`` lines too (encoded by iced-x86; a RIP-relative address as a ``.long``
expression the assembler resolves), after a comment with their text; a host without AVX-512 F/BW
cannot run them, and the proxy refuses a 512-bit configuration there (one-line
:class:`~tsar.sim.errors.SimulationError`).

Sequences (``n`` = the instruction's uops as the model takes them,
:func:`tsar.sim.uarch.tsar_ops.issue_cycles`: the RTL-measured port cycles where the RTL table has
the configuration, else the ISA's uop count; ``L`` = ``vpmaddwd`` latency, ``X`` = a vector register
the program never names, picked per program):

* ``TLUTcxs dst, src``: ``n`` uops writing the registers of the LUT group (again, in turn, where
  ``n`` exceeds them: the RTL's passes over a wide register), each ``vpmaddwd Di, S, S`` from the
  source ``S`` (a source in the group, e.g. its first register, is written last). A
  memory source is loaded by one broadcast of its ``k`` bytes into the group's first register
  (``vpbroadcastd/q``, ``vbroadcasti128`` / ``vbroadcasti32x4``, or a whole-register move), a
  separate load uop where the model micro-fuses it (one more front-end slot); it reads exactly the
  operand's bytes.
* ``TGEMV acc, lut, w`` (where the loop around it leaves no register free, e.g. the
  token-blocked dataflows: every uop ``vpmaddwd acc, acc, .``, accumulator latency ``nL``):
  ``vpmaddwd X, L0, w[0]`` (+ ``vpmaddwd X, X, w[j]`` per further register-sized
  part of the weights, the memory parts as memory operands), ``vpmaddwd X, X, Lj`` until
  ``n - 2`` uops, then ``vpmaddwd acc, acc, X`` and ``vpmaddwd acc, acc, L_last``: ``n`` uops,
  the accumulator chain ``acc -> acc`` is ``2L`` (model: ``L + n - 1``, equal for ``n = 4``,
  ``L = 3``: Zen 3/4), the LUT/weight -> acc path ``nL`` (model ``L + n - 1``: off the
  loop-carried chain, hidden by out-of-order execution when the window suffices).

What the host cannot express: a uop reading three or more registers (the LUT group is read one
register per uop: c4s4's 8-register group by 2 of its 4 uops), a T-SAR-specific port (the proxy
uses the ``vpmaddwd`` ports, as the model does), and the RTL's own pipeline depth. The
per-instruction comparison is :func:`proxy_report`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import iced_x86

from tsar.isa import codec, syntax
from tsar.isa.assembler import Program, assemble, strip_comment
from tsar.isa.config import TsarConfig
from tsar.isa.instructions import MEMORY_SIZE_NAMES, Kind, by_mnemonic
from tsar.isa.operands import Memory, Register
from tsar.sim.errors import SimulationError
from tsar.sim.native_engine.machine import NativeMachine
from tsar.sim.uarch.tsar_ops import issue_cycles
from tsar.sim.vector_spill import HOST_AVX512

PROXY_UOP = "vpmaddwd"
_LABEL_RE = re.compile(r"^\s*((?:[A-Za-z_.$][\w.$@?]*\s*:(?!:)\s*)*)(.*)$")
_VREG_RE = re.compile(r"\b[xyz]mm(\d+)\b", re.IGNORECASE)
_BROADCAST = {1: "vpbroadcastb", 2: "vpbroadcastw", 4: "vpbroadcastd", 8: "vpbroadcastq"}
_WIDE_BROADCAST = {("ymm", 16): "vbroadcasti128", ("zmm", 16): "vbroadcasti32x4",
                   ("zmm", 32): "vbroadcasti64x4"}
_MOVE = {"xmm": "vmovdqu", "ymm": "vmovdqu", "zmm": "vmovdqu64"}
_C = iced_x86.Code
_EVEX = {
    "vpmaddwd": _C.EVEX_VPMADDWD_ZMM_K1Z_ZMM_ZMMM512,
    "vpbroadcastb": _C.EVEX_VPBROADCASTB_ZMM_K1Z_XMMM8,
    "vpbroadcastw": _C.EVEX_VPBROADCASTW_ZMM_K1Z_XMMM16,
    "vpbroadcastd": _C.EVEX_VPBROADCASTD_ZMM_K1Z_XMMM32,
    "vpbroadcastq": _C.EVEX_VPBROADCASTQ_ZMM_K1Z_XMMM64,
    "vbroadcasti32x4": _C.EVEX_VBROADCASTI32X4_ZMM_K1Z_M128,
    "vbroadcasti64x4": _C.EVEX_VBROADCASTI64X4_ZMM_K1Z_M256,
    "vmovdqu64": _C.EVEX_VMOVDQU64_ZMM_K1Z_ZMMM512,
}
"""iced-x86 forms of the zmm stand-ins (the assembler has no EVEX): one per mnemonic, its last
operand a register or memory."""
_RIP_TARGET = 1 << 20
"""Placeholder target of a RIP-relative stand-in while encoding (its disp32 is then replaced)."""


@dataclass(frozen=True)
class ProxySequence:
    """The lines standing for one T-SAR instruction and what they amount to."""

    lines: tuple[str, ...]  # Intel-syntax text, one instruction each
    uops: int            # vpmaddwd uops (the model's T-SAR uops)
    loads: int           # load uops (memory operand)
    extra_slots: int     # front-end slots beyond the model's (a separate broadcast load)
    acc_latency_uops: int  # vpmaddwd uops on the loop-carried chain (TGEMV acc; 0 for TLUT)
    code: tuple[str, ...] = ()  # what the assembler takes: ``lines`` (VEX), or ``.byte`` lines (zmm)


def _operands(body: str) -> tuple[str, list]:
    word, _, rest = body.partition(" ")
    return word.lower(), [syntax.parse_operand(t) for t in syntax.split_operands(rest.strip())]


def _config(mnemonic: str, register_class: str) -> tuple[TsarConfig, Kind]:
    for spec in by_mnemonic(mnemonic):
        if spec.register_class == register_class:
            return spec.config, spec.kind
    raise SimulationError("argument", f"proxy: no {register_class} configuration of {mnemonic}")


_Source = int | tuple[Memory, int]
"""A stand-in's operand: a vector register number, or (memory operand, bytes read)."""


def _text(cls: str, operand: _Source) -> str:
    if isinstance(operand, int):
        return f"{cls}{operand}"
    m, nbytes = operand
    return f"{MEMORY_SIZE_NAMES[nbytes]} ptr {m.address_text()}"


def _part(m: Memory, offset: int, nbytes: int) -> tuple[Memory, int]:
    """Bytes ``[offset, offset + nbytes)`` of the memory operand ``m``."""
    if offset and m.symbol is not None:
        raise SimulationError("argument", "proxy: a multi-part weight operand cannot be RIP-relative "
                              f"to a label ({m.address_text()})")
    return replace(m, disp=m.disp + offset), nbytes


def _evex_code(op: str, operands: tuple[_Source, ...]) -> tuple[str, ...]:
    """A zmm stand-in as ``.byte`` lines (iced-x86); a RIP-relative displacement as ``.long``."""
    r = iced_x86.Register
    regs = [r.ZMM0 + o for o in operands if isinstance(o, int)]
    mem = next((o for o in operands if not isinstance(o, int)), None)
    create = iced_x86.Instruction
    if mem is None:
        ins = create.create_reg_reg_reg(_EVEX[op], *regs)
    else:
        m = mem[0]
        if m.rip_relative:
            address = iced_x86.MemoryOperand(r.RIP, displ=_RIP_TARGET, displ_size=8)
        else:
            base, index = (getattr(r, name.upper()) if name else r.NONE for name in (m.base, m.index))
            address = iced_x86.MemoryOperand(base, index, m.scale, m.disp, 1 if m.disp else 0)
        ins = create.create_reg_reg_mem(_EVEX[op], *regs, address) if len(regs) == 2 else \
            create.create_reg_mem(_EVEX[op], *regs, address)
    encoder = iced_x86.Encoder(64)
    encoder.encode(ins, 0)
    data = encoder.take_buffer()
    if mem is None or not mem[0].rip_relative:
        return (".byte " + ", ".join(f"{b:#04x}" for b in data),)
    m = mem[0]  # disp32 is the last field (no immediate): relative to the stand-in's end
    disp = f"{m.disp:#x}" if m.disp >= 0 else f"-{-m.disp:#x}"
    rel = f"{m.symbol} + {disp} - . - 0x4" if m.symbol is not None else disp
    return (".byte " + ", ".join(f"{b:#04x}" for b in data[:-4]), f".long {rel}")


def _emit(cls: str, op: str, *operands: _Source) -> tuple[str, tuple[str, ...]]:
    """One stand-in: its text, and the lines the assembler takes (the text, or EVEX bytes)."""
    text = f"{op} " + ", ".join(_text(cls, o) for o in operands)
    return text, ((text,) if cls != "zmm" else _evex_code(op, operands))


def _load_op(cls: str, nbytes: int, register_bytes: int) -> str | None:
    """The load of exactly ``nbytes`` into one ``cls`` register (a broadcast or a move), or None."""
    if nbytes == register_bytes:
        return _MOVE[cls]
    return _BROADCAST.get(nbytes) or _WIDE_BROADCAST.get((cls, nbytes))


def proxy_sequence(mnemonic: str, operands: list, scratch: int | None,
                   avx512: bool = HOST_AVX512) -> ProxySequence:
    """The proxy of one T-SAR instruction (``operands`` as parsed from its source); ``scratch``
    None (no free register): TGEMV's uops all chain through the accumulator (latency ``nL``).
    ``avx512``: whether the zmm stand-ins may be used (the host's AVX-512 F/BW, by default); a
    512-bit configuration without them is a SimulationError."""
    dst = operands[0]
    assert isinstance(dst, Register)
    cls = dst.cls
    cfg, kind = _config(mnemonic, cls)
    if cfg.encoding == "evex" and not avx512:
        raise SimulationError("ud", f"proxy: {mnemonic} {cls} ({cfg.name}) stands in as AVX-512 "
                              "zmm uops, and this host lacks AVX-512 F/BW")
    width = cfg.register_bytes
    src = operands[-1]
    out: list[tuple[str, tuple[str, ...]]] = []
    if kind is Kind.TLUT:
        n = issue_cycles(cfg, "tlut")
        group = [dst.num + i for i in range(cfg.group_regs)]
        extra, loads = 0, 0
        if isinstance(src, Memory):
            op = _load_op(cls, cfg.k, width)
            if op is None:
                raise SimulationError("argument", f"proxy: {mnemonic}: no single {cls} load reads "
                                      f"exactly its {cfg.k} activation bytes")
            out.append(_emit(cls, op, group[0], (src, cfg.k)))
            extra, loads, s = 1, 1, group[0]
        else:
            s = src.num
        last = [s] if s in group else []  # read by every uop: written last
        cycle = [g for g in group if g != s] or last
        targets = [cycle[i % len(cycle)] for i in range(max(n - len(last), 0))] + last
        out += [_emit(cls, PROXY_UOP, g, s, s) for g in targets[:n]]
        return _sequence(out, n, loads, extra, 0)
    n = issue_cycles(cfg, "tgemv")
    lut = operands[1]
    parts = max(1, cfg.weight_bytes // width)
    if n < parts + 2:
        raise SimulationError("argument", f"proxy: {mnemonic} has {n} uops, too few for {parts} "
                              "weight parts plus the accumulator chain")
    if isinstance(src, Memory):
        w: list[_Source] = [_part(src, j * width, width) for j in range(parts)]
        loads = parts
    else:
        w = [src.num + j for j in range(parts)]
        loads = 0
    luts = [lut.num + i for i in range(cfg.group_regs)]
    a = dst.num
    if scratch is None:
        out = [_emit(cls, PROXY_UOP, a, a, w[j]) for j in range(parts)]
        out += [_emit(cls, PROXY_UOP, a, a, luts[j % len(luts)]) for j in range(n - parts)]
        return _sequence(out, n, loads, 0, n)
    x = scratch
    out = [_emit(cls, PROXY_UOP, x, luts[0], w[0])]
    out += [_emit(cls, PROXY_UOP, x, x, w[j]) for j in range(1, parts)]
    nxt = 1
    while len(out) < n - 2:
        out.append(_emit(cls, PROXY_UOP, x, x, luts[nxt % len(luts)]))
        nxt += 1
    out += [_emit(cls, PROXY_UOP, a, a, x), _emit(cls, PROXY_UOP, a, a, luts[-1])]
    return _sequence(out, n, loads, 0, 2)


def _sequence(out: list[tuple[str, tuple[str, ...]]], uops: int, loads: int, extra: int,
              chain: int) -> ProxySequence:
    return ProxySequence(tuple(t for t, _ in out), uops, loads, extra, chain,
                         tuple(line for _, code in out for line in code))


def _byte_registers(operands: str) -> set[int]:
    """Vector registers (numbers: xmm3 = ymm3 = zmm3) that the instructions encoded by a ``.byte``
    line use, explicitly or not (EVEX code, which the assembler only takes as bytes); none when the
    bytes are not whole valid instructions (data)."""
    try:
        data = bytes(int(v, 0) & 0xFF for v in operands.split(","))
    except ValueError:
        return set()
    used: set[int] = set()
    info = iced_x86.InstructionInfoFactory()
    for ins in iced_x86.Decoder(64, data):
        if ins.is_invalid:
            return set()
        for u in info.info(ins).used_registers():
            if iced_x86.RegisterExt.is_vector_register(u.register):
                used.add(iced_x86.RegisterExt.number(u.register))
    return used


def _vector_registers(body: str) -> set[int]:
    """Vector registers a line names (T-SAR register groups in full; for a ``.byte`` line, those
    its instructions use)."""
    word = body.split(None, 1)[0].lower() if body else ""
    if word == ".byte":
        return _byte_registers(body.split(None, 1)[1] if " " in body else "")
    if by_mnemonic(word):
        _, ops = _operands(body)
        inst = codec.make(word, *ops)
        used: set[int] = set()
        for spec, op in zip(inst.spec.operands, inst.operands, strict=True):
            if isinstance(op, Register) and op.cls != "gpr":
                used.update(op.num + i for i in range(spec.regs))
        return used
    return {int(m) for m in _VREG_RE.findall(body)}


def _enclosing_loop(words: list[str], targets: list[str], labels: list[list[str]], i: int
                    ) -> range | None:
    """Lines of the innermost loop around line ``i``: from a label at or before ``i`` to a jump
    back to it at or after ``i``."""
    best: range | None = None
    for b in range(i, len(words)):
        if not words[b].startswith("j") or not targets[b]:
            continue
        for a in range(i, -1, -1):
            if targets[b] in labels[a]:
                if best is None or b - a < len(best):
                    best = range(a, b + 1)
                break
    return best


def proxy_source(source: str, avx512: bool = HOST_AVX512) -> str:
    """``source`` with every T-SAR line replaced by its proxy (labels kept on the first line; a zmm
    stand-in's ``.byte`` lines follow a comment with its text). ``avx512`` as in
    :func:`proxy_sequence`.

    The TGEMV proxy's scratch register is one that the innermost loop around the instruction
    never names (else one the whole program never names), among the registers the configuration's
    encoding addresses (zmm0..31 for EVEX): values are meaningless anyway, and a register named
    nowhere in the loop cannot add a dependency to it. Instructions given as ``.byte`` lines
    (AVX-512 code) name the registers they use, when each line holds whole instructions."""
    lines = source.splitlines()
    matches = [_LABEL_RE.match(strip_comment(line)) for line in lines]
    bodies = [m.group(2).strip() if m else "" for m in matches]
    labels = [re.findall(r"([A-Za-z_.$][\w.$@?]*)\s*:", m.group(1)) if m else [] for m in matches]
    words = [b.split(None, 1)[0].lower() if b else "" for b in bodies]
    targets = [b.split(None, 1)[1].strip() if w.startswith("j") and len(b.split(None, 1)) > 1 else ""
               for b, w in zip(bodies, words, strict=True)]
    regs = [_vector_registers(b) for b in bodies]
    everywhere = set().union(*regs) if regs else set()
    out = []
    for i, (line, body, word) in enumerate(zip(lines, bodies, words, strict=True)):
        if not by_mnemonic(word):
            out.append(line)
            continue
        loop = _enclosing_loop(words, targets, labels, i)
        used = set().union(*(regs[j] for j in loop)) if loop else everywhere
        _, ops = _operands(body)
        count = _config(word, ops[0].cls)[0].addressable_registers if ops and \
            isinstance(ops[0], Register) else 0
        free = [v for v in range(count - 1, -1, -1) if v not in used]
        seq = proxy_sequence(word, ops, free[0] if free else None, avx512)
        if seq.code == seq.lines:
            out.append(f"{matches[i].group(1)}{seq.lines[0]}    ; proxy of: {body}")
            out += [f"    {text}" for text in seq.lines[1:]]
            continue
        out.append(f"{matches[i].group(1)}    ; proxy of: {body}: {'; '.join(seq.lines)}")
        out += [f"    {text}" for text in seq.code]
    return "\n".join(out) + "\n"


def program_source(program: Program) -> str:
    """The source of an assembled program, from its listing."""
    if not program.listing:
        raise SimulationError("argument", "proxy: the program has no listing to rewrite")
    return "\n".join(entry.source for entry in program.listing) + "\n"


class ProxyMachine(NativeMachine):
    """The native engine on proxy-rewritten assembly (see the module docstring): times T-SAR
    kernels on the host; the values they compute are meaningless."""

    engine = "proxy"

    def load_asm(self, source: str, filename: str = "<input>") -> dict[str, int]:
        return super().load_asm(proxy_source(source), filename)

    def load_program(self, program: Program) -> dict[str, int]:
        rewritten = assemble(proxy_source(program_source(program)), filename=program.source_name)
        return super().load_program(rewritten)

    def load_code(self, code: bytes, symbols=None, base: int | None = None) -> int:
        if any(True for _ in _tsar_sites(code)):
            raise SimulationError("argument", "proxy: machine code with T-SAR instructions cannot be "
                                  "rewritten in line; load its assembly source (load_asm/load_program)")
        return super().load_code(code, symbols, base)


def _tsar_sites(code: bytes):
    from tsar.isa.stream import decode_stream

    return (d for d in decode_stream(code, base=0) if d.is_tsar)


def proxy_report(uarch_name: str) -> list[dict]:
    """Per T-SAR instruction form: the model's assumption and its proxy's, on a uarch data set
    (uops, load uops, front-end slots, accumulator latency in cycles)."""
    from tsar.isa.config import configs
    from tsar.sim.uarch import load, tsar_timing

    u = load(uarch_name)
    rows = []
    for cfg in configs():
        vec = cfg.register_class
        lat = u.lookup(PROXY_UOP, (vec, vec, vec)).latency or 0.0
        for kind, mnem in ((Kind.TLUT, cfg.tlut_mnemonic), (Kind.TGEMV, cfg.tgemv_mnemonic)):
            nbytes = cfg.k if kind is Kind.TLUT else cfg.weight_bytes
            mem = Memory(base="rsi", size=nbytes)
            ops = [Register(vec, 0)] if kind is Kind.TLUT else [Register(vec, 0), Register(vec, 8)]
            seq = proxy_sequence(mnem, [*ops, mem], scratch=15, avx512=True)  # a description
            t = tsar_timing(u, mnem, (vec, *(vec for _ in ops[1:]), f"m{8 * nbytes}"))
            rows.append({
                "instruction": mnem, "config": cfg.name, "model_uops": t.uops, "proxy_uops": seq.uops,
                "model_slots": t.uops, "proxy_slots": seq.uops + seq.extra_slots,
                "proxy_loads": seq.loads,
                "model_acc_latency": t.latency if kind is Kind.TGEMV else None,
                "proxy_acc_latency": seq.acc_latency_uops * lat if kind is Kind.TGEMV else None})
    return rows


__all__ = ["ProxyMachine", "ProxySequence", "program_source", "proxy_report", "proxy_sequence",
           "proxy_source"]
