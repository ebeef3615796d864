"""Guard regions around array arguments, the stack and the code, and the call limits.

An access that leaves an array argument by one byte faults whether Unicorn (scalar code), the
Python scalar subset or the vector layer executes it, and the message names the array, the offset
and the instruction. ``tsar run`` stops a runaway guest at its instruction or wall-time limit.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tsar.cli.main import build_parser, main
from tsar.sim import Machine, SimulationError, create_machine

ACCESSORS = """
rd:                                  ; al = a[rsi]: Unicorn
    mov al, byte ptr [rdi + rsi]
    ret
wr:                                  ; a[rsi] = 7: Unicorn
    mov byte ptr [rdi + rsi], 7
    ret
rd8:                                 ; rax = 8 bytes at a + rsi: Unicorn
    mov rax, qword ptr [rdi + rsi]
    ret
py_rd:                               ; the same read in the Python scalar subset (after a VEX insn)
    vpxor ymm0, ymm0, ymm0
    movzx eax, byte ptr [rdi + rsi]
    ret
vrd:                                 ; 32 bytes at a + rsi, returns the last: vector layer
    vmovdqu ymm0, ymmword ptr [rdi + rsi]
    vextracti128 xmm0, ymm0, 1
    vpextrb eax, xmm0, 15
    vzeroupper
    ret
vwr:                                 ; 32 bytes of 1 at a + rsi: vector layer
    vpcmpeqb ymm0, ymm0, ymm0
    vpabsb ymm0, ymm0
    vmovdqu ymmword ptr [rdi + rsi], ymm0
    vzeroupper
    ret
rd_rdx:                              ; al = c[rsi] with c the third argument
    mov al, byte ptr [rdx + rsi]
    ret
