"""Compile one decoded VEX instruction into a Python closure over a :class:`CpuState`.

The closure reads its sources (vector registers as views of ``state.zmm``, GPRs, guest memory as
views of the host arena), applies the semantics of :mod:`tsar.sim.x86.vecops` and writes the
destination with the VEX rule: an xmm destination zeroes bits 511:128 of the zmm register, a ymm
destination bits 511:256 (only while :attr:`CpuState.wide`: otherwise they are known zero).
Element-wise integer ops whose sources are registers run in place with the ufunc's ``out=``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import iced_x86 as iced
import numpy as np

from tsar.isa.config import VECTOR_REGISTERS
from tsar.sim.errors import GuestFault
from tsar.sim.x86 import flags as fl
from tsar.sim.x86.bmi import compile_bmi
from tsar.sim.x86.decode import Operand, address_fn, mnemonic, operand_view, operands
from tsar.sim.x86.fpenv import CONTROL, FLAGS, MASKS, host_swap
from tsar.sim.x86.fpops import PREDICATES, PY_RELATIONS
from tsar.sim.x86.gather import compile_gather
from tsar.sim.x86.opdefs import Compiled, Op, Unsupported
from tsar.sim.x86.pcmpstr import compile_pcmpstr
from tsar.sim.x86.permute import movement_closure
from tsar.sim.x86.state import MASK64, REGISTER_BYTES, CpuState
from tsar.sim.x86.vecops import ALIGNED_MOVES, OPS, U8

Closure = Callable[[], None]


@dataclass(frozen=True)
class _WithImm:
    """An :class:`Op` with the instruction's immediate, for the fast-path builders."""

    op: object
    imm: int | None

    def __getattr__(self, name: str):
        return getattr(self.op, name)


def zeroes_upper(size: int, st: CpuState) -> bool:
    """Whether a VEX write of ``size`` bytes must zero the rest of its register: always for xmm
    (bits 255:128 may be live); for ymm only while bits 511:256 may be (:attr:`CpuState.wide`,
    read when the closure is compiled: the caches are cleared when it turns on)."""
    return size < REGISTER_BYTES and (size == 16 or st.wide)


def misaligned(address: int, size: int) -> GuestFault:
    """The #GP of an aligned access (``vmovdqa``...) at an address not a multiple of its size."""
    return GuestFault("gp", f"misaligned {size}-byte access at {address:#x}", address)


def reader(op: Operand, st: CpuState, check_align: bool, trace: bool) -> Callable[[], np.ndarray]:
    """Reader of a source operand's bytes: a view of a vector register, a GPR's bytes, or guest
    memory (with the alignment check of an aligned move, and the access traced when tracing)."""
    y, g = st.zmm, st.gpr
    if op.kind == "vec":
        row = y[op.reg, :op.size]
        return lambda: row
    if op.kind == "gpr":
        n, size = op.reg, op.size
        mask = (1 << (8 * size)) - 1
        return lambda: np.frombuffer((g[n] & mask).to_bytes(size, "little"), U8)
    if op.kind == "mem":
        addr, size, view = address_fn(op, g), op.size, st.mem.view
        if check_align or trace:
            def read() -> np.ndarray:
                a = addr()
                if check_align and a % size:
                    raise misaligned(a, size)
                if st.trace is not None:
                    st.trace.append((a, size, 0))
                return view(a, size)
            return read
        return lambda: view(addr(), size)
    raise Unsupported(f"operand kind {op.kind}")


