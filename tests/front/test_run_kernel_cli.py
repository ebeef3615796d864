"""`tsar run gemv|gemm`: assemble, simulate, verify and report a T-SAR BitLinear kernel."""

import pytest

from tsar.cli.main import main


def test_run_gemv_named_kernel(capsys: pytest.CaptureFixture) -> None:
    assert main(["run", "gemv", "--kernel", "tsar-c2s4-op", "--shape", "1x32x64"]) == 0
    out = capsys.readouterr().out
    assert "bit-exact" in out
    assert "tgemv8x16 16" in out  # 2 tiles x 8 chunks, in the instruction mix
    assert "T-SAR micro-ops" in out and "vector memory" in out


def test_run_gemm_auto_selects(capsys: pytest.CaptureFixture) -> None:
    assert main(["run", "gemm", "--shape", "2x32x64"]) == 0
    out = capsys.readouterr().out
    assert "<- selected" in out and "bit-exact" in out


@pytest.mark.parametrize("args, message", [
    (["--shape", "2x32x64"], "N = 1"),
    (["--shape", "1x40x64", "--kernel", "tsar-c2s4-op"], "multiple of 16"),
    (["--shape", "1x32"], "N x M x K"),
    (["--kernel", "tsar-c9s9-op", "--shape", "1x32x64"], "unknown kernel"),
])
def test_run_gemv_bad_input(capsys: pytest.CaptureFixture, args: list[str], message: str) -> None:
    assert main(["run", "gemv", *args]) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
