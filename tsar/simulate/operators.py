"""The non-BitLinear operators of one decoded token, simulated as real AVX2 code and counted for any size.

Each operator is an entry of the simulator library (``kernels/native/ops.c``: AVX2, FMA and F16C,
freestanding, see :mod:`tsar.kernels.simbuild`), the library the native BitLinear cores are
simulated from (:mod:`tsar.simulate.native_kernel`), run with memory statistics on a machine that
has it loaded (:func:`tsar.simulate.native_kernel.loaded_machine`, one per process), and checked against a
numpy reference, so that the timing model (:func:`tsar.sim.timing.predict.predict`) times them on
any platform as it times the BitLinear kernels. Sizes (keyword arguments, in this order):

==========  =========================  ===========================================================
operator    sizes                      one call
==========  =========================  ===========================================================
embedding   n                          one f16 row of the table -> n floats
rmsnorm     n                          ``x / sqrt(mean(x^2) + eps) * w``
quantize    n                          per-token absmax int8 (``tsar.kernels.quant``), bit-exact
rope        heads, hd                  NEOX rotation of every head's pairs ``(i, i + hd/2)``
attention   heads, kv_heads, hd, ctx   one token at position ctx-1 over f16 K/V caches (GQA)
ffn_act     n, kind                    kind 0: ``relu(g)^2 * u``; kind 1: ``silu(g) * u``
lm_head     m, k                       f16 ``m x k`` matrix times k floats (the logits)
sampling    n                          argmax: the first maximum (greedy)
==========  =========================  ===========================================================

Sizes are positive multiples of 8 (the LM head's ``k`` of 32). The code branches
on sizes only, never on data, so the counts of a call are affine in the size that grows with the
others fixed: ``n`` (period 64: the 32-element main loops and their 8-element tails keep their
remainder), ``ctx`` (period 8), ``m`` and ``heads`` (period 1). :func:`operator_counts` takes the
counts of any size as ``one + t * (two - one)`` of two smaller runs one period apart
(:func:`tsar.simulate.counts.affine_stats`, every count of :class:`~tsar.sim.Stats`), cached on disk
under a key holding the simulator library's digest. Attention is extrapolated along ``ctx`` (8 and 16)
at the target's heads, K/V heads and head size; where that still takes long (three K/V heads or
more), each of those two runs is extrapolated again along the K/V heads with the group
(``heads / kv_heads``) kept, from one and two K/V heads: a call's work is one part per head and one
per K/V head (storing the new row), so it is affine in ``kv_heads`` at a fixed group. The tests
compare extrapolated counts with whole simulations of a third size.

Reference checks (:func:`simulate_operator`, RuntimeError on a mismatch): embedding, quantize,
sampling and the f16 rows attention stores are exact; the float operators are compared with a
float64 reference: rmsnorm, rope and ffn_act within ``1e-5`` relative plus ``1e-6`` of the largest
magnitude; attention within ``1e-4`` relative plus ``1e-5`` of the largest magnitude (the reference
reads the same f16 caches); lm_head within ``(k / 32 + 8) * 2^-23`` of each row's ``sum |w x|``
(float32 summation in 32 partial sums).
"""

from __future__ import annotations

import hashlib
import math
import pickle
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from tsar.common.toolchain import cache_dir, write_atomic
from tsar.errors import UserError
from tsar.kernels.quant import quantize_activations
from tsar.kernels.simbuild import build_sim_library
from tsar.sim import Stats
from tsar.sim.timing.memory import DataStream

OPERATORS = ("embedding", "rmsnorm", "quantize", "rope", "attention", "ffn_act", "lm_head", "sampling")
SIZES = {"embedding": ("n",), "rmsnorm": ("n",), "quantize": ("n",), "rope": ("heads", "hd"),
         "attention": ("heads", "kv_heads", "hd", "ctx"), "ffn_act": ("n", "kind"), "lm_head": ("m", "k"),
         "sampling": ("n",)}
