"""RTL simulation of whole instructions: base operations against the simulator's vector layer,
TLUT / TGEMV against the ISA's golden semantics, measured cycles against the uarch tables; the
256-bit port and the 512-bit one (32 zmm registers, full-width lanes)."""

import numpy as np
import pytest

from tsar.cli.commands.rtl import base_semantics
from tsar.isa import C2S4, C2S4_512, C4S4, C4S4_512
from tsar.rtl.bench import Case, base_case, measure_timing, random_cases, run_cases, tsar_case
from tsar.rtl.ops import BASE_OPS
from tsar.rtl.reference import Instr, SliceModel
from tsar.rtl.regfile import vector_registers
from tsar.rtl.schedule import tlut_cycles
from tsar.rtl.unit import VectorUnit
from tsar.sim.uarch import load as load_uarch

WIDE = (C2S4_512, C4S4_512)


def _check(report):
    assert report.ok, report.mismatches[:3]


def test_every_base_op_is_a_simulator_op():
    from tsar.sim.x86.vecops import OPS

    assert {op.mnemonic for op in BASE_OPS} <= set(OPS)


def test_latencies_are_the_uarch_tables():
    """The port's op latencies are Golden Cove's (alderlakep) register-form latencies, except
    vpcmpgtq (3 cycles on port 5 there, an ALU op of 1 here; see docs/rtl.md)."""
    table = load_uarch("alderlakep")
    for op in BASE_OPS:
        t = table.lookup(op.mnemonic, ("ymm", "ymm", "ymm"))
        if op.mnemonic != "vpcmpgtq":
            assert t.latency_max == op.latency, op.mnemonic  # upper end of the measured range


def test_model_uses_the_given_semantics():
    m = SliceModel(256, base_semantics)
    m.regs[1], m.regs[2] = 0x7FFF, 0x0001
    m.execute(Instr.base("vpaddsw", 3, 1, 2))
    assert m.regs[3] & 0xFFFF == 0x7FFF
    with pytest.raises(ValueError, match="base_semantics"):
        SliceModel(256).execute(Instr.base("vpaddw", 3, 1, 2))


def test_base_ops_in_the_python_simulator(rng):
    """One operation of each unit and kind (wrapping, saturating, compare, multiply, dot product,
    vpmulld) in dependent pairs on the Python simulator; every operation, thousands of operands
    each, runs on the compiled backend (test_verilator.py)."""
    ops = ["vpaddb", "vpsubsw", "vpcmpgtd", "vpmaxuw", "vpandn", "vpmulhw", "vpmaddubsw", "vpmulld"]
    report = run_cases(VectorUnit(256), [base_case(rng, 256, length=2, ops=[op]) for op in ops],
                       base_semantics)
    _check(report)
    assert set(report.by_op) == set(ops)


@pytest.mark.slow
def test_every_base_op_in_the_python_simulator(rng):
    unit = VectorUnit(256)
    cases = [base_case(rng, 256, length=3, ops=[op.mnemonic]) for op in BASE_OPS]
    report = run_cases(unit, cases, base_semantics)
    _check(report)
    assert set(report.by_op) == {op.mnemonic for op in BASE_OPS}


def test_512_bit_port_base_ops_on_32_registers(rng):
    """The 512-bit port has the 32 zmm registers EVEX addresses; one operation of each unit and
    kind in dependent pairs on random registers of all 32 (the full set on Verilator)."""
    unit = VectorUnit(512)
    assert len(unit.regs) == vector_registers(512) == 2 * vector_registers(256)
    ops = ["vpaddb", "vpsubsw", "vpcmpgtq", "vpminud", "vpmulhw", "vpmaddwd", "vpmulld"]
    cases = [base_case(rng, 512, length=2, ops=[op]) for op in ops]
    assert any(r >= vector_registers(256) for c in cases for i in c.program for r in (i.dst, i.src1))
    report = run_cases(unit, cases, base_semantics)
    _check(report)
    assert set(report.by_op) == set(ops)


