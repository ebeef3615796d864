"""Simulated counts: native cores bit-exact in the simulator, extrapolation exact, cache reused.

Extrapolated counts (:mod:`tsar.simulate.counts`) must equal a whole simulation in every count, for
every T-SAR dataflow and native core along every axis (tokens, M, K), the GEMM paths included."""

import itertools
import math

import pytest

from tsar.isa.config import PAPER_CONFIGS
from tsar.kernels.tsar_codegen import LOOP_COUNTED, generate, loop_forms
from tsar.kernels.tsar_plan import FLOWS, TOKEN_BLOCKED, kernel_name, kernel_names, parse_kernel_name
from tsar.simulate import counts as counts_mod
from tsar.simulate.counts import (
    GEMM_BLOCK,
    ROW_UNIT,
    Run,
    announced,
    bases,
    cache_path,
    decisions,
    extrapolated,
    forget,
    plan_in_pool,
    plan_runs,
    prefetch,
    simulate_whole,
    simulated_counts,
    worker_pool,
)
from tsar.simulate.native_kernel import (
    GEMM_MIN_TOKENS,
    NATIVE_SIM_KERNELS,
    SIM_KERNELS,
    TOKEN_GROUPS,
    k_period,
    packed_weight_bytes,
    row_period,
    simulate_native,
)
from tsar.simulate.tsar_kernel import plan_for

STATS = ("per_address", "instructions", "by_class", "by_mnemonic", "tsar_uops", "vector_bytes_read",
         "vector_bytes_written", "scalar_bytes_read", "scalar_bytes_written")


@pytest.fixture(scope="module")
def _built(tmp_path_factory):
    return tmp_path_factory.mktemp("build")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch, _built):
    """A cache of this test's own, but the simulator library built once for the module."""
    (tmp_path / "build").symlink_to(_built, target_is_directory=True)
    monkeypatch.setenv("TSAR_CACHE_DIR", str(tmp_path))


def assert_same_counts(got, want) -> None:
    """Every count, the code, where it was loaded and the weights' bytes are equal."""
    for field in STATS:
        assert getattr(got.stats, field) == getattr(want.stats, field), field
    for field in ("code", "code_address", "weight_bytes", "tokens", "M", "K"):
        assert getattr(got, field) == getattr(want, field), field


@pytest.mark.parametrize("kernel", NATIVE_SIM_KERNELS)
def test_extrapolated_counts_equal_direct_simulation(kernel: str) -> None:
    m, k = 4 * ROW_UNIT, 384
    extrapolated_counts = simulated_counts(kernel, m, k)
    direct = simulate_native(kernel, m, k)
    assert direct.exact
    assert extrapolated_counts.stats.per_address == direct.stats.per_address
    assert extrapolated_counts.stats.instructions == direct.stats.instructions
    for field in ("vector_bytes_read", "vector_bytes_written", "scalar_bytes_read", "scalar_bytes_written"):
        assert getattr(extrapolated_counts.stats, field) == getattr(direct.stats, field)
    assert extrapolated_counts.weight_bytes == direct.weight_bytes == packed_weight_bytes(kernel, m, k)


# --- T-SAR kernels: every dataflow along every axis ------------------------------------------------
def _tsar_shape(kernel: str, axis: str) -> tuple[int, int, int]:
    """``(tokens, M, K)`` with at least two periods of ``axis`` beyond the smallest run of the
    target's code layout (a partial pass or window left over where the dataflow has one)."""
    plan = plan_for(kernel, 4096, 64)
    m = plan.cfg.m
    blocked = plan.flow in TOKEN_BLOCKED
    tokens = plan.token_groups + 1 if plan.token_groups > 1 else 2 if blocked else 1
    if axis == "M":
        return tokens, 3 * plan.pass_tiles * m + m, 64
    if axis == "K":
        window = plan.widen_every // plan.chunk_groups * plan.chunk_groups * plan.cfg.k
        return tokens, 2 * m, 3 * math.lcm(window, 8) + 8
    if axis == "tokens":
        return (2 * plan.token_groups + 1 if blocked else 3), 2 * m, 64
    if axis == "passes":  # three full passes and a partial one of two tiles
        return tokens, (3 * plan.pass_tiles + 2) * m, 3 * 256 + 8
    return 35, 2 * m, 64   # beyond one token block: blocks of 16


