"""Core bound on hand-built loops whose answer is known."""

from __future__ import annotations

import pytest

import tsar.sim.uarch as uarch
from tsar.sim.timing import InstructionForm, LoopProfile, core_bound, port_bound

from .conftest import LOOP_TAIL, vec

GC, ZEN4, SKL = uarch.load("alderlakep"), uarch.load("zen4"), uarch.load("skylake")


def loop(*body: InstructionForm, iterations: float = 1000) -> LoopProfile:
    forms = [*body, *LOOP_TAIL]
    return LoopProfile.from_forms([(f, iterations) for f in forms])


def test_port_bound_exact_small_cases() -> None:
    t, loads = port_bound([(("p0", "p1", "p5"), 12.0)])
    assert t == pytest.approx(4.0) and sum(loads.values()) == pytest.approx(12.0)
    # 4 uops on {1,5} and 4 on {0,1}: balanced over 3 ports -> 8/3
    t, loads = port_bound([(("p1", "p5"), 4.0), (("p0", "p1"), 4.0)])
    assert t == pytest.approx(8 / 3) and max(loads.values()) == pytest.approx(8 / 3)
    # 3 uops only on p5 dominate
    t, _ = port_bound([(("p5",), 3.0), (("p0", "p1", "p5"), 3.0)])
    assert t == pytest.approx(3.0)


def test_independent_vpaddw_is_throughput_bound() -> None:
    body = [vec("vpaddw", r, r, 15) for r in range(12)]  # 12 independent accumulators
    gc = core_bound(loop(*body), GC)
    assert gc.port_cycles == pytest.approx(12 / 3)  # p015
    assert gc.cycles == pytest.approx(4.0) and gc.bottleneck.startswith("ports")
    assert gc.dependency_cycles == pytest.approx(1.0)  # each accumulator: 1-cycle chain
    assert gc.fused_pairs == 1 and gc.uops == pytest.approx(12 + 1)
    zen = core_bound(loop(*body), ZEN4)
    assert zen.cycles == pytest.approx(12 / 4)  # FP0123


def test_loop_carried_vpaddd_chain_is_latency_bound() -> None:
    body = [vec("vpaddd", 0, 0, r) for r in (1, 2, 3, 4)]  # ymm0 += ... four times
    res = core_bound(loop(*body), GC)
    assert res.dependency_cycles == pytest.approx(4.0)
    assert res.cycles == pytest.approx(4.0) and res.bottleneck == "dependency"
    assert "v0" in res.dependency_registers
    assert res.port_cycles < res.cycles


def test_chain_across_two_registers_uses_cycle_mean() -> None:
    # v0 -> v1 -> v0 within one iteration: 2 latency-1 ops per iteration on the same recurrence
    body = [vec("vpaddd", 1, 0, 5), vec("vpaddd", 0, 1, 6)]
    assert core_bound(loop(*body), GC).dependency_cycles == pytest.approx(2.0)
    # v0 and v1 swap roles every iteration (v1 = f(v0_old), v0 = g(v1_old)): 1 cycle / iteration
    body = [vec("vpaddd", 2, 0, 5), vec("vpaddd", 0, 1, 6), vec("vpaddd", 1, 2, 7)]
    assert core_bound(loop(*body), GC).dependency_cycles == pytest.approx(1.5)


def test_zero_idiom_breaks_chain() -> None:
    body = [vec("vpxor", 0, 0, 0), vec("vpaddd", 0, 0, 1)]
    assert core_bound(loop(*body), GC).dependency_cycles == pytest.approx(0.0)
    body = [vec("vpor", 0, 0, 0), vec("vpaddd", 0, 0, 1)]  # not an idiom: 2-cycle recurrence
    assert core_bound(loop(*body), GC).dependency_cycles == pytest.approx(2.0)


def test_vpshufb_loop_ports_golden_cove_and_skylake() -> None:
    body = [vec("vpshufb", r, 14, 15) for r in range(8)]
    gc = core_bound(loop(*body), GC)
    assert gc.cycles == pytest.approx(4.0)  # p15: 8 uops over two ports
    assert gc.port_loads["p1"] == pytest.approx(4.0) and gc.port_loads["p5"] == pytest.approx(4.0)
    skl = core_bound(loop(*body), SKL)
    assert skl.cycles == pytest.approx(8.0) and skl.bottleneck == "ports p5"


