"""The machine: System V calls, interception of VEX code, faults, limits, statistics, traces."""

from __future__ import annotations

import numpy as np
import pytest

from tsar.sim import Machine, SimulationError, create_machine


@pytest.fixture(scope="module")
def machine() -> Machine:
    return create_machine(data_size=16 << 20, max_instructions=10**6, timeout=30)


def test_integer_and_stack_arguments(machine: Machine):
    machine.load_asm("""
    sum8:
        lea rax, [rdi + rsi]
        add rax, rdx
        add rax, rcx
        add rax, r8
        add rax, r9
        add rax, qword ptr [rsp + 8]
        add rax, qword ptr [rsp + 16]
        ret
    """)
    assert machine.call("sum8", 1, 2, 3, 4, 5, 6, 70, 800) == 891
    assert machine.call("sum8", -1, 0, 0, 0, 0, 0, 0, 0) == -1
    assert machine.call("sum8", -1, 0, 0, 0, 0, 0, 0, 0, returns="u64") == (1 << 64) - 1


def test_arrays_are_copied_in_and_back(machine: Machine):
    machine.load_asm("""
    add16:                       ; out[0..16) = a + b (int16), VEX.128 and VEX.256
        vmovdqu xmm0, xmmword ptr [rdi]
        vpaddw xmm0, xmm0, xmmword ptr [rsi]
        vmovdqu xmmword ptr [rdx], xmm0
        vmovdqu ymm1, ymmword ptr [rdi + 16]
        vpaddw ymm1, ymm1, ymmword ptr [rsi + 16]
        vmovdqu ymmword ptr [rdx + 16], ymm1
        vzeroupper
        ret
    """)
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-(2**15), 2**15, 24).astype(np.int16) for _ in range(2))
    out = np.zeros(24, np.int16)
    machine.call("add16", a, b, out)
    np.testing.assert_array_equal(out, a + b)
    assert machine.stats.by_class["vector"] == 7
    assert machine.stats.vector_bytes_read == 96 and machine.stats.vector_bytes_written == 48


def test_vex128_is_not_left_to_unicorn(machine: Machine):
    # Unicorn alone computes xmm0 = xmm1 + xmm2 wrongly for this VEX.128 form
    machine.load_asm("""
    vex128:
        vmovd xmm1, edi
        vmovd xmm2, esi
        vpaddw xmm0, xmm1, xmm2
        vmovd eax, xmm0
        ret
    """)
    assert machine.call("vex128", 1000, 234) == 1234


def test_float_arguments_and_return(machine: Machine):
    machine.load_asm("""
    fma1:                        ; xmm0 * xmm1 + xmm2 (float)
        vfmadd213ss xmm0, xmm1, xmm2
        ret
    fmul:
        vmulps xmm0, xmm0, xmm1
        ret
    """)
    assert machine.call("fma1", np.float32(1.5), np.float32(2), np.float32(0.25), returns="f32") == 3.25
    assert machine.call("fmul", np.float32(1.5), np.float32(-2), returns="f32") == -3.0


def test_mxcsr_rounding_flags_and_unmasked_exceptions(machine: Machine):
    machine.load_asm("""
    divide:                      ; xmm0 / xmm1 under the MXCSR in edi; returns the MXCSR after
        sub rsp, 8
        mov dword ptr [rsp], edi
        vldmxcsr dword ptr [rsp]
        vdivss xmm0, xmm0, xmm1
        vstmxcsr dword ptr [rsp]
        mov eax, dword ptr [rsp]
        add rsp, 8
        ret
    """)
    one, three, zero = np.float32(1), np.float32(3), np.float32(0)
    assert machine.call("divide", 0x1F80, one, three, returns="i32") == 0x1F80 | 0x20  # PE
    assert machine.call("divide", 0x1F80, one, zero, returns="i32") == 0x1F80 | 0x04  # ZE
    down = machine.call("divide", 0x1F80 | 0x2000, one, three, returns="i32")
    assert down == 0x3F80 | 0x20
    with pytest.raises(SimulationError, match=r"unmasked SIMD floating-point exception \(divide-by-zero\)"):
        machine.call("divide", 0x1F80 & ~0x200, one, zero, returns="i32")
    with pytest.raises(SimulationError, match="reserved bits"):
        machine.call("divide", 0x10000 | 0x1F80, one, three, returns="i32")


def test_loop_with_python_scalar_matches_unicorn_scalar():
    src = """
    kern:                        ; sum of int32 array (n multiple of 8) + a scalar tail count
        vpxor ymm0, ymm0, ymm0
        xor eax, eax
    top:
        vpaddd ymm0, ymm0, ymmword ptr [rdi + rax*4]
        add rax, 8
        cmp rax, rsi
        jb top
        vextracti128 xmm1, ymm0, 1
        vpaddd xmm0, xmm0, xmm1
        vpshufd xmm1, xmm0, 0x4e
        vpaddd xmm0, xmm0, xmm1
        vpshufd xmm1, xmm0, 0xb1
        vpaddd xmm0, xmm0, xmm1
        vmovd eax, xmm0
        push rbx
        pop rbx
        ret
    """
    x = np.arange(4096, dtype=np.int32) * 7 - 3000
    results = []
    for python_scalar in (True, False):
        m = create_machine(data_size=1 << 20, python_scalar=python_scalar)
        m.load_asm(src)
        results.append((m.call("kern", x, x.size, returns="i32"), m.stats.instructions))
    assert results[0] == results[1] == (int(x.sum()), results[0][1])


