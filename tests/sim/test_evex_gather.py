"""AVX-512 gathers and scatters (:mod:`tsar.sim.x86.evexgather`): fault suppression of masked-off
elements, restartable faults (earlier elements done, their mask bits cleared), scatter collisions
in element order, address forms the differential test does not encode (no base, 32-bit address
size), and every form against the host CPU at every scale and several displacements."""

from __future__ import annotations

from collections.abc import Callable

import iced_x86 as iced
import numpy as np
import pytest
from sim_inputs import make_records

from tsar.sim import run_on_host, simulate_records
from tsar.sim.errors import GuestFault
from tsar.sim.host_oracle import FLAGS_MASK, FLAGS_OUT, MEM_BIAS, MEM_BYTES
from tsar.sim.memory import GuestMemory
from tsar.sim.platforms.detect import cpu_flags
from tsar.sim.python_engine.blocks import compile_one
from tsar.sim.x86.forms import avx512_forms
from tsar.sim.x86.state import REGISTER_BYTES, CpuState

_R, _C = iced.Register, iced.Code
RDX = 2
FAR = 1 << 30  # an index whose address (times 4 or 8) lies far outside guest memory
VSIB_KINDS = {getattr(iced.OpCodeOperandKind, f"MEM_VSIB{b}{w}") for b in (32, 64) for w in "XYZ"}


def _encode(code: int, data: int, index: int, scale: int = 4, disp: int = 0, mask: int = 1,
            base: int = _R.RDX) -> bytes:
    """``code`` with data register ``data``, memory ``[base + index*scale + disp]`` and opmask
    ``k<mask>``."""
    mem = iced.MemoryOperand(base, index, scale, displ=disp)
    scatter = iced.OpCodeInfo(code).op_kind(0) in VSIB_KINDS
    ins = iced.Instruction.create_mem_reg(code, mem, data) if scatter else \
        iced.Instruction.create_reg_mem(code, data, mem)
    ins.op_mask = _R.K0 + mask
    encoder = iced.Encoder(64)
    encoder.encode(ins, 0)
    return bytes(encoder.take_buffer())


class Machine:
    """One compiled instruction over a small guest memory; ``data`` is the data region's start."""

    def __init__(self, code: bytes) -> None:
        self.mem = GuestMemory(code_size=4096, data_size=1 << 16, stack_size=4096)
        self.st = CpuState(self.mem)
        self.mem.write(self.mem.code_start, code, code=True)
        self.data = self.mem.data_start
        self.run: Callable[[], None] = compile_one(self.st, self.mem.code_start).run

    def lanes(self, reg: int, dt: type) -> np.ndarray:
        return self.st.zmm[reg].view(dt)

    def memory(self, addr: int, n: int, dt: type) -> np.ndarray:
        return self.mem.buf[addr - self.mem.base:addr - self.mem.base + n * np.dtype(dt).itemsize].view(dt)


def _gather_machine() -> tuple[Machine, np.ndarray]:
    """vpgatherdd zmm1{k1}, [rdx + zmm20*4]; memory dwords 0..63 hold 1000 + i; indices i."""
    m = Machine(_encode(_C.EVEX_VPGATHERDD_ZMM_K1_VM32Z, _R.ZMM1, _R.ZMM20))
    m.st.gpr[RDX] = m.data
    m.memory(m.data, 64, np.uint32)[:] = 1000 + np.arange(64)
    m.lanes(20, np.int32)[:] = np.arange(16)
    old = np.arange(16, dtype=np.uint32) + 0xAAAA0000
    m.lanes(1, np.uint32)[:] = old
    return m, old


def test_gather_masked_off_element_does_not_fault():
    m, old = _gather_machine()
    m.lanes(20, np.int32)[3] = FAR  # masked off: never read
    m.st.k[1] = 0xFFFF & ~(1 << 3) | (0xFF << 40)
    m.run()
    want = 1000 + np.arange(16, dtype=np.uint32)
    want[3] = old[3]
    assert (m.lanes(1, np.uint32) == want).all()
    assert m.st.k[1] == 0


def test_gather_fault_is_restartable():
    m, old = _gather_machine()
    m.lanes(20, np.int32)[5] = FAR
    m.st.k[1] = 0xFFFF & ~(1 << 2)
    with pytest.raises(GuestFault) as err:
        m.run()
    assert err.value.kind == "memory"
    got = m.lanes(1, np.uint32)
    done = [0, 1, 3, 4]
    assert (got[done] == 1000 + np.array(done)).all()
    assert got[2] == old[2] and (got[5:] == old[5:]).all()
    assert m.st.k[1] == 0xFFFF & ~0x1F  # bits of the completed elements cleared, the rest kept
    m.lanes(20, np.int32)[5] = 5  # the handler maps the page: the restart completes
    m.run()
    want = 1000 + np.arange(16, dtype=np.uint32)
    want[2] = old[2]
    assert (m.lanes(1, np.uint32) == want).all() and m.st.k[1] == 0


