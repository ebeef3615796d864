"""Gate-level switching activity and energy of the synthesized port.

The sky130 netlist that :mod:`.synth` writes (``write_verilog`` after ABC mapping to the cells of
:mod:`.cells`) is simulated with Verilator: each cell becomes a one-line Verilog model of its
Liberty function, the register file stays behavioural (outside the port, as in Table II), and
Verilator's toggle coverage, enabled on cell outputs only, counts the transitions of every cell
output over an instruction stream. Energy = sum over cells of output transitions x the cell's
switching energy per transition (:func:`toggle_energy_fj`).
"""

from __future__ import annotations

import ctypes
import gzip
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tsar.isa.config import TsarConfig
from tsar.rtl.cells import CELLS, FLOP, NAND2_AREA, PREFIX
from tsar.rtl.reference import Instr

SUPPLY_V = 1.8
"""sky130_fd_sc_hd nominal supply (the ``tt_025C_1v80`` corner), volts."""

CAP_PER_NAND2_FF = 5.0
"""Switched capacitance per output transition, per NAND2-equivalent of the driving cell's area,
femtofarads (assumption: about one cell's own output capacitance plus a fan-out of two to three
sky130 ``_1`` inputs and local wire; no Liberty power tables are available offline). Only this
constant scales the absolute energies; ratios between designs and streams do not depend on it."""


def toggle_energy_fj(cell: str) -> float:
    """Energy of one output transition of ``cell`` (e.g. ``"nand2_1"``), fJ: 1/2 C V^2 with
    C = :data:`CAP_PER_NAND2_FF` x the cell's area in NAND2-equivalents."""
    area = {c.name: c.area for c in (*CELLS, FLOP)}[cell]
    return 0.5 * CAP_PER_NAND2_FF * (area / NAND2_AREA) * SUPPLY_V ** 2


def _expr(function: str) -> str:
    return function.replace("!", "~")


def cell_models() -> str:
    """Verilog models of the mapped cells; toggle coverage on the output only."""
    out = []
    for c in CELLS:
        out.append(f"module {PREFIX}{c.name}(/*verilator coverage_off*/ input {', '.join(c.inputs)},\n"
                   f"  /*verilator coverage_on*/ output {c.output});\n"
                   f"  assign {c.output} = {_expr(c.function)};\nendmodule")
    out.append(f"module {PREFIX}{FLOP.name}(/*verilator coverage_off*/ input CLK, D,\n"
               f"  /*verilator coverage_on*/ output reg Q);\n"
               f"  always @(posedge CLK) Q <= D;\nendmodule")
    return "\n".join(out) + "\n"


def _regfile(vector_bits: int) -> str:
    from amaranth.back import verilog

    from tsar.rtl.regfile import RegisterFile

    text = verilog.convert(RegisterFile(vector_bits), name="regfile", ports=None)
    return re.sub(r"(reg \[\d+:0\] r\d+)( = )", r"\1 /*verilator public_flat_rw*/\2", text)


def unit_netlist(netlist: str, vector_bits: int, load_bits: int) -> str:
    """Top module ``unit`` (the ports of :class:`~tsar.rtl.unit.VectorUnit`): the gate-level
    ``slice`` (coverage off on its nets) and the behavioural register file."""
    from tsar.rtl.regfile import READ_PORTS, reg_bits

    addr = reg_bits(vector_bits) - 1
    reads = "\n".join(f"  wire [{addr}:0] a{i}; wire [{vector_bits - 1}:0] d{i};" for i in range(READ_PORTS))
    conns = ", ".join(f".rd_addr__{i}(a{i}), .rd_data__{i}(d{i})" for i in range(READ_PORTS))
    rf = ", ".join(f".rd_addr__{i}(a{i}), .rd_data__{i}(d{i})" for i in range(READ_PORTS))
    width = int(re.search(r"input \[(\d+):0\] issue__instr;", netlist).group(1))
    top = f"""
module unit(input clk, input rst, input issue__valid, output issue__ready, input [{width}:0] issue__instr,
            input [{load_bits - 1}:0] load_data, output done, output idle);
{reads}
  wire wb_en; wire [{addr}:0] wb_addr; wire [{vector_bits - 1}:0] wb_data;
  slice slice(.clk(clk), .rst(rst), .issue__valid(issue__valid), .issue__ready(issue__ready),
              .issue__instr(issue__instr), .load_data(load_data), .done(done), .idle(idle),
              {conns}, .wb_en(wb_en), .wb_addr(wb_addr), .wb_data(wb_data));
  regfile regfile(.clk(clk), .rst(rst), {rf}, .wr_en(wb_en), .wr_addr(wb_addr), .wr_data(wb_data));
endmodule
"""
    return ("/*verilator coverage_off*/\n" + netlist + "\n/*verilator coverage_on*/\n" + cell_models()
            + "/*verilator coverage_off*/\n" + _regfile(vector_bits) + top)


