"""VEX3 and EVEX encoder/decoder of the T-SAR family: round trips, rejections, no collision with x86."""

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
from tsar.isa.instructions import EVEX_MAP, VEX_MAP, Field, Kind
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


def aligned_reg(cls: str, regs: int, count: int = 16) -> st.SearchStrategy[Register]:
    return st.integers(0, count // regs - 1).map(lambda n: Register(cls, n * regs))


@st.composite
def tsar_instructions(draw: st.DrawFn, spec):
    cls = spec.register_class
    ops = []
    for op in spec.operands:
        if op.allows_memory and draw(st.booleans()):
            mem = draw(memories())
            ops.append(Memory(mem.base, mem.index, mem.scale, mem.disp, size=op.mem_bytes))
        else:
            ops.append(draw(aligned_reg(cls, op.regs, spec.config.addressable_registers)))
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


def test_evex_forms_address_zmm0_to_31() -> None:
    """EVEX.R' / V' / X carry bit 4 of ModRM.reg, vvvv and a register-form ModRM.rm."""
    inst = make("tgemv8x32", Register("zmm", 17), Register("zmm", 31), Register("zmm", 22))
    code = encode(inst)
    assert code[0] == 0x62 and code[1] & 0x0F == EVEX_MAP and code[3] >> 5 & 3 == 0b10
    assert (code[1] >> 4 & 1, code[3] >> 3 & 1, code[1] >> 6 & 1) == (0, 0, 0)  # R', V', X (inverted)
    assert decode(code).operands == inst.operands
    low = encode(make("tgemv8x32", Register("zmm", 1), Register("zmm", 2), Register("zmm", 3)))
    assert (low[1] >> 4 & 1, low[3] >> 3 & 1, low[1] >> 6 & 1) == (1, 1, 1)


def test_evex_disp8_is_scaled_by_the_operand_size() -> None:
    """EVEX's compressed disp8*N, N = the memory operand's bytes (at most 64)."""
    def length(mnemonic: str, disp: int) -> tuple[int, int]:
        cfg_regs = {"tlut2x4": (Register("zmm", 0),), "tgemv8x32": (Register("zmm", 0), Register("zmm", 1)),
                    "tgemv16x32": (Register("zmm", 0), Register("zmm", 4))}[mnemonic]
        inst = make(mnemonic, *cfg_regs, Memory(base="rdx", disp=disp))
        code = encode(inst)
        assert decode(code).operand(Field.MODRM_RM).disp == disp
        return len(code), code[-1]
    assert length("tgemv8x32", 64) == (7, 1) and length("tgemv8x32", -128 * 64)[0] == 7
    assert length("tgemv8x32", 32)[0] == 10 and length("tgemv8x32", 128 * 64)[0] == 10
    assert length("tlut2x4", 8 * 127) == (7, 127) and length("tlut2x4", 4)[0] == 10
    assert length("tgemv16x32", 128) == (7, 2)  # 128-byte weights: N capped at 64


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


def test_evex_decoder_reports_ud() -> None:
    good = encode(make("tgemv8x32", Register("zmm", 0), Register("zmm", 8), Memory(base="rdx")))
    cases = {
        "opmask": _patched(good, 3, good[3] | 0x01),
        "zeroing": _patched(good, 3, good[3] | 0x80),
        "broadcast": _patched(good, 3, good[3] | 0x10),
        "L'L=01": _patched(good, 3, (good[3] & ~0x60) | 0x20),
        "P1 bit 2": _patched(good, 2, good[2] & ~0x04),
        "W=1": _patched(good, 2, good[2] | 0x80),
        "reserved opcode": _patched(good, 4, 0x3F),
        "truncated": good[:5],
    }
    tlut = encode(make("tlut2x4", Register("zmm", 8), Memory(base="rdi")))
    cases["V' used in TLUT"] = _patched(tlut, 3, tlut[3] & ~0x08)
    for name, code in cases.items():
        with pytest.raises(InvalidInstruction):
            decode(code)
        assert name
    assert decode(good).operands[0] == Register("zmm", 0)
    with pytest.raises(InvalidInstruction, match="opmask"):
        decode(cases["opmask"])


def test_iced_sees_every_evex_tsar_encoding_as_invalid() -> None:
    """The 512-bit forms, with every R X B R' and V' and several vvvv, are invalid x86 in iced-x86."""
    rng = np.random.default_rng(1)
    wide = [spec for spec in instructions() if spec.encoding == "evex"]
    assert wide
    for spec in wide:
        for mod_rm in range(256):
            tail = bytes([mod_rm]) + rng.integers(0, 256, 6, dtype=np.uint8).tobytes()
            for high in range(16):
                for vvvv in (0, 8, 15, 16, 31):
                    p0 = high << 4 | EVEX_MAP
                    p1 = (~vvvv & 0xF) << 3 | 0x04
                    p2 = spec.vex_l << 5 | (~vvvv >> 4 & 1) << 3
                    code = bytes([0x62, p0, p1, p2, spec.opcode]) + tail
                    assert iced_x86.Decoder(64, code).decode().is_invalid, code.hex()


def test_whole_evex_map_is_free_in_iced() -> None:
    """EVEX map 0: every opcode, pp, W, L'L, z, b and aaa decodes as invalid."""
    for opcode in range(256):
        for fields in range(0, 1 << 10, 3):
            w, pp, ll, z, b, aaa = fields >> 9 & 1, fields >> 7 & 3, fields >> 5 & 3, fields >> 4 & 1, \
                fields >> 3 & 1, fields & 7
            p1 = w << 7 | 0x78 | 0x04 | pp
            p2 = z << 7 | (ll % 3) << 5 | b << 4 | 0x08 | aaa
            code = bytes([0x62, 0xF0 | EVEX_MAP, p1, p2, opcode, 0x06, 0, 0, 0, 0])
            assert iced_x86.Decoder(64, code).decode().is_invalid, code.hex()


def test_iced_sees_every_tsar_encoding_as_invalid() -> None:
    """No T-SAR encoding, in any operand form, collides with a real x86 instruction."""
    rng = np.random.default_rng(0)
    checked = 0
    vex = [spec for spec in instructions() if spec.encoding == "vex"]
    for spec in vex:
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
    assert checked == len(vex) * 256 * 8 * 3


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
