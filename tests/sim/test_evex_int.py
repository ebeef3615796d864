"""Checks of :mod:`tsar.sim.x86.evexint` the host-differential tests cannot make: vp2intersectd/q
(which hosts without AVX512_VP2INTERSECT cannot run) against a reference written from the SDM's
pseudo-code, the fault behaviour of compress to memory and expand from memory (only the active
elements are touched), and the field tables' defining identities."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from sim_inputs import make_records

from tsar.sim.errors import GuestFault
from tsar.sim.host_oracle import K_OFFSET, MEM_BIAS, MEM_OFFSET, simulate_records
from tsar.sim.memory import GuestMemory
from tsar.sim.python_engine.blocks import compile_one
from tsar.sim.x86.evexint import AES_INV_SBOX, AES_SBOX, GF_INV, GF_MUL
from tsar.sim.x86.forms import Form, avx512_forms
from tsar.sim.x86.state import GPR_NAMES, REGISTER_BYTES, CpuState

INTERSECT_FORMS = [f for f in avx512_forms() if f.mnemonic.startswith("vp2intersect")]
WIDTH = {"XMM": 16, "YMM": 32, "ZMM": 64}


def reference_intersect(src1: list[int], src2: list[int]) -> tuple[int, int]:
    """VP2INTERSECTD/Q as the SDM writes it: for every pair (i, j), a match sets bit i of the
    first mask and bit j of the second."""
    mask1 = mask2 = 0
    for i in range(len(src1)):
        for j in range(len(src2)):
            match = int(src1[i] == src2[j])
            mask1 |= match << i
            mask2 |= match << j
    return mask1, mask2


def _vector(rec: np.ndarray, reg: int, size: int) -> np.ndarray:
    return rec[REGISTER_BYTES * reg:REGISTER_BYTES * reg + size]


@pytest.mark.parametrize("variant", ["reg", "mem", "bcst"])
@pytest.mark.parametrize("form", INTERSECT_FORMS, ids=lambda f: f.name)
def test_vp2intersect_matches_the_sdm(form: Form, variant: str) -> None:
    size = WIDTH[form.name.split("_")[3]]
    esize = 4 if form.mnemonic.endswith("d") else 8
    dt = np.uint32 if esize == 4 else np.uint64
    rng = np.random.default_rng(zlib.crc32(f"{form.name}{variant}".encode()))
    memory, broadcast = variant != "reg", variant == "bcst"
    for regs in ((2, 5, 6), (3, 7, 7), (7, 31, 16), (1, 0, 9)):
        rec = make_records(rng, 64)
        few = rng.integers(0, 2, len(rec)) == 1  # small values: matches in most records
        for reg in regs[1:]:
            lanes = rec[:, REGISTER_BYTES * reg:REGISTER_BYTES * reg + size].view(dt)
            lanes[few] = rng.integers(0, 6, lanes[few].shape)
        mem = rec[:, MEM_OFFSET + MEM_BIAS:MEM_OFFSET + MEM_BIAS + size].view(dt)
        mem[few] = rng.integers(0, 6, mem[few].shape)
        code = form.encode(list(regs[:2]) if memory else list(regs), memory, broadcast=broadcast)
        out = simulate_records(code, rec)
        first = regs[0] & ~1  # the pair: the encoded register with bit 0 cleared, and the next
        for before, after in zip(rec, out, strict=True):
            a = _vector(before, regs[1], size).view(dt).tolist()
            if memory:
                window = before[MEM_OFFSET + MEM_BIAS:]
                b = np.tile(window[:esize], size // esize) if broadcast else window[:size]
                b = b.view(dt).tolist()
            else:
                b = _vector(before, regs[2], size).view(dt).tolist()
            k_in = before[K_OFFSET:K_OFFSET + 64].view(np.uint64).tolist()
            k_out = after[K_OFFSET:K_OFFSET + 64].view(np.uint64).tolist()
            expected = list(k_in)
            expected[first], expected[first + 1] = reference_intersect(a, b)
            assert k_out == expected, f"{form.name} {variant} {regs}: {a} / {b}"
            assert (after[:K_OFFSET] == before[:K_OFFSET]).all()  # vector registers
            assert (after[MEM_OFFSET:] == before[MEM_OFFSET:]).all()


DATA_END = GuestMemory(code_size=4096, data_size=4096, stack_size=4096).data_end
"""The end of :func:`_run`'s data region: unmapped memory follows."""


