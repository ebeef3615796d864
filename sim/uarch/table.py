"""Per-instruction timing tables and their lookup (``tsar.sim.uarch.load(name).lookup(...)``)."""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

from tsar.common.errors import UserError
from tsar.common.files import read_text
from tsar.sim.uarch.cores import CoreDescription, core_description
from tsar.sim.uarch.ports import add_usage, parse_usage

UARCH_NAMES = ("zen5", "zen4", "zen3", "zen2", "alderlakep", "gracemont", "icelake", "tigerlake",
               "rocketlake", "skylake", "skylakex", "cascadelake", "haswell")


class UarchDataMissing(KeyError):
    """No row (exact or fallback) exists for an instruction form on a microarchitecture."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class InstrTiming:
    """Timing of one instruction form on one microarchitecture.

    ``latency``: cycles from register sources to the result (lower value of a uops.info range);
    ``latency_max``: cycles through the memory operand (load-to-use included), or = latency.
    ``recip_throughput``: cycles per instruction when independent copies run back to back.
    ``uops``: fused-domain uops (front-end / rename slots). ``ports``: uops (or port-cycles) per
    port group, e.g. ``{"p015": 1.0, "p23A": 1.0}``. ``source``: "exact" or how a fallback was
    made; ``exact`` is False for fallbacks; ``ports_source`` says whether the port usage is
    measured, measured plus synthesized load/store uops, derived from class rules, or absent.
    ``data_source``: where the row's latency/throughput were measured (``instlatx64``,
    ``uops.info:zen4``, ...; empty for the uops.info-only tables, see ``data/README.md``).
    """

    latency: float | None
    recip_throughput: float | None
    uops: float
    ports: dict[str, float]
    latency_max: float | None = None
    mnemonic: str = ""
    operands: tuple[str, ...] = ()
    source: str = "exact"
    ports_source: str = "measured"
    notes: tuple[str, ...] = field(default=())
    data_source: str = ""

    @property
    def exact(self) -> bool:
        return self.source == "exact"


# Operand-kind substitutions tried, in order of preference, when no exact row exists.
_ALTERNATIVES: dict[str, tuple[str, ...]] = {
    "ymm": ("xmm", "zmm"), "xmm": ("ymm",), "zmm": ("ymm",),
    "m256": ("m128", "m512"), "m128": ("m256", "m64"), "m512": ("m256",),
    "imm8": ("imm32", "imm16", "1"), "imm16": ("imm8", "imm32"), "imm32": ("imm8",),
    "imm64": ("imm32",), "1": ("imm8",),
    "r64": ("r32",), "r32": ("r64",), "r16": ("r32",), "r8": ("r32",), "r8h": ("r8",),
    "m64": ("m32",), "m32": ("m64",), "m16": ("m32",), "m8": ("m32",),
    "rel8": ("rel32",), "rel32": ("rel8",),
    "al": ("r8",), "ax": ("r16",), "eax": ("r32",), "rax": ("r64",), "cl": ("imm8",),
}
_VEC_BITS = {"xmm": 128, "ymm": 256, "zmm": 512, "m128": 128, "m256": 256, "m512": 512}

# iced-x86 / Intel condition-code spellings -> the uops.info spellings used by the tables.
_CC_ALIASES = {"e": "z", "ne": "nz", "ae": "nb", "nae": "b", "c": "b", "nc": "nb", "a": "nbe",
               "na": "be", "ge": "nl", "nge": "l", "g": "nle", "ng": "le", "pe": "p", "po": "np"}


def canonical_mnemonic(mnemonic: str) -> str:
    """Lower-case and map condition-code aliases (``jne`` -> ``jnz``, ``cmovae`` -> ``cmovnb``)."""
    m = mnemonic.lower()
    for prefix in ("cmov", "set", "j"):
        if m.startswith(prefix) and m[len(prefix):] in _CC_ALIASES:
            return prefix + _CC_ALIASES[m[len(prefix):]]
    return m


def is_memory_kind(kind: str) -> bool:
    return (kind.startswith("m") and kind != "mm") or kind.startswith("vsib")


class Uarch:
    """One microarchitecture's instruction table plus its :class:`CoreDescription`."""

    def __init__(self, name: str, rows: dict[tuple[str, tuple[str, ...]], InstrTiming],
                 core: CoreDescription | None = None) -> None:
        self.name = name
        self.core: CoreDescription = core or core_description(name)
        self._rows = rows
        self._by_mnemonic: dict[str, list[tuple[str, ...]]] = {}
        for mn, ops in rows:
            self._by_mnemonic.setdefault(mn, []).append(ops)

    def __repr__(self) -> str:
        return f"Uarch({self.name!r}, {len(self._rows)} forms)"

    def __len__(self) -> int:
        return len(self._rows)

    def forms(self, mnemonic: str) -> list[tuple[str, ...]]:
        """Operand-kind tuples the table has for a mnemonic."""
        return list(self._by_mnemonic.get(canonical_mnemonic(mnemonic), []))

    def row(self, mnemonic: str, operands: tuple[str, ...]) -> InstrTiming | None:
        """The exact table row, or None."""
        return self._rows.get((canonical_mnemonic(mnemonic), tuple(k.lower() for k in operands)))

    def lookup(self, mnemonic: str, operands: tuple[str, ...] | list[str]) -> InstrTiming:
        """Timing of ``mnemonic`` with operand kinds ``operands`` (e.g. ``("ymm", "ymm", "m256")``).

        Fallbacks, in order (the result's ``source`` names the one used):
        1. exact row;
        2. the same mnemonic with substituted operand kinds (other immediate, GPR or vector
           width), fewest substitutions first; a narrower vector form used for a wider one is
           scaled by the number of datapath passes when the wider op exceeds the native width;
        3. a memory form built from the register form plus load/store uops on the machine's
           load/store ports, latency_max = latency + L1 load-to-use latency.
        Raises :class:`UarchDataMissing` when none applies.
        """
        mn = canonical_mnemonic(mnemonic)
        ops = tuple(k.lower() for k in operands)
        hit = self._rows.get((mn, ops))
        if hit is not None:
            return hit
        if mn in self._by_mnemonic:
            found = self._substituted(mn, ops)
            if found is not None:
                return found
            found = self._memory_from_register(mn, ops)
            if found is not None:
                return found
        known = ", ".join(" ".join(f) or "-" for f in self.forms(mn)[:8])
        raise UarchDataMissing(
            f"{self.name}: no timing data for {mn} ({', '.join(ops)})"
            + (f"; table forms: {known}" if known else "; mnemonic not in table"))

    def _substituted(self, mn: str, ops: tuple[str, ...]) -> InstrTiming | None:
        options = [(k, *_ALTERNATIVES.get(k, ())) for k in ops]
        candidates = []
        for combo in itertools.product(*[list(enumerate(o)) for o in options]):
            changes = sum(1 for i, _ in combo if i)
            if changes:
                candidates.append((changes, sum(i for i, _ in combo), tuple(k for _, k in combo)))
        for _, _, kinds in sorted(candidates):
            row = self._rows.get((mn, kinds))
            if row is not None:
                return self._scaled(row, ops, kinds)
        return None

    def _scaled(self, row: InstrTiming, want: tuple[str, ...], have: tuple[str, ...]) -> InstrTiming:
        want_bits = max((_VEC_BITS.get(k, 0) for k in want), default=0)
        have_bits = max((_VEC_BITS.get(k, 0) for k in have), default=0)
        factor = 1.0
        notes = [f"no {' '.join(want)} row; used {' '.join(have)}"]
        native = self.core.vector_datapath_bits
        if have_bits and want_bits > have_bits and want_bits > native:
            factor = math.ceil(want_bits / max(have_bits, native))
            notes.append(f"scaled x{factor}: {want_bits}-bit op on a {native}-bit datapath")
        return InstrTiming(
            latency=row.latency, latency_max=row.latency_max,
            recip_throughput=None if row.recip_throughput is None else row.recip_throughput * factor,
            uops=row.uops * factor, ports={g: n * factor for g, n in row.ports.items()},
            mnemonic=row.mnemonic, operands=want, source=f"fallback: {' '.join(have)}",
            ports_source=row.ports_source, notes=tuple(notes), data_source=row.data_source)

    def _memory_from_register(self, mn: str, ops: tuple[str, ...]) -> InstrTiming | None:
        mem = [i for i, k in enumerate(ops) if is_memory_kind(k)]
        if len(mem) != 1:
            return None
        i = mem[0]
        widest = max((_VEC_BITS.get(k, 0) for k in ops if not is_memory_kind(k)), default=0)
        bits = int("".join(ch for ch in ops[i].split("_")[0] if ch.isdigit()) or 64)
        if widest:  # vector instruction: the register twin has the instruction's vector width
            reg = {128: "xmm", 256: "ymm", 512: "zmm"}[max(widest, min(bits, 512))] if bits >= 128 \
                else {128: "xmm", 256: "ymm", 512: "zmm"}[widest]
        else:
            reg = f"r{bits}"
        reg_ops = (*ops[:i], reg, *ops[i + 1:])
        try:
            base = self.lookup(mn, reg_ops)
        except UarchDataMissing:
            return None
        m = self.core
        store = i == 0 and mn not in ("cmp", "test", "bt")
        n = math.ceil(bits / (m.store_bits if store else m.load_bits))
        extra = {m.store: float(n)} if store else {m.load: float(n)}
        lat = base.latency
        return InstrTiming(
            latency=lat, latency_max=None if lat is None else lat + m.load_latency,
            recip_throughput=base.recip_throughput, uops=base.uops,
            ports=add_usage(base.ports, extra), mnemonic=mn, operands=ops,
            source=f"synthesized: {' '.join(reg_ops)} + {'store' if store else 'load'}",
            ports_source=base.ports_source, data_source=base.data_source,
            notes=(*base.notes, f"memory operand modelled as {n} {'store' if store else 'load'} uop(s)"))


