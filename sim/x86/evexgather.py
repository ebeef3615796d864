"""AVX-512 gathers and scatters (``vpgatherdd`` ... ``vscatterqpd``, EVEX, VSIB addressing with an
opmask): compiled into closures over a :class:`CpuState`.

Element ``j`` (``j`` below the number of index or data elements, whichever is fewer) addresses
``base + sign_extend(index[j]) * scale + disp`` (truncated to 32 bits under a 32-bit address size).
The opmask (k1..k7; k0 is not encodable) selects the elements; the active ones are accessed in
element order and each clears its mask bit as it completes:

* gathers load into the destination element; inactive elements keep their old value (merging),
  the destination's bytes above the elements are zeroed (up to bit 511);
* scatters store the source element, so elements whose addresses overlap leave the highest
  element's value in memory.

Afterwards the whole opmask register is zero. Inactive elements are never accessed (no fault on an
unmapped address). A fault on element ``j`` leaves the active elements before it done and their
mask bits cleared, everything else unchanged, and propagates (the instruction is restartable).
"""

from __future__ import annotations

import iced_x86 as iced

from tsar.sim.errors import GuestFault
from tsar.sim.x86.decode import mnemonic
from tsar.sim.x86.opdefs import I32, I64, Closure, Compiled, Unsupported
from tsar.sim.x86.state import MASK64, CpuState

_RX = iced.RegisterExt
_PLAIN_SEGMENTS = (iced.Register.NONE, iced.Register.DS, iced.Register.ES, iced.Register.SS,
                   iced.Register.CS)
_MASK32 = (1 << 32) - 1


def _index_bytes(name: str) -> int:
    """Bytes of one VSIB index element: the letter after ``gather`` / ``scatter`` (d or q)."""
    kind = "gather" if "gather" in name else "scatter"
    return 4 if name.split(kind, 1)[1][0] == "d" else 8


def _ud(message: str) -> Compiled:
    """A closure raising #UD (an encoding silicon rejects)."""
    fault = GuestFault("ud", message)

    def raise_ud() -> None:
        raise fault
    return Compiled(raise_ud, 0, 0)


def _address_mask(ins: iced.Instruction) -> int:
    """The effective-address mask: 64 bits, or 32 under an address-size prefix."""
    used = iced.InstructionInfoFactory().info(ins).used_memory()
    return _MASK32 if used and used[0].address_size == iced.CodeSize.CODE32 else MASK64


def compile_evex_vsib(ins: iced.Instruction, st: CpuState, trace: bool = False) -> Compiled:
    """Closure for an EVEX gather or scatter; raises :class:`Unsupported` for anything else."""
    name = mnemonic(ins)
    scatter = name.startswith(("vpscatter", "vscatter"))
    if not (scatter or name.startswith(("vpgather", "vgather"))) or ins.op_count != 2:
        raise Unsupported(name)  # prefetches (AVX512PF) and anything else with VSIB
    if ins.memory_segment not in _PLAIN_SEGMENTS:
        raise Unsupported(f"{name} with a segment override")
    data_reg = ins.op1_register if scatter else ins.op0_register
    index_reg = ins.memory_index
    if ins.op_mask == iced.Register.NONE:
        return _ud(f"{name}: the opmask must be k1..k7")
    if ins.zeroing_masking:
        return _ud(f"{name}: zeroing-masking is invalid")
    data, index = _RX.number(data_reg), _RX.number(index_reg)
    if not scatter and data == index:
        return _ud(f"{name}: destination and index registers must differ")
    index_bytes = _index_bytes(name)
    elem = iced.MemorySizeExt.size(ins.memory_size)
    count = min(_RX.size(data_reg) // elem, _RX.size(index_reg) // index_bytes)
    base = _RX.number(_RX.full_register(ins.memory_base)) if ins.memory_base != iced.Register.NONE else -1
    kreg = _RX.number(ins.op_mask)
    geometry = _Geometry(st, index, index_bytes, count, base, ins.memory_index_scale,
                         ins.memory_displacement & MASK64, _address_mask(ins), kreg)
    if scatter:
        return Compiled(_elements(st, geometry, data, elem, trace, True), 0, count * elem)
    return Compiled(_elements(st, geometry, data, elem, trace, False), count * elem, 0)


class _Geometry:
    """The addressing of one gather or scatter: ``addresses()`` gives the element addresses and
    ``active()`` the opmask bits of its elements."""

    def __init__(self, st: CpuState, index: int, index_bytes: int, count: int, base: int,
                 scale: int, disp: int, amask: int, kreg: int) -> None:
        self.count, self.kreg = count, kreg
        self._lanes = st.zmm[index, :count * index_bytes].view(I32 if index_bytes == 4 else I64)
        self._gpr, self._base, self._scale, self._disp, self._amask = st.gpr, base, scale, disp, amask
        self._k, self._elements = st.k, (1 << count) - 1

    def active(self) -> int:
        return self._k[self.kreg] & self._elements

    def addresses(self) -> list[int]:
        b = self._gpr[self._base] + self._disp if self._base >= 0 else self._disp
        s, m = self._scale, self._amask
        return [(b + int(v) * s) & m for v in self._lanes.tolist()]


def _elements(st: CpuState, geo: _Geometry, reg: int, elem: int, trace: bool, store: bool) -> Closure:
    """A gather (``store`` False: memory into register ``reg``) or a scatter (register ``reg`` into
    memory): active elements in order, each mask bit cleared as its element completes; a fault at
    element ``j`` leaves the elements before it done and re-raises. A gather then zeroes the
    destination above its elements; both leave the mask zero."""
    row, k, kreg, view, wview = st.zmm[reg], st.k, geo.kreg, st.mem.view, st.mem.wview
    tail, kind = geo.count * elem, int(store)

    def run() -> None:
        pending = geo.active()
        if pending:
            addresses = geo.addresses()
            log = st.trace if trace else None
            j = 0
            try:
                while pending:
                    j = (pending & -pending).bit_length() - 1
                    a = addresses[j]
                    if log is not None:
                        log.append((a, elem, kind))
                    if store:
                        wview(a, elem)[:] = row[j * elem:(j + 1) * elem]
                    else:
                        row[j * elem:(j + 1) * elem] = view(a, elem)
                    pending &= pending - 1
            except GuestFault:
                k[kreg] &= ~((1 << j) - 1)  # the elements before j are done
                raise
        if not store:
            row[tail:] = 0
        k[kreg] = 0
    return run