"""Each operator's size parameters, in the order of :attr:`OperatorCounts.size`."""
ENTRIES = {"embedding": "embed", "rmsnorm": "rmsnorm", "quantize": "quantize", "rope": "rope",
           "attention": "attention", "ffn_act": "ffn_act", "lm_head": "f16_gemv", "sampling": "argmax"}
"""The library entry (``tsar_sim_op_<entry>``) of each operator."""
GROWS = {"embedding": ("n", 64), "rmsnorm": ("n", 64), "quantize": ("n", 64), "rope": ("heads", 1),
         "attention": ("ctx", 8), "ffn_act": ("n", 64), "lm_head": ("m", 1), "sampling": ("n", 64)}
"""The size each operator's counts are extrapolated along, and its period."""
SMALLEST = {"n": 64, "heads": 1, "ctx": 8, "m": 2}
"""The first of the two simulated sizes (``n``: 64 plus the target's remainder modulo 64)."""
BIG_DATA = {"embedding": "embedding_row", "attention": "kv_cache", "lm_head": "lm_head"}
"""The stream name of the large data an operator streams (:attr:`OperatorCounts.resident_bytes`)."""
EPS = np.float32(1e-5)
"""rmsnorm's epsilon in the simulations."""
TABLE_ROWS = 4
"""Rows of the embedding table a simulation holds (it reads one)."""
SCHEME = 1
"""Version of the simulated inputs and the extrapolation, in the cache key."""


@dataclass(frozen=True)
class OperatorCounts:
    """What the timing model needs from one call of an operator (:data:`OPERATORS`) of ``size``
    (:data:`SIZES`'s order). ``read_bytes`` / ``write_bytes``: the bytes the call's instructions load
    and store (vector and scalar, the stack included); ``resident_bytes``: the large data it streams
    once (the f16 LM-head matrix, the K/V rows of the cache, the embedding row; 0 otherwise)."""

    op: str
    size: tuple[int, ...]
    stats: Stats
    code: bytes
    code_address: int
    read_bytes: int
    write_bytes: int
    resident_bytes: int

    @property
    def sizes(self) -> dict[str, int]:
        return dict(zip(SIZES[self.op], self.size, strict=True))

    def data_streams(self, footprint: float | None = None) -> list[DataStream]:
        """The call's streams for the timing model: the large data (:data:`BIG_DATA`) read once as
        one stream of ``footprint`` bytes between reuses (default: its own bytes; e.g. the KV cache
        of every layer, the LM head, the embedding table); attention's re-reads of a K/V head's rows
        by the other query heads of its group, as a stream of one K/V head's rows (which stay in
        cache); and the small vectors: the inputs the call reads (activations, tables, scores, the
        stack; every thread touches them whole, the threads split their traffic) and the outputs it
        writes (split among the threads). The small streams' traffic is the simulated bytes less the
        large data's; their footprints are the vectors' sizes."""
        big_read, big_write, big_traffic, inputs, outputs = _traffic(self.op, self.sizes)
        streams = []
        if self.resident_bytes:
            size = footprint if footprint is not None else self.resident_bytes
            streams.append(DataStream(BIG_DATA[self.op], size, read=big_read, write=big_write))
        if big_traffic > big_read:
            s = self.sizes
            streams.append(DataStream("kv_reuse", 2 * 2 * s["ctx"] * s["hd"], read=big_traffic - big_read,
                                      partitioned=False, reads_split=True))
        streams.append(DataStream("inputs", inputs, read=max(self.read_bytes - big_traffic, 0),
                                  partitioned=False, reads_split=True))
        if outputs:
            streams.append(DataStream("outputs", outputs, write=max(self.write_bytes - big_write, 0)))
        return streams


