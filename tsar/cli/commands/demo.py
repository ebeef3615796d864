"""``tsar demo``: the whole pipeline on a BitNet-b1.58-2B-4T layer, in about half a minute.

ISA -> assembler -> simulator (bit-exact against the reference) -> RTL cycle check -> on this
machine, T-SAR proxy-measured against natives measured and T-SAR modelled against natives modelled
-> the paper's platforms (modelled against modelled, with the model's validated error).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from tsar import console
from tsar.cli.argtypes import positive_int, seed
from tsar.cli.shapes import DEFAULT_SHAPE
from tsar.isa.config import PAPER_CONFIGS
from tsar.kernels.tsar_plan import kernel_name
from tsar.sim.platforms import SHIPPED

NAME = "demo"
HELP = "run the whole T-SAR pipeline on a BitNet-2B layer (the README's main command)"

DEMO_KERNELS = tuple(kernel_name(cfg, "op") for cfg in PAPER_CONFIGS)
"""The output-persistent kernels of the paper's two AVX2 configurations (``tsar-c2s4-op``,
``tsar-c4s4-op``)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", default=DEFAULT_SHAPE,
                        help="N x M x K of the layer (default: BitNet-2B attention projection)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the random layer")
    parser.add_argument("--repeats", type=positive_int, default=30, help="native timing repeats (median)")


class _Progress:
    """The demo's steps, numbered on stdout (they are its output); silent stretches inside a step
    get the heartbeat on stderr (tsar.console.watch)."""

    def __init__(self, steps: int) -> None:
        self.steps, self.step, self.start = steps, 0, time.perf_counter()

    def __call__(self, title: str) -> None:
        self.step += 1
        elapsed = time.perf_counter() - self.start
        print(f"\n[{self.step}/{self.steps}] {title}  (t = {elapsed:.0f} s)", flush=True)
        console.activity(f"[{self.step}/{self.steps}] {title}")  # the heartbeat's, on stderr


def _pm(row) -> str:
    """A modelled time with its error bar, in microseconds."""
    err = f" ±{100 * row.model_error:3.0f}%" if row.model_error is not None else "      "
    return f"{row.seconds * 1e6:8.1f} us{err}"


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def run(args: argparse.Namespace) -> int:
    from tsar.cli.shapes import parse_shape
    from tsar.compare import compare, isa_name
    from tsar.isa import configs
    from tsar.kernels import quant
    from tsar.rtl.bench import measured_cycles
    from tsar.simulate.tsar_kernel import plan_for, program_for, simulate

    n, m, k = parse_shape(args.shape)
    step = _Progress(5)
    ok = True

    step("ISA and assembler: the registered T-SAR configurations, one generated kernel")
    for cfg in configs():
        print(f"  {cfg.name:9} {cfg.title}: LUT group {cfg.group_regs} regs, "
              f"uops TLUT {cfg.tlut_uops} / TGEMV {cfg.tgemv_uops}, widen every "
              f"{cfg.max_tgemv_per_widen()} TGEMVs")
    program = program_for(plan_for(DEMO_KERNELS[0], m, k))
    tsar_rows = [e for e in program.listing if e.tsar]
    print(f"  {DEMO_KERNELS[0]} for {m} x {k}: {len(program.code)} bytes, "
          f"{len(tsar_rows)} T-SAR instructions, e.g.")
    for entry in tsar_rows[:2]:
        print(f"    {entry.address:6x}  {entry.data.hex(' '):<28} {entry.source.strip()}")

    step(f"simulate T-SAR BitLinear {n} x {m} x {k} and check it bit for bit")
    rng = np.random.default_rng(args.seed)
    w_t, w_scale = quant.ternarize(rng.standard_normal((m, k)).astype(np.float32))
    x = rng.standard_normal((n, k)).astype(np.float32)
    runs = {}
    for kernel in DEMO_KERNELS:
        t0 = time.perf_counter()
        run_ = simulate(plan_for(kernel, m, k), x, w_t, w_scale)
        runs[kernel] = run_
        ok &= run_.exact
        s = run_.stats
        print(f"  {kernel:14} {'bit-exact' if run_.exact else 'MISMATCH':9} "
              f"{s.instructions:>9,} instr ({s.by_class['tsar']:,} T-SAR, {s.tsar_uops:,} uops), "
              f"{s.vector_bytes_read + s.vector_bytes_written:>10,} vector B, "
              f"simulated in {time.perf_counter() - t0:.1f} s", flush=True)

    step("RTL: cycles per instruction measured on the Amaranth slice vs the ISA's uop counts")
    for cfg in [c for c in configs() if c.vector_bits == 256]:
        cycles = measured_cycles(cfg)
        rtl = {cfg.tlut_mnemonic: cfg.tlut_uops, cfg.tgemv_mnemonic: cfg.tgemv_uops}
        agree = all(cycles[mn] == uops for mn, uops in rtl.items())
        ok &= agree
        print(f"  {cfg.name}: " + ", ".join(f"{mn} {cycles[mn]} cycles (ISA {u} uops)"
                                            for mn, u in rtl.items()) + ("" if agree else "  MISMATCH"))

    step(f"this machine, like for like: T-SAR through the proxy engine against natives measured, "
         f"T-SAR modelled against natives modelled, {n} x {m} x {k}")
    host_cmp = compare(n, m, k, "host", repeats=args.repeats,
                       progress=lambda msg: console.progress(f"  .. {msg}"))
    print(_indent(host_cmp.table()))

    step("the same layer modelled on the paper's platforms (T-SAR and the natives' simulated code, "
         "modelled / modelled)")
    for name in SHIPPED:
        c = compare(n, m, k, name, progress=console.detail)
        t, base, native = c.best_tsar, c.baseline, c.best("native")
        traffic = t.bytes_per_token / base.bytes_per_token
        print(f"  {name:12} best T-SAR {t.kernel:16} {_pm(t)}   TL2 {_pm(base)}   speedup "
              f"{base.seconds / t.seconds:5.2f}x   traffic {traffic:4.2f}x of TL2")
        print(f"  {'':12} best native of its ISA: {native.kernel} ({isa_name(native.kernel, native.isa)}) "
              f"{_pm(native)}   T-SAR {native.seconds / t.seconds:5.2f}x it")
    print("  Modelled times carry the model's validated error on this host for the kernel family; "
          + (host_cmp.error_source or "none available (run 'tsar validate-model')") + ".")
    print("\ndemo " + ("passed" if ok else "FAILED") + f" in {time.perf_counter() - step.start:.0f} s")
    sys.stdout.flush()
    return 0 if ok else 1
