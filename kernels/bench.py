"""Benchmark of the native baseline kernels: time, throughput and % of the measured bandwidth roofline.

Each case is (kernel, N x M x K shape, threads, weights in cache or streamed from DRAM). Timing runs
in C (quantization, product and dequantization inside the timed call); "dram" rotates through enough
weight copies that together they exceed ``DRAM_FACTOR`` (4) x the last-level cache, each case
starting its rotation at a different copy (:func:`rotation_start`), so that each call reads its
weights from memory: over a smaller rotation, or one that every measurement starts at the same copy,
a call finds copies that earlier calls or contenders left in the cache. Gop/s counts 2*N*M*K; G
weights/s and weight GB/s count each weight once per call; % BW (``roofline_pct``) is the weight
bytes per second against the streaming-read bandwidth measured on the spot for the same thread
count, and exists only for "dram" cases (weights in cache are not read from memory: a percentage of
the memory bandwidth means nothing there, and exceeds 100 % for fast kernels).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tsar.kernels.baselines import (
    ISAS,
    KERNELS,
    NativeKernel,
    kernel_isa,
    prepare,
    stream_read_bandwidth,
    time_matmul,
)

# BitNet-b1.58-2B-4T projections as (M, K): QKV/O, gate/up, down, and the prefill length. The kernels
# layer may not import the front end's tsar.models, where both are declared (BITNET_2B_LAYERS,
# PREFILL_TOKENS); tests/test_single_definitions.py checks that these copies equal them.
BITNET_2B_LAYERS: tuple[tuple[int, int], ...] = ((2560, 2560), (6912, 2560), (2560, 6912))
GEMM_N = 128
DRAM_FACTOR = 4.0
"""A "dram" case rotates through more than this many times the last-level cache of weight copies."""
BW_BYTES = 1 << 28
_GOLDEN = (5 ** 0.5 - 1) / 2


@dataclass(frozen=True)
class Case:
    kernel: str
    n: int
    m: int
    k: int
    threads: int
    where: str          # "cache" or "dram"
    isa: str = ""       # an ISA level of baselines.ISAS; "": the run's (default "auto")


@dataclass(frozen=True)
class Result:
    case: Case
    isa: str
    seconds: float      # median
    weight_bytes: int
    bandwidth: float    # measured streaming-read roofline, bytes/s
    spread: float = 0.0  # (75th - 25th percentile) / median of the timed calls

    @property
    def gops(self) -> float:
        return 2.0 * self.case.n * self.case.m * self.case.k / self.seconds / 1e9

    @property
    def gweights(self) -> float:
        return self.case.m * self.case.k / self.seconds / 1e9

    @property
    def weight_gbs(self) -> float:
        return self.weight_bytes / self.seconds / 1e9

    @property
    def roofline_pct(self) -> float | None:
        """Weight bytes per second as a percentage of the streaming-read bandwidth, for weights read
        from memory ("dram"); None in cache."""
        if self.case.where != "dram":
            return None
        return 100.0 * self.weight_bytes / self.seconds / self.bandwidth


def last_level_cache_bytes() -> int:
    """Largest cache size reported by sysfs for cpu0 (32 MiB if unknown)."""
    best = 0
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip()
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        try:
            best = max(best, int(text.rstrip("KMG")) * unit)
        except ValueError:
            continue
    return best or 32 << 20


def default_cases(kernels: Iterable[str] = KERNELS, threads: Iterable[int] = (1, 2),
                  quick: bool = False) -> list[Case]:
    """GEMV (N=1) on the BitNet-2B layers in cache and from DRAM, plus a GEMM (N=128) in cache."""
    layers = BITNET_2B_LAYERS[:1] if quick else BITNET_2B_LAYERS
    cases = []
    for kernel in kernels:
        for th in threads:
            for m, k in layers:
                cases += [Case(kernel, 1, m, k, th, "cache"), Case(kernel, 1, m, k, th, "dram")]
            if not quick:
                cases.append(Case(kernel, GEMM_N, *BITNET_2B_LAYERS[0], th, "cache"))
    return cases


def dram_copies(nbytes: int, llc: int) -> int:
    """Weight copies of ``nbytes`` each that a "dram" case rotates through: together more than
    ``DRAM_FACTOR`` x ``llc`` bytes, and at least 2."""
    return max(2, int(DRAM_FACTOR * llc // nbytes) + 1)


def rotation_start(index: int, copies: int) -> int:
    """The copy a measurement's rotation starts at: spread over the copies by the golden ratio, so
    that successive measurements (``index`` 0, 1, ...) start far from where the previous ones did
    and ended."""
    return int((index * _GOLDEN) % 1.0 * copies) if copies > 1 else 0


def expected_cost(case: Case, repeats: int) -> float:
    """The relative cost of measuring ``case`` (for the progress estimate): packing and timed calls
    grow with the weights, GEMM calls with the tokens (a third as fast per token as GEMV: they are
    compute-bound), threads share a call, and DRAM calls wait for memory and rotate through
    copies made first."""
    calls = repeats + 3
    per_call = case.m * case.k * (1.0 if case.n == 1 else case.n / 3) / case.threads
    return case.m * case.k * 2.0 + calls * per_call * (1.5 if case.where == "dram" else 1.0)


def run_case(case: Case, bandwidth: float, repeats: int, isa: str = "auto",
             seed: int = 0, llc: int | None = None, index: int = 0) -> Result:
    """Measure ``case``: the median of ``repeats`` timed calls after a warm-up pass over its weight
    copies (one in cache; :func:`dram_copies` from DRAM, the rotation starting at
    :func:`rotation_start` of ``index``)."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-1, 2, (case.m, case.k), dtype=np.int8)
    base = prepare(case.kernel, w, 0.5)
    copies: list[NativeKernel] = [base]
    if case.where == "dram":
        copies += [base.copy() for _ in range(dram_copies(base.nbytes, llc or last_level_cache_bytes()) - 1)]
        start = rotation_start(index, len(copies))
        copies = copies[start:] + copies[:start]
    x = rng.standard_normal((case.n, case.k), dtype=np.float32)
    warm = max(len(copies), 3)
    seconds = time_matmul(copies, x, case.threads, isa, repeats + warm)[warm:]
    q25, median, q75 = np.percentile(seconds, (25, 50, 75))
    return Result(case, kernel_isa(case.kernel, isa) or "?", float(median), base.nbytes,
                  bandwidth, float((q75 - q25) / median))


