"""Run the native baselines' integer cores (AVX2 builds, and other ISA levels where the simulator
library has them) in the functional simulator.

The same C source that runs natively (:mod:`tsar.kernels.baselines`) is compiled without libc
(:func:`tsar.kernels.simbuild.build_sim_library`) and executed here, so its instruction mix and its
memory traffic, table lookups included, can be counted and modelled on other platforms. One call is
one token (GEMV) or a block of tokens (GEMM); the integer output is checked against the exact
reference.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache

import numpy as np

from tsar.errors import UserError
from tsar.kernels import reference, simbuild
from tsar.kernels.registry import (
    NATIVE_KERNELS,
    SIMULATED,
    SIMULATED_PUBLIC,
    SIMULATED_PUBLIC_VARIANTS,
    SIMULATED_VARIANTS,
    runs_build,
    sim_entry,
    split_native_label,
)
from tsar.sim import Machine, Stats, create_machine

NATIVE_SIM_KERNELS = SIMULATED
"""The simulated baselines that compare models on other platforms (tl2, tl1, i2s, int2)."""
PUBLIC_FORMAT_SIM_KERNELS = SIMULATED_PUBLIC
"""The kernels simulated and counted but not compared yet: dense, trit5 and the public ternary
formats (tq1_0, tq2_0, iq1_bn, iq2_bn)."""
NATIVE_SIM_VARIANTS = SIMULATED_VARIANTS
"""Their builds at other ISA levels, named ``<kernel>-<isa>`` (``int2-avx512``, ``int2-avxvnni``)."""
SIM_KERNELS = NATIVE_SIM_KERNELS + NATIVE_SIM_VARIANTS + PUBLIC_FORMAT_SIM_KERNELS + SIMULATED_PUBLIC_VARIANTS
"""Every kernel :func:`simulate_native` and :func:`tsar.simulate.counts.simulated_counts` accept."""


def natives_for(isa: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The simulated natives a platform whose cores execute ``isa`` (``/proc/cpuinfo`` flags; empty:
    undeclared, AVX2 only) is compared with: every AVX2 build, and the builds at other levels whose
    flags it has (:data:`tsar.kernels.registry.SIM_ISAS`)."""
    return NATIVE_SIM_KERNELS + tuple(
        k for k in NATIVE_SIM_VARIANTS if isa and runs_build(*split_native_label(k), isa))


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


_LOADED: dict[int, tuple[Machine, dict[str, int]]] = {}


def loaded_machine() -> tuple[Machine, dict[str, int]]:
    """This process's machine with the simulator library loaded, and the library's symbols (the
    native cores' entries and the operators', :mod:`tsar.simulate.operators`). Loading decodes and
    compiles every instruction of the library (most of a small simulation's time), so it is done
    once per process; calls are independent (arguments are placed anew, statistics are per call)."""
    pid = os.getpid()  # a forked worker loads its own
    if pid not in _LOADED:
        machine = create_machine()
        _LOADED[pid] = machine, machine.load_elf(_library())
    return _LOADED[pid]


def executed_region(machine: Machine, stats: Stats) -> tuple[bytes, int]:
    """The guest code spanning every executed address (for decoding the executed instructions)."""
    lo, hi = min(stats.per_address), max(stats.per_address) + 16
    return machine.mem.read(lo, hi - lo), lo


def base_kernel(kernel: str) -> str:
    """The native kernel a label names (``int2-avx512`` -> ``int2``: one weight format)."""
    return split_native_label(kernel)[0]


def pack_native(kernel: str, w: np.ndarray):
    """``w`` (int8 ``M x K`` ternary; dense: any with |w| <= 64) in ``kernel``'s weight format
    (``.data`` holds the bytes; dense's ``.aux`` its row sums)."""
    return NATIVE_KERNELS[base_kernel(kernel)].packer.pack(w)


