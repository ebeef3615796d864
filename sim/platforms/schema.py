"""Platform description dataclasses and the validating TOML reader.

Units: sizes in bytes, cache bandwidths in bytes/cycle (core clock) per core, DRAM bandwidth in
GB/s (1 GB/s = 1e9 B/s), frequencies in GHz, latencies in cycles (caches) or ns (DRAM).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tsar.common.errors import UserError
from tsar.common.files import UnreadableFile, read_text

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


class PlatformError(UserError, ValueError):
    """A platform file is malformed; the message names the file and the offending key."""


@dataclass(frozen=True)
class Core:
    model: str
    cores: int
    threads_per_core: int
    frequency_ghz: float
    uarch: str                   # name of the tsar.sim.uarch data set used for this core
    uarch_proxy: bool            # True when the data set is a stand-in for another core
    uarch_note: str
    vector_bits: int             # native SIMD datapath width
    vector_alu_ports: int
    issue_width: float | None    # overrides the data set's rename width when the core differs
    isa: tuple[str, ...] = ()    # vector extensions executed (/proc/cpuinfo flags); () = undeclared
    avx512_clock_ratio: float = 1.0  # clock while heavy 512-bit code runs / the clock (Intel's
                                     # AVX-512 frequency license; 1.0: no offset, as on Zen 4/5)

    @property
    def frequency_hz(self) -> float:
        return self.frequency_ghz * 1e9


@dataclass(frozen=True)
class CacheLevel:
    name: str                    # "L1D", "L2", "L3"
    size: int                    # bytes per instance
    shared_by: int               # cores sharing one instance
    bandwidth: float             # bytes/cycle one core can move between this level and the next
                                 # inner one (L1D: to/from registers)
    shared_bandwidth: float | None  # bytes/cycle cap of one instance, all its cores together
    usable_fraction: float       # share of the capacity a working set may fill and still hit
    latency: float | None = None  # cycles, load-to-use (informational)
    line: int = 64


@dataclass(frozen=True)
class Dram:
    type: str
    channels: int | None
    channel_bits: int | None
    transfer_rate_mts: float | None
    peak_gbs: float | None       # channels * channel_bits/8 * MT/s
    sustained_gbs: float         # all cores together
    per_core_gbs: float          # one core alone (memory-level parallelism limit)
    latency_ns: float | None = None


@dataclass(frozen=True)
class Platform:
    name: str
    description: str
    source: str
    core: Core
    l1i_size: int
    caches: tuple[CacheLevel, ...]  # inner to outer
    dram: Dram
    threads: int                 # thread count used for this platform (paper: 16 / 8 / 4)
    overlap: str = "ecm"         # default combination of transfer terms: "ecm" or "roofline"
    assumptions: tuple[str, ...] = ()
    path: str | None = None
    measured: dict[str, Any] = field(default_factory=dict)

    def cache(self, name: str) -> CacheLevel:
        for level in self.caches:
            if level.name.lower() == name.lower():
                return level
        raise KeyError(f"platform {self.name}: no cache level {name!r}")

    def uarch(self):  # -> tsar.sim.uarch.Uarch
        from tsar.sim.uarch import load

        return load(self.core.uarch)

    @property
    def levels(self) -> tuple[str, ...]:
        return (*(c.name for c in self.caches), "DRAM")


# --- TOML reading --------------------------------------------------------------------------------
_TOP = {"name": str, "description": str, "source": str, "threads": int, "overlap": str,
        "assumptions": list, "core": dict, "l1i": dict, "caches": dict, "dram": dict}
_TOP_REQUIRED = {"name", "core", "l1i", "caches", "dram"}
_CORE = {"model": str, "cores": int, "threads_per_core": int, "frequency_ghz": float, "uarch": str,
         "uarch_proxy": bool, "uarch_note": str, "vector_bits": int, "vector_alu_ports": int,
         "issue_width": float, "isa": list, "avx512_clock_ratio": float}
_CORE_REQUIRED = {"model", "cores", "frequency_ghz", "uarch", "vector_bits"}
_SIZE = {"size_bytes": int, "size_kib": float, "size_mib": float}
_CACHE = {**_SIZE, "shared_by": int, "bandwidth_bytes_per_cycle": float,
          "shared_bandwidth_bytes_per_cycle": float, "usable_fraction": float,
          "latency_cycles": float, "line_bytes": int}
_CACHE_REQUIRED = {"shared_by", "bandwidth_bytes_per_cycle"}
_DRAM = {"type": str, "channels": int, "channel_bits": int, "transfer_rate_mts": float,
         "sustained_fraction": float, "sustained_gbs": float, "per_core_gbs": float,
         "latency_ns": float}
_DRAM_REQUIRED = {"type", "per_core_gbs"}


def _check(where: str, table: Any, schema: dict[str, type], required: set[str]) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise PlatformError(f"{where}: expected a table, got {type(table).__name__}")
    for key, value in table.items():
        if key not in schema:
            raise PlatformError(f"{where}.{key}: unknown key (allowed: {', '.join(sorted(schema))})")
        want = schema[key]
        ok = isinstance(value, want) and not (want is int and isinstance(value, bool))
        if want is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok:
            raise PlatformError(f"{where}.{key}: expected {want.__name__}, got {value!r}")
        if want in (int, float) and value < 0:
            raise PlatformError(f"{where}.{key}: must be >= 0, got {value!r}")
    for key in sorted(required - table.keys()):
        raise PlatformError(f"{where}.{key}: required key missing")
    return table


def _size(where: str, table: dict[str, Any]) -> int:
    given = [k for k in _SIZE if k in table]
    if len(given) != 1:
        raise PlatformError(f"{where}: give exactly one of size_bytes, size_kib, size_mib")
    key = given[0]
    scale = {"size_bytes": 1, "size_kib": 1024, "size_mib": 1024 * 1024}[key]
    size = int(table[key] * scale)
    if size <= 0:
        raise PlatformError(f"{where}.{key}: must be > 0")
    return size


def _isa(where: str, flags: list) -> tuple[str, ...]:
    """A platform's declared extensions: known ``/proc/cpuinfo`` flags, each once."""
    from tsar.sim.x86.forms import VECTOR_ISA_FLAGS

    for flag in flags:
        if flag not in VECTOR_ISA_FLAGS:
            raise PlatformError(f"{where}: unknown extension {flag!r} (known: {', '.join(VECTOR_ISA_FLAGS)})")
    return tuple(dict.fromkeys(flags))


