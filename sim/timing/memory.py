"""Memory bound (ECM / roofline style) and its combination with the core bound.

A kernel's data are described as :class:`DataStream` s. Per thread (``threads`` split the work):

* **residence**: streams sorted by reuse (traffic / footprint, most reused first) are placed in the
  innermost level whose usable capacity (``size * usable_fraction``, divided among the threads that
  share the instance) holds them together with every more-reused stream; ``level=`` pins a stream.
  For single-pass data (e.g. weights in decode), pass as ``footprint`` the bytes touched between two
  reuses (the whole model), or pin the level.
* **transfer terms** (cycles): L1D term = all bytes / L1D bandwidth; for each outer level X, the
  bytes of streams resident in X or beyond / bandwidth of the X -> inner boundary. Writes beyond L1D
  cost twice (write-allocate + write-back) unless ``nontemporal``. Shared levels: per-core bandwidth
  capped by ``shared_bandwidth / active sharers``; DRAM: ``min(per_core_gbs, sustained_gbs/threads)``.
* **combination**: ``ecm`` - transfers through the hierarchy do not overlap each other (sum of the
  terms) but overlap with core execution: ``T = max(T_core, sum)``; ``roofline`` - everything
  overlaps: ``T = max(T_core, max term)``. The core time is split evenly over threads.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tsar.sim.platforms import Platform


@dataclass(frozen=True)
class DataStream:
    """One data set a kernel touches (bytes; totals over the kernel call, single-thread view).

    ``partitioned``: threads split the data set (weights, outputs); False: every thread touches
    all of it (activations). ``reads_split``: threads split the traffic (default = partitioned;
    e.g. a per-thread LUT that each thread re-reads for its share of the outputs: False/True).
    """

    name: str
    footprint: float
    read: float = 0.0
    write: float = 0.0
    partitioned: bool = True
    reads_split: bool | None = None
    level: str | None = None
    nontemporal: bool = False

    def per_thread(self, threads: int) -> tuple[float, float, float]:
        """(footprint, read, write) bytes one of ``threads`` threads handles."""
        split = self.partitioned if self.reads_split is None else self.reads_split
        fp = self.footprint / threads if self.partitioned else self.footprint
        k = 1 / threads if split else 1.0
        return fp, self.read * k, self.write * k


@dataclass(frozen=True)
class MemoryTime:
    """Per-thread data-transfer estimate (cycles at the platform clock)."""

    threads: int
    mode: str
    residence: dict[str, str]
    level_bytes: dict[str, float]    # bytes crossing each boundary, per thread
    level_cycles: dict[str, float]   # transfer term per boundary, per thread
    cycles: float                    # combined (sum for ecm, max for roofline)

    @property
    def dominant(self) -> str:
        return max(self.level_cycles, key=lambda k: self.level_cycles[k]) if self.level_cycles else "-"


@dataclass(frozen=True)
class KernelTime:
    """Kernel time on ``threads`` threads: the slowest thread's cycles and seconds."""

    threads: int
    core_cycles: float
    memory: MemoryTime
    cycles: float
    seconds: float
    bound: str
    notes: tuple[str, ...] = field(default=())


def _capacity(platform: Platform, level: str, threads: int) -> float:
    c = platform.cache(level)
    sharers = min(c.shared_by, threads)
    return c.size * c.usable_fraction / sharers


def place(streams: Sequence[DataStream], platform: Platform, threads: int = 1) -> dict[str, str]:
    """Residence level of each stream (see the module docstring)."""
    out: dict[str, str] = {}
    free = [s for s in streams if s.level is None]
    for s in streams:
        if s.level is not None:
            if s.level not in platform.levels:
                raise ValueError(f"stream {s.name}: unknown level {s.level!r} ({platform.levels})")
            out[s.name] = s.level

    def reuse(s: DataStream) -> float:
        fp, r, w = s.per_thread(threads)
        return (r + w) / fp if fp else float("inf")

    ordered = sorted(free, key=reuse, reverse=True)
    for i, s in enumerate(ordered):
        out[s.name] = "DRAM"
        for c in platform.caches:
            sharers = min(c.shared_by, threads)
            occ = 0.0
            for t in ordered[: i + 1]:
                fp, _, _ = t.per_thread(threads)
                occ += fp if t.partitioned or c.shared_by == 1 else fp / sharers
            if occ <= _capacity(platform, c.name, threads) * 1.0:
                out[s.name] = c.name
                break
    return out