@cache
def packed_weight_bytes(kernel: str, M: int, K: int) -> int:
    """Bytes of an ``M x K`` layer in ``kernel``'s weight format (padding and headers included):
    the format's ``packed_nbytes`` formula where it has one, else the size of a packed zero matrix
    (a large layer takes a while; once per process)."""
    packer = NATIVE_KERNELS[base_kernel(kernel)].packer
    if hasattr(packer, "packed_nbytes"):
        return int(packer.packed_nbytes(M, K))
    return int(pack_native(kernel, np.zeros((M, K), np.int8)).data.nbytes)


TOKEN_GROUPS = {"int2": 4, "int2-avx512": 3, "int2-avxvnni": 2, "i2s-avx512": 2,
                **{f"{name}{level}": 4 for name in ("tq1_0", "tq2_0", "iq1_bn", "iq2_bn")
                   for level in ("", "-avxvnni")},
                "dense": 2, "dense-avxvnni": 2, "dense-avx512": 4,
                "trit5": 2, "trit5-avxvnni": 2, "trit5-avx512": 12}
"""Tokens the GEMM rows loops take together (``ternary_rows.h``'s ``TR_TOKENS``, int2's GEMM groups,
its AVX-512 rows' token triples and AVX-VNNI rows' pairs; I2_S's AVX-512 token pairs; dense's
6 x 2 row-token tiles (AVX2, AVX-VNNI) and 4 x 4 (AVX-512); trit5's token pairs (AVX2, AVX-VNNI)
and its AVX-512 GEMM's groups of 12): ``n`` and ``n + group`` tokens differ by one group's work.
The others loop over single tokens."""
GEMM_MIN_TOKENS = {"int2": 4, "int2-avx512": 3, "dense": 4, "dense-avxvnni": 4, "dense-avx512": 4,
                   "trit5-avx512": 12}
"""Fewest tokens from which ``n`` and ``n + group`` run the same code: the GEMM rows loop (int2's
``GEMM_MIN_N``; its AVX-512 rows from one triple on, since fewer tokens skip the triples' loop;
dense's ``n >= 4`` on AVX2 and AVX-VNNI; fewer take their GEMV or token-pair
loops) with a whole group (dense's AVX-512 4 x 4 tiles, trit5's AVX-512 groups of 12)."""
K_PERIODS = {"tl2": 96, "tl1": 128, "i2s": 1024, "dense": 2048, "int2": 128, "trit5": 640, "tq1_0": 1536,
             "tq2_0": 2048, "iq1_bn": 1536, "iq2_bn": 2048}
"""Columns by which a native core's work grows identically, K's remainder kept: a whole number of
its blocks and of its int16 widening windows. TL2: 96-column blocks, widened per block (the
2-weight tail is K mod 96); TL1: 128-column blocks, widened per block; I2_S: 128-column blocks,
widened every 8; int2: 4 columns a step, widened every 16 steps (GEMV) or 32 (GEMM); the ternary
rows kernels (``ternary_rows.h``): steps of 128 (TQ2_0, IQ*_BN: two 64-weight blocks) or 256
columns (TQ1_0), widened every 16 (TQ2_0, IQ2_BN), 6 (TQ1_0) or 12 steps (IQ1_BN); dense: steps
of 32 columns, widened every ``bk`` = 64 steps on AVX2 (ternary weights, K >= 2048: ``bk`` is
``min(K / 32, 64)``), eight-step chains on AVX-VNNI; trit5: quads of 20 columns, AVX-512 GEMM
chunks of 32 quads, the activation rows' zero padding to 64 bytes (K not a multiple of 20)."""
ROW_PERIODS = {"dense": 96, "trit5": 256}
"""Rows by which the work grows identically where 32 is not a multiple of the row blocks: dense's
6-row GEMM tiles (AVX2, AVX-VNNI) and 4-row ones (AVX-512); trit5's chunks of eight 32-row blocks
(AVX2, AVX-VNNI; the AVX-512 GEMV pairs blocks)."""


