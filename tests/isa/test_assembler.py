"""Assembler: keystone + T-SAR in one run, listings, symbols, and located errors."""

import iced_x86
import pytest

from tsar.isa import AssemblyError, Memory, Register, assemble, decode, encode, make
from tsar.isa.assembler import keystone_code, radix_free, strip_comment
from tsar.isa.disassembler import disassemble, intel_formatter
from tsar.paths import kernel_source

AVX2_CORPUS = """
vmovdqu ymm0, ymmword ptr [rsi]
vmovdqa ymmword ptr [rdi + 64], ymm15
vpaddw ymm0, ymm1, ymm2
vpaddsw ymm3, ymm4, ymmword ptr [rsi + rax*2 + 0x40]
vpsubb xmm1, xmm2, xmm3
vpmaddubsw ymm0, ymm1, ymm2
vpmaddwd ymm0, ymm1, ymmword ptr [rdx + 0x1000]
vpshufb ymm5, ymm6, ymm7
vpermq ymm0, ymm1, 0xd8
vperm2i128 ymm0, ymm1, ymm2, 0x21
vpunpcklbw ymm0, ymm1, ymm2
vpacksswb ymm0, ymm1, ymm2
vpsrlw ymm0, ymm1, 4
vpsllvd ymm0, ymm1, ymm2
vpand ymm0, ymm1, ymm2
vpcmpgtb ymm0, ymm1, ymm2
vpblendvb ymm0, ymm1, ymm2, ymm3
vextracti128 xmm1, ymm2, 1
vinserti128 ymm1, ymm2, xmm3, 1
vpmovsxwd ymm4, xmm0
vpbroadcastd ymm0, dword ptr [rsi]
vpmaskmovd ymm0, ymm1, ymmword ptr [rsi]
vcvtdq2ps ymm0, ymm1
vfmadd231ps ymm0, ymm1, ymm2
vmulps ymm0, ymm1, dword ptr [rip + 0x10]{1to8}
vzeroupper
add rsi, 32
dec rcx
mov r8, 32
cmovb r8, rcx
lea rax, [rip + 0x100]
ret
"""


def _standard_lines() -> list[str]:
    return [line for line in AVX2_CORPUS.strip().splitlines() if "{1to8}" not in line]


@pytest.mark.parametrize("line", _standard_lines())
def test_standard_instruction_decodes_back_to_itself(line: str) -> None:
    """keystone's bytes decode (iced-x86) to the same instruction, which re-assembles identically."""
    code = assemble(line).code
    ins = iced_x86.Decoder(64, code).decode()
    assert not ins.is_invalid and ins.len == len(code)
    assert iced_x86.Mnemonic
    text = intel_formatter().format(ins).split("  ;")[0]
    assert text.split()[0] == line.split()[0]
    assert assemble(text).code == code, (line, text)


def test_example_kernel_listing() -> None:
    program = assemble(kernel_source("gemv16_c2s4.s").read_text(), filename="gemv16_c2s4.s")
    tsar_rows = [e for e in program.listing if e.tsar]
    assert [e.data.hex() for e in tsar_rows] == ["c4687c2007", "c4e83c3006"]
    assert program.symbols["gemv16_c2s4"] == 0
    listing = program.listing_text()
    for entry in tsar_rows:
        assert " T " + " ".join(f"{b:02x}" for b in entry.data) in listing
    # the listing covers every byte exactly once, in order
    assert b"".join(e.data for e in program.listing) == program.code


def test_branches_across_tsar_code() -> None:
    src = """
    top:
        tlut4x4 ymm8, xmmword ptr [rdi + 0x200]
        tgemv16x16 ymm0, ymm8, zmmword ptr [rsi + rcx*8 + 0x80]
        jmp bottom
        tgemv16x16 ymm1, ymm8, ymm2
    bottom:
        dec rcx
        jnz top
    """
    program = assemble(src, base=0x4000)
    lines = disassemble(program.code, 0x4000)
    texts = [line.text for line in lines]
    assert texts[0] == "tlut4x4 ymm8, xmmword ptr [rdi+0x200]"
    assert texts[2] == f"jmp {program.symbols['bottom']:#x}"
    assert texts[-1] == f"jne {program.symbols['top']:#x}"
    assert program.symbols["top"] == 0x4000


