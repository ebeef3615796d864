"""Masked AVX-512 memory accesses touch only their active elements (fault suppression), in the
Python engine: a masked load or store whose masked-off elements lie past the end of an array (in
the guard page after it) completes, and writes nothing there; the same access with one more
active element stops with a memory fault naming the array. Runs on any host: the simulator needs
no AVX-512 to execute EVEX code."""

from __future__ import annotations

import iced_x86 as iced
import numpy as np
import pytest

from tsar.sim import SimulationError, create_machine
from tsar.sim.vector_spill import byte_line

C, R = iced.Code, iced.Register


def _masked(code: int, *operands: object, store: bool = False) -> str:
    """One EVEX instruction with write mask k1 as a ``.byte`` line."""
    create = iced.Instruction.create_mem_reg if store else iced.Instruction.create_reg_mem
    ins = create(code, *operands)
    ins.op_mask = R.K1
    return byte_line(ins)


def _program() -> str:
    """``f(src, dst, mask)``: k1 = mask; zmm0{k1} = 16 dwords at src (merging into zero); 16 dwords
    at dst{k1} = zmm0; returns zmm0's first dword."""
    load = _masked(C.EVEX_VMOVDQU32_ZMM_K1Z_ZMMM512, R.ZMM0, iced.MemoryOperand(R.RDI))
    store = _masked(C.EVEX_VMOVDQU32_ZMMM512_K1Z_ZMM, iced.MemoryOperand(R.RSI), R.ZMM0, store=True)
    kmov = byte_line(iced.Instruction.create_reg_reg(C.VEX_KMOVW_KR_R32, R.K1, R.EDX))
    return "\n".join(["f:", "vpxor xmm0, xmm0, xmm0", kmov, load, store, "vmovd eax, xmm0",
                      "vzeroupper", "ret", ""])


@pytest.fixture(scope="module")
def machine():
    m = create_machine("python")
    m.load_asm(_program(), filename="masked.s")
    return m


def test_masked_off_elements_past_the_array_are_not_touched(machine) -> None:
    src = np.arange(1, 5, dtype=np.int32)  # 16 bytes: elements 4..15 would lie past its end
    dst = np.full(4, -1, np.int32)
    first = machine.call("f", src, dst, 0x000F, returns="i32")
    assert first == 1 and dst.tolist() == [1, 2, 3, 4]


def test_an_active_element_past_the_array_faults(machine) -> None:
    src = np.arange(1, 5, dtype=np.int32)
    dst = np.zeros(4, np.int32)
    with pytest.raises(SimulationError) as err:
        machine.call("f", src, dst, 0x001F)
    assert err.value.kind == "memory" and "arg 0" in str(err.value)


def test_masked_store_writes_only_active_elements(machine) -> None:
    src = np.arange(100, 116, dtype=np.int32)
    dst = np.full(16, -7, np.int32)
    machine.call("f", src, dst, 0b1010_0000_0000_0101)
    want = np.full(16, -7, np.int32)
    for i in (0, 2, 13, 15):
        want[i] = src[i]
    assert dst.tolist() == want.tolist()


def test_vex_code_compiled_before_evex_zeroes_the_upper_bits_after() -> None:
    """Closures compiled while no EVEX code was loaded skip zeroing bits 511:256 (they are known
    zero); loading EVEX code drops them, so a VEX.256 write then zeroes what EVEX code set."""
    m = create_machine("python")
    a = m.load_asm("a:\n vpaddd ymm1, ymm1, ymm1\n ret\n", filename="a.s")["a"]
    assert m.call(a, returns="none") is None  # a's closure compiled and run without EVEX state
    ternlog = iced.Instruction.create_reg_reg_reg_u32(C.EVEX_VPTERNLOGD_ZMM_K1Z_ZMM_ZMMM512B32_IMM8,
                                                      R.ZMM1, R.ZMM1, R.ZMM1, 0xFF)
    store = iced.Instruction.create_mem_reg(C.EVEX_VMOVDQU64_ZMMM512_K1Z_ZMM, iced.MemoryOperand(R.RSI),
                                            R.ZMM1)
    m.load_asm("\n".join(["b:", byte_line(ternlog), "call rdi", byte_line(store), "ret", ""]),
               filename="b.s")
    out = np.zeros(64, np.uint8)
    m.call("b", a, out, returns="none")
    assert (out[:32] == 0xFE).sum() == 8 and out[32:].tolist() == [0] * 32  # -1 + -1 per dword
    assert m.stats.instructions == 6
