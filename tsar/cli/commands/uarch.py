"""``tsar uarch measure``: latency and reciprocal throughput of the simulator's VEX/EVEX instruction
forms measured on the host CPU, written as an instruction table in the timing model's format, and
compared per form with a published (shipped) table (docs/timing.md, "Measuring a core")."""

from __future__ import annotations

import argparse
import datetime
from collections import Counter
from pathlib import Path

from tsar import console
from tsar.cli.argtypes import positive_int
from tsar.errors import UserError

NAME = "uarch"
HELP = "per-core instruction tables: measure the host's"


def _table_names() -> str:
    from tsar.sim.uarch import UARCH_NAMES

    return ", ".join(UARCH_NAMES)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="uarch_command", metavar="ACTION", required=True)
    m = sub.add_parser(
        "measure", help="measure latency and throughput of every supported VEX/EVEX form on this CPU",
        description="Measure, on this CPU, the latency (dependency chains) and reciprocal throughput "
                    "(independent streams) of every VEX/EVEX form the simulator supports and the CPU "
                    "executes, register and memory variants, pinned to one CPU, several trials; write "
                    "them as an instruction table (CSV) that the host platform uses when its core has "
                    "no published table; compare them form by form with a shipped table.")
    m.add_argument("--forms", metavar="PATTERN",
                   help="only forms whose mnemonic this regular expression matches from its start "
                        "(a prefix: vpadd; exact: 'vpaddd$')")
    m.add_argument("--extensions", metavar="LIST", action="append",
                   help="only these extensions, comma-separated (e.g. AVX2,AVX_VNNI,AVX512BW; repeatable)")
    m.add_argument("--trials", type=positive_int, default=None,
                   help="trials per form; the median is kept (default 5, 3 with --quick)")
    m.add_argument("--quick", action="store_true",
                   help="a handful of well-known forms (vpaddd, vpmulld, vpdpbusd ...): seconds")
    m.add_argument("--out", metavar="FILE",
                   help="write the table here (a .csv; its side file takes .json); default: the cache, keyed "
                        "by the CPU's vendor, family, model and stepping, where the host platform finds "
                        "it (a partial run updates the cached rows it measured)")
    m.add_argument("--compare", metavar="NAME",
                   help="compare with this shipped table: one of " + _table_names()
                        + " (default: the host's own table, where its core has a published one)")
    m.add_argument("--base", metavar="NAME",
                   help="shipped table that supplies uop counts, core widths and the forms not measured "
                        "(default: the host's, as host detection maps this CPU)")
    m.add_argument("--json", action="store_true", help="print the results as JSON (docs/json.md)")


def _check_table(name: str | None, option: str) -> None:
    from tsar.sim.uarch import UARCH_NAMES

    if name is not None and name not in UARCH_NAMES:
        raise UserError(f"{option} {name!r}: unknown table (known: {', '.join(UARCH_NAMES)})")


def run(args: argparse.Namespace) -> int:
    if args.uarch_command == "measure":
        return _measure(args)
    raise UserError(f"unknown action {args.uarch_command!r}")


