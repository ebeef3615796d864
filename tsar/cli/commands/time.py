"""``tsar time``: the timing model on a function of the user's own .s or .so.

The function runs once in the Python engine (arguments as ``tsar run``); the executed code is
split into loops (from back edges) and straight-line code, and each loop is bounded by port
pressure, front end, taken branches and loop-carried dependency chains on the platform's core, in
the manner of llvm-mca or uiCA but for the whole call; memory adds the transfer time of the data
(from a memory trace with ``--trace``, else everything in L1D).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from tsar import console
from tsar.cli.guest_args import CallArg, parse_arg
from tsar.cli.helptext import names, platforms
from tsar.common.files import read_bytes, read_text
from tsar.errors import UserError

NAME = "time"
HELP = "predict the time of a function of your .s or .so on a platform, loop by loop (timing model)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="assembly source (.s) or shared object (.so)")
    parser.add_argument("--fn", help="function (label / symbol); default: the first label")
    parser.add_argument("--arg", action=CallArg, metavar="SPEC", help="an argument ('tsar run --help')")
    parser.add_argument("--out", action=CallArg, metavar="DTYPE:SHAPE", help="an output array")
    parser.add_argument("--platform", default="host",
                        help=f"{names(platforms())}, or a platform .toml file (default host)")
    parser.add_argument("--threads", type=int, default=1, help="threads sharing the work (default 1)")
    parser.add_argument("--trace", action="store_true",
                        help="derive the data streams from a memory trace (slower, models caches)")
    parser.add_argument("--ports", action="store_true", help="also print each loop's port pressure")
    parser.add_argument("--seed", type=int, default=0, help="seed of random inputs (default 0)")
    parser.add_argument("--json", action="store_true", help="print the prediction as JSON")
    parser.add_argument("--csv", action="store_true", help="print the loop table as CSV")


def _load(machine, path: Path, fn: str | None) -> tuple[str, bytes, int]:
    """Load the file; returns the function, the code bytes and their address."""
    from tsar.isa.assembler import assemble
    from tsar.sim.elf import load_elf_image

    if path.suffix == ".s":
        program = assemble(read_text(path, "an assembly source (.s)"), base=0, filename=str(path))
        labels = machine.load_program(program)
        name = fn or next(iter(program.symbols), None)
        if name is None or name not in labels:
            raise UserError(f"{path}: no function {name or ''} found".replace("  ", " "))
        return name, program.code, labels[name] - program.symbols[name]
    image = load_elf_image(read_bytes(path, "a shared object (.so)"), path.name)
    symbols = machine.load_elf(path)
    name = fn or next(iter(image.symbols), None)
    if name is None or name not in symbols:
        raise UserError(f"{path}: no function {name or ''} found")
    base = symbols[name] - image.symbols[name]
    return name, bytes(machine.mem.read(base, image.size)), base


def _label(report, base: int) -> str:
    """A loop's name with file offsets instead of guest addresses."""
    if report.depth < 0:
        return report.label
    return f"loop {report.start - base:#x}-{report.end - base:#x}"


def run(args: argparse.Namespace) -> int:
    from tsar.estimate.layer import platform_named
    from tsar.sim import create_machine
    from tsar.sim.timing.predict import predict

    path = Path(args.file)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    if args.threads < 1:
        raise UserError(f"--threads must be at least 1, got {args.threads}")
    platform = platform_named(args.platform)
    machine = create_machine()
    fn, code, base = _load(machine, path, args.fn)
    rng = np.random.default_rng(args.seed)
    call_args = [parse_arg(spec + (":zeros" if is_out and spec.count(":") == 1 else ""), rng)
                 for is_out, spec in getattr(args, "call_args", None) or []]
    console.activity(f"{fn}: simulating the call")  # the heartbeat's, if it takes long

    def heartbeat(count: int, seconds: float) -> None:  # every 2 s of a long call
        console.status(f"  {fn}: {count:,} instructions simulated in {console.duration(seconds)}")

    machine.heartbeat = heartbeat
    machine.call(fn, *call_args, trace=args.trace)
    console.progress("")  # keeps the last heartbeat on a terminal
    console.activity(f"{fn}: modelling its time on {platform.name}")
    pred = predict(machine.stats, code, base, platform, threads=args.threads,
                   trace=machine.trace if args.trace else None)
    loops = [{"start": r.start - base, "end": r.end - base, "depth": r.depth,
              "iterations": r.iterations, "instructions": r.instructions,
              "cycles_per_iteration": r.cycles_per_iteration, "cycles": r.cycles,
              "bottleneck": r.bottleneck, "port_loads": r.core.port_loads} for r in pred.loops]
    if args.csv:
        from tsar.jsonout import emit_csv

        emit_csv(loops)
        return 0
    if args.json:
        from tsar.jsonout import emit

        emit("time", file=str(path), function=fn, platform=pred.platform, threads=pred.threads,
             frequency_ghz=pred.frequency_ghz, seconds=pred.seconds, cycles=pred.cycles,
             core_cycles=pred.core_cycles, bound=pred.bound, instructions=machine.stats.instructions,
             loops=loops,
             notes=pred.notes)
        return 0
    print(f"{fn} in {path.name} on {pred.platform} ({platform.core.model}, {platform.core.uarch}"
          f"{' proxy' if platform.core.uarch_proxy else ''}): {machine.stats.instructions:,} "
          f"instructions executed; addresses are offsets in the file's code")
    table = pred.table()
    for r in pred.loops:
        table = table.replace(r.label, _label(r, base).ljust(len(r.label)))
    print(table)
    if args.ports:
        for r in pred.loops:
            loads = ", ".join(f"{port} {cyc:.2f}" for port, cyc in
                              sorted(r.core.port_loads.items(), key=lambda kv: -kv[1]) if cyc)
            print(f"  {_label(r, base)}: {r.core.uops:.1f} uops/iter; port cycles/iter: {loads}")
    for note in pred.notes:
        print(f"note: {note}")
    return 0
