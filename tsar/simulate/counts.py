"""Simulated execution counts of a kernel on one token or one block of tokens, cached on disk.

Every comparison, model evaluation and report needs the instruction mix and traffic of the same few
kernels on the same few shapes; simulating them once per machine and reusing the counts keeps those
commands fast. A cache entry is keyed by kernel, shape and a digest of what makes the machine code
(a T-SAR kernel's generated source and its assembler, the native library's bytes), so a changed
kernel is simulated again. Kernels: the T-SAR BitLinear kernels
(``tsar-<config>-<flow>``, :mod:`tsar.simulate.tsar_kernel`) and the native integer cores (``tl2``, ``tl1``,
``i2s``, ``int2``, ``dense``, ``trit5`` and the public formats ``tq1_0``, ``tq2_0``, ``iq1_bn``,
``iq2_bn``, :mod:`tsar.simulate.native_kernel`).

Large shapes are not simulated whole. Where the counts are affine along one axis of the shape, the
counts of the shape are ``one + t * (two - one)`` of two smaller runs along that axis, ``two`` one
period beyond ``one`` and the shape ``t`` periods beyond (:class:`Basis`), for every count: per
instruction, per class and mnemonic, T-SAR uops, bytes. The smaller runs are decomposed again where
that is cheaper, down to small runs that are simulated (each checked bit for bit against the
reference). The tests compare extrapolated and whole simulations for every dataflow and native core:

* tokens: the per-token dataflows and the native cores run every token (or group of tokens) through
  the same code; the token-blocked dataflows run blocks of ``TOKEN_BLOCK`` tokens and, inside a
  block, sub-blocks of ``G`` tokens (``plan.token_groups``): ``n`` and ``n + G`` tokens of one
  remainder differ by one sub-block (beyond a block: by one block) of identical work. A native
  core's smaller runs go through its GEMM entry, as the target does, one token included;
* M (T-SAR): the generated code bakes M in, but one more pass of ``plan.pass_tiles`` tiles (the
  period of every row loop: accumulators, passes, tile blocks) only changes loop counts, offsets
  and immediate sizes, not the instruction sequence, once every counted loop keeps its form: the
  smaller runs are generated with the target's loop forms (``tsar_codegen.generate(loops=...)``: a
  loop of one iteration stays a loop where the target has one) and must generate the target's
  instructions with their numbers blanked out. Their counts are combined per instruction (its index
  in the code) and moved onto the target's addresses;
* K (T-SAR): likewise, one widening window of chunks (and whole quantization vectors) per period;
* M and K (natives): one block of rows (TL: the packer's ``bm``, ``native_kernel.ROW_PERIODS``,
  else 32) or of columns (a whole number of the format's blocks and int16 widening windows,
  ``native_kernel.K_PERIODS``); the code is the same for every shape.

The decomposition is planned for all counts a command needs at once (:func:`plan_runs`): a small
run that one count is simulated from is free for the next, so the plan minimizes an estimate of
the simulated work (:data:`RUN_OVERHEAD`) over all of them. The small runs are independent: a
caller that knows what it will ask for announces it (:func:`announced`), and the first count that
is not cached simulates every announced count's small runs in a process pool (:func:`prefetch`),
each written to the cache as it completes, so an interrupted command keeps what it computed.
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, suppress
from dataclasses import dataclass, fields, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tsar.common.toolchain import cache_dir, write_atomic
from tsar.console import WorkHook
from tsar.errors import UserError
from tsar.kernels.simbuild import build_sim_library
from tsar.kernels.tsar_plan import KERNEL_PREFIX, QUANT_LANES, TOKEN_BLOCK
from tsar.sim import Stats

if TYPE_CHECKING:
    from tsar.sim.python_engine.machine import PythonMachine

ROW_UNIT = 256
"""The TL native cores' row block at the shapes compared (``bm`` of ``formats.tl2.default_bm``):
they are simulated at ROW_UNIT and 2 * ROW_UNIT rows and extrapolated to larger M."""
GEMM_BLOCK = TOKEN_BLOCK
"""Tokens of the simulated block from which prefill (GEMM) times are modelled: the T-SAR GEMM
dataflows' token block (``tsar_plan.TOKEN_BLOCK``), and what the native GEMM loops run on too."""
SEARCH = 3
"""Smaller shapes tried per axis for two runs of the target's code layout."""
RUN_OVERHEAD = 500
"""The fixed cost of one simulation (assembling, loading, decoding and compiling what differs from
the kernel's last program on the worker's machine), in TGEMVs of simulated work: about 4 ms of the
Python engine, which simulates a TGEMV with its loads and loop in about 8 us, and per token an
input's quantization in about as long, an output's zeroing and dequantization in 1.5 times that
(fitted to the 559 T-SAR runs of a report)."""
NATIVE_RUN_OVERHEAD = 12_000
"""Likewise for a native core: about 0.2 s a run (its preparation, its tables, the library's code
decoded in a fresh process), measured on the natives' runs of a report."""
FINISH_SECONDS = 0.005
"""Seconds to extrapolate one count from cached runs (loading them, combining, packing nothing:
weight bytes come from the formats' size formulas), until the first ones are measured: a report's
684 took 2 s on two workers."""
NATIVE_WEIGHTS_PER_TGEMV = 12
"""Weights x tokens of a native core simulated in the time of one TGEMV: about 12 for the slowest
per weight (TL2, trit5 with AVX2), measured per core on runs of one and two periods of each axis;
the wide ones (trit5's and dense's AVX-512 rows, I2_S with VNNI) simulate up to 25 times as many."""


