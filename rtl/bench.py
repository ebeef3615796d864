"""Simulation of the port: an instruction driver, random checks against the reference model,
measured latency and throughput of every instruction, and waveforms.

Two backends run the same testbenches: Amaranth's Python simulator (:class:`Driver`; needs nothing
else, the default) and Verilator (:class:`CompiledDriver` on :mod:`.verilator`, compiled, for long
runs). ``backend`` selects one: ``"python"`` or ``"verilator"``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
from amaranth.sim import Simulator

from tsar.isa.config import TsarConfig
from tsar.rtl.base import SliceOp
from tsar.rtl.ops import BASE_OPS
from tsar.rtl.reference import BaseSemantics, Instr, SliceModel
from tsar.rtl.regfile import vector_registers
from tsar.rtl.unit import VectorUnit

BACKENDS = ("python", "verilator")


def encode(unit: VectorUnit, instr: Instr):
    """``instr`` as a constant of the unit's issue layout."""
    cfg = unit.configs.index(instr.cfg) if instr.cfg is not None else 0
    func = next(op.code for op in BASE_OPS if op.mnemonic == instr.func) if instr.func else 0
    return unit.issue.instr.shape().const({"op": instr.op, "func": func, "cfg": cfg, "dst": instr.dst,
                                           "src1": instr.src1, "src2": instr.src2,
                                           "mem": int(instr.mem)})


class Driver:
    """Drives a :class:`VectorUnit` from an async Amaranth testbench: register back door, issue
    port, load data. :mod:`.verilator` provides the same methods on a compiled model."""

    def __init__(self, unit: VectorUnit, ctx):
        self.unit, self.ctx = unit, ctx
        self.layout = unit.issue.instr.shape()
        self.cycle = 0

    def load(self, reg: int, value: int) -> None:
        self.ctx.set(self.unit.regs[reg], value)

    def read(self, reg: int) -> int:
        return self.ctx.get(self.unit.regs[reg])

    def encode(self, instr: Instr):
        return encode(self.unit, instr)

    async def tick(self) -> None:
        await self.ctx.tick()
        self.cycle += 1

    async def issue(self, instr: Instr) -> int:
        """Present ``instr`` until the port takes it; returns the cycle it was taken in. Its load
        data is applied when it enters the instruction register (the previous instruction may
        still be using the old)."""
        ctx, issue = self.ctx, self.unit.issue
        ctx.set(issue.instr, self.encode(instr))
        ctx.set(issue.valid, 1)
        while True:
            ready = ctx.get(issue.ready)
            await self.tick()
            if ready:
                ctx.set(issue.valid, 0)
                ctx.set(self.unit.load_data, instr.load)
                return self.cycle

    async def drain(self) -> None:
        while not self.ctx.get(self.unit.idle):
            await self.tick()

    async def stream(self, instrs: Sequence[Instr]) -> list[int]:
        """Issue back to back; returns the issue-to-issue distance in cycles of each instruction."""
        taken = [await self.issue(instr) for instr in [*instrs, Instr(SliceOp.NOP, 0)]]
        await self.drain()
        return [b - a for a, b in pairwise(taken)]


class CompiledDriver:
    """:class:`Driver`'s methods on a Verilator model of ``unit`` (same cycle semantics; its
    coroutines never suspend, so a testbench runs to completion in one ``send``)."""

    def __init__(self, unit: VectorUnit, model=None):
        from tsar.rtl.verilator import CompiledModel

        self.unit = unit
        for part in (unit, unit.slice, unit.regfile):  # the Verilator model stands in for it
            part._MustUse__silence = True
        self.model = model or CompiledModel(unit.slice.vector_bits, unit.configs, unit.slice.lut_read,
                                            isolate=unit.slice.isolate)
        self._codes: dict[Instr, int] = {}

    @property
    def cycle(self) -> int:
        return self.model.cycle

    def load(self, reg: int, value: int) -> None:
        self.model.load(reg, value)

    def read(self, reg: int) -> int:
        return self.model.read(reg)

    def code(self, instr: Instr) -> int:
        key = (instr.op, instr.func, instr.cfg, instr.dst, instr.src1, instr.src2, instr.mem)
        if key not in self._codes:
            self._codes[key] = encode(self.unit, instr).as_value().value
        return self._codes[key]

    def prepare(self, instrs: Sequence[Instr]) -> tuple:
        """``instrs`` and a closing NOP encoded for :meth:`stream` (testbench preparation)."""
        program = [*instrs, Instr(SliceOp.NOP, 0)]
        return self.model.prepare([self.code(i) for i in program], [i.load for i in program])

    async def issue(self, instr: Instr) -> int:
        return self.model.issue(self.code(instr), instr.load)

    async def drain(self) -> None:
        self.model.drain()

    async def stream(self, instrs: Sequence[Instr] | tuple) -> list[int]:
        """Like :meth:`Driver.stream`; also takes what :meth:`prepare` returned."""
        prepared = instrs if isinstance(instrs, tuple) else self.prepare(instrs)
        taken = self.model.stream(prepared)
        self.model.drain()
        return [b - a for a, b in pairwise(taken)]


