"""Thread scaling of a layer on a platform, modelled (the T-SAR paper's Fig. 10 view).

For one ``N x M x K`` layer, at 1, 2, 4, ... threads up to the platform's count: the fastest T-SAR
kernel the platform runs, TL2 and the fastest native baseline, each timed by the timing model from
its simulated counts (:func:`tsar.estimate.layer.modelled`, the estimator ``compare`` uses) at that
many threads; speedups are ratios of two modelled times. The model's scaling is validated on the
host by ``tsar validate-model`` (its thread-scaling cases, docs/timing.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tsar.estimate.layer import counts_for, counts_request, modelled, platform_named
from tsar.frames import Tabular
from tsar.kernels.tsar_plan import kernel_names
from tsar.sim.timing.memory import thread_counts
from tsar.simulate.counts import announced
from tsar.simulate.native_kernel import natives_for

BASELINE = "tl2"


@dataclass(frozen=True)
class ScalingPoint:
    """One thread count: the fastest T-SAR kernel, TL2 and the fastest native, modelled seconds."""

    threads: int
    tsar_kernel: str
    tsar_seconds: float
    tl2_seconds: float
    native_kernel: str
    native_seconds: float
    bound: str          # the fastest T-SAR kernel's bound

    @property
    def over_tl2(self) -> float:
        return self.tl2_seconds / self.tsar_seconds

    @property
    def over_native(self) -> float:
        return self.native_seconds / self.tsar_seconds


@dataclass(frozen=True)
class ThreadSweep(Tabular):
    N: int
    M: int
    K: int
    platform: str
    points: tuple[ScalingPoint, ...]

    def records(self) -> list[dict]:
        return [{"N": self.N, "M": self.M, "K": self.K, "platform": self.platform, "threads": p.threads,
                 "tsar_kernel": p.tsar_kernel, "tsar_s": p.tsar_seconds, "tl2_s": p.tl2_seconds,
                 "native_kernel": p.native_kernel, "native_s": p.native_seconds,
                 "speedup_over_tl2": p.over_tl2, "speedup_over_native": p.over_native, "bound": p.bound}
                for p in self.points]

    def table(self) -> str:
        head = (f"{'threads':>7} {'T-SAR (fastest)':>26} {'us':>9} {'TL2 us':>9} {'vs TL2':>7} "
                f"{'best native':>16} {'us':>9} {'vs it':>6}  bound")
        rows = [f"thread scaling, {self.N} x {self.M} x {self.K} on {self.platform} (modelled against "
                "modelled)", head, "-" * len(head)]
        rows += [f"{p.threads:7d} {p.tsar_kernel:>26} {p.tsar_seconds * 1e6:9.1f} {p.tl2_seconds * 1e6:9.1f} "
                 f"{p.over_tl2:6.2f}x {p.native_kernel:>16} {p.native_seconds * 1e6:9.1f} "
                 f"{p.over_native:5.2f}x  {p.bound}" for p in self.points]
        return "\n".join(rows)


def sweep(N: int, M: int, K: int, platform: str, threads: Sequence[int] | None = None,
          progress: Callable[[str], None] | None = None, *, tsar_kernels: Sequence[str] | None = None,
          natives: Sequence[str] | None = None) -> ThreadSweep:
    """Model the layer at each of ``threads`` (default :func:`thread_counts` of the platform's),
    over ``tsar_kernels`` and ``natives`` (default: every one the platform runs; TL2 is always
    among the natives)."""
    from tsar.errors import UserError

    plat = platform_named(platform)
    counts = tuple(threads or thread_counts(max(plat.threads, 1)))
    if min(counts) < 1 or max(counts) > max(plat.threads, 1):
        raise UserError(f"thread counts {counts}: {plat.name} has {plat.threads} hardware threads")
    tsar_kernels = tuple(kernel_names(plat.core.isa) if tsar_kernels is None else tsar_kernels)
    natives = tuple(dict.fromkeys((BASELINE, *(natives_for(plat.core.isa) if natives is None else natives))))
    say = progress or (lambda _m: None)
    say(f"{plat.name}: {N} x {M} x {K}, the counts of {len(tsar_kernels)} T-SAR kernels and "
        f"{len(natives)} natives (simulated once, then cached)")
    with announced([counts_request(k, N, M, K) for k in (*tsar_kernels, *natives)]):
        simulated = {k: counts_for(k, N, M, K) for k in (*tsar_kernels, *natives)}
    points = []
    for t in counts:
        times = {k: modelled(c, plat, N, t) for k, c in simulated.items()}
        best = min(tsar_kernels, key=lambda k: times[k][0])
        native = min(natives, key=lambda k: times[k][0])
        points.append(ScalingPoint(t, best, times[best][0], times[BASELINE][0], native, times[native][0],
                                   times[best][1]))
    return ThreadSweep(N, M, K, plat.name, tuple(points))
