"""``tsar run``: call a function of an assembly file or shared object in the simulator."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from tsar import console
from tsar.cli.argtypes import non_negative_int, positive_float, positive_int, seed
from tsar.cli.guest_args import ARG_SYNTAX, CallArg, parse_arg
from tsar.cli.helptext import RawEpilogFormatter, call_engines, models, names, tsar_kernels
from tsar.cli.shapes import DEFAULT_SHAPE
from tsar.common.files import read_text
from tsar.errors import UserError

NAME = "run"
HELP = ("run a function of a kernel (.s with AVX2 + T-SAR, or a gcc-built .so) in the simulator, "
        "or a T-SAR BitLinear kernel ('gemv' / 'gemm') verified against the reference")

MAX_INSTRUCTIONS = 10**9
"""Default instruction limit of one call (guest instructions)."""
TIMEOUT = 600.0
"""Default wall-time limit of one call (seconds)."""

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = RawEpilogFormatter
    parser.epilog = ARG_SYNTAX
    parser.add_argument("file", help="assembly source (.s), shared object (.so), gemv / gemm, or model")
    parser.add_argument("model", nargs="?",
                        help=f"model mode: the model, one of {names(models())} (or a unique ending "
                             "of one, such as 2b-4t)")
    parser.add_argument("--engine", choices=call_engines(), default="python",
                        help="python: the instrumented simulator (default); native: the host CPU "
                             "runs the code, T-SAR instructions through rewritten stubs")
    parser.add_argument("--tokens", type=positive_int, default=1, help="model mode: tokens N (default 1)")
    parser.add_argument("--weights", metavar="FILE.npz",
                        help="model mode: ternary weights '{layer}.{matrix}' (default: random)")
    parser.add_argument("--layers", type=positive_int, metavar="L",
                        help="model mode: run only the first L transformer layers")
    parser.add_argument("--gguf", metavar="FILE",
                        help="model mode: a real checkpoint (GGUF: BitLinear matrices in I2_S, TL2, "
                             "TQ1_0, TQ2_0 or float): generate tokens from --prompt, every operator timed")
    parser.add_argument("--tl2-config", metavar="PATH",
                        help="--gguf: the include/kernel_config.ini bitnet.cpp converted a TL2 checkpoint "
                             "with (the TL2 layout of each matrix shape; default: bitnet.cpp's published "
                             "presets)")
    parser.add_argument("--prompt", default="The capital of France is",
                        help="--gguf: the prompt text (tokenized with the checkpoint's vocabulary)")
    parser.add_argument("--prompt-ids", metavar="ID,ID,...",
                        help="--gguf: the prompt as token ids instead of text")
    parser.add_argument("--new-tokens", type=positive_int, default=8, metavar="N",
                        help="--gguf: tokens to generate, greedily (default 8)")
    parser.add_argument("--check", metavar="KERNEL,...",
                        help="--gguf: also run the prompt through these kernels (reference, native "
                             "baselines such as tl2 or i2s-avx512, T-SAR kernels) and require the same "
                             "tokens and logits")
    parser.add_argument("--threads", type=positive_int, default=1,
                        help="--gguf: threads of the native baselines (default 1)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON (docs/json.md)")
    parser.add_argument("--csv", action="store_true", help="model mode: print the per-matrix table as CSV")
    parser.add_argument("--kernel", default="auto",
                        help=f"gemv/gemm/model: a T-SAR kernel, one of {names(tsar_kernels())}; or auto "
                             "(default): the fastest by the dataflow selection, per layer")
    parser.add_argument("--shape", default=DEFAULT_SHAPE,
                        help=f"gemv/gemm: N x M x K (default {DEFAULT_SHAPE})")
    parser.add_argument("--fn", help="function (label / symbol) to call; default: the first label")
    parser.add_argument("--arg", action=CallArg, metavar="SPEC", help="an argument (syntax below)")
    parser.add_argument("--out", action=CallArg, metavar="DTYPE:SHAPE",
                        help="an output array argument, printed after the call")
    parser.add_argument("--returns", default="i64",
                        choices=["i64", "u64", "i32", "u32", "f32", "f64", "none"],
                        help="how to read the return value (rax or xmm0); default i64")
    parser.add_argument("--seed", type=seed, default=0, help="seed of random inputs (default 0)")
    parser.add_argument("--max-instructions", type=positive_int, default=MAX_INSTRUCTIONS, metavar="N",
                        help=f"stop the call after about N guest instructions (default {MAX_INSTRUCTIONS:,})")
    parser.add_argument("--timeout", type=positive_float, default=TIMEOUT, metavar="SECONDS",
                        help=f"stop the call after this wall time (default {TIMEOUT:g} s)")
    parser.add_argument("--memory-stats", action="store_true",
                        help="count Unicorn's scalar memory traffic too (slower)")
    parser.add_argument("--trace", metavar="FILE.npz",
                        help="save the memory-address trace (address, size, write arrays)")
    parser.add_argument("--hot", type=non_negative_int, default=0, metavar="N",
                        help="also print the N most executed instructions")


def run(args: argparse.Namespace) -> int:
    native = args.engine == "native"
    if native and (args.trace or args.memory_stats or args.hot):
        raise UserError("--trace, --memory-stats and --hot need --engine python (the native engine "
                        "counts calls, wall time and T-SAR instructions only)")
    if args.tl2_config is not None and not (args.file == "model" and args.gguf):
        raise UserError("--tl2-config applies to 'tsar run model --gguf FILE' only (the TL2 layout of "
                        "that checkpoint)")
    if args.file == "model":
        return _run_model(args)
    if args.model is not None:
        raise UserError(f"unexpected argument {args.model!r} (a model name follows 'model')")
    if args.file in ("gemv", "gemm"):
        from tsar.cli.bitlinear import run_bitlinear

        stray = [opt for opt, given in (("--fn", args.fn), ("--arg/--out", getattr(args, "call_args", None)),
                                        ("--returns", args.returns != "i64")) if given]
        if stray:
            raise UserError(f"{', '.join(stray)} apply to .s/.so files, not to '{args.file}' (its "
                            "arguments come from --shape and --kernel)")
        return run_bitlinear(args.file, args.kernel, args.shape, seed=args.seed, hot=args.hot,
                             engine=args.engine, as_json=args.json)
    from tsar.sim import SimulationError, create_machine

    path = Path(args.file)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    if native:
        machine = create_machine("native", timeout=args.timeout)
    else:
        machine = create_machine(max_instructions=args.max_instructions, timeout=args.timeout)
    if path.suffix == ".s":
        symbols = machine.load_asm(read_text(path, "an assembly source (.s)"), filename=str(path))
    else:
        symbols = machine.load_elf(path)
    fn = args.fn or next(iter(symbols), None)
    if fn is None:
        raise UserError(f"{path}: no function found")
    rng = np.random.default_rng(args.seed)
    call_args, outputs = [], []
    for is_out, spec in getattr(args, "call_args", None) or []:
        value = parse_arg(spec + (":zeros" if is_out and spec.count(":") == 1 else ""), rng)
        call_args.append(value)
        if is_out:
            outputs.append((spec, value))
    options = {} if native else {"trace": bool(args.trace), "memory_stats": args.memory_stats}
    if native:
        console.activity(f"{fn}: running on the host CPU (limit {args.timeout:g} s)")
    else:
        def heartbeat(count: int, seconds: float) -> None:  # every 2 s of a long call
            console.status(f"  {fn}: {count:,} instructions simulated in {console.duration(seconds)} "
                           f"(limits: {args.max_instructions:,} instructions, {args.timeout:g} s)")
        machine.heartbeat = heartbeat
    try:
        try:
            result = machine.call(fn, *call_args, returns=args.returns, **options)
        finally:
            console.progress("")  # keeps the last heartbeat on a terminal
    except SimulationError as err:
        if err.kind != "limit":
            raise
        option = "--timeout" if err.message.startswith("wall-time") else "--max-instructions"
        raise UserError(f"{err}; {option} sets the limit") from None
    if args.json:
        from tsar.jsonout import emit, stats_fields

        emit("run", file=str(path), function=fn, returns=args.returns, returned=result,
             outputs={spec: value for spec, value in outputs}, stats=stats_fields(machine.stats))
        return 0
    print(f"{fn}(...) returned {result}")
    with np.printoptions(threshold=64, linewidth=110):
        for spec, value in outputs:
            print(f"out {spec}: {value}")
    print(machine.stats.summary())
    if args.hot:
        print(f"hot instructions (top {args.hot}):")
        for addr, count in machine.stats.per_address.most_common(args.hot):
            print(f"  {addr:#x} {count:>10,}  {machine.cache.insn(addr).text}")
    if args.trace and machine.trace is not None:
        t = machine.trace
        np.savez_compressed(args.trace, address=t.address, size=t.size, write=t.write)
        print(f"wrote {len(t):,} memory accesses to {args.trace}")
    return 0


def _run_model(args: argparse.Namespace) -> int:
    from tsar.models import MODELS, get_model
    from tsar.simulate.model import run_model

    if args.gguf:
        if args.model is not None:
            raise UserError("give either a model name or --gguf FILE, not both")
        return _run_gguf(args)
    if args.model is None:
        raise UserError(f"tsar run model needs a model name (one of {', '.join(MODELS)})")
    try:
        model = get_model(args.model)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
    if args.weights:
        _check_weights_file(args.weights)
    layers = model.layers if args.layers is None else min(args.layers, model.layers)
    matrices = len(model.layer_shapes())
    from tsar.estimate.dataflow import candidates

    selecting = (f"selecting the dataflow of each of the {matrices} matrices ({len(candidates())} "
                 "kernels simulated on its shape, cached after the first run), " if args.kernel == "auto"
                 else "")
    console.progress(f"{model.name}: {selecting}generating and loading the kernels, then {layers} "
                     f"layer(s) of {matrices} matrices, each checked against the reference")
    run = run_model(args.model, args.tokens, kernel=args.kernel, engine=args.engine,
                    weights=args.weights, layers=args.layers, seed=args.seed)
    if args.csv:
        from tsar.jsonout import emit_csv

        emit_csv(run.records())
        return 1 if run.mismatched_layers else 0
    if args.json:
        from tsar.jsonout import emit

        emit("run-model", model=args.model, tokens=args.tokens, engine=args.engine,
             exact=not run.mismatched_layers, mismatched_layers=run.mismatched_layers,
             matrices=[{"matrix": name, "kernel": run.kernels[name], "calls": run.calls[name],
                        "seconds": secs, "ms_per_token": secs / run.tokens * 1e3}
                       for name, secs in run.seconds.items()],
             ms_per_token=run.total_seconds / run.tokens * 1e3)
        return 1 if run.mismatched_layers else 0
    print(f"{args.model}: {sum(run.calls.values())} BitLinear calls, {args.tokens} token(s), "
          f"{args.engine} engine")
    print(run.table())
    if run.mismatched_layers:
        print(f"MISMATCH against tsar.kernels.reference.bitlinear in {len(run.mismatched_layers)} "
              f"layer(s): {', '.join(run.mismatched_layers[:8])}")
        return 1
    print("every output bit-exact against tsar.kernels.reference.bitlinear")
    return 0


def _prompt_ids(args: argparse.Namespace, tokenizer) -> list[int]:
    if args.prompt_ids is None:
        return tokenizer.encode(args.prompt)
    try:
        return [int(t) for t in args.prompt_ids.split(",") if t.strip()]
    except ValueError:
        raise UserError(f"--prompt-ids: expected comma-separated token ids, got {args.prompt_ids!r}"
                        ) from None


def _run_gguf(args: argparse.Namespace) -> int:
    from tsar.checkpoints import load
    from tsar.forward import OPERATORS, compare_kernels
    from tsar.tokenizer import Tokenizer

    console.progress(f"{args.gguf}: reading the checkpoint")
    ckpt = load(args.gguf, tl2_config=args.tl2_config)
    h = ckpt.hyper
    tokenizer = Tokenizer(h.tokenizer or "gpt2", h.tokens, h.merges) if h.tokens else None
    if tokenizer is None and args.prompt_ids is None:
        raise UserError(f"{args.gguf}: no vocabulary in the checkpoint: give the prompt as --prompt-ids")
    prompt = _prompt_ids(args, tokenizer)
    if h.bos is not None and args.prompt_ids is None:
        prompt = [h.bos, *prompt]
    kernel = "tsar-c4s4-ap-tokens" if args.kernel == "auto" else args.kernel
    checks = [k.strip() for k in (args.check or "").split(",") if k.strip()]
    types = ", ".join(f"{name} {n}" for name, n in ckpt.types().items())
    console.progress(f"{h.arch}: {h.layers} layers, hidden {h.hidden}, vocab {h.vocab} ({types}); "
                     f"{len(prompt)} prompt tokens, up to {args.new_tokens} new, through "
                     f"{', '.join([kernel, *checks])}")
    agreement = compare_kernels(ckpt, prompt, args.new_tokens, [kernel, *checks], threads=args.threads,
                                stop=h.eos, progress=console.progress)
    run = agreement.generations[kernel]
    text = tokenizer.decode(run.tokens) if tokenizer else ""
    same = agreement.same_tokens and all(agreement.logit_difference(k) == 0 for k in checks)
    if args.json:
        from tsar.jsonout import emit

        emit("run-gguf", file=str(args.gguf), arch=h.arch, kernel=kernel, prompt=prompt, tokens=run.tokens,
             text=text, prefill_seconds=run.prefill_seconds, decode_seconds=run.decode_seconds,
             operators={op: run.operators.get(op, 0.0) for op in OPERATORS}, matrices=dict(run.matrices),
             checks={k: {"tokens": g.tokens, "max_logit_difference": agreement.logit_difference(k)}
                     for k, g in agreement.generations.items() if k != kernel},
             identical=same)
        return 0 if same else 1
    print(f"prompt ids: {prompt}")
    print(f"generated ids ({kernel}): {run.tokens}")
    if tokenizer:
        print(f"text: {text!r}")
    rate = run.decode_tokens_per_second
    print(f"prefill {run.prefill_seconds:.3f} s ({len(prompt)} tokens); decode "
          + (f"{rate:.2f} tokens/s ({len(run.decode_seconds)} tokens)" if rate else "- (one token)")
          + " on this host" + (", T-SAR instructions emulated by the native engine"
                               if kernel.startswith("tsar-") else ""))
    print(run.table())
    if checks:
        for k in checks:
            g, diff = agreement.generations[k], agreement.logit_difference(k)
            print(f"{k}: {g.tokens}, last logits "
                  + ("identical" if diff == 0 else f"differ by up to {diff:.3g}"))
        print("identical tokens and logits through " + ", ".join(agreement.generations) if same else
              "MISMATCH: the kernels do not give the same tokens and logits")
    return 0 if same else 1


def _check_weights_file(path: str) -> None:
    """Refuse a weights file that run_model would refuse (missing, or not an .npz archive) before
    the progress line, so that the error is the command's one line; run_model loads the arrays and
    checks each of them."""
    import zipfile

    from tsar.common.files import load_arrays

    file = Path(path)
    if not file.is_file():
        raise UserError(f"no weights file {file}")
    if zipfile.is_zipfile(file):
        return
    load_arrays(file, "a weights archive (.npz)")  # its error says what the file is instead
    raise UserError(f"{file}: not a weights archive (.npz): a single array")