def _measure(args: argparse.Namespace) -> int:
    from tsar.sim.platforms.detect import cpu_flags, cpu_identity, uarch_for_cpu
    from tsar.sim.uarch import load
    from tsar.sim.uarch.forked import default_cpu
    from tsar.sim.uarch.measure import QUICK_TRIALS, Settings, measure, select_forms
    from tsar.sim.uarch.measure_rows import table_rows
    from tsar.sim.uarch.measured import cache_path, write_table

    _check_table(args.compare, "--compare")
    _check_table(args.base, "--base")
    extensions = [e.strip() for group in args.extensions or [] for e in group.split(",") if e.strip()]
    ident = cpu_identity()
    host_table, proxy, host_note = uarch_for_cpu(ident.vendor, ident.family, ident.model, ident.stepping,
                                                 cpu_flags())
    out = Path(args.out) if args.out else cache_path(ident.key)
    if out.is_dir():
        raise UserError(f"--out {out}: is a directory")
    if out.suffix != ".csv":
        raise UserError(f"--out {out}: the table is a .csv file (its side file gets .json)")
    forms = select_forms(cpu_flags(), args.forms, extensions, args.quick)
    trials = args.trials or (QUICK_TRIALS if args.quick else 5)
    cpu = default_cpu()
    settings = Settings(trials=trials, cpu=cpu, target_ticks=50_000 if args.quick else 100_000)
    base_name = args.base or host_table
    console.progress(f"measuring {len(forms)} forms on {ident.name or ident.key} (CPU {cpu}), {trials} "
                     f"trials each")
    base = load(base_name)
    m = measure(forms, ident, settings, progress=console.Work("forms"), base=base, flags=cpu_flags())
    rows = table_rows(m, base)
    partial = bool(args.forms or extensions or args.quick)
    meta = {
        "cpu": ident.name, "vendor": ident.vendor, "family": ident.family, "model": ident.model,
        "stepping": ident.stepping, "key": ident.key, "base": base_name,
        "host_table": {"name": host_table, "proxy": proxy, "note": host_note},
        "measured": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "trials": trials, "pinned_cpu": cpu, "tsc_ghz": round(m.tsc_ghz, 4), "core_ghz": round(m.core_ghz, 3),
        "load_to_use_cycles": {k: round(v, 2) for k, v in m.load_to_use.items()},
        "blockers": m.blockers,
        "method": "tsar uarch measure: chains and streams unrolled x1 and x2 (difference), rdtsc, "
                  "calibrated per trial by a 1-cycle add chain, median of trials; uops from the base "
                  "table; ports by pairing with single-port blockers, else derived from the base "
                  "core's class groups (docs/timing.md)",
    }
    written = write_table(rows, out, meta, merge=partial and not args.out)
    compare_name = args.compare or (None if proxy else host_table)
    comparison = _compare(rows, compare_name) if compare_name else None
    if args.json:
        _emit_json(m, rows, comparison, compare_name, out, written, base_name)
    else:
        _print(m, rows, comparison, compare_name, out, written, base_name, (host_table, proxy, host_note))
    return 0


def _compare(rows, name: str):
    from tsar.sim.uarch import load
    from tsar.sim.uarch.agreement import compare, summary
    from tsar.sim.uarch.measure_rows import comparable

    found = compare(comparable(rows), load(name))
    return found, summary(found)


def _fmt(x: float | None, width: int, digits: int = 2) -> str:
    return f"{'-' if x is None else f'{x:.{digits}f}':>{width}}"