@dataclass(frozen=True)
class Run:
    """One count: ``kernel`` on ``M x K`` for ``tokens`` tokens; ``loops``: a T-SAR kernel generated
    with these loop forms (those of a larger shape it is extrapolated to), None: its own."""

    kernel: str
    M: int
    K: int
    tokens: int = 1
    loops: tuple[int, ...] | None = None
    gemm: bool = False
    """A native core's one token through its GEMM entry (as a run of several tokens takes it)."""
    tile_block: int = 0
    """``ap-tokens``: tiles per pass, if not the kernel's (``KernelPlan.tile_block``)."""

    @property
    def tsar(self) -> bool:
        return self.kernel.startswith(KERNEL_PREFIX)

    def at(self, M: int, K: int, tokens: int) -> Run:
        return replace(self, M=M, K=K, tokens=tokens, gemm=self.gemm and tokens == 1)


@dataclass
class KernelCounts:
    """What the timing model needs from one simulated token or block of ``tokens`` tokens.
    ``offsets``: a T-SAR kernel's instructions, by their offset in ``code`` (in order)."""

    kernel: str
    M: int
    K: int
    stats: Stats
    code: bytes
    code_address: int
    weight_bytes: int
    tokens: int = 1
    offsets: tuple[int, ...] = ()

    @property
    def bytes_moved(self) -> int:
        """Bytes loaded and stored by the kernel's instructions (vector and scalar), per token."""
        s = self.stats
        moved = s.vector_bytes_read + s.vector_bytes_written + s.scalar_bytes_read + s.scalar_bytes_written
        return moved // self.tokens


@dataclass(frozen=True)
class Basis:
    """The counts of a run as ``sum(weight * counts(run))`` over smaller ``runs`` (module doc),
    along ``axis``: ``"tokens"``, ``"M"`` or ``"K"`` (two runs, one period apart, the target ``t``
    periods beyond the first: weights ``1 - t`` and ``t``), or ``"passes"`` (``ap-tokens``: passes,
    their size and the partial pass varied, :func:`_pass_basis`)."""

    axis: str
    runs: tuple[Run, ...]
    weights: tuple[int, ...]

    @classmethod
    def affine(cls, axis: str, one: Run, two: Run, t: int) -> Basis:
        return cls(axis, (one, two), (1 - t, t))


# --- T-SAR code layouts ----------------------------------------------------------------------------
def _plan(run: Run):
    from tsar.simulate.tsar_kernel import plan_for

    return plan_for(run.kernel, run.M, run.K, run.tile_block)


def _program(run: Run):
    from tsar.simulate.tsar_kernel import program_for

    return program_for(_plan(run), run.loops)


def _forms(run: Run) -> tuple[int, ...]:
    """The loop forms of the run's kernel (its own, whatever ``run.loops`` says)."""
    return _generated(replace(run, loops=None))[1]


def _normal(run: Run) -> Run:
    """``run`` with ``loops`` None where they are the shape's own (one program, one cache entry)."""
    if run.loops is not None and run.loops == _forms(replace(run, loops=None)):
        return replace(run, loops=None)
    return run


_NUMBER = re.compile(r"(?<![\w.])-?(?:0x[0-9a-fA-F]+|\d+)\b")
_BYTE_INSTRUCTION = re.compile(r"^[ \t]*\.byte[^;\n]*;([^\n]*\S[^\n]*)$", re.MULTILINE)
"""A ``.byte`` line that is an instruction (:func:`_instruction`): its comment (group 1) is its text."""


def _instruction(source: str) -> str | None:
    """A source line's instruction (labels and comments removed), None for a directive or none. A
    ``.byte`` line with a comment is an instruction the generator encoded itself (EVEX, which the
    x86 assembler does not take; :mod:`tsar.kernels.tsar_codegen`): its text is the comment."""
    text, _, comment = source.partition(";")
    text = text.strip()
    if ":" in text and not text.split(":", 1)[0].count(" "):
        text = text.split(":", 1)[1].strip()
    if text.startswith(".byte") and comment.strip():
        return comment.strip()
    return text if text and not text.startswith(".") else None


@cache
def _generated(run: Run) -> tuple[str | None, tuple[int, ...]]:
    """The generated assembly of a T-SAR run (None where the shape cannot take its loop forms) and
    the forms its loops take."""
    from tsar.kernels.tsar_codegen import generate_with_forms

    try:
        return generate_with_forms(_plan(run), loops=run.loops)
    except ValueError:
        return None, ()


def _source(run: Run) -> str | None:
    return _generated(run)[0]


@cache
def _signature(run: Run) -> str | None:
    """The generated assembly of a T-SAR run with every number (immediates, displacements, loop
    bounds, and the shape in its header) blanked out; None where the shape cannot take the run's
    loop forms. Labels keep their numbers: they count the loops emitted. A ``.byte`` instruction
    counts by its text (the comment), not its bytes, whose number depends on the displacements."""
    source = _source(run)
    if source is None:
        return None
    return _NUMBER.sub("#", _BYTE_INSTRUCTION.sub(r"\1", source))


