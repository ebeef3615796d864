"""Per-layer dataflow selection: every candidate T-SAR kernel timed by the comparison's estimator.

For a layer shape ``N x M x K`` every candidate kernel's counts come from
:func:`tsar.estimate.layer.counts_for` (one simulated token for the per-token dataflows, one block of
``min(N, GEMM_BLOCK)`` tokens for the token-blocked GEMM dataflows ``op-tokens`` / ``ap-tokens``;
cached on disk) and its time from :func:`tsar.estimate.layer.modelled` on a platform: the timing model
(:func:`tsar.sim.timing.predict.predict`: loops bounded by ports, front end, taken branches and
loop-carried chains, plus the data streams of the layer from the level that holds them) scaled to
``N`` tokens. This is the estimator ``tsar compare``, the model estimates and the report use, so the
kernel selected here is the one those commands find fastest. For reference the table also shows the
whole-run throughput bounds (ports and issue width over all executed instructions, L1 bytes / 64 B
per cycle). The paper's framework picks the fastest kernel per layer in the same spirit.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat

from tsar.estimate.layer import counts_for, counts_request, modelled, platform_named
from tsar.frames import Tabular
from tsar.kernels.tsar_plan import kernel_names
from tsar.sim.platforms import Platform
from tsar.sim.timing.adapters import profile_from_counts
from tsar.sim.timing.core import core_bound
from tsar.sim.uarch import load as load_uarch
from tsar.simulate.counts import KernelCounts, announced, worker_pool, workers

L1_BYTES_PER_CYCLE = 64.0
"""Sustained L1 bytes per cycle assumed for the traffic bound (two 32-byte loads per cycle)."""


@dataclass(frozen=True)
class Candidate:
    """One kernel's simulated counts and its estimated cycles, all per token.

    ``port_cycles`` / ``frontend_cycles`` / ``traffic_cycles``: whole-run throughput bounds of the
    core (no loop structure, no memory hierarchy); ``predicted_cycles``: the layer estimate
    (:func:`tsar.estimate.layer.modelled`, data streams included), which is what :attr:`cycles`
    returns; ``bound``: its binding limit; ``simulated_tokens``: tokens of the simulated run.
    """

    kernel: str
    instructions: int
    tsar_uops: int
    vector_bytes: int
    port_cycles: float
    frontend_cycles: float
    traffic_cycles: float
    predicted_cycles: float
    bound: str
    simulated_tokens: int = 1

    @property
    def cycles(self) -> float:
        """Estimated cycles per token (the layer estimate)."""
        return self.predicted_cycles


@dataclass(frozen=True)
class Selection(Tabular):
    M: int
    K: int
    N: int
    platform: str
    candidates: tuple[Candidate, ...]

    @property
    def best(self) -> Candidate:
        return min(self.candidates, key=lambda c: (c.cycles, c.instructions))

    def records(self) -> list[dict]:
        return [{"kernel": c.kernel, "instructions": c.instructions, "tsar_uops": c.tsar_uops,
                 "vector_bytes": c.vector_bytes, "predicted_cycles": c.predicted_cycles,
                 "simulated_tokens": c.simulated_tokens, "cycles_per_token": c.cycles, "bound": c.bound,
                 "selected": c is self.best, "N": self.N, "M": self.M, "K": self.K,
                 "platform": self.platform}
                for c in sorted(self.candidates, key=lambda c: (c.cycles, c.instructions))]

    def table(self) -> str:
        rows = [f"{'kernel':22} {'instr/token':>12} {'T-SAR uops':>11} {'vector B':>11} "
                f"{'port cyc':>10} {'issue cyc':>10} {'L1 cyc':>9} {'simulated':>9} "
                f"{'est. cycles':>12}  bound"]
        for c in sorted(self.candidates, key=lambda c: (c.cycles, c.instructions)):
            mark = "  <- selected" if c is self.best else ""
            rows.append(f"{c.kernel:22} {c.instructions:12,} {c.tsar_uops:11,} {c.vector_bytes:11,} "
                        f"{c.port_cycles:10,.0f} {c.frontend_cycles:10,.0f} {c.traffic_cycles:9,.0f} "
                        f"{c.simulated_tokens:>6} tk {c.cycles * self.N:12,.0f}  {c.bound}{mark}")
        return "\n".join(rows)


def candidate(c: KernelCounts, plat: Platform, N: int) -> Candidate:
    """Per-token counts, throughput bounds and layer estimate of one kernel's simulated run."""
    t = c.tokens
    profile = profile_from_counts(c.code, c.code_address, c.stats.per_address, name=c.kernel)
    bound = core_bound(profile, load_uarch(plat.core.uarch), strict=False)
    vector_bytes = c.stats.vector_bytes_read + c.stats.vector_bytes_written
    seconds, limit = modelled(c, plat, N, threads=1)
    return Candidate(c.kernel, round(c.stats.instructions / t), round(c.stats.tsar_uops / t),
                     round(vector_bytes / t), bound.port_cycles / t, bound.frontend_cycles / t,
                     vector_bytes / L1_BYTES_PER_CYCLE / t,
                     seconds * plat.core.frequency_ghz * 1e9 / N, limit, simulated_tokens=t)


DEFAULT_PLATFORM = "laptop"
"""The platform a selection models when none is named (the paper's Laptop)."""


def candidates(platform: str | Platform = DEFAULT_PLATFORM) -> tuple[str, ...]:
    """The T-SAR kernels a selection on ``platform`` ranks: every registered configuration's whose
    width the platform's ISA has."""
    plat = platform_named(platform) if isinstance(platform, str) else platform
    return kernel_names(plat.core.isa)


def select(M: int, K: int, N: int = 1, *, kernels: tuple[str, ...] | None = None,
           platform: str | Platform = DEFAULT_PLATFORM) -> Selection:
    """Rank every candidate kernel (default: every registered one the platform runs) on an ``M x K``
    layer for ``N`` tokens on one core of ``platform`` (a name, a .toml file, or a :class:`Platform`)."""
    if N < 1:
        raise ValueError(f"N must be at least 1, got {N}")
    plat = platform_named(platform) if isinstance(platform, str) else platform
    kernels = candidates(plat) if kernels is None else kernels
    with announced([counts_request(kernel, N, M, K) for kernel in kernels]):  # simulated in parallel
        counts = [counts_for(kernel, N, M, K) for kernel in kernels]
    if len(kernels) < 4 or workers() < 2:
        return Selection(M, K, N, plat.name, tuple(candidate(c, plat, N) for c in counts))
    pool = worker_pool()  # the timing model's work, in parallel too
    with pool:
        out = tuple(pool.map(candidate, counts, repeat(plat), repeat(N)))
    return Selection(M, K, N, plat.name, out)