def _slow_unless(default: bool, *values: str):
    return pytest.param(*values, marks=() if default else pytest.mark.slow)


PAPER_KERNELS = {kernel_name(cfg, flow) for cfg in PAPER_CONFIGS for flow in FLOWS}
TSAR_CASES = [_slow_unless(kernel in PAPER_KERNELS, kernel, axis) for kernel in kernel_names()
              for axis in ("tokens", "M", "K", "blocks", "passes")
              if (axis != "blocks" or parse_kernel_name(kernel)[1] in TOKEN_BLOCKED)
              and (axis != "passes" or parse_kernel_name(kernel)[1] == "ap-tokens")]
"""Every registered kernel along every axis (the paper's configurations in the default tier)."""


@pytest.mark.parametrize(("kernel", "axis"), TSAR_CASES, ids=lambda v: str(v))
def test_tsar_extrapolation_equals_whole_simulation(kernel: str, axis: str) -> None:
    """Counts from two smaller runs along one axis (the M and K runs generated with the target's
    loop forms, moved onto its addresses) equal the simulation of the whole shape."""
    tokens, m, k = _tsar_shape(kernel, axis)
    run = Run(kernel, m, k, tokens)
    found = {b.axis: b for b in bases(run)}
    b = found["tokens" if axis == "blocks" else axis]
    if axis == "passes":  # passes of 2 and 3 tiles: 1 and 2 full passes, partial passes of 1 and 2 tiles
        assert len(b.runs) == 5 and {r.tile_block for r in b.runs} == {2, 3}
        assert all(r.loops and r.M < run.M for r in b.runs)
    else:  # one + t (two - one), t >= 2
        assert len(b.runs) == 2 and b.weights[1] >= 2 and sum(b.weights) == 1
        one, two = b.runs
        field = "tokens" if axis == "blocks" else axis
        assert getattr(one, field) < getattr(two, field) < getattr(run, field)
    got = extrapolated(run, b)
    assert got is not None
    assert_same_counts(got, simulate_whole(run))


@pytest.mark.parametrize(("kernel", "tokens", "m", "k"), [
    ("tsar-c2s4-op-tokens", 16, 3 * 192 + 16, 3 * 256 + 8),
    ("tsar-c2s4-ap-tokens", 16, 3 * 512 + 16, 3 * 256 + 8),
    ("tsar-c4s4-ap-max", 1, 8 * 128 + 16, 8 * 256 + 8),
])
def test_planned_counts_equal_whole_simulation(kernel: str, tokens: int, m: int, k: int) -> None:
    """A shape extrapolated along several axes in turn, as planned, equals its whole simulation;
    the runs simulated are smaller than it, and cached."""
    runs = plan_runs([Run(kernel, m, k, tokens)])
    assert runs and all(r.tokens * r.M * r.K < tokens * m * k for r in runs)
    got = simulated_counts(kernel, m, k, tokens=tokens)
    assert all(cache_path(r).exists() for r in runs)
    assert_same_counts(got, simulate_whole(Run(kernel, m, k, tokens)))


def test_loop_forms_replay() -> None:
    """The generator reproduces a kernel from its own loop forms; a smaller shape takes a larger
    one's (a loop of one iteration stays a loop); a shape that cannot take them is refused."""
    for kernel in kernel_names():
        plan = plan_for(kernel, 3 * 192 + 64, 776)
        assert generate(plan, loops=loop_forms(plan)) == generate(plan)
    big, small = plan_for("tsar-c2s4-op", 13 * 192, 2560), plan_for("tsar-c2s4-op", 192, 256)
    forms = loop_forms(big)
    assert LOOP_COUNTED in forms and loop_forms(small) != forms
    replayed = generate(small, loops=forms)
    assert replayed != generate(small) and replayed.count("dec ") == generate(big).count("dec ")
    with pytest.raises(ValueError, match="cannot take the replayed form"):
        generate(big, loops=loop_forms(small))  # 13 passes where the small kernel has one, inline


