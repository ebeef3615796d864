"""iced-x86 and T-SAR adapters feeding the core bound."""

from __future__ import annotations

import iced_x86
import pytest

import tsar.sim.uarch as uarch
from tsar.isa import assemble
from tsar.sim.timing import core_bound, decode_forms, form_from_iced, profile_from_forms, profile_from_iced

# vpshufb ymm2,ymm0,[rsi+rdx+20h]; vpaddw ymm3,ymm3,ymm2; add rsi,20h; dec rcx; jne back
CODE = bytes.fromhex("c4e27d00541620" "c5e5fdda" "4883c620" "48ffc9" "75ec")


def test_iced_forms() -> None:
    instrs = list(iced_x86.Decoder(64, CODE, ip=0x1000))
    forms = [form_from_iced(i) for i in instrs]
    shuf, add, _, dec, jne = forms
    assert shuf.mnemonic == "vpshufb" and shuf.operands == ("ymm", "ymm", "m256")
    assert shuf.reads == ("v0",) and shuf.writes == ("v2",) and shuf.address_reads == ("rsi", "rdx")
    assert shuf.mem_read_bytes == 32
    assert add.reads == ("v3", "v2") and add.writes == ("v3",)
    assert dec.writes == ("rcx", "flags") and jne.operands == ("rel8",) and jne.reads == ("flags",)
    prof = profile_from_iced(instrs, {0x1000 + sum(i.len for i in instrs[:j]): 50 for j in range(5)})
    assert prof.iterations == 50 and len(prof.entries) == 5
    res = core_bound(prof, uarch.load("alderlakep"))
    assert res.complete and res.dependency_cycles == pytest.approx(1.0)  # vpaddw chain on ymm3


def test_lea_named_by_addressing_mode() -> None:
    lea = next(iter(iced_x86.Decoder(64, bytes.fromhex("488d449608"))))  # lea rax,[rsi+rdx*4+8]
    f = form_from_iced(lea)
    assert (f.mnemonic, f.operands) == ("lea_b_is_d8", ("r64",))
    assert uarch.load("alderlakep").lookup(f.mnemonic, f.operands).exact


def test_mixed_tsar_and_x86_code() -> None:
    prog = assemble("top:\ntlut2x4 ymm8, qword ptr [rsi]\ntgemv8x16 ymm0, ymm8, ymmword ptr [rdx]\n"
                    "tgemv16x16 ymm1, ymm8, zmmword ptr [rdx+64]\nadd rdx, 128\ndec rcx\njnz top\n")
    forms = decode_forms(prog.code, prog.base)
    tl, tg, tg4 = forms[:3]
    assert tl.writes == ("v8", "v9") and tl.mem_read_bytes == 8 and tl.operands == ("ymm", "m64")
    assert tg.reads == ("v0", "v8", "v9") and tg.writes == ("v0",)
    assert tg4.operands == ("ymm", "ymm", "m512") and len(tg4.reads) == 9
    prof = profile_from_forms(forms, [10] * len(forms))
    res = core_bound(prof, uarch.load("zen4"))
    assert res.complete and res.port_cycles == pytest.approx((2 + 4 + 4) / 2)