def platform_from_dict(raw: dict[str, Any], path: str = "<dict>") -> Platform:
    """Validate a parsed platform table; errors name ``path`` and the bad key."""
    _check(path, raw, _TOP, _TOP_REQUIRED)
    core_t = _check(f"{path}: core", raw["core"], _CORE, _CORE_REQUIRED)
    from tsar.sim.uarch import UARCH_NAMES

    if core_t["uarch"] not in UARCH_NAMES:
        raise PlatformError(f"{path}: core.uarch: unknown data set {core_t['uarch']!r} "
                            f"(known: {', '.join(UARCH_NAMES)})")
    if core_t["cores"] < 1 or core_t["frequency_ghz"] <= 0:
        raise PlatformError(f"{path}: core.cores / core.frequency_ghz must be positive")
    core = Core(
        model=core_t["model"], cores=core_t["cores"], threads_per_core=core_t.get("threads_per_core", 1),
        frequency_ghz=float(core_t["frequency_ghz"]), uarch=core_t["uarch"],
        uarch_proxy=core_t.get("uarch_proxy", False), uarch_note=core_t.get("uarch_note", ""),
        vector_bits=core_t["vector_bits"], vector_alu_ports=core_t.get("vector_alu_ports", 0),
        issue_width=float(core_t["issue_width"]) if "issue_width" in core_t else None,
        isa=_isa(f"{path}: core.isa", core_t.get("isa", [])),
        avx512_clock_ratio=float(core_t.get("avx512_clock_ratio", 1.0)))
    if not 0 < core.avx512_clock_ratio <= 1:
        raise PlatformError(f"{path}: core.avx512_clock_ratio: must be in (0, 1], "
                            f"got {core.avx512_clock_ratio}")
    l1i = _check(f"{path}: l1i", raw["l1i"], _SIZE, set())
    caches_t = raw["caches"]
    if not isinstance(caches_t, dict) or not caches_t:
        raise PlatformError(f"{path}: caches: expected tables [caches.L1D], [caches.L2], ...")
    caches = []
    for name, table in caches_t.items():
        where = f"{path}: caches.{name}"
        _check(where, table, _CACHE, _CACHE_REQUIRED)
        usable = float(table.get("usable_fraction", 0.75))
        if not 0 < usable <= 1:
            raise PlatformError(f"{where}.usable_fraction: must be in (0, 1], got {usable}")
        if table["bandwidth_bytes_per_cycle"] <= 0:
            raise PlatformError(f"{where}.bandwidth_bytes_per_cycle: must be > 0")
        caches.append(CacheLevel(
            name=name, size=_size(where, table), shared_by=table["shared_by"] or 1,
            bandwidth=float(table["bandwidth_bytes_per_cycle"]),
            shared_bandwidth=(float(table["shared_bandwidth_bytes_per_cycle"])
                              if "shared_bandwidth_bytes_per_cycle" in table else None),
            usable_fraction=usable, latency=table.get("latency_cycles"),
            line=table.get("line_bytes", 64)))
    if caches[0].name.upper() != "L1D":
        raise PlatformError(f"{path}: caches: the first level must be L1D, got {caches[0].name}")
    d = _check(f"{path}: dram", raw["dram"], _DRAM, _DRAM_REQUIRED)
    peak = None
    if all(k in d for k in ("channels", "channel_bits", "transfer_rate_mts")):
        peak = d["channels"] * d["channel_bits"] / 8 * d["transfer_rate_mts"] / 1000
    if "sustained_gbs" in d:
        sustained = float(d["sustained_gbs"])
    elif peak is not None and "sustained_fraction" in d:
        sustained = peak * d["sustained_fraction"]
    else:
        raise PlatformError(f"{path}: dram.sustained_gbs: required (or channels, channel_bits, "
                            "transfer_rate_mts and sustained_fraction)")
    if sustained <= 0 or d["per_core_gbs"] <= 0:
        raise PlatformError(f"{path}: dram: bandwidths must be > 0")
    dram = Dram(type=d["type"], channels=d.get("channels"), channel_bits=d.get("channel_bits"),
                transfer_rate_mts=d.get("transfer_rate_mts"), peak_gbs=peak, sustained_gbs=sustained,
                per_core_gbs=float(d["per_core_gbs"]), latency_ns=d.get("latency_ns"))
    overlap = raw.get("overlap", "ecm")
    if overlap not in ("ecm", "roofline"):
        raise PlatformError(f"{path}: overlap: must be 'ecm' or 'roofline', got {overlap!r}")
    threads = raw.get("threads", core.cores)
    if not 1 <= threads <= core.cores * core.threads_per_core:
        raise PlatformError(f"{path}: threads: {threads} outside 1..{core.cores * core.threads_per_core}")
    return Platform(
        name=raw["name"], description=raw.get("description", ""), source=raw.get("source", ""),
        core=core, l1i_size=_size(f"{path}: l1i", l1i), caches=tuple(caches), dram=dram,
        threads=threads, overlap=overlap, assumptions=tuple(raw.get("assumptions", ())), path=path)


def read_platform(path: Path) -> Platform:
    try:
        raw = tomllib.loads(read_text(path, "a platform .toml file"))
    except tomllib.TOMLDecodeError as exc:
        raise PlatformError(f"{path}: not valid TOML: {exc}") from None
    except UnreadableFile as exc:
        raise PlatformError(str(exc)) from None
    return platform_from_dict(raw, str(path))
