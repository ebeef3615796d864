"""The asm / disasm / isa commands, run as a user runs them."""

import subprocess
import sys
from pathlib import Path

import pytest

from tsar.cli.main import main
from tsar.isa import reference
from tsar.paths import kernel_source

REPO = Path(__file__).resolve().parents[2]


def tsar(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tsar", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_asm_listing_of_readme_example(tmp_path: Path) -> None:
    out = tmp_path / "k.bin"
    proc = tsar("asm", str(kernel_source("gemv16_c2s4.s")), "--listing", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    tsar_rows = [line for line in proc.stdout.splitlines() if " T " in line]
    assert len(tsar_rows) == 2
    assert "c4 68 7c 20 07" in tsar_rows[0] and "tlut2x4" in tsar_rows[0]
    assert "c4 e8 3c 30 06" in tsar_rows[1] and "tgemv8x16" in tsar_rows[1]
    dis = tsar("disasm", str(out))
    assert dis.returncode == 0
    assert "tlut2x4 ymm8, qword ptr [rdi]" in dis.stdout
    assert "vzeroupper" in dis.stdout


def test_disasm_hex() -> None:
    proc = tsar("disasm", "--hex", "c4 68 7c 20 07 c4e83c3006", "--base", "0x1000")
    assert proc.returncode == 0
    assert "1000:" in proc.stdout and "tgemv8x16 ymm0, ymm8, ymmword ptr [rsi]" in proc.stdout


def test_isa_table_lists_every_instruction(capsys: pytest.CaptureFixture) -> None:
    assert main(["isa"]) == 0
    out = capsys.readouterr().out
    for mnemonic in ("tlut2x4", "tgemv8x16", "tlut4x4", "tgemv16x16", "tgemv8x8"):
        assert mnemonic in out


def test_reference_page_is_in_sync() -> None:
    """docs/isa.md is what `tsar isa --markdown` generates from the definitions."""
    page = (REPO / "docs" / "isa.md").read_text()
    assert page == reference.markdown() + "\n", "regenerate with: tsar isa --markdown docs/isa.md"


BAD_SOURCES = {
    "unknown mnemonic": "frobnicate rax",
    "unknown T-SAR mnemonic": "tlut3x3 ymm0, [rsi]",
    "misaligned group": "tlut4x4 ymm2, xmmword ptr [rsi]",
    "bad operand kind": "tgemv8x16 ymm0, ymm8, dword ptr [rsi]",
    "register where memory-only": "tgemv8x16 ymm0, [rdi], ymm2",
    "displacement range": "tlut2x4 ymm0, [rsi + 0x1000000000]",
    "keystone operand error": "vpaddw ymm0, ymm1, 5",
    "undefined label (branch)": "jne missing_label",
    "undefined label (T-SAR)": "tgemv8x16 ymm0, ymm8, [rip + missing_label]",
    "duplicate label": "l1: nop\nl1: nop",
    "wrong register class": "tlut2x4 ymm0, xmm1",
    "bad scale": "tlut2x4 ymm0, [rsi + rax*5]",
    "unparsable operand": "tlut2x4 ymm0, 3 + ",
}


@pytest.mark.parametrize("name", list(BAD_SOURCES))
def test_bad_input_gives_one_line_with_file_and_line(tmp_path: Path, name: str) -> None:
    src = tmp_path / "bad.s"
    body = BAD_SOURCES[name]
    src.write_text("; a kernel\n    nop\n" + body + "\n    ret\n")
    proc = tsar("asm", str(src))
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    line = 2 + len(body.splitlines())
    assert f"{src}:{line}: error:" in lines[0]
    assert body.splitlines()[-1].strip() in lines[0]
    assert "Traceback" not in proc.stderr


def test_missing_file_and_bad_hex_are_one_line() -> None:
    for args in (["asm", "/nonexistent/k.s"], ["disasm", "--hex", "c4e"], ["disasm", "/nonexistent"]):
        proc = tsar(*args)
        assert proc.returncode == 1
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
