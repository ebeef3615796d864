"""Micro-benchmark bodies for one instruction form: a dependency chain (latency) and independent
streams (reciprocal throughput), in its register variant and, where it has one, its memory variant.

* **Chain**: each instruction's destination is the next one's source. Through another source
  operand of the destination's register class the chain alternates two registers
  (``op A, B, F; op B, A, F``: no instruction reads and writes one register, so neither a move
  eliminated at rename nor a same-register special case shortens it); through a read-write
  destination (FMA, VNNI accumulators) it is ``op A, F, G`` repeated. Every other source is a
  fixed register that the loop never writes; a memory source is ``[rdx]``.
* **Stream**: ``copies`` instructions with distinct destinations and sources that the loop never
  writes (a read-write destination chains on itself, so such forms get as many copies as the
  register file allows); the copies' memory operands are contiguous (copy ``i`` at ``i`` times the
  access size: consecutive accesses fall in different L1 banks, and stores in the same line, as
  in the code that reaches a core's peak; every access stays inside the buffer).

Register numbers follow :meth:`tsar.sim.x86.forms.Form.encode` (GPR numbers index
:data:`~tsar.sim.x86.forms.GPR64`). Forms that cannot be run safely are :attr:`Plan.skip`\\ ped
with the reason (gathers and scatters, implicit memory operands, MXCSR loads and stores, implicit
writes to the harness's registers); forms whose latency has no meaning get
:attr:`Plan.no_latency`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import iced_x86 as iced

from tsar.sim.x86.forms import Form

IMMEDIATE = 1
"""The immediate of every form that takes one (a plain shift count, lane index or predicate)."""
STREAM_COPIES = 12
"""Independent copies in a stream (more for read-write destinations, as registers allow)."""
MAX_COPIES = 24
_A = iced.OpAccess
_WRITES = {_A.WRITE, _A.READ_WRITE, _A.COND_WRITE, _A.READ_COND_WRITE}
_READS = {_A.READ, _A.READ_WRITE, _A.COND_READ, _A.READ_COND_WRITE}
_FULL = iced.RegisterExt.full_register
_HARNESS = {iced.Register.RDX, iced.Register.RSP, iced.Register.RBP, iced.Register.R12,
            iced.Register.R13, iced.Register.R14, iced.Register.R15}
_VEC_CLASSES = {"XMM", "YMM", "ZMM"}
_REGISTER_NAMES = {getattr(iced.Register, n): n for n in dir(iced.Register) if n.isupper()}


@dataclass(frozen=True)
class Operand:
    """One operand of a form: ``index`` in ``Form.kinds``, register class (``vec``, ``k``,
    ``kpair``, ``gpr``), or ``mem`` / ``imm``; whether the instruction reads and writes it."""

    index: int
    kind: str
    cls: str
    read: bool
    written: bool


def operand_class(kind: str, memory: bool) -> str:
    """``vec`` / ``k`` / ``kpair`` / ``gpr`` / ``mem`` / ``imm`` of an iced operand kind."""
    if kind == "IMM8":
        return "imm"
    if kind == "MEM" or kind.startswith("MEM_VSIB") or (memory and kind.endswith("_OR_MEM")):
        return "mem"
    prefix = kind.split("_")[0]
    if prefix in _VEC_CLASSES:
        return "vec"
    return {"K": "k", "KP1": "kpair", "R32": "gpr", "R64": "gpr"}[prefix]


def variants(form: Form) -> tuple[bool, ...]:
    """The memory flags of a form's variants: register and memory where an operand may be
    either, else the one the form has."""
    return (False, True) if form.has_memory and form.register_only else (form.has_memory,)


def is_double(mnemonic: str) -> bool:
    """Whether a form's floating-point elements are (probably) doubles: such forms start from
    1.0 in every 64-bit lane, the others from 1.0f in every 32-bit lane (a fixed point of
    multiplication, division and square root: no chain drifts towards denormals)."""
    return bool(re.search(r"(pd|sd)(\d|$)|pd2|sd2|ddup", mnemonic))


@dataclass
class Plan:
    """How one variant of a form is exercised; see the module docstring."""

    form: Form
    memory: bool
    operands: tuple[Operand, ...] = ()
    kinds: tuple[str, ...] = ()
    skip: str | None = None
    no_latency: str | None = None
    dest: Operand | None = None
    implicit_dest: int | None = None
    memory_bits: int = 0
    memory_written: bool = False

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        """The table key: (mnemonic, operand kinds as the tables spell them)."""
        return self.form.mnemonic, self.kinds

    @property
    def registers(self) -> list[Operand]:
        return [o for o in self.operands if o.cls not in ("mem", "imm")]

    @cached_property
    def chain_sources(self) -> tuple[Operand, ...]:
        """Read operands a chain can run through: of the destination's register class (the
        destination itself when it is read-write)."""
        if self.no_latency or self.skip:
            return ()
        if self.dest is None:
            return tuple(o for o in self.registers if o.read and o.cls == "vec")  # implicit dest
        return tuple(o for o in self.registers if o.read and o.cls == self.dest.cls)

    def pool(self, cls: str) -> list[int]:
        if cls == "vec":
            return list(range(self.form.vector_registers))
        if cls == "k":
            return list(range(8))
        if cls == "kpair":
            return [0, 2, 4, 6]
        return list(range(9))

    # -- encodings -------------------------------------------------------------------------
    def encode(self, regs: dict[int, int], disp: int = 0) -> bytes:
        numbers = [regs[o.index] for o in self.registers]
        return self.form.encode(numbers, self.memory, disp=disp, imm=IMMEDIATE)

    def assign(self, fixed: dict[int, int], taken: dict[str, set[int]]) -> dict[int, int]:
        """Registers for the operands not in ``fixed``: distinct, outside ``taken``."""
        regs = dict(fixed)
        used = {cls: set(s) for cls, s in taken.items()}
        for o in self.registers:
            if o.index in regs:
                continue
            cls = "k" if o.cls == "kpair" else o.cls
            free = [r for r in self.pool(o.cls) if r not in used.setdefault(cls, set())
                    and (o.cls != "kpair" or r + 1 not in used[cls])]
            if not free:
                raise ValueError(f"{self.form.name}: out of {o.cls} registers")
            regs[o.index] = free[0]
            used[cls].add(free[0])
            if o.cls == "kpair":
                used[cls].add(free[0] + 1)
        return regs

    def chain(self, source: Operand) -> list[bytes]:
        """The chain's period (one or two instructions) through ``source``."""
        if self.dest is None:  # implicit vector destination (xmm0): read it back through source
            regs = self.assign({source.index: self.implicit_dest or 0}, {"vec": {self.implicit_dest or 0}})
            return [self.encode(regs)]
        cls = "k" if self.dest.cls == "kpair" else self.dest.cls
        if source.index == self.dest.index:
            a = self.pool(self.dest.cls)[0]
            regs = self.assign({self.dest.index: a}, {cls: {a, a + 1} if self.dest.cls == "kpair" else {a}})
            return [self.encode(regs)]
        a, b = self.pool(self.dest.cls)[:2]
        first = self.assign({self.dest.index: a, source.index: b}, {cls: {a, b}})
        others = {i: r for i, r in first.items() if i not in (self.dest.index, source.index)}
        second = {**others, self.dest.index: b, source.index: a}
        return [self.encode(first), self.encode(second)]

    def stream_copies(self) -> int:
        """Copies of the stream: :data:`STREAM_COPIES`, or for a read-write destination as many
        as the destination's register class leaves (up to :data:`MAX_COPIES`)."""
        if self.dest is None:
            return STREAM_COPIES
        sources = [o for o in self.registers if o.index != self.dest.index and o.cls == self.dest.cls]
        sinks = [o for o in self.registers if o.written and o.index != self.dest.index
                 and o.cls == self.dest.cls]
        free = len(self.pool(self.dest.cls)) - len(sources) - len(sinks)
        if self.dest.cls == "k":
            free -= sum(1 for o in self.registers if o.cls == "kpair")
        want = MAX_COPIES if self.dest.read else STREAM_COPIES
        return max(1, min(want, free))

    def disp(self, copy: int) -> int:
        """The memory operand's displacement in copy ``copy`` of a stream."""
        return copy * max(self.memory_bits // 8, 1)

    def stream(self) -> list[bytes]:
        """The stream's period: :meth:`stream_copies` independent instructions."""
        copies = self.stream_copies()
        if self.dest is None:
            taken = {"vec": {self.implicit_dest}} if self.implicit_dest is not None else {}
            regs = self.assign({}, taken)
            return [self.encode(regs, self.disp(i)) for i in range(copies)]
        cls = "k" if self.dest.cls == "kpair" else self.dest.cls
        pool = self.pool(self.dest.cls)
        step = 2 if self.dest.cls == "kpair" else 1
        # fixed operands first, from the top of the pool; destinations from the bottom
        fixed: dict[int, int] = {}
        top = sorted(self.pool(cls), reverse=True)
        used: dict[str, set[int]] = {}
        for o in self.registers:
            if o.index == self.dest.index:
                continue
            ocls = "k" if o.cls == "kpair" else o.cls
            free = [r for r in (top if ocls == cls else sorted(self.pool(o.cls), reverse=True))
                    if r not in used.setdefault(ocls, set())]
            fixed[o.index] = free[0]
            used[ocls].add(free[0])
        dests = [r for r in pool if r not in used.get(cls, set())
                 and (step == 1 or r + 1 not in used.get(cls, set()))][:copies]
        return [self.encode({**fixed, self.dest.index: d}, self.disp(i)) for i, d in enumerate(dests)]


def _table_kind(kind: str, cls: str, bits: int) -> str:
    if cls == "imm":
        return "imm8"
    if cls == "mem":
        return f"m{bits}"
    if cls in ("k", "kpair"):
        return "k"
    if cls == "gpr":
        return kind.split("_")[0].lower()
    return kind.split("_")[0].lower()


def plan(form: Form, memory: bool) -> Plan:
    """The :class:`Plan` of a form's register (``memory`` False) or memory variant."""
    p = Plan(form, memory)
    if any(k.startswith("MEM_VSIB") for k in form.kinds):
        p.skip = "gather/scatter: not measured (its index and mask registers are consumed)"
        return p
    if form.masking == 3:
        p.skip = "requires a write mask: not measured"
        return p
    if form.mnemonic in ("vldmxcsr", "vstmxcsr"):
        p.skip = "MXCSR load/store: not measured"
        return p
    classes = [operand_class(k, memory) for k in form.kinds]
    probe = Plan(form, memory, tuple(Operand(i, k, c, False, False)
                                     for i, (k, c) in enumerate(zip(form.kinds, classes, strict=True))))
    try:
        # register 0 left out: an implicit operand (xmm0, eax) must not hide behind an explicit one
        code = probe.encode(probe.assign({}, {"vec": {0}, "k": {0}, "gpr": {0}}))
    except (ValueError, AttributeError) as exc:
        p.skip = f"cannot encode: {exc}"
        return p
    ins = iced.Decoder(64, code).decode()
    info = iced.InstructionInfoFactory().info(ins)
    ops = []
    for i, (kind, cls) in enumerate(zip(form.kinds, classes, strict=True)):
        access = info.op_access(i)
        ops.append(Operand(i, kind, cls, access in _READS, access in _WRITES))
    p.operands = tuple(ops)
    bits = iced.MemorySizeExt.size(ins.memory_size) * 8 if memory else 0
    p.memory_bits = bits
    p.kinds = tuple(_table_kind(o.kind, o.cls, bits) for o in ops)
    if any(m.base != iced.Register.RDX for m in info.used_memory()):
        p.skip = "implicit memory operand: not measured"
        return p
    explicit = {_FULL(ins.op_register(i)) for i in range(ins.op_count)
                if ins.op_kind(i) == iced.OpKind.REGISTER}
    implicit_writes = [u.register for u in info.used_registers()
                       if _FULL(u.register) not in explicit and u.access in _WRITES]
    if any(_FULL(r) in _HARNESS for r in implicit_writes):
        p.skip = "writes a register the harness needs (rdx, r12-r15): not measured"
        return p
    mem = [o for o in ops if o.cls == "mem"]
    p.memory_written = bool(mem) and mem[0].written
    dests = [o for o in ops if o.written and o.cls not in ("mem", "imm")]
    if dests:
        p.dest = dests[0]
    else:
        vec_writes = [r for r in implicit_writes if iced.RegisterExt.is_vector_register(r)]
        if vec_writes:
            p.implicit_dest = _FULL(vec_writes[0]) - iced.Register.ZMM0
    if p.memory_written:
        p.no_latency = "stores to memory: no register result"
    elif p.dest is None and p.implicit_dest is None:
        names = sorted({_REGISTER_NAMES[_FULL(r)].lower() for r in implicit_writes})
        names += ["flags"] if ins.rflags_modified else []
        p.no_latency = "result only in " + " and ".join(names) if names else "no register result"
    elif not p.chain_sources:
        what = p.dest.cls if p.dest else "vec"
        p.no_latency = f"no source of the destination's register class ({what})"
    return p


def _encode(ins: iced.Instruction) -> bytes:
    encoder = iced.Encoder(64)
    encoder.encode(ins, 0)
    return bytes(encoder.take_buffer())


def load_to_use_bodies(avx512: bool) -> dict[str, list[bytes]]:
    """Chains that give the L1 load-to-use latency (run on a zeroed buffer, ``rax`` = 0):
    ``scalar`` (``mov rax, [rdx + rax]``, one link per instruction); ``xmm`` / ``ymm`` / ``zmm``
    (a vector load from ``[rdx + rax]`` then ``vmovq rax, xmm0``: two instructions per link) and
    ``roundtrip`` (``vmovq xmm0, rax; vmovq rax, xmm0``), whose half is taken as the
    ``vmovq rax, xmm0`` share of a vector link."""
    c, r = iced.Code, iced.Register
    ins = iced.Instruction

    def at() -> iced.MemoryOperand:
        return iced.MemoryOperand(r.RDX, r.RAX)

    to_gpr = _encode(ins.create_reg_reg(c.VEX_VMOVQ_RM64_XMM, r.RAX, r.XMM0))
    bodies = {
        "scalar": [_encode(ins.create_reg_mem(c.MOV_R64_RM64, r.RAX, at()))],
        "xmm": [_encode(ins.create_reg_mem(c.VEX_VMOVDQU_XMM_XMMM128, r.XMM0, at())), to_gpr],
        "ymm": [_encode(ins.create_reg_mem(c.VEX_VMOVDQU_YMM_YMMM256, r.YMM0, at())), to_gpr],
        "roundtrip": [_encode(ins.create_reg_reg(c.VEX_VMOVQ_XMM_RM64, r.XMM0, r.RAX)), to_gpr],
    }
    if avx512:
        bodies["zmm"] = [_encode(ins.create_reg_mem(c.EVEX_VMOVDQU64_ZMM_K1Z_ZMMM512, r.ZMM0, at())), to_gpr]
    return bodies
