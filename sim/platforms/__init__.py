"""Platforms: the paper's Table I machines as editable TOML files, plus the measured host.

``tsar.sim.platforms.load("workstation")`` (or a path to a ``.toml`` file) returns a
:class:`Platform`; ``tsar.sim.platforms.host()`` detects and measures this machine (cached for the
session). ``names()`` lists the shipped platforms.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from tsar.sim.platforms.schema import (
    CacheLevel,
    Core,
    Dram,
    Platform,
    PlatformError,
    platform_from_dict,
    read_platform,
)


def _shipped() -> tuple[str, ...]:
    """Names of the platform files shipped in this package, largest thread count first (the
    paper's Table I order: workstation, laptop, mobile)."""
    found = []
    for entry in resources.files(__package__).iterdir():
        if entry.name.endswith(".toml"):
            raw = tomllib.loads(entry.read_text())
            found.append((-int(raw.get("threads", 0)), entry.name[:-5]))
    return tuple(name for _, name in sorted(found))


SHIPPED = _shipped()
"""The shipped platforms (one TOML file each), derived from the files."""


PLATFORM_NAMES = ("host", *SHIPPED)
"""Every platform name :func:`load` takes: ``host`` (this machine), then the shipped ones."""


def names() -> tuple[str, ...]:
    """:data:`PLATFORM_NAMES`."""
    return PLATFORM_NAMES


def load(name_or_path: str | Path) -> Platform:
    """A shipped platform by name (``workstation``, ``laptop``, ``mobile``, ``host``) or a TOML
    file by path. Raises :class:`PlatformError` naming the file and key for malformed files."""
    text = str(name_or_path)
    if text == "host":
        from tsar.sim.platforms.detect import host

        return host()
    if text in SHIPPED:
        with resources.as_file(resources.files(__package__).joinpath(f"{text}.toml")) as p:
            return read_platform(Path(p))
    path = Path(text)
    if path.suffix == ".toml" or path.exists():
        return read_platform(path)
    raise PlatformError(f"unknown platform {text!r} (shipped: {', '.join(names())}; or a .toml path)")


def host(measure: bool = True, refresh: bool = False) -> Platform:
    """This machine, detected and (unless ``measure=False``) measured; see :mod:`.detect`."""
    from tsar.sim.platforms.detect import host as _host

    return _host(measure=measure, refresh=refresh)


__all__ = ["PLATFORM_NAMES", "SHIPPED", "CacheLevel", "Core", "Dram", "Platform", "PlatformError", "host",
           "load", "names", "platform_from_dict", "read_platform"]