def test_gather_zeroes_above_the_vector_length_and_merges():
    """vpgatherqd ymm1{k2}, [rdx + zmm3*8 + 8]: eight dwords from qword indices, bits 511:256 zero."""
    m = Machine(_encode(_C.EVEX_VPGATHERQD_YMM_K1_VM64Z, _R.YMM1, _R.ZMM3, scale=8, disp=8, mask=2))
    m.st.gpr[RDX] = m.data
    m.memory(m.data, 64, np.uint32)[:] = 7000 + np.arange(64)
    m.lanes(3, np.int64)[:] = np.arange(8)[::-1]
    m.lanes(1, np.uint32)[:] = 0xDEADBEEF
    m.st.k[2] = 0b1011_0110
    m.run()
    got = m.lanes(1, np.uint32)
    for j in range(8):
        want = 7000 + 2 * (7 - j) + 2 if (0b1011_0110 >> j) & 1 else 0xDEADBEEF
        assert got[j] == want, j
    assert (got[8:] == 0).all() and m.st.k[2] == 0


def _scatter_machine(code: int = _C.EVEX_VPSCATTERDD_VM32Z_K1_ZMM, data: int = _R.ZMM1,
                     index: int = _R.ZMM20) -> Machine:
    """vpscatterdd [rdx + zmm20*4]{k1}, zmm1 with source dwords 500 + j."""
    m = Machine(_encode(code, data, index))
    m.st.gpr[RDX] = m.data
    m.lanes(1, np.uint32)[:] = 500 + np.arange(16)
    return m


def test_scatter_collisions_leave_the_highest_active_element():
    m = _scatter_machine()
    m.lanes(20, np.int32)[:] = [0, 1, 0, 1, 2, 0, 2, 1, 3, 3, 3, 3, 0, 1, 2, 4]
    m.st.k[1] = 0xFFFF & ~(1 << 14) & ~(1 << 11)
    m.run()
    # slot 0: elements 0 2 5 12 -> 12; slot 1: 1 3 7 13 -> 13; slot 2: 4 6 (14 off) -> 6;
    # slot 3: 8 9 10 (11 off) -> 10; slot 4: 15
    assert m.memory(m.data, 5, np.uint32).tolist() == [512, 513, 506, 510, 515]
    assert m.st.k[1] == 0


def test_scatter_partial_overlap_in_element_order():
    """vpscatterdq with qwords whose addresses overlap by half: each later element wins its bytes."""
    m = _scatter_machine(_C.EVEX_VPSCATTERDQ_VM32Y_K1_ZMM, _R.ZMM1, _R.YMM20)
    m.lanes(1, np.uint64)[:] = [0x1111111111111111 * (j + 1) for j in range(8)]
    m.lanes(20, np.int32)[:8] = [0, 1, 2, 3, 0, 0, 0, 0]  # scale 4: offsets 0, 4, 8, 12, 0...
    m.st.k[1] = 0b0000_1111
    m.run()
    words = m.memory(m.data, 5, np.uint32).tolist()
    assert words == [0x11111111, 0x22222222, 0x33333333, 0x44444444, 0x44444444]


def test_scatter_masked_off_element_does_not_fault_and_faults_restartably():
    m = _scatter_machine()
    m.lanes(20, np.int32)[:] = np.arange(16)
    m.lanes(20, np.int32)[2] = FAR
    m.st.k[1] = 0xFFFF & ~(1 << 2)
    m.run()
    mem = m.memory(m.data, 16, np.uint32)
    assert mem[2] == 0 and all(mem[j] == 500 + j for j in range(16) if j != 2)
    assert m.st.k[1] == 0
    mem[:] = 0
    m.lanes(20, np.int32)[:] = np.arange(16)
    m.lanes(20, np.int32)[9] = FAR
    m.st.k[1] = 0xFFFF
    with pytest.raises(GuestFault):
        m.run()
    assert mem[:9].tolist() == list(range(500, 509)) and (mem[9:] == 0).all()
    assert m.st.k[1] == 0xFFFF & ~0x1FF  # elements 0..8 done, 9..15 pending


