"""``--json`` documents parse and carry their kind and fields; ``--version``, ``-q``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tsar import __version__
from tsar.cli.main import main
from tsar.errors import UserError
from tsar.jsonout import document, jsonable


def _doc(capsys, argv: list[str], kind: str) -> dict:
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["tsar"], doc["schema"], doc["kind"]) == (__version__, 1, kind)
    return doc


def test_isa(capsys):
    doc = _doc(capsys, ["isa", "--json"], "isa")
    assert {c["name"] for c in doc["configurations"]} >= {"c2s4", "c4s4"}
    assert all("mnemonic" in row for row in doc["instructions"])


def test_sim_coverage(capsys):
    doc = _doc(capsys, ["sim", "coverage", "--json"], "sim-coverage")
    from tsar.sim.x86.forms import all_forms

    assert sum(e["total"] for e in doc["extensions"]) == len(all_forms()) > 2200
    assert all(e["supported"] == e["total"] for e in doc["extensions"])


def test_run_file(capsys, tmp_path):
    src = tmp_path / "add.s"
    src.write_text("add3:\n    lea eax, [rdi + rsi]\n    add eax, edx\n    ret\n")
    doc = _doc(capsys, ["run", str(src), "--arg", "1", "--arg", "2", "--arg", "3", "--returns", "i32",
                        "--json"], "run")
    assert doc["returned"] == 6 and doc["function"] == "add3"
    assert doc["stats"]["engine"] == "python" and doc["stats"]["instructions"] == 3


@pytest.mark.parametrize("engine", ["python", "native"])
def test_run_bitlinear(capsys, engine: str):
    doc = _doc(capsys, ["run", "gemm", "--kernel", "tsar-c2s4-op-tokens", "--shape", "3x64x256",
                        "--engine", engine, "--json"], "run-bitlinear")
    assert doc["exact"] and doc["shape"] == [3, 64, 256] and doc["stats"]["engine"] == engine


def test_run_model(capsys):
    doc = _doc(capsys, ["-q", "run", "model", "bitnet-b1.58-2b-4t", "--layers", "1", "--kernel",
                        "tsar-c2s4-op", "--engine", "native", "--json"], "run-model")
    assert doc["exact"] and {m["matrix"] for m in doc["matrices"]} == {"qkv", "o", "gate", "up", "down"}
    assert capsys.readouterr().err == ""  # -q: no progress


def test_bench_sim_native(capsys):
    doc = _doc(capsys, ["bench-sim", "--engine", "native", "--repeat", "1", "--json"], "bench-sim")
    engines = {r["engine"] for r in doc["results"]}
    assert engines == {"native in process", "native worker", "host"}
    assert all(r["seconds"] > 0 for r in doc["results"])


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.strip() == f"tsar {__version__}"


def test_non_numbers_are_refused():
    assert jsonable({"a": np.float32(1.5), "b": np.arange(3)}) == {"a": 1.5, "b": [0, 1, 2]}
    with pytest.raises(UserError, match="nan"):
        document("x", value=float("nan"))


def test_csv_tables(capsys):
    import csv
    import io

    assert main(["isa", "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows and {"mnemonic", "config", "uops"} <= set(rows[0])
    assert main(["-q", "run", "model", "bitnet-b1.58-2b-4t", "--layers", "1", "--kernel",
                 "tsar-c2s4-op", "--engine", "native", "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["matrix"] for r in rows] == ["qkv", "o", "gate", "up", "down"]


def test_bench_native_json_and_csv(capsys):
    argv = ["-q", "bench-native", "--kernels", "tl2,int2", "--shapes", "1x256x1024", "--threads", "1",
            "--where", "cache", "--repeats", "3"]
    doc = _doc(capsys, [*argv, "--json"], "bench-native")
    assert {r["kernel"] for r in doc["results"]} == {"tl2", "int2"}
    assert all(r["gops"] > 0 and r["spread"] >= 0 and r["int8_peak_pct"] > 0 for r in doc["results"])
    assert doc["int8_peak_gops"]
    assert main([*argv, "--csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("kernel,isa,N,M,K")


def test_compare_csv_on_a_modelled_platform(capsys):
    assert main(["-q", "compare", "--shape", "1x256x1024", "--platform", "laptop", "--csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("kernel,family,modelled_s,model_error,measured_s,spread") and len(lines) > 8


def test_compare_json(capsys):
    doc = _doc(capsys, ["-q", "compare", "--shape", "1x256x1024", "--platform", "laptop", "--json"],
               "compare")
    assert doc["baseline"] == "tl2" and {r["family"] for r in doc["rows"]} == {"T-SAR", "native"}
    tl2 = next(r for r in doc["rows"] if r["kernel"] == "tl2")
    assert tl2["speedup_modelled"] == 1.0 and tl2["measured_s"] is None  # modelled platform


def test_model_estimate_json(capsys, monkeypatch):
    """The model-estimate document, on a tiny model (a real one simulates every kernel on its
    layers: minutes from an empty cache; the slow tier runs bitnet-700m)."""
    from tsar.models import ModelConfig

    tiny = ModelConfig("tiny", hidden=256, intermediate=512, layers=2, heads=4)
    monkeypatch.setattr("tsar.estimate.model.get_model", lambda name: tiny)
    # three of the Mobile's natives (all of them: the slow test below)
    monkeypatch.setattr("tsar.estimate.model.natives_for", lambda isa: ("tl2", "int2", "int2-avxvnni"))
    monkeypatch.setattr("tsar.estimate.model.kernel_names", lambda isa: ("tsar-c2s4-op", "tsar-c4s4-op"))
    doc = _doc(capsys, ["-q", "compare", "--model", "bitnet-700m", "--platform", "mobile", "--context", "512",
                        "--json"], "model-estimate")
    estimate = doc["estimate"]
    assert estimate["model"] == "tiny" and estimate["threads"] == 4 and estimate["context"] == 512
    assert {o["op"] for o in estimate["operators"]} >= {"attention", "lm_head", "quantize"}
    assert all(o["decode_seconds"] > 0 for o in estimate["operators"])


@pytest.mark.slow
def test_model_estimate_json_of_a_real_model(capsys):
    doc = _doc(capsys, ["-q", "compare", "--model", "bitnet-700m", "--platform", "mobile", "--json"],
               "model-estimate")
    assert doc["estimate"]["model"] == "bitnet-700m"


@pytest.mark.native
def test_validate_model_json(capsys):
    doc = _doc(capsys, ["-q", "validate-model", "--tiny", "--kernel", "int2", "--no-dram", "--no-proxy",
                        "--calls", "5", "--rounds", "2", "--json"], "validate-model")
    assert doc["cases"] and doc["mape"] >= 0 and doc["cases"][0]["kernel"] == "int2"
    assert {c["N"] for c in doc["cases"]} == {1, 128}  # GEMV and the GEMM entry
    from tsar.kernels.registry import native_label
    from tsar.sim.platforms.detect import cpu_flags
    from tsar.validation.validate import host_isas

    families = {native_label("int2", isa) for isa in host_isas("int2", cpu_flags())}
    assert set(doc["error_by_family"]) == families and "int2/gemm" in doc["error_table"]["errors"]


@pytest.mark.slow
def test_rtl_area_json(capsys):
    doc = _doc(capsys, ["-q", "rtl", "area", "--no-power", "--json"], "rtl-area")
    assert any(r["row"] == "Total" for r in doc["rows"])
