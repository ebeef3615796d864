"""Turn decoded instructions into :class:`InstructionForm` s and loop profiles.

* iced-x86 ``Instruction`` s (:func:`form_from_iced`): operand kinds from ``op_kind`` /
  ``op_register`` / ``memory_size``; registers read and written from iced's
  ``InstructionInfoFactory`` (address registers of memory operands kept apart); flags from
  ``rflags_read`` / ``rflags_modified``. ``lea`` is named by addressing mode like the tables
  (``lea_b_i_d8``).
* T-SAR instructions (:func:`form_from_tsar`) from :class:`tsar.isa.codec.TsarInstruction`:
  registers read and written from its ``registers_read`` / ``registers_written`` (register groups
  expand to every register of the group).
* :func:`form_from_decoded` / :func:`form_at` / :func:`decode_forms`: from the records of
  :mod:`tsar.isa.stream`, the one decoder of byte strings mixing x86 and T-SAR encodings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING

from tsar.sim.timing.profile import InstructionForm, LoopEntry, LoopProfile

if TYPE_CHECKING:
    import iced_x86

    from tsar.isa.codec import TsarInstruction
    from tsar.isa.stream import Decoded


@cache
def _names() -> dict[str, dict[int, str]]:
    import iced_x86 as ix

    def rev(mod: object) -> dict[int, str]:
        return {v: k for k, v in vars(mod).items() if isinstance(v, int) and not k.startswith("_")}

    return {"mnemonic": rev(ix.Mnemonic), "opkind": rev(ix.OpKind), "register": rev(ix.Register),
            "code": rev(ix.Code), "access": rev(ix.OpAccess)}


_IMM_KINDS = {"IMMEDIATE8": "imm8", "IMMEDIATE8_2ND": "imm8", "IMMEDIATE16": "imm16",
              "IMMEDIATE32": "imm32", "IMMEDIATE64": "imm64", "IMMEDIATE8TO16": "imm8",
              "IMMEDIATE8TO32": "imm8", "IMMEDIATE8TO64": "imm8", "IMMEDIATE32TO64": "imm32"}
_READ = {"READ", "COND_READ", "READ_WRITE", "READ_COND_WRITE"}
_WRITE = {"WRITE", "COND_WRITE", "READ_WRITE", "READ_COND_WRITE"}


def register_kind(name: str, size: int) -> str:
    """Operand kind of an iced register name (``"YMM3"`` -> ``"ymm"``, ``"AH"`` -> ``"r8h"``)."""
    n = name.lower()
    for prefix in ("xmm", "ymm", "zmm"):
        if n.startswith(prefix):
            return prefix
    if n.startswith("mm"):
        return "mm"
    if n.startswith("k") and n[1:].isdigit():
        return "k"
    if n in ("ah", "bh", "ch", "dh"):
        return "r8h"
    return {1: "r8", 2: "r16", 4: "r32", 8: "r64"}.get(size, n)


def _memory_kind(instr: iced_x86.Instruction) -> str:
    import iced_x86 as ix

    info = ix.MemorySizeInfo(instr.memory_size)
    if instr.is_broadcast:
        elem = info.element_size * 8
        vec = max((ix.RegisterInfo(instr.op_register(i)).size * 8 for i in range(instr.op_count)
                   if _names()["opkind"][instr.op_kind(i)] == "REGISTER"), default=elem)
        return f"m{elem}_1to{vec // elem}"
    return f"m{info.size * 8}" if info.size else "m"


def _lea_name(instr: iced_x86.Instruction) -> str:
    import iced_x86 as ix

    parts = ["lea"]
    if instr.memory_base == ix.Register.RIP:
        parts.append("r")
    elif instr.memory_base != ix.Register.NONE:
        parts.append("b")
    if instr.memory_index != ix.Register.NONE:
        parts.append("is" if instr.memory_index_scale > 1 else "i")
    disp = instr.memory_displ_size
    if disp or parts[-1] == "r" or len(parts) == 1 or parts[1:] in (["i"], ["is"]):
        parts.append("d8" if disp == 1 else "d32")
    return "_".join(parts)


def form_from_iced(instr: iced_x86.Instruction) -> InstructionForm:
    """An :class:`InstructionForm` from one decoded iced-x86 instruction."""
    import iced_x86 as ix

    from tsar.sim.x86.forms import required_cpu_flags

    names = _names()
    mnemonic = names["mnemonic"][instr.mnemonic].lower()
    kinds: list[str] = []
    operand_regs: set[str] = set()
    for i in range(instr.op_count):
        kind = names["opkind"][instr.op_kind(i)]
        if kind == "REGISTER":
            reg = instr.op_register(i)
            rname = names["register"][reg]
            operand_regs.add(rname.lower())
            kinds.append(register_kind(rname, ix.RegisterInfo(reg).size))
        elif kind == "MEMORY":
            kinds.append(_memory_kind(instr))
        elif kind in _IMM_KINDS:
            kinds.append(_IMM_KINDS[kind])
        elif kind.startswith("NEAR_BRANCH") or kind.startswith("FAR_BRANCH"):
            kinds.append("rel8" if "REL8" in names["code"][instr.code] else "rel32")
        else:
            kinds.append(kind.lower())
    if mnemonic == "lea":
        mnemonic, kinds = _lea_name(instr), kinds[:1]
    info = ix.InstructionInfoFactory().info(instr)
    addr: list[str] = []
    mem_r = mem_w = 0
    for mem in info.used_memory():
        for reg in (mem.base, mem.index):
            if reg != ix.Register.NONE:
                addr.append(names["register"][reg])
        access = names["access"][mem.access]
        size = ix.MemorySizeInfo(mem.memory_size).size
        if access in _READ:
            mem_r += size
        if access in _WRITE:
            mem_w += size
    addr_set = {a.lower() for a in addr}
    mem_key = ""
    if (not mnemonic.startswith("lea") and instr.memory_base not in (ix.Register.NONE, ix.Register.RIP)
            and any(names["opkind"][instr.op_kind(i)] == "MEMORY" for i in range(instr.op_count))):
        index = instr.memory_index
        disp = instr.memory_displacement
        disp = disp - (1 << 64) if disp >= 1 << 63 else disp
        mem_key = (names["register"][instr.memory_base].lower()
                   + (f"+{names['register'][index].lower()}*{instr.memory_index_scale}"
                      if index != ix.Register.NONE else "")
                   + f"{disp:+#x}")
    reads, writes = [], []
    for used in info.used_registers():
        rname = names["register"][used.register].lower()
        access = names["access"][used.access]
        if access in _READ and (rname not in addr_set or rname in operand_regs):
            reads.append(rname)
        if access in _WRITE:
            writes.append(rname)
    if instr.rflags_read:
        reads.append("flags")
    if instr.rflags_modified:
        writes.append("flags")
    fmt = ix.Formatter(ix.FormatterSyntax.INTEL)
    return InstructionForm(
        mnemonic=mnemonic, operands=tuple(kinds), reads=tuple(dict.fromkeys(reads)),
        writes=tuple(dict.fromkeys(writes)), address_reads=tuple(dict.fromkeys(addr)),
        mem_read_bytes=mem_r, mem_write_bytes=mem_w, address=instr.ip, text=fmt.format(instr),
        mem_key=mem_key, isa=required_cpu_flags(instr))


def form_from_tsar(inst: TsarInstruction, address: int | None = None) -> InstructionForm:
    """An :class:`InstructionForm` from a T-SAR instruction: registers read and written as the ISA
    states them (:attr:`~tsar.isa.codec.TsarInstruction.registers_read` /
    :attr:`~tsar.isa.codec.TsarInstruction.registers_written`, register groups expanded), address
    registers from its :attr:`~tsar.isa.codec.TsarInstruction.memory_operand`."""
    from tsar.isa.operands import Memory

    kinds: list[str] = []
    mem_r = 0
    for spec, value in zip(inst.spec.operands, inst.operands, strict=True):
        if isinstance(value, Memory):
            kinds.append(f"m{spec.mem_bytes * 8}")
            mem_r += spec.mem_bytes or 0
        else:
            kinds.append(value.cls)
    mem = inst.memory_operand
    addr = [r for r in (mem.base, mem.index) if r and r != "rip"] if mem is not None else []
    return InstructionForm(
        mnemonic=inst.mnemonic, operands=tuple(kinds),
        reads=tuple(f"v{r.num}" for r in inst.registers_read if r.cls != "gpr"),
        writes=tuple(f"v{r.num}" for r in inst.registers_written),
        address_reads=tuple(addr), mem_read_bytes=mem_r, address=address, text=str(inst))


def form_from_decoded(decoded: Decoded) -> InstructionForm:
    """An :class:`InstructionForm` from one :mod:`tsar.isa.stream` record (x86 or T-SAR).
    Raises :class:`~tsar.isa.codec.InvalidInstruction` (a ValueError) for undecodable bytes."""
    decoded.check()
    if decoded.tsar is not None:
        return form_from_tsar(decoded.tsar, decoded.address)
    return form_from_iced(decoded.x86)


def form_at(code: bytes, offset: int, ip: int = 0) -> tuple[InstructionForm, int]:
    """Decode the instruction at ``code[offset]`` (address ``ip + offset``, x86 or T-SAR) into a
    form; returns ``(form, length)``. Raises ValueError for undecodable bytes."""
    from tsar.isa.stream import decode_one

    decoded = decode_one(code, offset, ip)
    return form_from_decoded(decoded), decoded.length


def decode_forms(code: bytes, ip: int = 0) -> list[InstructionForm]:
    """Decode x86-64 code that may contain T-SAR instructions into forms (program order)."""
    from tsar.isa.stream import decode_stream

    return [form_from_decoded(d) for d in decode_stream(code, ip)]


def profile_from_counts(code: bytes, ip: int, counts: Mapping[int, float], name: str = "",
                        iterations: float = 1.0) -> LoopProfile:
    """A profile of the executed instructions only: ``counts`` maps guest addresses (as the
    simulator reports them) inside ``code`` loaded at ``ip`` to execution counts. Data embedded
    in the code (constants after the last ``ret``) is never decoded."""
    entries = []
    for address in sorted(counts):
        if counts[address] > 0 and ip <= address < ip + len(code):
            form, _ = form_at(code, address - ip, ip)
            entries.append((form, float(counts[address])))
    return LoopProfile.from_forms(entries, iterations, name)


def profile_from_forms(forms: Sequence[InstructionForm],
                       counts: Sequence[float] | Mapping[int, float],
                       iterations: float | None = None, name: str = "") -> LoopProfile:
    """A :class:`LoopProfile` from forms plus execution counts, given per form (sequence) or per
    instruction address (mapping, as the simulator reports them; absent addresses count 0)."""
    if isinstance(counts, Mapping):
        values = [float(counts.get(f.address, 0.0)) if f.address is not None else 0.0 for f in forms]
    else:
        values = [float(c) for c in counts]
        if len(values) != len(forms):
            raise ValueError(f"{len(forms)} forms but {len(values)} counts")
    entries = [(f, c) for f, c in zip(forms, values, strict=True) if c > 0]
    return LoopProfile.from_forms(entries, iterations, name)


def profile_from_iced(instrs: Iterable[iced_x86.Instruction],
                      counts: Sequence[float] | Mapping[int, float],
                      iterations: float | None = None, name: str = "") -> LoopProfile:
    """A :class:`LoopProfile` from iced-x86 instructions plus execution counts."""
    return profile_from_forms([form_from_iced(i) for i in instrs], counts, iterations, name)


__all__ = ["LoopEntry", "decode_forms", "form_at", "form_from_decoded", "form_from_iced", "form_from_tsar",
           "profile_from_counts", "profile_from_forms", "profile_from_iced", "register_kind"]
