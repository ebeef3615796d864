"""Build the compact per-instruction tables in ``data/`` from the uops.info-derived CSVs.

Usage: ``python -m tsar.sim.uarch.build SOURCE_DIR [--out DIR]`` where SOURCE_DIR holds
``zen4.csv``, ``alderlakep.csv``, ... (columns instruction, family, latency, throughput, uops,
ports; uops.info measurements collected by the AssemblyStats project, Apache-2.0).

Only forms relevant to AVX2 integer/ternary kernels and their scalar loop code are kept (see
:func:`keep`). Rows without port data get *derived* port usage from the class port groups in
``data/cores.toml`` (see the README in ``data/``); rows whose memory operand has no load/store
port in the source (Zen 4) get the load/store uops added.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from tsar.sim.uarch.cores import CoreDescription, core_description
from tsar.sim.uarch.ports import add_usage, format_usage, parse_usage

UARCHES = ("zen4", "zen3", "zen2", "alderlakep", "icelake", "tigerlake", "rocketlake",
           "skylake", "skylakex", "cascadelake", "haswell")
# The uops.info Gracemont data (AssemblyStats ``alderlake.csv``, uops.info "ADL-E") is not written as
# a table of its own: :mod:`tsar.sim.uarch.instlat` merges it into ``gracemont.csv``.
SOURCE = {
    "data": "uops.info measurements (Abel & Reineke), as CSV in the AssemblyStats project",
    "repository": "https://github.com/ashvardanian/AssemblyStats",
    "commit": "fbeccff",
    "license": "Apache-2.0",
}
COLUMNS = ("mnemonic", "operands", "latency", "latency_max", "recip_throughput", "uops", "ports",
           "ports_source", "family")

VECTOR_FAMILIES = {"AVX", "AVX2", "AVX512EVEX", "AVX512VEX", "AVX_VNNI", "FMA", "F16C", "SSE", "SSE2",
                   "SSE3", "SSSE3", "SSE4", "BMI1", "BMI2", "LZCNT"}
BASE_MNEMONICS = {
    "mov", "movzx", "movsx", "movsxd", "add", "sub", "adc", "sbb", "and", "or", "xor", "not",
    "neg", "inc", "dec", "cmp", "test", "shl", "shr", "sar", "rol", "ror", "imul", "mul", "jmp",
    "call", "ret", "push", "pop", "nop", "xchg", "bt", "popcnt", "tzcnt", "lzcnt", "cdq", "cqo",
    "prefetcht0", "prefetcht1", "prefetcht2", "prefetchnta",
}
BASE_PREFIXES = ("j", "cmov", "set", "lea")
KIND_MAP = {"R8l": "r8", "R8h": "r8h", "I8": "imm8", "I16": "imm16", "I32": "imm32", "I64": "imm64",
            "Rel8": "rel8", "Rel32": "rel32"}
ALLOWED_KINDS = {
    "r8", "r8h", "r16", "r32", "r64", "xmm", "ymm", "zmm", "mm", "m8", "m16", "m32", "m64", "m128",
    "m256", "m512", "imm8", "imm16", "imm32", "imm64", "rel8", "rel32", "cl", "1", "al", "ax", "eax",
    "rax", "vsib_xmm", "vsib_ymm", "vsib_zmm", "m",
}
READ_ONLY_FIRST = {"cmp", "test", "bt", "ptest", "vptest", "ucomiss", "comiss", "vucomiss", "vcomiss"}


def normalize_kind(kind: str) -> str:
    kind = KIND_MAP.get(kind, kind).lower()
    return kind


def is_memory(kind: str) -> bool:
    return (kind.startswith("m") and kind != "mm") or kind.startswith("vsib")


def memory_bits(kind: str) -> int:
    """Bits one memory operand moves (``m256`` -> 256; broadcast ``m32_1to8`` -> 32)."""
    m = re.match(r"m(\d+)", kind)
    return int(m.group(1)) if m else 64


def is_pure_move(mnemonic: str) -> bool:
    return bool(re.match(r"v?(mov|pbroadcast|broadcast|lddqu)", mnemonic)) or mnemonic.startswith(
        ("prefetch", "pop", "push"))


@dataclass
class Row:
    mnemonic: str
    operands: tuple[str, ...]
    family: str
    latency: float | None
    latency_max: float | None
    recip_throughput: float | None
    uops: float
    unfused: float | None
    ports: dict[str, float]
    ports_source: str


def parse_latency(text: str) -> tuple[float | None, float | None]:
    text = text.replace("≤", "").strip()
    if not text:
        return None, None
    if text.startswith("["):
        lo, hi = text.strip("[]").split(";")
        return float(lo), float(hi)
    return float(text), float(text)


def parse_row(rec: dict[str, str]) -> Row | None:
    m = re.match(r"^(\S+)(?: \((.*)\))?$", rec["instruction"])
    if not m:
        return None
    name = m.group(1).lower()
    if name.endswith("_z"):
        return None
    kinds = tuple(normalize_kind(k) for k in (m.group(2) or "").split(", ") if k)
    if any(k not in ALLOWED_KINDS for k in kinds):
        return None
    tp = rec["throughput"].split("/")[0].strip()
    uops = rec["uops"].split("/")
    lat, lat_max = parse_latency(rec["latency"])
    return Row(name, kinds, rec["family"], lat, lat_max, float(tp) if tp else None, float(uops[0]),
               float(uops[1]) if len(uops) > 1 else None, parse_usage(rec["ports"]),
               "measured" if rec["ports"] else "")


def _opcode_suffixed(mnemonic: str) -> bool:
    m = re.fullmatch(r"([a-z]+)_([0-9a-f]{2})", mnemonic)
    return bool(m) and m.group(1) in BASE_MNEMONICS


def keep(row: Row) -> bool:
    """Forms relevant to AVX2 integer/ternary kernels and scalar loop code."""
    if row.family in VECTOR_FAMILIES:
        return row.family != "AVX512EVEX" or "k" not in row.operands
    if row.family == "BASE":
        return (row.mnemonic in BASE_MNEMONICS or _opcode_suffixed(row.mnemonic)
                or row.mnemonic.startswith(BASE_PREFIXES))
    return False


def memory_role(row: Row) -> tuple[str | None, int]:
    """("load" | "store" | "rmw" | None, bits) of the row's memory operand."""
    if row.mnemonic.startswith(("lea", "nop")):
        return None, 0
    for i, kind in enumerate(row.operands):
        if is_memory(kind):
            bits = memory_bits(kind)
            if i == 0 and row.mnemonic not in READ_ONLY_FIRST and not row.mnemonic.startswith("prefetch"):
                return ("store" if is_pure_move(row.mnemonic) else "rmw"), bits
            return "load", bits
    return None, 0


