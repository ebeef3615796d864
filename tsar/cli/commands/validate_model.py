"""``tsar validate-model``: the timing model's predictions vs native measurements on this host."""

from __future__ import annotations

import argparse
import sys

from tsar import console
from tsar.cli.argtypes import positive_float, positive_int
from tsar.errors import UserError
from tsar.kernels.registry import SIMULATED
from tsar.models import BITNET_2B_LAYERS, PREFILL_TOKENS

NAME = "validate-model"
HELP = (f"model the native AVX2 cores ({', '.join(SIMULATED)}) and T-SAR kernels on this host and compare "
        "with measurements (natives natively, T-SAR through the proxy engine): GEMV with cache- and "
        f"DRAM-resident weights, GEMM at {PREFILL_TOKENS} tokens; keeps the error per kernel family")


def _shape(text: str) -> tuple[int, int]:
    try:
        m, k = (int(v) for v in text.lower().replace(" ", "").split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must be MxK, e.g. 2560x2560, got {text!r}") from None
    return m, k


_DEFAULT_SHAPES = [f"{m}x{k}" for m, k in BITNET_2B_LAYERS]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kernel", action="append", choices=SIMULATED,
                        help=f"native kernel to validate (repeatable; default all: {', '.join(SIMULATED)})")
    parser.add_argument("--shape", action="append", type=_shape, metavar="MxK",
                        help=f"layer shape M x K (repeatable; default {', '.join(_DEFAULT_SHAPES[:-1])} and "
                             f"{_DEFAULT_SHAPES[-1]})")
    parser.add_argument("--tiny", action="store_true", help="one small shape (64x384), seconds")
    parser.add_argument("--no-dram", action="store_true", help="skip the DRAM-resident variant")
    parser.add_argument("--no-proxy", action="store_true",
                        help="skip the T-SAR kernels timed through the proxy engine")
    parser.add_argument("--no-gemm", action="store_true",
                        help=f"skip the GEMM ({PREFILL_TOKENS} tokens) cases")
    parser.add_argument("--calls", type=positive_int, default=20,
                        help="timed calls per case and round (GEMM: a tenth; default 20)")
    parser.add_argument("--rounds", type=positive_int, default=7,
                        help="rounds, every case once per round, alternating; the median of the round "
                             "medians is kept (default 7)")
    parser.add_argument("--write-errors", metavar="PATH",
                        help="also write the per-family error table (JSON, stamped) to PATH; a full "
                             "run always updates the cached one that compare, report and demo use")
    parser.add_argument("--loops", action="store_true", help="print the per-loop report of every case")
    parser.add_argument("--target", type=positive_float, default=None,
                        help="exit with status 1 if the MAPE (percent) exceeds this")
    parser.add_argument("--threads", metavar="N,N,...",
                        help="thread counts of the thread-scaling cases (the two fastest AVX2 natives on "
                             "BitNet-2B's largest layer, 6912x2560, GEMV from DRAM and GEMM; default: every "
                             "count from 1 to this host's CPUs, none with --tiny; 0: none)")
    parser.add_argument("--no-operators", action="store_true",
                        help="skip the other operators of a token (embedding, norms, RoPE, attention, "
                             "LM head...; included unless --tiny)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON (docs/json.md)")
    parser.add_argument("--csv", action="store_true", help="print the cases as CSV")


def _check_shapes(kernels: tuple[str, ...], shapes: tuple[tuple[int, int], ...]) -> None:
    """Every kernel must take every shape (each format has its own block sizes): checked by
    packing a zero layer, before any measurement."""
    import numpy as np

    from tsar.kernels.baselines import prepare

    for m, k in shapes:
        for kernel in kernels:
            try:
                prepare(kernel, np.zeros((m, k), np.int8))
            except ValueError as exc:
                raise UserError(f"--shape {m}x{k}: {exc}") from None


def _threads(args: argparse.Namespace) -> tuple[int, ...]:
    """The thread counts of the scaling cases (``--threads``; default every count of this host)."""
    from tsar.simulate.counts import workers

    if args.threads is None:
        return () if args.tiny else tuple(range(1, workers() + 1))
    try:
        counts = tuple(dict.fromkeys(int(t) for t in args.threads.split(",") if t.strip()))
    except ValueError:
        raise UserError(f"--threads: expected comma-separated thread counts, got {args.threads!r}") from None
    if counts == (0,):
        return ()
    if not counts or min(counts) < 1:
        raise UserError(f"--threads: thread counts must be at least 1, got {args.threads!r}")
    return counts if 1 in counts else (1, *counts)


