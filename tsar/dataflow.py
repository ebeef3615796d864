"""Per-layer dataflow selection from simulated instruction and memory-traffic counts.

For a layer shape every candidate T-SAR kernel is simulated once, for one token (the kernels' control
flow does not depend on the data, and tokens run one after another, so counts scale exactly with
N), except ``ap-tokens`` where several tokens share each weight operand in registers: it runs one
block of ``min(N, TOKEN_BLOCK)`` tokens (:meth:`~tsar.kernels.tsar_plan.KernelPlan.tokens_for_counts`)
and its counts are divided by them. The estimate per token is
:func:`tsar.sim.timing.predict.predict` on a platform with the chosen
microarchitecture: the loops of the executed code, each bounded by port pressure, front end, taken
branches and loop-carried dependency chains (e.g. TGEMV accumulator chains), plus straight-line
code, combined with the L1D transfer time of all accessed bytes. Weight streaming is added per
token for ``N`` tokens (:func:`stream_cycles`): the per-token dataflows read the layer's weights
once per token from the level that holds the layer (L3 or DRAM); the token-blocked GEMM dataflows
(``op-tokens``, ``ap-tokens``) read them from there once per block of tokens and, for the block's
other tokens, from the cache holding what the block reuses (``op-tokens``: one pass over K;
``ap-tokens``: one chunk of a tile block, in L1), which is what makes them the prefill kernels.
For reference the table also shows the
whole-run throughput bounds (ports and issue width over all executed instructions, L1 bytes / 64 B
per cycle) that the selection used before the timing model existed. The paper's framework picks
the fastest kernel per layer in the same spirit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tsar.frames import Tabular
from tsar.kernel_sim import plan_for, program_for, simulate
from tsar.kernels.tsar_plan import TOKEN_BLOCK, KernelPlan, kernel_names
from tsar.sim import Stats
from tsar.sim.platforms import Platform
from tsar.sim.timing.adapters import profile_from_counts
from tsar.sim.timing.core import core_bound
from tsar.sim.timing.predict import predict
from tsar.sim.uarch import load as load_uarch

L1_BYTES_PER_CYCLE = 64.0
"""Sustained L1 bytes per cycle assumed for the traffic bound (two 32-byte loads per cycle)."""


@dataclass(frozen=True)
class Candidate:
    """One kernel's simulated counts for one token and its estimated cycles per token.

    ``port_cycles`` / ``frontend_cycles`` / ``traffic_cycles``: whole-run throughput bounds (no
    loop structure); ``predicted_cycles``: the timing model's estimate (:func:`predict`), which
    is what :attr:`cycles` returns; ``bound``: its binding limit.
    """

    kernel: str
    instructions: int
    tsar_uops: int
    vector_bytes: int
    port_cycles: float
    frontend_cycles: float
    traffic_cycles: float
    predicted_cycles: float | None = None
    bound: str = ""
    stream_cycles: float = 0.0
    simulated_tokens: int = 1

    @property
    def throughput_cycles(self) -> float:
        """The whole-run throughput bound: max(ports, issue, L1 traffic) cycles per token."""
        return max(self.port_cycles, self.frontend_cycles, self.traffic_cycles)

    @property
    def cycles(self) -> float:
        """Estimated cycles per token: the timing model's (else the throughput bound), or the
        weight streaming time when that is longer."""
        core = self.predicted_cycles if self.predicted_cycles is not None else self.throughput_cycles
        return max(core, self.stream_cycles)


@dataclass(frozen=True)
class Selection(Tabular):
    M: int
    K: int
    N: int
    uarch: str
    candidates: tuple[Candidate, ...]

    @property
    def best(self) -> Candidate:
        return min(self.candidates, key=lambda c: (c.cycles, c.instructions))

    def records(self) -> list[dict]:
        return [{"kernel": c.kernel, "instructions": c.instructions, "tsar_uops": c.tsar_uops,
                 "vector_bytes": c.vector_bytes, "predicted_cycles": c.predicted_cycles,
                 "stream_cycles": c.stream_cycles, "cycles_per_token": c.cycles, "bound": c.bound,
                 "selected": c is self.best, "N": self.N, "M": self.M, "K": self.K}
                for c in sorted(self.candidates, key=lambda c: (c.cycles, c.instructions))]

    def table(self) -> str:
        rows = [f"{'kernel':22} {'instr/token':>12} {'T-SAR uops':>11} {'vector B':>11} "
                f"{'port cyc':>10} {'issue cyc':>10} {'L1 cyc':>9} {'stream cyc':>11} "
                f"{'est. cycles':>12}  bound"]
        for c in sorted(self.candidates, key=lambda c: (c.cycles, c.instructions)):
            mark = "  <- selected" if c is self.best else ""
            bound = "weight stream" if c.stream_cycles > (c.predicted_cycles or 0) else c.bound
            rows.append(f"{c.kernel:22} {c.instructions:12,} {c.tsar_uops:11,} {c.vector_bytes:11,} "
                        f"{c.port_cycles:10,.0f} {c.frontend_cycles:10,.0f} {c.traffic_cycles:9,.0f} "
                        f"{c.stream_cycles:11,.0f} {c.cycles * self.N:12,.0f}  {bound}{mark}")
        return "\n".join(rows)


def platform_for(uarch_name: str) -> Platform:
    """A shipped platform whose core uses ``uarch_name`` (Zen 4: laptop; Gracemont: mobile), else
    the laptop platform with its core data set replaced (caches and clock kept)."""
    from tsar.sim.platforms import SHIPPED, load

    for name in SHIPPED:
        plat = load(name)
        if plat.core.uarch == uarch_name and plat.core.issue_width is None:
            return plat
    plat = load("laptop")
    return replace(plat, core=replace(plat.core, uarch=uarch_name, uarch_proxy=True, issue_width=None))


def _level_bandwidth(plat: Platform, nbytes: float) -> float:
    """Bytes per cycle one core streams from the innermost level whose usable capacity holds
    ``nbytes`` (DRAM when none does)."""
    for level in plat.caches:
        if nbytes <= level.size * level.usable_fraction:
            return level.bandwidth
    return plat.dram.per_core_gbs / plat.core.frequency_ghz


def stream_cycles(plan: KernelPlan, n: int, plat: Platform) -> float:
    """Cycles per token to bring the weights to L1: the layer's weights from the level that holds
    them, once per token, except that the token-blocked dataflows read them from there once per
    block of ``min(n, token_block)`` tokens and from the level holding what the block reuses
    (:attr:`~tsar.kernels.tsar_plan.KernelPlan.reuse_bytes`: ``op-tokens`` one pass over K,
    ``ap-tokens`` one chunk of a tile block) for the others."""
    layer = plan.weight_bytes
    reuse = min(n, plan.token_block)
    outer = _level_bandwidth(plat, layer)
    if reuse == 1:
        return layer / outer
    inner = _level_bandwidth(plat, plan.reuse_bytes)
    return layer / reuse / outer + layer * (1 - 1 / reuse) / inner


def estimate(kernel: str, stats: Stats, code_base: int, code: bytes, uarch_name: str,
             tokens: int = 1) -> Candidate:
    """Estimate (cycles per token) of one simulated run of ``tokens`` tokens: the timing model's
    prediction plus the whole-run throughput bounds for reference, all divided by ``tokens``."""
    profile = profile_from_counts(code, code_base, stats.per_address, name=kernel)
    bound = core_bound(profile, load_uarch(uarch_name), strict=False)
    vector_bytes = stats.vector_bytes_read + stats.vector_bytes_written
    pred = predict(stats, code, code_base, platform_for(uarch_name))
    return Candidate(kernel, round(stats.instructions / tokens), round(stats.tsar_uops / tokens),
                     round(vector_bytes / tokens), bound.port_cycles / tokens,
                     bound.frontend_cycles / tokens, vector_bytes / L1_BYTES_PER_CYCLE / tokens,
                     pred.cycles / tokens, pred.bound, simulated_tokens=tokens)


def select(M: int, K: int, N: int = 1, *, kernels: tuple[str, ...] | None = None,
           uarch: str = "zen4", seed: int = 0) -> Selection:
    """Simulate every candidate kernel on an ``M x K`` layer and rank them for ``N`` tokens."""
    kernels = kernel_names() if kernels is None else kernels  # the configurations registered now
    rng = np.random.default_rng(seed)
    w_t = rng.integers(-1, 2, (M, K)).astype(np.int8)
    x = rng.standard_normal((max(1, min(N, TOKEN_BLOCK)), K)).astype(np.float32)
    out = []
    for kernel in kernels:
        plan = plan_for(kernel, M, K)
        tokens = max(1, plan.tokens_for_counts(N))
        run = simulate(plan, x[:tokens], w_t, 1.0)
        if not run.exact:
            raise RuntimeError(f"{kernel} disagrees with the reference on {M} x {K}")
        cand = estimate(kernel, run.stats, run.code_address, program_for(plan).code, uarch, tokens)
        out.append(replace(cand, stream_cycles=stream_cycles(plan, N, platform_for(uarch))))
    return Selection(M, K, N, uarch, tuple(out))
