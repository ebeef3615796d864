"""The one decoder of mixed streams (:mod:`tsar.isa.stream`): it agrees with the codec and iced-x86
taken separately, and every consumer (disassembler, simulator block builder, timing adapters,
predict) sees the same instructions."""

from __future__ import annotations

import iced_x86
import pytest

from tsar.isa import codec, disassemble
from tsar.isa.instructions import Kind, instructions
from tsar.isa.operands import Memory, Register
from tsar.isa.stream import Decoded, decode_one, decode_stream, intel_formatter

AVX2 = bytes.fromhex(
    "c5fe6f0e"              # vmovdqu ymm1, [rsi]
    "c4e27d00541620"        # vpshufb ymm2, ymm0, [rsi+rdx+0x20]
    "c5e5fdda"              # vpaddw ymm3, ymm3, ymm2
    "c5fd6f0540000000"      # vmovdqa ymm0, [rip+0x40]
    "4883c620"              # add rsi, 0x20
    "48ffc9"                # dec rcx
)
RET = bytes.fromhex("c3")
RESERVED = [
    bytes.fromhex("c4e87c2f00"),    # reserved opcode 0x2f
    bytes.fromhex("c4e8fc2007"),    # VEX.W=1
    bytes.fromhex("c4e87d2007"),    # VEX.pp=01
    bytes.fromhex("c4e8742007"),    # TLUT with a used VEX.vvvv
    bytes.fromhex("c4687c210f"),    # tlut4x4 ymm9: misaligned 8-register group
]


def _tsar_instructions() -> list[codec.TsarInstruction]:
    """Register and memory forms (SIB, RIP-relative) of every instruction of every configuration."""
    out = []
    for spec in instructions():
        cls, g = spec.register_class, spec.config.group_regs
        mem = [Memory("rsi", "rax", 8, 0x10), Memory("rip", disp=0x40), Memory("r9")]
        if spec.kind is Kind.TLUT:
            dst = Register(cls, g)
            out += [codec.make(spec.mnemonic, dst, Register(cls, 3))]
            out += [codec.make(spec.mnemonic, dst, m) for m in mem]
        else:
            acc, lut = Register(cls, 1), Register(cls, g)
            weights = Register(cls, spec.config.weight_regs * 3 % 16)
            out += [codec.make(spec.mnemonic, acc, lut, weights)]
            out += [codec.make(spec.mnemonic, acc, lut, m) for m in mem]
    return out


def _mixed_stream() -> bytes:
    parts = [AVX2]
    for inst in _tsar_instructions():
        parts += [codec.encode(inst), bytes.fromhex("c5e5fdda")]
    parts += [*RESERVED, bytes.fromhex("0f0b"), RET]   # ud2 is valid x86
    return b"".join(parts)


def _separately(code: bytes, offset: int, base: int) -> tuple[int, object]:
    """(length, what the codec or iced-x86 alone make of ``code[offset]``)."""
    if codec.is_tsar(code, offset):
        try:
            inst = codec.decode(code, offset)
        except codec.InvalidInstruction as exc:
            return codec.encoded_length(code, offset) or 1, str(exc)
        return inst.length, inst
    ins = iced_x86.Decoder(64, code[offset:offset + 15], ip=base + offset).decode()
    return (1, None) if ins.is_invalid else (ins.len, ins)


def _check_against_separate(code: bytes, base: int) -> list[Decoded]:
    decoded = list(decode_stream(code, base))
    offset = 0
    for d in decoded:
        length, alone = _separately(code, offset, base)
        assert d.address == base + offset and d.length == length
        assert d.data == code[offset:offset + length]
        assert d.is_tsar == codec.is_tsar(code, offset)
        if isinstance(alone, codec.TsarInstruction):
            assert d.valid and d.tsar == alone and d.x86 is None
            assert d.asm == str(alone)
        elif isinstance(alone, iced_x86.Instruction):
            assert d.valid and d.tsar is None and d.x86 is not None
            assert (d.x86.code, d.x86.len, d.x86.ip) == (alone.code, alone.len, alone.ip)
            assert d.asm == intel_formatter().format(alone)
        else:
            assert not d.valid and d.tsar is None and d.x86 is None
            if d.is_tsar:
                assert d.error == alone and d.text == f"(bad) ; {alone}"
            else:
                assert d.text == "(bad)"
            with pytest.raises(codec.InvalidInstruction):
                d.check()
        assert decode_one(code, offset, base) == d
        offset += d.length
    assert offset == len(code)
    return decoded


@pytest.mark.parametrize("base", [0, 0x401000])
def test_mixed_stream_matches_codec_and_iced(base: int) -> None:
    code = _mixed_stream()
    decoded = _check_against_separate(code, base)
    tsar = [d.tsar for d in decoded if d.tsar is not None]
    assert tsar == [codec.decode(codec.encode(i)) for i in _tsar_instructions()]
    assert {i.spec for i in tsar} == set(instructions())  # every registered configuration
    bad = [d for d in decoded if not d.valid]
    assert [d.data for d in bad] == RESERVED
    assert "reserved opcode" in bad[0].error and "VEX.W=1" in bad[1].error
    assert "misaligned" in bad[4].error
    assert decoded[-1].asm == "ret" and decoded[-2].asm == "ud2"


def test_rip_relative_text_is_annotated_once() -> None:
    code = _mixed_stream()
    for d in decode_stream(code, 0x1000):
        mem = d.tsar.memory_operand if d.tsar is not None else None
        if mem is not None and mem.rip_relative:
            assert d.text == f"{d.asm}  ; {d.next + mem.disp:#x}"
        elif d.x86 is not None and d.x86.is_ip_rel_memory_operand:
            assert d.text == f"{d.asm}  ; {d.x86.ip_rel_memory_address:#x}"
        elif d.valid:
            assert d.text == d.asm