def _num(text: str) -> float | None:
    return float(text) if text else None


class UarchTableError(UserError, KeyError):
    """A table file that cannot be used (unreadable, malformed, unknown base table)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


REQUIRED_COLUMNS = ("mnemonic", "operands", "latency", "latency_max", "recip_throughput", "uops", "ports",
                    "ports_source")
"""Columns every table has (``data/README.md``); ``family``, ``source`` and ``notes`` are optional."""


def parse_table(text: str, where: str = "<table>") -> dict[tuple[str, tuple[str, ...]], InstrTiming]:
    """The rows of a table in the CSV format of ``data/README.md``, keyed by (mnemonic, operand
    kinds). ``notes`` (optional column): ``; ``-separated remarks, kept in :attr:`InstrTiming.notes`."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise UarchTableError(f"{where}: not an instruction table (missing column(s) {', '.join(missing)})")
    rows: dict[tuple[str, tuple[str, ...]], InstrTiming] = {}
    for line, rec in enumerate(reader, start=2):
        try:
            ops = tuple(rec["operands"].split())
            rows[(rec["mnemonic"], ops)] = InstrTiming(
                latency=_num(rec["latency"]), latency_max=_num(rec["latency_max"]),
                recip_throughput=_num(rec["recip_throughput"]), uops=float(rec["uops"]),
                ports=parse_usage(rec["ports"]), mnemonic=rec["mnemonic"], operands=ops,
                ports_source=rec["ports_source"], data_source=rec.get("source") or "",
                notes=tuple(n for n in (rec.get("notes") or "").split("; ") if n))
        except (TypeError, ValueError) as exc:
            raise UarchTableError(f"{where}: line {line}: {exc}") from None
    return rows


