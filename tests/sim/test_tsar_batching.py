"""Batched T-SAR execution equals one-by-one execution: results, statistics, traces and faults."""

from __future__ import annotations

import numpy as np
import pytest

from tsar.isa import C2S4, C2S4_128, C4S4, configs, pack_tile
from tsar.isa.config import MAX_VECTOR_BYTES, TsarConfig
from tsar.isa.instructions import MEMORY_SIZE_NAMES, Kind
from tsar.isa.operands import Memory, Register
from tsar.paths import kernel_source
from tsar.sim import Machine, SimulationError, Stats, create_machine
from tsar.sim.python_engine.tsar_exec import TsarOp, batch_spans
from tsar.sim.vector_spill import IMAGE_BYTES, spill_lines
from tsar.simulate.tsar_kernel import KERNEL_NAMES, plan_for, simulate


def _same_stats(a: Stats, b: Stats) -> None:
    assert a.instructions == b.instructions
    assert a.by_class == b.by_class and a.by_mnemonic == b.by_mnemonic
    assert a.per_address == b.per_address
    assert a.tsar_uops == b.tsar_uops
    assert (a.vector_bytes_read, a.vector_bytes_written) == (b.vector_bytes_read, b.vector_bytes_written)
    assert (a.scalar_bytes_read, a.scalar_bytes_written) == (b.scalar_bytes_read, b.scalar_bytes_written)
    assert (a.python_instructions, a.unicorn_instructions) == (b.python_instructions, b.unicorn_instructions)


def _batches(machine: Machine) -> int:
    return sum(1 for block in machine.cache.blocks.values() if block is not None
               for step in block.steps if step.fallback is not None)


@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_bitlinear_kernels_batched_equal_unbatched(kernel: str) -> None:
    plan = plan_for(kernel, 256, 256)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, plan.K)).astype(np.float32)
    w = rng.integers(-1, 2, (plan.M, plan.K)).astype(np.int8)
    runs = []
    for batch in (True, False):
        machine = create_machine(data_size=16 << 20, batch_tsar=batch)
        runs.append((simulate(plan, x, w, 0.25, machine=machine), machine))
    (fast, m_fast), (slow, m_slow) = runs
    assert fast.exact and slow.exact
    assert np.array_equal(fast.y.view(np.uint32), slow.y.view(np.uint32))
    _same_stats(fast.stats, slow.stats)
    assert _batches(m_slow) == 0
    if plan.groups * plan.accumulators > 1:  # else one TLUT / TGEMV per block: nothing to batch
        assert _batches(m_fast) > 0


