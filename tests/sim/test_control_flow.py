"""Control flow the load-time decode does not see: a jump into the middle of an instruction runs
as on the host (the host's results through the native engine), and code written at run time is
stopped with a memory fault naming the address, in every engine; never a silent wrong result."""

from __future__ import annotations

import numpy as np
import pytest

from tsar.isa.assembler import assemble
from tsar.sim import SimulationError, create_machine

pytestmark = pytest.mark.native

PYTHON = [("python", {}), ("python", {"python_scalar": False})]
"""The Python engine with its scalar layer (which follows direct jumps itself) and without (Unicorn
runs every scalar instruction, so Unicorn's translation blocks meet the hidden code)."""
IDS = ["python", "python-unicorn-scalar"]


def _hidden(snippet: str, indirect: bool = True) -> str:
    """``f`` jumps 2 bytes into a ``movabs rax, imm64`` whose immediate holds ``snippet``
    (at most 8 bytes; the code after the movabs goes on from there): a linear sweep sees only the
    movabs. Label ``hidden`` is the movabs."""
    code = assemble(snippet).code
    assert len(code) <= 8, snippet
    imm = code + b"\x90" * (8 - len(code))
    jump = "lea r11, [rip + hidden + 2]\njmp r11" if indirect else ".byte 0xeb, 2  ; jmp hidden + 2"
    return f"""
    f:
        mov ecx, edi
        {jump}
    hidden:
        .byte 0x48, 0xb8, {", ".join(str(b) for b in imm)}
        ret
    """


def _host(source: str, *args, returns: str):
    m = create_machine("native")
    m.load_asm(source)
    try:
        return m.call("f", *args, returns=returns)
    finally:
        m.close()


