"""``tsar report --sweep RESULTS``: Pareto plots of a sweep table (:mod:`tsar.sweep.run`), one per
platform and model: decode tokens/s against prefill latency (128 tokens), each variant a point
(labelled with its area overhead where the RTL built it), TL2 and the paper's c2s4 / c4s4 marked,
the Pareto front (no other point both faster in decode and quicker in prefill) joined."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from pathlib import Path

from tsar.isa.config import PAPER_CONFIGS
from tsar.models import PREFILL_TOKENS

PAPER_VARIANTS = tuple(cfg.name for cfg in PAPER_CONFIGS)


def pareto(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points ``(prefill seconds, decode tok/s)`` no other point dominates (lower
    prefill and higher decode, one of them strictly), by increasing prefill seconds."""
    front = []
    for i, (p, d) in enumerate(points):
        if not any((q <= p and e >= d) and (q < p or e > d) for j, (q, e) in enumerate(points) if j != i):
            front.append(i)
    return sorted(front, key=lambda i: points[i][0])


def _groups(rows: Sequence[dict]) -> dict[tuple[str, str, int], dict[str, dict[str, dict]]]:
    """``{(platform, model, threads): {variant: {phase: row}}}``."""
    out: dict = {}
    for r in rows:
        key = (r["platform"], r["model"], r["threads"])
        out.setdefault(key, {}).setdefault(r["variant"], {})[r["phase"]] = r
    return out


def label_rows(points: Sequence[tuple[float, float]], near: float = 0.05) -> list[int]:
    """Label row of each point (0, 1, ...): points within ``near`` of each other in both axes,
    as fractions of the data's span, get stacked labels instead of overprinted ones."""
    span = [max(1e-30, max(c) - min(c)) for c in zip(*points, strict=True)] if points else []
    rows: list[int] = []
    for i, (x, y) in enumerate(points):
        taken = {rows[j] for j, (u, v) in enumerate(points[:i])
                 if abs(x - u) / span[0] < near and abs(y - v) / span[1] < near}
        rows.append(min(set(range(len(taken) + 1)) - taken))
    return rows


def _plot(key: tuple[str, str, int], variants: dict[str, dict[str, dict]]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [v for v, ph in variants.items() if {"decode", "prefill"} <= set(ph)]
    points = [(variants[v]["prefill"]["tsar"], variants[v]["decode"]["tsar"]) for v in names]
    fig, ax = plt.subplots(figsize=(5.5, 4))
    rows = label_rows(points)
    for (p, d), name, row in zip(points, names, rows, strict=True):
        area = variants[name]["decode"].get("area_overhead_pct")
        paper = name in PAPER_VARIANTS
        ax.scatter([p], [d], marker="s" if paper else "o", color="C1" if paper else "C0", zorder=3)
        ax.annotate(f"{name}" + (f" (+{area:.1f}% area)" if area is not None else ""), (p, d),
                    textcoords="offset points", xytext=(4, 4 + 9 * row), fontsize=7)
    front = pareto(points)
    ax.plot([points[i][0] for i in front], [points[i][1] for i in front], "--", color="C0", lw=1)
    any_row = next(iter(variants.values()))
    tl2 = (any_row.get("prefill", {}).get("tl2"), any_row.get("decode", {}).get("tl2"))
    if None not in tl2:
        ax.scatter([tl2[0]], [tl2[1]], marker="^", color="C3", zorder=3)
        ax.annotate("TL2", tl2, textcoords="offset points", xytext=(4, -10), fontsize=7, color="C3")
    platform, model, threads = key
    ax.set(xlabel=f"prefill latency, {PREFILL_TOKENS} tokens (s, modelled)",
           ylabel="decode tokens/s (modelled)", title=f"{platform}, {model}, {threads} threads")
    ax.grid(alpha=0.3)
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def write_sweep_report(path: Path, rows: Sequence[dict], source: str) -> Path:
    """An HTML page with one Pareto plot per (platform, model, threads) and the table."""
    parts = [f"<h1>T-SAR design-space sweep</h1><p>From <code>{html.escape(source)}</code>: "
             f"{len(rows)} rows. Modelled against modelled (T-SAR and TL2 through the same timing "
             "model); squares: the paper's c2s4 / c4s4; triangle: TL2; dashed: Pareto front.</p>"]
    for key, variants in sorted(_groups(rows).items()):
        parts.append(f'<img alt="{html.escape(" ".join(map(str, key)))}" '
                     f'src="data:image/png;base64,{_plot(key, variants)}">')
    cols = list(rows[0]) if rows else []
    parts.append("<table border=1 cellpadding=3><tr>" + "".join(f"<th>{c}</th>" for c in cols) + "</tr>")
    for r in rows:
        cells = (f"{v:.4g}" if isinstance(v, float) else "" if v is None else html.escape(str(v))
                 for v in r.values())
        parts.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    parts.append("</table>")
    path.write_text("<!doctype html><meta charset=utf-8><title>T-SAR sweep</title>\n" + "\n".join(parts))
    return path
