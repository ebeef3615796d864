"""Assembly generator of the T-SAR BitLinear kernels (AVX2 or AVX-512 + T-SAR mnemonics, Intel syntax).

Each kernel is specialised to one :class:`~tsar.kernels.tsar_plan.KernelPlan` (configuration,
dataflow, M, K), as LUT kernels are (bitnet.cpp generates its TL2 kernels per shape too).

The core runs at the configuration's width (xmm / ymm, or zmm0..31 with EVEX at 512 bits); int32
rows are processed in ``plan.row_bits`` vectors (ymm, zmm at 512 bits: AVX-512 F/BW widening,
zeroing and stores); quantization is AVX2 at every width. keystone has no AVX-512, so each x86
line that needs EVEX is emitted as a ``.byte`` line encoded by iced-x86, its text as the comment.

Calling convention (System V)::

    void kernel(const float   *x,        // rdi: N x K float32 activations, row-major
                const uint8_t *weights,  // rsi: packed by tsar.kernels.formats.tsar.pack_weights
                float         *y,        // rdx: N x M float32 outputs, row-major
                uint64_t       n,        // rcx: tokens N (0 does nothing)
                uint8_t       *ws,       // r8:  workspace, plan.workspace_bytes, 64-byte aligned
                const float   *w_scale)  // r9:  the per-tensor weight scale

Per token the kernel quantizes ``x`` to int8 (per-token absmax, exactly as
:mod:`tsar.kernels.quant`), runs the dataflow's integer core into an int32 row of the workspace,
and dequantizes into ``y``: quantization and dequantization are part of the measured path.
Callee-saved registers are preserved; ``vzeroupper`` runs before returning.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Sequence
from functools import cache, lru_cache
from itertools import groupby, product

import iced_x86 as iced

from tsar.isa.bytelines import byte_line
from tsar.isa.config import VECTOR_REGISTERS, VECTOR_WIDTHS
from tsar.isa.instructions import MEMORY_SIZE_NAMES, mnemonics
from tsar.kernels.tsar_plan import TOKEN_BLOCKED, KernelPlan, Window

_SAVED = ("rbx", "rbp", "r12", "r13", "r14", "r15")


def _f32_bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


# --- EVEX lines ----------------------------------------------------------------------------------
# keystone assembles no AVX-512: an x86 line of a 512-bit kernel that needs EVEX (a zmm, an x/ymm16+,
# an EVEX-only mnemonic) is encoded here with iced-x86 and emitted as a ``.byte`` line, its text kept
# as the line's comment.

_K = iced.OpCodeOperandKind
_OPERAND_CLASSES = {
    **{getattr(_K, f"{r.upper()}_{kind}"): (r,) for r, _ in VECTOR_WIDTHS.values()
       for kind in ("REG", "RM", "VVVV")},
    **{getattr(_K, f"{r.upper()}_OR_MEM"): (r, "mem") for r, _ in VECTOR_WIDTHS.values()},
    _K.MEM: ("mem",), _K.IMM8: ("imm",),
}
"""iced operand kinds of the EVEX forms the kernels use -> the operand classes a line may give."""
_VECTOR_RE = re.compile(r"\b([xyz]mm)(\d+)\b")
_MEMORY_RE = re.compile(r"(?:(\w+)\s+ptr\s+)?\[([^\]]*)\]")
_SIZE_BYTES = {name: size for size, name in MEMORY_SIZE_NAMES.items()}
_CREATE = {"reg": "reg", "mem": "mem", "imm": "u32"}


@cache
def _evex_forms() -> tuple[dict[tuple[str, tuple[str, ...]], int], frozenset[str]]:
    """iced's EVEX codes by ``(mnemonic, operand classes)``, and the mnemonics that only EVEX has."""
    forms: dict[tuple[str, tuple[str, ...]], int] = {}
    evex, other = set(), set()
    for name in dir(iced.Code):
        code = getattr(iced.Code, name)
        if name.startswith("_") or not isinstance(code, int):
            continue
        info = iced.OpCodeInfo(code)
        mnemonic = info.instruction_string.split(" ")[0].lower()
        if info.encoding != iced.EncodingKind.EVEX:
            other.add(mnemonic)
            continue
        classes = [_OPERAND_CLASSES.get(info.op_kind(i)) for i in range(info.op_count)]
        if None not in classes:
            evex.add(mnemonic)
            for form in product(*classes):
                forms.setdefault((mnemonic, form), code)
    return forms, frozenset(evex - other)