@pytest.mark.parametrize("lut_read", ["latch", "ports"])
@pytest.mark.parametrize("cfg", [C2S4, C4S4, *WIDE], ids=lambda c: c.name)
def test_tsar_port(rng, cfg, lut_read):
    """TLUT and TGEMV (register and memory operands, group overwritten in between) and base ops,
    on a port of the configuration's width."""
    unit = VectorUnit(cfg.vector_bits, (cfg,), lut_read)
    report = run_cases(unit, random_cases(rng, unit, 1, 0, tgemvs=2), base_semantics)
    _check(report)
    assert report.by_op[cfg.tgemv_mnemonic] >= 2


def test_operand_isolation_in_the_python_simulator():
    """Operand isolation is functionally invisible: a TLUT and TGEMVs, multiplies and ALU ops on
    an isolated port give the golden results in the same cycles as the port without it."""
    rng = np.random.default_rng(21)
    cases = [tsar_case(rng, C2S4, tgemvs=2),
             base_case(rng, 256, length=4, ops=["vpmaddubsw", "vpaddw", "vpmulld", "vpsubsw"])]
    plain, isolated = (run_cases(VectorUnit(256, (C2S4,), "latch", iso), cases, base_semantics)
                       for iso in (False, True))
    _check(isolated)
    assert isolated.cycles == plain.cycles and isolated.by_op == plain.by_op


def test_group_overwrite_invalidates_the_latch():
    """A base op writes into the latched group between TLUT and TGEMV: the TGEMV must reload."""
    rng = np.random.default_rng(3)
    case = tsar_case(rng, C2S4, tgemvs=1)
    tlut, tgemv = case.program[0], case.program[-1]
    poke = Instr.base("vpxor", tlut.dst + 1, tlut.dst + 1, tgemv.dst)
    unit = VectorUnit(256, (C2S4,), "latch")
    _check(run_cases(unit, [Case(case.loads, [tlut, poke, tgemv])], base_semantics))


@pytest.mark.parametrize("cfgs", [(C2S4, C4S4), WIDE], ids=["256", "512"])
def test_measured_cycles(cfgs):
    """Latency and throughput come out of simulation: ALU 1, multiply 5, vpmulld 10 (pipelined,
    one per cycle); TLUT/TGEMV issue cycles equal the ISA's uop counts with the latch (TLUT4x4 on
    512 bits: two passes per register, 8 cycles for its 4 uops), and the group loads add
    ceil(group / 3) cycles per TGEMV with the ports policy."""
    ops = ["vpaddb", "vpmaddubsw", "vpmulld"]
    latch = measure_timing(cfgs, "latch", base_ops=ops)
    ports = measure_timing(cfgs, "ports", base_ops=())
    assert (latch["vpaddb"].latency, latch["vpmaddubsw"].latency, latch["vpmulld"].latency) == (1, 5, 10)
    assert all(latch[op].throughput == 1 for op in ops)
    for cfg in cfgs:
        assert latch[cfg.tlut_mnemonic].throughput == tlut_cycles(cfg)
        assert latch[cfg.tgemv_mnemonic].throughput == cfg.tgemv_uops
        assert ports[cfg.tgemv_mnemonic].throughput == cfg.tgemv_uops + -(-cfg.group_regs // 3)
    assert tlut_cycles(C4S4_512) == 2 * C4S4_512.tlut_uops


@pytest.mark.slow
def test_base_ops_long():
    rng = np.random.default_rng(7)
    unit = VectorUnit(256)
    cases = [base_case(rng, 256, length=6, ops=[op.mnemonic]) for op in BASE_OPS for _ in range(4)]
    _check(run_cases(unit, cases, base_semantics))


@pytest.mark.slow
@pytest.mark.parametrize("lut_read", ["latch", "ports"])
@pytest.mark.parametrize("cfgs", [(C2S4, C4S4), WIDE], ids=["256", "512"])
def test_tsar_both_configs_long(cfgs, lut_read):
    unit = VectorUnit(cfgs[0].vector_bits, cfgs, lut_read)
    _check(run_cases(unit, random_cases(np.random.default_rng(8), unit, 6, 6, tgemvs=3), base_semantics))
