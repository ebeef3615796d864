"""The TGEMV weight-code decoder of one block, and its synthesized cost.

A :class:`WeightDecoder` maps one block's weight code (``cfg.code_bits`` bits) to the LUT indices
``(idxD, idxS)`` (``c`` bits each) that TGEMV's operand selection uses, exactly as
:meth:`~tsar.isa.config.TsarConfig.code_indices` defines them: a case per code value of
:attr:`~tsar.isa.config.TsarConfig.code_table`. For the paper's split code (``idxD | idxS << c``) it
is wiring and synthesizes to nothing; for trit codes (``sum_i (w_i + 1) * 3^i``) it is logic, whose
area :func:`synthesize_decoder` measures with the project's Yosys flow (``abc -g cmos2`` for
transistors, the area-only sky130 Liberty of :mod:`.cells` for um^2).

Decoders per slice (:func:`decoders_per_slice`): one TGEMV micro-op subtracts ``lanes`` D - S
pairs, one per code (``outputs_per_uop`` outputs x ``s`` blocks), so a slice that decodes the
codes of the current micro-op needs ``m * s / tgemv_uops = lanes`` decoders (c3s2 on 256 bits:
16); decoding a whole weight operand at once would take ``m * s`` (c3s2: 32).

This block is self-contained: the slice (:mod:`.slice`) does not instantiate it yet.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from tsar.common.toolchain import cache_dir, write_atomic
from tsar.isa.config import TsarConfig
from tsar.rtl.cells import NAND2_AREA, liberty
from tsar.rtl.synth import yosys_command

TOP = "weight_decoder"

SCRIPT = """\
read_rtlil design.il
hierarchy -top {top}
synth -flatten -top {top} -noabc
delete t:$scopeinfo
design -save generic
abc -g cmos2
opt_clean
tee -q -o cmos.json stat -json -tech cmos
tee -q -o ltp.txt ltp -noff
design -load generic
abc -liberty area.lib
opt_clean
tee -q -o area.json stat -json -liberty area.lib
"""


class WeightDecoder(wiring.Component):
    """Combinational: ``code`` (``code_bits``) -> ``idx_d``, ``idx_s`` (``c`` bits each)."""

    def __init__(self, cfg: TsarConfig):
        self.cfg = cfg
        super().__init__({"code": In(cfg.code_bits), "idx_d": Out(cfg.c), "idx_s": Out(cfg.c)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        dense, sparse = self.cfg.code_table
        with m.Switch(self.code):
            for value, (d, s) in enumerate(zip(dense, sparse, strict=True)):
                with m.Case(value):
                    m.d.comb += [self.idx_d.eq(d), self.idx_s.eq(s)]
        return m


def decoders_per_slice(cfg: TsarConfig, per_uop: bool = True) -> int:
    """Decoders a slice needs: the codes of one TGEMV micro-op (``m * s / tgemv_uops``, i.e. one
    per lane subtraction), or of a whole weight operand (``m * s``) when ``per_uop`` is False."""
    return cfg.m * cfg.s // cfg.tgemv_uops if per_uop else cfg.m * cfg.s


def check_decoder(cfg: TsarConfig) -> int:
    """Simulate the decoder on every code value against ``cfg.code_indices``; returns the number of
    values checked, raises AssertionError naming the first wrong one."""
    dut = WeightDecoder(cfg)
    checked = []

    async def testbench(ctx) -> None:
        for value in range(1 << cfg.code_bits):
            ctx.set(dut.code, value)
            got = (ctx.get(dut.idx_d), ctx.get(dut.idx_s))
            want = cfg.code_indices(value)
            assert got == want, f"{cfg.name}: code {value} decodes to {got}, ISA says {want}"
            checked.append(value)

    sim = Simulator(dut)
    sim.add_testbench(testbench)
    sim.run()
    return len(checked)


@dataclass(frozen=True)
class DecoderArea:
    """Synthesized cost of one decoder (sky130 area-only Liberty; cmos2 transistor estimate)."""

    config: str
    code_bits: int
    cells: int
    transistors: int
    area_um2: float
    depth: int  # logic depth in 2-input CMOS gates (``ltp -noff`` on the cmos2 netlist)

    @property
    def nand2(self) -> float:
        """Area in NAND2-equivalents (``nand2_1`` of sky130: :data:`~tsar.rtl.cells.NAND2_AREA` um^2)."""
        return self.area_um2 / NAND2_AREA


def synthesize_decoder(cfg: TsarConfig, use_cache: bool = True) -> DecoderArea:
    """One decoder through Yosys (flattened, ``abc -g cmos2`` and ``abc -liberty``), cached by a
    hash of the design and the flow."""
    text = rtlil.convert(WeightDecoder(cfg), name=TOP)
    script = SCRIPT.format(top=TOP)
    lib = liberty()
    key = hashlib.sha256("\0".join((text, script, lib)).encode()).hexdigest()[:20]
    cache = cache_dir("rtl-synth") / f"decoder-{key}.json"
    if use_cache and cache.is_file():
        return DecoderArea(**json.loads(cache.read_text()))
    with tempfile.TemporaryDirectory(prefix="tsar-decoder-") as tmp:
        work = Path(tmp)
        (work / "design.il").write_text(text)
        (work / "area.lib").write_text(lib)
        (work / "flow.ys").write_text(script)
        run = subprocess.run([*yosys_command(), "-q", "flow.ys"], cwd=work, capture_output=True,
                             text=True)
        if run.returncode:
            raise RuntimeError(f"yosys failed on the {cfg.name} decoder: {run.stdout[-2000:]}"
                               f"{run.stderr[-2000:]}")
        cmos = json.loads((work / "cmos.json").read_text())["modules"][f"\\{TOP}"]
        area = json.loads((work / "area.json").read_text())["modules"][f"\\{TOP}"]
        ltp = (work / "ltp.txt").read_text()
    depth = max((int(n) for n in re.findall(r"\(length=(\d+)\)", ltp)), default=0)
    result = DecoderArea(cfg.name, cfg.code_bits, int(area["num_cells"]),
                         int(cmos.get("estimated_num_transistors", 0)), round(float(area.get("area", 0)), 2),
                         depth)
    write_atomic(cache, json.dumps(asdict(result)))
    return result