def test_vpshufb_with_vpermq_saturates_port5_on_golden_cove() -> None:
    perm = InstructionForm("vpermq", ("ymm", "ymm", "imm8"), reads=("v13",), writes=("v12",))
    body = [vec("vpshufb", r, 14, 15) for r in range(4)] + [perm, perm]
    res = core_bound(loop(*body), GC)
    # 2 vpermq uops on p5 only, 4 vpshufb on {p1, p5}: ports 1 and 5 carry 3 each
    assert res.cycles == pytest.approx(3.0)
    assert res.port_loads["p5"] == pytest.approx(3.0) and "p5" in res.bottleneck


def test_front_end_bound_and_issue_width_override() -> None:
    body = [InstructionForm("mov", ("r64", "r64"), reads=(f"r{8 + i}",), writes=(f"r{12 + i % 3}",))
            for i in range(4)] + [vec("vpaddw", r, r, 15) for r in range(8)]
    res = core_bound(loop(*body), ZEN4)
    assert res.frontend_cycles == pytest.approx(13 / 6)
    assert core_bound(loop(*body), ZEN4, issue_width=8).frontend_cycles == pytest.approx(13 / 8)


def test_taken_branch_floor() -> None:
    res = core_bound(loop(vec("vpaddw", 1, 1, 2)), GC)
    assert res.cycles == pytest.approx(1.0)


def test_weights_and_missing_forms() -> None:
    bad = InstructionForm("frobnicate", ("ymm",))
    prof = LoopProfile.from_forms([(vec("vpaddw", 1, 1, 2), 100), (bad, 100), (LOOP_TAIL[0], 100),
                                   (LOOP_TAIL[1], 100)])
    with pytest.raises(uarch.UarchDataMissing):
        core_bound(prof, GC)
    res = core_bound(prof, GC, strict=False)
    assert res.missing == ("frobnicate ymm",) and not res.complete
    assert res.total_cycles == pytest.approx(res.cycles * 100)


def test_tsar_loop_port_bound() -> None:
    # one TLUT per 4 TGEMVs (c2s4, four independent accumulators)
    tl = InstructionForm("tlut2x4", ("ymm", "m64"), writes=("v8", "v9"), address_reads=("rsi",))
    tgs = [InstructionForm("tgemv8x16", ("ymm", "ymm", "m256"), reads=(f"v{a}", "v8", "v9"),
                           writes=(f"v{a}",), address_reads=("rdx",)) for a in range(4)]
    res = core_bound(loop(tl, *tgs), GC)
    assert res.port_cycles == pytest.approx((2 + 4 * 4) / 2)  # all uops on p01
    assert res.cycles == pytest.approx(9.0)


def _asm_loop(body: str) -> LoopProfile:
    from tsar.isa.assembler import assemble
    from tsar.sim.timing.adapters import decode_forms

    code = assemble(f"top:\n{body}\ndec rcx\njnz top\n").code
    return LoopProfile.from_forms([(f, 100.0) for f in decode_forms(code)], 100.0)


def test_store_to_load_forwarding_through_a_stack_slot() -> None:
    """A value kept in a stack slot across iterations is a loop-carried chain through memory:
    store -> forwarded load (the core's forwarding latency) -> vpaddw (1 cycle)."""
    zen4 = uarch.load("zen4")
    forward = zen4.core.store_forward_latency
    assert forward is not None and forward > zen4.core.load_latency
    slot = "vmovdqu ymm0, [rsp+0x40]\nvpaddw ymm0, ymm0, ymm1\nvmovdqu [rsp+0x40], ymm0"
    res = core_bound(_asm_loop(slot), zen4)
    assert res.dependency_cycles == pytest.approx(forward + 1.0)
    assert res.bottleneck == "dependency" and "[rsp+0x40]" in res.dependency_registers
    # load-op form: the forwarding latency plus the operation's own
    res = core_bound(_asm_loop("vpaddw ymm0, ymm1, [rsp+0x40]\nvmovdqu [rsp+0x40], ymm0"), zen4)
    assert res.dependency_cycles == pytest.approx(forward + 1.0)
    # a different slot, or a pointer that moves every iteration: no chain through memory
    other = "vmovdqu ymm0, [rsp+0x80]\nvpaddw ymm0, ymm0, ymm1\nvmovdqu [rsp+0x40], ymm0"
    assert core_bound(_asm_loop(other), zen4).dependency_cycles < 2
    moving = ("vmovdqu ymm0, [rsi]\nvpaddw ymm0, ymm0, ymm1\nvmovdqu [rsi], ymm0\nadd rsi, 32")
    assert core_bound(_asm_loop(moving), zen4).dependency_cycles < 2
