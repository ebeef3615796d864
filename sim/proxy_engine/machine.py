"""The proxy engine: T-SAR kernels timed on the host's silicon through uop-equivalent AVX2 code.

``create_machine("proxy")`` loads assembly (``load_asm``, ``load_program``) with every T-SAR
instruction replaced *in line* by an AVX2 sequence that has what the timing model
(:func:`tsar.sim.uarch.tsar_timing`) assumes of that instruction: its uops on the dot-product
ports (one ``vpmaddwd`` of the configuration's width per uop), its memory operand (same bytes,
same address), its register reads and writes, and its accumulator latency. The program is then
reassembled, so labels, branches and loop layout stay those of the kernel (no jump to a stub and
back, unlike the native engine), and the host's out-of-order core, caches and prefetchers run it
(:class:`~tsar.sim.native_engine.machine.NativeMachine` executes it). **Results are meaningless**: only
the time is of use, measured as the natives are. Other instructions pass through unchanged,
AVX-512 ones included (given as ``.byte`` lines: the assembler has no EVEX).

Sequences (``n`` = the instruction's uops as the model takes them,
:func:`tsar.sim.uarch.tsar_ops.issue_cycles`: the RTL-measured port cycles where the RTL table has
the configuration, else the ISA's uop count; ``L`` = ``vpmaddwd`` latency, ``X`` = a vector register
the program never names, picked per program):

* ``TLUTcxs dst, src``: ``n`` uops writing the ``n`` registers of the LUT group, each
  ``vpmaddwd Di, S, S`` from the source ``S`` (the group's first register is written last). A
  memory source is loaded by one broadcast of its ``k`` bytes into the group's first register
  (``vpbroadcastd/q``), a separate load uop where the model micro-fuses it (one more front-end
  slot); it reads exactly the operand's bytes.
* ``TGEMV acc, lut, w`` (where the loop around it leaves no register free, e.g. the
  token-blocked dataflows: every uop ``vpmaddwd acc, acc, .``, accumulator latency ``nL``):
  ``vpmaddwd X, L0, w[0]`` (+ ``vpmaddwd X, X, w[j]`` per further 32- or
  16-byte part of the weights, the memory parts as memory operands), ``vpmaddwd X, X, Lj`` until
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
from tsar.isa.config import VECTOR_REGISTERS, TsarConfig
from tsar.isa.instructions import Kind, by_mnemonic
from tsar.isa.operands import Memory, Register
from tsar.sim.errors import SimulationError
from tsar.sim.native_engine.machine import NativeMachine
from tsar.sim.uarch.tsar_ops import issue_cycles

PROXY_UOP = "vpmaddwd"
_LABEL_RE = re.compile(r"^\s*((?:[A-Za-z_.$][\w.$@?]*\s*:(?!:)\s*)*)(.*)$")
_VREG_RE = re.compile(r"\b[xyz]mm(\d+)\b", re.IGNORECASE)
_BROADCAST = {1: ("vpbroadcastb", "byte"), 2: ("vpbroadcastw", "word"), 4: ("vpbroadcastd", "dword"),
              8: ("vpbroadcastq", "qword"), 16: ("vbroadcasti128", "xmmword")}
_PTR = {16: "xmmword", 32: "ymmword"}


@dataclass(frozen=True)
class ProxySequence:
    """The AVX2 lines standing for one T-SAR instruction and what they amount to."""

    lines: tuple[str, ...]
    uops: int            # vpmaddwd uops (the model's T-SAR uops)
    loads: int           # load uops (memory operand)
    extra_slots: int     # front-end slots beyond the model's (a separate broadcast load)
    acc_latency_uops: int  # vpmaddwd uops on the loop-carried chain (TGEMV acc; 0 for TLUT)


def _operands(body: str) -> tuple[str, list]:
    word, _, rest = body.partition(" ")
    return word.lower(), [syntax.parse_operand(t) for t in syntax.split_operands(rest.strip())]


def _config(mnemonic: str, register_class: str) -> tuple[TsarConfig, Kind]:
    for spec in by_mnemonic(mnemonic):
        if spec.register_class == register_class:
            return spec.config, spec.kind
    raise SimulationError("argument", f"proxy: no {register_class} configuration of {mnemonic}")


def _mem(m: Memory, offset: int, nbytes: int) -> str:
    if offset and m.symbol is not None:
        raise SimulationError("argument", "proxy: a multi-part weight operand cannot be RIP-relative "
                              f"to a label ({m.address_text()})")
    return f"{_PTR[nbytes]} ptr {replace(m, disp=m.disp + offset).address_text()}"


def proxy_sequence(mnemonic: str, operands: list, scratch: int | None) -> ProxySequence:
    """The proxy of one T-SAR instruction (``operands`` as parsed from its source); ``scratch``
    None (no free register): TGEMV's uops all chain through the accumulator (latency ``nL``)."""
    dst = operands[0]
    assert isinstance(dst, Register)
    cls = dst.cls
    width = {"xmm": 16, "ymm": 32}[cls]
    cfg, kind = _config(mnemonic, cls)
    r = lambda n: f"{cls}{n}"  # noqa: E731
    src = operands[-1]
    if kind is Kind.TLUT:
        n = issue_cycles(cfg, "tlut")
        group = [dst.num + i for i in range(cfg.group_regs)]
        lines, extra, loads = [], 0, 0
        if isinstance(src, Memory):
            op, ptr = _BROADCAST[cfg.k]
            if cls == "xmm" and cfg.k == 16:
                op = "vmovdqu"
            lines.append(f"{op} {r(group[0])}, {ptr} ptr {src.address_text()}")
            extra, loads, s = 1, 1, group[0]
        else:
            s = src.num
        order = [g for g in group if g != s] + [g for g in group if g == s]
        lines += [f"{PROXY_UOP} {r(g)}, {r(s)}, {r(s)}" for g in order[:n]]
        return ProxySequence(tuple(lines), n, loads, extra, 0)
    n = issue_cycles(cfg, "tgemv")
    lut = operands[1]
    parts = max(1, cfg.weight_bytes // width)
    if n < parts + 2:
        raise SimulationError("argument", f"proxy: {mnemonic} has {n} uops, too few for {parts} "
                              "weight parts plus the accumulator chain")
    if isinstance(src, Memory):
        w = [_mem(src, j * width, width) for j in range(parts)]
        loads = parts
    else:
        w = [r(src.num + j) for j in range(parts)]
        loads = 0
    luts = [lut.num + i for i in range(cfg.group_regs)]
    if scratch is None:
        a = r(dst.num)
        lines = [f"{PROXY_UOP} {a}, {a}, {w[j]}" for j in range(parts)]
        lines += [f"{PROXY_UOP} {a}, {a}, {r(luts[j % len(luts)])}" for j in range(n - parts)]
        return ProxySequence(tuple(lines), n, loads, 0, n)
    x = r(scratch)
    lines = [f"{PROXY_UOP} {x}, {r(luts[0])}, {w[0]}"]
    lines += [f"{PROXY_UOP} {x}, {x}, {w[j]}" for j in range(1, parts)]
    nxt = 1
    while len(lines) < n - 2:
        lines.append(f"{PROXY_UOP} {x}, {x}, {r(luts[nxt % len(luts)])}")
        nxt += 1
    lines += [f"{PROXY_UOP} {r(dst.num)}, {r(dst.num)}, {x}",
              f"{PROXY_UOP} {r(dst.num)}, {r(dst.num)}, {r(luts[-1])}"]
    return ProxySequence(tuple(lines), n, loads, 0, 2)


def _byte_registers(operands: str) -> set[int]:
    """Vector registers (numbers below 16: the ones a proxy may pick) that the instructions
    encoded by a ``.byte`` line use, explicitly or not (EVEX code, which the assembler only takes
    as bytes); none when the bytes are not whole valid instructions (data)."""
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
    return {r for r in used if r < VECTOR_REGISTERS}


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
            if isinstance(op, Register) and op.cls in ("xmm", "ymm"):
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


def proxy_source(source: str) -> str:
    """``source`` with every T-SAR line replaced by its proxy (labels kept on the first line).

    The TGEMV proxy's scratch register is one that the innermost loop around the instruction
    never names (else one the whole program never names): values are meaningless anyway, and a
    register named nowhere in the loop cannot add a dependency to it. Instructions given as
    ``.byte`` lines (AVX-512 code) name the registers they use, when each line holds whole
    instructions."""
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
        free = [v for v in range(VECTOR_REGISTERS - 1, -1, -1) if v not in used]
        _, ops = _operands(body)
        seq = proxy_sequence(word, ops, free[0] if free else None)
        out.append(f"{matches[i].group(1)}{seq.lines[0]}    ; proxy of: {body}")
        out += [f"    {text}" for text in seq.lines[1:]]
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
    lat = u.lookup(PROXY_UOP, ("ymm", "ymm", "ymm")).latency or 0.0
    rows = []
    for cfg in configs():
        vec = cfg.register_class
        for kind, mnem in ((Kind.TLUT, cfg.tlut_mnemonic), (Kind.TGEMV, cfg.tgemv_mnemonic)):
            nbytes = cfg.k if kind is Kind.TLUT else cfg.weight_bytes
            mem = Memory(base="rsi", size=nbytes)
            ops = [Register(vec, 0)] if kind is Kind.TLUT else [Register(vec, 0), Register(vec, 8)]
            seq = proxy_sequence(mnem, [*ops, mem], scratch=15)
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