def table_meta(path: Path) -> dict:
    """The side file of a table file (``X.csv`` -> ``X.json``; empty where there is none): what
    the table was measured on, and ``base``, the shipped table it completes."""
    side = path.with_suffix(".json")
    if not side.is_file():
        return {}
    try:
        meta = json.loads(read_text(side, "a table's side file (.json)"))
    except json.JSONDecodeError as exc:
        raise UarchTableError(f"{side}: not JSON ({exc.msg}, line {exc.lineno})") from None
    return meta if isinstance(meta, dict) else {}


def load_table(path: str | os.PathLike[str], base: str | None = None) -> Uarch:
    """A table from a file (e.g. one ``tsar uarch measure`` wrote). Its rows are laid over those of
    the shipped table ``base`` (default: the side file's ``base``), whose core description (widths,
    port groups) it takes."""
    path = Path(path)
    rows = parse_table(read_text(path, "an instruction table (.csv)"), str(path))
    meta = table_meta(path)
    base = base or meta.get("base")
    if base is None:
        raise UarchTableError(f"{path}: no base table (name one, or give the table a side file "
                              f"{path.with_suffix('.json').name} with a \"base\" entry)")
    if base not in UARCH_NAMES:
        raise UarchTableError(f"{path}: unknown base table {base!r} (known: {', '.join(UARCH_NAMES)})")
    return Uarch(str(path), {**load(base)._rows, **rows}, core_description(base))


@cache
def load(name: str) -> Uarch:
    """The shipped table of microarchitecture ``name`` (one of :data:`UARCH_NAMES`), or, for a
    path to a ``.csv`` file, :func:`load_table` of it."""
    if name not in UARCH_NAMES:
        if name.endswith(".csv") or os.sep in name:
            return load_table(name)
        raise KeyError(f"unknown microarchitecture {name!r} (known: {', '.join(UARCH_NAMES)})")
    text = resources.files(__package__).joinpath(f"data/{name}.csv").read_text()
    return Uarch(name, parse_table(text, f"data/{name}.csv"))