def test_rip_relative_label_in_tsar_operand() -> None:
    src = """
        tgemv8x16 ymm0, ymm8, ymmword ptr [rip + weights]
        ret
    .align 32
    weights:
        .byte 1, 2, 3
    """
    program = assemble(src, base=0x1000)
    inst = decode(program.code)
    mem = inst.operands[2]
    assert isinstance(mem, Memory) and mem.base == "rip"
    assert 0x1000 + inst.length + mem.disp == program.symbols["weights"]
    assert program.code[program.symbols["weights"] - 0x1000:][:3] == b"\x01\x02\x03"


def test_tsar_bytes_match_encoder() -> None:
    program = assemble("tgemv8x8 xmm2, xmm4, xmmword ptr [r13 + r12*4 - 8]")
    expected = encode(make("tgemv8x8", Register("xmm", 2), Register("xmm", 4),
                           Memory(base="r13", index="r12", scale=4, disp=-8)))
    assert program.code == expected


def test_comments_labels_and_numbers() -> None:
    src = "a: b: add rax, 10 ; decimal\n  # hash\n// slashes\ntlut2x4 ymm0, [rsi + 0x10] // tail"
    program = assemble(src)
    assert program.symbols == {"a": 0, "b": 0}
    assert program.code[:4] == bytes.fromhex("4883c00a")
    assert decode(program.code, 4).operands[1].disp == 16
    assert strip_comment('.ascii "a;b" ; c') == '.ascii "a;b" '


ERRORS = [
    ("movq %rdi, %rax", "AT&T syntax is not supported"),     # keystone: no bytes, no error
    ("add $1, %rax", "AT&T syntax is not supported"),
    ("mov rax, [rdi", "unbalanced '[' and ']'"),           # keystone: movabs rax, [0]
    ("mov rax, rdi]", "unbalanced"),
    # keystone aborts the whole process on this one
    ("movsx rcx, ah", "ah cannot be encoded in an instruction that needs a REX prefix (because of rcx)"),
    ("mov ah, byte ptr [r8]", "REX prefix (because of r8)"),
    ("mov bh, sil", "REX prefix (because of sil)"),
    ("foo rax, 1", "unknown mnemonic 'foo'"),
    ("tlut3x4 ymm0, [rsi]", "unknown T-SAR mnemonic"),
    ("tlut2x4 ymm1, qword ptr [rsi]", "misaligned"),
    ("tgemv16x16 ymm0, ymm4, zmmword ptr [rsi]", "misaligned"),
    ("tgemv8x16 ymm0, ymm8, qword ptr [rsi]", "must be ymmword ptr"),
    ("tgemv8x16 ymm0, [rsi], [rdx]", "not memory"),
    ("tlut2x4 ymm0, rax", "must be"),
    ("tlut2x4 ymm0, qword ptr [rsi + 0x100000000]", "32-bit"),
    ("tlut2x4 ymm0, qword ptr [rsi + rsp]", "index"),
    ("vpaddw ymm0, ymm1, [rsi + 0x100000000]", "32-bit"),
    ("mov rax, qword ptr [rsi - 0x80000001]", "32-bit"),
    ("tlut2x4 ymm0, qword ptr [rsi*3]", "scale"),
    ("tgemv8x16 ymm0, ymm8, [rip + nowhere]", "undefined label 'nowhere'"),
    ("jmp nowhere", "undefined label 'nowhere'"),
    ("vpaddw ymm0, ymm1", "invalid operand"),
    ("tlut2x4 ymm0", "operands"),
    ("tlut2x4 ymm0, qword ptr [rsi", "cannot parse"),
    ("x: nop\nx: nop", "already defined at line 3"),
    ("table: nop\ntgemv8x16 ymm0, ymm8, [rsi + table]", "RIP-relative"),
    ("tlut2x4 ymm20, [rsi]", "VEX"),
]


