"""Disassembler: iced-x86 for x86, the T-SAR decoder for map 8, objdump-like text."""

from tsar.isa import assemble, disassemble, format_lines


def test_mixed_stream_roundtrip_through_text() -> None:
    src = """
        vmovdqu ymm1, ymmword ptr [rsi]
        tlut2x4 ymm8, qword ptr [rsi + rax*8 + 0x10]
        tgemv8x16 ymm0, ymm8, ymmword ptr [rdx - 0x20]
        tlut4x4 ymm8, ymm3
        tgemv16x16 ymm15, ymm8, ymm6
        tgemv8x8 xmm1, xmm12, xmmword ptr [r9]
        vpaddw ymm0, ymm1, ymm2
        ret
    """
    program = assemble(src)
    lines = disassemble(program.code)
    assert all(line.valid for line in lines)
    assert [bool(line.tsar) for line in lines] == [False, True, True, True, True, True, False, False]
    # the disassembly re-assembles to the same bytes
    text = "\n".join(line.text.split("  ;")[0] for line in lines)
    assert assemble(text).code == program.code


def test_bad_bytes_are_reported_not_fatal() -> None:
    code = bytes.fromhex("c4e87c2f00") + bytes.fromhex("c3")  # reserved T-SAR opcode, then ret
    lines = disassemble(code)
    assert not lines[0].valid and "reserved opcode" in lines[0].text
    assert lines[-1].text == "ret"


def test_format_has_addresses_bytes_and_labels() -> None:
    program = assemble("start: tlut2x4 ymm8, [rdi]\nret", base=0x400)
    text = format_lines(disassemble(program.code, 0x400), program.symbols)
    assert "<start>:" in text
    assert "400:\tc4 68 7c 20 07" in text
    assert "tlut2x4 ymm8, qword ptr [rdi]" in text


def test_rip_relative_targets_are_annotated() -> None:
    program = assemble("tgemv8x16 ymm0, ymm8, [rip + w]\nvmovdqu ymm1, [rip + w]\nw: ret", base=0x100)
    lines = disassemble(program.code, 0x100)
    target = f"; {program.symbols['w']:#x}"
    assert target in lines[0].text and target in lines[1].text
