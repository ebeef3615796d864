"""Detect and measure the host: caches (sysfs), core count, clock, and read bandwidth of every
level, turned into a :class:`Platform` (cached for the session).

Detection: ``/sys/devices/system/cpu/cpu0/cache/index*`` (level, type, size, shared_cpu_list),
``/proc/cpuinfo`` (vendor, family, model, flags, MHz), ``os.sched_getaffinity``; the
microarchitecture data set follows from vendor/family/model (:func:`uarch_for_cpu`).

Measurement (about 1 s in all): the clock from a chain of dependent 1-cycle adds; single-thread
streaming-read bandwidth (256-bit loads) on buffers sized for L1D (1/2 of it), L2 (1/2), L3 (1/4 of
the instance, at least 4x L2) and DRAM (4x all L3, at least 128 MiB), the best of several short
runs (robust to time-slicing on a shared machine); DRAM again with one thread per available CPU.
Measured values are end-to-end (data from level X to registers); the
platform's per-boundary ECM terms are obtained by subtracting the inner levels' time per byte.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tsar.sim.platforms.schema import CacheLevel, Core, Dram, Platform
from tsar.sim.x86.forms import VECTOR_ISA_FLAGS

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
_HOST: dict[bool, Platform] = {}


# CPUID (family, model) -> data set. Sources: Intel SDM vol. 4 table 2-1 (DisplayFamily_DisplayModel),
# AMD processor revision guides (family 17h/19h/1Ah model ranges).
_INTEL6: dict[int, tuple[str, bool, str]] = {
    **{m: ("haswell", False, "Haswell") for m in (60, 63, 69, 70)},
    **{m: ("haswell", True, "Broadwell: Haswell data as proxy") for m in (61, 71, 79, 86)},
    **{m: ("skylake", False, "Skylake client family (Skylake/Kaby/Coffee/Comet Lake)")
       for m in (78, 94, 142, 158, 165, 166)},
    **{m: ("icelake", False, "Sunny Cove (Ice Lake)") for m in (106, 108, 125, 126)},
    **{m: ("tigerlake", False, "Willow Cove (Tiger Lake)") for m in (140, 141)},
    167: ("rocketlake", False, "Cypress Cove (Rocket Lake)"),
    **{m: ("alderlakep", False, "Alder/Raptor Lake P-core (Golden Cove class)")
       for m in (151, 154, 183, 186, 191)},
    143: ("alderlakep", True, "Sapphire Rapids: Golden Cove core"),
    207: ("alderlakep", True, "Emerald Rapids: Raptor Cove core (Golden Cove class)"),
    **{m: ("alderlakep", True, "Meteor/Arrow/Lunar Lake P-core: Golden Cove data as proxy")
       for m in (170, 172, 189, 197, 198)},
    190: ("gracemont", False, "Alder Lake-N / Twin Lake: Gracemont E-cores"),
    **{m: ("gracemont", True, "Tremont-class Atom: Gracemont data as proxy") for m in (134, 150, 156)},
}
_AMD: dict[int, tuple[tuple[range, str, bool, str], ...]] = {
    0x17: ((range(0x30, 0x80), "zen2", False, "Zen 2"), (range(0x90, 0xB0), "zen2", False, "Zen 2"),
           (range(0x00, 0x30), "zen2", True, "Zen / Zen+: Zen 2 data as proxy")),
    0x19: ((range(0x00, 0x10), "zen3", False, "Zen 3"), (range(0x20, 0x60), "zen3", False, "Zen 3"),
           (range(0x10, 0x20), "zen4", False, "Zen 4"), (range(0x60, 0x80), "zen4", False, "Zen 4"),
           (range(0xA0, 0xB0), "zen4", False, "Zen 4c")),
    0x1A: ((range(0x00, 0x100), "zen5", False, "Zen 5 (InstLatx64 Ryzen 9 9950X measurements)"),),
}


_LACKS: dict[str, frozenset[str]] = {
    name: frozenset({"avx512_fp16", "amx_tile", "avx_vnni"}) | extra for name, extra in (
        ("skylakex", frozenset({"avx512_vnni", "avx512_bf16"})), ("cascadelake", frozenset()),
        ("icelake", frozenset({"avx512_bf16"})), ("tigerlake", frozenset({"avx512_bf16"})),
        ("rocketlake", frozenset({"avx512_bf16"})))}
"""Flags the cores of these data sets never report (Intel ISE / ARK: AVX512_FP16 and AMX came with
Sapphire Rapids, AVX-VNNI with Alder Lake, AVX512_BF16 with Cooper Lake): a CPU that reports the
data set's model number and one of them is a virtual CPU whose model number was masked."""