def row_period(kernel: str, M: int) -> int:
    """Rows by which ``kernel``'s work on ``M`` rows grows identically: the TL kernels' row block
    (``bm``, as the packer chooses it for M), :data:`ROW_PERIODS`, else 32 (int2's row blocks, a
    multiple of the others')."""
    from tsar.kernels.formats.tl2 import default_bm

    name = base_kernel(kernel)
    return default_bm(M) if NATIVE_KERNELS[name].blocked else ROW_PERIODS.get(name, 32)


def k_period(kernel: str) -> int:
    """:data:`K_PERIODS` of the kernel a label names (a multiple of every ISA level's step)."""
    return K_PERIODS[base_kernel(kernel)]


def simulate_native(kernel: str, M: int, K: int, *, n: int = 1, seed: int = 0,
                    weights: np.ndarray | None = None, acts: np.ndarray | None = None,
                    gemm: bool = False, isa: str = "avx2") -> NativeSimRun:
    """Simulate ``kernel`` (one of :data:`SIM_KERNELS`) on an ``M x K`` ternary layer for ``n``
    tokens: one token through its GEMV entry, several through its GEMM entry (the token-blocked
    rows function that runs natively for prefill; ``gemm``: the GEMM entry for one token too).
    ``weights`` (int8 ``M x K`` in {-1, 0, 1}; dense: |w| <= 64) and ``acts`` (int8 ``n x K`` in
    [-127, 127]) default to random ones drawn from ``seed``. ``isa``: the rows function (``avx2``,
    or another level of the kernel's ``sim_isas``: e.g. int2's AVX-512 VNNI rows)."""
    if kernel not in SIM_KERNELS:
        raise UserError(f"no simulator build of {kernel!r} (have {', '.join(SIM_KERNELS)})")
    label = kernel
    kernel, level = split_native_label(label)
    isa = level if isa == "avx2" else isa
    if isa not in NATIVE_KERNELS[kernel].sim_isas:
        raise UserError(f"{kernel} has no {isa} build in the simulator library "
                        f"(it has: {', '.join(NATIVE_KERNELS[kernel].sim_isas)})")
    stem = sim_entry(kernel, isa)
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
    machine, symbols = loaded_machine()
    spec = NATIVE_KERNELS[kernel]
    bm, bk = (packed.bm, packed.bk) if spec.blocked else (0, packed.bk) if spec.aux else (0, 0)
    # the weights' fields after the bytes: the row sums and the whole descriptor (dense), the
    # blocked kernels' shape and blocks, or the shape
    shape = (packed.aux, M, K, bm, bk) if spec.aux else (M, K, bm, bk) if spec.blocked else (M, K)
    data = packed.data.view(np.uint8)
    if spec.overread:   # loads that reach past the last row meet zero padding, as natively
        data = np.concatenate([data, np.zeros(spec.overread, np.uint8)])

    def scratch(query: str, *extra: int) -> np.ndarray:
        """Zeroed work of the size the library's ``query`` entry reports."""
        size = machine.call(symbols[f"tsar_sim_{stem}_{query}"], M, K, bm, bk, *extra, returns="u64")
        return np.zeros(int(size) + 64, np.uint8)

    if n == 1 and not gemm:   # GEMV: LUT tables or prepared activations of one token as work, or nothing
        entry, args = "gemv", (data, *shape, a, *([scratch("work_size")] if spec.gemv_work else []), out)
    else:        # GEMM: every kernel takes work of the size its entry reports
        entry, args = "gemm", (data, *shape, a, n, scratch("gemm_work_size", n), out)
    rc = machine.call(symbols[f"tsar_sim_{stem}_{entry}"], *args, returns="i32", memory_stats=True)
    if rc != 0:
        raise UserError(f"{kernel} rejected the {M} x {K} layer (return code {rc})")
    stats = machine.stats
    code, address = executed_region(machine, stats)
    exact = bool(np.array_equal(out, reference.ternary_matmul(w, a)))
    return NativeSimRun(label, M, K, stats, code, address, exact, int(packed.data.nbytes))
