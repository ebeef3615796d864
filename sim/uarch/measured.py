"""Tables measured on the host (``tsar uarch measure``): their rows, the CSV and side file they are
written to, and their place in the cache, keyed by the CPU's identity.

A measured table has the columns of the shipped tables (``data/README.md``) plus ``source``
(``measured:<CPU model name>``) and ``notes``; its side file (``X.csv`` -> ``X.json``) names the
CPU, the shipped ``base`` table that supplies what was not measured (uop counts, core widths,
every other form; :func:`tsar.sim.uarch.table.load_table`) and how the table was measured.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsar.common.files import read_text
from tsar.common.toolchain import cache_root, write_atomic
from tsar.sim.uarch import build
from tsar.sim.uarch.ports import format_usage
from tsar.sim.uarch.table import InstrTiming

COLUMNS = (*build.COLUMNS, "source", "notes")
CACHE_SUBDIR = "uarch"


@dataclass(frozen=True)
class TableRow:
    """One row of a measured table (cycles; ``ports`` as port group -> uops or port-cycles)."""

    mnemonic: str
    operands: tuple[str, ...]
    latency: float | None
    latency_max: float | None
    recip_throughput: float | None
    uops: float
    ports: Mapping[str, float]
    ports_source: str
    family: str
    source: str
    notes: tuple[str, ...] = ()
    latency_how: str = "chain"
    """How ``latency`` was obtained (:attr:`tsar.sim.uarch.measure.VariantResult.latency_how`;
    not written to the file: its notes say it)."""

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        return self.mnemonic, self.operands

    def timing(self) -> InstrTiming:
        """The row as the lookup returns it."""
        return InstrTiming(latency=self.latency, recip_throughput=self.recip_throughput, uops=self.uops,
                           ports=dict(self.ports), latency_max=self.latency_max, mnemonic=self.mnemonic,
                           operands=self.operands, ports_source=self.ports_source, notes=self.notes,
                           data_source=self.source)

    def cells(self) -> list[str]:
        return [self.mnemonic, " ".join(self.operands), _fmt(self.latency), _fmt(self.latency_max),
                _fmt(self.recip_throughput), _fmt(self.uops), format_usage(self.ports), self.ports_source,
                self.family, self.source, "; ".join(n.replace(";", ",") for n in self.notes)]


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{round(x, 3):g}"


def cache_path(key: str) -> Path:
    """Where the table measured on the CPU ``key`` (:attr:`CpuIdentity.key`) is kept (nothing is
    created: looking for a table leaves no trace)."""
    return cache_root() / CACHE_SUBDIR / f"measured-{key}.csv"


def cached_table(key: str) -> Path | None:
    """The cached table of CPU ``key``, or None."""
    path = cache_path(key)
    return path if path.is_file() else None


def _read_cells(path: Path) -> dict[tuple[str, tuple[str, ...]], list[str]]:
    reader = csv.reader(io.StringIO(read_text(path, "a measured instruction table (.csv)")))
    header = next(reader, [])
    if tuple(header) != COLUMNS:
        return {}
    return {(r[0], tuple(r[1].split())): r for r in reader if len(r) == len(COLUMNS)}


def write_table(rows: Iterable[TableRow], path: Path, meta: Mapping[str, Any], *, merge: bool = False) -> int:
    """Write ``rows`` (sorted) to ``path`` and ``meta`` to its side file, atomically; with
    ``merge``, rows already in the file that ``rows`` does not replace are kept. Returns the rows
    written."""
    cells = _read_cells(path) if merge and path.is_file() else {}
    cells.update({row.key: row.cells() for row in rows})
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for key in sorted(cells):
        writer.writerow(cells[key])
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, out.getvalue())
    write_atomic(path.with_suffix(".json"), json.dumps({**meta, "rows": len(cells)}, indent=2) + "\n")
    return len(cells)
