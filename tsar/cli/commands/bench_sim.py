"""``tsar bench-sim``: simulated instructions per second on T-SAR kernels (the hand-written GEMV
strip and a generated BitLinear kernel), on AVX2 kernels and on an AVX-512 VNNI kernel."""

from __future__ import annotations

import argparse
import time

import numpy as np

from tsar import console
from tsar.cli.argtypes import positive_int
from tsar.cli.helptext import names, tsar_kernels
from tsar.errors import UserError
from tsar.isa.config import C2S4
from tsar.kernels.tsar_plan import kernel_name

NAME = "bench-sim"
HELP = "measure the simulator's speed (simulated instructions/s) on T-SAR, AVX2 and AVX-512 kernels"
DEFAULT_KERNEL = kernel_name(C2S4, "op")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--k", type=positive_int, default=2560,
                        help="GEMV depth of the T-SAR kernel (default 2560)")
    parser.add_argument("--n", type=positive_int, default=1 << 16,
                        help="length of the AVX2 int8 dot product (default 65536)")
    parser.add_argument("--m", type=positive_int, default=2560,
                        help="output features M of the BitLinear kernel (default 2560; K is --k)")
    parser.add_argument("--kernel", default=DEFAULT_KERNEL,
                        help=f"generated T-SAR BitLinear kernel, 1 token: one of {names(tsar_kernels())} "
                             f"(default {DEFAULT_KERNEL})")
    parser.add_argument("--repeat", type=positive_int, default=3,
                        help="timed calls per kernel (best is kept)")
    parser.add_argument("--engine", choices=["python", "native", "both"], default="both",
                        help="which engines to measure (default both)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON (docs/json.md)")
    parser.add_argument("--csv", action="store_true", help="print the figures as CSV")


_RESULTS: list[dict] = []
_JSON = [False]


def _report(text: str, **data: object) -> None:
    """One measurement: printed as ``text``, or kept for the JSON document."""
    _RESULTS.append(data)
    if not _JSON[0]:
        print(text)


def _measure(machine, fn: str | int, args: tuple, repeat: int, check) -> tuple[int, float]:
    machine.call(fn, *args)  # warm-up: decoding and closure building
    best = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = machine.call(fn, *args, returns="i32")
        elapsed = time.perf_counter() - start
        check(result)
        best = elapsed if best is None else min(best, elapsed)
    return machine.stats.instructions, best