@pytest.mark.parametrize("source, message", ERRORS)
def test_errors_name_file_line_and_text(source: str, message: str) -> None:
    good = "nop\nnop\n"
    with pytest.raises(AssemblyError) as info:
        assemble(good + source, filename="k.s")
    err = info.value
    text = str(err)
    assert "\n" not in text
    assert message in text
    bad_line = source.splitlines()[-1]
    assert text.startswith(f"k.s:{2 + len(source.splitlines())}: error:")
    assert bad_line.strip() in text


def test_keystone_error_in_middle_of_big_file() -> None:
    lines = ["vpaddw ymm0, ymm1, ymm2"] * 300
    lines[217] = "vpaddw ymm0, ymm1, ymm2, ymm3, ymm4"
    with pytest.raises(AssemblyError) as info:
        assemble("\n".join(lines), filename="big.s")
    assert info.value.line == 218


@pytest.mark.parametrize("line", ["mov ah, byte ptr [rax]", "movzx eax, ah", "mov byte ptr [rdx + 2], bh",
                                  "mov ch, dh", "lea rax, [rip + 0x10]"])
def test_high_byte_registers_without_rex_assemble(line: str) -> None:
    assert decode_text(assemble(line).code) == line.replace(" + ", "+").replace("byte ptr ", "byte ptr ")


def decode_text(code: bytes) -> str:
    dec = iced_x86.Decoder(64, code)
    return intel_formatter().format(dec.decode())


@pytest.mark.parametrize("literal, value", [("224", 224), ("0xe0", 224), ("0E0h", 224), ("0b11100000", 224),
                                            ("1024", 1024)])
def test_integer_literals_mean_the_same_in_any_radix(literal: str, value: int) -> None:
    """keystone's default radix is uninitialised (it can read ``224`` as 0x224); every literal is
    handed to it prefixed, so each spelling gives its own value, deterministically."""
    program = assemble(f"vmovdqu ymm7, ymmword ptr [rdi + {literal}]\nmov eax, {literal}\nret\n")
    assert program.code[:4] == bytes.fromhex("c5fe6fbf")  # vmovdqu ymm7, [rdi + disp32]
    assert int.from_bytes(program.code[4:8], "little") == value
    assert program.code[8:13] == b"\xb8" + value.to_bytes(4, "little")
    assert keystone_code(f"mov eax, {literal}") == b"\xb8" + value.to_bytes(4, "little")


def test_quoted_text_keeps_its_digits() -> None:
    assert radix_free('.ascii "224 0E0h"') == '.ascii "224 0E0h"'
    assert radix_free("lea rax, [rcx + rdx*8 - 16]") == "lea rax, [rcx + rdx*0x8 - 0x10]"


def test_a_reregistered_mnemonic_assembles_to_its_new_encoding():
    """The assembler's per-line caches follow the registry: a mnemonic registered again in another
    encoding slot assembles to the new encoding, and one removed is unknown again."""
    from tsar.isa.config import TsarConfig, free_slots, register_config, unregister_config

    first, second = free_slots()[:2]
    text = "tlut3x8 ymm0, [rsi]\n"
    codes = []
    for slot in (first, second):
        cfg = register_config(TsarConfig("reslot-c3s8", c=3, s=8, slot=slot))
        try:
            assert cfg.tlut_mnemonic == "tlut3x8"
            codes.append(assemble(text).code)
        finally:
            unregister_config(cfg.name)
    assert codes[0] != codes[1]
    with pytest.raises(AssemblyError, match="unknown T-SAR mnemonic 'tlut3x8'"):
        assemble(text)