def measure_bandwidths(threads: Iterable[int]) -> dict[int, float]:
    return {t: stream_read_bandwidth(BW_BYTES, t, repeats=5) for t in sorted(set(threads))}


def run(cases: list[Case], repeats: int = 50, isa: str = "auto",
        step: Callable[[str, float], None] | None = None,
        bandwidth: dict[int, float] | None = None) -> tuple[dict[int, float], list[Result]]:
    """Measure the bandwidth roofline (unless given: ``bandwidth`` by thread count), then every case;
    returns (bandwidth by threads, results). ``step(message, cost)`` is called before each case with
    its :func:`expected_cost` (``tsar.console.Steps`` is one)."""
    bw = bandwidth if bandwidth is not None else measure_bandwidths(c.threads for c in cases)
    llc = last_level_cache_bytes()
    results = []
    for i, case in enumerate(cases):
        if step is not None:
            step(f"host: {case.kernel}{f' ({case.isa})' if case.isa else ''} {case.n}x{case.m}x{case.k} "
                 f"t={case.threads} {case.where}",
                 expected_cost(case, repeats))
        results.append(run_case(case, bw[case.threads], repeats, case.isa or isa, llc=llc, index=i))
    return bw, results


def int8_peaks(results: list[Result]) -> dict[str, float]:
    """The host's one-thread int8 multiply-add peak (ops/s) for each ISA the results used."""
    from tsar.kernels.baselines import int8_peak

    return {isa: int8_peak(isa) for isa in sorted({r.isa for r in results}) if isa in ISAS and isa != "auto"}


def peak_pct(result: Result, peaks: dict[str, float]) -> float | None:
    """The result's Gop/s as a percentage of its ISA's one-thread peak times its threads."""
    peak = peaks.get(result.isa)
    return None if not peak else 100.0 * result.gops * 1e9 / (peak * result.case.threads)


def format_table(bw: dict[int, float], results: list[Result], peaks: dict[str, float] | None = None) -> str:
    peaks = peaks or {}
    lines = ["streaming-read bandwidth: "
             + ", ".join(f"{t} thread(s) {b / 1e9:.1f} GB/s" for t, b in bw.items())
             + "".join(f"; int8 multiply-add peak ({isa}, 1 thread): {p / 1e9:.0f} Gop/s"
                       for isa, p in peaks.items()),
             f"{'kernel':<7}{'isa':<8}{'N x M x K':<17}{'thr':>4} {'weights':<6}{'bits/w':>7}"
             f"{'median us':>11}{'Gop/s':>9}{'Gw/s':>8}{'GB/s':>8}{'% BW':>7}{'% peak':>8}"]
    for r in results:
        c = r.case
        pct = peak_pct(r, peaks)
        pct_text = f"{pct:>8.1f}" if pct is not None else f"{'-':>8}"
        bw_pct = r.roofline_pct
        bw_text = f"{bw_pct:>7.1f}" if bw_pct is not None else f"{'-':>7}"
        lines.append(f"{c.kernel:<7}{r.isa:<8}{f'{c.n}x{c.m}x{c.k}':<17}{c.threads:>4} {c.where:<6}"
                     f"{8 * r.weight_bytes / (c.m * c.k):>7.3f}{r.seconds * 1e6:>11.1f}{r.gops:>9.1f}"
                     f"{r.gweights:>8.1f}{r.weight_gbs:>8.2f}{bw_text}{pct_text}")
    if any(r.case.where == "cache" for r in results):
        lines.append("% BW: weight bytes per second against the streaming-read bandwidth, for weights "
                     "read from memory (dram) only")
    over = [r for r in results if (r.roofline_pct or 0.0) > 100.0]
    if over:
        lines.append(f"warning: {len(over)} dram row(s) faster than the measured streaming bandwidth "
                     f"({', '.join(f'{r.case.kernel} {r.roofline_pct:.0f} %' for r in over)}): part of "
                     "their weights came from the caches, so those figures are not DRAM figures")
    return "\n".join(lines)
