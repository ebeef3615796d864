"""VEX3 encoder/decoder of the T-SAR family: round trips, rejections, no collision with x86."""

import multiprocessing
import subprocess
import sys
import textwrap

import iced_x86
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tsar.isa import (
    C2S4,
    C4S4,
    EncodingError,
    InvalidInstruction,
    Memory,
    Register,
    decode,
    encode,
    instructions,
    is_tsar,
    make,
)
from tsar.isa.instructions import VEX_MAP, Field, Kind
from tsar.isa.operands import GPR64

SPECS = [pytest.param(spec, id=f"{spec.mnemonic}-{spec.config.name}") for spec in instructions()]
index_regs = [r for r in GPR64 if r != "rsp"]


def memories() -> st.SearchStrategy[Memory]:
    disp = st.one_of(st.just(0), st.integers(-128, 127), st.integers(-(1 << 31), (1 << 31) - 1))
    with_base = st.builds(
        Memory,
        base=st.sampled_from(GPR64),
        index=st.one_of(st.none(), st.sampled_from(index_regs)),
        scale=st.sampled_from([1, 2, 4, 8]),
        disp=disp,
    ).map(lambda m: m if m.index else Memory(base=m.base, disp=m.disp))
    no_base = st.builds(Memory, index=st.sampled_from(index_regs), scale=st.sampled_from([1, 2, 4, 8]),
                        disp=disp)
    absolute = st.builds(Memory, disp=disp)
    rip = st.builds(Memory, base=st.just("rip"), disp=disp)
    return st.one_of(with_base, no_base, absolute, rip)


