"""``tsar bench-native``: time the native baseline kernels against the measured bandwidth roofline."""

from __future__ import annotations

import argparse

from tsar import console
from tsar.cli.shapes import parse_shape
from tsar.errors import UserError
from tsar.kernels.registry import KERNELS

NAME = "bench-native"
HELP = f"benchmark the native ternary baseline kernels ({', '.join(KERNELS)})"

SIMD_CHOICES = ("auto", "all", "avx2", "avxvnni", "avx512")
"""``--simd`` values: the keys of :data:`tsar.kernels.baselines.ISAS` (not imported here: that loads
the native kernels)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kernels", default="all",
                        help=f"comma-separated kernels: {','.join(KERNELS)} (default all)")
    parser.add_argument("--shapes", default="",
                        help="comma-separated NxMxK shapes (default: BitNet-2B layers, N=1, and N=128)")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--where", default="cache,dram",
                        help="weights in cache, streamed from dram, or both (default both); the %% BW "
                             "column (weight bytes per second against the measured streaming-read "
                             "bandwidth) is shown for dram only")
    parser.add_argument("--repeats", type=int, default=50, help="timed calls per case (default 50)")
    parser.add_argument("--simd", default="auto", choices=SIMD_CHOICES,
                        help="the kernels' instruction set: auto (the best the CPU runs, default), all "
                             "(every level each kernel has a build of that the CPU runs), avx2, avxvnni "
                             "(the VEX vpdpbusd), avx512 (the global --isa FILE registers T-SAR variants "
                             "instead)")
    parser.add_argument("--quick", action="store_true", help="one layer, fewer repeats")
    parser.add_argument("--json", action="store_true", help="print the results as JSON (docs/json.md)")
    parser.add_argument("--csv", action="store_true", help="print the results as CSV")


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise UserError(f"--{what}: expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise UserError(f"--{what}: expected positive integers, got {text!r}")
    return values


def run(args: argparse.Namespace) -> int:
    from tsar.kernels import bench
    from tsar.kernels.baselines import KERNELS

    kernels = list(KERNELS) if args.kernels == "all" else args.kernels.split(",")
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown:
        raise UserError(f"--kernels: unknown {', '.join(unknown)}; expected some of {', '.join(KERNELS)}")
    threads = _ints(args.threads, "threads")
    where = ["cache", "dram"] if args.where == "both" else args.where.split(",")
    if not set(where) <= {"cache", "dram"}:
        raise UserError(f"--where: expected cache and/or dram, got {args.where!r}")
    if args.repeats < 1:
        raise UserError(f"--repeats: expected >= 1, got {args.repeats}")
    if args.shapes:
        shapes = [parse_shape(s, "--shapes") for s in args.shapes.split(",")]
        cases = [bench.Case(k, n, m, kk, t, w) for k in kernels for t in threads
                 for (n, m, kk) in shapes for w in where]
    else:
        cases = [c for c in bench.default_cases(kernels, threads, args.quick) if c.where in where]
    if args.simd == "all":
        from dataclasses import replace

        from tsar.kernels.baselines import kernel_isas

        cases = [replace(c, isa=isa) for c in cases for isa in kernel_isas(c.kernel)]
    repeats = min(args.repeats, 10) if args.quick else args.repeats
    threads_used = sorted({c.threads for c in cases})
    console.progress(f"measuring the streaming-read bandwidth ({', '.join(map(str, threads_used))} "
                     "thread(s))")
    try:
        bw = bench.measure_bandwidths(threads_used)
        simd = "auto" if args.simd == "all" else args.simd
        bw, results = bench.run(cases, repeats, simd, console.Steps(len(cases)), bandwidth=bw)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    console.progress("measuring the int8 multiply-add peak of one core (for % peak)")
    peaks = bench.int8_peaks(results)
    records = [{"kernel": r.case.kernel, "isa": r.isa, "N": r.case.n, "M": r.case.m, "K": r.case.k,
                "threads": r.case.threads, "weights": r.case.where, "seconds": r.seconds,
                "spread": r.spread, "gops": r.gops, "gweights_per_s": r.gweights,
                "weight_gbs": r.weight_gbs, "bandwidth_pct": r.roofline_pct,
                "int8_peak_pct": bench.peak_pct(r, peaks),
                "bits_per_weight": 8 * r.weight_bytes / (r.case.m * r.case.k)} for r in results]
    if args.csv:
        from tsar.jsonout import emit_csv

        emit_csv(records)
        return 0
    if args.json:
        from tsar.jsonout import emit

        emit("bench-native", read_bandwidth_gbs={str(t): b / 1e9 for t, b in bw.items()},
             int8_peak_gops={isa: p / 1e9 for isa, p in peaks.items()},
             repeats=repeats, results=records)
        return 0
    print(bench.format_table(bw, results, peaks))
    return 0