def test_truncated_bytes() -> None:
    code = _mixed_stream()
    for d in decode_stream(code):
        for cut in range(d.address + 1, d.next):  # every cut inside every instruction
            part = _check_against_separate(code[d.address:cut], d.address)
            assert not part[0].valid and part[0].is_tsar == (d.is_tsar and cut - d.address >= 2)
    for cut in range(0, len(code), 7):  # a cut stream decodes like its parts
        assert list(decode_stream(code, 0, 0, cut)) == _check_against_separate(code[:cut], 0)


def test_start_and_end_bound_the_stream() -> None:
    code = _mixed_stream()
    all_ = list(decode_stream(code, 0x100))
    mid = all_[5]
    tail = list(decode_stream(code, 0x100, start=mid.address - 0x100))
    assert tail == all_[5:]
    head = list(decode_stream(code, 0x100, end=mid.address - 0x100))
    assert head == all_[:5]


def test_tsar_map_is_invalid_to_iced() -> None:
    """The decision is the codec's: iced-x86 alone rejects map 8."""
    for inst in _tsar_instructions():
        raw = codec.encode(inst)
        assert iced_x86.Decoder(64, raw).decode().is_invalid
        assert decode_one(raw).tsar == codec.decode(raw)


# --- consumers -------------------------------------------------------------------------------------
def test_disassembler_lines_are_stream_records() -> None:
    code = _mixed_stream()
    lines = disassemble(code, 0x2000)
    assert lines == list(decode_stream(code, 0x2000))
    assert [(ln.address, ln.data, ln.text, ln.valid, ln.tsar) for ln in lines] == \
        [(d.address, d.data, d.text, d.valid, d.tsar) for d in decode_stream(code, 0x2000)]


def test_timing_adapters_agree() -> None:
    from tsar.sim.timing.adapters import decode_forms, form_at, form_from_iced, form_from_tsar

    code = _mixed_stream()
    valid_prefix = code[:code.index(RESERVED[0])]
    forms = decode_forms(valid_prefix, 0x3000)
    decoded = list(decode_stream(valid_prefix, 0x3000))
    assert len(forms) == len(decoded)
    for form, d in zip(forms, decoded, strict=True):
        if d.tsar is not None:
            assert form == form_from_tsar(codec.decode(d.data), d.address)
            mem = d.tsar.memory_operand
            regs = (mem.base, mem.index) if mem is not None else ()
            assert form.address_reads == tuple(r for r in regs if r and r != "rip")
            assert form.writes == tuple(f"v{r.num}" for r in d.tsar.registers_written)
        else:
            ins = iced_x86.Decoder(64, d.data, ip=d.address).decode()
            assert form == form_from_iced(ins)
        assert form_at(valid_prefix, d.address - 0x3000, 0x3000) == (form, d.length)
    with pytest.raises(ValueError, match="reserved opcode"):
        decode_forms(code)
    with pytest.raises(ValueError, match="undecodable bytes at 0x10"):
        form_at(bytes.fromhex("06"), 0, 0x10)  # push es: invalid in 64-bit mode


def test_form_from_tsar_lists_the_isa_registers() -> None:
    from tsar.sim.timing.adapters import form_from_tsar

    for inst in _tsar_instructions():
        form = form_from_tsar(inst)
        assert form.reads == tuple(f"v{r.num}" for r in inst.registers_read if r.cls != "gpr")
        assert form.writes == tuple(f"v{r.num}" for r in inst.registers_written)
        mem = inst.memory_operand
        assert form.mem_read_bytes == (mem.size if mem else 0)


def test_predict_decodes_like_the_stream() -> None:
    from tsar.sim.timing.predict import decode_at

    code = _mixed_stream()
    valid_prefix = code[:code.index(RESERVED[0])] + bytes.fromhex("75f0e8000000" "00c3")  # jne, call
    for d in decode_stream(valid_prefix, 0x5000):
        p = decode_at(valid_prefix, 0x5000, d.address)
        assert p.length == d.length
        if d.tsar is not None:
            assert p.target is None and not p.is_call
        else:
            branch = d.x86.flow_control == iced_x86.FlowControl.CONDITIONAL_BRANCH
            assert p.target == (d.x86.near_branch_target if branch else None)
            assert p.is_call == (d.x86.flow_control == iced_x86.FlowControl.CALL)


def test_simulator_block_builder_agrees() -> None:
    from tsar.sim import create_machine
    from tsar.sim.python_engine.blocks import SCALAR, TSAR, VECTOR, decode_insn

    code = _mixed_stream()
    machine = create_machine(code_size=1 << 16, data_size=1 << 16)
    start = machine.mem.code_start
    machine.mem.write(start, code, code=True)
    for d in decode_stream(code, start):
        insn = decode_insn(machine.st, d.address)
        if d.tsar is not None:
            assert (insn.cls, insn.length, insn.text) == (TSAR, d.length, d.asm)
            assert insn.mnemonic == d.tsar.mnemonic
            assert insn.error is None and insn.uops == d.tsar.spec.uops
        elif d.is_tsar:  # invalid T-SAR: a #UD closure, never Unicorn's
            assert insn.cls == TSAR and insn.error is not None and d.error in str(insn.error)
        elif d.x86 is not None:
            assert (insn.length, insn.text) == (d.length, d.asm)
            assert insn.cls == (VECTOR if d.x86.encoding == iced_x86.EncodingKind.VEX else SCALAR)