def _run(code: bytes, setup: dict[str, int], ks: dict[int, int], zmm: dict[int, np.ndarray],
         data: tuple[int, bytes] | None = None) -> CpuState:
    """Run one instruction on a fresh state (GPRs by name, opmasks, vector registers, memory)."""
    mem = GuestMemory(code_size=4096, data_size=4096, stack_size=4096)
    st = CpuState(mem)
    mem.write(mem.code_start, code, code=True)
    if data is not None:
        mem.write(*data)
    for name, value in setup.items():
        st.gpr[GPR_NAMES.index(name)] = value
    for n, value in ks.items():
        st.k[n] = value
    for n, value in zmm.items():
        st.zmm[n, :value.size] = value
    compile_one(st, mem.code_start).run()
    return st


def _form(name: str) -> Form:
    return next(f for f in avx512_forms() if f.name == name)


@pytest.mark.parametrize("mnemonic, esize", [("VPCOMPRESSB", 1), ("VPCOMPRESSW", 2), ("VPCOMPRESSD", 4),
                                             ("VPCOMPRESSQ", 8), ("VCOMPRESSPS", 4), ("VCOMPRESSPD", 8)])
def test_compress_to_memory_writes_only_the_active_elements(mnemonic: str, esize: int) -> None:
    form = _form(f"EVEX_{mnemonic}_ZMMM512_K1Z_ZMM")
    code = form.encode([1], True, mask=2)
    src = np.arange(64, dtype=np.uint8) + 1
    count = 64 // esize
    mask = 0b1011 << (count - 4)
    active = [i for i in range(count) if mask >> i & 1]
    at = DATA_END - len(active) * esize  # the stored elements end where unmapped memory begins
    st = _run(code, {"rdx": at}, {2: mask}, {1: src})
    stored = st.mem.read(at, len(active) * esize)
    expected = b"".join(src[i * esize:(i + 1) * esize].tobytes() for i in active)
    assert stored == expected
    assert st.mem.read(at - 8, 8) == bytes(8)  # nothing written below
    with pytest.raises(GuestFault):  # one more active element would cross into unmapped memory
        _run(code, {"rdx": at}, {2: mask | 1}, {1: src})


@pytest.mark.parametrize("zeroing", [False, True])
@pytest.mark.parametrize("mnemonic, esize", [("VPEXPANDB", 1), ("VPEXPANDW", 2), ("VPEXPANDD", 4),
                                             ("VPEXPANDQ", 8), ("VEXPANDPS", 4), ("VEXPANDPD", 8)])
def test_expand_from_memory_reads_only_the_active_elements(mnemonic: str, esize: int, zeroing: bool) -> None:
    form = _form(f"EVEX_{mnemonic}_ZMM_K1Z_ZMMM512")
    code = form.encode([4], True, mask=3, zeroing=zeroing)
    count = 64 // esize
    mask = 0b0110 << (count - 4)
    at = DATA_END - 2 * esize  # the two elements read end where unmapped memory begins
    old = np.full(64, 0xEE, np.uint8)
    st = _run(code, {"rdx": at}, {3: mask}, {4: old}, (at, bytes(range(1, 2 * esize + 1))))
    expected = np.zeros(64, np.uint8) if zeroing else old.copy()
    expected[(count - 3) * esize:(count - 1) * esize] = np.arange(1, 2 * esize + 1)
    assert (st.zmm[4] == expected).all()


def test_field_tables_follow_their_definitions() -> None:
    x = np.arange(1, 256)
    assert (GF_MUL[x, GF_INV[x]] == 1).all() and GF_INV[0] == 0
    assert (GF_MUL[x, 1] == x).all() and (GF_MUL == GF_MUL.T).all()
    assert GF_MUL[0x57, 0x83] == 0xC1  # FIPS-197, section 4.2
    assert AES_SBOX[0x00] == 0x63 and AES_SBOX[0x53] == 0xED  # FIPS-197, section 5.1.1
    assert (AES_INV_SBOX[AES_SBOX] == np.arange(256)).all()