def _print(m, rows, comparison, compare_name, out: Path, written: int, base_name: str,
           host: tuple[str, bool, str]) -> None:
    from tsar.sim.uarch.agreement import Tolerance

    agreement = {(a.mnemonic, a.operands): a for a in comparison[0]} if comparison else {}
    head = f"{'form':<36} {'lat':>6} {'tp':>6}"
    if comparison:
        head += f"  | {compare_name + ' lat':>15} {'tp':>6} | {'lat x':>6} {'tp x':>6}"
    print(head)
    for r in rows:
        form = f"{r.mnemonic} {' '.join(r.operands)}"
        line = f"{form:<36} {_fmt(r.latency, 6)} {_fmt(r.recip_throughput, 6)}"
        a = agreement.get(r.key)
        if a is not None:
            flags = [w for w, ok in (("lat", a.latency_agrees), ("tp", a.throughput_agrees)) if ok is False]
            line += (f"  | {_fmt(a.published_latency, 15)} {_fmt(a.published_recip_throughput, 6)} | "
                     f"{_fmt(a.latency_ratio, 6)} {_fmt(a.throughput_ratio, 6)}  "
                     + ("differs: " + ", ".join(flags) if flags else "agrees"))
        print(line)
    print(f"measured on {m.cpu.name or '?'} ({m.cpu.vendor} family {m.cpu.family} model {m.cpu.model:#x} "
          f"stepping {m.cpu.stepping}), pinned to CPU {m.settings.cpu}, {m.settings.trials} trials per "
          f"form: core clock {m.core_ghz:.2f} GHz (time-stamp counter {m.tsc_ghz:.2f} GHz); L1 load-to-use "
          + ", ".join(f"{k} {v:.1f}" for k, v in m.load_to_use.items()) + " cycles")
    lat = sum(1 for r in rows if r.latency is not None)
    paired = sum(1 for r in rows if r.ports_source.startswith("pairing"))
    print(f"{len(rows)} forms measured ({lat} with a latency); uops from {base_name}; ports by pairing for "
          f"{paired} (blockers: " + (", ".join(f"{p} {f}" for p, f in m.blockers.items()) or "none found")
          + f"), derived from {base_name}'s class port groups for the rest")
    failed = [r for r in m.results if r.failed]
    for r in failed:
        print(f"failed: {r.text}: {r.failed}")
    reasons = Counter(reason.split(":")[0] for _, reason in m.skipped)
    if reasons:
        print(f"skipped {len(m.skipped)}: " + ", ".join(f"{k} ({n})" for k, n in reasons.most_common()))
    spreads = sorted(s.spread for r in m.results for s in (r.latency, r.throughput) if s is not None)
    if spreads:
        print(f"spread over trials (max - min) / median: median {100 * spreads[len(spreads) // 2]:.1f} %, "
              f"worst {100 * spreads[-1]:.0f} %")
    if comparison:
        s, tol = comparison[1], Tolerance()
        print(f"agreement with {compare_name} ({s['forms']} forms in both; agree = within "
              f"{100 * tol.relative:.0f} % or {tol.latency} cycles (latency) / {tol.throughput} cycles "
              f"(throughput)): all agree {s['forms_agree']}/{s['forms']}")
        for what in ("latency", "throughput"):
            q = s[what]
            if q["compared"]:
                print(f"  {what}: {q['agree']}/{q['compared']} agree ({100 * q['agree_share']:.0f} %), "
                      f"median ratio measured/{compare_name} {q['median_ratio']:.3f}")
    else:
        table, proxy, note = host
        print(f"no comparison: this core has no published table (host detection: {table}"
              f"{' as proxy' if proxy else ''}: {note}); compare with --compare NAME")
    print(f"wrote {written} rows to {out} (and {out.with_suffix('.json').name})")


def _emit_json(m, rows, comparison, compare_name, out: Path, written: int, base_name: str) -> None:
    from tsar.jsonout import emit

    emit("uarch-measure",
         cpu={"name": m.cpu.name, "vendor": m.cpu.vendor, "family": m.cpu.family, "model": m.cpu.model,
              "stepping": m.cpu.stepping, "key": m.cpu.key},
         pinned_cpu=m.settings.cpu, trials=m.settings.trials, core_ghz=m.core_ghz, tsc_ghz=m.tsc_ghz,
         load_to_use_cycles=m.load_to_use, base=base_name, out=str(out), rows_written=written,
         blockers=m.blockers, blocker_checks=m.blocker_checks,
         forms=[{"mnemonic": r.mnemonic, "operands": list(r.operands), "latency": r.latency,
                 "latency_max": r.latency_max, "recip_throughput": r.recip_throughput, "uops": r.uops,
                 "ports": dict(r.ports), "ports_source": r.ports_source, "notes": list(r.notes)}
                for r in rows],
         spread=[{"form": r.text, "latency": None if r.latency is None else r.latency.spread,
                  "throughput": None if r.throughput is None else r.throughput.spread}
                 for r in m.results if not r.failed],
         failed=[{"form": r.text, "reason": r.failed} for r in m.results if r.failed],
         skipped=[{"form": name, "reason": reason} for name, reason in m.skipped],
         comparison=None if comparison is None else {
             "table": compare_name, "summary": comparison[1], "forms": comparison[0]})