def memory_time(streams: Iterable[DataStream], platform: Platform, threads: int = 1,
                mode: str | None = None) -> MemoryTime:
    """Per-thread transfer cycles of ``streams`` on ``platform`` with ``threads`` threads."""
    streams = list(streams)
    mode = mode or platform.overlap
    if mode not in ("ecm", "roofline"):
        raise ValueError(f"mode must be 'ecm' or 'roofline', got {mode!r}")
    if threads < 1:
        raise ValueError("threads must be >= 1")
    where = place(streams, platform, threads)
    order = list(platform.levels)
    hz = platform.core.frequency_hz
    level_bytes: dict[str, float] = {}
    level_cycles: dict[str, float] = {}
    for depth, name in enumerate(order):
        total = 0.0
        for s in streams:
            _, r, w = s.per_thread(threads)
            if depth == 0:
                total += r + w
            elif order.index(where[s.name]) >= depth:
                if s.nontemporal:
                    total += r + (w if name == "DRAM" else 0.0)
                else:
                    total += r + 2 * w
        level_bytes[name] = total
        if name == "DRAM":
            gbs = min(platform.dram.per_core_gbs, platform.dram.sustained_gbs / threads)
            level_cycles[name] = total / (gbs * 1e9) * hz
        else:
            c = platform.cache(name)
            bw = c.bandwidth
            if c.shared_bandwidth is not None:
                bw = min(bw, c.shared_bandwidth / min(c.shared_by, threads))
            level_cycles[name] = total / bw
    combined = sum(level_cycles.values()) if mode == "ecm" else max(level_cycles.values())
    return MemoryTime(threads, mode, where, level_bytes, level_cycles, combined)


def kernel_time(core_cycles: float, streams: Iterable[DataStream], platform: Platform,
                threads: int = 1, mode: str | None = None) -> KernelTime:
    """Kernel time: ``core_cycles`` (single-thread total, e.g. ``CoreBound.total_cycles``) split
    over ``threads``, combined with the data transfers (``max``: compute overlaps transfers)."""
    mem = memory_time(streams, platform, threads, mode)
    core = core_cycles / threads
    cycles = max(core, mem.cycles)
    bound = "core" if core >= mem.cycles else f"memory ({mem.dominant})"
    return KernelTime(threads, core, mem, cycles, cycles / platform.core.frequency_hz, bound)


def thread_counts(threads: int) -> tuple[int, ...]:
    """1, 2, 4, ... below ``threads``, and ``threads``: the counts a scaling is shown at."""
    counts, n = [], 1
    while n < threads:
        counts.append(n)
        n *= 2
    return (*counts, threads)


def thread_scaling(core_cycles: float, streams: Sequence[DataStream], platform: Platform,
                   threads: Iterable[int] | None = None, mode: str | None = None) -> list[KernelTime]:
    """:func:`kernel_time` for each thread count (default :func:`thread_counts` of the platform's)."""
    if threads is None:
        threads = thread_counts(platform.threads)
    return [kernel_time(core_cycles, streams, platform, t, mode) for t in threads]


def linear_streams(m: int, k: int, n: int = 1, weight_bits: float = 2.0, activation_bytes: float = 1.0,
                   output_bytes: float = 4.0, weight_footprint: float | None = None,
                   activation_passes: float = 1.0) -> list[DataStream]:
    """Streams of an ``M x K`` linear layer on ``N`` tokens: weights read once (streamed,
    partitioned), activations ``N x K`` read ``activation_passes`` times by every thread
    (replicated), outputs ``N x M`` written once (partitioned). ``weight_footprint`` (bytes
    between reuses, e.g. the whole model in decode) defaults to this layer's weights."""
    w = m * k * weight_bits / 8
    a = n * k * activation_bytes
    return [
        DataStream("weights", weight_footprint if weight_footprint is not None else w, read=w),
        DataStream("activations", a, read=a * activation_passes, partitioned=False),
        DataStream("outputs", n * m * output_bytes, write=n * m * output_bytes),
    ]