def run_to_completion(coro) -> None:
    """Run a compiled-backend testbench coroutine, which never suspends, to its end."""
    try:
        coro.send(None)
    except StopIteration:
        return
    coro.close()
    raise RuntimeError("a compiled-backend testbench awaited something other than the driver")


def simulate(unit: VectorUnit, bench: Callable, vcd: str | None = None, backend: str = "python") -> None:
    """Run ``bench(driver)`` (an async function) on ``unit`` with ``backend`` (the compiled one
    writes no waveform)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: expected one of {', '.join(BACKENDS)}")
    if backend == "verilator":
        if vcd:
            raise ValueError("waveforms come from the Python simulator (backend='python')")
        run_to_completion(bench(CompiledDriver(unit)))
        return
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
    """A short program, issued back to back, and the register values to load before it."""

    loads: dict[int, int]
    program: list[Instr]


@dataclass
class Report:
    instructions: int = 0
    cycles: int = 0
    mismatches: list[str] = field(default_factory=list)
    by_op: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _rand_reg(rng: np.random.Generator, bits: int) -> int:
    """A random register value; a quarter of them are built from edge elements (0, +-1, the
    signed and unsigned limits) so that saturation and compares are exercised."""
    if rng.random() < 0.25:
        edges = np.array([0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE, 0x81], np.uint8)
        size = 1 << int(rng.integers(0, 4))
        out = bytearray()
        while len(out) < bits // 8:
            pick = edges[rng.integers(len(edges))]
            top = edges[rng.integers(len(edges))]
            out += bytes([pick] * (size - 1) + [top])
        return int.from_bytes(bytes(out[:bits // 8]), "little")
    return int.from_bytes(rng.bytes(bits // 8), "little")


def base_case(rng: np.random.Generator, vector_bits: int, length: int = 4,
              ops: Sequence[str] | None = None) -> Case:
    """``length`` random base instructions on random registers (operands may alias, results feed
    later instructions: the hazard logic is exercised), some with a memory operand."""
    names = list(ops) if ops else [op.mnemonic for op in BASE_OPS]
    program, loads = [], {}
    for _ in range(length):
        dst, src1, src2 = (int(r) for r in rng.integers(0, vector_registers(vector_bits), 3))
        mem = bool(rng.random() < 0.2)
        for r in (src1, *(() if mem else (src2,))):
            if r not in loads and all(r != i.dst for i in program):
                loads[r] = _rand_reg(rng, vector_bits)
        program.append(Instr.base(names[rng.integers(len(names))], dst, src1, src2, mem=mem,
                                  load=_rand_reg(rng, vector_bits) if mem else 0))
    return Case(loads, program)


def tsar_case(rng: np.random.Generator, cfg: TsarConfig, tgemvs: int = 3) -> Case:
    """A TLUT from random activations, then ``tgemvs`` TGEMVs with random accumulators and weight
    codes (any code, including ones the packer never emits) into the same LUT group; some
    operands come from memory, and a base instruction may write into the group between TGEMVs
    (the latch must notice)."""
    g, regs = cfg.group_regs, vector_registers(cfg.vector_bits)
    group = int(rng.integers(0, regs // g)) * g
    free = [r for r in range(regs) if not group <= r < group + g]
    pairs = [r for r in free if r % cfg.weight_regs == 0 and r + cfg.weight_regs - 1 in free]
    loads: dict[int, int] = {r: _rand_reg(rng, cfg.vector_bits) for r in range(regs)}
    src = int(rng.choice(free))
    mem = bool(rng.random() < 0.25)
    program = [Instr(SliceOp.TLUT, group, 0, src, cfg, mem=mem,
                     load=_rand_reg(rng, cfg.vector_bits) if mem else 0)]
    for _ in range(tgemvs):
        weights = int(rng.choice(pairs))
        acc = int(rng.choice([r for r in free if not weights <= r < weights + cfg.weight_regs]))
        mem = bool(rng.random() < 0.25)
        load = sum(_rand_reg(rng, cfg.vector_bits) << (i * cfg.vector_bits)
                   for i in range(cfg.weight_regs)) if mem else 0
        program.append(Instr(SliceOp.TGEMV, acc, group, weights, cfg, mem=mem, load=load))
        if rng.random() < 0.1:
            target = group + int(rng.integers(g))
            program.append(Instr.base("vpaddw", target, target, int(rng.choice(free))))
    return Case(loads, program)


async def run_program(drv, model: SliceModel, cases: Iterable[Case], report: Report) -> None:
    """Load each case's registers (both sides), issue its program back to back, drain, compare
    every register; the driver is either backend's."""
    for case in cases:
        for reg, value in case.loads.items():
            drv.load(reg, value)
            model.regs[reg] = value
        start = drv.cycle
        await drv.stream(case.program)
        report.cycles += drv.cycle - start
        for instr in case.program:
            model.execute(instr)
            report.instructions += 1
            report.by_op[instr.name] = report.by_op.get(instr.name, 0) + 1
        for reg in range(len(model.regs)):
            got, want = drv.read(reg), model.regs[reg]
            if got != want:
                program = "; ".join(map(str, case.program))
                report.mismatches.append(f"{program}: r{reg} = {got:#x}, expected {want:#x}")
                model.regs[reg] = got  # carry on from the RTL's state


