"""The generated C helpers of :mod:`tsar.sim.native_engine.tsar_stubs` against the Python engine
(:func:`tsar.sim.python_engine.tsar_exec.compile_tsar`): whole register images (zmm0..31) after
random TLUTs and TGEMVs of every registered configuration and of variants registered here (c =
1..4, 128, 256 and 512 bits, every weight-code layout, split and trit codes: vector and scalar
TGEMV paths), register and memory operands, aliasing operands, int8 / int16 extremes; exact-size
memory reads; symbol names."""

from __future__ import annotations

import ctypes
import mmap
import multiprocessing as mp
import re
import shutil
import subprocess
from collections.abc import Iterator

import numpy as np
import pytest

from tsar.isa import codec
from tsar.isa.config import TsarConfig, configs, free_slots, register_config, unregister_config
from tsar.isa.instructions import by_mnemonic
from tsar.isa.operands import Memory, Register
from tsar.sim.memory import GuestMemory
from tsar.sim.native_engine.tsar_stubs import build_helpers, c_name, helper_source, helper_symbols
from tsar.sim.python_engine.tsar_exec import compile_tsar
from tsar.sim.x86.state import CpuState

IMAGE = CpuState(GuestMemory(code_size=4096, data_size=4096, stack_size=4096)).zmm.shape
"""The register image's (rows, bytes per row): zmm0..31."""

pytestmark = pytest.mark.native

TRITS = {"weight_code": "trits"}
ROUNDS = {  # (name, c, s, vector_bits[, axes]): every TGEMV layout and every width, registered a
    # round at a time (the 16 encoding slots do not hold them all); no two share a mnemonic at one
    # width (register_config refuses that)
    "layouts": [
        ("c3s2", 3, 2, 256),  # 6-bit codes straddling bytes: scalar TGEMV
        ("c2s2_x", 2, 2, 256),  # 8 code bits per output
        ("c1s2.128", 1, 2, 128),  # c = 1, a one-register group
        ("c4s1-128", 4, 1, 128),  # 16-entry tables spanning two xmm registers
        ("c4s4/128", 4, 4, 128),  # 32 code bits per output, two-register weights, 16-register group
        ("c3s2-128", 3, 2, 128),  # scalar TGEMV on xmm
        ("c4s8", 4, 8, 256),  # 64 code bits per output (scalar), 32 activations, 4-register weights
    ],
    "accumulators": [
        ("c2s4c", 2, 4, 256, {"lut_layout": "compact"}),  # S-only LUT: one register, D = 2S - S_all
        ("c4s4c", 4, 4, 256, {"lut_layout": "compact"}),  # S-only 16-entry tables over two windows
        ("c2s4c-128", 2, 4, 128, {"lut_layout": "compact"}),
        ("c2s4d", 2, 4, 256, {"acc_bits": 32}),  # int32 accumulators (m = 8): scalar TGEMV
        ("c4s4cd", 4, 4, 256, {"lut_layout": "compact", "acc_bits": 32}),
        ("c2s4d-128", 2, 4, 128, {"acc_bits": 32}),
    ],
    "wide": [  # 512 bits (EVEX, zmm0..31; c2s4-512 and c4s4-512, in the first round, have 16 and 32
        # code bits per output): the helpers' two 256-bit slices per register
        ("c4s1-512", 4, 1, 512),  # 8 code bits per output, 16-entry tables over two windows
        ("c3s2-512", 3, 2, 512),  # 12-bit fields straddling bytes: scalar TGEMV
        ("c4s8-512", 4, 8, 512),  # an 8-register group, 4-register weights (scalar)
        ("c4s4c-512", 4, 4, 512, {"lut_layout": "compact"}),
        ("c2s4d-512", 2, 4, 512, {"acc_bits": 32}),  # int32 lanes (m = 16): scalar
    ],
    "codes": [  # trit codes (decoder tables in the scalar TGEMV)
        ("c3s2t", 3, 2, 256, TRITS),  # 5-bit codes straddling bytes, 20-byte weight operands
        ("c3s2t-128", 3, 2, 128, TRITS),  # 10-byte operands on xmm
        ("c2s4t", 2, 4, 256, TRITS),  # 4-bit codes, 16 bits per output (the split code's layout)
        ("c4s1t", 4, 1, 256, TRITS),  # 7-bit codes, 81 of 128 values ternary
        ("c1s16t", 1, 16, 256, TRITS),  # 2-bit codes, two-register weights
        ("c3s2tc", 3, 2, 256, {**TRITS, "lut_layout": "compact"}),
        ("c3s2td", 3, 2, 256, {**TRITS, "acc_bits": 32}),
        ("c3s2t-512", 3, 2, 512, TRITS),  # 40-byte operands on zmm
    ],
}
FIRST = next(iter(ROUNDS))
CASES = 600  # per configuration and instruction kind