def uarch_for_cpu(vendor: str, family: int, model: int, stepping: int = 0,
                  flags: frozenset[str] | set[str] = frozenset()) -> tuple[str, bool, str]:
    """(data set, is_proxy, note) for a CPU identified by CPUID vendor, display family, display
    model and stepping (Skylake-SP and Cascade Lake share model 85: stepping >= 5 is Cascade
    Lake). Unknown CPUs get the data set of their vendor's newest core, flagged as a proxy; so
    does a CPU whose ``flags`` show features its model's core lacks (:data:`_LACKS`: a hypervisor
    reporting another model number)."""
    name, proxy, note = _uarch_by_model(vendor, family, model, stepping)
    newer = sorted(set(flags) & _LACKS.get(name, frozenset()))
    if newer:
        return ("alderlakep", True, f"CPUID model {model} ({note}) with {', '.join(newer)}, which that "
                "core lacks: a virtual CPU with a masked model number; Golden Cove data as proxy")
    return name, proxy, note


def _uarch_by_model(vendor: str, family: int, model: int, stepping: int) -> tuple[str, bool, str]:
    if vendor == "GenuineIntel" and family == 6:
        if model == 85:
            if stepping >= 10:
                return "cascadelake", True, "Cooper Lake: Cascade Lake data as proxy"
            return ("cascadelake", False, "Cascade Lake") if stepping >= 5 else (
                "skylakex", False, "Skylake-SP")
        if model in _INTEL6:
            return _INTEL6[model]
        return "alderlakep", True, f"unknown Intel model {model}: Golden Cove data as proxy"
    if vendor == "AuthenticAMD":
        for models, name, proxy, note in _AMD.get(family, ()):
            if model in models:
                return name, proxy, note
        return "zen5", True, f"AMD family {family:#x} model {model:#x}: Zen 5 data as proxy"
    return "alderlakep", True, f"unknown CPU {vendor} {family}/{model}: Golden Cove data as proxy"


def _cpuinfo() -> dict[str, str]:
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if not line.strip():
                break  # first processor only
            key, _, value = line.partition(":")
            info[key.strip()] = value.strip()
    except OSError:
        pass
    return info


@dataclass(frozen=True)
class CpuIdentity:
    """The host CPU as CPUID shows it: vendor, display family, model and stepping, and the
    model name (``/proc/cpuinfo`` of the first processor)."""

    vendor: str
    family: int
    model: int
    stepping: int
    name: str

    @property
    def key(self) -> str:
        """``GenuineIntel-06-a7-1``: the file-name key of tables measured on this CPU."""
        return f"{self.vendor or 'unknown'}-{self.family:02x}-{self.model:02x}-{self.stepping:x}"


def cpu_identity() -> CpuIdentity:
    """The host's :class:`CpuIdentity` (zeros and empty strings where ``/proc/cpuinfo`` says nothing)."""
    info = _cpuinfo()

    def number(key: str) -> int:
        text = info.get(key, "")
        return int(text) if text.isdigit() else 0

    return CpuIdentity(info.get("vendor_id", ""), number("cpu family"), number("model"), number("stepping"),
                       info.get("model name", ""))


def measured_uarch(ident: CpuIdentity, proxy_note: str) -> tuple[str, str] | None:
    """(table path, note) of a table measured on this very CPU by ``tsar uarch measure`` (in the
    cache, keyed by :attr:`CpuIdentity.key`), or None. Used in place of a proxy table."""
    from tsar.sim.uarch.measured import cached_table

    path = cached_table(ident.key)
    if path is None:
        return None
    return str(path), (f"measured on this CPU by `tsar uarch measure` ({path}); forms it did not "
                       f"measure, uop counts and core widths from its base table ({proxy_note})")


def cpu_flags() -> frozenset[str]:
    """The host CPU's feature flags (``/proc/cpuinfo``'s ``flags`` of the first processor; empty
    where there is no such file)."""
    return frozenset(_cpuinfo().get("flags", "").split())


def _cpu_list_len(text: str) -> int:
    n = 0
    for part in filter(None, text.strip().split(",")):
        lo, _, hi = part.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n