def _traffic(op: str, s: dict[str, int]) -> tuple[int, int, int, int, int]:
    """Bytes of the large data read once, written and read in all, and the footprints of the small
    vectors read and written."""
    n = s.get("n", 0)
    if op == "embedding":
        return 2 * n, 0, 2 * n, 0, 4 * n
    if op == "lm_head":
        return 2 * s["m"] * s["k"], 0, 2 * s["m"] * s["k"], 4 * s["k"], 4 * s["m"]
    if op == "attention":
        heads, kv, hd, ctx = s["heads"], s["kv_heads"], s["hd"], s["ctx"]
        # the K and V rows (the new one stored first, then read with the others) read by every query
        # head of a group; q, k_new, v_new and the scores read, the output and the scores written
        return (2 * 2 * ctx * kv * hd, 2 * 2 * kv * hd, 2 * 2 * ctx * heads * hd,
                4 * (heads * hd + 2 * kv * hd + ctx), 4 * (heads * hd + ctx))
    if op == "rope":
        x = 4 * s["heads"] * s["hd"]
        return 0, 0, 0, x + 4 * s["hd"], x
    inputs, outputs = {"rmsnorm": (8 * n, 4 * n), "quantize": (4 * n, n + 4), "ffn_act": (8 * n, 4 * n),
                       "sampling": (4 * n, 0)}[op]
    return 0, 0, 0, inputs, outputs


@cache
def library_digest() -> str:
    """A digest of the simulator library's bytes (the cache key: a changed ``ops.c`` is simulated
    again)."""
    return hashlib.sha256(build_sim_library().read_bytes()).hexdigest()[:16]


def _size(op: str, size: dict[str, Any]) -> dict[str, int]:
    """``size`` checked against the operator's parameters and rules (UserError)."""
    if op not in OPERATORS:
        raise UserError(f"unknown operator {op!r} (have {', '.join(OPERATORS)})")
    names = SIZES[op]
    if set(size) != set(names):
        raise UserError(f"{op} takes the sizes {', '.join(names)}, got {', '.join(size) or 'none'}")
    s = {name: int(size[name]) for name in names}
    for name, value in s.items():
        if name != "kind" and value <= 0:
            raise UserError(f"{op}: {name} must be positive, got {value}")
    multiple = {"hd": 8, "k": 32, "n": 8, "ctx": 8}
    for name, value in s.items():
        if name in multiple and value % multiple[name]:
            raise UserError(f"{op}: {name} must be a multiple of {multiple[name]}, got {value}")
    if op == "ffn_act" and s["kind"] not in (0, 1):
        raise UserError(f"ffn_act: kind must be 0 (relu^2) or 1 (silu), got {s['kind']}")
    if op == "attention" and s["heads"] % s["kv_heads"]:
        raise UserError(f"attention: heads ({s['heads']}) must be a multiple of kv_heads ({s['kv_heads']})")
    return s


def _close(got: np.ndarray, want: np.ndarray, rtol: float, atol_scale: float) -> bool:
    want = np.asarray(want, np.float64)
    atol = atol_scale * float(np.abs(want).max(initial=0.0))
    return bool(np.all(np.abs(got.astype(np.float64) - want) <= atol + rtol * np.abs(want)))


def _exp_ref(x: np.ndarray) -> np.ndarray:
    return np.exp(x.astype(np.float64))


