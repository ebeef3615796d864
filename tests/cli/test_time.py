"""``tsar time``: the timing model's per-loop report on a user's own assembly and shared object."""

from __future__ import annotations

import json

from tsar.cli.main import main
from tsar.kernels import kernel_c_dir
from tsar.paths import kernel_source
from tsar.sim import compile_c

GEMV = [str(kernel_source("gemv16_c2s4.s")), "--fn", "gemv16_c2s4", "--arg", "i8:2560",
        "--arg", "u8:10240", "--out", "i32:16", "--arg", "2560"]


def test_assembly_loops_and_ports(capsys):
    assert main(["time", *GEMV, "--platform", "laptop", "--ports"]) == 0
    out = capsys.readouterr().out
    assert "loop 0x23-0x3a" in out and "320" in out  # the strip's inner loop, 320 iterations
    assert "port cycles/iter" in out and "core-bound" in out


def test_shared_object_json(capsys):
    so = compile_c(kernel_c_dir() / "dot_i8_avx2.c", opt="-O3")
    assert main(["time", str(so), "--fn", "dot_i8", "--arg", "i8:4096", "--arg", "i8:4096",
                 "--arg", "4096", "--platform", "mobile", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "time" and doc["platform"] == "mobile" and doc["seconds"] > 0
    loop = max(doc["loops"], key=lambda r: r["iterations"])
    assert loop["iterations"] == 4096 // 32 and loop["cycles_per_iteration"] > 0


def test_trace_models_the_caches(capsys):
    assert main(["time", *GEMV, "--platform", "mobile", "--trace", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not any("L1D hits" in n for n in doc["notes"])


def test_bad_inputs(capsys):
    assert main(["time", "no-such.s"]) == 1
    assert main(["time", GEMV[0], "--fn", "nope"]) == 1
    assert main(["time", GEMV[0], "--platform", "mars"]) == 1
    assert main(["time", *GEMV, "--threads", "0"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("tsar time: ") for line in err)