def test_no_base_and_32_bit_address_size():
    # vgatherqpd zmm1{k3}, [zmm2*8 + data]: an absolute displacement, no base register
    m = Machine(_encode(_C.EVEX_VGATHERQPD_ZMM_K1_VM64Z, _R.ZMM1, _R.ZMM2, scale=8, disp=0, mask=3,
                        base=_R.NONE))
    m.memory(m.data, 8, np.float64)[:] = np.arange(8) + 0.5
    m.lanes(2, np.int64)[:] = (m.data >> 3) + np.arange(8)
    m.st.k[3] = 0xFF
    m.run()
    assert m.lanes(1, np.float64).tolist() == (np.arange(8) + 0.5).tolist()
    # vpgatherdd xmm1{k1}, [edx + xmm2*4 + 4]: the address wraps to 32 bits
    m = Machine(_encode(_C.EVEX_VPGATHERDD_XMM_K1_VM32X, _R.XMM1, _R.XMM2, disp=4, base=_R.EDX))
    assert m.data < 1 << 32
    m.st.gpr[RDX] = (0xDEAD << 32) | m.data
    m.memory(m.data, 8, np.uint32)[:] = np.arange(8) * 3
    m.lanes(2, np.int32)[:4] = [0, -1, 2, 6]
    m.st.k[1] = 0xF
    m.run()
    assert m.lanes(1, np.uint32)[:4].tolist() == [3, 0, 9, 21]
    assert (m.lanes(1, np.uint32)[4:] == 0).all()


def test_traffic_and_trace():
    m, _ = _gather_machine()
    insn = compile_one(m.st, m.mem.code_start, trace=True)
    assert (insn.bytes_read, insn.bytes_written) == (64, 0)
    m.st.trace = []
    m.st.k[1] = 0b101
    insn.run()
    assert m.st.trace == [(m.data, 4, 0), (m.data + 8, 4, 0)]
    s = _scatter_machine(_C.EVEX_VSCATTERQPS_VM64Z_K1_YMM, _R.YMM1, _R.ZMM20)
    insn = compile_one(s.st, s.mem.code_start)
    assert (insn.bytes_read, insn.bytes_written) == (0, 32)


# --- against the host CPU: every form, scales 1 2 4 8, displacements plain and disp8*N ------------

FORMS = [f for f in avx512_forms() if "gather" in f.mnemonic or "scatter" in f.mnemonic]
DISPS = (-32, 0, 5, 96)  # with indices -4..11 at scale <= 8 every access stays in the window
HOST_OK = {"avx512f", "avx512vl"} <= cpu_flags()


def _prepare(rec: np.ndarray, rng: np.random.Generator, index: int, qword: bool) -> None:
    """Small indices (half the records in 0..3, where scatters collide)."""
    lanes = rec[:, REGISTER_BYTES * index:REGISTER_BYTES * (index + 1)].view(np.int64 if qword else np.int32)
    lanes[:] = rng.integers(-4, 12, lanes.shape)
    lanes[::2] = rng.integers(0, 4, lanes[::2].shape)


@pytest.mark.native
@pytest.mark.skipif(not HOST_OK, reason="the host CPU lacks AVX512F/VL")
def test_forms_match_host_at_every_scale():
    assert len(FORMS) == 48 and MEM_BIAS + 96 + 8 * 11 + 8 <= MEM_BYTES and MEM_BIAS - 32 - 32 >= 0
    rng = np.random.default_rng(2024)
    jobs = []
    for n, form in enumerate(FORMS):
        for s, scale in enumerate((1, 2, 4, 8)):
            regs = [1, 2] if (n + s) % 2 else [31, 17]
            code = form.encode(regs, True, disp=DISPS[(n + s) % len(DISPS)], scale=scale,
                               mask=1 + (n + s) % 7)
            rec = make_records(rng, 48)
            _prepare(rec, rng, iced.RegisterExt.number(iced.Decoder(64, code).decode().memory_index),
                     form.vsib.startswith("64"))
            jobs.append((code, rec))
    for (code, rec), native in zip(jobs, run_on_host(jobs), strict=True):
        sim = simulate_records(code, rec)
        for arr in (native, sim):  # RFLAGS: the arithmetic flags only (the harness's IF, TF...)
            arr[:, FLAGS_OUT:FLAGS_OUT + 8].view(np.uint64)[:] &= np.uint64(FLAGS_MASK)
        bad = np.flatnonzero((native != sim).any(axis=1))
        text = iced.Formatter(iced.FormatterSyntax.INTEL).format(iced.Decoder(64, code).decode())
        assert not bad.size, f"{text}: {bad.size} of {len(rec)} records differ"
