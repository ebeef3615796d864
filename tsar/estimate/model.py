"""Whole-model estimates: decode tokens/s and prefill latency, T-SAR against TL2 and against the
best native kernel of the platform's ISA, per platform.

The BitLinear matrices (QKV, O, gate, up, down of every layer) give the BitLinear-only figures;
the other operators of a token (embedding, norms, activation quantization, RoPE, attention over a
KV cache of ``context`` positions, the FFN activation, the LM head, sampling:
:mod:`tsar.estimate.operators`) are timed the same way and added for the end-to-end figures. Each
distinct matrix shape is
simulated once per kernel (:mod:`tsar.simulate.counts`) and timed by the timing model on the platform; T-SAR
takes the fastest of its kernels per layer, as the paper's framework selects a dataflow per layer.
Decode is modelled from one simulated token; prefill (``PREFILL_TOKENS`` tokens) from one simulated
block of tokens through the GEMM kernels on both sides (T-SAR's token-blocked dataflows, TL2's
token-blocked rows loop), per-token dataflows from one token. Threads default to the platform's
(the paper's 16 / 8 / 4; every hardware thread on the host). The natives
(:func:`tsar.simulate.native_kernel.natives_for` the platform's ISA: the AVX2 builds, and the
AVX-VNNI / AVX-512 ones where its cores execute them) are timed the same way; a runtime runs one
weight format for the whole model, so the best native is the one fastest over all its layers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tsar.console import Steps, Work
from tsar.estimate.layer import counts_for, counts_request, modelled, platform_named
from tsar.estimate.operators import DEFAULT_CONTEXT, OperatorTime, operator_times
from tsar.frames import Tabular
from tsar.kernels.tsar_plan import kernel_names, parse_kernel_name
from tsar.models import PREFILL_TOKENS, TABLE_III, LinearShape, get_model
from tsar.sim.platforms import Platform
from tsar.simulate.counts import announced, simulate_announced, simulated_counts
from tsar.simulate.native_kernel import natives_for


@dataclass(frozen=True)
class LayerEstimate:
    """One matrix: decode times (weights streamed from where the whole model fits) and prefill
    times per token (GEMM: the token-blocked kernels' weights read from where the layer fits once
    per block of tokens), each with the fastest T-SAR kernel for it."""

    shape: LinearShape
    tsar_kernel: str
    tsar_seconds: float  # decode, one token
    tl2_seconds: float   # decode, one token
    tsar_prefill_seconds: float  # prefill, per token
    tl2_prefill_seconds: float   # prefill, per token
    tsar_prefill_kernel: str = ""
    natives: tuple[tuple[str, float, float], ...] = ()  # (kernel, decode s, prefill s per token)
    tsar: tuple[tuple[str, float, float], ...] = ()  # every T-SAR kernel: (kernel, decode s, prefill s)


@dataclass(frozen=True)
class ModelEstimate(Tabular):
    """BitLinear-only figures (``decode_tsar_tps``, ``prefill_seconds``, ``best_native``...) and,
    with the other operators of a token (``operators``, at ``context`` positions), end-to-end ones
    (``e2e_decode_tps``, ``e2e_prefill_seconds``)."""

    model: str
    platform: str
    threads: int
    layers: int
    per_layer: tuple[LayerEstimate, ...]
    context: int = 0
    operators: tuple[OperatorTime, ...] = ()

    def other_seconds(self, phase: str, family: str) -> float:
        """The non-BitLinear operators' seconds (``decode``: per token; ``prefill``: the whole
        prompt) on the ``tsar`` side or a native one (which also quantizes its activations)."""
        return sum(o.seconds(phase) for o in self.operators if family != "tsar" or not o.natives_only)

    def bitlinear_seconds(self, phase: str, family: str) -> float:
        """BitLinear seconds (decode: per token; prefill: the prompt) of ``tsar``, ``tl2`` or
        ``native`` (the best native of the phase)."""
        if family == "native":
            value = self.best_native(phase)[1]
            return 1.0 / value if phase == "decode" else value
        if phase == "decode":
            return 1.0 / (self.decode_tsar_tps if family == "tsar" else self.decode_tl2_tps)
        return self.prefill_seconds(family)

    def e2e_decode_tps(self, family: str) -> float:
        """Decode tokens/s with every operator of a token (``tsar``, ``tl2`` or ``native``)."""
        return 1.0 / (self.bitlinear_seconds("decode", family) + self.other_seconds("decode", family))

    def e2e_prefill_seconds(self, family: str) -> float:
        """Prefill seconds of ``PREFILL_TOKENS`` tokens with every operator."""
        return self.bitlinear_seconds("prefill", family) + self.other_seconds("prefill", family)

    def breakdown(self, phase: str = "decode", family: str = "tsar") -> dict[str, float]:
        """Seconds per operator (``bitlinear`` first) of a decoded token or of the prefill."""
        out = {"bitlinear": self.bitlinear_seconds(phase, family)}
        out.update({o.op: o.seconds(phase) for o in self.operators if family != "tsar" or not o.natives_only})
        return out

    def _total(self, attr: str, tokens: int) -> float:
        return self.layers * tokens * sum(getattr(e, attr) for e in self.per_layer)

    @property
    def decode_tsar_tps(self) -> float:
        return 1.0 / self._total("tsar_seconds", 1)

    @property
    def decode_tl2_tps(self) -> float:
        return 1.0 / self._total("tl2_seconds", 1)

    def prefill_seconds(self, family: str, tokens: int = PREFILL_TOKENS) -> float:
        return self._total("tsar_prefill_seconds" if family == "tsar" else "tl2_prefill_seconds", tokens)

    def widths(self) -> tuple[int, ...]:
        """The vector widths (bits) of the T-SAR kernels estimated, narrowest first."""
        return tuple(sorted({_width(k) for e in self.per_layer for k, _, _ in e.tsar}))

    def tsar_at(self, phase: str, width: int) -> float:
        """T-SAR restricted to the configurations of one vector width, the fastest of them per
        layer: decode tokens/s, or prefill seconds for ``PREFILL_TOKENS`` tokens."""
        column = 1 if phase == "decode" else 2
        total = self.layers * sum(min(row[column] for row in e.tsar if _width(row[0]) == width)
                                  for e in self.per_layer)
        return 1.0 / total if phase == "decode" else total * PREFILL_TOKENS

    def records(self) -> list[dict]:
        """One row: decode tokens/s and prefill seconds (128 tokens), T-SAR (the fastest of every
        width, then per width) and TL2, the best native, the paper's reported tokens/s where Table III
        has this model and platform."""
        (dk, dn), (pk, pn) = self.best_native("decode"), self.best_native("prefill")
        by_width = {key: value for w in self.widths()
                    for key, value in ((f"decode_tsar{w}_tok_s", self.tsar_at("decode", w)),
                                       (f"prefill_tsar{w}_s", self.tsar_at("prefill", w)))}
        return [{"model": self.model, "platform": self.platform, "threads": self.threads,
                 "decode_tsar_tok_s": self.decode_tsar_tps, "decode_tl2_tok_s": self.decode_tl2_tps,
                 "decode_speedup": self.decode_tsar_tps / self.decode_tl2_tps,
                 "prefill_tsar_s": self.prefill_seconds("tsar"), "prefill_tl2_s": self.prefill_seconds("tl2"),
                 "prefill_speedup": self.prefill_seconds("tl2") / self.prefill_seconds("tsar"),
                 "decode_native_kernel": dk, "decode_native_tok_s": dn,
                 "decode_speedup_native": self.decode_tsar_tps / dn,
                 "prefill_native_kernel": pk, "prefill_native_s": pn,
                 "prefill_speedup_native": pn / self.prefill_seconds("tsar"),
                 **by_width, "paper_tok_s": self.reported_tps(), **self._e2e_record()}]

    def _e2e_record(self) -> dict:
        if not self.operators:
            return {}
        return {"context": self.context,
                **{f"decode_{f}_e2e_tok_s": self.e2e_decode_tps(f) for f in ("tsar", "tl2", "native")},
                **{f"prefill_{f}_e2e_s": self.e2e_prefill_seconds(f) for f in ("tsar", "tl2", "native")},
                **{f"decode_tsar_{op}_s": s for op, s in self.breakdown("decode").items()}}

    def best_native(self, phase: str) -> tuple[str, float]:
        """The native kernel fastest over the whole model in ``phase`` (``decode``: tokens/s;
        ``prefill``: seconds for ``PREFILL_TOKENS`` tokens) and that figure."""
        column = 1 if phase == "decode" else 2
        totals: dict[str, float] = {}
        for e in self.per_layer:
            for native in e.natives:
                totals[native[0]] = totals.get(native[0], 0.0) + native[column]
        kernel = min(totals, key=totals.__getitem__)
        total = self.layers * totals[kernel]
        return (kernel, 1.0 / total) if phase == "decode" else (kernel, total * PREFILL_TOKENS)

    def reported_tps(self) -> float | None:
        for r in TABLE_III:
            if r.platform == self.platform and r.model == self.model:
                return r.tokens_per_s
        return None


def evaluate(model: str, platform: str | Platform, *, threads: int | None = None,
             tsar_kernels: Sequence[str] | None = None, context: int = DEFAULT_CONTEXT,
             operators: bool = True, progress: Callable[[str], None] | None = None) -> ModelEstimate:
    """Decode and prefill estimates of ``model`` on ``platform`` (a name, or a resolved
    :class:`Platform`: a sweep passes the host's description measured once, not re-measured);
    ``operators``: the other operators of a token too, decode at ``context`` positions."""
    cfg = get_model(model)
    plat = platform_named(platform) if isinstance(platform, str) else platform
    runs, natives = kernels_for(plat)
    tsar_kernels = runs if tsar_kernels is None else tsar_kernels
    threads = threads or plat.threads
    step = Steps(len(cfg.gemv_shapes()), progress or (lambda _m: None))
    # the first count that is not cached simulates every missing one, in parallel
    simulating = Work(f"{plat.name}: simulating the missing counts", unit="%", say=progress,
                      every=2.0) if progress else None
    with announced(model_requests(cfg.name, tsar_kernels, natives), simulating):
        simulate_announced()
        estimates = [_layer(cfg, shape, plat, threads, tsar_kernels, step, natives)
                     for shape in cfg.gemv_shapes()]
    name = platform if isinstance(platform, str) else plat.name
    if operators and progress:
        progress(f"{plat.name}: {cfg.name}'s other operators (simulated once at small sizes, then cached)")
    others = operator_times(cfg, plat, threads, context) if operators else ()
    return ModelEstimate(cfg.name, name, threads, cfg.layers, tuple(estimates), context if operators else 0,
                         others)


def kernels_for(plat: Platform) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The T-SAR kernels (the registered configurations whose width the platform's ISA has) and the
    natives (the builds its ISA runs) :func:`evaluate` times on ``plat``."""
    return tuple(kernel_names(plat.core.isa)), tuple(natives_for(plat.core.isa))


def model_requests(model: str, tsar_kernels: Sequence[str] | None = None,
                   natives: Sequence[str] = ("tl2",)) -> list[tuple[str, int, int, int]]:
    """The counts :func:`evaluate` reads (:func:`tsar.simulate.counts.announced`)."""
    kernels = (*(kernel_names() if tsar_kernels is None else tsar_kernels), "tl2",
               *(k for k in natives if k != "tl2"))
    return [request for shape in get_model(model).gemv_shapes() for kernel in kernels
            for request in ((kernel, shape.m, shape.k, 1),
                            counts_request(kernel, PREFILL_TOKENS, shape.m, shape.k))]


def _layer(cfg, shape: LinearShape, plat: Platform, threads: int, tsar_kernels: Sequence[str],
           step: Callable[[str], None], natives: Sequence[str] = ("tl2",)) -> LayerEstimate:
    """One matrix's decode and prefill times, T-SAR's fastest kernel for each, TL2's and every
    native's of ``natives``."""
    step(f"{plat.name}: {cfg.name} {shape.name} {shape.m} x {shape.k} (every kernel simulated once, "
         "then cached)")
    decode, prefill = {}, {}
    for kernel in dict.fromkeys((*tsar_kernels, "tl2", *natives)):
        c = simulated_counts(kernel, shape.m, shape.k)
        model_bytes = cfg.linear_weights * c.weight_bytes / (shape.m * shape.k)
        decode[kernel] = modelled(c, plat, 1, threads, weight_footprint=model_bytes)[0]
        # prefill per token, from one simulated block of GEMM_BLOCK tokens for the GEMM kernels
        prefill[kernel] = modelled(counts_for(kernel, PREFILL_TOKENS, shape.m, shape.k), plat, 1,
                                   threads)[0]
    best = min(tsar_kernels, key=decode.get)
    best_prefill = min(tsar_kernels, key=prefill.get)
    return LayerEstimate(shape, best, decode[best], decode["tl2"], prefill[best_prefill],
                         prefill["tl2"], best_prefill,
                         tuple((k, decode[k], prefill[k]) for k in dict.fromkeys(("tl2", *natives))),
                         tuple((k, decode[k], prefill[k]) for k in tsar_kernels))


def _width(kernel: str) -> int:
    """Vector width (bits) of a T-SAR kernel's configuration."""
    return parse_kernel_name(kernel)[0].vector_bits


def format_estimates(results: Sequence[ModelEstimate]) -> str:
    """The estimates as a table: T-SAR (fastest of every width) against TL2 and the best native,
    decode and prefill, then T-SAR per vector width where several were estimated."""
    widths = sorted({w for r in results for w in r.widths()})
    cols = (f"{'model':18} {'platform':12} {'thr':>3} {'decode tok/s T-SAR':>19} {'TL2':>8} "
            f"{'speedup':>8} {'best native':>24} {'vs it':>7} {'prefill s T-SAR':>16} {'TL2':>8} "
            f"{'speedup':>8} {'best native':>24} {'vs it':>7} {'paper tok/s':>12}")
    lines = [cols, "-" * len(cols)]
    for r in results:
        paper = r.reported_tps()
        dk, dn = r.best_native("decode")
        pk, pn = r.best_native("prefill")
        lines.append(
            f"{r.model:18} {r.platform:12} {r.threads:3d} {r.decode_tsar_tps:19.1f} {r.decode_tl2_tps:8.1f} "
            f"{r.decode_tsar_tps / r.decode_tl2_tps:7.2f}x {f'{dn:.1f} {dk}':>24} "
            f"{r.decode_tsar_tps / dn:6.2f}x "
            f"{r.prefill_seconds('tsar'):16.3f} {r.prefill_seconds('tl2'):8.3f} "
            f"{r.prefill_seconds('tl2') / r.prefill_seconds('tsar'):7.2f}x {f'{pn:.3f} {pk}':>24} "
            f"{pn / r.prefill_seconds('tsar'):6.2f}x {paper if paper is not None else '-':>12}")
    lines += _e2e_lines(results)
    if len(widths) < 2:
        return "\n".join(lines)
    head = " ".join([f"{'model':18} {'platform':12}", *(f"{f'decode T-SAR-{w}':>17}" for w in widths),
                     f"{'vs native':>9}", *(f"{f'prefill T-SAR-{w}':>18}" for w in widths),
                     f"{'vs native':>9}"])
    lines += ["", "T-SAR per vector width (the fastest of that width's kernels per layer; - where the "
              "platform's ISA lacks the width; vs native: the widest against the best native)", head,
              "-" * len(head)]
    for r in results:
        have = r.widths()
        dn, pn = r.best_native("decode")[1], r.best_native("prefill")[1]
        dec = {w: r.tsar_at("decode", w) for w in have}
        pre = {w: r.tsar_at("prefill", w) for w in have}
        lines.append(f"{r.model:18} {r.platform:12} "
                     + " ".join(f"{dec[w]:17.1f}" if w in dec else f"{'-':>17}" for w in widths)
                     + f" {dec[max(have)] / dn:8.2f}x "
                     + " ".join(f"{pre[w]:18.3f}" if w in pre else f"{'-':>18}" for w in widths)
                     + f" {pn / pre[max(have)]:8.2f}x")
    return "\n".join(lines)


def _e2e_lines(results: Sequence[ModelEstimate]) -> list[str]:
    """End-to-end figures (every operator of a token) and each operator's share of a token."""
    with_ops = [r for r in results if r.operators]
    if not with_ops:
        return []
    head = (f"{'model':18} {'platform':12} {'ctx':>5} {'decode tok/s T-SAR':>19} {'TL2':>8} {'speedup':>8} "
            f"{'native':>8} {'vs it':>7} {'prefill s T-SAR':>16} {'TL2':>8} {'speedup':>8} {'native':>8} "
            f"{'vs it':>7} {'paper tok/s':>12}")
    lines = ["", "End to end: every operator of a token (embedding, norms, RoPE, attention over the KV cache "
             "of ctx positions, FFN activation, LM head, sampling; the natives also quantize their "
             "activations), the same operator code on both sides", head, "-" * len(head)]
    for r in with_ops:
        d = {f: r.e2e_decode_tps(f) for f in ("tsar", "tl2", "native")}
        p = {f: r.e2e_prefill_seconds(f) for f in ("tsar", "tl2", "native")}
        paper = r.reported_tps()
        lines.append(f"{r.model:18} {r.platform:12} {r.context:5d} {d['tsar']:19.1f} {d['tl2']:8.1f} "
                     f"{d['tsar'] / d['tl2']:7.2f}x {d['native']:8.1f} {d['tsar'] / d['native']:6.2f}x "
                     f"{p['tsar']:16.3f} {p['tl2']:8.3f} {p['tl2'] / p['tsar']:7.2f}x {p['native']:8.3f} "
                     f"{p['native'] / p['tsar']:6.2f}x {paper if paper is not None else '-':>12}")
    lines += ["", "Share of a decoded token, T-SAR side (the fastest T-SAR kernel per layer):"]
    for r in with_ops:
        parts = r.breakdown("decode")
        total = sum(parts.values())
        lines.append(f"{r.model:18} {r.platform:12} " + ", ".join(
            f"{op} {100 * s / total:.1f} %" for op, s in sorted(parts.items(), key=lambda kv: -kv[1])))
    return lines
