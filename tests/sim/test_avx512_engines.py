"""The native and proxy engines on guest code that mixes T-SAR with AVX-512 state.

A program loads zmm0..31 and k0..7 from an image (EVEX moves as iced-x86 ``.byte`` lines: keystone
has no AVX-512), runs T-SAR instructions of one configuration with a few EVEX / opmask
instructions between them, and stores every register back. In the native engine (stubs spill
and reload the registers around each T-SAR helper) everything the T-SAR instructions do not
write must come back bit for bit: zmm16..31, bits 511:256 of zmm0..15 (511:128 for a 128-bit
configuration), k0..7; their destinations' bits above the configuration's width are zero (the
VEX rule); the whole image equals the Python engine's. The proxy engine must run the same
program (its T-SAR stand-ins write only the T-SAR destinations: no scratch register the EVEX code
uses), and gcc-built AVX-512 code runs natively in the worker as it does on the host.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import iced_x86 as iced
import numpy as np
import pytest

from tsar.isa import configs
from tsar.isa.config import VECTOR_REGISTERS, TsarConfig
from tsar.sim import SimulationError, compile_c, create_machine
from tsar.sim.proxy_engine.machine import proxy_source
from tsar.sim.vector_spill import HOST_AVX512, IMAGE_BYTES, K_OFFSET, byte_line, spill_lines
from tsar.sim.x86.state import REGISTER_BYTES

pytestmark = [pytest.mark.native,
              pytest.mark.skipif(not HOST_AVX512, reason="host CPU lacks AVX-512 F/BW")]

C, R = iced.Code, iced.Register
ZMM_WRITTEN_BY_EVEX, K_WRITTEN = 17, 2
SRC, ACC1, ACC2, WREG = 6, 12, 13, 10
GROUP2_EVEX = 20
"""Where the second TLUT writes in EVEX form (clear of zmm17); its SRC, ACC2 and WREG move up by 16."""


def _evex_lines(group0: int) -> tuple[str, str]:
    """``vpaddd zmm17{k1}, zmm17, zmm<group0>`` (reads a T-SAR destination in full, merge-masked)
    and ``korw k2, k3, k4``."""
    z17 = R.ZMM0 + ZMM_WRITTEN_BY_EVEX
    add = iced.Instruction.create_reg_reg_reg(C.EVEX_VPADDD_ZMM_K1Z_ZMM_ZMMM512B32, z17, z17, R.ZMM0 + group0)
    add.op_mask = R.K1
    kor = iced.Instruction.create_reg_reg_reg(C.VEX_KORW_KR_KR_KR, R.K0 + K_WRITTEN, R.K3, R.K4)
    return byte_line(add), byte_line(kor)


def _program(cfg: TsarConfig) -> tuple[str, set[int]]:
    """f(image, buffer) as described above; and the registers its T-SAR instructions write."""
    reg = cfg.register_class
    store, load = spill_lines("rdi", avx512=True)
    add, kor = _evex_lines(0)
    hi = cfg.addressable_registers - VECTOR_REGISTERS  # EVEX: operands in zmm16..31 too
    acc2, group2 = ACC2 + hi, (GROUP2_EVEX // cfg.group_regs * cfg.group_regs) if hi else 0
    lines = [
        f"{cfg.tlut_mnemonic} {reg}0, [rsi]",
        add,
        f"{cfg.tgemv_mnemonic} {reg}{ACC1}, {reg}0, [rsi + 64]",
        kor,
        f"{cfg.tlut_mnemonic} {reg}{group2}, {reg}{SRC + hi}",
        f"{cfg.tgemv_mnemonic} {reg}{acc2}, {reg}{group2}, {reg}{WREG + hi}",
    ]
    written = set(range(cfg.group_regs)) | set(range(group2, group2 + cfg.group_regs)) | {ACC1, acc2}
    return "\n".join(["f:", *load, *lines, *store, "ret", ""]), written


def _image(rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, 256, IMAGE_BYTES).astype(np.uint8)


def _run(engine: str, source: str, image: np.ndarray, buffer: np.ndarray, **options) -> np.ndarray:
    m = create_machine(engine, **options)
    m.load_asm(source)
    out = image.copy()
    m.call("f", out, buffer, returns="none")
    if engine == "proxy":
        assert not m.sites  # every T-SAR instruction was replaced in line
    return out


def _zmm(image: np.ndarray) -> np.ndarray:
    return image[:K_OFFSET].reshape(-1, REGISTER_BYTES)


def _k(image: np.ndarray) -> np.ndarray:
    return image[K_OFFSET:].view(np.uint64)


def _check_untouched(before: np.ndarray, after: np.ndarray, tsar_written: set[int], width: int) -> None:
    """What the program's instructions do not write is preserved: registers outside the T-SAR
    destinations (and zmm17, k2), zmm17's lanes that k1 masks off; the destinations' bits above
    ``width`` are zero; k2 = k3 | k4."""
    zb, za, kb, ka = _zmm(before), _zmm(after), _k(before), _k(after)
    for r in range(za.shape[0]):
        if r in tsar_written:
            assert not za[r, width:].any(), f"zmm{r}: bits above {8 * width} not zeroed"
        elif r != ZMM_WRITTEN_BY_EVEX:
            assert np.array_equal(za[r], zb[r]), f"zmm{r} changed: {np.flatnonzero(za[r] != zb[r])[:8]}"
    kept = ~np.unpackbits(kb[1:2].view(np.uint8), bitorder="little")[:16].astype(bool)
    lanes_after, lanes_before = (z[ZMM_WRITTEN_BY_EVEX].view(np.uint32)[kept] for z in (za, zb))
    assert np.array_equal(lanes_after, lanes_before), "zmm17: lanes masked off by k1 changed"
    for r in range(8):
        want = (kb[3] | kb[4]) & 0xFFFF if r == K_WRITTEN else kb[r]
        assert ka[r] == want, f"k{r}: {int(ka[r]):#x} != {int(want):#x}"


@pytest.mark.parametrize("cfg", configs(), ids=lambda c: c.name)
def test_native_preserves_avx512_state_across_tsar(cfg: TsarConfig):
    source, written = _program(cfg)
    rng = np.random.default_rng(sum(map(ord, cfg.name)))
    for _ in range(3):
        image, buffer = _image(rng), rng.integers(0, 256, 256).astype(np.uint8)
        want = _run("python", source, image, buffer)
        _check_untouched(image, want, written, cfg.register_bytes)
        for options in ({"in_process": True}, {}):
            got = _run("native", source, image, buffer, **options)
            _check_untouched(image, got, written, cfg.register_bytes)
            assert np.array_equal(got, want), (options, np.flatnonzero(got != want)[:16])


@pytest.mark.parametrize("cfg", configs(), ids=lambda c: c.name)
def test_proxy_runs_evex_code(cfg: TsarConfig):
    """The proxy replaces the T-SAR lines and keeps the EVEX ``.byte`` lines; its stand-ins write
    the T-SAR destinations only (the program names every vector register, so no scratch)."""
    source, written = _program(cfg)
    rewritten = proxy_source(source)
    assert cfg.tlut_mnemonic not in "\n".join(line.split(";")[0] for line in rewritten.splitlines())
    rng = np.random.default_rng(7)
    image, buffer = _image(rng), rng.integers(0, 256, 256).astype(np.uint8)
    got = _run("proxy", source, image, buffer, in_process=True)
    _check_untouched(image, got, written, cfg.register_bytes)


def test_gcc_avx512_kernels_run_natively():
    """gcc-built AVX-512 code (vpdpbusd, vpermb, masked tails, gathers and scatters) in the native
    engine's worker returns what the host returns when calling the object directly."""
    path = compile_c(Path(__file__).parent / "c" / "avx512_kernels.c",
                     flags=["-march=icelake-server", "-mprefer-vector-width=512"], opt="-O3")
    lib = ctypes.CDLL(str(path))
    lib.dot_vnni512.restype = ctypes.c_int32
    rng = np.random.default_rng(3)
    m = create_machine("native")
    m.load_elf(path)

    def host(name: str, *args: np.ndarray | int) -> object:
        return getattr(lib, name)(*(a.ctypes.data_as(ctypes.c_void_p) if isinstance(a, np.ndarray)
                                    else ctypes.c_size_t(a) for a in args))
    for n in (1, 63, 64, 200):
        a, b = rng.integers(0, 256, n).astype(np.uint8), rng.integers(-128, 128, n).astype(np.int8)
        assert m.call("dot_vnni512", a, b, n, returns="i32") == host("dot_vnni512", a, b, n)
        table, idx = rng.integers(-1000, 1000, 61).astype(np.int32), rng.integers(0, 61, n).astype(np.int32)
        outs = [np.full(n, 0x5A5A5A5A, np.int32), rng.integers(0, 9, 61).astype(np.int32)]
        native = [o.copy() for o in outs]
        m.call("gather_scatter", table, idx, *outs, n, returns="none")
        host("gather_scatter", table, idx, *native, n)
        for got, want in zip(outs, native, strict=True):
            assert np.array_equal(got, want)


@pytest.mark.parametrize("engine", ["native", "proxy"])
def test_evex_guest_fault_names_the_instruction(engine: str):
    """A fault of an EVEX instruction is reported at it, by its text."""
    rdi = iced.MemoryOperand(R.RDI)
    load = iced.Instruction.create_reg_mem(C.EVEX_VMOVDQU64_ZMM_K1Z_ZMMM512, R.ZMM20, rdi)
    m = create_machine(engine)
    m.load_asm(f"f:\nnop\n{byte_line(load)}\nret\n")
    with pytest.raises(SimulationError, match="vmovdqu64 zmm20") as info:
        m.call("f", 0x10)
    assert info.value.kind == "memory" and info.value.rip == m.address("f") + 1
