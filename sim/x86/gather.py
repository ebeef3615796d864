"""AVX2 gathers (vpgatherdd/dq/qd/qq, vgatherdps/dpd/qps/qpd): VSIB addressing with a vector of
indices, loads of the elements whose mask element has its sign bit set.

Element ``i`` (for ``i`` below the number of index or destination elements, whichever is fewer)
loads ``base + index[i] * scale + disp`` (indices sign-extended) when ``mask[i] < 0`` and clears
``mask[i]``; other elements keep the destination. Destination elements past that count and the
whole mask are zero afterwards, and an xmm destination zeroes bits 255:128 of both. A fault on
element ``i`` leaves the elements before it loaded and their mask elements cleared, as hardware.
"""

from __future__ import annotations

import iced_x86 as iced

from tsar.sim.errors import GuestFault
from tsar.sim.x86.decode import mnemonic
from tsar.sim.x86.opdefs import I32, I64, Compiled, Unsupported
from tsar.sim.x86.state import MASK64, CpuState

_RX = iced.RegisterExt


def _sizes(name: str) -> tuple[int, int]:
    """(index bytes, element bytes) from the mnemonic: vpgather<i><e>, vgather<i>p<s|d>."""
    if name.startswith("vpgather"):
        i, e = name[8], name[9]
        return (4 if i == "d" else 8), (4 if e == "d" else 8)
    return (4 if name[7] == "d" else 8), (4 if name[-1] == "s" else 8)


def compile_gather(ins: iced.Instruction, st: CpuState, trace: bool = False) -> Compiled:
    name = mnemonic(ins)
    if "gather" not in name:
        raise Unsupported(name)
    index_bytes, elem = _sizes(name)
    dst, mask = _RX.number(ins.op0_register), _RX.number(ins.op2_register)
    index = _RX.number(ins.memory_index)
    if len({dst, mask, index}) < 3:
        fault = GuestFault("ud", f"{name}: destination, index and mask registers must differ")

        def raise_ud() -> None:
            raise fault
        return Compiled(raise_ud, 0, 0)
    dst_bytes = _RX.size(ins.op0_register)
    index_width = _RX.size(ins.memory_index)
    count = min(dst_bytes // elem, index_width // index_bytes)
    base = _RX.number(_RX.full_register(ins.memory_base)) if ins.memory_base != iced.Register.NONE else -1
    scale, disp = ins.memory_index_scale, ins.memory_displacement & MASK64
    y, g, mem = st.zmm, st.gpr, st.mem
    idt = I32 if index_bytes == 4 else I64
    mdt = I32 if elem == 4 else I64
    drow, mrow = y[dst], y[mask]
    irow = y[index, :count * index_bytes].view(idt)
    mlanes = mrow[:count * elem].view(mdt)

    def run() -> None:
        base_value = g[base] if base >= 0 else 0
        offsets = [int(v) * scale for v in irow]
        for i in range(count):
            if mlanes[i] < 0:
                a = (base_value + offsets[i] + disp) & MASK64
                if trace and st.trace is not None:
                    st.trace.append((a, elem, 0))
                drow[i * elem:(i + 1) * elem] = mem.view(a, elem)
                mlanes[i] = 0
        drow[count * elem:] = 0
        mrow[:] = 0
    return Compiled(run, count * elem, 0)
