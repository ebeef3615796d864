"""Loop detection and kernel-time prediction from simulated execution counts."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from tsar.isa.assembler import assemble
from tsar.sim import MemoryTrace, create_machine
from tsar.sim.platforms import load
from tsar.sim.timing.predict import cache_traffic, find_loops, predict

NESTED = """
f:
    mov rcx, 4
outer:
    mov rdx, 8
inner:
    add rax, 1
    dec rdx
    jnz inner
    add rbx, 1
    dec rcx
    jnz outer
    ret
"""

VECTOR_LOOP = """
f:
    mov rcx, 1000
top:
""" + "".join(f"    vpaddw ymm{i}, ymm{i}, ymm15\n" for i in range(8)) + """
    dec rcx
    jnz top
    vzeroupper
    ret
"""

CHAIN_LOOP = """
f:
    mov rcx, 500
top:
    vpmaddwd ymm0, ymm0, ymm1
    dec rcx
    jnz top
    vzeroupper
    ret
"""

STRAIGHT = """
f:
    mov rax, rdi
    add rax, rsi
    imul rax, rax
    ret
"""


def _run(source: str, *args: int):
    program = assemble(source)
    machine = create_machine()
    symbols = machine.load_program(program)
    base = symbols["f"] - (program.symbols["f"] - program.base)
    machine.call("f", *args)
    return machine.stats, program.code, base, symbols


def test_nested_loops_innermost_attribution():
    stats, code, base, sym = _run(NESTED)
    loops, straight = find_loops(code, base, stats.per_address)
    assert len(loops) == 2
    outer, inner = loops
    assert (outer.start, inner.start) == (sym["outer"], sym["inner"])
    assert inner.parent is outer and (outer.depth, inner.depth) == (0, 1)
    assert (outer.iterations, inner.iterations) == (4, 32)
    assert len(inner.own) == 3          # add, dec, jnz
    assert len(outer.own) == 4          # mov rdx, add rbx, dec, jnz
    assert sorted(straight) == [sym["f"], max(stats.per_address)]  # mov rcx ... ret


def test_straight_line_code_has_no_loops():
    stats, code, base, _ = _run(STRAIGHT, 3, 4)
    loops, straight = find_loops(code, base, stats.per_address)
    assert loops == [] and len(straight) == 4
    p = predict(stats, code, base, "laptop")
    assert [r.label for r in p.loops] == ["straight-line"]
    assert 0 < p.core_cycles < 10


def test_single_loop_port_bound_hand_checked():
    # 8 independent vpaddw per iteration on Zen 4's four vector ALU pipes: 2 cycles/iteration
    # (front end (8 + 1 fused dec/jnz) / 6 = 1.5; chains 1 cycle).
    stats, code, base, sym = _run(VECTOR_LOOP)
    plat = load("laptop")
    p = predict(stats, code, base, plat)
    loop = next(r for r in p.loops if r.depth == 0)
    assert loop.start == sym["top"] and loop.iterations == 1000
    assert loop.cycles_per_iteration == pytest.approx(2.0)
    assert loop.bottleneck.startswith("ports")
    straight = next(r for r in p.loops if r.depth < 0)
    assert p.core_cycles == pytest.approx(2000 + straight.cycles)
    assert p.seconds == pytest.approx(p.cycles / plat.core.frequency_hz)
    assert p.bound == "core" and "loop" in p.table()


def test_dependency_bound_loop():
    stats, code, base, _ = _run(CHAIN_LOOP)
    plat = load("laptop")
    lat = plat.uarch().lookup("vpmaddwd", ("ymm", "ymm", "ymm")).latency
    p = predict(stats, code, base, plat)
    loop = next(r for r in p.loops if r.depth == 0)
    assert loop.cycles_per_iteration == pytest.approx(lat)
    assert loop.bottleneck == "dependency"


def test_threads_split_core_cycles():
    stats, code, base, _ = _run(VECTOR_LOOP)
    one = predict(stats, code, base, "laptop")
    two = predict(stats, code, base, "laptop", threads=2)
    assert two.cycles == pytest.approx(one.cycles / 2)


def test_cache_traffic_levels():
    plat = load("laptop")
    l1 = plat.caches[0]
    # a buffer of half the L1D read 4 times: after warm-up everything hits L1D
    small = np.arange(0, l1.size // 2, 32, dtype=np.uint64)
    trace = MemoryTrace(np.tile(small, 4), np.full(small.size * 4, 32, np.uint16),
                        np.zeros(small.size * 4, bool))
    streams = cache_traffic(trace, plat)
    assert [s.level for s in streams] == ["L1D"]
    assert streams[0].read == pytest.approx(4 * l1.size // 2)
    # the same buffer marked cold: each line once from DRAM
    cold = cache_traffic(trace, plat, cold=[(0, l1.size)])
    dram = next(s for s in cold if s.level == "DRAM")
    assert dram.read == pytest.approx(l1.size // 2)
    p_small = sum(s.read for s in cold)
    assert p_small == pytest.approx(4 * l1.size // 2)


def test_tsar_kernel_prediction_and_rtl_check():
    from tsar.rtl.bench import measured_cycles
    from tsar.simulate.tsar_kernel import plan_for, program_for, simulate

    plan = plan_for("tsar-c2s4-op", 32, 64)
    rng = np.random.default_rng(1)
    run = simulate(plan, rng.standard_normal((1, 64)).astype(np.float32),
                   rng.integers(-1, 2, (32, 64)).astype(np.int8), 1.0)
    p = predict(run.stats, program_for(plan).code, run.code_address, "laptop", check_rtl=measured_cycles)
    assert p.cycles > 0 and any("RTL" in n for n in p.notes)


needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("nm") is None,
                               reason="needs gcc and nm")


@pytest.mark.slow  # (34 s; the default tier validates --tiny through tests/cli/test_json.py)
@pytest.mark.native
@needs_gcc
def test_validation_tiny_shape_table():
    from tsar.sim.platforms.detect import cpu_flags
    from tsar.validation.validate import (
        KERNELS,
        TINY_SHAPES,
        TSAR_GEMM_KERNELS,
        TSAR_KERNELS,
        host_isas,
        validate,
    )

    kernels = ("tl2", "int2", "trit5")  # LUT, sum and prepared entries (all KERNELS: the slow test)
    assert set(kernels) <= set(KERNELS)
    v = validate(kernels, shapes=TINY_SHAPES, dram=False, calls=10, rounds=2)
    natives = sum(len(host_isas(k, cpu_flags())) for k in kernels)
    assert len(v.cases) == natives + len(kernels) + len(TSAR_KERNELS) + len(TSAR_GEMM_KERNELS)
    speedups = v.isa_speedups()
    assert len(speedups) == natives - len(kernels)   # each non-AVX2 case beside its AVX2 twin
    assert all(p > 0 and m > 0 for _, _, p, m in speedups)
    if speedups:
        assert "int2-avx512 over int2" in v.table()
    assert {c.data for c in v.cases} == {"cache", "GEMM"}
    assert all(c.N == 128 for c in v.cases if c.data == "GEMM")
    assert all(math.isfinite(c.error) and c.measured > 0 and c.predicted > 0 for c in v.cases)
    assert all(c.spread >= 0 for c in v.cases)
    table = v.table()
    assert "MAPE" in table and all(k in table for k in (*kernels, *TSAR_KERNELS))
    assert "bias by family" in table and set(v.bias()) >= {"tl2", "tsar-c2s4", "tsar-c4s4"}


@pytest.mark.native
@needs_gcc
def test_validation_measures_thread_scaling():
    """Thread-scaling cases: a native at one and two threads through the library's threaded calls,
    modelled at as many threads, with the speedups predicted and measured side by side."""
    from tsar.validation.validate import validate

    v = validate(("int2",), shapes=((64, 384),), dram=False, tsar_kernels=(), gemm_kernels=(),
                 tsar_gemm_kernels=(), calls=5, rounds=2, threads=(1, 2), thread_kernels=("int2",),
                 thread_shape=(256, 1024))
    assert [(c.threads, c.N, c.data) for c in v.scaling] == [(1, 128, "GEMM"), (2, 128, "GEMM")]
    assert all(math.isfinite(c.error) and c.measured > 0 and c.predicted > 0 for c in v.scaling)
    assert v.scaling[1].predicted < v.scaling[0].predicted   # the model gives the second core work
    (one, two, predicted, measured), = v.thread_speedups()
    assert one.threads == 1 and two.threads == 2 and predicted > 1 and measured > 0
    assert "2 threads over 1: speedup predicted" in v.table()
    assert {r["threads"] for r in v.records()} == {1, 2}
    assert all(c.threads == 1 for c in v.cases)   # the single-thread cases keep their own MAPE


@pytest.mark.native
@needs_gcc
def test_validation_measures_the_other_operators(monkeypatch):
    """The other operators of a token: the library's own code timed natively beside its model
    (small sizes here; a full run takes BitNet-2B's)."""
    from tsar.validation import validate as validation

    cases = [("rmsnorm", {"n": 512}, None), ("lm_head", {"m": 64, "k": 512}, None),
             ("attention", {"heads": 4, "kv_heads": 2, "hd": 64, "ctx": 64}, None)]
    monkeypatch.setattr(validation, "operator_cases", lambda llc: cases)
    v = validation.validate((), shapes=(), tsar_kernels=(), tsar_gemm_kernels=(), operators=True, calls=5,
                            rounds=2)
    assert [c.kernel for c in v.operators] == ["rmsnorm", "lm_head", "attention"] and not v.cases
    assert all(math.isfinite(c.error) and c.measured > 0 and c.predicted > 0 for c in v.operators)
    assert {c.data for c in v.operators} == {"cache"}
    assert "operators MAPE" in v.table() and "heads 4, kv_heads 2, hd 64, ctx 64" in v.table()


@pytest.mark.native
@pytest.mark.slow
@needs_gcc
def test_validation_full_table():
    """The full validation runs and reports every case. Its accuracy (MAPE) is a benchmark figure
    (`tsar validate-model`, docs/timing.md), not asserted here: timings on a shared machine vary."""
    from tsar.sim.platforms import host
    from tsar.validation.validate import FULL_SHAPES, KERNELS, TSAR_GEMM_KERNELS, TSAR_KERNELS, validate

    # every DRAM case holds weight copies of twice the last-level cache at once (alternating rounds)
    llc = max(c.size for c in host(measure=False).caches)
    need = len(FULL_SHAPES) * (len(KERNELS) + len(TSAR_KERNELS)) * 2 * llc
    available = next((int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                      if line.startswith("MemAvailable:")), 0)
    if need > available // 2:
        pytest.skip(f"the DRAM cases would hold {need / 2**30:.1f} GiB of weight copies at once "
                    f"(last-level cache {llc >> 20} MiB); {available / 2**30:.1f} GiB available")
    from tsar.sim.platforms.detect import cpu_flags
    from tsar.validation.validate import host_isas

    v = validate(calls=10, rounds=3)
    natives = sum(len(host_isas(k, cpu_flags())) for k in KERNELS)
    assert len(v.cases) == len(FULL_SHAPES) * (2 * natives + len(KERNELS) + 2 * len(TSAR_KERNELS)
                                               + len(TSAR_GEMM_KERNELS))
    assert all(math.isfinite(c.error) and c.measured > 0 and c.predicted > 0 for c in v.cases)
    assert "MAPE" in v.table()
