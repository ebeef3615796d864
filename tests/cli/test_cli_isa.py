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


# --- the variant-file option --isa FILE, before or after the command ---------------------------

VARIANT = '[[config]]\nname = "c2s4-cli"\nc = 2\ns = 4\nacc_bits = 32\n'


@pytest.mark.parametrize("where", ["before", "after"])
def test_isa_file_before_or_after_the_command(tmp_path: Path, where: str) -> None:
    """`tsar --isa FILE run gemv ...` and `tsar run gemv ... --isa FILE` both register the file's
    configuration (its kernels run; unknown without the file)."""
    isa = tmp_path / "v.toml"
    isa.write_text(VARIANT)
    run = ["run", "gemv", "--kernel", "tsar-c2s4-cli-op", "--shape", "1x64x256"]
    argv = ["--isa", str(isa), *run] if where == "before" else [*run, "--isa", str(isa)]
    proc = tsar(*argv)
    assert proc.returncode == 0, proc.stderr
    assert "tsar-c2s4-cli-op: BitLinear 1 x 64 x 256" in proc.stdout and "bit-exact" in proc.stdout


def test_isa_file_unknown_kernel_without_the_file(capsys: pytest.CaptureFixture) -> None:
    assert main(["run", "gemv", "--kernel", "tsar-c2s4-cli-op", "--shape", "1x64x256"]) == 1
    assert "unknown kernel 'tsar-c2s4-cli-op'" in capsys.readouterr().err


def test_every_command_and_action_takes_isa() -> None:
    """Each sub-parser (commands and their actions, e.g. rtl area) accepts --isa; the files of every
    level are merged in command-line order, as the pre-parse that registers them finds them."""
    import argparse

    from tsar.cli.main import build_parser, isa_paths, preparse_isa_paths

    def parsers(parser: argparse.ArgumentParser):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    yield child
                    yield from parsers(child)

    parser = build_parser()
    found = list(parsers(parser))
    assert len(found) > 15
    missing = [p.prog for p in found if "--isa" not in p._option_string_actions]
    assert not missing, missing
    argv = ["--isa", "a.toml", "rtl", "--isa=b.toml", "area", "--isa", "c.toml", "--json"]
    args = parser.parse_args(argv)
    assert isa_paths(args) == preparse_isa_paths(argv) == ["a.toml", "b.toml", "c.toml"]
    assert isa_paths(parser.parse_args(["isa"])) == preparse_isa_paths(["isa"]) == []


def test_isa_abbreviated_after_the_command_is_loaded(tmp_path: Path) -> None:
    """argparse takes `--is FILE` for --isa; the file is then read like any other."""
    bad = tmp_path / "bad.toml"
    bad.write_text('[[config]]\nname = "v"\nc = 9\ns = 4\n')
    proc = tsar("isa", "--is", str(bad))
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and f"{bad}:3:" in proc.stderr


# --- bench-native's instruction set is --simd (not the variant-file --isa) ---------------------

def test_bench_native_simd_choices_are_the_kernels() -> None:
    from tsar.cli.commands.bench_native import SIMD_CHOICES
    from tsar.kernels.baselines import ISAS

    assert set(SIMD_CHOICES) == set(ISAS) | {"all"}   # all: every level, one case each


def test_bench_native_simd(capsys: pytest.CaptureFixture) -> None:
    from tsar.kernels.baselines import cpu_isa

    if cpu_isa() not in ("avx2", "avx512"):
        pytest.skip("the host runs neither AVX2 nor AVX-512 kernels")
    rc = main(["bench-native", "--simd", "avx2", "--kernels", "i2s", "--shapes", "1x64x384", "--threads", "1",
               "--where", "cache", "--repeats", "3", "--csv"])
    out = capsys.readouterr().out
    assert rc == 0
    assert [row.split(",")[1] for row in out.splitlines()[1:]] == ["avx2"]


@pytest.mark.parametrize("value", ["avx2", "avx512", "auto"])
def test_bench_native_old_isa_spelling_is_a_usage_error(value: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["bench-native", "--isa", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"tsar: error: --isa {value}: no such file") and f"--simd {value}" in err


def test_bench_native_rejects_a_bad_simd() -> None:
    proc = tsar("bench-native", "--simd", "sse2")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--simd: invalid choice" in proc.stderr
