"""The T-SAR paper's Fig. 8 view: its BitNet models (125M..100B) end to end on each of its platforms.

Every model of :data:`tsar.models.PAPER_MODELS` on every shipped platform (the paper's Table I
machines), at the platform's thread count (the paper's 16 / 8 / 4), estimated by
:func:`tsar.estimate.model.evaluate`: prefill latency (``PREFILL_TOKENS`` tokens) and decode
tokens/s with every operator of a token (:mod:`tsar.estimate.operators`, decode at ``context``
KV-cache positions), the fastest T-SAR kernel the platform runs against TL2 and against the best
native kernel of its ISA, all modelled (like for like). The per-platform geometric means over the
models stand next to the paper's (section IV-B: prefill 8.8x / 8.4x / 12.4x; decode up to 6.4x on
the Workstation, 4.1-4.2x on the Laptop and Mobile), with the BitLinear-only ones beside them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tsar.estimate.model import ModelEstimate, evaluate, kernels_for, model_requests
from tsar.estimate.operators import DEFAULT_CONTEXT
from tsar.frames import Tabular
from tsar.models import HEADLINES, PAPER_MODELS, PREFILL_TOKENS

FAMILIES = ("tsar", "tl2", "native")
"""The columns of a model: the fastest T-SAR kernel per layer, TL2, the best native over the model."""


def paper_speedup(platform: str, phase: str) -> str:
    """The paper's reported T-SAR speedup over TL2 for a platform and phase (section IV-B), as text
    (``"8.8x geomean"``, ``"6.4x peak"``), or ``""`` where it reports none."""
    if phase == "prefill":
        value = HEADLINES.get(f"prefill_geomean_speedup_{platform}")
        return f"{value}x geomean" if value else ""
    if platform == "workstation":
        return f"{HEADLINES['decode_speedup_workstation_peak']}x peak"
    if platform in ("laptop", "mobile"):
        low, high = HEADLINES["decode_speedup_laptop_mobile"]
        return f"{low}-{high}x peak"
    return ""


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclass(frozen=True)
class PaperModels(Tabular):
    """Estimates of every (model, platform), in model order within each platform."""

    estimates: tuple[ModelEstimate, ...]

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.platform for e in self.estimates))

    def on(self, platform: str) -> tuple[ModelEstimate, ...]:
        return tuple(e for e in self.estimates if e.platform == platform)

    @staticmethod
    def prefill(e: ModelEstimate, family: str, e2e: bool = True) -> float:
        """Seconds for ``PREFILL_TOKENS`` tokens (end to end, or the BitLinear layers only)."""
        return e.e2e_prefill_seconds(family) if e2e else e.bitlinear_seconds("prefill", family)

    @staticmethod
    def decode(e: ModelEstimate, family: str, e2e: bool = True) -> float:
        """Tokens per second (end to end, or the BitLinear layers only)."""
        return e.e2e_decode_tps(family) if e2e else 1.0 / e.bitlinear_seconds("decode", family)

    def speedups(self, e: ModelEstimate, phase: str, against: str, e2e: bool = True) -> float:
        """T-SAR over ``against`` (``tl2`` or ``native``): a ratio of two modelled times."""
        if phase == "prefill":
            return self.prefill(e, against, e2e) / self.prefill(e, "tsar", e2e)
        return self.decode(e, "tsar", e2e) / self.decode(e, against, e2e)

    def geomean_speedup(self, platform: str, phase: str, against: str, e2e: bool = True) -> float:
        return geomean([self.speedups(e, phase, against, e2e) for e in self.on(platform)])

    def peak_speedup(self, platform: str, phase: str, against: str, e2e: bool = True) -> float:
        return max(self.speedups(e, phase, against, e2e) for e in self.on(platform))

    def records(self) -> list[dict]:
        """One row per (model, platform): end-to-end prefill seconds and decode tokens/s of each
        family, the speedups end to end and over the BitLinear layers only."""
        out = []
        for e in self.estimates:
            row = {"model": e.model, "platform": e.platform, "threads": e.threads, "context": e.context,
                   "decode_native_kernel": e.best_native("decode")[0],
                   "prefill_native_kernel": e.best_native("prefill")[0]}
            for f in FAMILIES:
                row[f"prefill_{f}_s"] = self.prefill(e, f)
                row[f"decode_{f}_tok_s"] = self.decode(e, f)
            for phase in ("prefill", "decode"):
                for against in ("tl2", "native"):
                    row[f"{phase}_speedup_{against}"] = self.speedups(e, phase, against)
                    row[f"{phase}_speedup_{against}_bitlinear"] = self.speedups(e, phase, against, False)
            out.append(row)
        return out

    def summary(self) -> list[dict]:
        """Per platform and phase: geomean and peak speedups over TL2 and the best native, end to
        end and BitLinear only, with the paper's figure."""
        rows = []
        for p in self.platforms:
            for phase in ("prefill", "decode"):
                row = {"platform": p, "phase": phase, "paper_vs_tl2": paper_speedup(p, phase)}
                for against in ("tl2", "native"):
                    for e2e, tag in ((True, ""), (False, "_bitlinear")):
                        row[f"geomean_vs_{against}{tag}"] = self.geomean_speedup(p, phase, against, e2e)
                        row[f"peak_vs_{against}{tag}"] = self.peak_speedup(p, phase, against, e2e)
                rows.append(row)
        return rows

    def table(self) -> str:
        """Per platform: prefill seconds and decode tokens/s of T-SAR, TL2 and the best native per
        model, then the geomeans next to the paper's."""
        head = (f"{'model':12} {'prefill s: T-SAR':>16} {'TL2':>9} {'vs TL2':>7} {'native':>9} {'vs it':>6}  "
                f"{'decode tok/s: T-SAR':>19} {'TL2':>9} {'vs TL2':>7} {'native':>9} {'vs it':>6}")
        lines = [f"The paper's models end to end (Fig. 8 view): every operator of a token, prefill of "
                 f"{PREFILL_TOKENS} tokens, decode at {self.estimates[0].context} KV-cache positions; "
                 "modelled against modelled; T-SAR: the fastest kernel per layer; native: the fastest "
                 "native of the platform's ISA over the model"]
        for p in self.platforms:
            rows = self.on(p)
            lines += ["", f"{p}, {rows[0].threads} threads", head, "-" * len(head)]
            for e in rows:
                pre = {f: self.prefill(e, f) for f in FAMILIES}
                dec = {f: self.decode(e, f) for f in FAMILIES}
                lines.append(
                    f"{e.model:12} {_s(pre['tsar']):>16} {_s(pre['tl2']):>9} "
                    f"{pre['tl2'] / pre['tsar']:6.2f}x {_s(pre['native']):>9} "
                    f"{pre['native'] / pre['tsar']:5.2f}x  {_tps(dec['tsar']):>19} "
                    f"{_tps(dec['tl2']):>9} {dec['tsar'] / dec['tl2']:6.2f}x {_tps(dec['native']):>9} "
                    f"{dec['tsar'] / dec['native']:5.2f}x")
            for phase in ("prefill", "decode"):
                g = {a: self.geomean_speedup(p, phase, a) for a in ("tl2", "native")}
                b = {a: self.geomean_speedup(p, phase, a, False) for a in ("tl2", "native")}
                paper = paper_speedup(p, phase)
                lines.append(f"  {phase} geomean: {g['tl2']:.2f}x TL2, {g['native']:.2f}x the best native "
                             f"(BitLinear only: {b['tl2']:.2f}x, {b['native']:.2f}x; peak vs TL2 "
                             f"{self.peak_speedup(p, phase, 'tl2'):.2f}x)"
                             + (f"; the paper: {paper} over TL2" if paper else ""))
        return "\n".join(lines)


