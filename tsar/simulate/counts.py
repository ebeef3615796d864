"""Simulated execution counts of a kernel on one token or one block of tokens, cached on disk.

Every comparison, model evaluation and report needs the instruction mix and traffic of the same few
kernels on the same few shapes; simulating them once per machine and reusing the counts keeps those
commands fast. A cache entry is keyed by kernel, shape and a digest of the exact machine code, so
a changed kernel is simulated again. Kernels: the T-SAR BitLinear kernels
(``tsar-<config>-<flow>``, :mod:`tsar.simulate.tsar_kernel`) and the native integer cores (``tl2``, ``tl1``,
``i2s``, ``int2`` and the public formats ``tq1_0``, ``tq2_0``, ``iq1_bn``, ``iq2_bn``,
:mod:`tsar.simulate.native_kernel`).
"""

from __future__ import annotations

import hashlib
import pickle
from collections import Counter
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np

from tsar.common.toolchain import cache_dir, write_atomic
from tsar.kernels.simbuild import build_sim_library
from tsar.kernels.tsar_plan import KERNEL_PREFIX, TOKEN_BLOCK
from tsar.sim import Stats

ROW_UNIT = 256
"""Native cores are simulated at ROW_UNIT and 2 * ROW_UNIT rows and extrapolated to larger M."""
GEMM_BLOCK = TOKEN_BLOCK
"""Tokens of the simulated block from which prefill (GEMM) times are modelled: the T-SAR GEMM
dataflows' token block (``tsar_plan.TOKEN_BLOCK``), and what the native GEMM loops run on too."""


@dataclass
class KernelCounts:
    """What the timing model needs from one simulated token or block of ``tokens`` tokens."""

    kernel: str
    M: int
    K: int
    stats: Stats
    code: bytes
    code_address: int
    weight_bytes: int
    tokens: int = 1

    @property
    def bytes_moved(self) -> int:
        """Bytes loaded and stored by the kernel's instructions (vector and scalar), per token."""
        s = self.stats
        moved = s.vector_bytes_read + s.vector_bytes_written + s.scalar_bytes_read + s.scalar_bytes_written
        return moved // self.tokens


def _code_digest(kernel: str, M: int, K: int) -> str:
    if kernel.startswith(KERNEL_PREFIX):
        from tsar.simulate.tsar_kernel import plan_for, program_for

        code = program_for(plan_for(kernel, M, K)).code
    else:
        code = Path(build_sim_library()).read_bytes()
    return hashlib.sha256(code).hexdigest()[:16]


def _simulate(kernel: str, M: int, K: int, tokens: int) -> KernelCounts:
    if kernel.startswith(KERNEL_PREFIX):
        from tsar.simulate.tsar_kernel import plan_for, program_for, simulate

        plan = plan_for(kernel, M, K)
        rng = np.random.default_rng(0)
        w_t = rng.integers(-1, 2, (M, K)).astype(np.int8)
        run = simulate(plan, rng.standard_normal((tokens, K)).astype(np.float32), w_t, 1.0)
        if not run.exact:
            raise RuntimeError(f"{kernel} disagrees with the reference on {tokens} x {M} x {K}")
        return KernelCounts(kernel, M, K, run.stats, program_for(plan).code, run.code_address,
                            plan.weight_bytes, tokens)
    from tsar.simulate.native_kernel import packed_weight_bytes, simulate_native

    if M % ROW_UNIT == 0 and M >= 4 * ROW_UNIT:
        one, two = (simulated_counts(kernel, r, K, tokens=tokens) for r in (ROW_UNIT, 2 * ROW_UNIT))
        if one.code_address == two.code_address and one.code == two.code:
            t = M // ROW_UNIT - 1
            return KernelCounts(kernel, M, K, affine_stats(one.stats, two.stats, t), one.code,
                                one.code_address, packed_weight_bytes(kernel, M, K), tokens)
    run = simulate_native(kernel, M, K, n=tokens)
    if not run.exact:
        raise RuntimeError(f"{kernel} disagrees with the reference on {tokens} x {M} x {K}")
    return KernelCounts(kernel, M, K, run.stats, run.code, run.code_address, run.weight_bytes, tokens)


def affine_stats(one: Stats, two: Stats, t: int) -> Stats:
    """Counts of a kernel whose row loop ran ``1 + t`` times as often as in ``one``, given ``two``
    with twice the rows of ``one``: ``one + t * (two - one)`` for every count. Exact for the native
    cores, whose work per row block is identical (tested against direct simulation)."""
    values = {}
    for f in fields(Stats):
        a, b = getattr(one, f.name), getattr(two, f.name)
        if isinstance(a, Counter):
            values[f.name] = Counter({key: a[key] + t * (b[key] - a[key]) for key in a.keys() | b.keys()})
        elif isinstance(a, int) and not isinstance(a, bool):
            values[f.name] = a + t * (b - a)
    return replace(one, **values)


def simulated_counts(kernel: str, M: int, K: int, *, tokens: int = 1, use_cache: bool = True) -> KernelCounts:
    """Counts of ``kernel`` on an ``M x K`` layer for ``tokens`` tokens (simulated, or from the cache)."""
    block = "" if tokens == 1 else f"{tokens}x"
    path = cache_dir("counts") / f"{kernel}-{block}{M}x{K}-{_code_digest(kernel, M, K)}.pkl"
    if use_cache and path.exists():
        try:
            with path.open("rb") as f:
                return pickle.load(f)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            pass  # a damaged or outdated entry (or one of a renamed class): simulate again
    result = _simulate(kernel, M, K, tokens)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, pickle.dumps(result))
    return result