def simulate_operator(op: str, *, seed: int = 0, **size: int) -> tuple[OperatorCounts, Any]:
    """Run ``op`` (:data:`OPERATORS`) of ``size`` (:data:`SIZES`) once in the simulator on random
    inputs drawn from ``seed``, check it against the numpy reference (module docstring; RuntimeError
    on a mismatch) and return its counts and its result: the output floats (embedding, rmsnorm,
    rope, attention, ffn_act, lm_head), ``(q, scale)`` (quantize) or the index (sampling)."""
    from tsar.simulate.native_kernel import executed_region, loaded_machine

    s = _size(op, size)
    rng = np.random.default_rng(seed)
    machine, symbols = loaded_machine()
    entry = symbols[f"tsar_sim_op_{ENTRIES[op]}"]

    def normal(*shape: int, scale: float = 1.0) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def call(*args: object) -> int:
        return int(machine.call(entry, *args, returns="i32", memory_stats=True))

    if op == "embedding":
        n = s["n"]
        table = normal(TABLE_ROWS, n).astype(np.float16)
        row = TABLE_ROWS // 2
        y = np.zeros(n, np.float32)
        rc = call(table.view(np.uint16), row, y, n)
        result, ok = y, np.array_equal(y, table[row].astype(np.float32))
    elif op == "rmsnorm":
        n = s["n"]
        x, w, y = normal(n), normal(n, scale=0.5), np.zeros(n, np.float32)
        rc = call(x, w, y, n, EPS)
        x64 = x.astype(np.float64)
        want = x64 / np.sqrt(np.mean(x64 * x64) + float(EPS)) * w
        result, ok = y, _close(y, want, 1e-5, 1e-6)
    elif op == "quantize":
        n = s["n"]
        x, q, scale = normal(n, scale=3.0), np.zeros(n, np.int8), np.zeros(1, np.float32)
        rc = call(x, q, scale, n)
        want_q, want_scale = quantize_activations(x[None])
        result = q, np.float32(scale[0])
        ok = np.array_equal(q, want_q[0]) and scale.view(np.uint32)[0] == want_scale.view(np.uint32)[0]
    elif op == "rope":
        heads, hd = s["heads"], s["hd"]
        x = normal(heads * hd)
        angle = rng.uniform(-math.pi, math.pi, hd // 2)
        cos_t, sin_t = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
        y = x.copy()
        rc = call(y, cos_t, sin_t, heads, hd)
        x1, x2 = (x.reshape(heads, 2, hd // 2).astype(np.float64)[:, i] for i in (0, 1))
        c, sn = cos_t.astype(np.float64), sin_t.astype(np.float64)
        want = np.concatenate([x1 * c - x2 * sn, x1 * sn + x2 * c], axis=1).reshape(-1)
        result, ok = y, _close(y, want, 1e-5, 1e-6)
    elif op == "attention":
        heads, kv, hd, ctx = s["heads"], s["kv_heads"], s["hd"], s["ctx"]
        q, k_new, v_new = normal(heads * hd), normal(kv * hd), normal(kv * hd)
        kcache = normal(ctx, kv, hd).astype(np.float16)
        vcache = normal(ctx, kv, hd).astype(np.float16)
        kc, vc = kcache.view(np.uint16).copy(), vcache.view(np.uint16).copy()
        out, scores = np.zeros(heads * hd, np.float32), np.zeros(ctx, np.float32)
        rc = call(q, k_new, v_new, kc, vc, out, scores, heads, kv, hd, ctx)
        kcache[ctx - 1], vcache[ctx - 1] = k_new.reshape(kv, hd), v_new.reshape(kv, hd)  # as f16, rounded
        K = kcache.astype(np.float64)[:, np.arange(heads) // (heads // kv)]    # ctx x heads x hd
        V = vcache.astype(np.float64)[:, np.arange(heads) // (heads // kv)]
        sc = np.einsum("hd,thd->ht", q.reshape(heads, hd).astype(np.float64), K) / math.sqrt(hd)
        p = _exp_ref(sc - sc.max(axis=1, keepdims=True))
        want = (np.einsum("ht,thd->hd", p, V) / p.sum(axis=1, keepdims=True)).reshape(-1)
        ok = (np.array_equal(kc, kcache.view(np.uint16)) and np.array_equal(vc, vcache.view(np.uint16))
              and _close(out, want, 1e-4, 1e-5))
        result = out
    elif op == "ffn_act":
        n, kind = s["n"], s["kind"]
        g, u, y = normal(n, scale=2.0), normal(n), np.zeros(n, np.float32)
        rc = call(g, u, y, n, kind)
        g64 = g.astype(np.float64)
        want = (np.maximum(g64, 0) ** 2 if kind == 0 else g64 / (1 + _exp_ref(-g))) * u
        result, ok = y, _close(y, want, 1e-5, 1e-6)
    elif op == "lm_head":
        m, k = s["m"], s["k"]
        w, x, y = normal(m, k, scale=0.05).astype(np.float16), normal(k), np.zeros(m, np.float32)
        rc = call(w.view(np.uint16), x, y, m, k)
        prod = w.astype(np.float64) * x.astype(np.float64)
        bound = (k / 32 + 8) * 2.0 ** -23 * np.abs(prod).sum(axis=1)
        result, ok = y, bool(np.all(np.abs(y - prod.sum(axis=1)) <= bound))
    else:  # sampling: small integers, so that the maximum is often tied (the first one counts)
        n = s["n"]
        x = rng.integers(-64, 64, n).astype(np.float32)
        rc = call(x, n)
        result, ok = rc, rc == int(np.argmax(x))
        rc = min(rc, 0)  # an index, or -1
    if rc != 0:
        raise UserError(f"{op} rejected the size {s} (return code {rc})")
    if not ok:
        raise RuntimeError(f"{op} {s}: the simulated result disagrees with the reference")
    stats = machine.stats
    code, address = executed_region(machine, stats)
    return _counts_of(op, s, stats, code, address), result


def _counts_of(op: str, s: dict[str, int], stats: Stats, code: bytes, address: int) -> OperatorCounts:
    return OperatorCounts(op, tuple(s.values()), stats, code, address,
                          stats.vector_bytes_read + stats.scalar_bytes_read,
                          stats.vector_bytes_written + stats.scalar_bytes_written, _traffic(op, s)[0])


def cache_path(op: str, s: dict[str, int]) -> Path:
    """The cache entry of the counts of ``op`` at the checked sizes ``s``."""
    size = "x".join(f"{name}{value}" for name, value in s.items())
    return cache_dir("counts") / f"op{SCHEME}-{op}-{size}-{library_digest()}.pkl"


def _load(path: Path) -> OperatorCounts | None:
    try:
        with path.open("rb") as f:
            found = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None  # missing, damaged or outdated: computed again
    return found if isinstance(found, OperatorCounts) else None


def bases(op: str, s: dict[str, int]) -> tuple[dict[str, int], dict[str, int], int] | None:
    """The two smaller sizes ``s`` is extrapolated from (:data:`GROWS`; attention at a small ``ctx``
    with three K/V heads or more: along ``kv_heads`` with the group kept, module docstring) and the
    periods ``t`` from the first to ``s``; None where ``s`` is small enough to simulate whole."""
    axis, period = GROWS[op]
    target = s[axis]
    first = SMALLEST[axis] + (target % period if axis == "n" else 0)
    t, rest = divmod(target - first, period)
    if not rest and t >= 2:
        return {**s, axis: first}, {**s, axis: first + period}, t
    if op == "attention" and s["kv_heads"] >= 3:
        group = s["heads"] // s["kv_heads"]
        one, two = ({**s, "heads": kv * group, "kv_heads": kv} for kv in (1, 2))
        return one, two, s["kv_heads"] - 1
    return None


def operator_counts(op: str, *, use_cache: bool = True, **size: int) -> OperatorCounts:
    """The counts of one call of ``op`` (:data:`OPERATORS`) of ``size`` (:data:`SIZES`): simulated
    (small sizes), or extrapolated affinely from two small simulations (:data:`GROWS`), and cached
    (``use_cache=False``: computed now, the cache neither read nor written)."""
    from tsar.simulate.counts import affine_stats

    s = _size(op, size)
    path = cache_path(op, s) if use_cache else None
    found = _load(path) if path is not None else None
    if found is not None:
        return found
    basis = bases(op, s)
    if basis is None:
        counts = simulate_operator(op, **s)[0]
    else:
        one, two, t = basis
        a, b = (operator_counts(op, use_cache=use_cache, **x) for x in (one, two))
        if a.code != b.code or a.code_address != b.code_address:
            raise RuntimeError(f"{op}: {one} and {two} execute different code; the counts of {s} "
                               "cannot be extrapolated")
        stats = affine_stats(a.stats, b.stats, t)
        if any(n < 0 for n in (*stats.per_address.values(), *stats.by_mnemonic.values())):
            raise RuntimeError(f"{op}: the counts of {s} are not affine in the size that grows")
        counts = _counts_of(op, s, stats, a.code, a.code_address)
    if path is not None:
        write_atomic(path, pickle.dumps(counts))
    return counts


__all__ = ["BIG_DATA", "GROWS", "OPERATORS", "SIZES", "OperatorCounts", "bases",
           "operator_counts", "simulate_operator"]
