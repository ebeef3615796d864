"""ISA variants declared as data: a TOML file with one ``[[config]]`` table per configuration.

Keys are the fields of :class:`~tsar.isa.config.TsarConfig` (``name``, ``c``, ``s``,
``vector_bits``, ``slot`` and the variant axes ``lut_layout``, ``lut_bits``, ``acc_bits``,
``weight_code``); every key but ``name``, ``c`` and ``s`` may be left out and takes the paper's
choice, except ``slot``, which defaults to the lowest encoding slot no registered configuration
uses. Example::

    [[config]]
    name = "c2s4-i32"
    c = 2
    s = 4
    acc_bits = 32        # int32 accumulator lanes: m = 8, never widened

Loading registers the configurations (:func:`~tsar.isa.config.ensure_registered`: a file loaded
twice, e.g. by a worker process, registers nothing new). A problem is reported as one
:class:`IsaFileError` naming the file and line (and the key where one is at fault).
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from tsar.common.errors import UserError
from tsar.common.files import UnreadableFile, read_text
from tsar.isa.config import (
    ENCODING_SLOTS,
    TsarConfig,
    configs,
    ensure_registered,
    free_slots,
    get_config,
    registered,
)

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

FIELDS = {f.name: f.type for f in fields(TsarConfig)}
"""Keys a ``[[config]]`` table may hold (the configuration's fields)."""
REQUIRED = ("name", "c", "s")
_TABLE_RE = re.compile(r"^[ \t]*\[\[[ \t]*config[ \t]*\]\]", re.M)
_INT_FIELDS = tuple(name for name, kind in FIELDS.items() if kind in (int, "int"))
_STR_FIELDS = tuple(name for name, kind in FIELDS.items() if kind in (str, "str"))


class IsaFileError(UserError):
    """A bad ``--isa`` file: ``path:line: what``."""


def _table_lines(text: str) -> list[int]:
    """1-based line of each ``[[config]]`` header, in order."""
    return [text.count("\n", 0, m.start()) + 1 for m in _TABLE_RE.finditer(text)]


def _key_line(text: str, start: int, key: str) -> int:
    """Line of ``key = ...`` in the table starting at line ``start`` (the header's line if absent)."""
    lines = text.splitlines()
    for n in range(start, len(lines)):
        if n > start - 1 and _TABLE_RE.match(lines[n]):
            break
        if re.match(rf"^\s*{re.escape(key)}\s*=", lines[n]):
            return n + 1
    return start


def parse_isa_text(text: str, source: str = "<isa>") -> list[TsarConfig]:
    """The configurations a TOML text declares (not registered); slots left out are assigned from
    the lowest free one (registered configurations and earlier tables excluded)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None) or _line_of(str(exc))
        raise IsaFileError(f"{source}:{line}: {_message(exc)}") from None
    unknown = sorted(set(raw) - {"config"})
    if unknown:
        raise IsaFileError(f"{source}: unknown top-level key {unknown[0]!r} (expected [[config]] tables)")
    tables = raw.get("config")
    if not isinstance(tables, list) or not tables:
        raise IsaFileError(f"{source}: no [[config]] table")
    starts = _table_lines(text) or [1] * len(tables)
    taken = {cfg.slot for cfg in configs()}
    out: list[TsarConfig] = []
    for i, table in enumerate(tables):
        start = starts[i] if i < len(starts) else 1
        where = f"{source}:{start}"
        for key in sorted(set(table) - set(FIELDS)):
            raise IsaFileError(f"{source}:{_key_line(text, start, key)}: unknown key {key!r} "
                               f"(known: {', '.join(FIELDS)})")
        for key in REQUIRED:
            if key not in table:
                raise IsaFileError(f"{where}: [[config]] #{i + 1} lacks {key!r}")
        for key, value in table.items():
            want = int if key in _INT_FIELDS else str
            if not isinstance(value, want) or isinstance(value, bool):
                raise IsaFileError(f"{source}:{_key_line(text, start, key)}: {key} = {value!r}: expected "
                                   f"{'an integer' if want is int else 'a string'}")
        values = dict(table)
        known = registered(str(values["name"]))
        if "slot" not in values and known is not None:  # the same declaration loaded again
            values["slot"] = known.slot
        if "slot" not in values:
            free = free_slots(taken | {cfg.slot for cfg in out})
            if not free:
                raise IsaFileError(f"{where}: {table['name']}: no free encoding slot "
                                   f"(0..{ENCODING_SLOTS - 1})")
            values["slot"] = free[0]
        try:
            cfg = TsarConfig(**values)
        except ValueError as exc:
            key = next((k for k in table if f" {k}=" in str(exc) or f"{k}={table[k]}" in str(exc)), None)
            line = _key_line(text, start, key) if key else start
            raise IsaFileError(f"{source}:{line}: {exc}") from None
        if any(other.name == cfg.name for other in out):
            raise IsaFileError(f"{where}: configuration {cfg.name!r} declared twice")
        out.append(cfg)
    return out


def load_isa_file(path: str | Path) -> list[TsarConfig]:
    """Read, check and register the configurations of a TOML file (see the module docstring)."""
    path = Path(path)
    try:
        text = read_text(path, "an ISA variant file (TOML, [[config]] tables)")
    except UnreadableFile as exc:
        raise IsaFileError(str(exc)) from None
    cfgs = parse_isa_text(text, str(path))
    starts = _table_lines(text)
    for i, cfg in enumerate(cfgs):
        try:
            ensure_registered(cfg)
        except ValueError as exc:
            line = starts[i] if i < len(starts) else 1
            raise IsaFileError(f"{path}:{line}: {exc}") from None
    return [get_config(cfg.name) for cfg in cfgs]


def register_definitions(definitions: list[dict[str, object]]) -> list[TsarConfig]:
    """Register configurations given as :meth:`TsarConfig.definition` dictionaries (for worker
    processes that receive a sweep's variants); identical ones already registered are kept."""
    return [ensure_registered(TsarConfig(**d)) for d in definitions]


def _line_of(message: str) -> int | str:
    m = re.search(r"line (\d+)", message)
    return int(m.group(1)) if m else "?"


def _message(exc: Exception) -> str:
    return getattr(exc, "msg", None) or re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
