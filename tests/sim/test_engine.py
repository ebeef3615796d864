"""The engine protocol: every engine implements it, one factory creates them, and an option an
engine does not take is an error naming the engine and the option."""

from __future__ import annotations

import numpy as np
import pytest

from tsar.sim import ENGINES, Machine, SimulationError, call_options, create_machine, engine_options

SOURCE = """
add3:
    lea rax, [rdi + rsi]
    add rax, rdx
    ret
scale:
    vmovdqu ymm0, ymmword ptr [rdi]
    vpaddw ymm0, ymm0, ymm0
    vmovdqu ymmword ptr [rdi], ymm0
    ret
"""


@pytest.fixture(params=list(ENGINES))
def machine(request: pytest.FixtureRequest) -> Machine:
    m = create_machine(request.param)
    yield m
    m.close()


def test_every_engine_implements_the_protocol(machine: Machine) -> None:
    assert isinstance(machine, Machine)
    assert machine.engine in ENGINES


@pytest.mark.native
def test_the_same_call_on_every_engine(machine: Machine) -> None:
    machine.load_asm(SOURCE)
    assert machine.call("add3", 1, 2, 39) == 42
    words = np.arange(16, dtype=np.int16)
    machine.call("scale", words, returns="none")
    assert (words == 2 * np.arange(16)).all()  # no T-SAR here: the proxy runs it as written
    assert machine.stats.wall_seconds >= 0 and machine.stats.summary()


def test_options_are_read_from_the_engines() -> None:
    assert {"data_size", "python_scalar", "batch_tsar", "max_instructions"} <= set(engine_options("python"))
    assert {"data_size", "stub_size", "in_process", "timeout"} <= set(engine_options("native"))
    assert engine_options("proxy") == engine_options("native")
    assert {"trace", "memory_stats", "timeout"} <= set(call_options("python"))
    assert "trace" not in call_options("native") and "timeout" in call_options("native")


@pytest.mark.parametrize("engine, option", [
    ("native", "python_scalar"), ("proxy", "trace"), ("python", "in_process"),
])
def test_an_unsupported_creation_option_names_engine_and_option(engine: str, option: str) -> None:
    with pytest.raises(SimulationError, match=f"the {engine} engine has no creation option '{option}'"):
        create_machine(engine, **{option: True})


@pytest.mark.parametrize("engine, option", [("native", "trace"), ("proxy", "memory_stats"),
                                            ("python", "in_process")])
def test_an_unsupported_call_option_names_engine_and_option(engine: str, option: str) -> None:
    m = create_machine(engine, in_process=True) if engine != "python" else create_machine(engine)
    m.load_asm(SOURCE)
    with pytest.raises(SimulationError, match=f"the {engine} engine has no call option '{option}'"):
        m.call("add3", 1, 2, 3, **{option: True})
    m.close()


def test_options_reach_the_engine_they_name() -> None:
    """``data_size`` was once dropped on its way to the proxy engine."""
    proxy = create_machine("proxy", data_size=1 << 20, in_process=True)
    assert proxy.data.size == 1 << 20
    python = create_machine("python", data_size=1 << 20, python_scalar=False)
    assert python.python_scalar is False


def test_unknown_engine() -> None:
    with pytest.raises(SimulationError, match=r"unknown engine 'qemu' .*python, native, proxy"):
        create_machine("qemu")