def _keep_errors(result, full: bool, path: str | None) -> None:
    """The per-family error table: into the cache after a full run, to ``path`` if given."""
    from pathlib import Path

    from tsar.report import provenance
    from tsar.validation import error_bars as model_error

    prov = provenance(0)
    stamp = {"machine": prov["cpu"], "date": prov["date"], "commit": prov["commit"],
             "platform": f"{result.platform}, {result.frequency_ghz:.3f} GHz",
             "mape": f"{result.mape:.1f} % over {len(result.cases)} cases", "command": "tsar validate-model"}
    if full:
        model_error.save(result, model_error.cache_path(), stamp)
    if path:
        try:
            model_error.save(result, Path(path), stamp)
        except OSError as exc:
            raise UserError(f"--write-errors {path}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    from tsar.sim.platforms.detect import cpu_flags
    from tsar.validation.validate import (
        DATA,
        FULL_SHAPES,
        GEMM_TOKENS,
        KERNELS,
        TINY_SHAPES,
        TSAR_GEMM_KERNELS,
        host_tsar_kernels,
        validate,
    )

    shapes = TINY_SHAPES if args.tiny else tuple(args.shape or FULL_SHAPES)
    kernels = tuple(args.kernel or KERNELS)
    _check_shapes(kernels, shapes)
    tsar_kernels = () if args.no_proxy else host_tsar_kernels(cpu_flags())
    threads = _threads(args)
    result = validate(kernels, shapes, tsar_kernels=tsar_kernels, dram=not args.no_dram, threads=threads,
                      operators=not (args.tiny or args.no_operators),
                      tsar_gemm_kernels=() if args.no_proxy else TSAR_GEMM_KERNELS,
                      gemm_tokens=0 if args.no_gemm else GEMM_TOKENS,
                      calls=args.calls, rounds=args.rounds,
                      progress=lambda msg: console.progress(f"  {msg}"))
    full = (not args.tiny and not args.kernel and not args.shape and not args.no_dram
            and not args.no_proxy and not args.no_gemm)
    _keep_errors(result, full, args.write_errors)
    if args.csv:
        from tsar.jsonout import emit_csv

        emit_csv(result.records())
        return 1 if args.target is not None and not result.mape <= args.target else 0
    if args.json:
        from tsar.jsonout import emit
        from tsar.validation.error_bars import table_of

        mapes = {v: result.mape_of(v) for v in DATA if any(c.data == v for c in result.cases)}
        emit("validate-model", platform=result.platform, frequency_ghz=result.frequency_ghz,
             mape=result.mape, mape_by_variant=mapes, notes=result.notes,
             cases=[{"kernel": c.kernel, "N": c.N, "M": c.M, "K": c.K, "variant": c.variant,
                     "weight_bytes": c.weight_bytes, "predicted_s": c.predicted,
                     "measured_s": c.measured, "spread": c.spread, "error": c.error,
                     "bound": c.bound} for c in result.cases],
             bias_by_family=result.bias(), error_by_family=result.family_error(),
             isa_speedups=[{"kernel": c.kernel, "over": t.kernel, "M": c.M, "K": c.K, "variant": c.variant,
                            "predicted": p, "measured": m} for t, c, p, m in result.isa_speedups()],
             thread_scaling=[{"kernel": c.kernel, "N": c.N, "M": c.M, "K": c.K, "variant": c.variant,
                              "threads": c.threads, "predicted_s": c.predicted, "measured_s": c.measured,
                              "spread": c.spread, "error": c.error, "bound": c.bound}
                             for c in result.scaling],
             operators=[{"operator": c.kernel, "size": c.variant.split(":", 1)[1], "data": c.data,
                         "big_data_bytes": c.weight_bytes, "predicted_s": c.predicted,
                         "measured_s": c.measured, "spread": c.spread, "error": c.error, "bound": c.bound}
                        for c in result.operators],
             thread_speedups=[{"kernel": c.kernel, "N": c.N, "variant": c.variant, "threads": c.threads,
                               "predicted": p, "measured": m} for _, c, p, m in result.thread_speedups()],
             targets=[{"target": what, "met": ok, "figure": got} for what, ok, got in result.targets()],
             error_table=table_of(result))
        return 1 if args.target is not None and not result.mape <= args.target else 0
    if args.loops:
        for case in result.cases:
            if case.prediction is not None:
                print(f"== {case.kernel} {case.M} x {case.K} ({case.variant})")
                print(case.prediction.table())
    print(result.table())
    for note in result.notes:
        print(f"note: {note}")
    if args.target is not None and not result.mape <= args.target:
        print(f"MAPE {result.mape:.1f} % exceeds the target {args.target:g} %", file=sys.stderr)
        return 1
    return 0
