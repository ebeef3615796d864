"""``tsar run gemv|gemm``: simulate a T-SAR BitLinear kernel, verify it and print its statistics."""

from __future__ import annotations

import numpy as np

from tsar import console
from tsar.cli.shapes import parse_shape
from tsar.errors import UserError
from tsar.kernels import quant
from tsar.kernels.tsar_plan import kernel_names
from tsar.sim import create_machine
from tsar.simulate.tsar_kernel import plan_for, simulate

MAX_WEIGHTS = 1 << 28
"""Largest layer ``tsar run gemv|gemm`` builds (weights, and tokens x inputs)."""


def run_bitlinear(mode: str, kernel: str, shape: str, *, seed: int = 0, hot: int = 0,
                  engine: str = "python", as_json: bool = False) -> int:
    n, m, k = parse_shape(shape)
    if m * k > MAX_WEIGHTS or n * k > MAX_WEIGHTS:
        raise UserError(f"--shape {shape}: {m:,} x {k:,} weights and {n:,} x {k:,} activations; "
                        f"at most {MAX_WEIGHTS:,} of each (the simulated layer lives in memory)")
    if mode == "gemv" and n != 1:
        raise UserError(f"gemv takes one token (N = 1), got N = {n}; use 'tsar run gemm'")
    expected = None  # instructions of the whole layer, where the selection simulated the kernel
    if kernel == "auto":
        from tsar.estimate.dataflow import candidates, select
        from tsar.estimate.layer import counts_for

        console.progress(f"selecting the dataflow for {n} x {m} x {k}: {len(candidates())} kernels "
                         "simulated (cached after the first run), then their times modelled")
        selection = select(m, k, n)
        kernel = selection.best.kernel
        counts = counts_for(kernel, n, m, k)
        expected = counts.stats.instructions * n / counts.tokens
        if not as_json:
            print(f"dataflow selection for {n} x {m} x {k} (simulated counts per token):")
            print(selection.table())
            print()
    elif kernel not in kernel_names():
        raise UserError(f"unknown kernel {kernel!r} (choose from auto, {', '.join(kernel_names())})")
    plan = plan_for(kernel, m, k)
    rng = np.random.default_rng(seed)
    w_t, w_scale = quant.ternarize(rng.standard_normal((m, k)).astype(np.float32))
    x = rng.standard_normal((n, k)).astype(np.float32)
    say = (lambda *a: None) if as_json else print
    say(f"{kernel}: BitLinear {n} x {m} x {k} ({plan.cfg.title}; {plan.groups} LUT group(s), "
        f"{plan.accumulators} accumulator(s); weights {plan.weight_bytes:,} B at 2 bits/weight)")
    machine = create_machine(engine)
    console.progress(f"simulating {kernel} on {n} x {m} x {k} ({engine} engine), then checking it")
    if engine == "python":  # its heartbeat: (instructions so far, seconds) every 2 s of a call
        work = console.Work(f"  {kernel}", expected, unit="instructions")
        machine.heartbeat = lambda count, _seconds: work(count)
    run = simulate(plan, x, w_t, w_scale, machine=machine, memory_stats=engine == "python")
    if as_json:
        from tsar.jsonout import emit, stats_fields

        emit("run-bitlinear", mode=mode, kernel=kernel, shape=[n, m, k], engine=engine,
             exact=run.exact, mismatches=run.mismatches, stats=stats_fields(run.stats))
        return 0 if run.exact else 1
    verdict = "bit-exact" if run.exact else f"MISMATCH in {run.mismatches} of {run.y.size} outputs"
    print(f"verified against tsar.kernels.reference.bitlinear: {verdict}")
    stats = run.stats
    if engine == "native":
        print(f"native engine: {stats.summary()}")
        return 0 if run.exact else 1
    print(stats.summary())
    tsar_instr = sum(stats.by_mnemonic[mn] for mn in (plan.cfg.tlut_mnemonic, plan.cfg.tgemv_mnemonic))
    print(f"per token           {stats.instructions / n:,.0f} instructions "
          f"({tsar_instr / n:,.0f} T-SAR), {stats.tsar_uops / n:,.0f} T-SAR uops, "
          f"{(stats.vector_bytes_read + stats.vector_bytes_written) / n:,.0f} vector bytes")
    if hot:
        print(f"hot instructions (top {hot}):")
        for addr, count in stats.per_address.most_common(hot):
            print(f"  {addr:#x} {count:>10,}")
    return 0 if run.exact else 1
