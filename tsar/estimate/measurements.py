"""Host measurements kept on disk, for a command run again on the same machine and code.

``tsar report`` measures about forty kernels natively and through the proxy engine on six layers;
that is most of its time once the simulated counts are cached. Each layer's measurements are
stored under ``<cache>/measurements/`` (JSON, one file per layer and settings) with the time they
were taken, keyed by everything they depend on: the layer, threads, repeats, the kernels, the
machine (CPU model, flags, the CPUs this process may run on) and a digest of the package's code
(every ``.py``, ``.c``, ``.h``, ``.s`` and ``.toml`` file of it, so any change of a kernel, the
engine or the timers measures afresh). ``tsar report --remeasure`` ignores what is stored.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

FORMAT = 1
SOURCE_SUFFIXES = (".py", ".c", ".h", ".s", ".toml")


def source_roots() -> list[Path]:
    """The directories of ``tsar`` and its subpackages (one checkout maps them apart)."""
    import tsar.common
    import tsar.isa
    import tsar.kernels
    import tsar.rtl
    import tsar.sim

    return sorted({Path(m.__file__).resolve().parent
                   for m in (tsar.common, tsar.isa, tsar.kernels, tsar.rtl, tsar.sim)}
                  | {Path(__file__).resolve().parents[1]})


@cache
def source_digest() -> str:
    """A digest of the package's code: every source file under :func:`source_roots` (about 200
    files, a few milliseconds)."""
    h = hashlib.sha256()
    for root in source_roots():
        for path in sorted(root.rglob("*")):
            if path.suffix in SOURCE_SUFFIXES and "__pycache__" not in path.parts and path.is_file():
                h.update(str(path.relative_to(root)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()[:16]


def machine() -> dict[str, Any]:
    """What identifies this machine's measurements: the CPU (its CPUID key and model name) and
    flags, the CPUs this process may run on."""
    from tsar.sim.platforms.detect import cpu_flags, cpu_identity

    ident = cpu_identity()
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [os.cpu_count()]
    return {"cpu": ident.name, "cpuid": ident.key, "flags": sorted(cpu_flags()), "cpus": cpus}


def directory() -> Path:
    """Where the measurements are kept: ``<cache>/measurements``."""
    from tsar.common.toolchain import cache_dir

    return cache_dir("measurements")


def _path(key: dict[str, Any]) -> Path:
    full = {"format": FORMAT, "source": source_digest(), "machine": machine(), **key}
    digest = hashlib.sha256(json.dumps(full, sort_keys=True).encode()).hexdigest()[:24]
    return directory() / f"{digest}.json"


def stored(key: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """The measurements stored under ``key`` and when they were taken (ISO time), or None."""
    path = _path(key)
    try:
        doc = json.loads(path.read_text())
        return doc["value"], doc["taken"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def now() -> str:
    """This moment as the measurements are stamped: local ISO time, to the second."""
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def store(key: dict[str, Any], value: dict[str, Any]) -> str:
    """Keep ``value`` (JSON-able) under ``key``; returns the time it is stamped with."""
    from tsar.common.toolchain import write_atomic

    taken = now()
    write_atomic(_path(key), json.dumps({"taken": taken, "key": key, "value": value}))
    return taken