def test_gemv16_asm_batched_equals_unbatched() -> None:
    rng = np.random.default_rng(3)
    k = 8 * 70
    act = rng.integers(-127, 128, k).astype(np.int8)
    tile = rng.integers(-1, 2, (16, k))
    weights = pack_tile(C2S4, tile.reshape(16, k // 8, 8).transpose(1, 0, 2)).reshape(-1)
    outs, stats = [], []
    for batch in (True, False):
        m = create_machine(data_size=1 << 20, batch_tsar=batch)
        m.load_asm(kernel_source("gemv16_c2s4.s").read_text())
        out = np.zeros(16, np.int32)
        m.call("gemv16_c2s4", act, weights, out, k, memory_stats=True)
        outs.append(out)
        stats.append(m.stats)
    np.testing.assert_array_equal(outs[0], tile @ act.astype(np.int64))
    np.testing.assert_array_equal(outs[0], outs[1])
    _same_stats(*stats)


def _random_program(cfg: TsarConfig, rng: np.random.Generator, n: int, memory: float = 0.8) -> str:
    """``n`` random TLUT/TGEMV instructions of ``cfg`` over every register its encoding addresses
    (register hazards included), then ``ret``. Activations come from ``[rsi + ...]`` or registers,
    weights from ``[rdx + ...]`` or registers."""
    reg, regs = cfg.register_class, cfg.addressable_registers
    lines = []

    def mem(nbytes: int, address: str) -> str:
        size = MEMORY_SIZE_NAMES.get(nbytes)
        return f"{size} ptr [{address}]" if size else f"[{address}]"
    for i in range(n):
        if rng.random() < 0.3:
            group = int(rng.integers(0, regs // cfg.group_regs)) * cfg.group_regs
            if rng.random() < memory:
                src = mem(cfg.k, f"rsi + {cfg.k * int(rng.integers(0, 8))}")
            else:
                src = f"{reg}{int(rng.integers(0, regs))}"
            lines.append(f"{cfg.tlut_mnemonic} {reg}{group}, {src}")
        else:
            acc = int(rng.integers(0, regs))
            group = int(rng.integers(0, regs // cfg.group_regs)) * cfg.group_regs
            if rng.random() < memory:
                wsrc = mem(cfg.weight_bytes, f"rdx + {cfg.weight_bytes * (i if rng.random() < 0.7 else 0)}")
            else:
                wsrc = f"{reg}{int(rng.integers(0, regs // cfg.weight_regs)) * cfg.weight_regs}"
            lines.append(f"{cfg.tgemv_mnemonic} {reg}{acc}, {reg}{group}, {wsrc}")
    return "\n".join(f"    {line}" for line in lines)


def _run_registers(source: str, batch: bool, seed: int, trace: bool = False,
                   evex: bool = False) -> tuple[np.ndarray, Machine]:
    """Run ``source`` (straight-line code of at most 24 T-SAR instructions) between a load of the
    vector registers from the image at ``[rdi]`` (:mod:`tsar.sim.vector_spill`: zmm0..31 and k0..7
    when ``evex``, else ymm0..15) and a store of them to ``[rcx]``; returns the stored image and
    the machine."""
    rng = np.random.default_rng(seed)
    m = create_machine(data_size=1 << 20, batch_tsar=batch)
    load, store = spill_lines("rdi", avx512=evex)[1], spill_lines("rcx", avx512=evex)[0]
    m.load_asm("f:\n" + "\n".join([*load, source, *store, "ret"]) + "\n")
    regs_in = rng.integers(0, 256, IMAGE_BYTES).astype(np.uint8)
    acts = rng.integers(-128, 128, 128).astype(np.int8)  # [rsi + 8 k] for k up to 16
    weights = rng.integers(0, 256, 24 * MAX_VECTOR_BYTES * 2).astype(np.uint8)  # 24 up to 128 bytes
    regs_out = np.zeros(IMAGE_BYTES, np.uint8)
    m.call("f", regs_in, acts, weights, regs_out, trace=trace)
    return regs_out, m


@pytest.mark.parametrize("cfg", [pytest.param(c, id=c.name) for c in configs()])
@pytest.mark.parametrize("seed", range(16))
def test_random_tsar_runs_batched_equal_unbatched(cfg: TsarConfig, seed: int) -> None:
    """Random straight-line T-SAR code (hazards on groups, accumulators, register sources)."""
    source = _random_program(cfg, np.random.default_rng(seed), 24, memory=0.8 if seed % 2 else 0.4)
    evex = cfg.encoding == "evex"
    fast, m_fast = _run_registers(source, True, seed, evex=evex)
    slow, m_slow = _run_registers(source, False, seed, evex=evex)
    np.testing.assert_array_equal(fast, slow)
    _same_stats(m_fast.stats, m_slow.stats)
    traced, m_traced = _run_registers(source, True, seed, trace=True, evex=evex)
    _, m_traced_slow = _run_registers(source, False, seed, trace=True, evex=evex)
    np.testing.assert_array_equal(traced, slow)
    t, u = m_traced.trace, m_traced_slow.trace
    assert np.array_equal(t.address, u.address) and np.array_equal(t.write, u.write)


def test_random_runs_do_batch() -> None:
    source = _random_program(C2S4, np.random.default_rng(0), 24)
    _, m = _run_registers(source, True, 0)
    assert _batches(m) > 0


@pytest.mark.parametrize("batch", [True, False])
def test_fault_inside_a_batch_is_reported_at_its_instruction(batch: bool) -> None:
    m = create_machine(data_size=1 << 20, batch_tsar=batch)
    labels = m.load_asm("""
    f:
        tlut2x4 ymm8, qword ptr [rdi]
        tgemv8x16 ymm0, ymm8, ymmword ptr [rsi]
        tgemv8x16 ymm1, ymm8, ymmword ptr [rsi + 32]
        tgemv8x16 ymm2, ymm8, ymmword ptr [rdx]
        tgemv8x16 ymm3, ymm8, ymmword ptr [rsi + 64]
        ret
    """)
    act = np.ones(8, np.int8)  # D_b = (-2, 0, 0, 2), S_b = (0, 1, 1, 2)
    weights = np.zeros(96, np.uint8)  # codes 0: D_b[0] - S_b[0] = -2 per block, -8 per output
    with pytest.raises(SimulationError) as err:
        m.call("f", act, weights, 0x40)
    assert err.value.kind == "memory" and err.value.address == 0x40
    insns, addr = [], labels["f"]
    for _ in range(5):
        insns.append(m.cache.insn(addr))
        addr = insns[-1].next
    assert err.value.rip == insns[3].address and "rdx" in err.value.instruction
    # the instructions before the faulting one executed; the ones after did not
    y = m.st.zmm[:, :32].view(np.int16)  # the ymm parts (VEX: bits 511:256 stay zero)
    assert (y[0] == -8).all() and (y[1] == -8).all() and not y[2].any() and not y[3].any()
    assert _batches(m) == (1 if batch else 0)


def _op(cfg: TsarConfig, kind: Kind, dst: int, lut: int = -1, src: Register | Memory | None = None) -> TsarOp:
    src = src if src is not None else Memory(base="rsi")
    return TsarOp(cfg, kind, dst, lut, src, cfg.k if kind is Kind.TLUT else cfg.weight_bytes)


def test_batch_spans_respect_dependences() -> None:
    T, G = Kind.TLUT, Kind.TGEMV
    op = _op
    # the OP inner loop: TLUT then R TGEMVs into different accumulators: one span
    run = [op(C2S4, T, 14)] + [op(C2S4, G, a, 14) for a in range(12)]
    assert batch_spans(run) == [(0, 13)]
    # AP-max: several TGEMVs into the same accumulator: one span
    assert batch_spans([op(C4S4, G, 0, 8)] * 4 + [op(C4S4, G, 1, 8)] * 4) == [(0, 8)]
    # an accumulator read as a LUT group by a later TGEMV splits the run
    assert batch_spans([op(C2S4, G, 8, 0), op(C2S4, G, 8, 0), op(C2S4, G, 1, 8),
                        op(C2S4, G, 2, 8)]) == [(0, 2), (2, 4)]
    # a TLUT rewriting a group an earlier TGEMV read splits; so does one writing an accumulator
    assert batch_spans([op(C2S4, G, 0, 8), op(C2S4, G, 1, 8), op(C2S4, T, 8),
                        op(C2S4, G, 2, 8)]) == [(0, 2)]
    assert batch_spans([op(C2S4, G, 0, 8), op(C2S4, G, 1, 8), op(C2S4, T, 0)]) == [(0, 2)]
    # a TLUT reading an accumulator through a register source splits
    assert batch_spans([op(C2S4, G, 3, 8), op(C2S4, G, 4, 8),
                        op(C2S4, T, 10, src=Register("xmm", 3))]) == [(0, 2)]
    # weights in a register written earlier as an accumulator split
    assert batch_spans([op(C2S4, G, 4, 8), op(C2S4, G, 5, 8),
                        op(C2S4, G, 6, 8, Register("ymm", 4))]) == [(0, 2)]
    # weights in a register a TLUT of the span wrote split (operands are read before the writes)
    assert batch_spans([op(C2S4, T, 8), op(C2S4, G, 0, 8), op(C2S4, G, 1, 8),
                        op(C2S4, G, 2, 12, Register("ymm", 8))]) == [(0, 3)]
    # configurations do not mix; single instructions are not batches; None breaks a run
    assert batch_spans([op(C2S4, G, 0, 8), op(C2S4_128, G, 1, 8)]) == []
    assert batch_spans([op(C2S4, G, 0, 8), None, op(C2S4, G, 1, 8), op(C2S4, G, 2, 8)]) == [(2, 4)]


@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("cfg", [c for c in configs() if c.encoding == "evex"], ids=lambda c: c.name)
def test_zmm_writes_widen_the_state(cfg: TsarConfig, batch: bool) -> None:
    """A 512-bit T-SAR write makes bits 511:256 live: a later VEX write of the register (compiled
    in the same block) zeroes them again, as silicon does."""
    reg, g = cfg.register_class, cfg.group_regs
    m = create_machine(data_size=1 << 20, batch_tsar=batch)
    m.load_asm(f"""
    f:
        {cfg.tlut_mnemonic} {reg}0, [rdi]
        {cfg.tlut_mnemonic} {reg}{g}, [rdi]
        {cfg.tgemv_mnemonic} {reg}31, {reg}0, [rsi]
        {cfg.tgemv_mnemonic} {reg}30, {reg}{g}, [rsi]
        vpxor ymm0, ymm0, ymm0
        ret
    """)
    m.call("f", np.full(cfg.k, 100, np.int8), np.full(cfg.weight_bytes, 0x55, np.uint8), returns="none")
    assert m.st.wide
    assert not m.st.zmm[0].any()  # the TLUT's bits 511:256 zeroed by the VEX write
    assert m.st.zmm[g, cfg.register_bytes // 2:].any()  # the other group's are live
    assert np.array_equal(m.st.zmm[30], m.st.zmm[31])