def _size_bytes(text: str) -> int:
    m = re.fullmatch(r"(\d+)([KMG]?)", text.strip())
    if not m:
        return 0
    return int(m.group(1)) * {"": 1, "K": 1024, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def detect_caches() -> list[dict[str, Any]]:
    """Data/unified cache levels of cpu0 from sysfs: name, size (bytes), shared_cpus, line."""
    out = []
    for idx in sorted(SYSFS_CACHE.glob("index*")):
        try:
            kind = (idx / "type").read_text().strip()
            if kind == "Instruction":
                continue
            level = int((idx / "level").read_text())
            out.append({"name": "L1D" if level == 1 else f"L{level}",
                        "size": _size_bytes((idx / "size").read_text()),
                        "shared_cpus": _cpu_list_len((idx / "shared_cpu_list").read_text()),
                        "line": int((idx / "coherency_line_size").read_text() or 64)})
        except (OSError, ValueError):
            continue
    return out


def _l1i_size() -> int:
    for idx in SYSFS_CACHE.glob("index*"):
        try:
            if (idx / "type").read_text().strip() == "Instruction":
                return _size_bytes((idx / "size").read_text())
        except OSError:
            pass
    return 32 * 1024


def _threads_per_core() -> int:
    try:
        text = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list").read_text()
        return max(1, _cpu_list_len(text))
    except OSError:
        return 1


# --- measurement ----------------------------------------------------------------------------------
def measure_frequency_ghz(lib: Any, iterations: int = 1_000_000, trials: int = 9,
                          avx512: bool = False) -> float:
    """Core clock from 8*iterations dependent adds (1 cycle each), best of ``trials`` short runs
    (GHz); short runs and the maximum make it robust to time-slicing on a loaded machine. With
    ``avx512``, the clock beside heavy 512-bit code (``tsar_chain512``; a CPU with AVX512BW only)."""
    chain = lib.tsar_chain512 if avx512 else lib.tsar_chain
    best = 0.0
    chain(iterations // 10)
    for _ in range(trials):
        t0 = time.perf_counter()
        chain(iterations)
        dt = time.perf_counter() - t0
        best = max(best, 8 * iterations / dt / 1e9)
    return best


def aligned_buffer(nbytes: int) -> np.ndarray:
    """``nbytes`` of 64-byte-aligned uint8 memory, every byte 1 (pages touched) for read probes."""
    raw = np.empty(nbytes + 64, dtype=np.uint8)
    off = (-raw.ctypes.data) % 64
    buf = raw[off:off + nbytes]
    buf[:] = 1
    return buf


def measure_read_gbs(ffi_lib: Any, nbytes: int, target_bytes: float = 1e8, trials: int = 7) -> float:
    """Single-thread streaming-read bandwidth (GB/s) over a buffer of ``nbytes``."""
    ffi, lib = ffi_lib
    nbytes -= nbytes % 256
    buf = aligned_buffer(nbytes)
    ptr = ffi.from_buffer(buf)
    reps = max(1, int(target_bytes // nbytes))
    lib.tsar_read(ptr, nbytes, 1)
    best = 0.0
    for _ in range(trials):
        t0 = time.perf_counter()
        lib.tsar_read(ptr, nbytes, reps)
        best = max(best, nbytes * reps / (time.perf_counter() - t0) / 1e9)
    return best


def measure_parallel_read_gbs(ffi_lib: Any, nbytes: int, threads: int, reps: int = 1,
                              trials: int = 3) -> float:
    """Aggregate read bandwidth (GB/s) of ``threads`` threads on private buffers (cffi releases
    the GIL during the C call)."""
    ffi, lib = ffi_lib
    nbytes -= nbytes % 256
    bufs = [aligned_buffer(nbytes) for _ in range(threads)]
    ptrs = [ffi.from_buffer(b) for b in bufs]
    for p in ptrs:
        lib.tsar_read(p, nbytes, 1)
    best = 0.0
    for _ in range(trials):
        barrier = threading.Barrier(threads + 1)

        def run(p: Any, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            lib.tsar_read(p, nbytes, reps)

        workers = [threading.Thread(target=run, args=(p,)) for p in ptrs]
        for w in workers:
            w.start()
        barrier.wait()
        t0 = time.perf_counter()
        for w in workers:
            w.join()
        best = max(best, threads * nbytes * reps / (time.perf_counter() - t0) / 1e9)
    return best


def measure_numpy_read_gbs(nbytes: int, target_bytes: float = 2e8) -> float:
    """Fallback without a C compiler: numpy reduction (slower than the hardware in L1/L2)."""
    buf = aligned_buffer(nbytes).view(np.uint64)
    reps = max(1, int(target_bytes // nbytes))
    buf.sum()
    t0 = time.perf_counter()
    for _ in range(reps):
        buf.sum()
    return nbytes * reps / (time.perf_counter() - t0) / 1e9


def probe_buffers(caches: list[tuple[str, int]]) -> dict[str, int]:
    """Buffer bytes that the streaming-read probe uses per level (``caches``: (name, size),
    innermost first): 1/2 L1D, 1/2 L2, max(1/4 L3, 4 x L2), max(4 x LLC, 128 MiB) up to 512 MiB."""
    sizes = [size for _, size in caches]
    bufs = {caches[0][0]: sizes[0] // 2}
    if len(caches) > 1:
        bufs[caches[1][0]] = sizes[1] // 2
    if len(caches) > 2:
        bufs[caches[2][0]] = max(sizes[2] // 4, 4 * sizes[1])
    bufs["DRAM"] = min(max(4 * sizes[-1], 128 << 20), 512 << 20)
    return bufs


def with_read_bandwidths(platform: Platform, e2e_gbs: dict[str, float]) -> Platform:
    """``platform`` with its cache terms and per-core DRAM term derived (as :func:`host` does)
    from end-to-end single-core read bandwidths (GB/s) per level (``e2e_gbs``: cache names and
    ``DRAM``; a level not given keeps its term)."""
    from dataclasses import replace

    hz = platform.core.frequency_ghz * 1e9
    names = [c.name for c in platform.caches] + ["DRAM"]
    old = [c.bandwidth for c in platform.caches] + [platform.dram.per_core_gbs * 1e9 / hz]
    e2e, inner = [], 0.0
    for term in old:   # end to end from the old terms
        inner += 1.0 / term
        e2e.append(1.0 / inner)
    for i, name in enumerate(names):
        if name in e2e_gbs:
            e2e[i] = e2e_gbs[name] * 1e9 / hz
    for i in range(1, len(e2e)):  # outer levels cannot be faster than inner ones
        e2e[i] = min(e2e[i], e2e[i - 1])
    terms = _ecm_terms(e2e)
    caches = tuple(replace(c, bandwidth=round(t, 2)) for c, t in zip(platform.caches, terms, strict=False))
    per_core = terms[-1] * hz / 1e9
    return replace(platform, caches=caches, dram=replace(
        platform.dram, per_core_gbs=per_core, sustained_gbs=max(platform.dram.sustained_gbs, per_core)))


def _ecm_terms(e2e_bpc: list[float]) -> list[float]:
    """Per-boundary bandwidths (B/cycle) from end-to-end ones: the time per byte of level i minus
    that of level i-1 (kept at least 10% of the end-to-end time per byte)."""
    out, inner = [], 0.0
    for b in e2e_bpc:
        t = max(1.0 / b - inner, 0.1 / b)
        out.append(1.0 / t)
        inner += t
    return out


def host(measure: bool = True, refresh: bool = False) -> Platform:
    """This machine as a :class:`Platform` (detected; bandwidths measured unless ``measure`` is
    False, in which case nominal placeholders are used and ``measured`` is empty)."""
    if not refresh and measure in _HOST:
        return _HOST[measure]
    info = _cpuinfo()
    ident = cpu_identity()
    vendor, family, model = ident.vendor, ident.family, ident.model
    flags = set(info.get("flags", "").split())
    uarch, proxy, note = uarch_for_cpu(vendor, family, model, ident.stepping, flags)
    measured_table = measured_uarch(ident, note) if proxy else None
    if measured_table is not None:  # no published table for this core: the one measured on it
        (uarch, note), proxy = measured_table, False
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    tpc = _threads_per_core()
    cores = max(1, cpus // tpc)
    mhz = float(info.get("cpu MHz", "0") or 0)
    caches = detect_caches() or [{"name": "L1D", "size": 32768, "shared_cpus": 1, "line": 64}]
    measured: dict[str, Any] = {"cpu": info.get("model name", ""), "vendor": vendor, "family": family,
                                "model": model, "cpuinfo_mhz": mhz}
    freq = mhz / 1000 if mhz else 2.0
    avx512_ratio = 1.0
    bufs = probe_buffers([(c["name"], c["size"]) for c in caches])
    e2e_gbs: dict[str, float] = {}
    if measure:
        probes = None
        from tsar.sim.platforms.host_probes import probes as get_probes

        probes = get_probes("avx2" in flags)
        if probes is not None:
            # many ~0.1 ms windows, the fastest kept: on a shared machine a short window is far
            # more likely to run undisturbed than a few 3 ms ones
            freq = measure_frequency_ghz(probes[1], iterations=50_000, trials=300)
            measured["frequency_ghz_measured"] = round(freq, 3)
            if "avx512bw" in flags:  # Intel lowers the clock under heavy 512-bit code
                ghz512 = measure_frequency_ghz(probes[1], iterations=50_000, trials=300, avx512=True)
                avx512_ratio = min(1.0, ghz512 / freq)
                measured["avx512_clock_ratio"] = round(avx512_ratio, 3)
            for name, size in bufs.items():
                e2e_gbs[name] = measure_read_gbs(probes, size, 1 if name == "DRAM" else 1e8,
                                                 5 if name == "DRAM" else 7)
            all_gbs = measure_parallel_read_gbs(probes, bufs["DRAM"], cpus)
            measured["method"] = ("C streaming read (256-bit loads), best of several short runs; "
                                  "dependent-add clock")
        else:
            for name, size in bufs.items():
                e2e_gbs[name] = measure_numpy_read_gbs(size)
            all_gbs = e2e_gbs["DRAM"]
            measured["method"] = "numpy reduction (no C compiler): L1/L2 values are underestimates"
        measured["read_gbs"] = {k: round(v, 2) for k, v in e2e_gbs.items()}
        # Outer levels cannot be faster than inner ones; clamp measurement noise.
        order = list(e2e_gbs)
        for inner, outer in itertools.pairwise(order):
            e2e_gbs[outer] = min(e2e_gbs[outer], e2e_gbs[inner])
        measured["read_gbs_all_threads_dram"] = round(all_gbs, 2)
        measured["buffer_bytes"] = bufs
    hz = freq * 1e9
    names = [c["name"] for c in caches]
    if e2e_gbs:
        e2e_bpc = [e2e_gbs[n] * 1e9 / hz for n in names] + [e2e_gbs["DRAM"] * 1e9 / hz]
        terms = _ecm_terms(e2e_bpc)
        inner_t = sum(1 / t for t in terms[:-1])
        per_core_gbs = terms[-1] * hz / 1e9
        t_thread = cpus / (all_gbs * 1e9 / hz) - inner_t  # cycles/byte per thread, all threads
        sustained = cpus / max(t_thread, 1e-12) * hz / 1e9
        sustained = max(min(sustained, per_core_gbs * cpus), per_core_gbs)
    else:
        terms = [*[64.0, 32.0, 16.0][: len(caches)], 0.0]
        per_core_gbs, sustained = 10.0, 20.0
    levels = tuple(
        CacheLevel(name=c["name"], size=c["size"], shared_by=max(1, c["shared_cpus"] // tpc),
                   bandwidth=round(terms[i], 2), shared_bandwidth=None, usable_fraction=0.75,
                   line=c["line"])
        for i, c in enumerate(caches))
    vector_bits = 512 if "avx512f" in flags else 256 if "avx2" in flags else 128
    plat = Platform(
        name="host", description=f"this machine: {info.get('model name', 'unknown CPU')}",
        source="detected (sysfs, /proc/cpuinfo) and measured on the spot" if measure else "detected",
        core=Core(model=info.get("model name", "unknown"), cores=cores, threads_per_core=tpc,
                  frequency_ghz=round(freq, 3), uarch=uarch, uarch_proxy=proxy, uarch_note=note,
                  vector_bits=vector_bits, vector_alu_ports=0, issue_width=None,
                  isa=tuple(f for f in VECTOR_ISA_FLAGS if f in flags), avx512_clock_ratio=avx512_ratio),
        l1i_size=_l1i_size(), caches=levels,
        dram=Dram(type="unknown", channels=None, channel_bits=None, transfer_rate_mts=None,
                  peak_gbs=None, sustained_gbs=round(sustained, 2),
                  per_core_gbs=round(per_core_gbs, 2)),
        threads=cpus, overlap="ecm",
        assumptions=("cache bandwidths are per-boundary ECM terms derived from end-to-end read "
                     "measurements", "usable_fraction 0.75 for every level",
                     "no measurement: nominal placeholders" if not measure else "measured on the spot"),
        measured=measured)
    _HOST[measure] = plat
    return plat