def writer(op: Operand, st: CpuState, check_align: bool, trace: bool) -> Callable[[np.ndarray], None]:
    """Writer of a destination: a vector register under the VEX rule (:func:`zeroes_upper`; an
    EVEX write, compiled once the state is wide, zeroes the same bits), a GPR, or guest memory."""
    y, g = st.zmm, st.gpr
    if op.kind == "vec":
        n, size = op.reg, op.size
        if size > 16:  # ymm (bits 511:256 zeroed while they may be live) or zmm (upper empty)
            row, upper = y[n, :size], y[n, size:]
            if not zeroes_upper(size, st):
                def write_y(res: np.ndarray) -> None:
                    row[:] = res.reshape(-1).view(U8)
                return write_y

            def write_y_upper(res: np.ndarray) -> None:
                row[:] = res.reshape(-1).view(U8)
                upper.fill(0)
            return write_y_upper
        low, high = y[n, :16], y[n, 16:]

        def write_x(res: np.ndarray) -> None:
            low[:] = res.reshape(-1).view(U8)
            high[:] = 0
        return write_x
    if op.kind == "gpr":
        n = op.reg

        def write_g(res: np.ndarray) -> None:  # 32- and 64-bit writes zero-extend
            g[n] = int.from_bytes(np.ascontiguousarray(res).tobytes(), "little") & MASK64
        return write_g
    if op.kind == "mem":
        addr, size, wview = address_fn(op, g), op.size, st.mem.wview

        def write_m(res: np.ndarray) -> None:
            a = addr()
            if check_align and a % size:
                raise misaligned(a, size)
            if st.trace is not None:
                st.trace.append((a, size, 1))
            wview(a, size)[:] = res.reshape(-1).view(U8)
        return write_m
    raise Unsupported(f"destination kind {op.kind}")


def compile_vector(ins: iced.Instruction, st: CpuState, trace: bool = False,
                   table: Mapping[str, Op] = OPS, registers: int = VECTOR_REGISTERS,
                   aliases: Mapping[str, str] | None = None) -> Compiled:
    """Closure for a VEX instruction; raises :class:`Unsupported` outside the coverage.

    The EVEX layer (:mod:`tsar.sim.x86.evex`) compiles its unmasked instructions here too, with its
    own ``table``, all ``registers`` (zmm0..31) and ``aliases`` (EVEX mnemonic -> the VEX one with
    the same unmasked semantics, e.g. ``vmovdqu32`` -> ``vmovdqu``)."""
    name = mnemonic(ins)
    if aliases:
        name = aliases.get(name, name)
    if ins.is_vsib:
        return compile_gather(ins, st, trace)
    if name.startswith("vpcmp") and name[6:9] == "str":
        return compile_pcmpstr(ins, st, trace)
    ops = operands(ins)
    if any(o.kind == "vec" and o.reg >= registers for o in ops) or any(o.kind in ("other", "k") for o in ops):
        raise Unsupported(name)
    special = _special(name, ops, st, trace)
    if special is not None:
        return special
    bmi = compile_bmi(name, ops, st, trace)
    if bmi is not None:
        return Compiled(bmi[0], bmi[1], 0)
    op = table.get(name)
    if op is None:
        raise Unsupported(name)
    imm = next((o.value & 0xFF for o in ops if o.kind == "imm"), None)
    regs = [o for o in ops if o.kind != "imm"]
    if not regs:
        raise Unsupported(name)
    dst, srcs = (None, regs) if op.writes_flags else (regs[0], regs[1:])
    if op.reads_dst:
        srcs = [dst, *srcs]
    align = name in ALIGNED_MOVES
    mem_read = sum(o.size for o in srcs if o.kind == "mem")
    mem_written = dst.size if dst is not None and dst.kind == "mem" else 0
    if op.writes_flags:
        return Compiled(_flags_closure(op, srcs, st, trace), mem_read, 0)
    out = dst.size
    if op.fp:
        return Compiled(_fp_closure(name, op, imm, dst, srcs, st, trace, align), mem_read, mem_written)
    fast = _fast_path(name, _WithImm(op, imm), dst, srcs, st, trace, align)
    if fast is not None:
        return Compiled(fast, mem_read, mem_written)
    readers = [reader(o, st, align, trace) for o in srcs]
    write = writer(dst, st, align, trace)
    fn = op.fn
    if len(readers) == 1:
        r0 = readers[0]

        def run1() -> None:
            write(fn([r0()], imm, out))
        return Compiled(run1, mem_read, mem_written)

    def run() -> None:
        write(fn([r() for r in readers], imm, out))
    return Compiled(run, mem_read, mem_written)


