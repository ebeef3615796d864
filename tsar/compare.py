"""The headline comparison: simulated T-SAR kernels against the native TL2 and other baselines.

For one layer shape (N tokens x M outputs x K inputs) and one platform:

* T-SAR kernels: simulated (:mod:`tsar.counts`) and timed by the timing model
  (:func:`tsar.sim.timing.predict.predict`) on the platform. The per-token dataflows are simulated
  on one token and scaled by N (they run tokens one after another and re-stream their weights); for
  N > 1 the token-blocked GEMM dataflows are simulated on one block of ``GEMM_BLOCK`` tokens and
  scaled by N / GEMM_BLOCK (:mod:`tsar.layer_time`, the estimator the dataflow selection uses too);
* native baselines: on ``host`` *measured* natively (quantization and dequantization included, as
  for T-SAR; for N > 1 their token-blocked GEMM loops run); on the other platforms *modelled* from
  the simulated counts of the same C code's integer core, one token for N = 1 and one block of
  ``GEMM_BLOCK`` tokens through the same GEMM loops for N > 1 (this leaves out their
  quantize/dequantize, which favours the baselines slightly);
* memory traffic: bytes loaded and stored per token by each kernel's instructions in the simulator
  (the paper's Figure 9 metric; TL2's lookups in its activation tables count here).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tsar.console import Steps
from tsar.errors import UserError
from tsar.frames import Tabular
from tsar.kernel_sim import KERNEL_NAMES
from tsar.kernels.registry import COMPARED
from tsar.layer_time import counts_for, modelled, platform_named
from tsar.native_sim import NATIVE_SIM_KERNELS

BASELINE = "tl2"
MEASURED_NATIVE = COMPARED


@dataclass(frozen=True)
class Row:
    kernel: str
    family: str          # "T-SAR" or "native"
    method: str          # how the time was obtained
    seconds: float       # for all N tokens
    bytes_per_token: float | None
    bits_per_weight: float
    bound: str = ""
    spread: float | None = None  # measured: interquartile range / median of the timed calls

    def gops(self, n: int, m: int, k: int) -> float:
        return 2.0 * n * m * k / self.seconds / 1e9


@dataclass(frozen=True)
class Comparison(Tabular):
    N: int
    M: int
    K: int
    platform: str
    threads: int
    rows: tuple[Row, ...]
    skipped: tuple[tuple[str, str], ...] = ()  # (kernel, why): baselines whose format cannot take the shape

    def row(self, kernel: str) -> Row:
        for r in self.rows:
            if r.kernel == kernel:
                return r
        raise KeyError(kernel)

    @property
    def baseline(self) -> Row:
        return self.row(BASELINE)

    @property
    def best_tsar(self) -> Row:
        return min((r for r in self.rows if r.family == "T-SAR"), key=lambda r: r.seconds)

    @property
    def best_native(self) -> Row:
        return min((r for r in self.rows if r.family == "native"), key=lambda r: r.seconds)

    def records(self) -> list[dict]:
        """One row per kernel: time, Gop/s, speedup over TL2, traffic (see :meth:`table`)."""
        base = self.baseline
        return [{"kernel": r.kernel, "family": r.family, "method": r.method, "seconds": r.seconds,
                 "gops": r.gops(self.N, self.M, self.K), "speedup": base.seconds / r.seconds,
                 "bytes_per_token": r.bytes_per_token, "bits_per_weight": r.bits_per_weight,
                 "bound": r.bound, "spread": r.spread, "N": self.N, "M": self.M, "K": self.K,
                 "platform": self.platform, "threads": self.threads}
                for r in sorted(self.rows, key=lambda r: r.seconds)]

    def table(self) -> str:
        base = self.baseline
        head = (f"{self.N} x {self.M} x {self.K} on {self.platform}, {self.threads} thread(s); "
                f"speedup and traffic relative to {BASELINE.upper()}")
        cols = (f"{'kernel':20} {'method':26} {'time (IQR/2)':>17} {'Gop/s':>8} {'speedup':>8} "
                f"{'bytes/token':>12} {'traffic':>8} {'bits/w':>6}  bound")
        lines = [head, cols, "-" * len(cols)]
        for r in sorted(self.rows, key=lambda r: r.seconds):
            traffic = (f"{r.bytes_per_token / base.bytes_per_token:7.2f}x"
                       if r.bytes_per_token and base.bytes_per_token else f"{'-':>8}")
            moved = f"{r.bytes_per_token:12,.0f}" if r.bytes_per_token else f"{'-':>12}"
            spread = f" ±{50 * r.spread:.0f}%" if r.spread is not None else ""
            lines.append(f"{r.kernel:20} {r.method:26} {_fmt_time(r.seconds) + spread:>17} "
                         f"{r.gops(self.N, self.M, self.K):8.1f} {base.seconds / r.seconds:7.2f}x "
                         f"{moved} {traffic} {r.bits_per_weight:6.2f}  {r.bound}")
        t, n = self.best_tsar, self.best_native
        lines.append(f"best T-SAR {t.kernel}: {base.seconds / t.seconds:.2f}x TL2, "
                     f"{n.seconds / t.seconds:.2f}x the best native kernel ({n.kernel})")
        lines += [f"not measured: {kernel} ({why})" for kernel, why in self.skipped]
        return "\n".join(lines)


def _fmt_time(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"


def compare(N: int, M: int, K: int, platform: str = "host", *, threads: int = 1,
            tsar_kernels: Sequence[str] = KERNEL_NAMES, repeats: int = 20,
            progress: Callable[[str], None] | None = None) -> Comparison:
    """Compare every T-SAR kernel with the native baselines on one layer and platform."""
    plat = platform_named(platform)
    measured = platform == "host"
    step = Steps(len(tsar_kernels) + len(NATIVE_SIM_KERNELS) + (len(MEASURED_NATIVE) if measured else 0),
                 progress or (lambda _m: None))
    rows: list[Row] = []
    for kernel in tsar_kernels:
        step(f"{plat.name}: simulating {kernel} {M} x {K}")
        c = counts_for(kernel, N, M, K)
        seconds, bound = modelled(c, plat, N, threads)
        rows.append(Row(kernel, "T-SAR", "simulated + modelled", seconds, c.bytes_moved,
                        8.0 * c.weight_bytes / (M * K), bound))
    sim_counts = {}
    skipped: list[tuple[str, str]] = []
    for kernel in NATIVE_SIM_KERNELS:
        step(f"{plat.name}: simulating native {kernel} {M} x {K}")
        sim_counts[kernel] = counts_for(kernel, N if not measured else 1, M, K)
    if measured:
        from tsar.kernels import bench

        bandwidth = bench.measure_bandwidths([threads])[threads]
        for kernel in MEASURED_NATIVE:
            step(f"{plat.name}: measuring native {kernel} {N} x {M} x {K}")
            try:
                res = bench.run_case(bench.Case(kernel, N, M, K, threads, "cache"), bandwidth, repeats)
            except ValueError as exc:  # the format's block size does not divide this shape
                skipped.append((kernel, str(exc)))
                continue
            c = sim_counts.get(kernel)
            rows.append(Row(kernel, "native", "measured on this host", res.seconds,
                            c.bytes_moved if c else None, 8.0 * res.weight_bytes / (M * K),
                            spread=res.spread))
    else:
        for kernel, c in sim_counts.items():
            seconds, bound = modelled(c, plat, N, threads)
            rows.append(Row(kernel, "native", "simulated + modelled", seconds, c.bytes_moved,
                            8.0 * c.weight_bytes / (M * K), bound))
    bad = [r.kernel for r in rows if not (math.isfinite(r.seconds) and r.seconds > 0)]
    if bad:  # a time that is not a positive number is a bug or a degenerate input, never a cell
        raise UserError(f"{N} x {M} x {K} on {platform}: no valid time for {', '.join(bad)}")
    return Comparison(N, M, K, platform, threads, tuple(rows), tuple(skipped))
