"""The headline comparison: T-SAR kernels against the native TL2 and other baselines, like for like.

For one layer shape (N tokens x M outputs x K inputs) and one platform every row has a
**modelled** time and, on ``host``, a **measured** one; a speedup is only ever the ratio of two
times obtained the same way (modelled / modelled, measured / measured), and both are shown:

* modelled: simulated counts timed by the timing model (:mod:`tsar.estimate.layer`, the estimator the
  dataflow selection uses): the per-token dataflows from one token scaled by N, the token-blocked
  GEMM dataflows and the natives' token-blocked GEMM loops from one block of ``GEMM_BLOCK`` tokens
  scaled by N / GEMM_BLOCK. The natives' modelled time is their integer core (their
  quantize/dequantize is left out, which favours them slightly). Error bar: the model's validated
  error for the kernel's family on the host (:mod:`tsar.validation.error_bars`, from ``tsar validate-model``);
* measured (``host`` only, one thread for T-SAR): natives run natively in their AVX2 builds
  (whole BitLinear call: quantize, core, dequantize), T-SAR kernels through the proxy engine
  (:mod:`tsar.sim.proxy_engine`: the same whole call with every T-SAR instruction replaced by the model's
  uops), all kernels alternating round by round (:func:`tsar.estimate.host.interleaved`), each the
  median over rounds of each round's fastest call, with the spread of those. The core clock is
  measured in the same rounds and the host's modelled times use it (a shared machine's clock
  varies);
* memory traffic: bytes loaded and stored per token by each kernel's instructions in the simulator
  (the paper's Figure 9 metric; TL2's lookups in its activation tables count here).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tsar.console import Steps, Work
from tsar.errors import UserError
from tsar.estimate.layer import counts_for, counts_request, modelled, platform_named
from tsar.frames import Tabular
from tsar.kernels.registry import COMPARED, native_label, split_native_label
from tsar.kernels.tsar_plan import kernel_names
from tsar.simulate.counts import announced, simulate_announced
from tsar.simulate.native_kernel import NATIVE_SIM_KERNELS, natives_for

if TYPE_CHECKING:
    from tsar.estimate.host import Measured, Timer

BASELINE = "tl2"
ISA_NAMES = {"avx2": "AVX2", "avxvnni": "AVX-VNNI", "avx512": "AVX-512 VNNI"}
"""How tables name the natives' ISA levels."""


def isa_name(kernel: str, isa: str) -> str:
    """How a native build's ISA is named: its level (:data:`ISA_NAMES`), plus what the kernel's
    rows need beyond it (trit5 with AVX-512: ``AVX-512 VNNI, VBMI``)."""
    from tsar.kernels.registry import NATIVE_KERNELS, split_native_label

    name = ISA_NAMES.get(isa, isa)
    try:
        extra = dict(NATIVE_KERNELS[split_native_label(kernel)[0]].level_flags).get(isa, ())
    except KeyError:
        return name
    return ", ".join([name, *(flag.removeprefix("avx512").upper() for flag in extra)])


MEASURED_NATIVE = COMPARED
MODELLED = "modelled"
MEASURED = "measured"
CLOCK = "(core clock)"


@dataclass(frozen=True)
class Row:
    """One kernel: its modelled time and, on the host, its measured time (seconds, all N tokens)."""

    kernel: str
    family: str                  # "T-SAR" or "native"
    modelled: float | None       # simulated counts + timing model; None: not modelled
    bytes_per_token: float | None
    bits_per_weight: float
    bound: str = ""
    model_error: float | None = None  # validated error of the model for this family (fraction)
    measured: float | None = None     # on this host: natively, or through the proxy engine (T-SAR)
    spread: float | None = None       # measured: (max - min) / median of the per-round fastest calls
    how_measured: str = ""            # "native" or "proxy"
    isa: str = ""                     # a native's ISA level (avx2, avxvnni, avx512); "" for T-SAR

    @property
    def seconds(self) -> float:
        """The modelled time (the one every platform has)."""
        assert self.modelled is not None, f"{self.kernel} has no modelled time"
        return self.modelled

    def time(self, how: str) -> float | None:
        """The ``MODELLED`` or ``MEASURED`` time."""
        return self.modelled if how == MODELLED else self.measured

    def gops(self, n: int, m: int, k: int, how: str = MODELLED) -> float | None:
        t = self.time(how)
        return 2.0 * n * m * k / t / 1e9 if t else None


