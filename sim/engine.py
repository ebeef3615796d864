"""The engine protocol: what every execution engine offers, the options each takes, and the one
factory that creates them.

Three engines execute x86-64 + AVX2 + T-SAR code:

- ``python`` (:class:`~tsar.sim.python_engine.PythonMachine`): Unicorn runs scalar code, the
  project's vector layer every VEX instruction; full statistics, memory traces, guard pages;
- ``native`` (:class:`~tsar.sim.native_engine.NativeMachine`): the host runs the code, T-SAR sites
  rewritten into stubs; cheap statistics (wall time, T-SAR instructions per site);
- ``proxy`` (:class:`~tsar.sim.proxy_engine.ProxyMachine`): the native engine with T-SAR replaced by
  uop-equivalent AVX2, for timing on silicon (results meaningless).

Each engine's creation and call options are read from the signatures of its ``__init__`` and
``call``, so they are declared once, in the engine; :func:`create_machine` and every ``call`` refuse
an option the engine does not take with an error naming the engine and the option.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from tsar.sim.errors import SimulationError

if TYPE_CHECKING:
    from tsar.isa.assembler import Program

ENGINES: dict[str, str] = {
    "python": "tsar.sim.python_engine:PythonMachine",
    "native": "tsar.sim.native_engine:NativeMachine",
    "proxy": "tsar.sim.proxy_engine:ProxyMachine",
}
"""Engine name -> ``module:class`` (imported on first use: the native engines need no Unicorn)."""


@runtime_checkable
class EngineStats(Protocol):
    """What every engine's statistics of the last call have (the Python engine's
    :class:`~tsar.sim.stats.Stats` has much more)."""

    wall_seconds: float

    def summary(self) -> str: ...


@runtime_checkable
class Machine(Protocol):
    """An x86-64 machine executing loaded code through System V calls (one per engine)."""

    engine: ClassVar[str]
    symbols: dict[str, int]
    stats: EngineStats
    heartbeat: Callable[[int, float], None] | None

    def load_code(self, code: bytes, symbols: Mapping[str, int] | None = None,
                  base: int | None = None) -> int:
        """Copy position-independent code in; ``symbols`` are offsets from its start. Returns
        its load address."""
        ...

    def load_asm(self, source: str, filename: str = "<input>") -> dict[str, int]:
        """Assemble Intel-syntax AVX2 + T-SAR source and load it; returns its labels."""
        ...

    def load_program(self, program: Program) -> dict[str, int]:
        """Load an assembled program; returns its labels at their load addresses."""
        ...

    def load_elf(self, path: str | Path) -> dict[str, int]:
        """Load a shared object built without libc; returns its symbols."""
        ...

    def address(self, function: str | int) -> int:
        """The load address of a symbol (an int is returned as it is)."""
        ...

    def call(self, function: str | int, *args: object, returns: str = "i64",
             **options: Any) -> int | float | None:
        """Call ``function`` with System V arguments (numpy arrays by pointer, copied back when
        writeable; ints; floats as double, ``np.float32`` as float); ``returns``: i64, u64, i32,
        u32, f32, f64 or none. ``options``: the engine's call options (:func:`call_options`)."""
        ...

    def close(self) -> None:
        """Release what the engine holds (worker processes, mappings); idempotent."""
        ...


def engine_class(engine: str) -> type:
    """The class implementing ``engine``; unknown names are a :class:`SimulationError`."""
    try:
        module, _, name = ENGINES[engine].partition(":")
    except (KeyError, TypeError):
        raise SimulationError("argument", f"unknown engine {engine!r} (expected "
                              f"{', '.join(ENGINES)})") from None
    return getattr(importlib.import_module(module), name)


def _keyword_options(function: Callable) -> tuple[str, ...]:
    params = inspect.signature(function).parameters.values()
    return tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)


@cache
def engine_options(engine: str) -> tuple[str, ...]:
    """The options :func:`create_machine` takes for ``engine`` (keyword-only ``__init__``
    parameters of its class)."""
    return _keyword_options(engine_class(engine).__init__)


@cache
def call_options(engine: str) -> tuple[str, ...]:
    """The options ``call`` takes on ``engine`` beyond ``returns``."""
    return tuple(o for o in _keyword_options(engine_class(engine).call) if o != "returns")


def refuse_options(engine: str, given: Mapping[str, object], accepted: tuple[str, ...],
                   what: str) -> None:
    """A :class:`SimulationError` naming the engine and the first option it does not take."""
    for name in given:
        if name not in accepted:
            raise SimulationError("argument", f"the {engine} engine has no {what} option {name!r} "
                                  f"(it takes: {', '.join(accepted) or 'none'})")


def create_machine(engine: str = "python", **options: Any) -> Machine:
    """A new machine of ``engine`` (``python``, ``native`` or ``proxy``) with ``options``
    (:func:`engine_options`); an option the engine does not take is a :class:`SimulationError`."""
    cls = engine_class(engine)
    refuse_options(engine, options, engine_options(engine), "creation")
    return cls(**options)


__all__ = ["ENGINES", "EngineStats", "Machine", "call_options", "create_machine", "engine_class",
           "engine_options", "refuse_options"]
