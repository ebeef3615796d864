"""``tsar run`` and ``tsar bench-sim``."""

from __future__ import annotations

import re

import numpy as np

from tsar.cli.main import main
from tsar.isa import C2S4, unpack_tile
from tsar.paths import kernel_source


def test_run_assembly_kernel(capsys, tmp_path):
    trace = tmp_path / "trace.npz"
    rc = main(["run", str(kernel_source("gemv16_c2s4.s")), "--fn", "gemv16_c2s4",
               "--arg", "i8:256:ones", "--arg", "u8:1024:fill=0x55", "--out", "i32:16",
               "--arg", "256", "--trace", str(trace), "--hot", "3"])
    out = capsys.readouterr().out
    assert rc == 0
    tile = unpack_tile(C2S4, np.full(32, 0x55, np.uint8))  # the same 16x8 tile 32 times
    want = " ".join(str(v) for v in 32 * tile.sum(axis=1))
    assert f"out i32:16: [{want}]" in out
    assert "tgemv8x16 32" in out and "T-SAR micro-ops   192" in out
    assert len(np.load(trace)["address"]) > 64
    # who executed what, named for it: the strip's loop (vector + T-SAR + its scalar code) in the
    # Python layer, the few scalar instructions outside it in Unicorn
    python = int(re.search(r"Python layer +([\d,]+): vector and T-SAR instructions and the scalar code "
                           r"between them", out).group(1).replace(",", ""))
    unicorn = int(re.search(r"Unicorn +([\d,]+): scalar code outside vector loops", out).group(1))
    assert python > 10 * unicorn > 0
    assert re.search(r"layer entries +\d+: switches from Unicorn into the Python layer", out)


def test_run_reports_bad_arguments(capsys):
    rc = main(["run", str(kernel_source("gemv16_c2s4.s")), "--arg", "q7:12"])
    assert rc == 1 and "bad argument" in capsys.readouterr().err


def test_run_reports_guest_faults(capsys, tmp_path):
    src = tmp_path / "fault.s"
    src.write_text("f:\n  vmovdqu ymm0, ymmword ptr [rdi]\n  ret\n")
    rc = main(["run", str(src), "--arg", "0"])
    err = capsys.readouterr().err
    assert rc == 1 and "memory" in err and "vmovdqu" in err


def test_bench_sim(capsys):
    assert main(["bench-sim", "--k", "256", "--n", "2048", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "T-SAR GEMV" in out and "AVX2 int8 dot" in out and "M simulated instr/s" in out