CASES = {
    # xmm0 = xmm1 * xmm1 (VEX.128: Unicorn would compute xmm0 * xmm1, i.e. 0 here)
    "vmulss-overflow": ("vmulss xmm0, xmm1, xmm1", (np.float32(0.0), np.float32(1e30), 1), "f32",
                        np.float32(np.inf)),
    # n times xmm0 = xmm1 + xmm1 in a loop that exists only inside the movabs
    "vaddss-loop": ("top:\nvaddss xmm0, xmm1, xmm1\ndec ecx\njnz top", (np.float32(1.0), np.float32(2.0), 5),
                    "f32", np.float32(4.0)),
    # legacy SSE, which Unicorn runs, then VEX, which the Python layer runs: the program has no
    # other legacy SSE, so the layers start sharing xmm registers only when the hidden code appears
    "addss-then-vaddss": ("addss xmm0, xmm1\nvaddss xmm0, xmm0, xmm0", (np.float32(1.0), np.float32(2.0), 0),
                          "f32", np.float32(6.0)),
    # VEX.256, which Unicorn cannot execute at all; the low lane's sum comes back
    "vpaddd-256": ("vpaddd ymm0, ymm1, ymm2\nvzeroupper", (np.float32(1.5), np.float32(2.25), 0), "f32",
                   None),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(("engine", "options"), PYTHON, ids=IDS)
def test_vex_inside_another_instruction_runs_as_on_the_host(engine: str, options: dict, case: str):
    snippet, args, returns, want = CASES[case]
    source = _hidden(snippet)
    host = _host(source, *args, returns=returns)
    if want is not None:
        assert np.float32(host) == want or (np.isinf(want) and np.isinf(host))
    m = create_machine(engine, **options)
    m.load_asm(source)
    got = m.call("f", *args, returns=returns)
    assert np.float32(got).tobytes() == np.float32(host).tobytes(), (got, host)
    if case == "vmulss-overflow":
        assert np.float32(got).view(np.uint32) == 0x7F800000
    if case == "vaddss-loop":
        assert m.stats.by_mnemonic["vaddss"] == 5  # counted as executed, at the hidden address
    assert m.call("f", *args, returns=returns) == got  # the second run (cached blocks) agrees


@pytest.mark.parametrize(("engine", "options"), PYTHON, ids=IDS)
def test_a_direct_jump_into_an_instruction(engine: str, options: dict):
    source = _hidden("vmulss xmm0, xmm1, xmm1", indirect=False)
    args = (np.float32(0.0), np.float32(3.0), 1)
    m = create_machine(engine, **options)
    m.load_asm(source)
    assert m.call("f", *args, returns="f32") == _host(source, *args, returns="f32") == 9.0


def test_t_sar_inside_another_instruction():
    """The Python engine executes the hidden T-SAR instruction; the native engine, whose host has
    no T-SAR, stops at it with #UD naming its address and text (it is rewritten only where the
    load-time decode saw it)."""
    snippet = "tlut2x4 ymm0, ymm1"
    source = _hidden(snippet).replace("ret\n", "vmovdqu ymmword ptr [rsi], ymm0\nvzeroupper\nret\n", 1)
    visible = "f:\ntlut2x4 ymm0, ymm1\nvmovdqu ymmword ptr [rsi], ymm0\nvzeroupper\nret\n"
    act = np.arange(-16, 16, dtype=np.int8)

    def run(engine: str, text: str, **options) -> np.ndarray:
        m = create_machine(engine, **options)
        m.load_asm(f"f:\nvmovdqu ymm1, ymmword ptr [rdi]\njmp g\n{text.replace('f:', 'g:', 1)}")
        out = np.zeros(32, np.uint8)
        m.call("f", act, out, returns="none")
        m.close()
        return out

    want = run("native", visible)
    assert np.array_equal(run("python", visible), want)
    for options in ({}, {"python_scalar": False}):
        assert np.array_equal(run("python", source, **options), want)
    m = create_machine("native")
    labels = m.load_asm(f"f:\nvmovdqu ymm1, ymmword ptr [rdi]\njmp g\n{source.replace('f:', 'g:', 1)}")
    with pytest.raises(SimulationError) as info:
        m.call("f", act, np.zeros(32, np.uint8), returns="none")
    assert info.value.kind == "ud" and info.value.rip == labels["hidden"] + 2
    assert info.value.instruction == "tlut2x4 ymm0, ymm1"
    m.close()


def test_native_reports_a_jump_into_a_rewritten_instruction():
    """T-SAR sites are rewritten (jmp to a stub, then int3): entering one past its first byte runs
    the rewrite's bytes, which the native engine reports instead of running on."""
    source = """
    f:
        lea rax, [rip + site + 5]
        jmp rax
    site:
        tlut2x4 ymm0, qword ptr [rdi + 0x40]
        ret
    """
    python = create_machine("python")
    python.load_asm(source)
    python.call("f", np.zeros(128, np.int8))  # in the program's bytes: a REX prefix, then ret
    m = create_machine("native")
    labels = m.load_asm(source)
    with pytest.raises(SimulationError, match=r"entered the instruction at .* 5 bytes after its start"):
        m.call("f", np.zeros(128, np.int8))
    assert m.call(labels["site"] + 6) is not None  # the ret after the site: the machine goes on
    m.close()


# --- code written at run time ----------------------------------------------------------------
WRITERS = """
store:                           ; a scalar store into the code
    lea rax, [rip + code]
    mov byte ptr [rax], 0x90
    ret
vector_store:                    ; a vector store into the code
    lea rax, [rip + code]
    vmovdqu ymmword ptr [rax], ymm0
    ret
to_array:                        ; write ret into an argument array, then jump there
    mov byte ptr [rdi], 0xc3
    jmp rdi
to_stack:                        ; write ret onto the stack, then jump there
    mov byte ptr [rsp - 8], 0xc3
    lea rax, [rsp - 8]
    jmp rax
code:
    mov eax, 7
    ret
"""


@pytest.mark.parametrize("engine", ["python", "native", "proxy"])
def test_code_written_at_run_time_is_stopped(engine: str):
    m = create_machine(engine)
    labels = m.load_asm(WRITERS)
    for name, fault_rip in (("store", labels["store"] + 7), ("vector_store", labels["vector_store"] + 7)):
        with pytest.raises(SimulationError) as info:
            m.call(name)
        err = info.value
        assert err.kind == "memory" and err.rip == fault_rip, err
        assert ("read-only" in str(err)) and err.address == labels["code"], err
    array = np.zeros(64, np.uint8)
    for name, args in (("to_array", (array,)), ("to_stack", ())):
        with pytest.raises(SimulationError) as info:
            m.call(name, *args)
        err = info.value
        assert err.kind == "memory" and err.rip == err.address, err  # the fetch itself faults
        assert "not executable" in str(err), err
    assert m.call("code") == 7  # the code is unchanged
    m.close()
