"""``tsar demo``: the whole pipeline on a BitNet-b1.58-2B-4T layer, in about a minute.

ISA -> assembler -> simulator (bit-exact against the reference) -> RTL cycle check -> native
baselines measured on this machine -> T-SAR modelled on the host and the paper's platforms.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

NAME = "demo"
HELP = "run the whole T-SAR pipeline on a BitNet-2B layer (the README's main command)"

DEMO_KERNELS = ("tsar-c2s4-op", "tsar-c4s4-op")
NATIVE_KERNELS = ("tl2", "i2s", "int2", "dense")
PLATFORMS = ("host", "workstation", "laptop", "mobile")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", default="1x2560x2560",
                        help="N x M x K of the layer (default: BitNet-2B attention projection)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random layer")
    parser.add_argument("--repeats", type=int, default=30, help="native timing repeats (median)")


class _Progress:
    def __init__(self, steps: int) -> None:
        self.steps, self.step, self.start = steps, 0, time.perf_counter()

    def __call__(self, title: str) -> None:
        self.step += 1
        elapsed = time.perf_counter() - self.start
        print(f"\n[{self.step}/{self.steps}] {title}  (t = {elapsed:.0f} s)", flush=True)


def run(args: argparse.Namespace) -> int:
    from tsar.dataflow import estimate
    from tsar.isa import configs
    from tsar.kernel_cli import parse_shape
    from tsar.kernel_sim import plan_for, program_for, simulate
    from tsar.kernels import bench as native_bench
    from tsar.kernels import quant
    from tsar.kernels.baselines import kernel_isa
    from tsar.platforms import host, load
    from tsar.rtl.bench import measured_cycles
    from tsar.timing.memory import kernel_time, linear_streams

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

    step(f"native baselines on this machine ({n} x {m} x {k}, weights in cache, 1 thread)")
    bandwidth = native_bench.measure_bandwidths([1])[1]
    native = {}
    for name in NATIVE_KERNELS:
        case = native_bench.Case(name, n, m, k, 1, "cache")
        res = native_bench.run_case(case, bandwidth, args.repeats)
        native[name] = res
        print(f"  {name:6} ({kernel_isa(name) or '?'}) {res.seconds * 1e6:9.1f} us  "
              f"{res.gops:7.1f} Gop/s  {res.weight_bytes * 8 / (m * k):.2f} bits/weight", flush=True)
    best_native = min(native.values(), key=lambda r: r.seconds)

    step("T-SAR modelled on each platform (preliminary: throughput + memory bounds)")
    print(f"  {'platform':12} {'uarch':10} " + " ".join(f"{kn:>16}" for kn in DEMO_KERNELS)
          + f" {'TL2 measured':>14} {'best native':>14}")
    for name in PLATFORMS:
        platform = host() if name == "host" else load(name)
        times = []
        for kernel, run_ in runs.items():
            cand = estimate(kernel, run_.stats, run_.code_address, program_for(run_.plan).code,
                            platform.core.uarch)
            kt = kernel_time(cand.cycles, linear_streams(m, k, n, weight_bits=2.0), platform)
            times.append(kt.seconds)
        measured = (f"{native['tl2'].seconds * 1e6:11.1f} us {best_native.seconds * 1e6:11.1f} us"
                    if name == "host" else f"{'-':>14} {'-':>14}")
        print(f"  {name:12} {platform.core.uarch:10} "
              + " ".join(f"{t * 1e6:13.1f} us" for t in times) + f" {measured}")
    host_best = min(
        kernel_time(estimate(kn, r.stats, r.code_address, program_for(r.plan).code,
                             host().core.uarch).cycles,
                    linear_streams(m, k, n, weight_bits=2.0), host()).seconds
        for kn, r in runs.items())
    print(f"\n  host: modelled T-SAR {host_best * 1e6:.1f} us vs measured TL2 "
          f"{native['tl2'].seconds * 1e6:.1f} us ({native['tl2'].seconds / host_best:.2f}x) and best "
          f"native {best_native.case.kernel} {best_native.seconds * 1e6:.1f} us "
          f"({best_native.seconds / host_best:.2f}x)")
    print("  The T-SAR figures come from a throughput model (port pressure, issue width, L1 and "
          "memory bounds) that is not yet validated against the measured native kernels; read "
          "them as estimates.")
    print("\ndemo " + ("passed" if ok else "FAILED") + f" in {time.perf_counter() - step.start:.0f} s")
    sys.stdout.flush()
    return 0 if ok else 1