@pytest.fixture(scope="module", params=list(ROUNDS))
def variants(request: pytest.FixtureRequest) -> Iterator[list[TsarConfig]]:
    free = iter(free_slots())
    added: list[TsarConfig] = []
    try:
        for name, c, s, v, *axes in ROUNDS[request.param]:
            added.append(register_config(TsarConfig(name, c=c, s=s, vector_bits=v, slot=next(free),
                                                    **(axes[0] if axes else {}))))
        yield added
    finally:
        for cfg in added:
            unregister_config(cfg.name)


@pytest.fixture(scope="module")
def all_configs(variants: list[TsarConfig]) -> list[TsarConfig]:
    """The first round: every registered configuration; the others: their variants."""
    return list(configs()) if variants[0].name == ROUNDS[FIRST][0][0] else variants


@pytest.fixture(scope="module")
def lib(all_configs: list[TsarConfig]) -> ctypes.CDLL:
    return ctypes.CDLL(str(build_helpers(all_configs)))


def _functions(lib: ctypes.CDLL, cfg: TsarConfig):
    tlut, tgemv = (getattr(lib, name) for name in helper_symbols(cfg))
    tlut.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    tgemv.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    tlut.restype = tgemv.restype = None
    return tlut, tgemv


def _image(rng: np.random.Generator) -> np.ndarray:
    """A random register image (zmm0..31) with int8 extremes (activations) and int16 extremes
    (words, accumulators)."""
    regs = rng.integers(0, 256, IMAGE).astype(np.uint8)
    kind = rng.integers(0, 4)
    if kind == 1:  # int8 extremes everywhere
        regs[:] = rng.choice(np.array([-128, 127, -127, 0, -1, 1], np.int8), IMAGE).view(np.uint8)
    elif kind == 2:  # int16 extremes everywhere (accumulators and LUT words wrap)
        words = rng.choice(np.array([-32768, 32767, -32767, 32766, 0, -1, 512, -512], np.int16),
                           (IMAGE[0], IMAGE[1] // 2))
        regs[:] = words.view(np.uint8)
    elif kind == 3:  # all-ones / all-zero bytes
        regs[:] = rng.choice(np.array([0, 0xFF], np.uint8), IMAGE)
    return regs


def _operand(nbytes: int, signed: bool, rng: np.random.Generator) -> np.ndarray:
    kind = rng.integers(0, 4)
    if kind == 0:
        return rng.integers(0, 256, nbytes).astype(np.uint8)
    if kind == 1:
        values = np.array([-128, 127] if signed else [0xFF, 0x00, 0xAA, 0x55], np.int64)
        return rng.choice(values, nbytes).astype(np.int8 if signed else np.uint8).view(np.uint8)
    if kind == 2:
        return np.full(nbytes, 0x80 if signed else 0xFF, np.uint8)  # -128 / all-ones codes
    return np.full(nbytes, 0x7F if signed else 0x00, np.uint8)


class _Python:
    """The Python engine on one CpuState whose memory holds the operand at ``rsi``."""

    def __init__(self) -> None:
        self.st = CpuState(GuestMemory(code_size=1 << 16, data_size=1 << 16, stack_size=1 << 16))
        self.addr = self.st.mem.data_start
        self.st.gpr[6] = self.addr  # rsi
        self.st.widen()  # the images' bits 511:256 are live: writes zero them

    def run(self, inst: codec.TsarInstruction, regs: np.ndarray, operand: np.ndarray) -> np.ndarray:
        self.st.zmm[:] = regs
        off = self.addr - self.st.mem.base
        self.st.mem.buf[off:off + operand.size] = operand
        compile_tsar(inst, 0, self.st).run()
        return self.st.zmm.copy()


def _cases(cfg: TsarConfig, rng: np.random.Generator):
    """(kind, dst, lut, src register or -1) for CASES random forms of each kind, the highest valid
    register numbers (15, or 31 in EVEX form) and aliasing forms included."""
    g, w, n = cfg.group_regs, cfg.weight_regs, cfg.addressable_registers
    top_group, top_weights = n - g, n - w
    fixed = [("tlut", top_group, -1, n - 1), ("tlut", top_group, -1, -1), ("tlut", 0, -1, g - 1),
             ("tgemv", n - 1, top_group, top_weights), ("tgemv", top_group, top_group, -1),
             ("tgemv", top_weights, 0, top_weights), ("tgemv", 0, 0, 0)]
    yield from fixed
    for i in range(2 * CASES):
        src = -1 if rng.random() < 0.5 else None
        if i % 2 == 0:
            yield ("tlut", int(rng.integers(0, n // g)) * g, -1,
                   int(rng.integers(0, n)) if src is None else -1)
        else:
            yield ("tgemv", int(rng.integers(0, n)), int(rng.integers(0, n // g)) * g,
                   int(rng.integers(0, n // w)) * w if src is None else -1)


def _instruction(cfg: TsarConfig, kind: str, dst: int, lut: int, src: int) -> codec.TsarInstruction:
    """The instruction of ``cfg`` itself, built from its own spec (a mnemonic names one
    configuration per width only)."""
    cls = cfg.register_class
    mnemonic = cfg.tlut_mnemonic if kind == "tlut" else cfg.tgemv_mnemonic
    spec = next(s for s in by_mnemonic(mnemonic) if s.config == cfg)
    operand = Register(cls, src) if src >= 0 else Memory(base="rsi", size=spec.operands[-1].mem_bytes)
    regs = (Register(cls, dst),) if kind == "tlut" else (Register(cls, dst), Register(cls, lut))
    inst = codec.TsarInstruction(spec, (*regs, operand))
    codec.validate(inst)
    return inst


def test_every_configuration_bit_exact(lib: ctypes.CDLL, all_configs: list[TsarConfig]) -> None:
    names = {cfg.name for cfg in all_configs}
    assert any({v[0] for v in variants} <= names for variants in ROUNDS.values())
    python = _Python()
    for cfg in all_configs:
        tlut, tgemv = _functions(lib, cfg)
        rng = np.random.default_rng(cfg.slot)
        for kind, dst, lut, src in _cases(cfg, rng):
            regs = _image(rng)
            nbytes = cfg.k if kind == "tlut" else cfg.weight_bytes
            operand = _operand(nbytes, kind == "tlut", rng)
            want = python.run(_instruction(cfg, kind, dst, lut, src), regs, operand)
            got = regs.copy()
            ptr = operand.ctypes.data if src < 0 else None
            if kind == "tlut":
                tlut(got.ctypes.data, dst, src, ptr)
            else:
                tgemv(got.ctypes.data, dst, lut, src, ptr)
            if not np.array_equal(got, want):
                bad = sorted({int(r) for r in np.nonzero((got != want).any(axis=1))[0]})
                pytest.fail(f"{cfg.name} {kind} dst={dst} lut={lut} src={src}: registers {bad} differ")


def test_tlut_then_tgemv_is_the_ternary_product(lib: ctypes.CDLL, all_configs: list[TsarConfig]) -> None:
    """TLUT + TGEMV add ``tile @ activations`` to the accumulator."""
    from tsar.isa.semantics import pack_tile, tile_matvec

    rng = np.random.default_rng(11)
    for cfg in all_configs:
        tlut, tgemv = _functions(lib, cfg)
        for _ in range(50):
            act = rng.integers(-127, 128, cfg.k).astype(np.int8)
            tile = rng.integers(-1, 2, (cfg.m, cfg.k)).astype(np.int8)
            weights = np.ascontiguousarray(pack_tile(cfg, tile))
            regs = np.zeros(IMAGE, np.uint8)
            tlut(regs.ctypes.data, 0, -1, act.ctypes.data)
            start = regs[15, :cfg.register_bytes].view(cfg.acc_dtype).copy()  # LUT words if 16 regs
            tgemv(regs.ctypes.data, 15, 0, -1, weights.ctypes.data)
            acc = regs[15, :cfg.register_bytes].view(cfg.acc_dtype)
            want = (start + tile_matvec(cfg, tile, act)).astype(cfg.acc_dtype)
            assert (acc == want).all(), cfg.name


def _guarded_reads(path: str, cfgs: list[TsarConfig], queue) -> None:
    """Child process: run every helper on operands that end at a PROT_NONE page."""
    libc = ctypes.CDLL(None)
    page = mmap.PAGESIZE
    buf = mmap.mmap(-1, 2 * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(base + page, page, 0) == 0
    lib = ctypes.CDLL(path)
    regs = np.zeros(IMAGE, np.uint8)
    for cfg in cfgs:
        tlut, tgemv = _functions(lib, cfg)
        tlut(regs.ctypes.data, 0, -1, base + page - cfg.k)
        tgemv(regs.ctypes.data, 0, 0, -1, base + page - cfg.weight_bytes)
    queue.put("ok")


def test_memory_operands_read_exactly_their_bytes(all_configs: list[TsarConfig]) -> None:
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    path = str(build_helpers(all_configs))
    child = ctx.Process(target=_guarded_reads, args=(path, all_configs, queue))
    child.start()
    child.join(60)
    assert child.exitcode == 0 and queue.get(timeout=5) == "ok"


def test_freestanding_object(all_configs: list[TsarConfig]) -> None:
    path = build_helpers(all_configs)
    assert build_helpers(all_configs) == path  # cached
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not found")
    undefined = subprocess.run([nm, "-D", "--undefined-only", str(path)], capture_output=True,
                               text=True, check=True).stdout.split()
    assert undefined == []
    defined = subprocess.run([nm, "-D", "--defined-only", str(path)], capture_output=True,
                             text=True, check=True).stdout
    for cfg in all_configs:
        for name in helper_symbols(cfg):
            assert re.search(rf"\bT {name}$", defined, re.M), name


def test_names_are_c_identifiers_and_injective() -> None:
    names = ["c2s4", "c2s4-128", "c2s4_128", "c2s4_2d_128", "c2s4__128", "a-b", "a_2d_b", "a.b",
             "ü", "c 2", "_", "__", "-"]
    mapped = [c_name(n) for n in names]
    assert len(set(mapped)) == len(names)
    assert all(re.fullmatch(r"[A-Za-z0-9_]+", m) for m in mapped)
    assert helper_symbols(TsarConfig("c2s4-128", c=2, s=4, vector_bits=128)) == \
        ("tsar_tlut_c2s4_2d_128", "tsar_tgemv_c2s4_2d_128")


def test_int32_accumulators_take_the_scalar_path() -> None:
    text = helper_source(TsarConfig("c2s4-acc32", c=2, s=4, acc_bits=32))
    assert "tgemv=scalar" in text and "uint32_t r7" in text


def test_trit_codes_decode_through_tables() -> None:
    text = helper_source(TsarConfig("c3s2-trits", c=3, s=2, weight_code="trits"))
    assert "tgemv=scalar" in text and "dec_d[32]" in text and "dec_s[32]" in text