@dataclass(frozen=True)
class Comparison(Tabular):
    N: int
    M: int
    K: int
    platform: str
    threads: int
    rows: tuple[Row, ...]
    skipped: tuple[tuple[str, str], ...] = ()  # (kernel, why): baselines whose format cannot take the shape
    error_source: str = ""                     # where the model error bars come from
    measured_at: str = ""  # host: when the measurements were taken (ISO time; earlier if reused)

    def row(self, kernel: str) -> Row:
        for r in self.rows:
            if r.kernel == kernel:
                return r
        raise KeyError(kernel)

    @property
    def baseline(self) -> Row:
        return self.row(BASELINE)

    @property
    def measured(self) -> bool:
        return any(r.measured is not None for r in self.rows)

    def speedup(self, r: Row, how: str) -> float | None:
        """``r``'s speedup over the baseline, both times obtained ``how`` (never mixed)."""
        a, b = self.baseline.time(how), r.time(how)
        return a / b if a and b else None

    def best(self, family: str, how: str = MODELLED) -> Row | None:
        rows = [r for r in self.rows if r.family == family and r.time(how)]
        return min(rows, key=lambda r: r.time(how)) if rows else None  # type: ignore[arg-type,return-value]

    @property
    def best_tsar(self) -> Row:
        """The fastest T-SAR kernel by modelled time (the dataflow selection's pick)."""
        r = self.best("T-SAR")
        assert r is not None
        return r

    def records(self) -> list[dict]:
        """One row per kernel: modelled and measured times and speedups (see :meth:`table`)."""
        out = []
        for r in self._sorted():
            out.append({"kernel": r.kernel, "family": r.family,
                        "modelled_s": r.modelled, "model_error": r.model_error,
                        "measured_s": r.measured, "spread": r.spread, "measured_how": r.how_measured or None,
                        "speedup_modelled": self.speedup(r, MODELLED),
                        "speedup_measured": self.speedup(r, MEASURED),
                        "gops_modelled": r.gops(self.N, self.M, self.K, MODELLED),
                        "gops_measured": r.gops(self.N, self.M, self.K, MEASURED),
                        "bytes_per_token": r.bytes_per_token, "bits_per_weight": r.bits_per_weight,
                        "bound": r.bound, "isa": r.isa or None, "N": self.N, "M": self.M, "K": self.K,
                        "platform": self.platform, "threads": self.threads})
        return out

    def _sorted(self) -> list[Row]:
        how = MEASURED if self.measured else MODELLED
        return sorted(self.rows, key=lambda r: (r.time(how) is None, r.time(how) or 0.0,
                                                r.modelled or 0.0))

    def table(self) -> str:
        base = self.baseline
        meas = self.measured
        head = (f"{self.N} x {self.M} x {self.K} on {self.platform}, {self.threads} thread(s); "
                f"speedups over {BASELINE.upper()}: measured / measured and modelled / modelled, never mixed")
        cols = f"{'kernel':24}"
        if meas:
            cols += f" {'measured (spread)':>20} {'speedup':>8}"
        cols += (f" {'modelled (±error)':>20} {'speedup':>8} {'bytes/token':>12} {'traffic':>8} "
                 f"{'bits/w':>6}  bound")
        lines = [head, cols, "-" * len(cols)]
        for r in self._sorted():
            line = f"{r.kernel:24}"
            if meas:
                m = (f"{_fmt_time(r.measured)} ±{50 * r.spread:.0f}%" if r.measured is not None
                     and r.spread is not None else "-")
                tag = r.how_measured[:1] + " " if r.measured else ""
                line += f" {tag + m:>20} {_fmt_x(self.speedup(r, MEASURED))}"
            err = f" ±{100 * r.model_error:.0f}%" if r.model_error is not None else " ±?"
            mod = "-" if r.modelled is None else _fmt_time(r.modelled) + err
            traffic = (f"{r.bytes_per_token / base.bytes_per_token:7.2f}x"
                       if r.bytes_per_token and base.bytes_per_token else f"{'-':>8}")
            moved = f"{r.bytes_per_token:12,.0f}" if r.bytes_per_token else f"{'-':>12}"
            lines.append(f"{line} {mod:>20} {_fmt_x(self.speedup(r, MODELLED))} {moved} {traffic} "
                         f"{r.bits_per_weight:6.2f}  {r.bound}")
        lines += self.summary()
        if meas:
            lines.append("measured: n = native build at the row's ISA (whole call timed in C), p = T-SAR "
                         "through the proxy engine (whole call, T-SAR instructions as the model's uops); all "
                         "kernels alternating round by round, median over rounds of each round's fastest "
                         "call, spread = (max - min) / median of those")
        lines.append("modelled: simulated counts + timing model; ±error: "
                     + (self.error_source or "no validated model error available ('tsar validate-model')"))
        lines += [f"not measured: {kernel} ({why})" for kernel, why in self.skipped]
        return "\n".join(lines)

    def summary(self) -> list[str]:
        """The headline lines: best T-SAR against TL2 and the best native, each way of timing."""
        out = []
        for how, label in ((MEASURED, "measured (T-SAR through the proxy engine) / measured natives"),
                           (MODELLED, "modelled / modelled")):
            t, n = self.best("T-SAR", how), self.best("native", how)
            base = self.baseline.time(how)
            if t is None or n is None or not base:
                continue
            out.append(f"best T-SAR {label}: {t.kernel} {base / t.time(how):.2f}x TL2, "  # type: ignore[operator]
                       f"{n.time(how) / t.time(how):.2f}x the best native kernel "  # type: ignore[operator]
                       f"({n.kernel}, {isa_name(n.kernel, n.isa)})")
        return out