"""


@pytest.fixture(scope="module")
def machine() -> Machine:
    m = create_machine(data_size=16 << 20, max_instructions=10**6, timeout=30)
    m.load_asm(ACCESSORS)
    return m


def _fault(machine: Machine, fn: str, *args: object) -> SimulationError:
    with pytest.raises(SimulationError) as err:
        machine.call(fn, *args)
    assert err.value.kind == "memory"
    assert err.value.rip is not None and err.value.instruction
    assert "\n" not in str(err.value)
    return err.value


ONE_PAST = "offset +2560 of arg 0 (i8[2560]): 1 byte past its end"
ONE_BEFORE = "offset -1 of arg 0 (i8[2560]): 1 byte before its start"


@pytest.mark.parametrize("fn, access", [("rd", "read"), ("wr", "write"), ("py_rd", "read")])
def test_scalar_access_one_byte_outside(machine: Machine, fn: str, access: str):
    a = np.arange(2560).astype(np.int8)
    err = _fault(machine, fn, a, 2560)
    assert f"{access} of 1 byte" in str(err) and ONE_PAST in str(err)
    assert err.address == machine.arguments[0].end and "[rdi+rsi]" in err.instruction
    err = _fault(machine, fn, a, -1)
    assert f"{access} of 1 byte" in str(err) and ONE_BEFORE in str(err)
    assert err.address == machine.arguments[0].start - 1


def test_scalar_access_straddling_the_end(machine: Machine):
    err = _fault(machine, "rd8", np.zeros(2560, np.int8), 2556)
    assert "read of 8 bytes" in str(err) and "+2556 of arg 0 (i8[2560]): 4 bytes past its end" in str(err)
    assert "qword ptr [rdi+rsi]" in err.instruction


@pytest.mark.parametrize("fn, access", [("vrd", "read"), ("vwr", "write")])
def test_vector_access_one_byte_outside(machine: Machine, fn: str, access: str):
    a = np.zeros(2560, np.int8)
    err = _fault(machine, fn, a, 2560 - 31)
    assert f"{access} of 32 bytes" in str(err)
    assert "offset +2529 of arg 0 (i8[2560]): 1 byte past its end" in str(err)
    assert err.instruction.startswith("vmovdqu") and err.rip is not None
    err = _fault(machine, fn, a, -8)
    assert "offset -8 of arg 0 (i8[2560]): 8 bytes before its start" in str(err)


def test_last_byte_is_in_bounds(machine: Machine):
    a = np.arange(2560).astype(np.uint8)
    assert machine.call("rd", a, 2559, returns="u32") & 0xFF == 2559 % 256
    assert machine.call("py_rd", a, 2559) == 2559 % 256
    assert machine.call("rd8", a, 2552, returns="u64") == int.from_bytes(a[2552:].tobytes(), "little")
    assert machine.call("vrd", a, 2528) == a[2559]
    machine.call("vwr", a, 2528)
    machine.call("wr", a, 0)
    assert (a[2528:] == 1).all() and a[0] == 7 and (a[1:2528] == np.arange(1, 2528) % 256).all()


def test_page_sized_array_and_remapping(machine: Machine):
    """Page-multiple arrays (no slack after them) and calls whose layouts differ."""
    page = np.zeros(4096, np.int8)
    assert machine.call("rd", page, 4095) == 0
    assert "offset +4096 of arg 0 (i8[4096]): 1 byte past its end" in str(_fault(machine, "rd", page, 4096))
    # blocks translated in the calls above must still see the slack of a non-page-multiple array
    assert ONE_PAST in str(_fault(machine, "rd", np.zeros(2560, np.int8), 2560))
    assert machine.call("rd", np.full(100, 5, np.int8), 99) == 5
    assert "+100 of arg 0 (i8[100])" in str(_fault(machine, "wr", np.zeros(100, np.int8), 100))
    assert ONE_PAST in str(_fault(machine, "wr", np.zeros(2560, np.int8), 2560))


def test_the_nearest_argument_is_named(machine: Machine):
    arrays = (np.zeros(64, np.int8), -3, np.zeros((4, 640), np.int8))
    err = _fault(machine, "rd_rdx", *arrays)  # rdi, rsi = -3, rdx
    assert "offset -3 of arg 2 (i8[4x640]): 3 bytes before its start" in str(err)
    err = _fault(machine, "rd", np.zeros(64, np.float32), 256 + 100)
    assert "+356 of arg 0 (f32[64]): 101 bytes past its end" in str(err)


def test_stack_overflow_and_underflow():
    m = create_machine(data_size=1 << 20, stack_size=64 << 10, max_instructions=10**6)
    m.load_asm("""
    deep:                            ; touch [rsp - rdi]
        sub rsp, rdi
        mov qword ptr [rsp], rax
        add rsp, rdi
        ret
    recurse:
        call recurse
    above:                           ; rax = [rsp + rdi]
        mov rax, qword ptr [rsp + rdi]
        ret
    vabove:
        vmovdqu ymm0, ymmword ptr [rsp + rdi]
        ret
    """)
    assert m.call("deep", 32 << 10) == 0
    err = _fault(m, "deep", 128 << 10)
    assert "write of 8 bytes" in str(err) and "before its start (stack overflow)" in str(err)
    assert "of the stack" in str(err)
    err = _fault(m, "recurse")
    assert "offset -8 of the stack: 8 bytes before its start (stack overflow)" in str(err)
    assert err.instruction.startswith("call")
    assert m.call("above", 64) == 0  # at entry rsp is 72 bytes below the stack's top
    err = _fault(m, "above", 72)
    assert "read of 8 bytes" in str(err) and "of the stack: 8 bytes past its end" in str(err)
    err = _fault(m, "vabove", 56)
    assert "read of 32 bytes" in str(err) and "of the stack: 16 bytes past its end" in str(err)


def test_code_is_read_only_and_guarded():
    m = create_machine(data_size=1 << 20, max_instructions=10**6)
    m.load_asm("""
    patch:
        lea rax, [rip]
        mov byte ptr [rax], 0x90
        ret
    jump:
        jmp rdi
    """)
    err = _fault(m, "patch")
    assert "write of 1 byte" in str(err) and "of the code: the code is read-only" in str(err)
    err = _fault(m, "jump", m.mem.code_end + 16)
    assert "fetch of" in str(err) and "of the code: " in str(err) and "past its end" in str(err)


SPIN = {"scalar": "f:\n    jmp f\n", "vector": "f:\n    vpaddd ymm0, ymm0, ymm1\n    jmp f\n"}


@pytest.mark.parametrize("kind", SPIN)
def test_instruction_limit_is_exact_to_a_block(kind: str):
    m = create_machine(data_size=1 << 20)
    m.load_asm(SPIN[kind])
    for limit in (1000, 12_345):
        with pytest.raises(SimulationError) as err:
            m.call("f", max_instructions=limit)
        assert err.value.kind == "limit" and f"instruction limit of {limit:,} reached" in str(err.value)
        assert limit < m.stats.instructions <= limit + 2
        assert err.value.instruction.startswith("jmp" if kind == "scalar" else "vpaddd")


def test_run_defaults_to_limits():
    args = build_parser().parse_args(["run", "kernel.s"])
    assert args.max_instructions == 10**9 and args.timeout == 600.0


@pytest.mark.parametrize("kind", SPIN)
def test_run_stops_at_the_instruction_limit(capsys, tmp_path, kind: str):
    src = tmp_path / "spin.s"
    src.write_text(SPIN[kind])
    rc = main(["run", str(src), "--max-instructions", "5000"])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1
    assert "instruction limit of 5,000 reached" in err and "--max-instructions" in err


@pytest.mark.parametrize("kind", SPIN)
def test_run_stops_at_the_wall_time_limit(capsys, tmp_path, kind: str):
    src = tmp_path / "spin.s"
    src.write_text(SPIN[kind])
    rc = main(["run", str(src), "--timeout", "0.2", "--max-instructions", str(10**12)])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1
    assert "wall-time limit of 0.2 s reached" in err and "--timeout" in err


def test_run_reports_an_overrun_in_one_line(tmp_path):
    src = tmp_path / "overrun.s"
    src.write_text("f:\n    vmovdqu ymm0, ymmword ptr [rdi + rsi]\n    ret\n")
    proc = subprocess.run([sys.executable, "-m", "tsar", "run", str(src), "--arg", "i8:2560",
                           "--arg", "2529"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1
    assert "offset +2529 of arg 0 (i8[2560]): 1 byte past its end" in proc.stderr
    assert "vmovdqu" in proc.stderr
