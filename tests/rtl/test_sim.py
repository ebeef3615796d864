"""RTL simulation of whole instructions against the reference model and the golden semantics."""

import numpy as np
import pytest

from tsar.isa import C2S4, C2S4_128, C4S4, instructions
from tsar.rtl.base import BASE_OPS, SliceOp
from tsar.rtl.bench import base_case, measured_cycles, random_cases, run_cases, tsar_case
from tsar.rtl.reference import Instr, SliceModel, from_words, to_words
from tsar.rtl.unit import VectorUnit


def _check(report, expected_cycles):
    assert report.ok, report.mismatches[:5]
    for name, seen in report.cycles_by_op.items():
        assert seen == {expected_cycles[name]}, name


def _expected(*cfgs):
    out = {op.name.lower(): 1 for op in BASE_OPS}
    for cfg in cfgs:
        out |= {cfg.tlut_mnemonic: cfg.tlut_uops, cfg.tgemv_mnemonic: cfg.tgemv_uops}
    return out


def test_reference_base_ops_against_numpy(rng):
    m = SliceModel()
    a, b, d = (rng.integers(-(1 << 15), 1 << 15, 16) for _ in range(3))
    m.regs[1], m.regs[2] = from_words(a), from_words(b)
    for op, want in ((SliceOp.VPADDW, a + b), (SliceOp.VPSUBW, a - b), (SliceOp.VPMULLW, a * b)):
        m.execute(Instr(op, 3, 1, 2))
        np.testing.assert_array_equal(to_words(m.regs[3], 16), want.astype(np.int16))
    m.regs[4] = from_words(d)
    m.execute(Instr(SliceOp.VPDPW4, 4, 1, 2))
    acc = to_words(from_words(d), 4, 32)
    want = (acc + (a * b).reshape(4, 4).sum(1)).astype(np.int32)
    np.testing.assert_array_equal(to_words(m.regs[4], 8, 32), [*want, 0, 0, 0, 0])


def test_reference_registers_come_from_the_isa():
    assert Instr(SliceOp.TLUT, 8, 0, 3, C4S4).writes() == tuple(range(8, 16))
    assert Instr(SliceOp.TGEMV, 1, 8, 2, C4S4).writes() == (1,)
    assert Instr(SliceOp.VPADDW, 5, 1, 2).writes() == (5,)
    with pytest.raises(ValueError, match="misaligned"):
        Instr(SliceOp.TLUT, 4, 0, 3, C4S4).writes()


@pytest.mark.parametrize("bits", [256, 128])
def test_base_slice(rng, bits):
    unit = VectorUnit(bits)
    _check(run_cases(unit, [base_case(rng, bits) for _ in range(600)]), _expected())


@pytest.mark.parametrize(("cfg", "cases"), [(C2S4, 150), (C4S4, 50), (C2S4_128, 120)],
                         ids=lambda x: getattr(x, "name", x))
def test_tsar_slice(rng, cfg, cases):
    """TLUT and TGEMV on random activations, accumulators and weight codes; base ops unchanged."""
    unit = VectorUnit(cfg.vector_bits, (cfg,))
    report = run_cases(unit, random_cases(rng, unit, cases, cases, tgemvs=4))
    _check(report, _expected(cfg))
    assert report.instructions == 6 * cases


def test_slice_with_both_256_bit_configs(rng):
    unit = VectorUnit(256, (C2S4, C4S4))
    _check(run_cases(unit, random_cases(rng, unit, 12, 20)), _expected(C2S4, C4S4))


def test_edge_operands():
    """All activations -128 / +127, all-ones codes, accumulators at the int16 limits."""
    unit = VectorUnit(256, (C2S4,))
    cases = []
    for act, code, acc in ((0x80, 0xFF, 0x7FFF), (0x7F, 0x33, 0x8000), (0x80, 0x00, 0xFFFF)):
        case = tsar_case(np.random.default_rng(0), C2S4, tgemvs=1)
        tlut, tgemv = case.program
        case.loads = {tlut.src2: int.from_bytes(bytes([act]) * 32, "little"),
                      tgemv.src2: int.from_bytes(bytes([code]) * 32, "little"),
                      tgemv.dst: int.from_bytes(acc.to_bytes(2, "little") * 16, "little")}
        cases.append(case)
    assert run_cases(unit, cases).ok


@pytest.mark.parametrize("cfg", [C2S4, C4S4, C2S4_128], ids=lambda c: c.name)
def test_measured_cycles_equal_isa_uops(cfg):
    cycles = measured_cycles(cfg)
    for spec in instructions():
        if spec.config is cfg:
            assert cycles[spec.mnemonic] == spec.uops
    assert all(cycles[op.name.lower()] == 1 for op in BASE_OPS)


@pytest.mark.slow
@pytest.mark.parametrize(("cfg", "cases"), [(C2S4, 1500), (C4S4, 600), (C2S4_128, 1000)],
                         ids=lambda x: getattr(x, "name", x))
def test_tsar_slice_long(cfg, cases):
    unit = VectorUnit(cfg.vector_bits, (cfg,))
    report = run_cases(unit, random_cases(np.random.default_rng(7), unit, cases, cases // 4, tgemvs=4))
    _check(report, _expected(cfg))