def exec_class(row: Row) -> str:
    role, _ = memory_role(row)
    if row.mnemonic.startswith("nop") or (role is not None and is_pure_move(row.mnemonic)):
        return "none"
    if row.mnemonic.startswith("j") or row.mnemonic in ("call", "ret"):
        return "branch"
    if row.mnemonic in ("imul", "mul"):
        return "mul"
    if row.mnemonic.startswith("v") or any(k in ("xmm", "ymm", "zmm", "mm") for k in row.operands):
        return "vector"
    return "alu"


def vector_bits(row: Row) -> int:
    widths = [{"xmm": 128, "ymm": 256, "zmm": 512}.get(k, 0) for k in row.operands]
    widths += [memory_bits(k) for k in row.operands if is_memory(k) and memory_bits(k) >= 128]
    return max(widths, default=0)


def derive_ports(row: Row, mach: CoreDescription, reg_tp: float | None) -> dict[str, float]:
    """Port usage for a row without port data (see the README in data/, "derived ports")."""
    if row.unfused == 0:
        return {}  # eliminated at rename (e.g. NOP, some LEA/MOV forms on Intel)
    role, bits = memory_role(row)
    if role is None and is_pure_move(row.mnemonic) and row.latency == 0 and not row.latency_max:
        return {}  # register move eliminated at rename (latency 0)
    usage: dict[str, float] = {}
    tp = row.recip_throughput or 0.0
    cls = exec_class(row)
    n_ld = math.ceil(bits / mach.load_bits) if role in ("load", "rmw") else 0
    n_st = math.ceil(bits / mach.store_bits) if role in ("store", "rmw") else 0
    if cls == "none":
        if n_ld:
            usage[mach.load] = max(n_ld, tp * len(mach.ports(mach.load)))
        if n_st:
            usage[mach.store] = max(n_st, tp * len(mach.ports(mach.store)))
        return usage
    group = {"branch": mach.branch, "mul": mach.mul, "vector": mach.vector, "alu": mach.alu}[cls]
    passes = max(1, math.ceil(vector_bits(row) / mach.vector_datapath_bits)) if cls == "vector" else 1
    ref_tp = reg_tp if (role and reg_tp is not None) else tp
    # Throughput scaling only where units are scarce; scalar ALU/branch throughputs measured by
    # uops.info can include flag-merge dependencies (e.g. Gracemont INC/DEC) and are not scaled.
    scaled = ref_tp * len(mach.ports(group)) if cls in ("vector", "mul") else 0.0
    if abs(scaled - round(scaled)) < 0.05:
        scaled = float(round(scaled))  # 0.33 * 3 ports is one port-cycle, not 0.99
    usage[group] = max(float(passes), round(scaled, 2))
    if n_ld:
        usage[mach.load] = float(n_ld)
    if n_st:
        usage[mach.store] = float(n_st)
    return usage