# --- native cores ----------------------------------------------------------------------------------
def _native_shape(kernel: str, axis: str) -> tuple[int, int, int]:
    tl = kernel in ("tl2", "tl1")
    rows = ROW_UNIT if tl else 32   # the TL cores' row block, others' 32
    period = k_period(kernel)
    if axis == "tokens":   # two groups beyond the least run of the GEMM loop (trit5-avx512: groups of 12)
        group = TOKEN_GROUPS.get(kernel)
        return (max(12, GEMM_MIN_TOKENS.get(kernel, 1) + 2 * group) if group else 3), rows, 256
    if axis == "M":        # the row period (dense: 96, its 6-row tiles; trit5: 256, its row chunks)
        return 1, 3 * (rows if tl else row_period(kernel, rows)), 256
    return 1, rows, 3 * period + (64 if kernel == "tl2" else 0)


@pytest.mark.parametrize(("kernel", "axis"), [_slow_unless(k in NATIVE_SIM_KERNELS, k, a) for k in SIM_KERNELS
                                               for a in ("tokens", "M", "K")], ids=lambda v: str(v))
def test_native_extrapolation_equals_whole_simulation(kernel: str, axis: str) -> None:
    """Native cores: tokens through the GEMM entry (one token included), row blocks, column blocks."""
    tokens, m, k = _native_shape(kernel, axis)
    run = Run(kernel, m, k, tokens)
    b = {b.axis: b for b in bases(run)}[axis]
    assert len(b.runs) == 2 and b.weights[1] >= 2 and sum(b.weights) == 1
    if axis == "tokens":
        assert b.runs[0].tokens > 1 or b.runs[0].gemm
    assert_same_counts(extrapolated(run, b), simulate_whole(run))


@pytest.mark.parametrize("kernel", [k for k in SIM_KERNELS if GEMM_BLOCK % TOKEN_GROUPS.get(k, 1)])
def test_native_gemm_block_extrapolates_along_tokens(kernel: str) -> None:
    """The GEMM block the tools ask for (GEMM_BLOCK tokens) where it is not a whole number of the
    core's token groups (int2-avx512's triples: 16 = 5 x 3 + 1) extrapolates exactly: its basis
    runs the group loop at least once, as the target does."""
    run = Run(kernel, row_period(kernel, 32), k_period(kernel), GEMM_BLOCK)
    b = {b.axis: b for b in bases(run)}.get("tokens")
    if b is None:  # (trit5-avx512: 16 tokens are its least group of 12 and a remainder: simulated whole)
        assert GEMM_MIN_TOKENS.get(kernel, 1) + 2 * TOKEN_GROUPS[kernel] > GEMM_BLOCK
        return
    assert all(r.tokens >= GEMM_MIN_TOKENS.get(kernel, 1) for r in b.runs)
    assert_same_counts(extrapolated(run, b), simulate_whole(run))


def test_prefetch_reports_its_progress() -> None:
    """prefetch reports the seconds spent and in all (estimated) after each run, up to all of it."""
    reports = []
    requests = [("tsar-c2s4-op", 8 * 192 + 16, 2056, 1), ("int2", 64, 512, 1)]
    prefetch(requests, jobs=2, progress=lambda done, total, message: reports.append((done, total, message)))
    assert all(done <= total for done, total, _ in reports) and reports[-1][0] == reports[-1][1] > 0
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(reports))
    assert "+" not in reports[-1][2]
    # the counts extrapolated from the runs simulated whole are reported too, to the last
    simulated, extrapolated_text = reports[-1][2].split(", ")
    assert simulated.endswith("runs simulated")
    done, total = extrapolated_text.removesuffix(" counts extrapolated").split("/")
    assert done == total and int(total) >= 1


def test_native_gemm_block_planned() -> None:
    """A GEMM block of TL2 extrapolated along tokens, rows and columns equals its simulation."""
    got = simulated_counts("tl2", 3 * ROW_UNIT, 352, tokens=3)
    assert_same_counts(got, simulate_whole(Run("tl2", 3 * ROW_UNIT, 352, 3)))


