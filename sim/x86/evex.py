"""Compile one decoded EVEX (AVX-512) instruction into a Python closure over a :class:`CpuState`.

An instruction without masking, broadcast or static rounding whose semantics are a VEX
instruction's at a wider vector goes through :func:`~tsar.sim.x86.vecexec.compile_vector` (the
VEX table, :data:`ALIASES` for the renamed forms, and the EVEX-only semantics of
:mod:`tsar.sim.x86.evexops`). Every other one is executed here:

* **write masks** (``{k1}``, ``{k1}{z}``): one mask bit per destination element
  (:func:`mask_element_bytes`); inactive elements keep the destination's old value (merging) or
  become zero (zeroing); a scalar instruction masks element 0 only;
* **masked memory**: a memory source or destination whose elements map one to one onto the mask's
  touches only the active elements, so masked-off bytes may lie in unmapped memory (fault
  suppression);
* **embedded broadcast** (``{1toN}``): one element read and repeated across the operand;
* **static rounding and SAE** (``{rn-sae}``...): the instruction runs under that rounding mode with
  every exception suppressed, and leaves the MXCSR flags alone; masked-off elements of a
  floating-point instruction raise no exception (they compute on 1.0 instead);
* **opmask destinations** (compares, tests, ``vpmov*2m``): bits above the element count are
  zeroed, and the write mask ANDs the result.

Every EVEX write to a vector register zeroes its bits above the instruction's vector length (up to
bit 511).
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable

import iced_x86 as iced
import numpy as np

from tsar.isa.config import EVEX_VECTOR_REGISTERS
from tsar.sim.x86 import flags as fl
from tsar.sim.x86.decode import Operand, address_fn, mnemonic, operands
from tsar.sim.x86.evexgather import compile_evex_vsib
from tsar.sim.x86.evexint import SPECIAL, vex_ops
from tsar.sim.x86.evexops import ALIASES, EVEX_OPS, mask_element_bytes, result_elements, vnni_ops
from tsar.sim.x86.fpenv import MASKS, RC_MASK, RC_SHIFT
from tsar.sim.x86.opdefs import Compiled, Op, Unsupported, mask_bools, mask_value
from tsar.sim.x86.state import CpuState
from tsar.sim.x86.vecexec import compile_vector, misaligned, reader
from tsar.sim.x86.vecops import ALIGNED_MOVES, OPS, U8

VEX_TABLE: ChainMap[str, Op] = ChainMap(vnni_ops(), vex_ops(), OPS)
"""VEX mnemonic -> semantics: AVX/AVX2/FMA/F16C and the VEX forms of the extensions that came with
AVX-512 (AVX-VNNI...), which share their semantics with the EVEX forms."""
TABLE: ChainMap[str, Op] = ChainMap(EVEX_OPS, VEX_TABLE)
"""EVEX mnemonic (after :data:`ALIASES`) -> semantics."""

_ONE_BITS = {2: np.uint16(0x3C00), 4: np.uint32(0x3F800000), 8: np.uint64(0x3FF0000000000000)}
"""1.0 in half, single and double precision: what masked-off elements of an FP op compute on."""
_TWO_BITS = {2: np.uint16(0x4000), 4: np.uint32(0x40000000), 8: np.uint64(0x4000000000000000)}
"""2.0: what masked-off elements of vfixupimm compute on (its imm8 can make 1.0 raise ZE or IE)."""
_UINTS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_K = iced.OpCodeOperandKind
_DESTINATION_MEMORY = (_K.XMM_OR_MEM, _K.YMM_OR_MEM, _K.ZMM_OR_MEM, _K.MEM)
WHOLE_MEMORY = ("vperm", "vpshuf", "vshuf", "vpunpck", "vunpck", "vpack", "valign", "vinsert",
                "vbroadcast", "vpbroadcast", "vpalignr", "vpslldq", "vpsrldq", "vmovddup", "vmovshdup",
                "vmovsldup", "vpmultishift", "vdbpsadbw", "vpsll", "vpsrl", "vpsra", "vgf2p8affine",
                "vpshufbitqmb", "vpexpand", "vexpand", "vpconflict", "vcvtne2ps2bf16")
"""Mnemonic prefixes whose memory source is read whole under a write mask: its elements do not
map one to one onto the destination's (permutes, shuffles, broadcasts, shift counts; vpconflict
compares each element with every earlier one), so a masked-off destination element does not make
a source element unused (no fault suppression)."""


def is_evex(ins: iced.Instruction) -> bool:
    return ins.encoding == iced.EncodingKind.EVEX


def compile_evex(ins: iced.Instruction, st: CpuState, trace: bool = False) -> Compiled:
    """Closure for an EVEX instruction; raises :class:`Unsupported` outside the coverage."""
    st.widen()  # from now on bits 511:256 may be live: VEX writes must zero them
    if ins.is_vsib:
        return compile_evex_vsib(ins, st, trace)
    name = ALIASES.get(mnemonic(ins), mnemonic(ins))
    special = SPECIAL.get(name)
    compiled = special(ins, st, trace) if special is not None else None
    if compiled is not None:
        return compiled
    op = TABLE.get(name)
    if op is None:
        raise Unsupported(name)
    masked = ins.op_mask != iced.Register.NONE
    static = ins.rounding_control != iced.RoundingControl.NONE or ins.suppress_all_exceptions
    opmask_operand = any(iced.RegisterExt.is_k(ins.op_register(i)) for i in range(ins.op_count)
                         if ins.op_kind(i) == iced.OpKind.REGISTER)
    if not (masked or ins.is_broadcast or static or op.to_mask or op.uses_mask or opmask_operand):
        return compile_vector(ins, st, trace, TABLE, EVEX_VECTOR_REGISTERS, ALIASES)
    return _compile_general(ins, name, op, st)


def _compile_general(ins: iced.Instruction, name: str, op: Op, st: CpuState) -> Compiled:
    ops = operands(ins)
    if any(o.kind == "other" for o in ops):
        raise Unsupported(name)
    imm = next((o.value & 0xFF for o in ops if o.kind == "imm"), None)
    regs = [o for o in ops if o.kind != "imm"]
    if op.writes_flags:  # vcomiss/vucomiss with SAE
        return _compile_flags(ins, op, regs, st)
    dst, srcs = regs[0], regs[1:]
    if op.reads_dst:
        srcs = [dst, *srcs]
    info = iced.OpCodeInfo(ins.code)
    esize = mask_element_bytes(mnemonic(ins), info, dst.size)
    scalar = is_scalar(name)
    covered = (16 << info.l) if dst.kind == "k" else dst.size  # bytes the write mask covers
    sources = [o.size for o in srcs if o.kind in ("vec", "mem") and not ins.is_broadcast] + \
        [iced.MemorySizeExt.size(info.memory_size) for o in srcs if o.kind == "mem" and ins.is_broadcast]
    count = 1 if scalar else result_elements(mnemonic(ins), covered // esize, max(sources, default=0))
    kreg = iced.RegisterExt.number(ins.op_mask) if ins.op_mask != iced.Register.NONE else 0
    k = st.k

    def active() -> np.ndarray | None:
        """The write mask as bools per element (None: every element active)."""
        return mask_bools(k[kreg], count) if kreg else None

    align = name in ALIGNED_MOVES
    per_element = 0 if scalar or name.startswith(WHOLE_MEMORY) else count
    readers = [_source(o, st, info, ins.is_broadcast, per_element, align) for o in srcs]
    mem_read = sum(o.size for o in srcs if o.kind == "mem")
    mem_written = dst.size if dst.kind == "mem" else 0
    compute = _computation(op, imm, dst, st, ins)
    if op.fp:
        rm_width = iced.MemorySizeExt.size(info.memory_size) if info.memory_size else esize
        one = _TWO_BITS if name.startswith("vfixupimm") else _ONE_BITS
        compute = _benign_inactive(compute, count, 0 if scalar else esize, esize, rm_width, one,
                                   _source_element_bytes(info))

    if op.to_mask:
        if dst.kind != "k":
            raise Unsupported(name)
        d = dst.reg

        def run_mask() -> None:
            m = active()
            bits = np.asarray(compute([r(m) for r in readers], m)).reshape(-1)[:count].astype(bool)
            if m is not None:
                bits &= m
            k[d] = mask_value(bits)
        return Compiled(run_mask, mem_read, 0)

    write = _destination(dst, st, esize, count, scalar, ins.zeroing_masking, op.uses_mask, align)
    if op.uses_mask:
        everything = np.ones(count, bool)
        zeroing = ins.zeroing_masking

        def run_self_masked() -> None:
            m = active()
            m = everything if m is None else m
            write(compute([r(m) for r in readers], m, zeroing), m)
        return Compiled(run_self_masked, mem_read, mem_written)

    def run() -> None:
        m = active()
        write(compute([r(m) for r in readers], m), m)
    return Compiled(run, mem_read, mem_written)


def _compile_flags(ins: iced.Instruction, op: Op, srcs: list[Operand], st: CpuState) -> Compiled:
    """A flags-writing instruction (``vcomiss`` and ``vucomiss`` with SAE)."""
    info = iced.OpCodeInfo(ins.code)
    readers = [_source(o, st, info, False, 0, False) for o in srcs]
    compute = _computation(op, None, srcs[0], st, ins)
    f = st.flags

    def run() -> None:
        value = int(np.asarray(compute([r(None) for r in readers], None)).reshape(-1)[0])
        f[0] = fl.raw((st.rflags_base & ~fl.ARITH_MASK) | value)
    return Compiled(run, sum(o.size for o in srcs if o.kind == "mem"), 0)


def is_scalar(name: str) -> bool:
    """A floating-point instruction on element 0 only (``vaddss``, ``vmovsd``, ``vcmpss``...),
    whose write mask is its bit 0."""
    return not name.startswith(("vp", "vbroadcast", "vcvtsi2", "vcvtusi2")) and name.endswith(("ss", "sd"))


def _source(op: Operand, st: CpuState, info: iced.OpCodeInfo, broadcast: bool, count: int,
            align: bool) -> Callable[[np.ndarray | None], np.ndarray]:
    """Reader of a source operand given the write mask (bools per element, or None)."""
    if op.kind == "vec":
        row = st.zmm[op.reg, :op.size]
        return lambda m: row
    if op.kind == "k":
        n = op.reg
        return lambda m: np.frombuffer(st.k[n].to_bytes(8, "little"), U8)
    if op.kind != "mem":
        read_register = reader(op, st, False, False)  # a GPR
        return lambda m: read_register()
    addr, view = address_fn(op, st.gpr), st.mem.view
    size = op.size
    if broadcast:
        full = iced.MemorySizeExt.size(info.memory_size)
        reps = max(1, full // size)

        def read_broadcast(m: np.ndarray | None) -> np.ndarray:
            a = addr()
            if st.trace is not None:
                st.trace.append((a, size, 0))
            return np.tile(view(a, size), reps)
        return read_broadcast
    element = size // count if count and size % count == 0 else 0

    def read(m: np.ndarray | None) -> np.ndarray:
        a = addr()
        if align and a % size:
            raise misaligned(a, size)
        if st.trace is not None:
            st.trace.append((a, size, 0))
        if m is None or not element or m.all():
            return view(a, size)
        out = np.zeros(size, U8)  # masked-off elements are never read (fault suppression)
        for i in np.flatnonzero(m):
            out[i * element:(i + 1) * element] = view(a + i * element, element)
        return out
    return read


def _computation(op: Op, imm: int | None, dst: Operand, st: CpuState,
                 ins: iced.Instruction) -> Callable[[list[np.ndarray], np.ndarray | None], np.ndarray]:
    """``compute(sources, mask) -> result bytes`` for the instruction's semantics, under its static
    rounding / SAE when it has one."""
    fn, out, env = op.fn, dst.size if dst.kind != "k" else 8, st.fp
    if op.uses_mask:  # fn(sources, imm, out, mask, zeroing)
        return lambda s, m, z: fn(s, imm, out, m, z)
    if not op.fp:
        return lambda s, m: fn(s, imm, out)
    rc = ins.rounding_control
    if rc == iced.RoundingControl.NONE and not ins.suppress_all_exceptions:
        def compute_fp(s: list[np.ndarray], m: np.ndarray | None) -> np.ndarray:
            res = fn(s, imm, out, env)
            if env.raised:
                env.commit()
            return res
        return compute_fp
    mode = None if rc == iced.RoundingControl.NONE else int(rc) - int(iced.RoundingControl.ROUND_TO_NEAREST)

    def compute_static(s: list[np.ndarray], m: np.ndarray | None) -> np.ndarray:
        saved = env.mxcsr
        control = saved | MASKS
        if mode is not None:
            control = (control & ~RC_MASK) | (mode << RC_SHIFT)
        env.mxcsr = control
        try:
            return fn(s, imm, out, env)
        finally:
            env.raised = 0  # SAE: no flag is recorded, no exception taken
            env.mxcsr = saved
    return compute_static


def _source_element_bytes(info: iced.OpCodeInfo) -> int:
    """Bytes of a source element (the memory operand's element: a conversion's differs from its
    destination's), 0 where the form has no packed memory operand."""
    if info.can_broadcast:
        return iced.MemorySizeExt.element_size(info.broadcast_memory_size)
    if info.op0_kind in _DESTINATION_MEMORY:  # vcvtps2ph: the memory operand is the destination
        return 0
    ms = info.memory_size
    if ms != iced.MemorySize.UNKNOWN and iced.MemorySizeExt.is_packed(ms):
        return iced.MemorySizeExt.element_size(ms)
    return 0


def _benign_inactive(compute: Callable, count: int, packed_width: int, element: int,
                     rm_width: int, one: dict[int, np.generic], source_width: int) -> Callable:
    """Masked-off elements of the sources replaced by 1.0 (``one``: of the element's width; 2.0 for
    vfixupimm) before a floating-point computation, so that they raise no exception flag. Packed
    (``packed_width`` non-zero): element ``i`` of each source for mask bit ``i``, ``source_width``
    bytes each where the source holds ``count`` of them (the low ones of a widening conversion's
    register), else its size / ``count`` bytes;
    scalar: element 0 (``rm_width`` bytes for the last source, the r/m one; ``element`` bytes,
    the destination element's, for the others, whose higher bytes pass to the result)."""
    def run(s: list[np.ndarray], m: np.ndarray | None) -> np.ndarray:
        if m is None or m.all():
            return compute(s, m)
        fixed = []
        for i, x in enumerate(s):
            x = np.array(x).reshape(-1)
            if packed_width:
                width = source_width if source_width and x.size >= count * source_width else \
                    x.size // count if x.size % count == 0 else 0
                if width in one:
                    lanes = x.view(_UINTS[width])[:count]  # widening: the low source elements
                    lanes[~m] = one[width]
            else:
                width = rm_width if i == len(s) - 1 else element
                if width in one and x.size >= width:
                    x[:width] = np.frombuffer(one[width].tobytes(), U8)
            fixed.append(x)
        return compute(fixed, m)
    return run


def _destination(dst: Operand, st: CpuState, esize: int, count: int, scalar: bool, zeroing: bool,
                 self_masked: bool, align: bool) -> Callable[[np.ndarray, np.ndarray | None], None]:
    """Writer of the result under the write mask (bools per element, or None)."""
    y, g = st.zmm, st.gpr
    if dst.kind == "vec":
        size = dst.size
        row, upper = y[dst.reg, :size], y[dst.reg, size:]
        udt = _UINTS.get(esize, np.uint8)

        def write_vec(res: np.ndarray, m: np.ndarray | None) -> None:
            res = np.ascontiguousarray(res).reshape(-1).view(U8)[:size]
            if m is None or self_masked:
                row[:] = res
            elif scalar:
                new = np.array(res)
                if not m[0]:
                    new[:esize] = 0 if zeroing else row[:esize]
                row[:] = new
            else:  # elements past the mask's (a narrowing's zero-extension) keep the result's zeros
                new = np.array(res.view(udt))
                old = 0 if zeroing else row.view(udt)[:count]
                new[:count] = np.where(m, new[:count], old)
                row[:] = new.view(U8)
            upper.fill(0)
        return write_vec
    if dst.kind == "mem":
        addr, size, wview = address_fn(dst, g), dst.size, st.mem.wview
        element = size // count if count and size % count == 0 else 0

        def write_mem(res: np.ndarray, m: np.ndarray | None) -> None:
            a = addr()
            res = np.ascontiguousarray(res).reshape(-1).view(U8)[:size]
            if align and a % size:
                raise misaligned(a, size)
            if st.trace is not None:
                st.trace.append((a, size, 1))
            if m is None or self_masked or not element:
                wview(a, size)[:] = res
                return
            for i in np.flatnonzero(m):  # masked-off elements are never written
                wview(a + i * element, element)[:] = res[i * element:(i + 1) * element]
        return write_mem
    if dst.kind == "gpr":
        n = dst.reg

        def write_gpr(res: np.ndarray, m: np.ndarray | None) -> None:
            g[n] = int.from_bytes(np.ascontiguousarray(res).tobytes()[:8], "little")
        return write_gpr
    raise Unsupported(f"destination kind {dst.kind}")
