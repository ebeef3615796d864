"""Per-form agreement of two instruction tables (e.g. one measured on the host against a shipped
one): latency and reciprocal throughput side by side, their ratio, and whether they agree within
a tolerance; and a summary (forms compared, how many agree, the median ratio)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tsar.sim.uarch.table import InstrTiming, Uarch


@dataclass(frozen=True)
class Tolerance:
    """Two values agree when they differ by at most ``relative`` of the larger, or by at most the
    absolute floor (cycles): ``latency`` for latencies, ``throughput`` for reciprocal throughputs."""

    relative: float = 0.10
    latency: float = 0.5
    throughput: float = 0.05


def within(a: float | None, b: float | None, relative: float, floor: float) -> bool:
    """Whether ``a`` and ``b`` (both given) differ by at most ``max(relative * max(a, b), floor)``."""
    return a is not None and b is not None and abs(a - b) <= max(relative * max(a, b), floor)


@dataclass(frozen=True)
class FormAgreement:
    """One form in both tables: measured (``ours``) and published values, ratios ours/published
    (None where either is missing or the published value is 0) and agreement flags (None where not
    compared)."""

    mnemonic: str
    operands: tuple[str, ...]
    latency: float | None
    published_latency: float | None
    latency_ratio: float | None
    latency_agrees: bool | None
    recip_throughput: float | None
    published_recip_throughput: float | None
    throughput_ratio: float | None
    throughput_agrees: bool | None

    @property
    def agrees(self) -> bool:
        """No compared value disagrees."""
        return self.latency_agrees is not False and self.throughput_agrees is not False


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def compare(ours: Mapping[tuple[str, tuple[str, ...]], InstrTiming] | Iterable[InstrTiming],
            published: Uarch, tol: Tolerance | None = None) -> list[FormAgreement]:
    """Every form of ``ours`` that ``published`` has an exact row for (no fallbacks), sorted."""
    tol = tol or Tolerance()
    rows = ours.values() if isinstance(ours, Mapping) else ours
    out = []
    for t in rows:
        pub = published.row(t.mnemonic, t.operands)
        if pub is None:
            continue
        lat_cmp = t.latency is not None and pub.latency is not None
        tp_cmp = t.recip_throughput is not None and pub.recip_throughput is not None
        if not (lat_cmp or tp_cmp):
            continue
        out.append(FormAgreement(
            t.mnemonic, t.operands, t.latency, pub.latency, _ratio(t.latency, pub.latency),
            within(t.latency, pub.latency, tol.relative, tol.latency) if lat_cmp else None,
            t.recip_throughput, pub.recip_throughput, _ratio(t.recip_throughput, pub.recip_throughput),
            within(t.recip_throughput, pub.recip_throughput, tol.relative, tol.throughput)
            if tp_cmp else None))
    return sorted(out, key=lambda a: (a.mnemonic, a.operands))


def summary(rows: list[FormAgreement]) -> dict[str, object]:
    """Forms compared; per quantity: forms compared, forms agreeing, their share and the median
    ratio ours/published; forms agreeing in everything compared."""
    out: dict[str, object] = {"forms": len(rows), "forms_agree": sum(1 for r in rows if r.agrees)}
    for what, flag, ratio in (("latency", "latency_agrees", "latency_ratio"),
                              ("throughput", "throughput_agrees", "throughput_ratio")):
        flags = [getattr(r, flag) for r in rows if getattr(r, flag) is not None]
        ratios = [getattr(r, ratio) for r in rows if getattr(r, ratio) is not None]
        out[what] = {"compared": len(flags), "agree": sum(flags),
                     "agree_share": round(sum(flags) / len(flags), 3) if flags else None,
                     "median_ratio": round(statistics.median(ratios), 3) if ratios else None}
    return out