# --- parallel simulation and the cache -------------------------------------------------------------
def test_prefetch_simulates_the_planned_runs_in_parallel(tmp_path) -> None:
    """Two workers simulate every planned run and cache each; the counts then come from them."""
    requests = [("tsar-c2s4-op", 8 * 192 + 16, 2056, 1), ("tsar-c4s4-ap-min", 1024, 2056, 1)]
    runs = plan_runs([Run(*r) for r in requests])
    extrapolated_requests = [r for r in requests if Run(*r) not in runs]
    assert len(runs) >= 2 and extrapolated_requests
    forget()  # as a fresh process
    assert prefetch(requests, jobs=2) == len(runs) + len(extrapolated_requests)
    assert all(cache_path(r).exists() for r in [*runs, *(Run(*r) for r in requests)])
    forget()
    for r in requests:  # from the cache
        assert_same_counts(simulated_counts(r[0], r[1], r[2]), simulate_whole(Run(*r)))


def test_kernels_planned_in_workers_as_together() -> None:
    """Each kernel's requests planned in a worker of their own give the plan of planning all of them
    together in one process (runs of different kernels never share anything)."""
    requests = [Run("tsar-c2s4-op", 8 * 192 + 16, 2056), Run("tsar-c2s4-op", 8 * 192 + 16, 1032),
                Run("tsar-c4s4-ap-tokens", 512, 2056, 24), Run("tsar-c2s4-512-ap-max", 1024, 1032)]
    together = plan_runs(requests)
    decided = {r: decisions(r) for r in requests}
    forget()
    groups = [[r for r in requests if r.kernel == k] for k in dict.fromkeys(r.kernel for r in requests)]
    with worker_pool(2) as pool:
        assert plan_in_pool(pool, groups) == together
    assert {r: decisions(r) for r in requests} == decided and len(together) > len(requests)


def test_announced_counts_are_prefetched_once(monkeypatch) -> None:
    """The first count that is not cached prefetches every announced count, once."""
    calls = []
    monkeypatch.setattr(counts_mod, "prefetch",
                        lambda requests, jobs=None, progress=None: calls.append(list(requests)))
    announced_runs = [("tsar-c2s4-op", 32, 64, 1), ("tsar-c2s4-ap-min", 32, 64, 1)]
    with announced(announced_runs):
        simulated_counts("tsar-c2s4-op", 32, 64)
        simulated_counts("tsar-c2s4-ap-min", 32, 64)
    assert len(calls) == 1 and {(r.kernel, r.M, r.K, r.tokens) for r in calls[0]} == set(announced_runs)
    with announced(announced_runs):  # all cached: nothing is simulated
        simulated_counts("tsar-c2s4-op", 32, 64)
    assert len(calls) == 1


def test_cache_is_reused_and_keyed_by_code(tmp_path) -> None:
    first = simulated_counts("tsar-c2s4-op", 32, 64)
    entries = list((tmp_path / "counts").glob("*.pkl"))
    assert len(entries) == 1
    again = simulated_counts("tsar-c2s4-op", 32, 64)
    assert again.stats.per_address == first.stats.per_address
    simulated_counts("tsar-c2s4-op", 48, 64)  # another shape is another kernel
    assert len(list((tmp_path / "counts").glob("*.pkl"))) == 2


def test_tl2_moves_more_bytes_than_it_stores_weights() -> None:
    """TL2 reads its activation tables for every row block: traffic well above its weights."""
    tl2 = simulated_counts("tl2", 256, 768)
    tsar = simulated_counts("tsar-c2s4-op", 256, 768)
    assert tl2.bytes_moved > 2 * tl2.weight_bytes
    assert tsar.bytes_moved < tl2.bytes_moved


@pytest.mark.parametrize("kernel", ["int2", "tl2", "tsar-c2s4-op-tokens"])
def test_gemm_block_counts(kernel: str) -> None:
    """A block of tokens is simulated through the GEMM path, cached under its own key, and its
    per-token traffic is no more than one token's (weights are reused across the block)."""
    from tsar.estimate.layer import counts_for

    one = simulated_counts(kernel, 256, 384)
    block = counts_for(kernel, 128, 256, 384)
    assert block.tokens == 16 and one.tokens == 1
    assert block.bytes_moved <= one.bytes_moved
    assert counts_for("tsar-c2s4-op", 128, 256, 384).tokens == 1   # per-token dataflow: one token
