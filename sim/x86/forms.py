"""The instruction forms the simulator must execute, derived from iced-x86's tables (not listed by
hand): every VEX-encoded 64-bit-mode form whose CPUID features all lie in :data:`EXTENSIONS`
(:func:`vex_forms`), and every EVEX form, and VEX form of the extensions that came with AVX-512,
whose features lie in :data:`AVX512_EXTENSIONS` (:func:`avx512_forms`: what Zen 4 and Zen 5 ship).

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
AVX512_EXTENSIONS = ("AVX512F", "AVX512CD", "AVX512BW", "AVX512DQ", "AVX512_IFMA", "AVX512_VBMI",
                     "AVX512_VBMI2", "AVX512_VNNI", "AVX512_BITALG", "AVX512_VPOPCNTDQ", "AVX512_BF16",
                     "AVX512_VP2INTERSECT", "GFNI", "VAES", "VPCLMULQDQ", "AVX_VNNI")
"""The extensions whose EVEX forms (and VEX forms: the opmask instructions, AVX-VNNI, and the VEX
forms of GFNI, VAES and VPCLMULQDQ) the simulator covers, in report order. ``AVX512VL`` (the
128/256-bit EVEX forms) counts with the extension it extends."""
ALL_EXTENSIONS = EXTENSIONS + AVX512_EXTENSIONS
CPU_FLAGS = {"AVX": "avx", "AVX2": "avx2", "FMA": "fma", "F16C": "f16c", "BMI1": "bmi1", "BMI2": "bmi2",
             "AVX512F": "avx512f", "AVX512CD": "avx512cd", "AVX512BW": "avx512bw",
             "AVX512DQ": "avx512dq", "AVX512_IFMA": "avx512ifma", "AVX512_VBMI": "avx512vbmi",
             "AVX512_VBMI2": "avx512_vbmi2", "AVX512_VNNI": "avx512_vnni",
             "AVX512_BITALG": "avx512_bitalg", "AVX512_VPOPCNTDQ": "avx512_vpopcntdq",
             "AVX512_BF16": "avx512_bf16", "AVX512_VP2INTERSECT": "avx512_vp2intersect",
             "GFNI": "gfni", "VAES": "vaes", "VPCLMULQDQ": "vpclmulqdq", "AVX_VNNI": "avx_vnni"}
"""Extension -> the Linux ``/proc/cpuinfo`` flag of a CPU that executes it."""
VL_FLAG = "avx512vl"
"""The ``/proc/cpuinfo`` flag of AVX512VL (the 128/256-bit EVEX forms)."""
VECTOR_ISA_FLAGS = (*CPU_FLAGS.values(), VL_FLAG)
"""Every CPU flag a platform may declare in its ``isa`` list (and the model checks code against)."""
_MODIFIERS = ("AVX512VL", "AVX", "AVX2", "AVX512F")
"""Features that only qualify another (a form listing AVX512F and GFNI is a GFNI form)."""
ROUNDING = (iced.RoundingControl.ROUND_TO_NEAREST, iced.RoundingControl.ROUND_DOWN,
            iced.RoundingControl.ROUND_UP, iced.RoundingControl.ROUND_TOWARD_ZERO)

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
    """One iced-x86 instruction form. ``kinds``: iced ``OpCodeOperandKind`` names per operand.
    EVEX forms: ``masking`` (0 none, 1 merge, 2 merge or zero; 3: a mask is required),
    ``broadcast``, ``rounding`` (static rounding), ``sae``."""

    code: int
    name: str
    mnemonic: str
    extension: str
    kinds: tuple[str, ...]
    unique_registers: bool
    evex: bool = False
    masking: int = 0
    broadcast: bool = False
    rounding: bool = False
    sae: bool = False

    @property
    def vector_registers(self) -> int:
        return 32 if self.evex else 16

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
               scale: int = 1, mask: int = 0, zeroing: bool = False, broadcast: bool = False,
               rounding: int | None = None, sae: bool = False) -> bytes:
        """The encoding with register numbers ``registers`` (one per register operand, in order;
        GPR numbers index :data:`GPR64`), the ``*_OR_MEM`` operand as ``[rdx + disp]`` when
        ``memory``, and ``imm`` as the 8-bit immediate; EVEX: write mask ``k<mask>`` (merging, or
        zeroing), embedded broadcast, static rounding (an iced ``RoundingControl``) or SAE."""
        regs = iter(registers)
        args: list[tuple[str, object]] = []
        for kind in self.kinds:
            cls = kind.split("_")[0]
            if kind == "IMM8":
                args.append(("u32", imm & 0xFF))
            elif kind == "MEM" or (memory and kind.endswith("_OR_MEM")):
                args.append(("mem", iced.MemoryOperand(MEMORY_BASE, displ=disp)))
            elif kind.startswith("MEM_VSIB"):
                width = {"X": "XMM", "Y": "YMM", "Z": "ZMM"}[kind[-1]]
                index = getattr(_R, f"{width}{next(regs)}")
                args.append(("mem", iced.MemoryOperand(MEMORY_BASE, index, scale, displ=disp)))
            elif cls in ("XMM", "YMM", "ZMM"):
                args.append(("reg", getattr(_R, f"{cls}{next(regs)}")))
            elif cls in ("K", "KP1"):
                args.append(("reg", getattr(_R, f"K{next(regs)}")))
            elif cls in ("R32", "R64"):
                args.append(("reg", getattr(_R, (GPR32 if cls == "R32" else GPR64)[next(regs)])))
            else:
                raise ValueError(f"{self.name}: operand kind {kind} has no encoding rule")
        create = getattr(iced.Instruction, "create_" + "_".join(t for t, _ in args))
        ins = create(self.code, *[v for _, v in args])
        if mask:
            ins.op_mask = _R.K0 + mask
            ins.zeroing_masking = zeroing
        ins.is_broadcast = broadcast
        if rounding is not None:
            ins.rounding_control = rounding
        ins.suppress_all_exceptions = sae
        encoder = iced.Encoder(64)
        encoder.encode(ins, 0)
        return bytes(encoder.take_buffer())

    def register_count(self) -> int:
        """Register numbers :meth:`encode` takes (register operands, ``*_OR_MEM`` ones included,
        and the index of a VSIB operand)."""
        return sum(1 for k in self.kinds if k != "IMM8" and k != "MEM")

    def _register_sets(self, n: int) -> list[list[int]]:
        """Distinct low registers, distinct high ones and (unless the form forbids it) one register
        in every operand; opmask operands use k1..k7 (k0 can be a source), even for pairs."""
        gpr = any(k.split("_")[0] in ("R32", "R64") for k in self.kinds)
        top = len(GPR64) if gpr else self.vector_registers
        sets = [list(range(1, 1 + n)), [top - 1 - i for i in range(n)]]
        if not self.unique_registers:
            sets.append([3] * n)
        register_kinds = [k for k in self.kinds if k not in ("IMM8", "MEM")]
        out = []
        for regs in sets:
            fixed = []
            for kind, r in zip(register_kinds, regs, strict=True):
                if kind.startswith("KP1"):
                    r = 2 * (r % 4) if r % 4 else 2
                elif kind.startswith("K_"):
                    r = 1 + r % 7
                elif kind.split("_")[0] in ("R32", "R64"):
                    r = r % len(GPR64)
                fixed.append(r)
            out.append(fixed)
        return out

    def encodings(self, imms: Sequence[int] = (0x1B,), disps: Sequence[int] = (8,)) -> Iterator[bytes]:
        """Representative encodings: distinct low registers, one register repeated in every operand
        (aliasing; skipped where the form requires distinct registers), high registers, and the
        memory variant of a ``*_OR_MEM`` operand, each with every immediate of ``imms``."""
        choices = self._register_sets(self.register_count())
        memory = [False, True] if self.has_memory and self.register_only else [self.has_memory]
        for imm in (imms if self.has_immediate else (0,)):
            for i, regs in enumerate(choices):
                for mem in memory:
                    for disp in (disps if mem else (0,)):
                        yield self.encode(regs, mem, disp=disp, imm=imm, scale=4, **self._options(i, mem))
        if not self.evex:
            return
        # the EVEX options each once more: broadcast, every static rounding mode, SAE
        regs = choices[0]
        if self.broadcast:
            yield self.encode(regs, True, disp=disps[0], imm=imms[0] if self.has_immediate else 0,
                              scale=4, broadcast=True, **self._options(1, True))
        for rc in ROUNDING if self.rounding else ():
            yield self.encode(regs, False, imm=imms[0] if self.has_immediate else 0, rounding=rc,
                              **self._options(1, False))
        if self.sae:
            yield self.encode(regs, False, imm=imms[0] if self.has_immediate else 0, sae=True,
                              **self._options(2, False))

    def _options(self, variant: int, memory: bool) -> dict[str, object]:
        """The write mask of encoding variant ``variant``: none (unless required), merging with
        k1..k7, zeroing (where allowed)."""
        if not self.masking or (variant == 0 and self.masking != 3):
            return {}
        mask = 1 + (variant * 3) % 7
        return {"mask": mask, "zeroing": variant == 2 and self.masking == 2 and not memory}


def _form(info: iced.OpCodeInfo, extensions: tuple[str, ...] = EXTENSIONS) -> Form | None:
    kinds = tuple(_KIND_NAMES[k] for k in info.op_kinds())
    evex = info.encoding == iced.EncodingKind.EVEX
    masking = (3 if info.require_op_mask_register else 2 if info.can_use_zeroing_masking else 1) \
        if info.can_use_op_mask_register else 0
    probe = Form(info.code, _CODE_NAMES[info.code], "", "", kinds, info.requires_unique_reg_nums,
                 evex, masking, info.can_broadcast, info.can_use_rounding_control,
                 info.can_suppress_all_exceptions)
    try:
        code = probe.encode(probe._register_sets(probe.register_count())[0], probe.has_memory,
                            **probe._options(1, probe.has_memory))
    except (ValueError, AttributeError):
        return None  # tile or other registers: not an extension of these lists
    ins = iced.Decoder(64, code).decode()
    if ins.code != info.code:  # e.g. a Knights Corner form, which decodes as another instruction
        return None
    features = [_FEATURE_NAMES[f] for f in ins.cpuid_features()]
    allowed = set(extensions) | (set(_MODIFIERS) if extensions is AVX512_EXTENSIONS else set())
    if not features or any(f not in allowed for f in features):
        return None
    named = [f for f in features if f in extensions and f not in _MODIFIERS] or \
        [f for f in features if f in extensions]
    if not named:
        return None
    extension = max(named, key=extensions.index)
    return Form(info.code, probe.name, MNEMONIC_NAMES[ins.mnemonic], extension, kinds,
                info.requires_unique_reg_nums, evex, masking, info.can_broadcast,
                info.can_use_rounding_control, info.can_suppress_all_exceptions)


def _forms(encodings: tuple[int, ...], extensions: tuple[str, ...]) -> tuple[Form, ...]:
    """The 64-bit-mode forms of ``encodings`` (iced ``EncodingKind`` values) whose features lie in
    ``extensions``, in ``Code`` order."""
    out = []
    for code in sorted(_CODE_NAMES):
        try:
            info = iced.OpCodeInfo(code)
        except ValueError:
            continue
        if info.encoding not in encodings or not info.mode64:
            continue
        form = _form(info, extensions)
        if form is not None:
            out.append(form)
    return tuple(out)


@cache
def vex_forms() -> tuple[Form, ...]:
    """Every VEX form of :data:`EXTENSIONS` iced-x86 knows in 64-bit mode, in ``Code`` order."""
    return _forms((iced.EncodingKind.VEX,), EXTENSIONS)


@cache
def avx512_forms() -> tuple[Form, ...]:
    """Every EVEX form of :data:`AVX512_EXTENSIONS` iced-x86 knows in 64-bit mode, and the VEX
    forms of those extensions (opmask instructions, AVX-VNNI, GFNI, VAES, VPCLMULQDQ), in ``Code``
    order."""
    return _forms((iced.EncodingKind.VEX, iced.EncodingKind.EVEX), AVX512_EXTENSIONS)


def all_forms() -> tuple[Form, ...]:
    """:func:`vex_forms` then :func:`avx512_forms`."""
    return vex_forms() + avx512_forms()


def required_cpu_flags(ins: iced.Instruction) -> tuple[str, ...]:
    """The ``/proc/cpuinfo`` flags of :data:`VECTOR_ISA_FLAGS` a CPU needs to execute ``ins``
    (from iced-x86's CPUID features; features outside the list are not reported)."""
    flags = {**CPU_FLAGS, "AVX512VL": VL_FLAG}
    return tuple(dict.fromkeys(flags[n] for n in (_FEATURE_NAMES[f] for f in ins.cpuid_features())
                               if n in flags))
