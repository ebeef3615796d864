"""Simulation of the slice: an instruction driver, random checks against the reference model,
measured cycles per instruction, and waveforms.

The Python simulator of Amaranth needs nothing but Amaranth; it runs the 16-lane (256-bit) slice at a
few thousand cycles per second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise

import numpy as np
from amaranth.sim import Simulator

from tsar.isa.config import VECTOR_REGISTERS, TsarConfig

from .base import BASE_OPS, SliceOp
from .reference import Instr, SliceModel
from .unit import VectorUnit


class Driver:
    """Drives a :class:`VectorUnit` from an async testbench: register back door and issue port."""

    def __init__(self, unit: VectorUnit, ctx):
        self.unit, self.ctx = unit, ctx
        self.layout = unit.issue.instr.shape()
        self.cycle = 0

    def load(self, reg: int, value: int) -> None:
        self.ctx.set(self.unit.regs[reg], value)

    def read(self, reg: int) -> int:
        return self.ctx.get(self.unit.regs[reg])

    def _encode(self, instr: Instr):
        cfg = self.unit.configs.index(instr.cfg) if instr.cfg is not None else 0
        return self.layout.const({"op": instr.op, "cfg": cfg, "dst": instr.dst,
                                  "src1": instr.src1, "src2": instr.src2})

    async def _tick(self) -> None:
        await self.ctx.tick()
        self.cycle += 1

    async def issue(self, instr: Instr) -> int:
        """Present ``instr`` until the slice takes it; returns the cycle it was taken in."""
        ctx, issue = self.ctx, self.unit.issue
        ctx.set(issue.instr, self._encode(instr))
        ctx.set(issue.valid, 1)
        while True:
            ready = ctx.get(issue.ready)
            await self._tick()
            if ready:
                ctx.set(issue.valid, 0)
                return self.cycle

    async def execute(self, instr: Instr) -> int:
        """Issue ``instr`` and wait until it has written back; returns its execute cycles."""
        await self.issue(instr)
        cycles = 0
        while True:
            cycles += 1
            done = self.ctx.get(self.unit.done)
            await self._tick()
            if done:
                return cycles

    async def stream(self, instrs: Sequence[Instr]) -> list[int]:
        """Issue back to back; returns the issue-to-issue distance in cycles of each instruction."""
        taken = [await self.issue(instr) for instr in [*instrs, Instr(SliceOp.NOP, 0)]]
        while not self.ctx.get(self.unit.done):
            await self._tick()
        await self._tick()
        return [b - a for a, b in pairwise(taken)]


def simulate(unit: VectorUnit, bench: Callable, vcd: str | None = None) -> None:
    """Run ``bench(driver)`` (an async function) on ``unit``, optionally writing a VCD."""
    sim = Simulator(unit)
    sim.add_clock(1e-9)

    async def testbench(ctx):
        await bench(Driver(unit, ctx))

    sim.add_testbench(testbench)
    if vcd:
        with sim.write_vcd(vcd, traces=list(unit.regs)):
            sim.run()
    else:
        sim.run()


# --- random cases ----------------------------------------------------------------------------------

@dataclass
class Case:
    """A short program and the register values to load before it."""

    loads: dict[int, int]
    program: list[Instr]


@dataclass
class Report:
    instructions: int = 0
    cycles: int = 0
    mismatches: list[str] = field(default_factory=list)
    cycles_by_op: dict[str, set[int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _rand_reg(rng: np.random.Generator, bits: int) -> int:
    return int.from_bytes(rng.bytes(bits // 8), "little")


def base_case(rng: np.random.Generator, vector_bits: int) -> Case:
    """One random base instruction on random registers (operands may alias)."""
    op = BASE_OPS[rng.integers(len(BASE_OPS))]
    dst, src1, src2 = (int(r) for r in rng.integers(0, VECTOR_REGISTERS, 3))
    loads = {r: _rand_reg(rng, vector_bits) for r in {dst, src1, src2}}
    return Case(loads, [Instr(op, dst, src1, src2)])


def tsar_case(rng: np.random.Generator, cfg: TsarConfig, tgemvs: int = 3) -> Case:
    """A TLUT from random activations, then ``tgemvs`` TGEMVs with random accumulators and weight
    codes (any code, including ones the packer never emits) into the same LUT group."""
    g = cfg.group_regs
    group = int(rng.integers(0, VECTOR_REGISTERS // g)) * g
    free = [r for r in range(VECTOR_REGISTERS) if not group <= r < group + g]
    pairs = [r for r in free if r % cfg.weight_regs == 0 and r + cfg.weight_regs - 1 in free]
    loads: dict[int, int] = {}
    src = int(rng.choice(free))
    loads[src] = _rand_reg(rng, cfg.vector_bits)
    program = [Instr(SliceOp.TLUT, group, 0, src, cfg)]
    for _ in range(tgemvs):
        weights = int(rng.choice(pairs))
        acc = int(rng.choice([r for r in free if not weights <= r < weights + cfg.weight_regs]))
        program.append(Instr(SliceOp.TGEMV, acc, group, weights, cfg))
        for r in range(weights, weights + cfg.weight_regs):
            loads.setdefault(r, _rand_reg(rng, cfg.vector_bits))
        loads.setdefault(acc, _rand_reg(rng, cfg.vector_bits))
    return Case(loads, program)


def run_cases(unit: VectorUnit, cases: Iterable[Case], vcd: str | None = None) -> Report:
    """Execute every case in RTL and in :class:`~tsar.rtl.reference.SliceModel`; compare each written
    register."""
    report = Report()
    cases = list(cases)

    async def bench(drv: Driver) -> None:
        model = SliceModel(unit.slice.vector_bits)
        for case in cases:
            for reg, value in case.loads.items():
                drv.load(reg, value)
                model.regs[reg] = value
            for instr in case.program:
                cycles = await drv.execute(instr)
                model.execute(instr)
                name = str(instr).split()[0]
                report.cycles_by_op.setdefault(name, set()).add(cycles)
                report.instructions += 1
                report.cycles += cycles
                for reg in instr.writes():
                    got, want = drv.read(reg), model.regs[reg]
                    if got != want:
                        report.mismatches.append(f"{instr}: r{reg} = {got:#x}, expected {want:#x}")
                        model.regs[reg] = got  # carry on from the RTL's state

    simulate(unit, bench, vcd)
    return report


def random_cases(rng: np.random.Generator, unit: VectorUnit, n_tsar: int, n_base: int,
                 tgemvs: int = 3) -> list[Case]:
    cases = [base_case(rng, unit.slice.vector_bits) for _ in range(n_base)]
    for cfg in unit.configs:
        cases += [tsar_case(rng, cfg, tgemvs) for _ in range(n_tsar)]
    order = rng.permutation(len(cases))
    return [cases[i] for i in order]


# --- cycles per instruction --------------------------------------------------------------------------

@cache
def measured_cycles(cfg: TsarConfig) -> dict[str, int]:
    """Issue-to-issue cycles of every instruction, measured by simulating the RTL of a T-SAR slice
    for ``cfg``: ``{"tlut2x4": 2, "tgemv8x16": 4, "vpaddw": 1, ...}``. The timing model's T-SAR
    uop counts come from here."""
    unit = VectorUnit(cfg.vector_bits, (cfg,))
    g = cfg.group_regs
    acc = g if g < VECTOR_REGISTERS else 0
    weights = (acc + 2) & ~1
    program = [Instr(SliceOp.TLUT, 0, 0, VECTOR_REGISTERS - 1, cfg),
               Instr(SliceOp.TGEMV, acc, 0, weights, cfg),
               Instr(SliceOp.TGEMV, acc, 0, weights, cfg),
               Instr(SliceOp.TLUT, 0, 0, VECTOR_REGISTERS - 1, cfg),
               *(Instr(op, 1, 2, 3) for op in BASE_OPS)]
    result: dict[str, set[int]] = {}

    async def bench(drv: Driver) -> None:
        for instr, cycles in zip(program, await drv.stream(program), strict=True):
            result.setdefault(str(instr).split()[0], set()).add(cycles)

    simulate(unit, bench)
    for name, seen in result.items():
        if len(seen) != 1:
            raise AssertionError(f"{name}: cycles vary between issues: {sorted(seen)}")
    return {name: seen.pop() for name, seen in result.items()}


def write_waveform(path: str, cfg: TsarConfig, seed: int = 0) -> Report:
    """Write a VCD of a TLUT followed by TGEMVs (checked against the reference as it runs)."""
    rng = np.random.default_rng(seed)
    unit = VectorUnit(cfg.vector_bits, (cfg,))
    return run_cases(unit, [tsar_case(rng, cfg, tgemvs=2)], vcd=path)