def _fmt_x(x: float | None) -> str:
    return f"{x:7.2f}x" if x is not None else f"{'-':>8}"


def _fmt_time(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"


def compare(N: int, M: int, K: int, platform: str = "host", *, threads: int = 1,
            tsar_kernels: Sequence[str] | None = None, repeats: int = 20,
            progress: Callable[[str], None] | None = None, reuse_measurements: bool = False
            ) -> Comparison:
    """Compare every T-SAR kernel with the native baselines on one layer and platform (module doc).
    ``repeats``: measured calls per kernel on the host (in rounds of a few calls);
    ``tsar_kernels``: default every kernel of the configurations registered at the call that the
    platform runs (the 512-bit ones where its ISA has AVX-512); ``reuse_measurements``: on the host,
    take the measurements stored by an earlier call with the same layer, settings, machine and code
    (:mod:`tsar.estimate.measurements`) instead of measuring again, and store new ones."""
    from tsar.validation.error_bars import load

    plat = platform_named(platform)
    # the registered configurations whose width the platform's ISA has
    tsar_kernels = kernel_names(plat.core.isa) if tsar_kernels is None else tsar_kernels
    measured = platform == "host"
    errors = load()
    natives = natives_for(plat.core.isa)
    step = Steps(len(tsar_kernels) + len(natives) + measured, progress or (lambda _m: None))
    rows: dict[str, Row] = {}
    counts = {}

    def error(kernel: str) -> float | None:
        return errors.error(kernel, N) if errors else None

    families = [(kernel, "T-SAR") for kernel in tsar_kernels] + [(k, "native") for k in natives]
    # the first count that is not cached simulates every kernel's missing runs, in parallel
    simulating = Work(f"{plat.name}: simulating the missing counts", unit="%", say=progress,
                      every=2.0) if progress else None
    with announced(compare_requests(N, M, K, tsar_kernels, natives), simulating):
        simulate_announced()
        for kernel, family in families:
            step(f"{plat.name}: simulating {'native ' * (family == 'native')}{kernel} {M} x {K}")
            c = counts[kernel] = counts_for(kernel, N, M, K)
            # on the host the time is modelled once measured (at the clock the measurements ran at)
            seconds, bound = (None, "") if measured else modelled(c, plat, N, threads)
            rows[kernel] = Row(kernel, family, seconds, c.bytes_moved / c.tokens,
                               8.0 * c.weight_bytes / (M * K), bound, error(kernel),
                               isa=split_native_label(kernel)[1] if family == "native" else "")
    skipped: list[tuple[str, str]] = []
    taken = ""
    if measured:
        from dataclasses import replace

        from tsar.estimate import measurements
        from tsar.estimate.host import with_measured

        key = _measurement_key(N, M, K, threads, repeats, tsar_kernels, natives)
        found = measurements.stored(key) if reuse_measurements else None
        if found:
            taken = found[1]
            step(f"{plat.name}: {N} x {M} x {K} as measured at {taken} (same machine and code)")
            skipped, clocks, clock = _restored(found[0], rows)
        else:
            step(f"{plat.name}: measuring {N} x {M} x {K}, natives and T-SAR proxies alternating")
            skipped, clocks, clock = _measure(rows, N, M, K, threads, tsar_kernels, repeats, natives)
            taken = (measurements.store(key, _stored_form(rows, skipped, clocks, clock))
                     if reuse_measurements else measurements.now())
        plat, _ = with_measured(plat, clocks, clock, {}, clock_key=CLOCK)
        for kernel, c in counts.items():
            seconds, bound = modelled(c, plat, N, threads)
            rows[kernel] = replace(rows[kernel], modelled=seconds, bound=bound)
    bad = [r.kernel for r in rows.values()
           if not all(math.isfinite(t) and t > 0 for t in (r.modelled, r.measured) if t is not None)]
    if bad:  # a time that is not a positive number is a bug or a degenerate input, never a cell
        raise UserError(f"{N} x {M} x {K} on {platform}: no valid time for {', '.join(bad)}")
    return Comparison(N, M, K, platform, threads, tuple(rows.values()), tuple(skipped),
                      errors.describe() if errors else "", taken)


def compare_requests(N: int, M: int, K: int, tsar_kernels: Sequence[str] | None = None,
                     natives: Sequence[str] = NATIVE_SIM_KERNELS) -> list[tuple[str, int, int, int]]:
    """The simulated counts :func:`compare` reads (for :func:`tsar.simulate.counts.announced`)."""
    kernels = (*(kernel_names() if tsar_kernels is None else tsar_kernels), *natives)
    return [counts_request(kernel, N, M, K) for kernel in kernels]


def _measurement_key(N: int, M: int, K: int, threads: int, repeats: int, tsar_kernels: Sequence[str],
                     natives: Sequence[str]) -> dict:
    """What a host comparison's measurements depend on besides the machine and the code."""
    return {"N": N, "M": M, "K": K, "threads": threads, "repeats": repeats, "tsar": list(tsar_kernels),
            "natives": list(natives), "measured_natives": list(MEASURED_NATIVE)}


def measurements_stored(N: int, M: int, K: int, *, threads: int = 1, repeats: int = 20) -> bool:
    """Whether :func:`compare` on the host with these settings (and its default kernels) would reuse
    stored measurements rather than measure (for progress estimates)."""
    from tsar.estimate import measurements

    plat = platform_named("host")
    key = _measurement_key(N, M, K, threads, repeats, kernel_names(plat.core.isa), natives_for(plat.core.isa))
    return measurements.stored(key) is not None


def _stored_form(rows: dict[str, Row], skipped: list[tuple[str, str]], clocks: dict,
                 clock: tuple | None) -> dict:
    """What :func:`_measure` found, as JSON: each measured row's time, spread and how, the rows it
    added (natives at other ISA levels), the skipped kernels, the clock probes."""
    from dataclasses import asdict

    return {"rows": {k: asdict(r) for k, r in rows.items() if r.measured is not None},
            "skipped": [list(s) for s in skipped],
            "clocks": {name: asdict(m) for name, m in clocks.items()},
            "clock_cycles": None if clock is None else clock[1]}


def _restored(value: dict, rows: dict[str, Row]) -> tuple[list[tuple[str, str]], dict, tuple | None]:
    """:func:`_stored_form`'s inverse: fills ``rows`` in place as :func:`_measure` does."""
    from dataclasses import replace

    from tsar.estimate.host import Measured

    for kernel, r in value["rows"].items():
        rows[kernel] = replace(rows[kernel], measured=r["measured"], spread=r["spread"],
                               how_measured=r["how_measured"]) if kernel in rows else Row(**r)
    clocks = {name: Measured(**m) for name, m in value["clocks"].items()}
    cycles = value["clock_cycles"]
    return [tuple(s) for s in value["skipped"]], clocks, None if cycles is None else (None, cycles)


def _measure(rows: dict[str, Row], N: int, M: int, K: int, threads: int,
             tsar_kernels: Sequence[str], repeats: int,
             natives: Sequence[str] = ()) -> tuple[list[tuple[str, str]], dict[str, Measured],
                                                   tuple[Timer, int] | None]:
    """Measure natives and (one thread) T-SAR proxies alternating, and the core clock (and the clock
    beside heavy 512-bit code) in the same rounds; fill ``rows`` in place. Returns the skipped
    kernels, the clock probes' measurements and the add chain's (timer, cycles), for
    :func:`tsar.estimate.host.with_measured`."""
    from dataclasses import replace

    from tsar.estimate.host import clock_timers, interleaved, native_timer, proxy_timer

    timers, how, skipped = {}, {}, []
    from tsar.kernels.baselines import kernel_isas

    # every compared native at every ISA level this CPU runs (the simulated ones are in rows already)
    for name in MEASURED_NATIVE:
        for isa in kernel_isas(name):
            kernel = native_label(name, isa)
            try:
                timers[kernel], nbytes = native_timer(name, N, M, K, threads, isa=isa)
            except ValueError as exc:  # the format's block size does not divide this shape
                skipped.append((kernel, str(exc)))
                continue
            how[kernel] = "native"
            if kernel not in rows:
                rows[kernel] = Row(kernel, "native", None, None, 8.0 * nbytes / (M * K), isa=isa)
    if threads == 1:
        for kernel in tsar_kernels:
            timers[kernel], how[kernel] = proxy_timer(kernel, N, M, K), "proxy"
    else:
        skipped += [(k, "the proxy engine runs T-SAR kernels on one thread") for k in tsar_kernels]
    calls = 5 if N == 1 else 1
    rounds = max(3, math.ceil(repeats / calls))
    counts = dict.fromkeys(timers, calls)
    clock_probes, clock = clock_timers(CLOCK)
    for name, timer in clock_probes.items():
        timers[name], counts[name] = timer, 10
    measured = interleaved(timers, rounds, counts)
    clocks = {name: measured.pop(name) for name in clock_probes}
    for kernel, m in measured.items():
        rows[kernel] = replace(rows[kernel], measured=m.seconds, spread=m.spread, how_measured=how[kernel])
    return skipped, clocks, clock