def cell_types(netlist: str) -> dict[tuple[str, str], str]:
    """``{(block, instance): cell}`` of the netlist (block ``""``: the slice's own module)."""
    out = {}
    module = ""
    for line in netlist.splitlines():
        m = re.match(r"module \\?(\S+?)\s*\(", line)
        if m:
            name = m.group(1)
            module = name.split(".", 1)[1] if "." in name else ""
            continue
        m = re.match(rf"\s+{PREFIX}(\w+) (\S+) \(", line)
        if m:
            out[(module, m.group(2).lstrip("\\"))] = m.group(1)
    return out


def parse_coverage(path: str | Path) -> dict[tuple[str, str], int]:
    """``{(block, instance): output transitions}`` from a Verilator coverage file (toggle points
    of cell outputs; hierarchy ``[TOP.]unit.slice[.block].instance``)."""
    out: dict[tuple[str, str], int] = {}
    for line in Path(path).read_text(errors="replace").splitlines():
        if not line.startswith("C '"):
            continue
        body, count = line[3:].rsplit("' ", 1)
        fields = dict(f.split("\x02", 1) for f in body.split("\x01") if "\x02" in f)
        if fields.get("page", "").split("/")[0] != "v_toggle":
            continue
        hier = fields.get("h", "").split(".")
        if hier[:1] == ["TOP"]:  # Verilator's root scope
            hier = hier[1:]
        if len(hier) < 3 or hier[1] != "slice":
            continue
        block, inst = (hier[2], hier[3]) if len(hier) > 3 else ("", hier[2])
        key = (block.lstrip("\\"), inst.lstrip("\\"))
        out[key] = out.get(key, 0) + int(count)
    return out


@dataclass(frozen=True)
class GateActivity:
    """One stream on one netlist: cycles, transitions and energy (fJ) per block."""

    design: str
    workload: str
    cycles: int
    transitions: dict[str, int]
    energy_fj: dict[str, float]
    macs: int = 0

    @property
    def total_fj(self) -> float:
        return sum(self.energy_fj.values())


class GateModel:
    """A compiled gate-level unit (Verilator with toggle coverage), driven like the RTL one."""

    def __init__(self, netlist_gz: str, vector_bits: int, configs: Sequence[TsarConfig]):
        from tsar.rtl.verilator import build_verilog

        with gzip.open(netlist_gz, "rt") as f:
            self.netlist = f.read()
        load_bits = vector_bits * max([1] + [c.weight_regs for c in configs])
        text = unit_netlist(self.netlist, vector_bits, load_bits)
        path = build_verilog(text, vector_bits, load_bits, coverage=True)
        self.lib = ctypes.CDLL(str(path))
        self.lib.tsar_cov_zero.argtypes = [ctypes.c_void_p]
        self.lib.tsar_cov_write.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        self.cells = cell_types(self.netlist)
        self.path = path

    def activity(self, model, design: str, workload: str, cycles: int, macs: int) -> GateActivity:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "coverage.dat"
            self.lib.tsar_cov_write(model.handle, str(path).encode())
            toggles = parse_coverage(path)
        trans: dict[str, int] = {}
        energy: dict[str, float] = {}
        for (block, inst), n in toggles.items():
            cell = self.cells.get((block, inst))
            if cell is None:
                continue
            name = block or "slice"
            trans[name] = trans.get(name, 0) + n
            energy[name] = energy.get(name, 0.0) + n * toggle_energy_fj(cell)
        return GateActivity(design, workload, cycles, trans, energy, macs)


def macs_of(program: Sequence[Instr], vector_bits: int) -> int:
    """Ternary multiply-accumulates a stream performs: ``k x m`` per TGEMV (activations x
    outputs), one per byte product of a base ``vpmaddubsw`` (TL2's multiply step)."""
    total = 0
    for i in program:
        if i.cfg is not None and i.op.name == "TGEMV":
            total += i.cfg.k * i.cfg.m
        elif i.func == "vpmaddubsw":
            total += vector_bits // 8
    return total