def _needs_evex(line: str, tsar_mnemonics: frozenset[str] | None = None) -> bool:
    """Whether an x86 line needs EVEX: a zmm, an x/ymm above the VEX registers, or an EVEX-only
    mnemonic (T-SAR lines, of ``tsar_mnemonics`` (default: the registered ones), are the
    assembler's)."""
    mnemonic = line.split(" ", 1)[0]
    if mnemonic in (mnemonics() if tsar_mnemonics is None else tsar_mnemonics):
        return False
    return (any(r == "zmm" or int(n) >= VECTOR_REGISTERS for r, n in _VECTOR_RE.findall(line))
            or mnemonic in _evex_forms()[1])


def _memory_operand(address: str) -> iced.MemoryOperand:
    """``base + index*scale + disp`` (each part optional, ``-`` for a negative displacement)."""
    base = index = iced.Register.NONE
    scale, disp = 1, 0
    for sign, term in re.findall(r"([+-]?)\s*([^+\-\s]+)", address):
        if term[0].isdigit():
            disp += -int(term, 0) if sign == "-" else int(term, 0)
        elif "*" in term:
            reg, factor = term.split("*")
            index, scale = getattr(iced.Register, reg.upper()), int(factor)
        elif base == iced.Register.NONE:
            base = getattr(iced.Register, term.upper())
        else:
            index = getattr(iced.Register, term.upper())
    return iced.MemoryOperand(base, index, scale, disp, 1 if disp else 0)


def _evex_line(line: str) -> str:
    """An Intel-syntax EVEX instruction (registers, ``[base + index*scale + disp]``, an immediate)
    as a ``.byte`` line commented with its text."""
    mnemonic, _, rest = line.partition(" ")
    classes, kinds, args, size = [], [], [], None
    for op in (o.strip() for o in rest.split(",") if o.strip()):
        if reg := _VECTOR_RE.fullmatch(op):
            classes.append(reg[1])
            kinds.append("reg")
            args.append(getattr(iced.Register, op.upper()))
        elif mem := _MEMORY_RE.fullmatch(op):
            classes.append("mem")
            kinds.append("mem")
            args.append(_memory_operand(mem[2]))
            size = _SIZE_BYTES.get(mem[1] or "")
        else:
            classes.append("imm")
            kinds.append("imm")
            args.append(int(op, 0))
    code = _evex_forms()[0].get((mnemonic, tuple(classes)))
    if code is None:
        raise ValueError(f"no EVEX form of {line!r}")
    ins = getattr(iced.Instruction, "create_" + "_".join(_CREATE[k] for k in kinds))(code, *args)
    if size not in (None, iced.MemorySizeInfo(ins.memory_size).size):
        raise ValueError(f"{line!r}: the EVEX form reads {iced.MemorySizeInfo(ins.memory_size).size} bytes")
    return f"{byte_line(ins)}  ; {line}"


@lru_cache(maxsize=1 << 16)
def _emitted(line: str, tsar_mnemonics: frozenset[str]) -> str:
    """A source line as emitted: indented, and an EVEX one as its ``.byte`` line (the generator emits
    the same lines for many shapes: each is translated once)."""
    return f"    {_evex_line(line) if _needs_evex(line, tsar_mnemonics) else line}"


LOOP_OMITTED, LOOP_INLINE, LOOP_COUNTED = 0, 1, 2
"""How :meth:`_Emitter.counted_loop` emits a loop: not at all (count 0), its body once (count 1),
or a counted loop (count 2 or more, or any positive count when a layout is replayed)."""


