"""``tsar sim coverage``: the form lists come from iced-x86 and every form is supported."""

from __future__ import annotations

import iced_x86 as iced

from tsar.cli.main import main
from tsar.sim.coverage import coverage
from tsar.sim.x86 import vecops
from tsar.sim.x86.forms import ALL_EXTENSIONS, AVX512_EXTENSIONS, EXTENSIONS, avx512_forms, vex_forms


def test_forms_are_iced_vex_forms_of_the_extensions():
    forms = vex_forms()
    for form in forms:
        info = iced.OpCodeInfo(form.code)
        assert info.encoding == iced.EncodingKind.VEX and info.mode64
        code = form.encode(list(range(1, 1 + form.register_count())), form.has_memory)
        ins = iced.Decoder(64, code).decode()
        assert ins.code == form.code, form.name
    by_ext = {e: sum(f.extension == e for f in forms) for e in EXTENSIONS}
    assert by_ext["BMI1"] == 10 and by_ext["BMI2"] == 16 and by_ext["F16C"] == 4
    assert by_ext["AVX"] > 350 and by_ext["AVX2"] > 150 and by_ext["FMA"] == 96


def test_avx512_forms_are_iced_forms_of_the_extensions():
    """Every EVEX form of the AVX-512 extensions Zen 4/5 ship (about 1,460) and the VEX forms that
    came with them; each encodes (with its write mask) to itself."""
    forms = avx512_forms()
    for form in forms:
        info = iced.OpCodeInfo(form.code)
        assert info.encoding in (iced.EncodingKind.VEX, iced.EncodingKind.EVEX) and info.mode64
        assert form.evex == (info.encoding == iced.EncodingKind.EVEX)
        for code in form.encodings():
            assert iced.Decoder(64, code).decode().code == form.code, form.name
    assert 1450 < sum(f.evex for f in forms) < 1500
    by_ext = {e: sum(f.extension == e for f in forms) for e in AVX512_EXTENSIONS}
    assert all(by_ext.values()), by_ext
    assert by_ext["AVX512_VNNI"] == 12 and by_ext["AVX_VNNI"] == 8 and by_ext["AVX512_IFMA"] == 6
    kmov = [f for f in forms if f.mnemonic.startswith("kmov")]
    assert len(kmov) == 16 and not any(f.evex for f in kmov)


def test_coverage_is_complete():
    report = coverage()
    assert [c.extension for c in report] == list(ALL_EXTENSIONS)
    assert all(c.missing == [] and c.percent == 100.0 for c in report), \
        {c.extension: c.missing for c in report if c.missing}


def test_coverage_names_a_missing_form(monkeypatch):
    monkeypatch.delitem(vecops.OPS, "vpavgb")
    report = {c.extension: c for c in coverage()}
    assert set(report["AVX"].missing) == {"VEX_VPAVGB_XMM_XMM_XMMM128"}
    assert report["AVX2"].missing == ["VEX_VPAVGB_YMM_YMM_YMMM256"]


def test_cli_coverage(capsys, monkeypatch):
    assert main(["sim", "coverage"]) == 0
    out = capsys.readouterr().out
    assert "all" in out and "100.0%" in out and "missing" not in out
    monkeypatch.delitem(vecops.OPS, "vpavgb")
    assert main(["sim", "coverage"]) == 1
    assert "missing (AVX2): VEX_VPAVGB_YMM_YMM_YMMM256" in capsys.readouterr().out