@cache
def code_layout(run: Run) -> tuple[int, ...]:
    """The offset in the code of each instruction of a T-SAR run, in order: two runs of one
    signature execute the same instructions in the same order, at these offsets each."""
    program = _program(run)
    return tuple(e.address - program.base for e in program.listing if e.data and _instruction(e.source))


# --- decompositions --------------------------------------------------------------------------------
def _work(run: Run) -> float:
    """Estimated cost of simulating ``run`` whole, in TGEMVs (:data:`RUN_OVERHEAD`)."""
    if not run.tsar:
        return NATIVE_RUN_OVERHEAD + run.tokens * run.M * run.K / NATIVE_WEIGHTS_PER_TGEMV
    plan = _plan(run)
    return RUN_OVERHEAD + run.tokens * (plan.tiles * plan.chunks + run.K + 1.5 * run.M)


def _below(target: int, period: int, least: int = 1) -> Iterator[tuple[int, int]]:
    """``(v, t)``: up to :data:`SEARCH` values ``v >= least`` congruent to ``target`` modulo
    ``period``, smallest first, at least two periods below it, and the periods ``t`` from ``v``."""
    start = target % period or period
    start += -(-max(least - start, 0) // period) * period
    for v in range(start, target - 2 * period + 1, period)[:SEARCH]:
        yield v, (target - v) // period


def _native_bases(run: Run) -> Iterator[Basis]:
    """A native core's work grows identically per token (group), row block and column block
    (:mod:`tsar.simulate.native_kernel`); the GEMM entry for more than one token."""
    from tsar.simulate.native_kernel import GEMM_MIN_TOKENS, TOKEN_GROUPS, k_period, row_period

    if run.tokens > 1:
        period = TOKEN_GROUPS.get(run.kernel, 1)
        for n, t in _below(run.tokens, period, GEMM_MIN_TOKENS.get(run.kernel, 1)):
            one = replace(run.at(run.M, run.K, n), gemm=n == 1)
            yield Basis.affine("tokens", one, run.at(run.M, run.K, n + period), t)
            break
    period = row_period(run.kernel, run.M)
    for m, t in _below(run.M, period):
        if row_period(run.kernel, m) == period:
            yield Basis.affine("M", run.at(m, run.K, run.tokens), run.at(m + period, run.K, run.tokens), t)
        break
    period = k_period(run.kernel)
    for k, t in _below(run.K, period, period):  # at least one whole block
        yield Basis.affine("K", run.at(run.M, k, run.tokens), run.at(run.M, k + period, run.tokens), t)
        break


def _tsar_bases(run: Run) -> Iterator[Basis]:
    plan = _plan(run)
    period = plan.token_block if run.tokens > plan.token_block else plan.token_groups
    for n, t in _below(run.tokens, period):
        yield Basis.affine("tokens", run.at(run.M, run.K, n), run.at(run.M, run.K, n + period), t)
        break
    target = _signature(run)
    forms = run.loops or _forms(run)
    window = plan.widen_every // plan.chunk_groups * plan.chunk_groups * plan.cfg.k
    for axis, period in (("M", plan.pass_tiles * plan.cfg.m), ("K", math.lcm(window, QUANT_LANES))):
        for v, t in _below(getattr(run, axis), period):
            pair = [replace(run, loops=forms, **{axis: value}) for value in (v, v + period)]
            try:
                same = all(_signature(p) == target for p in pair)
            except (ValueError, UserError):  # not a valid plan
                same = False
            if same:
                yield Basis.affine(axis, _normal(pair[0]), _normal(pair[1]), t)
                break


def _pass_basis(run: Run) -> Iterator[Basis]:
    """``ap-tokens``: its counts are ``a + b F + c F P + d p + e P`` in the number of full passes
    ``F``, the tiles per pass ``P`` and the tiles of the partial pass ``p`` (each pass runs the same
    chunk loops, and a loop over its tiles; the int32 rows are zeroed and dequantized over all
    ``F P + p`` tiles, the partial-sum rows over ``P``), so five runs of the target's code with
    passes of 2 and 3 tiles give them (fewer where ``F`` is 1 or ``p`` is 0 or 1)."""
    plan = _plan(run)
    full, part = divmod(plan.tiles, plan.pass_tiles)
    if plan.flow != "ap-tokens" or run.tile_block or plan.pass_tiles <= 3:
        return
    p = 2 if part else 1
    points = [(1, p, min(part, 1)), (1, p + 1, min(part, 1))]
    terms = [lambda f, t, q: 1, lambda f, t, q: t]
    if full > 1:
        points += [(2, p, min(part, 1)), (2, p + 1, min(part, 1))]
        terms += [lambda f, t, q: f, lambda f, t, q: f * t]
    if part > 1:  # (a partial pass of one tile runs its tile loops inline, whatever the target's size)
        points.append((1, p + 1, 2))
        terms.append(lambda f, t, q: q)
    weights = _solve([[term(*point) for term in terms] for point in points],
                     [term(full, plan.pass_tiles, part) for term in terms])
    forms, target = run.loops or _forms(run), _signature(run)
    runs = [replace(run, M=(f * t + q) * plan.cfg.m, tile_block=t, loops=forms) for f, t, q in points]
    if weights is not None and all(_signature(r) == target for r in runs):
        used = [(_normal(r), w) for r, w in zip(runs, weights, strict=True) if w]
        yield Basis("passes", tuple(r for r, _ in used), tuple(w for _, w in used))


def _solve(rows: list[list[int]], target: list[int]) -> tuple[int, ...] | None:
    """Integer weights ``w`` with ``sum(w[i] * rows[i]) == target`` (exact), None if there are none."""
    from fractions import Fraction

    n = len(rows)
    a = [[Fraction(rows[i][j]) for i in range(n)] + [Fraction(target[j])] for j in range(n)]  # rows^T, target
    for col in range(n):
        pivot = next((r for r in range(col, n) if a[r][col]), None)
        if pivot is None:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        a[col] = [x / a[col][col] for x in a[col]]
        for r in range(n):
            if r != col and a[r][col]:
                a[r] = [x - a[r][col] * y for x, y in zip(a[r], a[col], strict=True)]
    weights = [a[i][n] for i in range(n)]
    return tuple(int(w) for w in weights) if all(w.denominator == 1 for w in weights) else None


@cache
def bases(run: Run) -> tuple[Basis, ...]:
    """Every way of extrapolating ``run`` (at most one per axis: tokens, M or passes, K)."""
    if not run.tsar:
        return tuple(_native_bases(run))
    return (*_tsar_bases(run), *_pass_basis(run))


class _State:
    """What this process planned and simulated, for one cache directory (a test or a command that
    moves ``$TSAR_CACHE_DIR`` starts afresh)."""

    def __init__(self) -> None:
        self.planned: dict[Run, Basis | None] = {}  # how each planned run is computed (None: whole)
        self.simulated: dict[Run, KernelCounts] = {}  # simulated here or by prefetch's workers
        self.computed: dict[Run, KernelCounts] = {}  # extrapolated by prefetch's workers


_STATES: dict[Path, _State] = {}


def _state() -> _State:
    return _STATES.setdefault(cache_dir("counts"), _State())


def forget() -> None:
    """Forget what this process planned and simulated (the cache on disk stays)."""
    _STATES.clear()


def _cheapest(run: Run, direct: Callable[[Run], float], memo: dict[Run, tuple[float, Basis | None]]
              ) -> tuple[float, Basis | None]:
    """The least estimated cost of ``run`` and its first step (None: simulated whole, at the cost
    ``direct`` says)."""
    if run not in memo:
        best: tuple[float, Basis | None] = (direct(run), None)
        for b in bases(run) if best[0] else ():
            cost = sum(_cheapest(r, direct, memo)[0] for r in b.runs)
            if cost < best[0]:
                best = (cost, b)
        memo[run] = best
    return memo[run]


def basis(kernel: str, M: int, K: int, tokens: int = 1) -> Basis | None:
    """The first step of computing the counts of ``kernel`` on ``tokens x M x K`` alone, nothing
    cached (module doc), or None where it is simulated whole."""
    return _cheapest(Run(kernel, M, K, tokens), _work, {})[1]


def program(run: Run) -> Run:
    """The code ``run`` executes: its runs with other numbers of tokens run it again (a worker
    simulates them together, on one machine that has decoded and compiled it once)."""
    return replace(run, tokens=1, gemm=False) if run.tsar else run


def plan_runs(requests: Iterable[Run]) -> list[Run]:
    """Plan the counts of ``requests`` that are not cached, together: each is simulated whole or
    extrapolated from smaller runs, whichever costs least by :func:`_work`, a run that is already to
    be simulated for another count (in this call or before) costing nothing, and another run of its
    code less. Returns the runs to simulate (or find in the cache), largest first; the plan is kept
    for :func:`simulated_counts`."""
    return _plan_into(requests, _state().planned, lambda run: cache_path(run).exists())


def _plan_into(requests: Iterable[Run], planned: dict[Run, Basis | None],
               cached: Callable[[Run], bool]) -> list[Run]:
    """:func:`plan_runs` into ``planned``, ``cached(run)`` saying whether a count is cached."""
    chosen: dict[Run, None] = {}
    programs: set[Run] = set()
    simulated = _state().simulated

    def free(run: Run) -> bool:
        return run in chosen or run in simulated or (run in planned and planned[run] is None)

    def direct(run: Run) -> float:
        if free(run):
            return 0.0
        return _work(run) - (RUN_OVERHEAD * 0.6 if run.tsar and program(run) in programs else 0)

    def commit(run: Run, memo: dict) -> None:
        b = _cheapest(run, direct, memo)[1]
        if free(run) and b is None:
            return
        planned[run] = b
        if b is None:
            chosen[run] = None
            programs.add(program(run))
        else:
            for r in b.runs:
                commit(r, memo)

    for request in requests:
        if request not in simulated and request not in planned and not cached(request):
            commit(request, {})
    return sorted(chosen, key=_work, reverse=True)


def _decision(run: Run) -> Basis | None:
    if run not in _state().planned:
        plan_runs([run])
    return _state().planned.get(run)


# --- the cache ------------------------------------------------------------------------------------
@cache
def _assembler() -> bytes:
    """What turns a T-SAR kernel's source into machine code: the ISA package's sources (assembler,
    encodings, the configurations) and the x86 assembler's version."""
    import keystone

    from tsar.isa import assembler

    digest = hashlib.sha256(keystone.version_bind().__repr__().encode())
    for path in sorted(Path(assembler.__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.digest()


LAYOUT_VERSION = 3
"""Version of how a T-SAR run's code layout and signature are read from its source (part of the
cache key: 2 counts the generator's ``.byte`` instructions, 3 compares them by their text)."""


def _digest(run: Run) -> str:
    """A T-SAR kernel's source and its assembler with the registered configurations (the machine
    code is a function of them), or the native library's machine code."""
    if run.tsar:
        from tsar.isa.config import configs

        source = _source(run)
        if source is None:
            raise ValueError(f"{run.kernel} {run.M} x {run.K} cannot take the loop forms {run.loops}")
        return hashlib.sha256(_assembler() + repr(configs()).encode() + source.encode()
                              + f"layout {LAYOUT_VERSION}".encode()).hexdigest()[:16]
    return _library_digest()


@cache
def _library_digest() -> str:
    return hashlib.sha256(Path(build_sim_library()).read_bytes()).hexdigest()[:16]


def cache_path(run: Run) -> Path:
    """The cache entry of ``run``'s counts."""
    block = "" if run.tokens == 1 and not run.gemm else f"{run.tokens}x"
    return cache_dir("counts") / f"{run.kernel}-{block}{run.M}x{run.K}-{_digest(run)}.pkl"


def _load(path: Path) -> KernelCounts | None:
    try:
        with path.open("rb") as f:
            return pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None  # missing, damaged or outdated (or of a renamed class): simulate again


def _store(run: Run, counts: KernelCounts) -> KernelCounts:
    path = cache_path(run)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, pickle.dumps(counts))
    return counts


# --- simulation and extrapolation -----------------------------------------------------------------
def simulate_whole(run: Run) -> KernelCounts:
    """Simulate ``run`` (bit-exact against the reference, or RuntimeError)."""
    kernel, M, K, tokens = run.kernel, run.M, run.K, run.tokens
    if run.tsar:
        from tsar.simulate.tsar_kernel import loaded_symbols, program_for, simulate

        plan = _plan(run)
        rng = np.random.default_rng(0)
        w_t = rng.integers(-1, 2, (M, K)).astype(np.int8)
        machine = _machine(kernel)
        loaded_symbols(machine, program_for(plan, run.loops), alone=True)
        out = simulate(plan, rng.standard_normal((tokens, K)).astype(np.float32), w_t, 1.0, loops=run.loops,
                       machine=machine)
        if not out.exact:
            raise RuntimeError(f"{kernel} disagrees with the reference on {tokens} x {M} x {K}")
        stats, base = out.stats, out.code_address
        return KernelCounts(kernel, M, K, stats, _program(run).code, base, plan.weight_bytes, tokens,
                            code_layout(run))
    from tsar.simulate.native_kernel import simulate_native

    native = simulate_native(kernel, M, K, n=tokens, gemm=run.gemm)
    if not native.exact:
        raise RuntimeError(f"{kernel} disagrees with the reference on {tokens} x {M} x {K}")
    return KernelCounts(kernel, M, K, native.stats, native.code, native.code_address, native.weight_bytes,
                        tokens)


_MACHINES: dict[int, tuple[tuple[str, int], PythonMachine]] = {}


def _machine(kernel: str) -> PythonMachine:
    """This process's machine for T-SAR runs of ``kernel``: each run loads its program alone
    (:func:`~tsar.simulate.tsar_kernel.loaded_symbols` ``alone``: the code a fresh machine would run, at the
    address it would load it, compiled only where it differs from the last run's); another kernel,
    or a change of the registered configurations, gets a fresh machine (its state is then what a
    fresh machine's is, e.g. not widened by an earlier 512-bit kernel)."""
    from tsar.isa.config import registry_version

    pid, key = os.getpid(), (kernel, registry_version())  # a forked worker creates its own
    held = _MACHINES.get(pid)
    if held is None or held[0] != key:
        from tsar.sim.python_engine.machine import PythonMachine

        held = _MACHINES[pid] = (key, PythonMachine())
    return held[1]


def _simulated(run: Run) -> KernelCounts:
    """A run simulated whole: from this process, the cache, or simulated now (and cached)."""
    simulated = _state().simulated
    if run not in simulated:
        simulated[run] = _load(cache_path(run)) or _store(run, simulate_whole(run))
    return simulated[run]


def _indexed(run: Run) -> tuple[Stats, int]:
    """A T-SAR run's counts with each per-address count keyed by the instruction's index in the
    code (the same in every run of one signature), and the address the code was loaded at."""
    b = _decision(run) if run not in _state().simulated else None
    if b is not None:
        parts = [_indexed(r) for r in b.runs]
        return combined_stats([p[0] for p in parts], b.weights), parts[0][1]
    c = _simulated(run)
    index = {offset: i for i, offset in enumerate(c.offsets or code_layout(run))}
    per_index = Counter({index[a - c.code_address]: n for a, n in c.stats.per_address.items()})
    return replace(c.stats, per_address=per_index), c.code_address


def extrapolated(run: Run, b: Basis) -> KernelCounts | None:
    """The counts of ``run`` from basis ``b`` (its runs computed as planned); None where they are
    not affine after all (a negative count)."""
    if run.tsar:
        parts = [_indexed(r) for r in b.runs]
        stats, address = combined_stats([p[0] for p in parts], b.weights), parts[0][1]
        offsets = code_layout(run)
        stats = replace(stats, per_address=Counter({address + offsets[i]: n
                                                    for i, n in stats.per_address.items()}))
        result = KernelCounts(run.kernel, run.M, run.K, stats, _program(run).code, address,
                              _plan(run).weight_bytes, run.tokens, offsets)
    else:
        from tsar.simulate.native_kernel import packed_weight_bytes

        parts = [_counts(r) for r in b.runs]
        if any(p.code_address != parts[0].code_address or p.code != parts[0].code for p in parts):
            return None
        result = KernelCounts(run.kernel, run.M, run.K, combined_stats([p.stats for p in parts], b.weights),
                              parts[0].code, parts[0].code_address,
                              packed_weight_bytes(run.kernel, run.M, run.K), run.tokens)
    return None if any(n < 0 for n in result.stats.per_address.values()) else result


def combined_stats(parts: list[Stats], weights: tuple[int, ...]) -> Stats:
    """``sum(weight * part)`` for every count of the statistics (counts of zero dropped): the
    counts of a run from those of smaller runs (:class:`Basis`). Exact where the work grows as the
    basis assumes (tested against whole simulations)."""
    values = {}
    for f in fields(Stats):
        first = getattr(parts[0], f.name)
        if isinstance(first, Counter):
            keys = set().union(*(getattr(p, f.name).keys() for p in parts))
            values[f.name] = Counter({key: n for key in keys
                                      if (n := sum(w * getattr(p, f.name)[key] for p, w in zip(parts, weights,
                                                                                             strict=True)))})
        elif isinstance(first, int) and not isinstance(first, bool):
            values[f.name] = sum(w * getattr(p, f.name) for p, w in zip(parts, weights, strict=True))
    return replace(parts[0], **values)


def affine_stats(one: Stats, two: Stats, t: int) -> Stats:
    """Counts of a run ``t`` periods beyond ``one`` along an axis, given ``two`` one period beyond:
    ``one + t * (two - one)`` for every count."""
    return combined_stats([one, two], (1 - t, t))


def _counts(run: Run, use_cache: bool = True) -> KernelCounts:
    if not use_cache:
        return _store(run, simulate_whole(run))
    state = _state()
    if run in state.simulated or run in state.computed:
        return state.simulated.get(run) or state.computed[run]
    found = _load(cache_path(run))
    if found is not None:
        return found
    if any(a.runs for a in _ANNOUNCED):
        pending = [r for a in _ANNOUNCED for r in a.runs]
        for a in _ANNOUNCED:
            a.runs.clear()
        hook = next((a.progress for a in reversed(_ANNOUNCED) if a.progress), None)  # the innermost
        prefetch([run, *pending], progress=hook)
    b = _decision(run)
    result = extrapolated(run, b) if b else None
    return _simulated(run) if result is None else _store(run, result)


def simulated_counts(kernel: str, M: int, K: int, *, tokens: int = 1, use_cache: bool = True) -> KernelCounts:
    """Counts of ``kernel`` on an ``M x K`` layer for ``tokens`` tokens (simulated, extrapolated from
    smaller simulated runs, or from the cache; ``use_cache=False``: simulated whole, now)."""
    return _counts(Run(kernel, M, K, tokens), use_cache)


# --- parallel simulation ---------------------------------------------------------------------------
@dataclass
class _Announced:
    """One :func:`announced` block: the runs not simulated yet, and where their progress goes."""

    runs: list[Run]
    progress: WorkHook | None


_ANNOUNCED: list[_Announced] = []


@contextmanager
def announced(requests: Iterable[tuple[str, int, int, int]],
              progress: WorkHook | None = None) -> Iterator[None]:
    """Within the block, the first count of :func:`simulated_counts` that is not cached first
    simulates the runs of every announced ``(kernel, M, K, tokens)`` in parallel (:func:`prefetch`,
    reporting to ``progress``). A block that finds every count cached simulates nothing."""
    _ANNOUNCED.append(_Announced([Run(*r) for r in requests], progress))
    try:
        yield
    finally:
        _ANNOUNCED.pop()


def simulate_announced() -> None:
    """Compute the announced counts now (in parallel, as the first missing one would), so that the
    caller's steps after this time only what they do themselves; nothing if every one is cached."""
    state = _state()
    for run in sorted((r for a in _ANNOUNCED for r in a.runs), key=lambda r: not r.tsar):
        if run in state.simulated or run in state.computed:
            continue
        with suppress(ValueError, UserError):  # (a shape a kernel cannot take: reported in context)
            if not cache_path(run).exists():
                _counts(run)
                return


def workers() -> int:
    """Processes for independent simulations: the CPUs this process may run on; 1 inside a daemonic
    process (a sweep's pool worker), which may not have children."""
    import multiprocessing

    if multiprocessing.current_process().daemon:
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _size(run: Run) -> float:
    """:func:`_work`, or 0 for a shape the kernel cannot take (reported later, in context)."""
    try:
        return _work(run)
    except (ValueError, UserError):
        return 0.0


def _plan_quietly(requests: Iterable[Run], planned: dict[Run, Basis | None] | None = None,
                  cached: Callable[[Run], bool] | None = None) -> list[Run]:
    """:func:`plan_runs` (into ``planned`` and with ``cached`` when given), each request on its own
    so that a shape a kernel cannot take is left to the caller (reported in context)."""
    planned = _state().planned if planned is None else planned
    cached = cached or (lambda run: cache_path(run).exists())
    out: list[Run] = []
    for request in requests:
        with suppress(ValueError, UserError):
            out += _plan_into([request], planned, cached)
    return sorted(dict.fromkeys(out), key=_work, reverse=True)


def _plan_in_worker(requests: list[Run]) -> tuple[list[Run], dict[Run, Basis | None]]:
    """:func:`_plan_quietly` in a worker: the runs to simulate and the decisions made."""
    runs = _plan_quietly(requests)
    made: dict[Run, Basis | None] = {}
    for request in requests:
        made.update(decisions(request))
    return runs, made


def plan_in_pool(pool: ProcessPoolExecutor, groups: list[list[Run]]) -> list[Run]:
    """:func:`_plan_quietly` of every group of requests, the groups planned in parallel in ``pool``'s
    workers: the same plan as planning them together where no two groups share a run (those of
    different kernels never do). The decisions are kept here."""
    runs: list[Run] = []
    for found, made in pool.map(_plan_in_worker, groups):
        _state().planned.update(made)
        runs += found
    return sorted(dict.fromkeys(runs), key=_work, reverse=True)


def decisions(run: Run) -> dict[Run, Basis | None]:
    """The planned decisions ``run``'s counts are computed by."""
    planned, out = _state().planned, {}
    todo = [run]
    while todo:
        r = todo.pop()
        if r not in out and r in planned:
            out[r] = planned[r]
            todo += list(planned[r].runs) if planned[r] else []
    return out


JOB_SHARE = 4
"""A job of :func:`prefetch` runs one kernel's runs up to ``1 / JOB_SHARE`` of a worker's share of
the T-SAR work planned at its start (one run at least, with the other runs of its program)."""


def _next_job(pending: list[Run], work: float) -> list[Run]:
    """The runs one worker simulates next: the first pending run (the largest), the other runs of its
    program, then those of other programs of its kernel in order while the job's :func:`_work` stays
    within ``work``. A worker runs them on one machine, which compiles only what differs between
    programs (:func:`_machine`)."""
    kernel, first = pending[0].kernel, program(pending[0])
    job = [r for r in pending if program(r) == first]
    total = sum(_work(r) for r in job)
    for r in pending:
        if r.kernel == kernel and r not in job and total + _work(r) <= work:
            siblings = [s for s in pending if program(s) == program(r)]
            job += siblings
            total += sum(_work(s) for s in siblings)
    return job


def _simulate_in_worker(runs: list[Run]) -> list[KernelCounts]:
    _ANNOUNCED.clear()
    return [_simulated(run) for run in runs]


def _finish_in_worker(run: Run, decisions: dict[Run, Basis | None]) -> KernelCounts:
    _ANNOUNCED.clear()
    _state().planned.update(decisions)
    return _counts(run)


def prefetch(requests: Iterable[Run | tuple[str, int, int, int]], jobs: int | None = None,
             progress: WorkHook | None = None) -> int:
    """Plan ``requests`` (:func:`plan_runs`) and compute them in ``jobs`` processes (default
    :func:`workers`): the runs simulated whole first, largest first, then the counts extrapolated
    from them, each written to the cache as it completes and kept here; returns how many counts
    were computed. With one process nothing is done here (the counts are computed when asked for).
    The native cores' library is built by one worker while the others simulate T-SAR runs. A count
    that fails is left out (asked for, it fails again, in context). ``progress(done, total,
    message)``: after each run, the seconds spent and the seconds in all, estimated from the work
    left (:func:`_work`) at the seconds per unit measured on the runs done, per kernel (the natives'
    work is estimated until the library that keys their cache is built)."""
    runs = list(dict.fromkeys(r if isinstance(r, Run) else Run(*r) for r in requests))
    jobs = jobs or workers()
    if jobs < 2:
        return 0
    natives = [r for r in runs if not r.tsar]
    tsar_runs = [r for r in runs if r.tsar]
    state = _state()
    by_kernel: dict[str, list[Run]] = {}
    for r in tsar_runs:
        by_kernel.setdefault(r.kernel, []).append(r)
    pool = worker_pool(jobs) if len(by_kernel) > 1 else None
    try:
        pending = plan_in_pool(pool, list(by_kernel.values())) if pool else _plan_quietly(tsar_runs)
    except BrokenProcessPool:  # a worker died: plan here
        pool = None
        pending = _plan_quietly(tsar_runs)
    except BaseException:
        if pool:
            pool.shutdown(wait=True, cancel_futures=True)
        raise
    finish = [r for r in tsar_runs if state.planned.get(r)]
    if not natives and len(pending) + len(finish) < 2:
        if pool:
            pool.shutdown()
        return 0
    left: Counter[str] = Counter()  # work not done yet, per kernel (the natives' estimated until planned)
    # the natives as planned if nothing were cached (their cache keys wait for their library)
    for r in [*pending, *_plan_quietly(natives, dict(state.planned), lambda run: False)]:
        left[r.kernel] += _work(r)
    native_guess = bool(natives)
    spent: dict[str, list[float]] = {}  # seconds and work of the runs done, per kernel
    planned_runs, simulated_runs, done = len(pending), 0, 0
    started_at = time.monotonic()

    def rate(kernel: str) -> float:
        """Seconds per unit of work of ``kernel``: measured on its runs, else on those of its family
        (T-SAR or native), else on all, else :data:`RUN_OVERHEAD`'s 4 ms."""
        tsar = kernel.startswith(KERNEL_PREFIX)
        for same in (lambda k: k == kernel, lambda k: k.startswith(KERNEL_PREFIX) == tsar, lambda k: True):
            seconds = sum(s for k, (s, w) in spent.items() if same(k))
            work = sum(w for k, (s, w) in spent.items() if same(k))
            if work:
                return seconds / work
        return 4e-3 / RUN_OVERHEAD

    extrapolations, finish_started = 0, 0.0  # the counts extrapolated from the runs simulated whole
    running: dict[Future, tuple] = {}  # (runs simulated whole, True) or (run, False)

    def report() -> None:
        """Seconds so far and in all: each kernel's work left at its measured seconds per unit,
        and the extrapolations left at their measured seconds each, over the jobs."""
        if not progress:
            return
        extrapolating = len(finish) + sum(not whole for _, whole in running.values())
        each = ((time.monotonic() - finish_started) * jobs / extrapolations if extrapolations
                else FINISH_SECONDS)
        rest = (sum(work * rate(kernel) for kernel, work in left.items()) + each * extrapolating) / jobs
        elapsed = time.monotonic() - started_at if simulated_runs or extrapolations else 0.0
        also = (f", {extrapolations}/{extrapolations + extrapolating} counts extrapolated"
                if finish_started else "")
        progress(elapsed, elapsed + rest,
                 f"{simulated_runs}/{planned_runs}{'+' if native_guess else ''} runs simulated{also}")

    if pending:  # (with only natives, nothing is known to be missing before their library is built)
        report()
    submitted: dict[Future, float] = {}
    job_work = sum(_work(r) for r in pending) / (JOB_SHARE * jobs)
    pool = pool or worker_pool(jobs)
    with pool:
        try:
            build = pool.submit(build_sim_library) if natives else None
            while pending or running or build or finish:
                if not pending and not build and not any(whole for _, whole in running.values()):
                    finish_started = finish_started or (time.monotonic() if finish else 0.0)
                    while finish:  # every run simulated whole is cached: the rest are extrapolated
                        run = finish.pop()
                        running[pool.submit(_finish_in_worker, run, decisions(run))] = run, False
                while pending and len(running) + (build is not None) < jobs:
                    group = _next_job(pending, job_work)
                    taken = set(group)
                    pending = [r for r in pending if r not in taken]
                    future = pool.submit(_simulate_in_worker, group)
                    running[future], submitted[future] = (group, True), time.monotonic()
                if not running and not build:
                    continue
                finished, _ = wait([*running, *([build] if build else [])], return_when=FIRST_COMPLETED)
                for future in finished:
                    if future is build:
                        build.result()  # the library, and with it the natives' cache keys, exist now
                        build = None
                        planned = _plan_quietly(natives)
                        pending = sorted([*pending, *planned], key=_work, reverse=True)
                        finish += [r for r in natives if state.planned.get(r)]
                        for kernel in {r.kernel for r in natives}:
                            left[kernel] = 0.0
                        for r in planned:
                            left[r.kernel] += _work(r)
                        planned_runs, native_guess = planned_runs + len(planned), False
                        if planned:
                            report()
                        continue
                    job, whole = running.pop(future)
                    if future.exception() is None and whole:
                        state.simulated.update(zip(job, future.result(), strict=True))
                        done += len(job)
                    elif future.exception() is None:
                        state.computed[job] = future.result()
                        done += 1
                    if not whole:
                        extrapolations += 1
                        report()
                    if whole:
                        kernel, work = job[0].kernel, sum(_work(r) for r in job)
                        seconds_work = spent.setdefault(kernel, [0.0, 0.0])
                        seconds_work[0] += time.monotonic() - submitted.pop(future)
                        seconds_work[1] += work
                        left[kernel] = max(left[kernel] - work, 0.0)
                        simulated_runs += len(job)
                        report()
        except BrokenProcessPool:
            pass  # a worker died: what is left is computed when asked for, here
        finally:  # interrupted or failed: what completed is cached, nothing new starts
            pool.shutdown(wait=True, cancel_futures=True)
    return done


def worker_pool(jobs: int | None = None) -> ProcessPoolExecutor:
    """A pool of ``jobs`` forked processes (default :func:`workers`) that leave Ctrl-C to this one
    (which stops the pool: a worker finishes what it runs and caches it)."""
    import multiprocessing

    return ProcessPoolExecutor(jobs or workers(), mp_context=multiprocessing.get_context("fork"),
                               initializer=signal.signal, initargs=(signal.SIGINT, signal.SIG_IGN))
