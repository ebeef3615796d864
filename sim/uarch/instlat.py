"""Build per-core tables in ``data/`` from InstLatx64 latency/throughput dumps.

Usage: ``python -m tsar.sim.uarch.instlat DUMP_DIR UOPS_DIR [--out DIR]``, where DUMP_DIR holds the
InstLatx64 dumps named in :data:`TABLES` (from https://github.com/InstLatx64/InstLatx64, files
under ``AuthenticAMD/`` and ``GenuineIntel/``; the raw dumps are not shipped) and UOPS_DIR the
uops.info CSVs that :mod:`tsar.sim.uarch.build` reads. ``--compare`` prints, instead, how the
shipped uops.info Gracemont/Golden Cove tables agree with the Gracemont (LC) and Golden Cove (BC)
dumps of the same Alder Lake part.

InstLatx64 gives, per instruction form, latency and reciprocal throughput in core cycles
(``L: 0.92ns= 3.98c  T: 0.12ns= 0.497c``); it gives no uop counts and no ports. Per table:

* ``zen5``: the Ryzen 9 9950X dump (512-bit datapath). Ports: the pipe group LLVM's
  ``X86ScheduleZnver5.td`` gives the instruction's class (:data:`ZEN5_PIPES`), with the count raised
  to reproduce the measured throughput, or widened to the core's class group where the measured
  throughput is higher than LLVM's pipes allow (``ports_source``). uops: the Zen 4 uops.info count
  of the same form (ymm twin for zmm), else 1. Mnemonics the dump lacks come from the Zen 4
  uops.info table (xmm/ymm/scalar forms only), ports re-derived for Zen 5, ``source`` =
  ``uops.info:zen4``.
* ``zen4``: the Ryzen 9 7950X (Raphael) dump over the uops.info Zen 4 table (whose throughput
  column is the port-derived value: ``vpaddd zmm`` 0.25 c where the part measures 0.50 c, as
  Zen 4 executes 512-bit operations in two 256-bit halves). Ports: uops.info's, with vector-pipe
  counts raised to the measured throughput (``+tp``); forms uops.info lacks: the class groups.
* ``gracemont``: the Alder Lake E-core (LC) dump. Ports: the pooled class groups of
  ``cores.toml`` (no per-port data exists for Gracemont). uops and forms the dump lacks (memory
  forms): the uops.info Gracemont table (``source`` = ``uops.info:gracemont``).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from tsar.sim.uarch import build
from tsar.sim.uarch.agreement import within
from tsar.sim.uarch.build import Row
from tsar.sim.uarch.cores import CoreDescription, core_description
from tsar.sim.uarch.ports import add_usage, format_usage

REPOSITORY = "https://github.com/InstLatx64/InstLatx64"
SNAPSHOT = "087af2c7d72c9a6af85a3a079e8fdb878db23ba1"   # repository HEAD when imported (2026-07-22)
LLVM_ZNVER5 = {
    "file": "llvm/lib/Target/X86/X86ScheduleZnver5.td",
    "repository": "https://github.com/llvm/llvm-project",
    "commit": "21c5e93277a0eaf7fd8fb42efea0ac890801e3db",
    "cites": "AMD Software Optimization Guide for the AMD Zen5 Microarchitecture, pub. 58455 rev. 1.00",
    "license": "Apache-2.0 WITH LLVM-exception (facts only are used: pipe groups per class)",
}


@dataclass(frozen=True)
class DumpSource:
    """One InstLatx64 dump and what it measured."""

    path: str          # path in the InstLatx64 repository
    commit: str        # commit that last changed the file
    cpu: str
    complement: str    # uops.info CSV (AssemblyStats name) for uops and missing forms
    complement_uarch: str


TABLES: dict[str, DumpSource] = {
    "zen5": DumpSource(
        "AuthenticAMD/AuthenticAMD0B40F40_K20_GraniteRidge_02_512b_InstLatX64.txt",
        "a274f4dc012bd83e3edbd9be1cc03467083b90c2",
        "AMD Ryzen 9 9950X (Granite Ridge, Zen 5, CPUID 0B40F40 = family 1Ah model 44h), 512-bit "
        "datapath; the 256b twin (same commit) is the 256-bit datapath mode (zmm ops at half rate)",
        "zen4.csv", "zen4"),
    "zen4": DumpSource(
        "AuthenticAMD/AuthenticAMD0A60F12_K19_Raphael_04_InstLatX64.txt",
        "d937574fe1870385854eaf53834b0a271cc89362",
        "AMD Ryzen 9 7950X (Raphael, Zen 4, CPUID 0A60F12 = family 19h model 61h): 512-bit "
        "operations on 256-bit units (vpaddd zmm 0.50 c against ymm 0.25 c)",
        "zen4.csv", "zen4"),
    "gracemont": DumpSource(
        "GenuineIntel/GenuineIntel0090672_AlderLake_01_LC_InstLatX64.txt",
        "d993c2d5e7d3cbfa9f9aa659954c3f438d7258d7",
        "Intel Core i9-12900K (Alder Lake-S, CPUID 90672), run pinned to CPU 19, inside the dump's "
        "ECoreMask 0xff0000: a Gracemont E-core (LC = little core)",
        "alderlake.csv", "gracemont"),
}
GOLDEN_COVE_DUMP = "GenuineIntel/GenuineIntel0090672_AlderLake_01_BC_InstLatX64.txt"
COLUMNS = (*build.COLUMNS, "source")

_LINE = re.compile(r"^\s*(?:Inst\s+)?(\d+)\s+(\S+)\s*:\s*(\{\w+\})?\s*(.*?)"  # older dumps: "Inst  72 X86"
                   r"\s+L:\s*(.*?)\s+T:\s*([\d.]+)ns=\s*([\d.]+)c\s*$")
_CYCLES = re.compile(r"([\d.]+)ns=\s*([\d.]+)c")
_REG = {"xmm", "ymm", "zmm", "r8", "r16", "r32", "r64", "cl", "1", "al", "ax", "eax", "rax"}
_IMM = {"imm8": "imm8", "im8": "imm8", "i8": "imm8", "imm16": "imm16", "imm32": "imm32",
        "imm64": "imm64"}
_KEEP_EXT = re.compile(r"^(X86|AMD64|SSE|SSE2|SSE3|SSSE3|SSE4\.1|SSE4\.2|AVX|AVX2|FMA3|F16C|AVX_VNNI|"
                       r"AVX512.*|BMI|BMI2|ABM|LZCNT|POPCNT|MMXP_SSE)$")


@dataclass(frozen=True)
class Measurement:
    """One parsed dump line: a form with its latency and reciprocal throughput (cycles)."""

    test: int
    extension: str
    evex: bool
    mnemonic: str
    operands: tuple[str, ...]
    latency: float | None
    recip_throughput: float
    rank: int          # 0: plain operand spelling; 1: variant (xmm1/xmm2, zero immediate, r1_64)


def _operand(token: str) -> tuple[str, int] | None:
    """Table kind and variant rank of one dump operand (``[m256]`` -> ``m256``), None to skip."""
    t = token.strip()
    m = re.fullmatch(r"\[m(8|16|32|64|128|256|512)\]", t)
    if m:
        return f"m{m.group(1)}", 0
    if t in ("[mem]", "[m512]"):
        return "m512", 0
    if t in _REG:
        return t, 0
    if t in _IMM:
        return _IMM[t], 0
    m = re.fullmatch(r"(imm8|imm16|imm32)_0", t)
    if m:
        return m.group(1), 1
    m = re.fullmatch(r"(xmm|ymm|zmm)[12]", t)
    if m:
        return m.group(1), 1
    m = re.fullmatch(r"r[12]_(8|16|32|64)", t)
    if m:
        return f"r{m.group(1)}", 1
    return None


def parse_dump(text: str) -> list[Measurement]:
    """Single-instruction register/memory forms of a dump (combinations, masked/zero-masking
    EVEX forms, value-dependent divisions, gathers, x87, MMX and mask-register forms dropped)."""
    out = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        test, ext, enc, form, lat_text, _, tp = m.groups()
        if not _KEEP_EXT.match(ext) or any(c in form for c in "+{}()<>") or "LS pair" in form:
            continue
        parts = form.split(None, 1)
        mnemonic = parts[0]
        if not re.fullmatch(r"[A-Z][A-Z0-9]*", mnemonic):
            continue
        kinds = []
        rank = 0
        for token in (parts[1].split(",") if len(parts) > 1 else []):
            got = _operand(token)
            if got is None:
                break
            kinds.append(got[0])
            rank = max(rank, got[1])
        else:
            cyc = _CYCLES.search(lat_text)
            out.append(Measurement(int(test), ext, enc == "{EVEX}", mnemonic.lower(), tuple(kinds),
                                   float(cyc.group(2)) if cyc else None, float(tp), rank))
    return out


def _keep(meas: Measurement) -> bool:
    if meas.extension in ("X86", "AMD64"):
        return meas.mnemonic in build.BASE_MNEMONICS or meas.mnemonic.startswith(build.BASE_PREFIXES)
    return True


def _family(meas: Measurement) -> str:
    if meas.evex or meas.extension.startswith("AVX512") or "zmm" in meas.operands:
        return "AVX512EVEX"
    if meas.extension in ("X86", "AMD64"):
        return "BASE"
    return {"FMA3": "FMA", "MMXP_SSE": "SSE", "SSE4.1": "SSE4", "SSE4.2": "SSE4"}.get(meas.extension,
                                                                                     meas.extension)


def measured_rows(text: str) -> dict[tuple[str, tuple[str, ...]], Row]:
    """Rows of a dump keyed by (mnemonic, kinds); plain/VEX beats EVEX, plain spelling beats variants.

    Latency convention (as the uops.info tables): ``latency`` through register operands,
    ``latency_max`` through the memory operand. A dump's L for a load form is the load-to-use
    chain, so it is ``latency_max``; ``latency`` is then the register form's L (0 for a pure
    load). Stores have no latency ("[memory dep.]").
    """
    chosen: dict[tuple[str, tuple[str, ...]], Measurement] = {}
    for meas in sorted(parse_dump(text), key=lambda x: (x.evex, x.rank, x.test)):
        if _keep(meas):
            chosen.setdefault((meas.mnemonic, meas.operands), meas)
    rows: dict[tuple[str, tuple[str, ...]], Row] = {}
    for key, meas in chosen.items():
        rows[key] = Row(meas.mnemonic, meas.operands, _family(meas), meas.latency, meas.latency,
                        meas.recip_throughput, 1.0, None, {}, "")
    for row in rows.values():
        role, _ = build.memory_role(row)
        if role == "load" and row.latency is not None:
            twin = rows.get((row.mnemonic, build.register_twin(row)))
            row.latency_max = row.latency
            row.latency = 0.0 if build.is_pure_move(row.mnemonic) else (twin.latency if twin else None)
    return rows


# Zen 5 pipe groups per instruction class, from LLVM's X86ScheduleZnver5.td (which cites AMD pub.
# 58455): (mnemonic pattern, group, LLVM resource). First match wins; scalar classes after vector.
ZEN5_PIPES: tuple[tuple[str, str, str], ...] = (
    (r"v?pdp(bu|ws)sds?$", "FP01", "Zn5FPVMul01 (VNNI: first two pipes)"),
    (r"v?pmadd(wd|ubsw)$|v?pmul|v?psadbw$|vpmadd52", "FP013", "Zn5FPVMul012 (FP0, FP1, FP3)"),
    (r"v?ps(ll|rl|ra)|vpro[lr]|vpsh[lr]d", "FP12", "Zn5FPVShift01 (FP1, FP2)"),
    (r"v?pshuf|v?punpck|v?pack|v?palignr|vperm|v?shuf|v?unpck|vinsert|vextract|vpbroadcast|"
     r"vbroadcast|v?pmov[sz]x|v?movhlps|v?movlhps|v?pinsr|v?pextr|vpexpand|vpcompress|v?movddup|"
     r"v?movs[hl]dup", "FP12", "Zn5FPVShuf01 (FP1, FP2)"),
    (r"v?(padd|psub|pcmp|pmin|pmax|pavg|pabs|psign|phadd|phsub)", "FP0123", "Zn5FPVAdd0123"),
    (r"v?(pand|por|pxor|pternlog|pblend|mov|ptest)", "FP0123", "Zn5FPVMisc0123"),
    (r"v?(div|sqrt)[ps][sd]$", "FP1", "Zn5FPFDiv (FP1)"),
    (r"v?(mul|cmp|min|max)[ps][sd]|vfn?m(add|sub)", "FP01", "Zn5FPFMul01 (FP0, FP1)"),
    (r"v?(add|sub|addsub|hadd|hsub)[ps][sd]", "FP23", "Zn5FPFAdd01 (FP2, FP3)"),
    (r"v?cvt", "FP23", "Zn5FPFCvt01 (FP2, FP3)"),
    (r"v?(and|andn|or|xor|blend)p[sd]", "FP0123", "Zn5FPFMisc0123"),
    (r"(imul|mul)$", "ALU012", "Zn5Multiplier (ALU0-2)"),
    (r"j|call$|ret$", "ALU345", "Zn5BRU012 (ALU3-5)"),
    (r"cmov|set", "ALU03", "Zn5ALU03 (flag readers)"),
    (r"pdep$|pext$", "ALU345", "Zn5ALU345"),
)


def zen5_pipes(mnemonic: str) -> str | None:
    """LLVM's Zen 5 pipe group for a mnemonic's class, or None (no class rule)."""
    for pattern, group, _ in ZEN5_PIPES:
        if re.match(pattern, mnemonic):
            return group
    return None


def _memory_usage(row: Row, mach: CoreDescription) -> dict[str, float]:
    role, bits = build.memory_role(row)
    usage: dict[str, float] = {}
    if role in ("load", "rmw"):
        usage[mach.load] = float(math.ceil(bits / mach.load_bits))
    if role in ("store", "rmw"):
        usage[mach.store] = float(math.ceil(bits / mach.store_bits))
    return usage


def zen5_ports(row: Row, mach: CoreDescription, reg_tp: float | None) -> tuple[dict[str, float], str]:
    """(port usage, ports_source) of a Zen 5 row; see the module docstring."""
    role, _ = build.memory_role(row)
    cls = build.exec_class(row)
    if cls == "none":  # pure load/store: memory ports, scaled to the measured throughput
        usage = build.derive_ports(row, mach, reg_tp)
        return usage, ("derived" if usage else "none")
    if role is None and build.is_pure_move(row.mnemonic) and row.latency is not None and row.latency < 0.5:
        return {}, "none"  # register move eliminated at rename (measured latency ~0)
    llvm = zen5_pipes(row.mnemonic)
    if cls == "vector" and llvm is not None and not llvm.startswith("FP"):
        llvm = None
    wide = {"branch": mach.branch, "mul": mach.mul, "vector": mach.vector, "alu": mach.alu}[cls]
    group, source = (llvm, "llvm") if llvm else (wide, "derived")
    tp = reg_tp if (role and reg_tp is not None) else (row.recip_throughput or 0.0)
    need = tp * len(mach.ports(group))
    if need < 0.95 and group != wide:
        # measured faster than LLVM's pipes allow: measurement wins, the class group is used
        group, source = wide, "measured-tp"
        need = tp * len(mach.ports(group))
    count = 1.0
    # As build.py: only vector and multiply port use is raised to the throughput; scalar ALU and
    # branch throughputs can include flag-merge or taken-branch limits, not port occupancy.
    if need > 1.05 and cls in ("vector", "mul"):
        count = round(need, 2)
        source = "llvm+tp" if source == "llvm" else source
    return add_usage({group: count}, _memory_usage(row, mach)), source + ("+mem" if role else "")


def _uops_from(other: dict[tuple[str, tuple[str, ...]], Row], row: Row) -> float | None:
    twin = other.get((row.mnemonic, row.operands))
    if twin is None and "zmm" in row.operands:
        twin = other.get((row.mnemonic, tuple("ymm" if k == "zmm" else k for k in row.operands)))
    return twin.uops if twin else None


def build_zen5(dump_text: str, zen4_rows: list[Row]) -> list[tuple[Row, str]]:
    """Zen 5 rows with their ``source`` (``instlatx64`` or ``uops.info:zen4``)."""
    mach = core_description("zen5")
    rows = measured_rows(dump_text)
    zen4 = {(r.mnemonic, r.operands): r for r in zen4_rows}
    sources = {key: "instlatx64" for key in rows}
    for r in rows.values():
        r.uops = _uops_from(zen4, r) or 1.0
        if build.exec_class(r) == "none" and build.memory_role(r)[0] == "load" and r.latency_max is None:
            # load measured for throughput only ("[memory dep.]"): the guide's load-to-use latency
            r.latency, r.latency_max = 0.0, (mach.load_latency if build.vector_bits(r) else 4.0)
    have = {mn for mn, _ in rows}
    for key, r in zen4.items():
        if r.mnemonic not in have and "zmm" not in r.operands and "m512" not in r.operands:
            rows[key] = replace(r, ports={}, ports_source="")
            sources[key] = "uops.info:zen4"
    for r in rows.values():
        twin = rows.get((r.mnemonic, build.register_twin(r)))
        reg_tp = twin.recip_throughput if twin and twin is not r else None
        r.ports, r.ports_source = zen5_ports(r, mach, reg_tp)
    return [(rows[k], sources[k]) for k in sorted(rows)]


def _raised_to(ports: dict[str, float], tp: float, mach: CoreDescription) -> dict[str, float]:
    """``ports`` with the vector-pipe groups' counts raised so that they allow no more than one
    instruction per ``tp`` cycles (a measured throughput lower than the pipes' count implies)."""
    out = dict(ports)
    prefix = mach.vector.rstrip("0123456789")
    for group, count in ports.items():
        if group.startswith(prefix):
            need = tp * len(mach.ports(group))
            if need > count * 1.05:
                out[group] = round(need, 2)
    return out


def _dump_over(name: str, dump_text: str, uops_rows: list[Row]
               ) -> tuple[CoreDescription, dict[tuple[str, tuple[str, ...]], Row],
                          dict[tuple[str, tuple[str, ...]], Row], dict[tuple[str, tuple[str, ...]], str]]:
    """The core, a dump's rows, the uops.info rows by key and every dump row's source."""
    rows = measured_rows(dump_text)
    return (core_description(name), rows, {(r.mnemonic, r.operands): r for r in uops_rows},
            dict.fromkeys(rows, "instlatx64"))


def _passes(row: Row, mach: CoreDescription) -> int:
    """Datapath passes of a row's widest vector operand on ``mach``."""
    return max(1, math.ceil(build.vector_bits(row) / mach.vector_datapath_bits))


def _latency_from(row: Row, ref: Row | None) -> None:
    """A dump row without latency (loads: "[memory dep.]") takes the uops.info row's."""
    if ref and row.latency is None and row.latency_max is None:
        row.latency, row.latency_max = ref.latency, ref.latency_max


def build_zen4(dump_text: str, uops_rows: list[Row]) -> list[tuple[Row, str]]:
    """Zen 4 rows with their ``source`` (``instlatx64`` or ``uops.info:zen4``): the Ryzen 9 7950X
    dump's latency and throughput over the uops.info table, whose throughput column (the
    port-derived value) misses the split of 512-bit operations; ports from uops.info where the
    form has them, raised to the measured throughput, else derived from the core's class groups."""
    mach, rows, uinfo, sources = _dump_over("zen4", dump_text, uops_rows)
    for key, r in rows.items():
        ref = uinfo.get(key)
        r.uops = ref.uops if ref else (_uops_from(uinfo, r) or float(_passes(r, mach)))
        _latency_from(r, ref)
        if build.exec_class(r) == "none" and build.memory_role(r)[0] == "load" and r.latency_max is None:
            r.latency, r.latency_max = 0.0, (mach.load_latency if build.vector_bits(r) else 4.0)
    for key, r in uinfo.items():
        if key not in rows:
            rows[key] = r
            sources[key] = "uops.info:zen4"
    for key, r in rows.items():
        twin = rows.get((r.mnemonic, build.register_twin(r)))
        if sources[key] != "instlatx64":
            measured_twin = twin is not None and twin is not r \
                and sources.get((twin.mnemonic, twin.operands)) == "instlatx64"
            if measured_twin and twin.recip_throughput and build.exec_class(r) == "vector":
                # a load-op form issues no faster than its measured register form (the split)
                r.recip_throughput = max(r.recip_throughput or 0.0, twin.recip_throughput)
                raised = _raised_to(r.ports, twin.recip_throughput, mach)
                if raised != r.ports:
                    r.ports, r.ports_source = raised, r.ports_source + "+tp"
            continue
        ref = uinfo.get(key)
        reg_tp = twin.recip_throughput if twin and twin is not r else None
        tp = reg_tp if (build.memory_role(r)[0] and reg_tp is not None) else r.recip_throughput
        if ref is not None and ref.ports:
            r.ports = _raised_to(ref.ports, tp or 0.0, mach) if build.exec_class(r) == "vector" else ref.ports
            r.ports_source = ref.ports_source + ("+tp" if r.ports != ref.ports else "")
        elif build.memory_role(r)[0] is None and build.is_pure_move(r.mnemonic) and r.latency is not None \
                and r.latency < 0.5:
            r.ports, r.ports_source = {}, "none"  # register move eliminated at rename (latency ~0)
        else:
            r.ports = build.derive_ports(r, mach, reg_tp)
            r.ports_source = "derived" if r.ports else "none"
    return [(rows[k], sources[k]) for k in sorted(rows)]


def build_gracemont(dump_text: str, uops_rows: list[Row]) -> list[tuple[Row, str]]:
    """Gracemont rows with their ``source`` (``instlatx64`` or ``uops.info:gracemont``)."""
    mach, rows, uinfo, sources = _dump_over("gracemont", dump_text, uops_rows)
    for key, r in rows.items():
        ref = uinfo.get(key)
        r.uops, r.unfused = (ref.uops, ref.unfused) if ref else (float(_passes(r, mach)), None)
        _latency_from(r, ref)
    for key, r in uinfo.items():
        if key not in rows:
            rows[key] = r
            sources[key] = "uops.info:gracemont"
    for key, r in rows.items():
        if sources[key] != "instlatx64":
            continue  # uops.info rows keep the ports build.py derived
        twin = rows.get((r.mnemonic, build.register_twin(r)))
        r.ports = build.derive_ports(r, mach, twin.recip_throughput if twin and twin is not r else None)
        r.ports_source = "derived" if r.ports else "none"
    return [(rows[k], sources[k]) for k in sorted(rows)]


def write_table(rows: list[tuple[Row, str]], path: Path) -> None:
    """The table CSV: :data:`build.COLUMNS` plus ``source``."""
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        for r, source in rows:
            w.writerow([r.mnemonic, " ".join(r.operands), _fmt(r.latency), _fmt(r.latency_max),
                        _fmt(r.recip_throughput), _fmt(r.uops), format_usage(r.ports), r.ports_source,
                        r.family, source])


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{round(x, 3):g}"


def agreement(rows: dict[tuple[str, tuple[str, ...]], Row], other: list[Row],
              tol: float = 0.15) -> dict[str, float]:
    """How many register forms of ``other`` match a dump's reciprocal throughput within ``tol``
    (relative, floor 0.25 cycles), and the same for latency."""
    table = {(r.mnemonic, r.operands): r for r in other}
    common = [(rows[k], table[k]) for k in rows.keys() & table.keys()
              if not any(build.is_memory(o) for o in k[1]) and table[k].recip_throughput]

    def near(a: float | None, b: float | None) -> bool:
        return within(a, b, tol, 0.25 * tol)

    tp = sum(1 for m, o in common if near(m.recip_throughput, o.recip_throughput))
    lat = [(m, o) for m, o in common if m.latency is not None and o.latency is not None]
    return {"common_register_forms": len(common),
            "throughput_agrees": round(tp / len(common), 3) if common else 0.0,
            "latency_agrees": round(sum(1 for m, o in lat if near(m.latency, o.latency)) / len(lat), 3)
            if lat else 0.0}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dumps", type=Path, help="directory with the InstLatx64 dumps (file names as upstream)")
    ap.add_argument("uops", type=Path, help="directory with the uops.info CSVs (build.py's source)")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    ap.add_argument("--compare", action="store_true",
                    help="print how the uops.info alderlake.csv (Gracemont) and alderlakep.csv (Golden "
                         "Cove) agree with the Alder Lake LC (E-core) and BC (P-core) dumps; write nothing")
    args = ap.parse_args(argv)
    if args.compare:
        for dump in (TABLES["gracemont"].path, GOLDEN_COVE_DUMP):
            rows = measured_rows((args.dumps / Path(dump).name).read_text(errors="replace"))
            for table, uarch in (("alderlake.csv", "gracemont"), ("alderlakep.csv", "alderlakep")):
                result = agreement(rows, build.build_one(args.uops / table, uarch))
                print(f"{Path(dump).name} vs uops.info {table}: {json.dumps(result)}")
        return
    counts = {}
    for name, src in TABLES.items():
        text = (args.dumps / Path(src.path).name).read_text(errors="replace")
        other = build.build_one(args.uops / src.complement, src.complement_uarch)
        builder = {"zen5": build_zen5, "zen4": build_zen4, "gracemont": build_gracemont}[name]
        rows = builder(text, other)
        write_table(rows, args.out / f"{name}.csv")
        counts[name] = {"rows": len(rows), "instlatx64": sum(1 for _, s in rows if s == "instlatx64")}
    meta_path = args.out / "sources.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    meta["instlatx64"] = {
        "data": "InstLatx64 latency/throughput dumps (AIDA64 instruction latency benchmark runs)",
        "repository": REPOSITORY, "snapshot": SNAPSHOT,
        "license": "none stated (the repository has no license file); only derived per-form "
                   "measurements (facts) are shipped, not the dumps",
        "tables": {name: {"file": src.path, "commit": src.commit, "cpu": src.cpu,
                          "url": f"{REPOSITORY}/blob/{src.commit}/{src.path}",
                          "complement": f"uops.info {src.complement} (AssemblyStats, see above)",
                          **counts[name]} for name, src in TABLES.items()},
        "zen5_ports": LLVM_ZNVER5,
        "builder": "tsar.sim.uarch.instlat", "columns": list(COLUMNS),
    }
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
