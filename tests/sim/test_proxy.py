"""The proxy engine: each T-SAR instruction becomes AVX2 with the model's uops, memory bytes and
register writes; T-SAR kernels run on the host (values meaningless, time real)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tsar.isa.config import configs
from tsar.isa.operands import Memory, Register
from tsar.sim import create_machine
from tsar.sim.errors import SimulationError
from tsar.sim.platforms.detect import cpu_flags
from tsar.sim.proxy_engine.machine import PROXY_UOP, proxy_report, proxy_sequence, proxy_source

ROOT = Path(__file__).resolve().parents[2]
HOST_AVX2 = "avx2" in cpu_flags()
needs_avx2 = pytest.mark.skipif(not HOST_AVX2, reason="host CPU lacks AVX2")


def _written(line: str) -> str:
    return line.split(None, 1)[1].split(",")[0].strip()


@pytest.mark.parametrize("cfg", configs(), ids=lambda c: c.name)
@pytest.mark.parametrize("memory", [True, False])
def test_sequences_match_the_model(cfg, memory: bool) -> None:
    vec = cfg.register_class
    width = {"xmm": 16, "ymm": 32}[vec]
    # TLUT: one vpmaddwd per uop, every group register written, the source's k bytes loaded once.
    src = Memory(base="rdi", size=cfg.k) if memory else Register(vec, 15)
    seq = proxy_sequence(cfg.tlut_mnemonic, [Register(vec, 0), src], scratch=None)
    madds = [x for x in seq.lines if x.startswith(PROXY_UOP)]
    assert len(madds) == cfg.tlut_uops == seq.uops
    assert {_written(x) for x in madds} == {f"{vec}{i}" for i in range(cfg.group_regs)}
    assert sum("[" in x for x in seq.lines) == int(memory) == seq.loads
    # TGEMV: tgemv_uops vpmaddwd; writes acc (and the scratch) only; reads every weight byte.
    lut = cfg.group_regs
    w = Memory(base="rsi", size=cfg.weight_bytes) if memory else Register(vec, 2 * lut)
    for scratch in (15, None):
        seq = proxy_sequence(cfg.tgemv_mnemonic, [Register(vec, 0), Register(vec, lut), w], scratch)
        assert len(seq.lines) == cfg.tgemv_uops == seq.uops
        assert all(x.startswith(PROXY_UOP) for x in seq.lines)
        assert {_written(x) for x in seq.lines} <= {f"{vec}0", f"{vec}15"}
        assert _written(seq.lines[-1]) == f"{vec}0"
        loads = [x for x in seq.lines if "[" in x]
        assert len(loads) == (cfg.weight_bytes // width if memory else 0) == seq.loads
        assert any(f"{vec}{lut}," in x or x.endswith(f"{vec}{lut}") for x in seq.lines)


def test_report_states_the_gap() -> None:
    rows = proxy_report("zen4")
    assert {r["instruction"] for r in rows} >= {"tlut2x4", "tgemv8x16"}
    for r in rows:
        assert r["model_uops"] == r["proxy_uops"]
        if r["model_acc_latency"] is not None:  # Zen 4: vpmaddwd 3 cycles, 4 uops: 2 x 3 = 3 + 3
            assert r["proxy_acc_latency"] == r["model_acc_latency"] == 6


def test_source_rewrite_keeps_labels_and_removes_tsar() -> None:
    src = (ROOT / "kernels/asm/gemv16_c2s4.s").read_text()
    out = proxy_source(src)
    assert "inner:" in out and "tgemv8x16 ymm0" in out  # kept as a comment
    body = [line.split(";")[0] for line in out.splitlines()]
    assert not any(w in line for line in body for w in ("tlut2x4", "tgemv8x16"))
    assert any("ymm15" in line for line in body)  # the loop never names ymm15: the scratch


@needs_avx2
def test_kernel_runs_in_the_proxy_engine() -> None:
    from tsar.simulate.tsar_kernel import plan_for, simulate

    plan = plan_for("tsar-c2s4-op", 256, 256)
    rng = np.random.default_rng(1)
    w = rng.integers(-1, 2, (256, 256)).astype(np.int8)
    x = rng.standard_normal((1, 256)).astype(np.float32)
    machine = create_machine("proxy", in_process=True)
    assert machine.engine == "proxy"
    run = simulate(plan, x, w, 1.0, machine=machine)
    assert run.y.shape == (1, 256) and machine.stats.wall_seconds > 0
    assert not machine.sites  # nothing left for the stubs: every T-SAR instruction was replaced


@needs_avx2
def test_machine_code_with_tsar_is_refused() -> None:
    from tsar.isa.assembler import assemble

    code = assemble("tlut2x4 ymm8, qword ptr [rdi]\nret\n").code
    with pytest.raises(SimulationError, match="assembly source"):
        create_machine("proxy").load_code(code)


def test_scratch_avoids_the_registers_of_byte_lines() -> None:
    """Instructions given as ``.byte`` lines (EVEX code: the assembler has no AVX-512) name the
    registers they use, so the TGEMV scratch is none of them; data bytes name nothing."""
    import iced_x86 as iced

    from tsar.sim.vector_spill import byte_line

    r = iced.Register
    add = iced.Instruction.create_reg_reg_reg(iced.Code.EVEX_VPADDD_ZMM_K1Z_ZMM_ZMMM512B32, r.ZMM15, r.ZMM15,
                                              r.ZMM20)
    src = f"inner:\ntgemv8x16 ymm0, ymm8, [rsi]\n{byte_line(add)}\ndec rcx\njnz inner\nret\n"

    def written(source: str) -> set[str]:
        body = [line.split(";")[0].strip() for line in proxy_source(source).splitlines()]
        return {_written(line) for line in body if line.startswith(PROXY_UOP)}
    assert written(src) == {"ymm0", "ymm14"}  # ymm15 is the EVEX line's
    data = src.replace(byte_line(add), ".byte 0x0f, 0x0b, 0x62, 0xe1")  # ud2, a truncated EVEX prefix
    assert written(data) == {"ymm0", "ymm15"}