def add_memory_ports(row: Row, mach: CoreDescription) -> tuple[dict[str, float], bool]:
    """Measured usage plus the load/store uops the source omits (Zen 4 lists only FP pipes)."""
    role, bits = memory_role(row)
    usage = dict(row.ports)
    ported = {p for g in usage for p in mach.ports(g)}
    added = False
    if role in ("load", "rmw") and not ported & set(mach.ports(mach.load)):
        usage = add_usage(usage, {mach.load: math.ceil(bits / mach.load_bits)})
        added = True
    if role in ("store", "rmw") and not ported & set(mach.ports(mach.store)):
        usage = add_usage(usage, {mach.store: math.ceil(bits / mach.store_bits)})
        added = True
    return usage, added


def register_twin(row: Row) -> tuple[str, ...]:
    """Operand kinds of the register form of a memory form (``m256`` -> ``ymm``)."""
    vec = any(k in ("xmm", "ymm", "zmm") for k in row.operands)
    out = []
    for k in row.operands:
        if is_memory(k):
            b = memory_bits(k)
            out.append({128: "xmm", 256: "ymm", 512: "zmm"}.get(b, "xmm") if vec else f"r{b}")
        else:
            out.append(k)
    return tuple(out)


def build_one(src: Path, uarch: str) -> list[Row]:
    mach = core_description(uarch)
    with src.open(newline="") as f:
        rows = [r for r in (parse_row(rec) for rec in csv.DictReader(f)) if r and keep(r)]
    # Encoding-suffixed twins ("vpdpbusd_vex", "vpdpbusd_evex") share the plain mnemonic; on a
    # key collision the plain row wins, then _vex, then _evex.
    # Register-register scalar forms carry their opcode byte ("mov_89", "add_01"): same rule.
    def priority(r: Row) -> int:
        if r.mnemonic.endswith("_evex"):
            return 2
        return 1 if r.mnemonic.endswith("_vex") or _opcode_suffixed(r.mnemonic) else 0

    table: dict[tuple[str, tuple[str, ...]], Row] = {}
    for r in sorted(rows, key=priority):
        r.mnemonic = r.mnemonic.removesuffix("_evex").removesuffix("_vex")
        if _opcode_suffixed(r.mnemonic):
            r.mnemonic = r.mnemonic.split("_")[0]
        table.setdefault((r.mnemonic, r.operands), r)
    for r in table.values():
        if r.ports:
            r.ports, added = add_memory_ports(r, mach)
            r.ports_source = "measured+mem" if added else "measured"
        elif r.recip_throughput is not None or r.unfused == 0:
            twin = table.get((r.mnemonic, register_twin(r)))
            r.ports = derive_ports(r, mach, twin.recip_throughput if twin else None)
            r.ports_source = "derived" if r.ports else "none"
        else:
            r.ports_source = "none"
    return sorted(table.values(), key=lambda r: (r.mnemonic, r.operands))


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:g}"


def write_table(rows: list[Row], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([r.mnemonic, " ".join(r.operands), _fmt(r.latency), _fmt(r.latency_max),
                        _fmt(r.recip_throughput), _fmt(r.uops), format_usage(r.ports), r.ports_source,
                        r.family])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, help="directory with the uops.info CSVs")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    args = ap.parse_args(argv)
    counts = {}
    for uarch in UARCHES:
        rows = build_one(args.source / f"{uarch}.csv", uarch)
        write_table(rows, args.out / f"{uarch}.csv")
        counts[uarch] = len(rows)
    meta_path = args.out / "sources.json"
    old = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    meta = {**SOURCE, "built_from": [f"{u}.csv" for u in UARCHES], "rows": counts,
            "builder": "tsar.sim.uarch.build", "columns": list(COLUMNS),
            **{k: v for k, v in old.items() if k == "instlatx64"}}
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
