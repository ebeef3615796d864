"""``PythonMachine.replace_program``: a machine that runs program after program in one place must
behave, count and fault exactly as a fresh machine running the last one, while compiling only the
instructions whose bytes changed."""

from __future__ import annotations

import numpy as np
import pytest

import tsar.sim.python_engine.blocks as blocks
from tsar.isa.assembler import assemble
from tsar.sim.errors import SimulationError
from tsar.sim.python_engine.machine import PythonMachine
from tsar.simulate.tsar_kernel import loaded_symbols, plan_for, program_for, simulate

COUNTED = [
    "instructions", "by_class", "by_mnemonic", "per_address", "tsar_uops", "vector_bytes_read",
    "vector_bytes_written", "scalar_bytes_read", "scalar_bytes_written", "python_instructions",
    "unicorn_instructions", "python_entries"]


def _counts(stats) -> dict:
    return {name: getattr(stats, name) for name in COUNTED}


@pytest.fixture
def decodes(monkeypatch) -> list[int]:
    """Addresses decoded and compiled, in order."""
    seen: list[int] = []
    real = blocks.decode_insn

    def counting(st, address, trace=False):
        seen.append(address)
        return real(st, address, trace)

    monkeypatch.setattr(blocks, "decode_insn", counting)
    return seen


def _run(kernel: str, M: int, K: int, machine: PythonMachine, tokens: int = 2):
    plan = plan_for(kernel, M, K)
    rng = np.random.default_rng(M * K + tokens)
    w_t = rng.integers(-1, 2, (M, K)).astype(np.int8)
    x = rng.standard_normal((tokens, K)).astype(np.float32)
    loaded_symbols(machine, program_for(plan), alone=True)
    return simulate(plan, x, w_t, 1.0, machine=machine)


@pytest.mark.parametrize("kernel", ["tsar-c4s4-op", "tsar-c2s4-512-ap-max"])
def test_replaced_kernels_count_as_on_a_fresh_machine(kernel: str, decodes: list[int]) -> None:
    shapes = [(64, 256), (96, 512), (64, 256)]  # back to the first: its code is loaded again
    reused = PythonMachine()
    for i, (M, K) in enumerate(shapes):
        before = len(decodes)
        run = _run(kernel, M, K, reused)
        compiled = len(decodes) - before
        fresh = _run(kernel, M, K, PythonMachine())
        assert run.exact and fresh.exact
        assert np.array_equal(run.y, fresh.y)
        assert _counts(run.stats) == _counts(fresh.stats)
        assert run.code_address == fresh.code_address  # where a fresh machine loads it
        if i == 2:  # the first program again: its instructions come off the shelf
            program = program_for(plan_for(kernel, M, K))
            listed = sum(1 for e in program.listing if e.data)
            assert compiled < listed / 10, (compiled, listed)


def _program(text: str):
    return assemble(text + "\n", filename="t.s")


def test_changed_bytes_are_compiled_again_and_hooks_follow_the_code() -> None:
    machine = PythonMachine()
    first = _program("f:\n vpxor ymm0, ymm0, ymm0\n vmovd eax, xmm0\n add eax, 7\n ret")
    assert machine.call(machine.replace_program(first)["f"]) == 7
    # the same addresses now hold scalar code only: the old vector hooks must not fire
    second = _program("f:\n mov eax, 3\n add eax, 2\n nop\n nop\n ret")
    assert machine.call(machine.replace_program(second)["f"]) == 5
    assert machine.stats.python_entries == 0 and machine.stats.unicorn_instructions == 5
    # one immediate differs from the first program: that instruction is compiled again
    third = _program("f:\n vpxor ymm0, ymm0, ymm0\n vmovd eax, xmm0\n add eax, 9\n ret")
    assert machine.call(machine.replace_program(third)["f"]) == 9


def test_a_shorter_program_leaves_zeros_and_no_symbols_behind() -> None:
    machine = PythonMachine()
    long = _program("f:\n vpxor ymm1, ymm1, ymm1\n" + " vpaddd ymm1, ymm1, ymm1\n" * 40
                    + " xor eax, eax\n ret\ng:\n mov eax, 1\n ret")
    symbols = machine.replace_program(long)
    start = symbols["f"]
    short = _program("f:\n mov eax, 4\n ret")
    assert machine.replace_program(short) == {"f": start}
    size = len(short.code)
    assert machine.mem.read(start + size, len(long.code) - size) == bytes(len(long.code) - size)
    assert machine.call("f") == 4
    with pytest.raises(SimulationError, match="no function 'g'"):
        machine.call("g")
