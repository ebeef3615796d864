"""``tsar compare``: T-SAR kernels against native TL2 and the other baselines, like for like."""

from __future__ import annotations

import argparse
import os

from tsar import console
from tsar.cli.argtypes import positive_int
from tsar.cli.helptext import models, names, platforms
from tsar.cli.shapes import DEFAULT_SHAPE
from tsar.errors import UserError

NAME = "compare"
HELP = ("compare T-SAR kernels with native TL2 and other baselines on a layer and platform: modelled "
        "against modelled and, on the host, measured against measured")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", help=f"N x M x K (default {DEFAULT_SHAPE})")
    parser.add_argument("--platform", default=None,
                        help=f"{names(platforms())}, or a platform .toml file (default host; with "
                             "--model paper: every platform but the host)")
    parser.add_argument("--threads", type=positive_int,
                        help="threads (default: 1 for a layer, the platform's count for --model)")
    parser.add_argument("--model", help=f"instead of one layer: a whole model, one of {names(models())} "
                                        "(or a unique ending of one, such as 2b-4t): decode tokens/s "
                                        "and prefill latency; or 'paper': every model of the paper's "
                                        "125M-100B sweep end to end (its Fig. 8 view)")
    parser.add_argument("--context", type=positive_int, default=None, metavar="POSITIONS",
                        help="--model: the context length of a decoded token (positions its attention "
                             "reads from the KV cache; default 1024)")
    parser.add_argument("--threads-sweep", action="store_true",
                        help="instead: the layer modelled at 1, 2, 4, ... threads up to the platform's "
                             "(the paper's Fig. 10): the fastest T-SAR kernel against TL2 and the best "
                             "native at each")
    parser.add_argument("--repeats", type=positive_int, default=20, help="native timing repeats (median)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON (docs/json.md)")
    parser.add_argument("--csv", action="store_true", help="print the table as CSV")


def run(args: argparse.Namespace) -> int:
    from tsar.cli.shapes import parse_shape

    def progress(msg: str) -> None:
        console.progress(f"  .. {msg}")

    if args.model and args.model.lower() == "paper":
        return _paper_models(args, progress)
    args.platform = args.platform or "host"
    if args.model and args.shape:
        raise UserError("--model and --shape exclude each other (a model has its own shapes)")
    if args.context and not args.model:
        raise UserError("--context applies to --model (a layer has no KV cache)")
    if args.threads is not None:
        from tsar.estimate.layer import platform_named

        available = os.cpu_count() or 1
        if args.platform != "host":
            plat = platform_named(args.platform)
            available = plat.core.cores * plat.core.threads_per_core
        if args.threads > available:
            raise UserError(f"--threads {args.threads}: {args.platform} has {available} hardware threads")
    if args.threads_sweep:
        return _threads_sweep(args, progress)
    if args.model:
        from tsar.estimate.model import evaluate, format_estimates

        try:
            result = evaluate(args.model, args.platform, threads=args.threads, progress=progress,
                              **({"context": args.context} if args.context else {}))
        except KeyError as exc:
            raise UserError(str(exc.args[0])) from None
        if args.csv:
            from tsar.jsonout import emit_csv

            emit_csv(result.records())
            return 0
        if args.json:
            from tsar.jsonout import emit

            emit("model-estimate", estimate=result)
            return 0
        print(format_estimates([result]))
        return 0
    from tsar.compare import compare

    n, m, k = parse_shape(args.shape or DEFAULT_SHAPE)
    result = compare(n, m, k, args.platform, threads=args.threads or 1, repeats=args.repeats,
                     progress=progress)
    if args.csv:
        from tsar.jsonout import emit_csv

        emit_csv(result.records())
        return 0
    if args.json:
        from tsar.jsonout import emit

        emit("compare", N=result.N, M=result.M, K=result.K, platform=result.platform,
             threads=result.threads, baseline=result.baseline.kernel,
             model_error_source=result.error_source or None,
             rows=[{k: v for k, v in r.items() if k not in ("N", "M", "K", "platform", "threads")}
                   for r in result.records()])
        return 0
    print(result.table())
    return 0


def _paper_models(args: argparse.Namespace, progress) -> int:
    from tsar.estimate.paper_models import estimate_paper_models
    from tsar.sim.platforms import SHIPPED

    if args.shape or args.threads_sweep:
        raise UserError("--model paper takes no --shape or --threads-sweep (each model has its shapes)")
    if args.threads is not None:
        raise UserError("--model paper runs each platform at its own thread count (the paper's)")
    chosen = [args.platform] if args.platform else list(SHIPPED)
    result = estimate_paper_models(chosen, progress=progress,
                                   **({"context": args.context} if args.context else {}))
    if args.csv:
        from tsar.jsonout import emit_csv

        emit_csv(result.records())
        return 0
    if args.json:
        from tsar.jsonout import emit

        emit("paper-models", context=result.estimates[0].context, summary=result.summary(),
             rows=result.records())
        return 0
    print(result.table())
    return 0


def _threads_sweep(args: argparse.Namespace, progress) -> int:
    from tsar.cli.shapes import parse_shape
    from tsar.estimate.scaling import sweep

    if args.model:
        raise UserError("--threads-sweep takes a layer (--shape), not --model")
    if args.threads is not None:
        raise UserError("--threads-sweep chooses the thread counts itself (1, 2, 4, ... up to the "
                        "platform's)")
    n, m, k = parse_shape(args.shape or DEFAULT_SHAPE)
    result = sweep(n, m, k, args.platform, progress=progress)
    if args.csv:
        from tsar.jsonout import emit_csv

        emit_csv(result.records())
        return 0
    if args.json:
        from tsar.jsonout import emit

        emit("thread-sweep", N=n, M=m, K=k, platform=result.platform,
             points=[{key: v for key, v in r.items() if key not in ("N", "M", "K", "platform")}
                     for r in result.records()])
        return 0
    print(result.table())
    return 0
