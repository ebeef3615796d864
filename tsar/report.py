"""``tsar report``: one HTML page with the comparison's tables and plots (matplotlib, PNG inline).

Sections: the host roofline with every kernel placed on it; T-SAR / TL2 speedups per platform on
the BitNet-b1.58-2B-4T layers; memory traffic per token (the paper's Figure 9 metric); modelled
thread scaling; decode and prefill estimates next to the paper's Table III; the RTL area breakdown
next to the paper's Table II.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from tsar.compare import Comparison, compare, modelled, platform_named
from tsar.console import Steps, detail
from tsar.counts import simulated_counts
from tsar.model_eval import ModelEstimate, evaluate, format_estimates
from tsar.sim.platforms import SHIPPED

LAYERS_2B = ((2560, 2560), (6912, 2560), (2560, 6912))  # (M, K): O/QKV-like, gate/up, down
PLATFORMS = ("host", *SHIPPED)
REPORT_MODELS = ("bitnet-b1.58-2b-4t", "llama3-8b", "falcon3-10b")


@dataclass
class ReportData:
    host_layers: list[Comparison]
    platform_layers: dict[str, list[Comparison]]
    models: list[ModelEstimate]
    area_text: str | None
    area_rows: list | None


def _png(fig: plt.Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def roofline_plot(comp: Comparison, bandwidth_gbs: float) -> plt.Figure:
    """Gop/s against ops per weight byte; the roof is the measured streaming-read bandwidth."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [0.5, 64]
    ax.plot(xs, [bandwidth_gbs * x for x in xs], "k--", lw=1,
            label=f"DRAM roof ({bandwidth_gbs:.1f} GB/s measured)")
    rows = sorted(comp.rows, key=lambda r: -r.gops(comp.N, comp.M, comp.K))
    cmap = plt.get_cmap("tab20")
    for i, r in enumerate(rows):
        intensity = 2.0 / (r.bits_per_weight / 8)  # 2 ops per weight / bytes per weight
        marker = "o" if r.family == "T-SAR" else "s"
        ax.scatter(intensity, r.gops(comp.N, comp.M, comp.K), marker=marker, color=cmap(i % 20),
                   zorder=3, s=40, label=f"{r.kernel} ({'modelled' if r.family == 'T-SAR' else r.method})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("operational intensity (ops per weight byte)")
    ax.set_ylabel("Gop/s")
    ax.set_title(f"{comp.N}x{comp.M}x{comp.K} on {comp.platform}: T-SAR (circles) and native "
                 "kernels (squares)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    ax.grid(True, which="both", alpha=0.3)
    return fig


def speedup_plot(platform_layers: dict[str, list[Comparison]]) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(7, 4))
    shapes = [(c.M, c.K) for c in next(iter(platform_layers.values()))]
    width = 0.8 / len(shapes)
    for j, (m, k) in enumerate(shapes):
        vals = [next(c for c in comps if (m, k) == (c.M, c.K)) for comps in platform_layers.values()]
        speed = [c.baseline.seconds / c.best_tsar.seconds for c in vals]
        pos = [i + (j - (len(shapes) - 1) / 2) * width for i in range(len(vals))]
        bars = ax.bar(pos, speed, width, label=f"1x{m}x{k}")
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.set_xticks(range(len(platform_layers)), list(platform_layers))
    ax.axhline(1, color="k", lw=0.8)
    ax.set_ylabel("speedup of the best T-SAR kernel over TL2")
    ax.set_title("GEMV (decode): best T-SAR kernel over TL2 per layer shape", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def traffic_plot(comp: Comparison) -> plt.Figure:
    rows = [r for r in comp.rows if r.bytes_per_token]
    rows.sort(key=lambda r: r.bytes_per_token)
    fig, ax = plt.subplots(figsize=(7, 4))
    colors = ["tab:red" if r.family == "T-SAR" else "tab:blue" for r in rows]
    bars = ax.barh([r.kernel for r in rows], [r.bytes_per_token / 1e6 for r in rows], color=colors)
    ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_xlabel("MB loaded + stored per token (simulated)")
    ax.set_title(f"memory traffic, 1x{comp.M}x{comp.K} (T-SAR red, native blue)", fontsize=9)
    return fig


def scaling_plot(m: int, k: int, kernel: str, platforms: Sequence[str]) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(7, 4))
    for index, name in enumerate(platforms):
        plat = platform_named(name)
        counts = [t for t in (1, 2, 4, 8, 16) if t <= max(plat.threads, 1)]
        for kern, style in ((kernel, "-o"), ("tl2", "--s")):
            c = simulated_counts(kern, m, k)
            times = [modelled(c, plat, 1, t)[0] * 1e6 for t in counts]
            ax.plot(counts, times, style, color=f"C{index}", label=f"{name} {kern}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("threads")
    ax.set_ylabel("modelled time per token (us)")
    ax.set_title(f"thread scaling, 1x{m}x{k} (modelled; solid T-SAR, dashed TL2)", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(True, which="both", alpha=0.3)
    return fig


def area_plot(rows: list) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(7, 3.5))
    blocks = [r for r in rows if r.row != "Total"]
    labels = ["ours base", "ours T-SAR", "paper base", "paper T-SAR"]
    bottoms = [0.0] * 4
    for r in blocks:
        vals = [r.base.area_um2, r.tsar.area_um2, r.paper_base, r.paper_tsar]
        ax.barh(labels, vals, left=bottoms, label=r.row)
        bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
    ax.set_xlabel("area (um^2; ours: sky130 cells, paper: TSMC 28 nm)")
    ax.set_title("SIMD slice area by block (Table II)", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)
    return fig


def collect(*, repeats: int = 20, progress: Callable[[str], None] | None = None,
            with_area: bool = True) -> ReportData:
    say = progress or (lambda _m: None)
    total = len(LAYERS_2B) * len(PLATFORMS) + len(REPORT_MODELS) * (len(PLATFORMS) - 1) + with_area
    step = Steps(total, say)
    inner = detail  # the steps inside each comparison: with -v

    def layer(platform: str, m: int, k: int, **options: int) -> Comparison:
        step(f"{platform}: layer 1 x {m} x {k} ({'measured natives' if platform == 'host' else 'modelled'})")
        return compare(1, m, k, platform, progress=inner, **options)

    host_layers = [layer("host", m, k, repeats=repeats) for m, k in LAYERS_2B]
    platform_layers = {"host": host_layers}
    for name in PLATFORMS[1:]:
        platform_layers[name] = [layer(name, m, k, threads=1) for m, k in LAYERS_2B]
    models = []
    for model in REPORT_MODELS:
        for name in PLATFORMS[1:]:
            step(f"{name}: model {model}")
            models.append(evaluate(model, name, progress=inner))
    area_text = area_rows = None
    if with_area:
        from tsar.isa.config import C2S4
        from tsar.rtl.synth import area_table, format_area_table, synthesize

        step("synthesizing the RTL slices (cached after the first run)")
        base, tsar = synthesize([(256, ()), (256, (C2S4,))])
        area_rows = area_table(base, tsar)
        area_text = format_area_table(area_rows, "256-bit slice, base vs T-SAR c2s4")
    return ReportData(host_layers, platform_layers, models, area_text, area_rows)


def render(data: ReportData, bandwidth_gbs: float | None = None) -> str:
    """The HTML page; ``bandwidth_gbs`` is the roofline's DRAM roof (measured here if None)."""
    if bandwidth_gbs is None:
        from tsar.kernels import bench

        bandwidth_gbs = bench.measure_bandwidths([1])[1] / 1e9
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>T-SAR report</title>",
             "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
             "pre{font-size:12px;background:#f6f6f6;padding:8px;overflow-x:auto}</style></head><body>",
             "<h1>T-SAR: simulated T-SAR kernels against native ternary kernels</h1>",
             "<p>T-SAR times are simulated instruction counts timed by the project's timing model; "
             "native times on <code>host</code> are measured on this machine, on the other "
             "platforms modelled from the same C code's simulated counts. See docs/timing.md for "
             "the model and its validation.</p>"]

    def section(title: str, fig: plt.Figure | None = None, text: str | None = None) -> None:
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if fig is not None:
            parts.append(f"<img src='data:image/png;base64,{_png(fig)}'>")
        if text:
            parts.append(f"<pre>{html.escape(text)}</pre>")

    first = data.host_layers[0]
    section("Roofline (host)", roofline_plot(first, bandwidth_gbs),
            "\n\n".join(c.table() for c in data.host_layers))
    section("Speedup over TL2 per platform", speedup_plot(data.platform_layers),
            "\n\n".join(c.table() for name, comps in data.platform_layers.items() if name != "host"
                        for c in comps))
    widest = max(data.host_layers, key=lambda c: c.M * c.K)
    section("Memory traffic per token (Figure 9 metric)", traffic_plot(widest))
    section("Thread scaling (modelled)",
            scaling_plot(widest.M, widest.K, widest.best_tsar.kernel, PLATFORMS[1:]))
    section("Models: decode and prefill (BitLinear layers only) next to the paper's Table III",
            None, format_estimates(data.models))
    if data.area_rows:
        section("RTL area (Table II)", area_plot(data.area_rows), data.area_text)
    parts.append("</body></html>")
    return "\n".join(parts)


def write(path: Path, data: ReportData) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data))
    return path