def aligned_reg(cls: str, regs: int) -> st.SearchStrategy[Register]:
    return st.integers(0, 16 // regs - 1).map(lambda n: Register(cls, n * regs))


@st.composite
def tsar_instructions(draw: st.DrawFn, spec):
    cls = spec.register_class
    ops = []
    for op in spec.operands:
        if op.allows_memory and draw(st.booleans()):
            mem = draw(memories())
            ops.append(Memory(mem.base, mem.index, mem.scale, mem.disp, size=op.mem_bytes))
        else:
            ops.append(draw(aligned_reg(cls, op.regs)))
    return make(spec.mnemonic, *ops)


@pytest.mark.parametrize("spec", SPECS)
@given(data=st.data())
def test_roundtrip_every_operand_form(spec, data) -> None:
    inst = data.draw(tsar_instructions(spec))
    code = encode(inst)
    assert is_tsar(code)
    back = decode(code + b"\x90\x90")
    assert back.length == len(code)
    assert back.spec == inst.spec
    assert back.operands == inst.operands
    assert str(back) == str(inst)


def test_extended_registers_set_vex_bits() -> None:
    inst = make("tgemv8x16", Register("ymm", 15), Register("ymm", 14),
                Memory(base="r13", index="r12", scale=8, disp=-4))
    code = encode(inst)
    assert code[0] == 0xC4 and code[1] & 0x1F == VEX_MAP
    assert code[1] >> 5 == 0b000  # R, X, B all set (stored inverted)
    assert decode(code).operands == inst.operands


def test_displacement_sizes() -> None:
    short = encode(make("tlut2x4", Register("ymm", 0), Memory(base="rsi", disp=127)))
    long = encode(make("tlut2x4", Register("ymm", 0), Memory(base="rsi", disp=128)))
    assert len(long) - len(short) == 3
    rbp = encode(make("tlut2x4", Register("ymm", 0), Memory(base="rbp")))  # needs disp8 = 0
    assert len(rbp) == 6 and rbp[-1] == 0
    rsp = encode(make("tlut2x4", Register("ymm", 0), Memory(base="rsp")))  # needs a SIB
    assert len(rsp) == 6 and rsp[-1] == 0x24


@pytest.mark.parametrize("bad, message", [
    (lambda: make("tlut2x4", Register("ymm", 1), Memory(base="rsi")), "misaligned"),
    (lambda: make("tlut4x4", Register("ymm", 4), Memory(base="rsi")), "misaligned"),
    (lambda: make("tgemv8x16", Register("ymm", 0), Register("ymm", 3), Memory(base="rsi")), "misaligned"),
    (lambda: make("tgemv16x16", Register("ymm", 0), Register("ymm", 8), Register("ymm", 1)), "misaligned"),
    (lambda: make("tgemv8x16", Register("ymm", 0), Memory(base="rsi"), Memory(base="rsi")), "not memory"),
    (lambda: make("tlut2x4", Register("ymm", 0), Memory(base="rsi", size=32)), "qword"),
    (lambda: make("tlut2x4", Register("xmm", 0), Register("ymm", 0)), "xmm"),
    (lambda: make("tlut2x4", Memory(base="rsi"), Register("ymm", 0)), "register"),
    (lambda: make("tlut2x4", Register("ymm", 16), Memory(base="rsi")), "VEX"),
    (lambda: make("tlut2x4", Register("ymm", 0)), "operands"),
    (lambda: make("tlut9x9", Register("ymm", 0)), "unknown"),
    (lambda: encode(make("tlut2x4", Register("ymm", 0), Memory(base="rsi", disp=1 << 31))), "32-bit"),
    (lambda: encode(make("tlut2x4", Register("ymm", 0), Memory(base="rsi", index="rsp"))), "index"),
    (lambda: encode(make("tlut2x4", Register("ymm", 0), Memory(base="rip", index="rax"))), "index"),
    (lambda: encode(make("tlut2x4", Register("ymm", 0), Memory(base="eax"))), "64-bit"),
])
def test_rejected_operands(bad, message) -> None:
    with pytest.raises(EncodingError, match=message):
        bad()


def _patched(code: bytes, pos: int, value: int) -> bytes:
    out = bytearray(code)
    out[pos] = value
    return bytes(out)


def test_decoder_reports_ud() -> None:
    good = encode(make("tgemv8x16", Register("ymm", 0), Register("ymm", 8), Memory(base="rdx")))
    cases = {
        "reserved opcode": _patched(good, 3, 0x3F),
        "W=1": _patched(good, 2, good[2] | 0x80),
        "pp": _patched(good, 2, good[2] | 0x01),
        "L=0": _patched(good, 2, good[2] & ~0x04),
        "misaligned group": _patched(good, 2, (good[2] & 0x87) | ((~9 & 0xF) << 3)),
        "truncated": good[:4],
    }
    tlut = encode(make("tlut2x4", Register("ymm", 8), Memory(base="rdi")))
    cases["vvvv used in TLUT"] = _patched(tlut, 2, tlut[2] & ~0x08)
    for name, code in cases.items():
        with pytest.raises(InvalidInstruction):
            decode(code)
        assert name


def test_iced_sees_every_tsar_encoding_as_invalid() -> None:
    """No T-SAR encoding, in any operand form, collides with a real x86 instruction."""
    rng = np.random.default_rng(0)
    checked = 0
    for spec in instructions():
        for mod_rm in range(256):
            tail = bytes([mod_rm]) + rng.integers(0, 256, 6, dtype=np.uint8).tobytes()
            for b1_high in range(8):
                for vvvv in (0, 8, 15):
                    b1 = b1_high << 5 | VEX_MAP
                    b2 = (~vvvv & 0xF) << 3 | spec.vex_l << 2
                    code = bytes([0xC4, b1, b2, spec.opcode]) + tail
                    ins = iced_x86.Decoder(64, code).decode()
                    assert ins.is_invalid, code.hex()
                    checked += 1
    assert checked == len(instructions()) * 256 * 8 * 3


def test_whole_map_is_free_in_iced() -> None:
    for opcode in range(256):
        for l_pp_w in range(16):
            b2 = (l_pp_w & 8) << 4 | 0x78 | (l_pp_w & 7)
            code = bytes([0xC4, 0xE0 | VEX_MAP, b2, opcode, 0x06, 0, 0, 0, 0])
            assert iced_x86.Decoder(64, code).decode().is_invalid


_SIGILL_CHILD = textwrap.dedent("""
    import ctypes, mmap, sys
    code = bytes.fromhex(sys.argv[1]) + b"\\xc3"
    buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    buf.write(code)
    data = ctypes.create_string_buffer(4096)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    # rdi/rsi/rdx point at a valid buffer so that only the opcode can fault
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(addr)
    fn(ctypes.addressof(data), ctypes.addressof(data), ctypes.addressof(data))
    print("executed")
""")


@pytest.mark.native
@pytest.mark.skipif(sys.platform != "linux" or multiprocessing.cpu_count() < 1, reason="Linux x86-64 only")
@pytest.mark.parametrize("spec", SPECS)
def test_host_cpu_raises_sigill(spec) -> None:
    if spec.kind is Kind.TLUT:
        inst = make(spec.mnemonic, Register(spec.register_class, 0),
                    Memory(base="rdi", size=spec.operand(Field.MODRM_RM).mem_bytes))
    else:
        inst = make(spec.mnemonic, Register(spec.register_class, 0),
                    Register(spec.register_class, spec.config.group_regs), Memory(base="rdx"))
    proc = subprocess.run([sys.executable, "-c", _SIGILL_CHILD, encode(inst).hex()],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -4, (proc.returncode, proc.stdout, proc.stderr)  # SIGILL
    assert "executed" not in proc.stdout


@pytest.mark.native
def test_sigill_harness_runs_real_code() -> None:
    """Control: the same harness executes a real AVX2 instruction without a signal."""
    proc = subprocess.run([sys.executable, "-c", _SIGILL_CHILD, "c5fe6f07"],  # vmovdqu ymm0, [rdi]
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "executed" in proc.stdout


def test_c4s4_register_pair_weights() -> None:
    inst = make("tgemv16x16", Register("ymm", 0), Register("ymm", 8), Register("ymm", 2))
    assert decode(encode(inst)).operands[2] == Register("ymm", 2)
    assert C4S4.weight_regs == 2 and C2S4.weight_regs == 1