def run_stream(netlist_gz: str, design: str, vector_bits: int, configs: Sequence[TsarConfig],
               workload: str, program: Sequence[Instr], seed: int = 0) -> GateActivity:
    """Issue ``program`` on the gate-level unit (random registers; fresh random weights and
    activations through the back door before each T-SAR instruction, as :mod:`.power` does)
    and return its activity; transitions are counted from the first issue to the drain."""
    import numpy as np

    from tsar.rtl.bench import CompiledDriver, run_to_completion
    from tsar.rtl.regfile import vector_registers
    from tsar.rtl.unit import VectorUnit
    from tsar.rtl.verilator import CompiledModel

    gate = GateModel(netlist_gz, vector_bits, configs)
    unit = VectorUnit(vector_bits, tuple(configs))
    drv = CompiledDriver(unit, CompiledModel.from_library(str(gate.path), vector_bits))
    rng = np.random.default_rng(seed)

    def rand() -> int:
        return int.from_bytes(rng.bytes(vector_bits // 8), "little")

    for r in range(vector_registers(vector_bits)):
        drv.load(r, rand())
    gate.lib.tsar_cov_zero(drv.model.handle)
    start = drv.cycle

    async def bench() -> None:
        for instr in program:
            if instr.op.name == "TGEMV":
                for r in range(instr.src2, instr.src2 + instr.cfg.weight_regs):
                    drv.load(r, rand())
            elif instr.op.name == "TLUT":
                drv.load(instr.src2, rand())
            await drv.issue(instr)
        await drv.drain()

    run_to_completion(bench())
    return gate.activity(drv.model, design, workload, drv.cycle - start, macs_of(program, vector_bits))


def gate_energy(tsar_synth, cfg: TsarConfig, base_synth=None, cycles: int = 10_000,
                seed: int = 0) -> list[GateActivity]:
    """Gate-level runs of about ``cycles`` cycles each: the T-SAR slice on a TL2-like base stream
    and on a TLUT/TGEMV stream, and (``base_synth`` given) the base slice on the base stream."""
    import numpy as np

    from tsar.rtl.power import base_stream, tsar_stream
    from tsar.rtl.schedule import tlut_cycles

    rng = np.random.default_rng(seed)
    bits = cfg.vector_bits
    base_prog = base_stream(rng, int(cycles / 1.5), bits)  # ~1.5 cycles per instruction (hazards)
    group_cycles = tlut_cycles(cfg) + 8 * cfg.tgemv_uops + 1  # a TLUT, 8 TGEMVs, a VPADDW
    tsar_prog = tsar_stream(cfg, max(1, cycles // group_cycles))
    net, name = tsar_synth.netlist, tsar_synth.name
    runs = [run_stream(net, name, bits, (cfg,), "T-SAR GEMV stream", tsar_prog, seed),
            run_stream(net, name, bits, (cfg,), "TL2-like base stream", base_prog, seed)]
    if base_synth is not None:
        runs.append(run_stream(base_synth.netlist, base_synth.name, bits, (), "TL2-like base stream",
                               base_prog, seed))
    return runs


def format_gate_energy(runs: Sequence[GateActivity]) -> str:
    from tsar.rtl.synth import PAPER_ROWS

    names = " ".join(f"{r[0][:14]:>14}" for r in PAPER_ROWS)
    head = (f"{'design':20} {'workload':22} {'cycles':>7} {'MACs':>8} {names} {'nJ':>8} "
            f"{'pJ/cyc':>7} {'fJ/MAC':>7}")
    lines = [head, "-" * len(head)]
    for r in runs:
        cols = [sum(r.energy_fj.get(b, 0.0) for b in blocks) for _, blocks, *_ in PAPER_ROWS]
        cols[0] += r.energy_fj.get("slice", 0.0)  # the slice's own glue cells
        per_mac = f"{r.total_fj / r.macs:>7.1f}" if r.macs else f"{'-':>7}"
        lines.append(f"{r.design:20} {r.workload:22} {r.cycles:>7} {r.macs:>8} "
                     + " ".join(f"{c / 1e6:>14.2f}" for c in cols)
                     + f" {r.total_fj / 1e6:>8.2f} {r.total_fj / 1e3 / r.cycles:>7.2f} {per_mac}")
    return "\n".join(lines) + "\n(block columns in nJ)"


def format_isolation_saving(runs: Sequence[GateActivity]) -> str:
    """Per workload: energy without and with operand isolation (runs of a design ``X`` and its
    ``X-iso``) and the saving, in nJ and per cent."""
    by = {(r.design, r.workload): r for r in runs}
    lines = []
    for (design, workload), iso in by.items():
        plain = by.get((design.removesuffix("-iso"), workload)) if design.endswith("-iso") else None
        if plain is None:
            continue
        saved = plain.total_fj - iso.total_fj
        lines.append(f"operand isolation, {plain.design}, {workload}: {plain.total_fj / 1e6:.1f} -> "
                     f"{iso.total_fj / 1e6:.1f} nJ ({saved / 1e6:+.1f} nJ saved, "
                     f"{100 * saved / plain.total_fj:.1f} %)")
    return "\n".join(lines)
