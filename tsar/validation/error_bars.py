"""The timing model's validated error per kernel family: the error bar of every modelled time.

``tsar validate-model`` compares modelled with measured times on this host (:mod:`tsar.validation.validate`)
and keeps the mean absolute error per kernel family as data: in the cache
(``<cache>/validation/model-error.json``, written by every full validation run) and, shipped with
the package, ``tsar/sim/uarch/data/model-error.json`` (generated the same way by
``tsar validate-model --write-errors PATH`` and stamped with machine, date and commit).
:func:`load` prefers the cache (the last validation on this machine) over the shipped table.

Keys: the family (``tl2``, ``tl1``, ``i2s``, ``int2``, ``tsar-<config>``, see :func:`family_of`)
for all its cases, ``<family>/cache``, ``<family>/DRAM`` (GEMV, weights cache- or DRAM-resident)
and ``<family>/gemm`` (N > 1, token-blocked). Values are fractions (0.12 = 12 %).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tsar.validation.validate import family_of

if TYPE_CHECKING:
    from tsar.validation.validate import Validation

FORMAT = 1


def shipped_path() -> Path:
    """The shipped table (inside the installed ``tsar.sim.uarch`` package)."""
    import tsar.sim.uarch

    return Path(tsar.sim.uarch.__file__).resolve().parent / "data" / "model-error.json"


def cache_path() -> Path:
    from tsar.common.toolchain import cache_dir

    return cache_dir("validation") / "model-error.json"


@dataclass(frozen=True)
class ErrorTable:
    """Validated error (fraction) by key (see the module doc) and where it comes from."""

    errors: dict[str, float]
    bias: dict[str, float]
    stamp: dict[str, str] = field(default_factory=dict)  # machine, uarch, date, commit, mape
    source: str = ""

    def error(self, kernel: str, N: int = 1, variant: str = "cache") -> float | None:
        """The error bar of a modelled time of ``kernel`` (N tokens; GEMV weights in ``variant``),
        or None when its family was not validated."""
        fam = family_of(kernel)
        for key in ((f"{fam}/gemm",) if N > 1 else (f"{fam}/{variant}",)) + (fam,):
            if key in self.errors:
                return self.errors[key]
        return None

    @property
    def measured_cpu(self) -> str:
        """The CPU model the table was measured on (the stamp's machine without its uarch and core
        count: ``"AMD EPYC (zen4), 2 core(s) visible"`` -> ``"AMD EPYC"``)."""
        machine = self.stamp.get("machine", "")
        found = re.fullmatch(r"(.*) \([^()]*\), \d+ core\(s\) visible", machine)
        return (found.group(1) if found else machine).strip()

    def other_cpu(self, host_cpu: str | None = None) -> bool:
        """Whether the table was measured on another CPU model than ``host_cpu`` (default this
        host's, /proc/cpuinfo's model name); a table without a machine counts as another CPU."""
        return self.measured_cpu != (host_cpu if host_cpu is not None else host_cpu_model()).strip()

    def describe(self, host_cpu: str | None = None) -> str:
        s = self.stamp
        host = host_cpu if host_cpu is not None else host_cpu_model()
        where = (f"; measured on another CPU than this host's {host}: the errors on this one may differ"
                 if self.other_cpu(host) else "")
        return (f"model error bars: mean |error| per kernel family of `tsar validate-model` on "
                f"{s.get('machine', '?')} ({s.get('date', '?')}, commit {s.get('commit', '?')}; "
                f"{self.source}){where}")


def host_cpu_model() -> str:
    """This host's CPU model (/proc/cpuinfo's model name, as the host platform reads it)."""
    from tsar.sim.platforms import host

    return host(measure=False).core.model


def table_of(v: Validation) -> dict[str, dict[str, float]]:
    """Errors and biases by key (module doc) from a validation's cases."""
    groups: dict[str, list[float]] = {}
    for c in v.cases:
        fam = family_of(c.kernel)
        sub = "gemm" if c.N > 1 else c.variant
        for key in (fam, f"{fam}/{sub}"):
            groups.setdefault(key, []).append(c.error)
    return {"errors": {k: sum(abs(e) for e in es) / len(es) for k, es in groups.items()},
            "bias": {k: sum(es) / len(es) for k, es in groups.items()}}


def save(v: Validation, path: Path, stamp: dict[str, str]) -> Path:
    """Write a validation's per-family error table (JSON) to ``path``."""
    doc = {"format": FORMAT, "stamp": stamp, **table_of(v),
           "cases": _counts(v)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path


def _counts(v: Validation) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in v.cases:
        out[family_of(c.kernel)] = out.get(family_of(c.kernel), 0) + 1
    return out


def read(path: Path) -> ErrorTable:
    """Parse one table; ``ValueError`` naming the file when it is not one."""
    try:
        doc = json.loads(path.read_text())
        if doc.get("format") != FORMAT:
            raise ValueError(f"format {doc.get('format')!r}, expected {FORMAT}")
        return ErrorTable({k: float(x) for k, x in doc["errors"].items()},
                          {k: float(x) for k, x in doc["bias"].items()},
                          {k: str(x) for k, x in doc.get("stamp", {}).items()}, str(path))
    except (OSError, KeyError, TypeError, AttributeError, json.JSONDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: not a model error table ({exc})") from None


def load() -> ErrorTable | None:
    """The last validation's table on this machine (cache), else the shipped one; None if neither
    is readable."""
    for path in (cache_path(), shipped_path()):
        if path.is_file():
            try:
                return read(path)
            except ValueError:
                continue
    return None


__all__ = ["ErrorTable", "cache_path", "family_of", "host_cpu_model", "load", "read", "save", "shipped_path",
           "table_of"]
