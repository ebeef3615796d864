"""The proxy engine: each T-SAR instruction becomes AVX2 (AVX-512 for the zmm configurations) with
the model's uops, memory bytes and register writes; T-SAR kernels run on the host (values
meaningless, time real)."""

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
from tsar.sim.uarch.tsar_ops import issue_cycles
from tsar.sim.vector_spill import HOST_AVX512

ROOT = Path(__file__).resolve().parents[2]
HOST_AVX2 = "avx2" in cpu_flags()
needs_avx2 = pytest.mark.skipif(not HOST_AVX2, reason="host CPU lacks AVX2")


def _written(line: str) -> str:
    return line.split(None, 1)[1].split(",")[0].strip()


def _assembled(seq) -> list[str]:
    """The text of the instructions ``seq.code`` assembles to (zmm stand-ins: iced-x86 bytes)."""
    from tsar.isa.assembler import assemble
    from tsar.isa.stream import decode_stream

    return [d.asm for d in decode_stream(assemble("\n".join(seq.code) + "\n").code)]


@pytest.mark.parametrize("cfg", configs(), ids=lambda c: c.name)
@pytest.mark.parametrize("memory", [True, False])
def test_sequences_match_the_model(cfg, memory: bool) -> None:
    vec, width = cfg.register_class, cfg.register_bytes
    top = cfg.addressable_registers - 1  # 31 in EVEX form
    # TLUT: one vpmaddwd per uop, every group register written, the source's k bytes loaded once.
    src = Memory(base="rdi", size=cfg.k) if memory else Register(vec, top)
    seq = proxy_sequence(cfg.tlut_mnemonic, [Register(vec, 0), src], scratch=None, avx512=True)
    madds = [x for x in seq.lines if x.startswith(PROXY_UOP)]
    assert len(madds) == issue_cycles(cfg, "tlut") == seq.uops  # the model's (RTL-measured) uops
    assert {_written(x) for x in madds} == {f"{vec}{i}" for i in range(cfg.group_regs)}
    if memory:  # the loaded source (the group's first register) is read by every uop, written last
        assert _written(madds[-1]) == f"{vec}0" and all(x.endswith(f"{vec}0, {vec}0") for x in madds)
    assert sum("[" in x for x in seq.lines) == int(memory) == seq.loads
    assert _assembled(seq) == list(seq.lines)  # the code is the text (zmm: through .byte lines)
    # TGEMV: tgemv_uops vpmaddwd; writes acc (and the scratch) only; reads every weight byte.
    lut = cfg.group_regs
    half = cfg.addressable_registers // 2  # aligned for any weight-register count
    w = Memory(base="rsi", disp=-96, size=cfg.weight_bytes) if memory else Register(vec, half)
    for scratch in (top, None):
        seq = proxy_sequence(cfg.tgemv_mnemonic, [Register(vec, 0), Register(vec, lut), w], scratch,
                             avx512=True)
        assert len(seq.lines) == issue_cycles(cfg, "tgemv") == seq.uops
        assert all(x.startswith(PROXY_UOP) for x in seq.lines)
        assert {_written(x) for x in seq.lines} <= {f"{vec}0", f"{vec}{top}"}
        assert _written(seq.lines[-1]) == f"{vec}0"
        loads = [x for x in seq.lines if "[" in x]
        assert len(loads) == (cfg.weight_bytes // width if memory else 0) == seq.loads
        assert any(f"{vec}{lut}," in x or x.endswith(f"{vec}{lut}") for x in seq.lines)
        assert _assembled(seq) == list(seq.lines)


@pytest.mark.parametrize("cfg", [c for c in configs() if c.encoding == "evex"], ids=lambda c: c.name)
def test_zmm_configurations_need_avx512(cfg) -> None:
    """Without AVX-512 F/BW a 512-bit configuration's zmm stand-ins are refused in one line; a
    label-relative operand is resolved by the assembler (a ``.long`` after the EVEX bytes)."""
    zmm = [Register("zmm", 0), Register("zmm", cfg.group_regs)]
    with pytest.raises(SimulationError, match=f"{cfg.tgemv_mnemonic} zmm .*lacks AVX-512 F/BW$"):
        proxy_sequence(cfg.tgemv_mnemonic, [*zmm, Register("zmm", 30)], None, avx512=False)
    source = f"f:\n{cfg.tlut_mnemonic} zmm0, [rip + data]\nret\ndata:\n.byte 1\n"
    with pytest.raises(SimulationError, match="lacks AVX-512"):
        proxy_source(source, avx512=False)
    from tsar.isa.assembler import assemble
    from tsar.isa.stream import decode_stream

    program = assemble(proxy_source(source, avx512=True))
    load = next(decode_stream(program.code))
    assert load.x86.is_ip_rel_memory_operand and load.x86.ip_rel_memory_address == program.symbols["data"]


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
@pytest.mark.parametrize("kernel", ["tsar-c2s4-op", "tsar-c4s4-512-op-tokens"])
def test_kernel_runs_in_the_proxy_engine(kernel: str) -> None:
    from tsar.simulate.tsar_kernel import plan_for, simulate

    plan = plan_for(kernel, 256, 256)
    if plan.cfg.encoding == "evex" and not HOST_AVX512:
        pytest.skip("host CPU lacks AVX-512 F/BW (the zmm stand-ins)")
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
