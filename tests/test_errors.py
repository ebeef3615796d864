"""Every exception the project raises for bad input derives from UserError, so the CLI reports it
as one line without listing exception types by hand (tsar.errors.user_errors)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from tsar.common.errors import UserError
from tsar.errors import user_errors

INTERNAL = {
    "tsar.sim.host_oracle.HostOracleError": "the host oracle's own failure (a test-infrastructure error)",
    "tsar.sim.uarch.table.UarchDataMissing": "a KeyError the timing model catches to fall back",
    "tsar.sim.native_engine.worker.WorkerEnded": "the worker ended; the engine reports a SimulationError",
    "tsar.sim.errors.GuestFault": "raised inside an engine, which turns it into a SimulationError",
    "tsar.sim.x86.opdefs.Unsupported": "raised while compiling an instruction; the engine reports it",
}
"""Exception classes that are not about the user's input, and why."""


def project_exceptions() -> dict[str, type]:
    found = {}
    names = []
    for layer in ("tsar", "tsar.common", "tsar.isa", "tsar.sim", "tsar.rtl", "tsar.kernels"):
        package = importlib.import_module(layer)
        names += [info.name for info in pkgutil.walk_packages(package.__path__, f"{layer}.")]
    for name in sorted(set(names)):
        if name == "tsar.__main__":  # runs the CLI when imported
            continue
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == module.__name__:
                found[f"{module.__name__}.{attr}"] = obj
    return found


def test_every_project_exception_is_a_user_error() -> None:
    found = project_exceptions()
    assert "tsar.isa.assembler.AssemblyError" in found and "tsar.sim.platforms.schema.PlatformError" in found
    stray = [name for name, cls in found.items() if not issubclass(cls, UserError) and name not in INTERNAL]
    assert not stray, f"exceptions that are not UserErrors: {stray}"
    assert set(INTERNAL) <= set(found), "INTERNAL names a class that no longer exists"


def test_cli_lists_no_project_exception_by_hand() -> None:
    assert all(cls is UserError or not cls.__module__.startswith("tsar") for cls in user_errors())