class _Emitter:
    def __init__(self, prefix: str, loops: Sequence[int] | None = None) -> None:
        self.lines: list[str] = []
        self.prefix = prefix
        self.labels = 0
        self.loops: list[int] = []  # the form of each counted loop, in emission order
        self._replay = None if loops is None else iter(loops)
        self._tsar = mnemonics()

    def __call__(self, *lines: str) -> None:
        self.lines += [_emitted(line, self._tsar) for line in lines]

    def label(self, name: str) -> str:
        self.labels += 1
        return f"{self.prefix}_{name}{self.labels}"

    def place(self, label: str) -> None:
        self.lines.append(f"{label}:")

    def counted_loop(self, counter: str, count: int, body: Callable[[], None], name: str) -> None:
        """``body`` ``count`` times (unrolled once when ``count == 1``, omitted when 0; or in the
        form the replayed layout gives, a counted loop also for ``count == 1``)."""
        form = min(max(count, 0), LOOP_COUNTED)
        if self._replay is not None:
            replayed = next(self._replay, None)
            if replayed != form and not (replayed == LOOP_COUNTED and count == 1):
                raise ValueError(f"loop {name} of {count} iteration(s) cannot take the replayed form "
                                 f"{replayed}")
            form = replayed
        self.loops.append(form)
        if form == LOOP_OMITTED:
            return
        if form == LOOP_INLINE:
            body()
            return
        top = self.label(name)
        self(f"mov {counter}, {count}")
        self.place(top)
        body()
        self(f"dec {counter}", f"jnz {top}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def replayed_all(self) -> bool:
        """Whether every replayed loop form was used (True when none are replayed)."""
        return self._replay is None or next(self._replay, None) is None


def function_name(plan: KernelPlan) -> str:
    return plan.name.replace("-", "_")


def generate(plan: KernelPlan, *, loops: Sequence[int] | None = None) -> str:
    """The kernel's assembly source (one function named :func:`function_name`).

    ``loops``: the form of every counted loop (:func:`loop_forms` of another shape of the same
    kernel) instead of the shape's own: a loop of one iteration is then a counted loop where the
    other shape has one, so that the two shapes run the same instruction sequence (the simulator
    extrapolates counts between such shapes). ValueError where the shape cannot take them."""
    return _emit(plan, loops).text()


def loop_forms(plan: KernelPlan) -> tuple[int, ...]:
    """How :func:`generate` emits each counted loop of ``plan``'s kernel (``LOOP_*``, in order)."""
    return tuple(_emit(plan, None).loops)


def generate_with_forms(plan: KernelPlan, *, loops: Sequence[int] | None = None
                        ) -> tuple[str, tuple[int, ...]]:
    """:func:`generate` and the forms its counted loops took (``loops`` where given)."""
    e = _emit(plan, loops)
    return e.text(), tuple(e.loops)


def _emit(plan: KernelPlan, loops: Sequence[int] | None) -> _Emitter:
    name = function_name(plan)
    e = _Emitter(name, loops)
    ws = plan.workspace_layout
    e.lines += [
        f"; {plan.name}: BitLinear {plan.M} x {plan.K} with {plan.cfg.title}, dataflow {plan.flow}",
        f"; LUT groups {plan.groups}, accumulators {plan.accumulators}, widen every "
        f"{plan.widen_every} TGEMVs; weights {plan.weight_bytes} bytes, workspace {plan.workspace_bytes}",
        f"{name}:",
    ]
    e(*(f"push {reg}" for reg in _SAVED))
    done = e.label("done")
    e("test rcx, rcx", f"jz {done}")
    if plan.flow in TOKEN_BLOCKED:
        _generate_tokens(e, plan, done)
    else:
        token = e.label("token")
        e.place(token)
        _quantize(e, plan)
        _zero_acc32(e, plan)
        if plan.flow == "op":
            _core_op(e, plan)
        else:
            _core_ap(e, plan)
        _dequantize(e, plan)
        e(f"add rdi, {4 * plan.K}", f"add rdx, {4 * plan.M}", "dec rcx", f"jnz {token}")
    e.place(done)
    e("vzeroupper", *(f"pop {reg}" for reg in reversed(_SAVED)), "ret")
    e.lines += [
        ".align 16",
        f"{name}_eps: .long {_f32_bits(1e-5):#010x}",
        f"{name}_f127: .long {_f32_bits(127.0):#010x}",
        f"{name}_i127: .long 127",
        f"{name}_im127: .long -127",
    ]
    assert ws["xq"][0] == 0
    if not e.replayed_all():
        raise ValueError(f"{plan.name} {plan.M} x {plan.K} has fewer counted loops than the replayed layout")
    return e


def _quantize(e: _Emitter, plan: KernelPlan) -> None:
    """x[rdi] (K float32) -> ws.xq (K_pad int8: K quantized, then the padding zeroed);
    ws.dequant = (amax / 127) * w_scale."""
    name, K = e.prefix, plan.K
    xq, deq = plan.workspace_layout["xq"][0], plan.workspace_layout["dequant"][0]
    e("vpcmpeqd ymm15, ymm15, ymm15", "vpsrld ymm15, ymm15, 1",  # |x| mask
      "vxorps ymm14, ymm14, ymm14", "xor eax, eax")
    loop = e.label("amax")
    e.place(loop)
    e("vandps ymm0, ymm15, ymmword ptr [rdi + rax*4]", "vmaxps ymm14, ymm14, ymm0",
      "add rax, 8", f"cmp rax, {K}", f"jb {loop}")
    e("vextractf128 xmm0, ymm14, 1", "vmaxps xmm14, xmm14, xmm0",
      "vpshufd xmm0, xmm14, 0x4e", "vmaxps xmm14, xmm14, xmm0",
      "vpshufd xmm0, xmm14, 0xb1", "vmaxps xmm14, xmm14, xmm0",
      f"vbroadcastss xmm0, dword ptr [rip + {name}_eps]", "vmaxps xmm14, xmm14, xmm0",
      f"vbroadcastss xmm0, dword ptr [rip + {name}_f127]",
      "vdivps xmm13, xmm0, xmm14",  # 127 / amax
      "vdivps xmm12, xmm14, xmm0",  # amax / 127
      "vbroadcastss xmm0, dword ptr [r9]", "vmulps xmm12, xmm12, xmm0",
      f"vmovd dword ptr [r8 + {deq}], xmm12",
      "vbroadcastss ymm13, xmm13",
      f"vpbroadcastd ymm11, dword ptr [rip + {name}_i127]",
      f"vpbroadcastd ymm10, dword ptr [rip + {name}_im127]",
      "xor eax, eax")
    loop = e.label("quant")
    e.place(loop)
    e("vmulps ymm0, ymm13, ymmword ptr [rdi + rax*4]", "vcvtps2dq ymm0, ymm0",
      "vpminsd ymm0, ymm0, ymm11", "vpmaxsd ymm0, ymm0, ymm10",
      "vpackssdw ymm0, ymm0, ymm0", "vpacksswb ymm0, ymm0, ymm0",
      "vextracti128 xmm1, ymm0, 1", "vpunpckldq xmm0, xmm0, xmm1",
      f"vmovq qword ptr [r8 + rax + {xq}], xmm0",
      "add rax, 8", f"cmp rax, {K}", f"jb {loop}")
    if plan.padding:  # the last chunk's inputs past K: zero, whatever the workspace held
        starts = range(K, plan.K_pad, 8)  # 8-byte stores inside the field's 64-byte-rounded bytes
        assert starts[-1] + 8 <= -(-plan.workspace_layout["xq"][1] // 64) * 64
        e("vpxor xmm0, xmm0, xmm0", *(f"vmovq qword ptr [r8 + {xq + at}], xmm0" for at in starts))


def _zero_acc32(e: _Emitter, plan: KernelPlan) -> None:
    acc, rb = plan.workspace_layout["acc32"][0], plan.row_bits
    e("vpxor xmm0, xmm0, xmm0", "xor eax, eax")  # a VEX write zeroes the register up to zmm
    loop = e.label("zero")
    e.place(loop)
    e(f"{_move(rb)} {_memory(rb // 8, f'r8 + rax*4 + {acc}')}, {_reg(rb, 0)}", f"add rax, {rb // 32}",
      f"cmp rax, {plan.M}", f"jb {loop}")


def _dequantize(e: _Emitter, plan: KernelPlan) -> None:
    acc, deq = plan.workspace_layout["acc32"][0], plan.workspace_layout["dequant"][0]
    rb = plan.row_bits
    scale, y = _reg(rb, 15), _reg(rb, 0)
    e(f"vbroadcastss {scale}, dword ptr [r8 + {deq}]", "xor eax, eax")
    loop = e.label("deq")
    e.place(loop)
    e(f"vcvtdq2ps {y}, {_memory(rb // 8, f'r8 + rax*4 + {acc}')}", f"vmulps {y}, {y}, {scale}",
      f"vmovups {_memory(rb // 8, 'rdx + rax*4')}, {y}", f"add rax, {rb // 32}", f"cmp rax, {plan.M}",
      f"jb {loop}")


def _memory(nbytes: int, address: str) -> str:
    """A memory operand of ``nbytes``: with its ``... ptr`` keyword where Intel syntax has one
    (T-SAR operands of other sizes, e.g. c3s2's 6-byte activations, take their size from the ISA)."""
    size = MEMORY_SIZE_NAMES.get(nbytes)
    return f"{size} ptr [{address}]" if size else f"[{address}]"


def _tlut(plan: KernelPlan, group: int, address: str) -> str:
    r = plan.cfg.register_class
    return f"{plan.cfg.tlut_mnemonic} {r}{plan.group_register(group)}, {_memory(plan.cfg.k, address)}"


def _tgemv(plan: KernelPlan, acc: int, group: int, address: str) -> str:
    r = plan.cfg.register_class
    return (f"{plan.cfg.tgemv_mnemonic} {r}{acc}, {r}{plan.group_register(group)}, "
            f"{_memory(plan.cfg.weight_bytes, address)}")


def _tgemv_reg(plan: KernelPlan, acc: int, group: int, weights: int) -> str:
    """TGEMV with its weight operand in registers (from register ``weights``, an aligned group when the
    operand spans several)."""
    r = plan.cfg.register_class
    return f"{plan.cfg.tgemv_mnemonic} {r}{acc}, {r}{plan.group_register(group)}, {r}{weights}"


def _vec(plan: KernelPlan, reg: int) -> str:
    """Vector register ``reg`` at the configuration's width (``ymm3`` / ``xmm3`` / ``zmm3``)."""
    return f"{plan.cfg.register_class}{reg}"


def _vmem(plan: KernelPlan, address: str) -> str:
    """A memory operand of one vector register at the configuration's width."""
    return _memory(plan.cfg.register_bytes, address)


def _reg(bits: int, reg: int) -> str:
    """Vector register ``reg`` at width ``bits``."""
    return f"{VECTOR_WIDTHS[bits][0]}{reg}"


def _move(bits: int) -> str:
    """The integer vector move at width ``bits``: ``vmovdqu`` (VEX), ``vmovdqu64`` (EVEX, unmasked)."""
    return "vmovdqu64" if VECTOR_WIDTHS[bits][1] == "evex" else "vmovdqu"


def _vmove(plan: KernelPlan, dst: str, src: str) -> str:
    """A whole-register move at the configuration's width."""
    return f"{_move(plan.cfg.vector_bits)} {dst}, {src}"


def _zero(plan: KernelPlan, reg: int) -> str:
    """Zero register ``reg`` at the configuration's width (``vpxor``, EVEX ``vpxord``)."""
    v = _vec(plan, reg)
    return f"{'vpxord' if plan.cfg.encoding == 'evex' else 'vpxor'} {v}, {v}, {v}"


_EXTRACT_HIGH = {256: "vextracti128", 512: "vextracti64x4"}
"""Integer extraction of a half register, by the register's width."""


def _add_tile(plan: KernelPlan, partial: str | int, acc32: str, temps: tuple[int, ...]) -> list[str]:
    """Add one tile's ``m`` partial sums (``acc_bits`` lanes, in register ``partial`` when an int,
    else at memory address ``partial``) into its int32 row at address ``acc32`` (``4m`` bytes).
    int16 partials are sign-extended one row vector at a time (``row_bits / 32`` lanes: 8 into a
    ymm, 16 into a zmm from a register's upper or lower half) into ``temps``; int32 ones are added
    in ``temps[0]`` (or in the register itself)."""
    cfg = plan.cfg
    out: list[str] = []
    if not cfg.needs_widening:  # int32 lanes: one register of m lanes
        if isinstance(partial, int):
            reg = _vec(plan, partial)
        else:
            reg = _vec(plan, temps[0])
            out.append(_vmove(plan, reg, _vmem(plan, partial)))
        out += [f"vpaddd {reg}, {reg}, {_vmem(plan, acc32)}", _vmove(plan, _vmem(plan, acc32), reg)]
        return out
    rb = plan.row_bits
    half = rb // 2
    for h in range(cfg.m // (rb // 32)):
        t, dst = temps[h % len(temps)], _memory(rb // 8, _disp(acc32, rb // 8 * h))
        if isinstance(partial, int):
            if h == 0:
                out.append(f"vpmovsxwd {_reg(rb, t)}, {_reg(half, partial)}")
            else:
                out += [f"{_EXTRACT_HIGH[cfg.vector_bits]} {_reg(half, t)}, {_vec(plan, partial)}, {h}",
                        f"vpmovsxwd {_reg(rb, t)}, {_reg(half, t)}"]
        else:
            out.append(f"vpmovsxwd {_reg(rb, t)}, {_memory(half // 8, _disp(partial, half // 8 * h))}")
        out += [f"vpaddd {_reg(rb, t)}, {_reg(rb, t)}, {dst}", f"{_move(rb)} {dst}, {_reg(rb, t)}"]
    return out


def _disp(base: str, offset: int) -> str:
    return f"{base} + {offset}" if offset else base


def _window_runs(windows: tuple[Window, ...]) -> list[tuple[Window, int]]:
    """Consecutive windows with the same batch structure, as ``(window, repeat)``."""
    return [(group[0], len(group)) for _, g in groupby(windows, key=lambda w: w.batches)
            for group in [list(g)]]


def _op_pass(e: _Emitter, plan: KernelPlan, r: int) -> None:
    """One output-persistent pass of ``r`` tiles over K: r10 walks the pass's weights (left at the
    next pass), r11 the token's int8 activations, rbx points at the tiles' int32 rows (kept)."""
    cfg, wb, a32 = plan.cfg, plan.cfg.weight_bytes, plan.tile_acc32_bytes
    temps = (plan.first_temp, plan.first_temp + 1)
    e(*(_zero(plan, a) for a in range(r)))
    for window, repeat in _window_runs(plan.windows):
        def window_body(window: Window = window) -> None:
            def chunk() -> None:
                e(_tlut(plan, 0, "r11"))
                e(*(_tgemv(plan, a, 0, _disp("r10", a * wb)) for a in range(r)))
                e(f"add r10, {r * wb}", f"add r11, {cfg.k}")
            e.counted_loop("r12", window.chunks, chunk, "chunk")
            for a in range(r):
                e(*_add_tile(plan, a, _disp("rbx", a32 * a), temps),
                  _zero(plan, a))
        e.counted_loop("r13", repeat, window_body, "window")


def _core_op(e: _Emitter, plan: KernelPlan) -> None:
    """Output-persistent: R accumulators in registers across K; widen into ws.acc32 per window."""
    acc32, xq = plan.workspace_layout["acc32"][0], plan.workspace_layout["xq"][0]
    e("mov r10, rsi", f"lea rbx, [r8 + {acc32}]")

    def one_pass(r: int) -> None:
        e(f"lea r11, [r8 + {xq}]")
        _op_pass(e, plan, r)
        e(f"add rbx, {plan.tile_acc32_bytes * r}")

    for r, group in groupby(plan.passes, key=lambda p: p[1]):
        e.counted_loop("r14", len(list(group)), lambda r=r: one_pass(r), "pass")


def _core_op_tokens(e: _Emitter, plan: KernelPlan) -> None:
    """Output-persistent passes outermost, the block's tokens inside: each pass's weights are read
    by every token of the block while they are cache-resident. rbp = workspace base, r15 = tokens
    in the block; [rsp] = the pass's weights, [rsp + 8] = its int32 row offset, [rsp + 16] = the
    token index."""
    acc32, xq, slot = plan.workspace_layout["acc32"][0], plan.workspace_layout["xq"][0], plan.slot_bytes
    e("sub rsp, 32", "mov qword ptr [rsp], rsi", "mov qword ptr [rsp + 8], 0")

    def one_pass(r: int) -> None:
        e("mov qword ptr [rsp + 16], 0")
        top = e.label("ptok")
        e.place(top)
        e("mov rax, qword ptr [rsp + 16]", f"imul rax, rax, {slot}", "lea rax, [rbp + rax]",
          "mov r10, qword ptr [rsp]", f"lea r11, [rax + {xq}]", f"lea rbx, [rax + {acc32}]",
          "add rbx, qword ptr [rsp + 8]")
        _op_pass(e, plan, r)
        e("inc qword ptr [rsp + 16]", "cmp qword ptr [rsp + 16], r15", f"jb {top}")
        e("mov qword ptr [rsp], r10", f"add qword ptr [rsp + 8], {plan.tile_acc32_bytes * r}")

    for r, group in groupby(plan.passes, key=lambda p: p[1]):
        e.counted_loop("r14", len(list(group)), lambda r=r: one_pass(r), "pass")
    e("add rsp, 32")


def _per_token(e: _Emitter, plan: KernelPlan, step: Callable[[], None], advance: str) -> None:
    """``step`` for each token of the block: r8 = its workspace slot (from rbp), ``advance`` moves
    the caller's pointer (rdi or rdx) to the next token; r12 counts."""
    e("mov r8, rbp", "xor r12d, r12d")
    top = e.label("slot")
    e.place(top)
    step()
    e(advance, f"add r8, {plan.slot_bytes}", "inc r12", "cmp r12, r15", f"jb {top}")


def _generate_tokens(e: _Emitter, plan: KernelPlan, done: str) -> None:
    """The token-blocked kernel body: blocks of up to ``token_block`` tokens; per block quantize
    every token into its slot, run the core, dequantize every token."""
    block = e.label("block")
    e("mov rbp, r8")
    if plan.flow == "ap-tokens":
        _zero_partial_rows(e, plan)
    e.place(block)
    e(f"mov r15, {plan.token_block}", "cmp rcx, r15", "cmovb r15, rcx")
    _per_token(e, plan, lambda: (_quantize(e, plan), _zero_acc32(e, plan)), f"add rdi, {4 * plan.K}")
    if plan.flow == "ap-tokens":
        _core_ap_tokens(e, plan)
    else:
        _core_op_tokens(e, plan)
    _per_token(e, plan, lambda: _dequantize(e, plan), f"add rdx, {4 * plan.M}")
    e("sub rcx, r15", f"jnz {block}")
    e("mov r8, rbp")


def _core_ap(e: _Emitter, plan: KernelPlan) -> None:
    """Activation-persistent: LUT groups stay while all tiles stream past; int16 partial sums live
    in ws.partial16 and are widened into ws.acc32 after each window."""
    cfg, wb, u_max, rb = plan.cfg, plan.cfg.weight_bytes, plan.accumulators, plan.cfg.register_bytes
    layout = plan.workspace_layout
    acc32, p16, xq = layout["acc32"][0], layout["partial16"][0], layout["xq"][0]
    e("mov r10, rsi", f"lea r11, [r8 + {xq}]")

    def tiles(g: int, u: int) -> None:
        e(*(_vmove(plan, _vec(plan, a), _vmem(plan, _disp('rbx', rb * a))) for a in range(u)))
        for a in range(u):
            e(*(_tgemv(plan, a, i, _disp("r10", (a * g + i) * wb)) for i in range(g)))
        e(*(_vmove(plan, _vmem(plan, _disp('rbx', rb * a)), _vec(plan, a)) for a in range(u)))
        e(f"add rbx, {rb * u}", f"add r10, {u * g * wb}")

    def batch(g: int) -> None:
        e(*(_tlut(plan, i, _disp("r11", i * cfg.k)) for i in range(g)))
        e(f"add r11, {g * cfg.k}", f"lea rbx, [r8 + {p16}]")
        e.counted_loop("r13", plan.tiles // u_max, lambda: tiles(g, u_max), "tiles")
        if plan.tiles % u_max:
            tiles(g, plan.tiles % u_max)

    def window_body(window: Window) -> None:
        e("vpxor xmm0, xmm0, xmm0", "xor eax, eax")
        zero = e.label("zp")
        e.place(zero)
        e(_vmove(plan, _vmem(plan, f'r8 + rax + {p16}'), _vec(plan, 0)), f"add rax, {rb}",
          f"cmp rax, {plan.tiles * plan.tile_partial_bytes}", f"jb {zero}")
        for g, run in groupby(window.batches):
            e.counted_loop("r12", len(list(run)), lambda g=g: batch(g), "batch")
        e(f"lea rbx, [r8 + {p16}]", f"lea rbp, [r8 + {acc32}]")

        def widen() -> None:  # one tile's m partials into its int32 row
            e(*_add_tile(plan, "rbx", "rbp", (0, 1)),
              f"add rbx, {plan.tile_partial_bytes}", f"add rbp, {plan.tile_acc32_bytes}")
        e.counted_loop("r13", plan.tiles, widen, "widen")

    for window, repeat in _window_runs(plan.windows):
        e.counted_loop("r14", repeat, lambda w=window: window_body(w), "window")


def _zero_partial_rows(e: _Emitter, plan: KernelPlan) -> None:
    """Zero the block's partial-sum rows once per call (each widening step re-zeroes what it read)."""
    rows, nbytes = plan.partials_offset, plan.token_block * plan.partial_row_bytes
    e("vpxor xmm0, xmm0, xmm0", "xor eax, eax")
    loop = e.label("zrows")
    e.place(loop)
    e(_vmove(plan, _vmem(plan, f'rbp + rax + {rows}'), _vec(plan, 0)), f"add rax, {plan.cfg.register_bytes}",
      f"cmp rax, {nbytes}", f"jb {loop}")


def _core_ap_tokens(e: _Emitter, plan: KernelPlan) -> None:
    """Activation-persistent over a token block: per tile block (pass) and chunk, the LUT groups of
    ``G = plan.token_groups`` tokens at a time, then every tile's weight operand (loaded once into
    registers, or a memory operand per token) applied to each of them, each token's int16 partial
    sums in its row of the block's partial-sum rows; after each window the rows are widened into
    the tokens' int32 rows and zeroed.

    rbp = workspace base, r15 = tokens in the block (both kept); r10 walks the weight stream; r8 =
    token 0's activations of the chunk; r11 / rbx = the sub-block's first token's activations /
    partial-sum row; rax = tokens left in the chunk; [rsp] = window counter, [rsp + 8] = byte offset
    of the tile block in an int32 row."""
    cfg, wb, G = plan.cfg, plan.cfg.weight_bytes, plan.token_groups
    acc32, xq, slot = plan.workspace_layout["acc32"][0], plan.workspace_layout["xq"][0], plan.slot_bytes
    rows, row = plan.partials_offset, plan.partial_row_bytes
    p16, a32 = plan.tile_partial_bytes, plan.tile_acc32_bytes
    w_reg = plan.weight_register
    e("sub rsp, 16", "mov r10, rsi", "mov qword ptr [rsp + 8], 0")

    def sub_block(g: int, tb: int, last: bool) -> None:
        e(*(_tlut(plan, i, _disp("r11", i * slot)) for i in range(g)))

        def tile() -> None:
            if plan.weights_in_register:
                e(*(_vmove(plan, _vec(plan, w_reg + j), _vmem(plan, _disp('r10', j * cfg.register_bytes)))
                    for j in range(cfg.weight_regs)))
            for i in range(g):
                e(_vmove(plan, _vec(plan, 0), _vmem(plan, _disp('rbx', i * row))),
                  _tgemv_reg(plan, 0, i, w_reg) if plan.weights_in_register else _tgemv(plan, 0, i, "r10"),
                  _vmove(plan, _vmem(plan, _disp('rbx', i * row)), _vec(plan, 0)))
            e(f"add r10, {wb}", f"add rbx, {p16}")
        e.counted_loop("r13", tb, tile, "tile")
        e(f"sub r10, {tb * wb}")
        if not last:
            e(f"add rbx, {g * row - tb * p16}", f"add r11, {g * slot}")

    def chunk(tb: int) -> None:
        e("mov rax, r15", "mov r11, r8", f"lea rbx, [rbp + {rows}]")
        full, rest, after = e.label("tfull"), e.label("trest"), e.label("tdone")
        e.place(full)
        e(f"cmp rax, {G}", f"jb {rest}")
        sub_block(G, tb, last=False)
        e(f"sub rax, {G}", f"jnz {full}", f"jmp {after}")
        e.place(rest)  # the block's last 1..G-1 tokens
        for g in range(1, G):
            nxt = e.label("tnext")
            e(f"cmp rax, {g}", f"jne {nxt}")
            sub_block(g, tb, last=True)
            e(f"jmp {after}")
            e.place(nxt)
        e.place(after)
        e(f"add r8, {cfg.k}", f"add r10, {tb * wb}")

    def widen(tb: int) -> None:
        e("vpxor xmm2, xmm2, xmm2", f"lea rbx, [rbp + {rows}]", "mov r11, qword ptr [rsp + 8]",
          "add r11, rbp", "xor eax, eax")
        top = e.label("twiden")
        e.place(top)

        def one_tile() -> None:
            e(*_add_tile(plan, "rbx", f"r11 + {acc32}", (0, 1)),
              _vmove(plan, _vmem(plan, 'rbx'), _vec(plan, 2)), f"add rbx, {p16}", f"add r11, {a32}")
        e.counted_loop("r13", tb, one_tile, "wtile")
        e(f"add rbx, {row - tb * p16}", f"add r11, {slot - tb * a32}", "inc rax", "cmp rax, r15",
          f"jb {top}")

    def tile_block(tb: int) -> None:
        e(f"lea r8, [rbp + {xq}]")
        for window, repeat in _window_runs(plan.windows):
            def window_body(window: Window = window) -> None:
                e.counted_loop("r12", window.chunks, lambda: chunk(tb), "chunk")
                widen(tb)
            e.counted_loop("qword ptr [rsp]", repeat, window_body, "window")
        e(f"add qword ptr [rsp + 8], {tb * a32}")

    for tb, group in groupby(plan.passes, key=lambda p: p[1]):
        e.counted_loop("r14", len(list(group)), lambda tb=tb: tile_block(tb), "tblock")
    e("add rsp, 16")