def run(args: argparse.Namespace) -> int:
    from tsar.isa import C2S4, pack_tile
    from tsar.kernels import kernel_c_dir
    from tsar.paths import kernel_source
    from tsar.sim import compile_c, create_machine
    from tsar.sim.errors import SimulationError
    from tsar.simulate.tsar_kernel import plan_for

    if args.repeat < 1:
        raise UserError(f"--repeat must be at least 1, got {args.repeat}")
    plan_for(args.kernel, args.m, args.k)  # a bad kernel or shape fails before any measurement
    _RESULTS.clear()
    _JSON[0] = args.json or args.csv
    rng = np.random.default_rng(0)
    step = console.Steps({"native": 1, "python": 5}.get(args.engine, 6))
    if args.engine == "native":
        step(f"native engine: {args.kernel} (the Python engine counts its instructions first)")
        _bench_native(args, rng, None)
        return _finish(args)
    step("Python engine: the T-SAR GEMV strip gemv16_c2s4.s")
    k = args.k - args.k % 8
    machine = create_machine()
    machine.load_asm(kernel_source("gemv16_c2s4.s").read_text(), filename="gemv16_c2s4.s")
    act = rng.integers(-127, 128, k).astype(np.int8)
    tile = rng.integers(-1, 2, (16, k))
    weights = pack_tile(C2S4, tile.reshape(16, k // 8, 8).transpose(1, 0, 2)).reshape(-1)
    out = np.zeros(16, np.int32)
    expect = tile @ act.astype(np.int64)

    def check_gemv(_: object) -> None:
        if not (out == expect).all():
            raise SimulationError("bench", "gemv16_c2s4 result differs from numpy")

    n, sec = _measure(machine, "gemv16_c2s4", (act, weights, out, k), args.repeat, check_gemv)
    _report(f"T-SAR GEMV  gemv16_c2s4.s  16 x {k}:  {n:,} instructions in {sec * 1e3:.1f} ms "
            f"= {n / sec / 1e6:.3f} M simulated instr/s", engine="python", kernel="gemv16_c2s4.s",
            instructions=n, seconds=sec, minstr_per_s=n / sec / 1e6)

    step(f"Python engine: {args.kernel} 1 x {args.m} x {args.k}")
    bitlinear_count = _bench_bitlinear(args, rng)
    step("Python engine: the AVX2 int8 dot product (compiled with gcc, cached)")

    so = compile_c(kernel_c_dir() / "dot_i8_avx2.c", opt="-O3")
    machine.load_elf(so)
    a = rng.integers(-128, 128, args.n).astype(np.int8)
    b = rng.integers(-128, 128, args.n).astype(np.int8)
    want = int(a.astype(np.int64) @ b.astype(np.int64))
    want = (want + (1 << 31)) % (1 << 32) - (1 << 31)

    def check_dot(result: object) -> None:
        if result != want:
            raise SimulationError("bench", f"dot_i8 returned {result}, numpy says {want}")

    n, sec = _measure(machine, "dot_i8", (a, b, args.n), args.repeat, check_dot)
    _report(f"AVX2 int8 dot  dot_i8_avx2.c (gcc -O3 -mavx2)  n = {args.n}:  {n:,} instructions in "
            f"{sec * 1e3:.1f} ms = {n / sec / 1e6:.3f} M simulated instr/s", engine="python",
            kernel="dot_i8_avx2.c", instructions=n, seconds=sec, minstr_per_s=n / sec / 1e6)
    step("Python engine: the AVX2 absmax quantization (compiled with gcc, cached)")
    _bench_quant(args, rng)
    step("Python engine: the AVX-512 VNNI int2 GEMV (compiled with gcc, cached)")
    _bench_vnni(args, rng)
    if args.engine == "both":
        step(f"native engine (in process and worker) and native TL2: {args.kernel}")
        _bench_native(args, rng, bitlinear_count)
    return _finish(args)


def _finish(args: argparse.Namespace) -> int:
    if args.csv:
        from tsar.jsonout import emit_csv

        keys = dict.fromkeys(k for r in _RESULTS for k in r)
        emit_csv([{k: r.get(k) for k in keys} for r in _RESULTS])
        return 0
    if args.json:
        from tsar.jsonout import emit

        emit("bench-sim", results=_RESULTS)
    return 0


def _bench_quant(args: argparse.Namespace, rng: np.random.Generator) -> None:
    """gcc -O3 -mavx2 -mfma absmax quantization: float reduction, rounding, clamps, byte stores,
    scalar tails (n is deliberately not a multiple of the vector width)."""
    from tsar.kernels import kernel_c_dir
    from tsar.sim import compile_c, create_machine
    from tsar.sim.errors import SimulationError

    n = args.n - 3
    x = (rng.standard_normal(n) * 4).astype(np.float32)
    q = np.zeros(n, np.int8)
    amax = np.float32(np.abs(x).max())
    v = x * (np.float32(127) / amax)
    want = np.clip(np.trunc(v + np.where(v >= 0, np.float32(0.5), np.float32(-0.5))), -127, 127)
    machine = create_machine()
    machine.load_elf(compile_c(kernel_c_dir() / "quant_i8.c", opt="-O3"))

    def check(_: object) -> None:
        if not np.array_equal(q, want.astype(np.int8)):
            raise SimulationError("bench", "quant_absmax_i8 result differs from numpy")

    count, sec = _measure(machine, "quant_absmax_i8", (x, q, n), args.repeat, check)
    _report(f"AVX2 quantize  quant_i8.c (gcc -O3 -mavx2 -mfma)  n = {n}:  {count:,} instructions in "
            f"{sec * 1e3:.1f} ms = {count / sec / 1e6:.3f} M simulated instr/s", engine="python",
            kernel="quant_i8.c", instructions=count, seconds=sec, minstr_per_s=count / sec / 1e6)


VNNI_FLAGS = ("-mavx512f", "-mavx512bw", "-mavx512vnni")
VNNI_ROWS = 64
"""Rows of the AVX-512 GEMV measured (of the --m x --k layer: enough for a steady rate)."""


def _bench_vnni(args: argparse.Namespace, rng: np.random.Generator) -> None:
    """gcc -O3 -mavx512vnni int2 GEMV (``gemv_i2_vnni512.c``: 2-bit codes unpacked with shifts and
    masks, vpdpbusd against int8 activations): the simulator's speed on AVX-512 int8 code."""
    from tsar.kernels import kernel_c_dir
    from tsar.sim import compile_c, create_machine
    from tsar.sim.errors import SimulationError

    k = max(256, args.k - args.k % 256)
    rows = min(args.m, VNNI_ROWS)
    codes = rng.integers(0, 3, (rows, k)).astype(np.uint8)
    act = rng.integers(-128, 128, k).astype(np.int8)
    blocks = codes.reshape(rows, k // 256, 4, 64)
    w = (blocks[:, :, 0] | blocks[:, :, 1] << 2 | blocks[:, :, 2] << 4 | blocks[:, :, 3] << 6)
    w = np.ascontiguousarray(w.astype(np.uint8).reshape(rows, -1))
    out = np.zeros(rows, np.int32)
    want = (codes.astype(np.int64) - 1) @ act.astype(np.int64)
    machine = create_machine()
    machine.load_elf(compile_c(kernel_c_dir() / "gemv_i2_vnni512.c", VNNI_FLAGS, opt="-O3"))

    def check(_: object) -> None:
        if not np.array_equal(out, want):
            raise SimulationError("bench", "gemv_i2_vnni512 result differs from numpy")

    count, sec = _measure(machine, "gemv_i2_vnni512", (w, act, out, rows, k), args.repeat, check)
    _report(f"AVX-512 VNNI int2 GEMV  gemv_i2_vnni512.c (gcc -O3 -mavx512vnni)  {rows} x {k}:  "
            f"{count:,} instructions in {sec * 1e3:.1f} ms = {count / sec / 1e6:.3f} M simulated instr/s",
            engine="python", kernel="gemv_i2_vnni512.c", shape=[1, rows, k], instructions=count,
            seconds=sec, minstr_per_s=count / sec / 1e6)


def _bench_bitlinear(args: argparse.Namespace, rng: np.random.Generator) -> None:
    """One token through a generated BitLinear kernel (quantize, T-SAR core, dequantize)."""
    from tsar.kernels import reference
    from tsar.kernels.formats.tsar import pack_weights
    from tsar.kernels.tsar_codegen import function_name
    from tsar.sim import create_machine
    from tsar.sim.errors import SimulationError
    from tsar.simulate.tsar_kernel import plan_for, program_for

    plan = plan_for(args.kernel, args.m, args.k)
    x = rng.standard_normal((1, plan.K)).astype(np.float32)
    w_t = rng.integers(-1, 2, (plan.M, plan.K)).astype(np.int8)
    machine = create_machine()
    entry = machine.load_program(program_for(plan))[function_name(plan)]
    y = np.zeros((1, plan.M), np.float32)
    workspace = np.zeros(plan.workspace_bytes, np.uint8)
    scale = np.array([0.5], np.float32)
    want = reference.bitlinear(x, w_t, 0.5)

    def check(_: object) -> None:
        if not np.array_equal(y.view(np.uint32), want.view(np.uint32)):
            raise SimulationError("bench", f"{plan.name} result differs from the reference")

    n, sec = _measure(machine, entry, (x, pack_weights(plan, w_t), y, 1, workspace, scale),
                      args.repeat, check)
    _report(f"T-SAR BitLinear  {plan.name}  1 x {plan.M} x {plan.K}:  {n:,} instructions in "
            f"{sec * 1e3:.1f} ms = {n / sec / 1e6:.3f} M simulated instr/s", engine="python",
            kernel=plan.name, shape=[1, plan.M, plan.K], instructions=n, seconds=sec,
            minstr_per_s=n / sec / 1e6)
    return n


def _bench_native(args: argparse.Namespace, rng: np.random.Generator, count: int | None) -> None:
    """The BitLinear kernel on the native engine (in process and in the worker), its rate in
    simulated instructions (the Python engine's count of the same call), and native TL2 on the
    same layer; times are medians of alternating runs."""
    from tsar.kernels import reference
    from tsar.kernels.baselines import prepare, time_matmul
    from tsar.kernels.formats.tsar import pack_weights
    from tsar.kernels.tsar_codegen import function_name
    from tsar.sim import create_machine
    from tsar.sim.errors import SimulationError
    from tsar.simulate.tsar_kernel import plan_for, program_for

    plan = plan_for(args.kernel, args.m, args.k)
    x = rng.standard_normal((1, plan.K)).astype(np.float32)
    w_t = rng.integers(-1, 2, (plan.M, plan.K)).astype(np.int8)
    stream = pack_weights(plan, w_t)
    want = reference.bitlinear(x, w_t, 0.5)
    if count is None:
        python = create_machine()
        entry = python.load_program(program_for(plan))[function_name(plan)]
        python.call(entry, x, stream, np.zeros((1, plan.M), np.float32), 1,
                    np.zeros(plan.workspace_bytes, np.uint8), np.array([0.5], np.float32))
        count = python.stats.instructions
    engines = {"in process": create_machine("native", in_process=True), "worker": create_machine("native")}
    entries = {k: m.load_program(program_for(plan))[function_name(plan)] for k, m in engines.items()}
    tl2 = prepare("tl2", w_t, 0.5)
    times: dict[str, list[float]] = {k: [] for k in [*engines, "TL2"]}
    for _ in range(max(args.repeat, 5)):
        for key, machine in engines.items():
            y = np.zeros((1, plan.M), np.float32)
            machine.call(entries[key], x, stream, y, 1, np.zeros(plan.workspace_bytes, np.uint8),
                         np.array([0.5], np.float32), returns="none")
            if not np.array_equal(y.view(np.uint32), want.view(np.uint32)):
                raise SimulationError("bench", f"native {plan.name} result differs from the reference")
            times[key].append(machine.stats.wall_seconds)
        times["TL2"].append(float(np.median(time_matmul([tl2], x, 1, repeats=20))))
    for key in engines:
        sec = float(np.median(times[key]))
        spread = (max(times[key]) - min(times[key])) / sec * 100
        _report(f"native engine ({key})  {plan.name}  1 x {plan.M} x {plan.K}:  {sec * 1e3:.3f} ms "
                f"(spread {spread:.0f} %) = {count / sec / 1e6:.1f} M simulated instr/s "
                f"({count:,} instructions counted by the Python engine)", engine=f"native {key}",
                kernel=plan.name, shape=[1, plan.M, plan.K], instructions=count, seconds=sec,
                spread_pct=spread, minstr_per_s=count / sec / 1e6)
    tl2_sec = float(np.median(times["TL2"]))
    _report(f"native TL2 (bitnet.cpp format, 1 thread)  1 x {plan.M} x {plan.K}:  {tl2_sec * 1e3:.3f} ms; "
            f"T-SAR layer on the native engine / TL2: {np.median(times['in process']) / tl2_sec:.1f}x "
            f"(emulated T-SAR instructions: not a hardware comparison)", engine="host",
            kernel="tl2", shape=[1, plan.M, plan.K], seconds=tl2_sec)
