"""Run the native baselines' AVX2 integer GEMV cores in the functional simulator.

The same C source that runs natively (:mod:`tsar.kernels.baselines`) is compiled without libc
(:func:`tsar.kernels.simbuild.build_sim_library`) and executed here, so its instruction mix and its
memory traffic, table lookups included, can be counted and modelled on other platforms. One call is
one token (GEMV) or a block of tokens (GEMM); the integer output is checked against the exact
reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from tsar.errors import UserError
from tsar.kernels import reference, simbuild
from tsar.kernels.registry import NATIVE_KERNELS, SIMULATED, SIMULATED_PUBLIC
from tsar.sim import Machine, Stats, create_machine

NATIVE_SIM_KERNELS = SIMULATED
"""The simulated baselines that compare models on other platforms (tl2, tl1, i2s, int2)."""
PUBLIC_FORMAT_SIM_KERNELS = SIMULATED_PUBLIC
"""The public ternary formats (tq1_0, tq2_0, iq1_bn, iq2_bn): simulated and counted, not compared yet."""
SIM_KERNELS = NATIVE_SIM_KERNELS + PUBLIC_FORMAT_SIM_KERNELS
"""Every kernel :func:`simulate_native` and :func:`tsar.simulate.counts.simulated_counts` accept."""


@dataclass
class NativeSimRun:
    """One simulated token of a native integer core."""

    kernel: str
    M: int
    K: int
    stats: Stats
    code: bytes  # the executed code region
    code_address: int
    exact: bool
    weight_bytes: int


@cache
def _library() -> str:
    return str(simbuild.build_sim_library())


def executed_region(machine: Machine, stats: Stats) -> tuple[bytes, int]:
    """The guest code spanning every executed address (for decoding the executed instructions)."""
    lo, hi = min(stats.per_address), max(stats.per_address) + 16
    return machine.mem.read(lo, hi - lo), lo


def pack_native(kernel: str, w: np.ndarray):
    """``w`` (int8 ``M x K`` ternary) in ``kernel``'s weight format (``.data`` holds the bytes)."""
    return NATIVE_KERNELS[kernel].packer.pack(w)


def packed_weight_bytes(kernel: str, M: int, K: int) -> int:
    """Bytes of an ``M x K`` layer in ``kernel``'s weight format (padding and headers included)."""
    return int(pack_native(kernel, np.zeros((M, K), np.int8)).data.nbytes)


def simulate_native(kernel: str, M: int, K: int, *, n: int = 1, seed: int = 0,
                    weights: np.ndarray | None = None, acts: np.ndarray | None = None) -> NativeSimRun:
    """Simulate ``kernel`` (one of :data:`SIM_KERNELS`) on an ``M x K`` ternary layer for ``n``
    tokens: one token through its GEMV entry, several through its GEMM entry (the token-blocked
    rows function that runs natively for prefill). ``weights`` (int8 ``M x K`` in {-1, 0, 1}) and
    ``acts`` (int8 ``n x K`` in [-127, 127]) default to random ones drawn from ``seed``."""
    if kernel not in SIM_KERNELS:
        raise UserError(f"no simulator build of {kernel!r} (have {', '.join(SIM_KERNELS)})")
    if n < 1:
        raise UserError(f"tokens must be >= 1, got {n}")
    if M < 1 or K < 1:
        raise UserError(f"{kernel}: layer shape must be positive, got {M} x {K}")
    rng = np.random.default_rng(seed)
    w = rng.integers(-1, 2, (M, K), dtype=np.int8) if weights is None else np.asarray(weights, np.int8)
    a = rng.integers(-127, 128, (n, K), dtype=np.int8) if acts is None else np.asarray(acts, np.int8)
    if w.shape != (M, K) or a.shape != (n, K):
        raise UserError(f"{kernel}: weights {w.shape} and activations {a.shape} must be "
                        f"({M}, {K}) and ({n}, {K})")
    if a.size and int(np.abs(a.astype(np.int16)).max()) > 127:
        raise UserError(f"{kernel}: activations must be in [-127, 127]")
    out = np.zeros((n, M), np.int32)
    try:
        packed = pack_native(kernel, w)
    except ValueError as exc:
        raise UserError(f"{kernel} cannot take a {M} x {K} layer: {exc}") from None
    machine = create_machine()
    symbols = machine.load_elf(_library())
    spec = NATIVE_KERNELS[kernel]
    bm, bk = (packed.bm, packed.bk) if spec.blocked else (0, 0)
    shape = (M, K, bm, bk) if spec.blocked else (M, K)
    data = packed.data.view(np.uint8)
    if spec.overread:   # loads that reach past the last row meet zero padding, as natively
        data = np.concatenate([data, np.zeros(spec.overread, np.uint8)])

    def scratch(query: str, *extra: int) -> np.ndarray:
        """Zeroed work of the size the library's ``query`` entry reports."""
        size = machine.call(symbols[f"tsar_sim_{kernel}_{query}"], M, K, bm, bk, *extra, returns="u64")
        return np.zeros(int(size) + 64, np.uint8)

    if n == 1:   # GEMV: LUT tables or prepared activations of one token as work, or nothing
        entry, args = "gemv", (data, *shape, a, *([scratch("work_size")] if spec.gemv_work else []), out)
    else:        # GEMM: every kernel takes work of the size its entry reports
        entry, args = "gemm", (data, *shape, a, n, scratch("gemm_work_size", n), out)
    rc = machine.call(symbols[f"tsar_sim_{kernel}_{entry}"], *args, returns="i32", memory_stats=True)
    if rc != 0:
        raise UserError(f"{kernel} rejected the {M} x {K} layer (return code {rc})")
    stats = machine.stats
    code, address = executed_region(machine, stats)
    exact = bool(np.array_equal(out, reference.ternary_matmul(w, a)))
    return NativeSimRun(kernel, M, K, stats, code, address, exact, int(packed.data.nbytes))
