"""The instruction forms the simulator must execute, derived from iced-x86's tables (not listed by
hand): every VEX-encoded 64-bit-mode form whose CPUID features all lie in :data:`EXTENSIONS`.

A :class:`Form` is one iced ``Code`` (e.g. ``VEX_VPADDB_YMM_YMM_YMMM256``: one mnemonic at one
width with one operand pattern; register and memory variants of an ``xmm/m128`` operand are the
same form). :meth:`Form.encodings` produces concrete encodings of it with chosen registers, memory
operands and immediates, following the native harness's conventions (:mod:`tsar.sim.host_oracle`):
memory through ``rdx``, GPR operands among the harness's GPRs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache

import iced_x86 as iced

from tsar.sim.x86.decode import MNEMONIC_NAMES

EXTENSIONS = ("AVX", "AVX2", "FMA", "F16C", "BMI1", "BMI2")
"""The extensions whose VEX forms the simulator covers, in report order."""

_K = iced.OpCodeOperandKind
_R = iced.Register
_KIND_NAMES = {getattr(_K, n): n for n in dir(_K) if n.isupper()}
_CODE_NAMES = {getattr(iced.Code, n): n for n in dir(iced.Code) if n.isupper()}
_FEATURE_NAMES = {getattr(iced.CpuidFeature, n): n for n in dir(iced.CpuidFeature) if n.isupper()}

GPR32 = ("EAX", "ECX", "EBX", "ESI", "EDI", "R8D", "R9D", "R10D", "R11D")
GPR64 = ("RAX", "RCX", "RBX", "RSI", "RDI", "R8", "R9", "R10", "R11")
"""GPRs a form's register operands may use (the harness's; ``rdx`` is the memory pointer)."""
MEMORY_BASE = _R.RDX


@dataclass(frozen=True)
class Form:
    """One iced-x86 instruction form. ``kinds``: iced ``OpCodeOperandKind`` names per operand."""

    code: int
    name: str
    mnemonic: str
    extension: str
    kinds: tuple[str, ...]
    unique_registers: bool

    @property
    def has_memory(self) -> bool:
        return any(k.endswith("_OR_MEM") or k == "MEM" or k.startswith("MEM_VSIB") for k in self.kinds)

    @property
    def register_only(self) -> bool:
        return not any(k == "MEM" or k.startswith("MEM_VSIB") for k in self.kinds)

    @property
    def has_immediate(self) -> bool:
        return "IMM8" in self.kinds

    @property
    def vsib(self) -> str | None:
        """``"32X"``, ``"64Y"``... for gathers (index element bits and register width), else None."""
        return next((k[8:] for k in self.kinds if k.startswith("MEM_VSIB")), None)

    def encode(self, registers: Sequence[int], memory: bool, *, disp: int = 0, imm: int = 0,
               scale: int = 1) -> bytes:
        """The encoding with register numbers ``registers`` (one per register operand, in order;
        GPR numbers index :data:`GPR64`), the ``*_OR_MEM`` operand as ``[rdx + disp]`` when
        ``memory``, and ``imm`` as the 8-bit immediate."""
        regs = iter(registers)
        args: list[tuple[str, object]] = []
        for kind in self.kinds:
            cls = kind.split("_")[0]
            if kind == "IMM8":
                args.append(("u32", imm & 0xFF))
            elif kind == "MEM" or (memory and kind.endswith("_OR_MEM")):
                args.append(("mem", iced.MemoryOperand(MEMORY_BASE, displ=disp)))
            elif kind.startswith("MEM_VSIB"):
                width = "XMM" if kind.endswith("X") else "YMM"
                index = getattr(_R, f"{width}{next(regs)}")
                args.append(("mem", iced.MemoryOperand(MEMORY_BASE, index, scale, displ=disp)))
            elif cls in ("XMM", "YMM"):
                args.append(("reg", getattr(_R, f"{cls}{next(regs)}")))
            elif cls in ("R32", "R64"):
                args.append(("reg", getattr(_R, (GPR32 if cls == "R32" else GPR64)[next(regs)])))
            else:
                raise ValueError(f"{self.name}: operand kind {kind} has no encoding rule")
        create = getattr(iced.Instruction, "create_" + "_".join(t for t, _ in args))
        ins = create(self.code, *[v for _, v in args])
        encoder = iced.Encoder(64)
        encoder.encode(ins, 0)
        return bytes(encoder.take_buffer())

    def register_count(self) -> int:
        """Register numbers :meth:`encode` takes (register operands, ``*_OR_MEM`` ones included,
        and the index of a VSIB operand)."""
        return sum(1 for k in self.kinds if k != "IMM8" and k != "MEM")

    def encodings(self, imms: Sequence[int] = (0x1B,), disps: Sequence[int] = (8,)) -> Iterator[bytes]:
        """Representative encodings: distinct low registers, one register repeated in every operand
        (aliasing; skipped where the form requires distinct registers), high registers, and the
        memory variant of a ``*_OR_MEM`` operand, each with every immediate of ``imms``."""
        n = self.register_count()
        gpr = any(k.split("_")[0] in ("R32", "R64") for k in self.kinds)
        top = len(GPR64) if gpr else 16
        choices = [list(range(1, 1 + n)), [top - 1 - i for i in range(n)]]
        if not self.unique_registers:
            choices.append([3] * n)
        memory = [False, True] if self.has_memory and self.register_only else [self.has_memory]
        for imm in (imms if self.has_immediate else (0,)):
            for regs in choices:
                for mem in memory:
                    for disp in (disps if mem else (0,)):
                        yield self.encode(regs, mem, disp=disp, imm=imm, scale=4)


def _form(info: iced.OpCodeInfo) -> Form | None:
    kinds = tuple(_KIND_NAMES[k] for k in info.op_kinds())
    probe = Form(info.code, _CODE_NAMES[info.code], "", "", kinds, info.requires_unique_reg_nums)
    try:
        code = probe.encode(list(range(1, 1 + probe.register_count())), probe.has_memory)
    except (ValueError, AttributeError):
        return None  # mask, tile or other registers: not an extension of this list
    ins = iced.Decoder(64, code).decode()
    features = [_FEATURE_NAMES[f] for f in ins.cpuid_features()]
    if not features or any(f not in EXTENSIONS for f in features):
        return None
    extension = max(features, key=EXTENSIONS.index)
    return Form(info.code, probe.name, MNEMONIC_NAMES[ins.mnemonic], extension, kinds,
                info.requires_unique_reg_nums)


@cache
def vex_forms() -> tuple[Form, ...]:
    """Every VEX form of :data:`EXTENSIONS` iced-x86 knows in 64-bit mode, in ``Code`` order."""
    out = []
    for code in sorted(_CODE_NAMES):
        try:
            info = iced.OpCodeInfo(code)
        except ValueError:
            continue
        if info.encoding != iced.EncodingKind.VEX or not info.mode64:
            continue
        form = _form(info)
        if form is not None:
            out.append(form)
    return tuple(out)