def run_cases(unit: VectorUnit, cases: Iterable[Case], semantics: BaseSemantics,
              vcd: str | None = None, backend: str = "python") -> Report:
    """Execute every case in RTL (``backend``) and in the reference model; compare."""
    report = Report()
    cases = list(cases)

    async def bench(drv: Driver) -> None:
        await run_program(drv, SliceModel(unit.slice.vector_bits, semantics), cases, report)

    simulate(unit, bench, vcd, backend)
    return report


def random_cases(rng: np.random.Generator, unit: VectorUnit, n_tsar: int, n_base: int,
                 tgemvs: int = 3, length: int = 4) -> list[Case]:
    cases = [base_case(rng, unit.slice.vector_bits, length) for _ in range(n_base)]
    for cfg in unit.configs:
        cases += [tsar_case(rng, cfg, tgemvs) for _ in range(n_tsar)]
    order = rng.permutation(len(cases))
    return [cases[i] for i in order]


def simulation_speed(unit: VectorUnit, program: Sequence[Instr], backend: str = "python",
                     repeats: int = 3) -> tuple[int, list[float]]:
    """Cycles of ``program`` issued back to back, and the seconds of each of ``repeats`` runs
    (the simulator alone: no reference model, no register comparison; a compiled model is built
    before the clock starts)."""
    seconds, cycles = [], 0

    async def bench(drv) -> None:
        nonlocal cycles
        prepared = drv.prepare(program) if hasattr(drv, "prepare") else program
        for _ in range(repeats):
            start, t0 = drv.cycle, time.perf_counter()
            await drv.stream(prepared)
            seconds.append(time.perf_counter() - t0)
            cycles = drv.cycle - start

    simulate(unit, bench, backend=backend)
    return cycles, seconds


def write_waveform(path: str, cfg: TsarConfig, semantics: BaseSemantics, seed: int = 0) -> Report:
    """Write a VCD of a TLUT followed by TGEMVs (checked against the reference as it runs)."""
    rng = np.random.default_rng(seed)
    unit = VectorUnit(cfg.vector_bits, (cfg,))
    return run_cases(unit, [tsar_case(rng, cfg, tgemvs=2)], semantics, vcd=path)


# --- cycles per instruction --------------------------------------------------------------------------