_MOVES = frozenset({"vmovdqu", "vmovdqa", "vmovups", "vmovaps", "vmovupd", "vmovapd", "vlddqu",
                    "vmovntdq", "vmovntdqa", "vmovntps", "vmovntpd"})
_BLENDV = {"vpblendvb": np.int8, "vblendvps": np.int32, "vblendvpd": np.int64}
_SCALAR_LOADS = {"vmovss": 4, "vmovsd": 8, "vmovd": 4, "vmovq": 8}
_EXT_TYPES = {"b": (np.int8, np.uint8), "w": (np.int16, np.uint16), "d": (np.int32, np.uint32),
              "q": (np.int64, np.uint64)}


def _fast_path(name: str, op, dst: Operand, srcs: list[Operand], st: CpuState, trace: bool,
               align: bool) -> Closure | None:
    """Allocation-free closures for the most frequent forms (no tracing):

    * ``ufunc`` ops (``vpaddd``, ``vpand``, ``vpmullw``...) with a register first source;
    * full-width moves between registers and memory;
    * ``vpmovsx`` / ``vpmovzx`` widening, ``vextracti128`` to a register, broadcasts.
    """
    if not trace and dst.kind == "gpr" and name in _TO_GPR and srcs and srcs[0].kind == "vec":
        lanes = st.zmm[srcs[0].reg, :16].view(_TO_GPR[name])
        g, n, i = st.gpr, dst.reg, (op.imm or 0) % lanes.size
        return lambda: g.__setitem__(n, int(lanes[i]))  # zero-extended: unsigned lanes
    if trace or dst.kind != "vec":
        return _fast_store(name, dst, srcs, st, trace, align)
    y, g = st.zmm, st.gpr
    size = dst.size
    high = y[dst.reg, size:]
    zero_high = zeroes_upper(size, st)
    src = srcs[0] if srcs else None
    if op.ufunc is not None and len(srcs) == 2 and src.kind == "vec":
        uf, dt = op.ufunc, op.dtype
        typed = y.view(dt)
        per = size // np.dtype(dt).itemsize
        d, a = typed[dst.reg, :per], typed[src.reg, :per]
        if srcs[1].kind == "vec":
            b = typed[srcs[1].reg, :per]
            if not zero_high:
                return lambda: uf(a, b, out=d)
            return lambda: (uf(a, b, out=d), high.fill(0))
        if srcs[1].kind == "mem":
            load = operand_view(srcs[1], g, st.mem, dt)
            if not zero_high:
                return lambda: uf(a, load(), out=d)
            return lambda: (uf(a, load(), out=d), high.fill(0))
        return None
    row = y[dst.reg, :size]
    if name in _MOVES and src is not None:
        if src.kind == "vec":
            srow = y[src.reg, :size]
            if not zero_high:
                return lambda: row.__setitem__(Ellipsis, srow)
            return lambda: (row.__setitem__(Ellipsis, srow), high.fill(0))
        if src.kind == "mem" and not align:
            load = operand_view(src, g, st.mem)
            if not zero_high:
                return lambda: row.__setitem__(Ellipsis, load())
            return lambda: (row.__setitem__(Ellipsis, load()), high.fill(0))
        return None
    if name in _BLENDV and len(srcs) == 3 and all(o.kind == "vec" for o in srcs):
        # a bit select on Python ints: d = a ^ ((a ^ b) & mask), mask = each lane's sign spread
        lane = 8 * np.dtype(_BLENDV[name]).itemsize
        lsbs = int.from_bytes(b"".join((1).to_bytes(lane // 8, "little") for _ in range(size * 8 // lane)),
                              "little")
        regs = memoryview(y.reshape(-1))
        a0, b0, m0 = (REGISTER_BYTES * o.reg for o in srcs)
        d0, ones = REGISTER_BYTES * dst.reg, (1 << lane) - 1
        upper = bytes(REGISTER_BYTES - size)
        frm = int.from_bytes

        def blendv() -> None:
            a = frm(regs[a0:a0 + size], "little")
            mask = ((frm(regs[m0:m0 + size], "little") >> (lane - 1)) & lsbs) * ones
            value = a ^ ((a ^ frm(regs[b0:b0 + size], "little")) & mask)
            regs[d0:d0 + size] = value.to_bytes(size, "little")
            if zero_high:
                regs[d0 + size:d0 + REGISTER_BYTES] = upper
        return blendv
    if name in _SCALAR_LOADS and len(srcs) == 1 and src.kind == "mem":  # vmovss xmm, m32...
        n, addr, view = _SCALAR_LOADS[name], address_fn(src, g), st.mem.view
        low, rest = y[dst.reg, :n], y[dst.reg, n:]
        return lambda: (low.__setitem__(Ellipsis, view(addr(), n)), rest.fill(0))
    if name[:7] in ("vpmovsx", "vpmovzx") and src is not None:
        signed = name[5] == "s"
        sdt = _EXT_TYPES[name[7]][0 if signed else 1]
        ddt = _EXT_TYPES[name[8]][0]
        count = size // np.dtype(ddt).itemsize
        out = y.view(ddt)[dst.reg, :count]
        nbytes = count * np.dtype(sdt).itemsize
        if src.kind == "vec":
            sview = y[src.reg, :nbytes].view(sdt)
            if src.reg == dst.reg:  # numpy does not order an overlapping casting copy
                return lambda: (out.__setitem__(Ellipsis, sview.copy()),
                            zero_high and high.fill(0))
            if not zero_high:
                return lambda: out.__setitem__(Ellipsis, sview)
            return lambda: (out.__setitem__(Ellipsis, sview), high.fill(0))
        if src.kind == "mem":
            addr, view = address_fn(src, g), st.mem.view
            return lambda: (out.__setitem__(Ellipsis, view(addr(), nbytes).view(sdt)),
                            zero_high and high.fill(0))
        return None
    if name in ("vextracti128", "vextractf128") and src is not None and src.kind == "vec":
        part = y[src.reg, 16:32] if op.imm & 1 else y[src.reg, :16]
        return lambda: (row.__setitem__(Ellipsis, part), high.fill(0))
    movement = movement_closure(name, op.fn, op.imm, dst, srcs, st, zero_high)
    if movement is not None:
        return movement
    if name in _IMM_SHIFTS and op.imm is not None and len(srcs) == 1 and src.kind in ("vec", "mem"):
        return _shift_closure(name, op.imm, dst, src, st)
    if name in _DOTS and len(srcs) == 3 and srcs[0].kind == srcs[1].kind == "vec" \
            and srcs[2].kind in ("vec", "mem"):
        return _dot_closure(name, dst, srcs, st)
    return None


_TO_GPR = {"vmovd": np.uint32, "vmovq": np.uint64, "vpextrb": np.uint8, "vpextrw": np.uint16,
           "vpextrd": np.uint32, "vpextrq": np.uint64}
"""Moves of one lane of an xmm register into a GPR: name -> lane type (the lane index is the
immediate, 0 for vmovd / vmovq)."""
_IMM_SHIFTS = {f"vp{kind}{s}": (kind, dt) for kind, dt_of in (("sll", _EXT_TYPES), ("srl", _EXT_TYPES),
                                                               ("sra", _EXT_TYPES))
               for s, dt in ((s, dt_of[s][0 if kind == "sra" else 1]) for s in "wdq")}
"""Shifts by an immediate: name -> (kind, lane type: signed for ``sra``, else unsigned)."""
_DOTS = {"vpdpbusd": (np.uint8, np.int8, 4), "vpdpwssd": (np.int16, np.int16, 2)}
"""Non-saturating VNNI dot products: name -> (src1 lane type, src2 lane type, products per dword)."""


def _shift_closure(name: str, imm: int, dst: Operand, src: Operand, st: CpuState) -> Closure:
    """``vpsrlw ymm, ymm, imm8`` and the like, in place with the ufunc's ``out=`` (a count past
    the lane width gives zeros, or the sign for ``sra``)."""
    kind, dt = _IMM_SHIFTS[name]
    size, y = dst.size, st.zmm
    bits = 8 * np.dtype(dt).itemsize
    d = y[dst.reg, :size].view(dt)
    high, zero_high = y[dst.reg, size:], zeroes_upper(size, st)
    if imm >= bits and kind != "sra":
        return lambda: (d.fill(0), zero_high and high.fill(0))
    count = np.array(min(imm, bits - 1), dt)  # a 0-d array: cheaper in a ufunc than a scalar
    uf = np.left_shift if kind == "sll" else np.right_shift
    if src.kind == "vec":
        a = y[src.reg, :size].view(dt)
        if not zero_high:
            return lambda: uf(a, count, d)
        return lambda: (uf(a, count, d), high.fill(0))
    load = operand_view(src, st.gpr, st.mem, dt)
    if not zero_high:
        return lambda: uf(load(), count, d)
    return lambda: (uf(load(), count, d), high.fill(0))


def _dot_closure(name: str, dst: Operand, srcs: list[Operand], st: CpuState) -> Closure:
    """``vpdpbusd`` / ``vpdpwssd`` (wrapping): both sources copied into preallocated int32 rows of
    ``per`` lanes (a slice assignment casts without the buffers a casting ufunc allocates), each
    dword's products summed by one ``vecdot`` of those, then added to the accumulator in place.
    Outputs are passed positionally (numpy parses keywords at every call)."""
    t1, t2, per = _DOTS[name]
    size, y = dst.size, st.zmm
    n = size // 4
    lanes = size // np.dtype(t1).itemsize
    acc = y[dst.reg, :size].view(np.int32)
    a = y[srcs[1].reg, :size].view(t1)
    high, zero_high = y[dst.reg, size:], zeroes_upper(size, st)
    a32, b32 = np.empty((n, per), np.int32), np.empty((n, per), np.int32)
    a32f, b32f = a32.reshape(lanes), b32.reshape(lanes)
    sums, dot, add = np.empty(n, np.int32), np.vecdot, np.add
    if srcs[2].kind == "vec":
        b = y[srcs[2].reg, :size].view(t2)

        def run_reg() -> None:
            a32f[...] = a
            b32f[...] = b
            dot(a32, b32, sums)
            add(acc, sums, acc)
            if zero_high:
                high.fill(0)
        return run_reg
    load = operand_view(srcs[2], st.gpr, st.mem, t2)

    def run_mem() -> None:
        a32f[...] = a
        b32f[...] = load()
        dot(a32, b32, sums)
        add(acc, sums, acc)
        if zero_high:
            high.fill(0)
    return run_mem


def _fast_store(name: str, dst: Operand, srcs: list[Operand], st: CpuState, trace: bool,
                align: bool) -> Closure | None:
    """Full-width vector stores ``vmovdqu [mem], ymm/xmm``."""
    if trace or align or dst.kind != "mem" or name not in _MOVES or srcs[0].kind != "vec":
        return None
    store, srow = operand_view(dst, st.gpr, st.mem, write=True), st.zmm[srcs[0].reg, :dst.size]
    return lambda: store().__setitem__(Ellipsis, srow)


def _fp_closure(name: str, op, imm: int | None, dst: Operand, srcs: list[Operand], st: CpuState,
                trace: bool, align: bool) -> Closure:
    """A floating-point op: its raised exception flags reach the MXCSR (and #XM when unmasked)
    before the destination is written."""
    readers = [reader(o, st, align, trace) for o in srcs]
    write = writer(dst, st, align, trace)
    fn, env, out = op.fn, st.fp, dst.size

    def _generic(rs: list) -> np.ndarray:
        res = fn([r() for r in rs], imm, out, env)
        if env.raised:
            env.commit()
        return res

    if op.ufunc is not None and not trace and dst.kind == "vec" and len(srcs) == 2 \
            and srcs[0].kind == "vec" and srcs[1].kind in ("vec", "mem"):
        return _fp_ufunc_closure(op, dst, srcs, st, run_generic=lambda: write(_generic(readers)))
    if name in _SCALAR_SELECT and not trace and srcs[0].kind == "vec":
        return _scalar_select_closure(name, imm, dst, srcs, st, lambda: write(_generic(readers)))

    def run() -> None:
        write(_generic(readers))
    return run


def _register_or_memory(op: Operand, st: CpuState, size: int,
                        dt: type = np.uint8) -> Callable[[], np.ndarray]:
    """Reader of the low ``size`` bytes of a vector register, or of ``size`` bytes of memory, as
    lanes of ``dt`` (no tracing, no alignment check)."""
    if op.kind == "vec":
        row = st.zmm[op.reg, :size].view(dt)
        return lambda: row
    return operand_view(op, st.gpr, st.mem, dt)


_SCALAR_SELECT = {"vmaxss": (np.float32, "max"), "vminss": (np.float32, "min"),
                  "vmaxsd": (np.float64, "max"), "vminsd": (np.float64, "min"),
                  "vcmpss": (np.float32, "cmp"), "vcmpsd": (np.float64, "cmp")}


def _scalar_select_closure(name: str, imm: int | None, dst: Operand, srcs: list[Operand],
                           st: CpuState, run_generic: Closure) -> Closure:
    """vmaxss/vminss/vcmpss (and sd): element 0 compared as Python floats (``struct`` on the
    register file's bytes) when neither operand is a NaN or a denormal, so no exception flag can
    arise; other operands take the generic path."""
    dt, kind = _SCALAR_SELECT[name]
    size = np.dtype(dt).itemsize
    fmt = "<f" if size == 4 else "<d"
    regs = memoryview(st.zmm.reshape(-1))
    d0, s0 = REGISTER_BYTES * dst.reg, REGISTER_BYTES * srcs[0].reg
    unpack = struct.unpack_from
    if srcs[1].kind == "vec":
        b0 = REGISTER_BYTES * srcs[1].reg

        def read_b() -> tuple[float, bytes]:
            return unpack(fmt, regs, b0)[0], regs[b0:b0 + size]
    else:
        addr, view = address_fn(srcs[1], st.gpr), st.mem.view

        def read_b() -> tuple[float, bytes]:
            raw = view(addr(), size).tobytes()
            return unpack(fmt, raw)[0], raw
    tiny = float(np.finfo(dt).tiny)
    same = d0 == s0
    relation = PY_RELATIONS[PREDICATES[imm & 15][0]] if kind == "cmp" else None
    is_max = kind == "max"
    ones, zeros = b"\xff" * size, bytes(size)
    upper_zero = bytes(REGISTER_BYTES - 16)

    def run() -> None:
        v, b_bytes = read_b()
        x = unpack(fmt, regs, s0)[0]
        if x != x or v != v or 0 < abs(x) < tiny or 0 < abs(v) < tiny:
            run_generic()
            return
        if relation is not None:
            low = ones if relation(x, v) else zeros
        elif (x > v) if is_max else (x < v):
            low = None if same else bytes(regs[s0:s0 + size])
        else:
            low = bytes(b_bytes)
        if not same:
            regs[d0 + size:d0 + 16] = regs[s0 + size:s0 + 16]
        if low is not None:
            regs[d0:d0 + size] = low
        regs[d0 + 16:d0 + REGISTER_BYTES] = upper_zero
    return run


def _fp_ufunc_closure(op, dst: Operand, srcs: list[Operand], st: CpuState, run_generic: Closure) -> Closure:
    """Packed IEEE arithmetic (vaddps, vmulpd...) from registers or memory: the ufunc runs into a
    scratch row under the guest's MXCSR (captured as :meth:`FpEnv.host` does), and the result is
    copied to the destination once no unmasked exception was raised. Outside a
    :meth:`FpEnv.session` it takes the generic path."""
    y, env, uf, dt = st.zmm, st.fp, op.ufunc, op.dtype
    size = dst.size
    per = size // np.dtype(dt).itemsize
    typed = y.view(dt)
    a, d = typed[srcs[0].reg, :per], typed[dst.reg, :per]
    high = y[dst.reg, size:]
    zero_high = zeroes_upper(size, st)
    scratch = np.empty(per, dt)
    b_read = _register_or_memory(srcs[1], st, size, dt)
    swap = host_swap

    def run() -> None:
        if not env.in_session:
            run_generic()
            return
        b = b_read()
        old = swap((env.mxcsr & CONTROL) | MASKS)
        env.capturing = True
        try:
            uf(a, b, out=scratch)
        finally:
            env.capturing = False
            env.raised |= swap(old) & FLAGS
        if env.raised:
            env.commit()
        d[:] = scratch
        if zero_high:
            high.fill(0)
    return run


def _flags_closure(op, srcs: list[Operand], st: CpuState, trace: bool) -> Closure:
    readers = [reader(o, st, False, trace) for o in srcs]
    fn, f, env = op.fn, st.flags, st.fp
    if op.fp:
        def run_fp() -> None:
            value = int(fn([r() for r in readers], None, 0, env))
            if env.raised:
                env.commit()
            f[0] = fl.raw((st.rflags_base & ~fl.ARITH_MASK) | value)
        return run_fp

    def run() -> None:
        value = int(fn([r() for r in readers], None, 0))
        f[0] = fl.raw((st.rflags_base & ~fl.ARITH_MASK) | value)
    return run


def _special(name: str, ops: list[Operand], st: CpuState, trace: bool) -> Compiled | None:
    vex = st.zmm[:VECTOR_REGISTERS]  # zmm16-31 keep their values
    if name == "vzeroupper":
        upper = vex[:, 16:]
        return Compiled(lambda: upper.fill(0), 0, 0)
    if name == "vzeroall":
        return Compiled(lambda: vex.fill(0), 0, 0)
    if name in ("vpmaskmovd", "vpmaskmovq", "vmaskmovps", "vmaskmovpd"):
        return _maskmov(name, ops, st)
    if name in ("vldmxcsr", "vstmxcsr"):
        return _mxcsr(name, ops[0], st, trace)
    return None


def _mxcsr(name: str, op: Operand, st: CpuState, trace: bool) -> Compiled:
    """vldmxcsr m32 (#GP for reserved bits) / vstmxcsr m32."""
    addr, mem, env = address_fn(op, st.gpr), st.mem, st.fp

    def load() -> None:
        a = addr()
        if trace and st.trace is not None:
            st.trace.append((a, 4, 0))
        env.load(int.from_bytes(mem.view(a, 4), "little"))

    def store() -> None:
        a = addr()
        if trace and st.trace is not None:
            st.trace.append((a, 4, 1))
        mem.wview(a, 4)[:] = np.frombuffer(env.mxcsr.to_bytes(4, "little"), U8)
    return Compiled(load, 4, 0) if name == "vldmxcsr" else Compiled(store, 0, 4)


def _maskmov(name: str, ops: list[Operand], st: CpuState) -> Compiled:
    """vpmaskmovd/q, vmaskmovps: masked load (inactive lanes 0) or store (inactive lanes kept).

    Only active lanes are accessed, so inactive lanes never fault. Traffic counts the full width.
    """
    elem = 8 if name in ("vpmaskmovq", "vmaskmovpd") else 4
    dt = np.int64 if elem == 8 else np.int32
    g, mem = st.gpr, st.mem
    if ops[0].kind == "mem":  # store: [mem], mask, src
        memop, mask_op, src_op = ops
        addr = address_fn(memop, g)
        mask_r, src_r = reader(mask_op, st, False, False), reader(src_op, st, False, False)
        size = memop.size

        def store() -> None:
            a = addr()
            active = np.flatnonzero(mask_r().view(dt) < 0)
            src = src_r()
            if st.trace is not None and active.size:
                st.trace.append((a, size, 1))
            for i in active:
                mem.wview(a + i * elem, elem)[:] = src[i * elem:(i + 1) * elem]
        return Compiled(store, 0, size)
    dst, mask_op, memop = ops
    addr = address_fn(memop, g)
    mask_r = reader(mask_op, st, False, False)
    write = writer(dst, st, False, False)
    size = memop.size

    def load() -> None:
        a = addr()
        active = mask_r().view(dt) < 0
        res = np.zeros(size, U8)
        if st.trace is not None and active.any():
            st.trace.append((a, size, 0))
        for i in np.flatnonzero(active):
            res[i * elem:(i + 1) * elem] = mem.view(a + i * elem, elem)
        write(res)
    return Compiled(load, size, 0)
