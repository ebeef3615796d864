"""iced-x86 decoding helpers: mnemonic names, operand descriptions, effective addresses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import iced_x86 as iced
import numpy as np

from tsar.isa.disassembler import intel_formatter
from tsar.sim.memory import PAGE_SHIFT, GuestMemory
from tsar.sim.x86.state import MASK64

MNEMONIC_NAMES = {getattr(iced.Mnemonic, n): n.lower() for n in dir(iced.Mnemonic)
                  if not n.startswith("_") and isinstance(getattr(iced.Mnemonic, n), int)}
_OK = iced.OpKind
_RX = iced.RegisterExt
_IMM_KINDS = {_OK.IMMEDIATE8, _OK.IMMEDIATE8_2ND, _OK.IMMEDIATE16, _OK.IMMEDIATE32,
              _OK.IMMEDIATE64, _OK.IMMEDIATE8TO16, _OK.IMMEDIATE8TO32, _OK.IMMEDIATE8TO64,
              _OK.IMMEDIATE32TO64}


def decode(code: bytes, address: int) -> iced.Instruction:
    """Decode one instruction from ``code`` (at most 15 bytes) placed at ``address``."""
    return iced.Decoder(64, code, ip=address).decode()


def mnemonic(ins: iced.Instruction) -> str:
    return MNEMONIC_NAMES.get(ins.mnemonic, "?")


def text(ins: iced.Instruction) -> str:
    return intel_formatter().format(ins)


def is_vex(ins: iced.Instruction) -> bool:
    return ins.encoding == iced.EncodingKind.VEX


@dataclass(frozen=True)
class Operand:
    """``kind``: ``vec`` / ``gpr`` / ``k`` (opmask) / ``mem`` / ``imm``; ``size`` in bytes; ``reg``
    register number (gpr numbers in x86 encoding order); memory: ``base``/``index`` register numbers or -1,
    ``scale``, ``disp`` (two's complement, 64-bit) and ``rip_target`` for RIP-relative operands."""

    kind: str
    size: int
    reg: int = -1
    base: int = -1
    index: int = -1
    scale: int = 1
    disp: int = 0
    rip_target: int | None = None
    value: int = 0
    high8: bool = False


def operands(ins: iced.Instruction) -> list[Operand]:
    out = []
    for i in range(ins.op_count):
        kind = ins.op_kind(i)
        if kind == _OK.REGISTER:
            reg = ins.op_register(i)
            size = _RX.size(reg)
            if _RX.is_xmm(reg) or _RX.is_ymm(reg) or _RX.is_zmm(reg):
                out.append(Operand("vec", size, _RX.number(reg)))
            elif _RX.is_k(reg):
                out.append(Operand("k", 8, _RX.number(reg)))
            elif _RX.is_gpr(reg):
                high = _RX.is_gpr8(reg) and reg in (iced.Register.AH, iced.Register.CH,
                                                     iced.Register.DH, iced.Register.BH)
                # number of the full 64-bit register (iced numbers the 8-bit class al..r15l 0..19)
                out.append(Operand("gpr", size, _RX.number(_RX.full_register(reg)), high8=high))
            else:
                out.append(Operand("other", size, int(reg)))
        elif kind == _OK.MEMORY:
            size = iced.MemorySizeExt.size(ins.memory_size)
            base, index = ins.memory_base, ins.memory_index
            if base in (iced.Register.RIP, iced.Register.EIP):
                out.append(Operand("mem", size, rip_target=ins.ip_rel_memory_address))
                continue
            seg_ok = ins.memory_segment in (iced.Register.DS, iced.Register.SS, iced.Register.ES,
                                            iced.Register.CS, iced.Register.NONE)
            out.append(Operand(
                "mem" if seg_ok and not ins.is_vsib else "other", size,
                base=_RX.number(base) if base != iced.Register.NONE else -1,
                index=_RX.number(index) if index != iced.Register.NONE else -1,
                scale=ins.memory_index_scale, disp=ins.memory_displacement & MASK64))
        elif kind in _IMM_KINDS:
            out.append(Operand("imm", 0, value=ins.immediate(i)))
        elif kind in (_OK.NEAR_BRANCH64, _OK.NEAR_BRANCH32, _OK.NEAR_BRANCH16):
            out.append(Operand("branch", 0, value=ins.near_branch_target))
        else:
            out.append(Operand("other", 0))
    return out


def address_fn(op: Operand, gpr: list[int]) -> Callable[[], int]:
    """A closure computing the operand's effective address from the live GPR list."""
    if op.rip_target is not None:
        target = op.rip_target
        return lambda: target
    b, i, s, d = op.base, op.index, op.scale, op.disp
    if b >= 0 and i < 0:
        if d == 0:
            return lambda: gpr[b]
        return lambda: (gpr[b] + d) & MASK64
    if b >= 0:
        return lambda: (gpr[b] + gpr[i] * s + d) & MASK64
    if i >= 0:
        return lambda: (gpr[i] * s + d) & MASK64
    return lambda: d


def operand_view(op: Operand, gpr: list[int], mem: GuestMemory, dtype: type = np.uint8,
                 write: bool = False) -> Callable[[], np.ndarray]:
    """A closure returning the ``op.size`` bytes the memory operand addresses as a view of lanes
    of ``dtype`` (readable, or writable with ``write``), or raising the access's fault: the
    effective address, the page-table bounds check and the typed view in one Python frame, since
    it runs for every vector memory operand. An address that is a multiple of the lane size
    slices a typed view of the arena (no ``.view`` per access)."""
    buf, base, limits, fault = mem.buf, mem.base, mem.page_limits(write), mem.fault
    access, shift = "write" if write else "read", PAGE_SHIFT
    n, item = op.size, np.dtype(dtype).itemsize
    typed = buf[:buf.size - buf.size % item].view(dtype)
    b, i, d = op.base, op.index, op.disp
    if op.rip_target is None and b >= 0 and i < 0:  # [reg + disp]: the common case, inlined
        if item == 1:
            def bytes_at_base() -> np.ndarray:
                off = ((gpr[b] + d) & MASK64) - base
                try:
                    if off + n <= limits[off >> shift]:
                        return typed[off:off + n]
                except IndexError:
                    pass
                raise fault(off + base, n, access)
            return bytes_at_base

        def lanes_at_base() -> np.ndarray:
            off = ((gpr[b] + d) & MASK64) - base
            try:
                if off + n <= limits[off >> shift]:
                    if off % item:
                        return buf[off:off + n].view(dtype)
                    return typed[off // item:(off + n) // item]
            except IndexError:
                pass
            raise fault(off + base, n, access)
        return lanes_at_base
    addr = address_fn(op, gpr)

    def lanes() -> np.ndarray:
        off = addr() - base
        try:
            if off + n <= limits[off >> shift]:
                if off % item:
                    return buf[off:off + n].view(dtype)
                return typed[off // item:(off + n) // item]
        except IndexError:
            pass
        raise fault(off + base, n, access)
    return lanes


def operand_store(op: Operand, gpr: list[int], mem: GuestMemory) -> Callable[[bytes], None]:
    """A closure writing ``op.size`` bytes to the memory operand's address (or raising the
    write's fault): the scalar store's counterpart of :func:`operand_view`, writing through a
    ``memoryview`` of the arena (cheaper than a numpy slice for a few bytes)."""
    raw, base, limits, fault = memoryview(mem.buf), mem.base, mem.page_limits(True), mem.fault
    n, shift, addr = op.size, PAGE_SHIFT, address_fn(op, gpr)

    def put(data: bytes) -> None:
        off = addr() - base
        try:
            if off + n <= limits[off >> shift]:
                raw[off:off + n] = data
                return
        except IndexError:
            pass
        raise fault(off + base, n, "write")
    return put


def operand_int(op: Operand, gpr: list[int], mem: GuestMemory) -> Callable[[], int]:
    """A closure reading the memory operand's ``op.size`` bytes as an unsigned little-endian
    integer (or raising the read's fault), through a ``memoryview`` of the arena."""
    raw, base, limits, fault = memoryview(mem.buf), mem.base, mem.page_limits(False), mem.fault
    n, shift, addr, frm = op.size, PAGE_SHIFT, address_fn(op, gpr), int.from_bytes

    def get() -> int:
        off = addr() - base
        try:
            if off + n <= limits[off >> shift]:
                return frm(raw[off:off + n], "little")
        except IndexError:
            pass
        raise fault(off + base, n, "read")
    return get