@dataclass(frozen=True)
class Timing:
    """Measured cycles of one instruction: ``latency`` (issue to the issue of a dependent
    instruction) and ``throughput`` (cycles per instruction, independent copies back to back)."""

    latency: int
    throughput: float


def _steady(distances: Sequence[int]) -> float:
    """Issue interval of a back-to-back run, without the first and the last (drain) distance."""
    inner = list(distances[1:-1]) or list(distances)
    return float(np.median(inner))


def _programs(configs: Sequence[TsarConfig], base_ops: Sequence[str],
              vector_bits: int) -> list[tuple[str, str, list[Instr]]]:
    """(name, "latency" | "throughput", program) of every measurement on a ``vector_bits`` port."""
    regs = vector_registers(vector_bits)
    out = []
    for mn in base_ops:
        out.append((mn, "latency", [Instr.base(mn, 1, 2, 3), Instr.base(mn, 4, 1, 5)]))
        out.append((mn, "throughput", [Instr.base(mn, 8 + i, 2, 3) for i in range(6)]))
    for cfg in configs:
        g = cfg.group_regs
        other = g if 2 * g <= regs - 4 else 0  # a second group, if registers allow
        free = [r for r in range(regs) if not (0 <= r < g or other <= r < other + g)]
        weights = next(r for r in free if r % cfg.weight_regs == 0
                       and all(x in free for x in range(r, r + cfg.weight_regs)))
        accs = [r for r in free if not weights <= r < weights + cfg.weight_regs]
        src = accs[-1]
        tlut = Instr(SliceOp.TLUT, 0, 0, src, cfg)
        tgemv = [Instr(SliceOp.TGEMV, accs[i], 0, weights, cfg) for i in range(4)]
        out.append((cfg.tlut_mnemonic, "latency", [tlut, tgemv[0]]))
        out.append((cfg.tlut_mnemonic, "throughput",
                    [Instr(SliceOp.TLUT, (i % 2) * other, 0, src, cfg) for i in range(4)]))
        dependent = Instr.base("vpaddw", accs[5], accs[0], src)
        out.append((cfg.tgemv_mnemonic, "latency", [tlut, tgemv[0], dependent]))
        out.append((cfg.tgemv_mnemonic, "throughput", [tlut, *tgemv]))
    return out


def measure_timing(configs: Sequence[TsarConfig], lut_read: str = "latch",
                   base_ops: Sequence[str] | None = None, vector_bits: int | None = None,
                   backend: str = "python", isolate: bool = False) -> dict[str, Timing]:
    """Latency and throughput of the T-SAR instructions of ``configs`` and of ``base_ops``
    (default: every base operation), measured by simulating a port with ``configs``."""
    bits = vector_bits or (configs[0].vector_bits if configs else 256)
    names = [op.mnemonic for op in BASE_OPS] if base_ops is None else list(base_ops)
    unit = VectorUnit(bits, tuple(configs), lut_read, isolate)
    programs = _programs(configs, names, bits)
    seen: dict[str, dict[str, float]] = {}

    async def bench(drv: Driver) -> None:
        for name, kind, program in programs:
            d = await drv.stream(program)
            if kind == "latency":
                # d[k]: cycles instruction k holds the instruction register (its stalls included).
                # A base dependent executes in its last cycle there, a T-SAR one in its first.
                if program[-1].op is SliceOp.TGEMV:       # TLUT -> TGEMV
                    value = d[0]
                elif len(program) == 3:                   # TLUT, TGEMV -> base
                    value = d[1] + d[2] - 1
                else:                                     # base -> base
                    value = d[0] + d[1] - 1
            else:
                value = _steady(d[1:] if program[0].op is SliceOp.TLUT and name != program[0].name else d)
            seen.setdefault(name, {})[kind] = value

    simulate(unit, bench, backend=backend)
    return {name: Timing(int(v["latency"]), v["throughput"]) for name, v in seen.items()}


def measured_cycles(cfg: TsarConfig, lut_read: str = "latch") -> dict[str, int]:
    """Issue-to-issue cycles of the T-SAR instructions of ``cfg`` back to back (after a TLUT
    of their group), measured in simulation: ``{"tlut2x4": 2, "tgemv8x16": 4}``."""
    timing = measure_timing((cfg,), lut_read, base_ops=())
    return {name: round(t.throughput) for name, t in timing.items()}