def test_unmapped_access_is_a_simulation_error(machine: Machine):
    machine.load_asm("""
    bad_vec:
        vmovdqu ymm0, ymmword ptr [rdi]
        ret
    bad_scalar:
        mov rax, qword ptr [rdi]
        push rax
        pop rax
        ret
    """)
    with pytest.raises(SimulationError) as err:
        machine.call("bad_vec", 0x10)
    assert err.value.kind == "memory" and "vmovdqu" in err.value.instruction
    assert err.value.registers["rdi"] == 0x10 and err.value.rip == machine.symbols["bad_vec"]
    with pytest.raises(SimulationError) as err:
        machine.call("bad_scalar", 0x10)
    assert err.value.kind == "memory"


def test_unsupported_and_invalid_instructions(machine: Machine):
    fp16 = machine.load_code(bytes.fromhex("62f5744858c2c3"))  # vaddph zmm0, zmm1, zmm2 (AVX512_FP16)
    with pytest.raises(SimulationError, match="vaddph") as err:
        machine.call(fp16)
    assert err.value.kind == "ud"
    # a T-SAR map-8 instruction with reserved pp bits
    addr = machine.load_code(bytes([0xC4, 0x68, 0x7D, 0x20, 0x07, 0xC3]))
    with pytest.raises(SimulationError, match="T-SAR") as err:
        machine.call(addr, 0)
    assert err.value.kind == "ud"


def test_division_by_zero(machine: Machine):
    machine.load_asm("""
    divide:
        mov rax, rdi
        xor edx, edx
        div rsi
        ret
    """)
    assert machine.call("divide", 100, 7) == 14
    with pytest.raises(SimulationError) as err:
        machine.call("divide", 1, 0)
    assert err.value.kind == "de" and "div" in err.value.instruction


def test_instruction_limit_and_timeout(machine: Machine):
    machine.load_asm("""
    forever:
        vpaddd ymm0, ymm0, ymm1
        jmp forever
    spin:
        push rax
        pop rax
        jmp spin
    """)
    with pytest.raises(SimulationError) as err:
        machine.call("forever", max_instructions=10_000)
    assert err.value.kind == "limit"
    with pytest.raises(SimulationError) as err:
        machine.call("spin", max_instructions=50_000)
    assert err.value.kind == "limit"
    with pytest.raises(SimulationError) as err:
        machine.call("forever", max_instructions=10**12, timeout=0.3)
    assert err.value.kind == "limit"


def test_trace_and_memory_stats(machine: Machine):
    machine.load_asm("""
    copy:
        mov rax, qword ptr [rdi]
        mov qword ptr [rsi], rax
        vmovdqu ymm0, ymmword ptr [rdi + 32]
        vmovdqu ymmword ptr [rsi + 32], ymm0
        push rax
        pop rax
        ret
    """)
    src = np.arange(64, dtype=np.uint8)
    dst = np.zeros(64, np.uint8)
    machine.call("copy", src, dst, trace=True)
    np.testing.assert_array_equal(dst[:8], src[:8])
    np.testing.assert_array_equal(dst[32:], src[32:])
    t = machine.trace
    sizes_rw = [(int(s), bool(w)) for s, w in zip(t.size, t.write, strict=True)]
    assert (8, False) in sizes_rw and (8, True) in sizes_rw
    assert (32, False) in sizes_rw and (32, True) in sizes_rw
    s = machine.stats
    assert s.vector_bytes_read == 32 and s.vector_bytes_written == 32
    assert s.scalar_bytes_read >= 8 + 8 + 8  # mov, pop, ret
    assert s.by_mnemonic["vmovdqu"] == 2 and s.per_address[machine.symbols["copy"]] == 1


def test_memory_stats_on_code_translated_before(machine: Machine):
    machine.load_asm("""
    scalar_sum:
        xor eax, eax
    again:
        add rax, qword ptr [rdi]
        push rax
        pop rax
        add rdi, 8
        dec rsi
        jnz again
        ret
    """)
    x = np.arange(100, dtype=np.int64)
    assert machine.call("scalar_sum", x, 100) == x.sum()
    assert machine.call("scalar_sum", x, 100, memory_stats=True) == x.sum()
    s = machine.stats
    assert s.scalar_bytes_read == 100 * 16 + 8 and s.scalar_bytes_written == 100 * 8


def test_ctrl_c_inside_the_simulator_is_an_interrupt(machine: Machine, monkeypatch, capsys, tmp_path):
    """A KeyboardInterrupt raised while a hook runs stops the guest and reaches the caller as
    itself (the CLI then prints "interrupted" and exits 130), not as an internal error."""
    from tsar.cli.main import main

    def interrupted(*_args):
        raise KeyboardInterrupt
    monkeypatch.setattr(type(machine), "_python", interrupted)
    source = "f:\n    vpxor xmm0, xmm0, xmm0\n    ret\n"
    machine.load_asm(source)
    with pytest.raises(KeyboardInterrupt):
        machine.call("f")
    path = tmp_path / "f.s"
    path.write_text(source)
    assert main(["run", str(path)]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"


def test_heartbeat_reports_long_calls(machine: Machine):
    machine.load_asm("f:\n    mov ecx, 400000\nloop:\n    dec ecx\n    jnz loop\n    ret\n")
    beats = []
    machine.heartbeat = lambda count, seconds: beats.append((count, seconds))
    machine.heartbeat_seconds = 0.01
    machine.call("f")
    counts = [count for count, _ in beats]
    assert counts and counts == sorted(counts) and len(set(counts)) == len(counts)