def _s(seconds: float) -> str:
    return f"{seconds:.3f}" if seconds < 10 else f"{seconds:.1f}"


def _tps(tokens_per_second: float) -> str:
    return f"{tokens_per_second:.1f}" if tokens_per_second < 1000 else f"{tokens_per_second:,.0f}"


def paper_requests(platforms: Sequence[str],
                   models: Sequence[str] | None = None) -> list[tuple[str, int, int, int]]:
    """Every count :func:`estimate_paper_models` reads (:func:`tsar.simulate.counts.announced`)."""
    from tsar.estimate.layer import platform_named

    out: list[tuple[str, int, int, int]] = []
    for name in platforms:
        kernels = kernels_for(platform_named(name))
        out += [r for model in (PAPER_MODELS if models is None else models)
                for r in model_requests(model, *kernels)]
    return list(dict.fromkeys(out))


def estimate_paper_models(platforms: Sequence[str], models: Sequence[str] | None = None, *,
                          context: int = DEFAULT_CONTEXT,
                          progress: Callable[[str], None] | None = None) -> PaperModels:
    """Every model on every platform (names), end to end at ``context`` positions; the counts of all
    of them are simulated first, in parallel, each cached as it completes."""
    from tsar.console import Steps, Work
    from tsar.simulate.counts import prefetch

    say = progress or (lambda _m: None)
    models = PAPER_MODELS if models is None else models
    requests = paper_requests(platforms, models)
    say(f"{len(models)} models x {len(platforms)} platforms: simulating the missing counts of "
        f"{len(requests)} (kernel, layer) pairs (cached after the first run)")
    prefetch(requests, progress=Work("simulating", unit="%", say=say, every=2.0) if progress else None)
    step = Steps(len(models) * len(platforms), say)
    estimates = []
    for name in platforms:
        for model in models:
            step(f"{name}: {model}")
            estimates.append(evaluate(model, name, context=context))
    return PaperModels(tuple(estimates))
