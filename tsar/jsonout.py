"""Machine-readable results: ``--json`` (and ``--csv`` for tables) on the commands that measure,
compare or tabulate.

Every document is one JSON object ``{"tsar": VERSION, "schema": SCHEMA, "kind": KIND, ...}``
(the kinds and their fields are in docs/json.md). Dataclasses become objects of their
``repr`` fields, numpy values plain numbers or lists; a non-finite number is refused (a result that
is not a number is a bug, not a value).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tsar import __version__
from tsar.errors import UserError

SCHEMA = 1


def jsonable(obj: Any) -> Any:
    """``obj`` as JSON-compatible values (dataclasses by their ``repr`` fields)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.repr}
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        raise UserError(f"internal: a result is {obj} (refusing to print a non-number)")
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, enum.Enum):
        return obj.name
    return obj


def document(kind: str, **fields: Any) -> dict[str, Any]:
    return {"tsar": __version__, "schema": SCHEMA, "kind": kind, **jsonable(fields)}


def emit(kind: str, **fields: Any) -> None:
    """Print one JSON document to stdout."""
    print(json.dumps(document(kind, **fields), indent=2))


def emit_csv(records: list[dict[str, Any]]) -> None:
    """Print a table (one dict per row, the first row's keys as the header) as CSV to stdout;
    nested values are written as JSON."""
    import csv
    import sys

    rows = [jsonable(r) for r in records]
    if not rows:
        return
    writer = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]), extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, dict | list) else v for k, v in row.items()})


def stats_fields(stats: Any) -> dict[str, Any]:
    """The statistics of a call, either engine's (no per-address counts: they name host
    addresses)."""
    if hasattr(stats, "tsar_per_site"):  # the native engine's
        return {"engine": "native", "wall_seconds": stats.wall_seconds,
                "call_seconds": stats.call_seconds, "tsar_instructions": stats.tsar_instructions}
    return {"engine": "python", **{f.name: jsonable(getattr(stats, f.name))
                                   for f in dataclasses.fields(stats) if f.name != "per_address"}}
