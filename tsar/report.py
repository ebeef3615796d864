"""``tsar report``: one HTML page with the comparison's tables and plots (matplotlib, PNG inline).

Sections: the host roofline with every kernel placed on it; T-SAR / TL2 speedups per platform on
the BitNet-b1.58-2B-4T layers, for decode (GEMV) and for prefill (GEMM at N = 128, token-blocked
kernels on both sides); memory traffic per token (the paper's Figure 9 metric); modelled
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

from tsar.compare import Comparison, compare
from tsar.console import Steps, detail
from tsar.estimate.layer import modelled, platform_named
from tsar.estimate.model import ModelEstimate, evaluate
from tsar.models import BITNET_2B, BITNET_2B_LAYERS, PREFILL_TOKENS
from tsar.sim.platforms import PLATFORM_NAMES, SHIPPED
from tsar.simulate.counts import simulated_counts

REPORT_MODELS = (BITNET_2B.name, "llama3-8b", "falcon3-10b")


@dataclass
class ReportData:
    host_layers: list[Comparison]
    platform_layers: dict[str, list[Comparison]]
    models: list[ModelEstimate]
    area_text: str | None
    area_rows: list | None
    platform_gemm: dict[str, list[Comparison]] | None = None  # prefill: N = PREFILL_TOKENS per layer


def _png(fig: plt.Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _family(kernel: str, family: str) -> str:
    """The roofline's marker groups: T-SAR (every dataflow) or the native format."""
    return "T-SAR" if family == "T-SAR" else kernel.upper()


def roofline_plot(comp: Comparison, bandwidth_gbs: float, roofs: dict[str, float] | None = None,
                  compute_gops: float | None = None) -> plt.Figure:
    """Gop/s against ops per weight byte: the measured DRAM roof, the platform's cache roofs
    (``roofs``: name -> GB/s) and an int8 compute roof; per kernel family the best kernel, measured
    (filled marker, error bar: spread over rounds) and modelled (open marker, error bar: the model's
    validated error for the family), each placed by the time obtained its own way."""
    from tsar.compare import MEASURED, MODELLED

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    xs = [0.5, 64]
    ax.plot(xs, [bandwidth_gbs * x for x in xs], "k--", lw=1,
            label=f"DRAM roof ({bandwidth_gbs:.1f} GB/s measured)")
    for i, (name, gbs) in enumerate((roofs or {}).items()):
        ax.plot(xs, [gbs * x for x in xs], ":", lw=1, color=f"C{7 + i % 3}",
                label=f"{name} roof ({gbs:.0f} GB/s)")
    if compute_gops:
        ax.axhline(compute_gops, color="k", lw=1, label=f"int8 compute roof ({compute_gops:.0f} Gop/s)")
    ops = 2.0 * comp.N * comp.M * comp.K
    markers = "osD^v<>ph*"
    fams = sorted({_family(r.kernel, r.family) for r in comp.rows})
    for i, fam in enumerate(fams):
        for how, filled in ((MEASURED, True), (MODELLED, False)):
            rows = [r for r in comp.rows if _family(r.kernel, r.family) == fam and r.time(how)]
            if not rows:
                continue
            r = min(rows, key=lambda r: r.time(how))
            t = r.time(how)
            via = " through the proxy" if r.how_measured == "proxy" else ""
            rel = r.spread / 2 if how == MEASURED else r.model_error
            err = None
            if rel:  # measured: half the spread around the median; modelled: ± the validated error
                err = [[ops / t / 1e9 - ops / (t * (1 + rel)) / 1e9], [ops / (t * max(1 - rel, 0.05)) / 1e9
                                                                       - ops / t / 1e9]]
            intensity = 2.0 / (r.bits_per_weight / 8)  # 2 ops per weight / bytes per weight
            ax.errorbar(intensity * (1.04 if filled else 0.96), ops / t / 1e9, yerr=err,
                        marker=markers[i % len(markers)], color=f"C{i}", ms=7, capsize=3, ls="none",
                        zorder=3, mfc=None if filled else "none",
                        label=f"{fam}: {r.kernel} ({how}{via if filled else ''})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("operational intensity (ops per weight byte)")
    ax.set_ylabel("Gop/s")
    ax.set_title(f"{comp.N}x{comp.M}x{comp.K} on {comp.platform}: best kernel per family, measured "
                 "(filled) and modelled (open)", fontsize=9)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    ax.grid(True, which="both", alpha=0.3)
    return fig


def _ratio_error(a: float | None, b: float | None) -> float | None:
    """Relative error of a ratio of two modelled times with relative errors ``a`` and ``b``
    (independent errors added in quadrature)."""
    return None if a is None or b is None else (a * a + b * b) ** 0.5


def speedup_plot(platform_layers: dict[str, list[Comparison]], phase: str = "GEMV (decode)") -> plt.Figure:
    """Best T-SAR kernel over TL2 per platform and shape: modelled / modelled everywhere (error bar:
    the model's validated errors of both families, in quadrature) and, for the host, a second
    group measured / measured (T-SAR through the proxy engine)."""
    from tsar.compare import MEASURED, MODELLED

    groups: list[tuple[str, str, list[Comparison]]] = []
    for name, comps in platform_layers.items():
        groups.append((f"{name}\nmodelled", MODELLED, comps))
        if any(c.measured for c in comps):
            groups.append((f"{name}\nmeasured", MEASURED, comps))
    fig, ax = plt.subplots(figsize=(max(7, 1.3 * len(groups)), 4))
    shapes = [(c.M, c.K) for c in next(iter(platform_layers.values()))]
    width = 0.8 / len(shapes)
    for j, (m, k) in enumerate(shapes):
        speed, errs = [], []
        for _label, how, comps in groups:
            c = next(c for c in comps if (m, k) == (c.M, c.K))
            t = c.best("T-SAR", how)
            s = c.speedup(t, how) if t is not None else None
            speed.append(s or 0.0)
            e = None
            if how == MODELLED and s and t is not None:
                e = _ratio_error(t.model_error, c.baseline.model_error)
            errs.append(s * e if s and e else 0.0)
        pos = [i + (j - (len(shapes) - 1) / 2) * width for i in range(len(groups))]
        n = groups[0][2][j].N
        bars = ax.bar(pos, speed, width, yerr=errs, capsize=2, label=f"{n}x{m}x{k}")
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.set_xticks(range(len(groups)), [g[0] for g in groups], fontsize=7)
    ax.axhline(1, color="k", lw=0.8)
    ax.set_ylabel("speedup of the best T-SAR kernel over TL2")
    ax.set_title(f"{phase}: best T-SAR kernel over TL2 (modelled/modelled, measured/measured)", fontsize=9)
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
    total = 2 * len(BITNET_2B_LAYERS) * len(PLATFORM_NAMES) + len(REPORT_MODELS) * len(SHIPPED) + with_area
    step = Steps(total, say)
    inner = detail  # the steps inside each comparison: with -v

    def layer(platform: str, m: int, k: int, n: int = 1, **options: int) -> Comparison:
        step(f"{platform}: layer {n} x {m} x {k} "
             f"({'measured natives' if platform == 'host' else 'modelled'})")
        return compare(n, m, k, platform, progress=inner, **options)

    host_layers = [layer("host", m, k, repeats=repeats) for m, k in BITNET_2B_LAYERS]
    platform_layers = {"host": host_layers}
    for name in SHIPPED:
        platform_layers[name] = [layer(name, m, k, threads=1) for m, k in BITNET_2B_LAYERS]
    platform_gemm = {"host": [layer("host", m, k, PREFILL_TOKENS, repeats=max(3, repeats // 4))
                              for m, k in BITNET_2B_LAYERS]}
    for name in SHIPPED:
        platform_gemm[name] = [layer(name, m, k, PREFILL_TOKENS, threads=1) for m, k in BITNET_2B_LAYERS]
    models = []
    for model in REPORT_MODELS:
        for name in SHIPPED:
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
    return ReportData(host_layers, platform_layers, models, area_text, area_rows, platform_gemm)


def provenance(repeats: int) -> dict[str, str]:
    """Where and how the figures were made: date, version, commit, CPU, caches, repeats, seeds."""
    import datetime
    import platform as pyplatform
    import subprocess

    from tsar import __version__
    from tsar.sim.platforms import host

    commit = "unknown"
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parent, timeout=5)
        if out.returncode == 0:
            commit = out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    plat = host(measure=False)
    caches = ", ".join(f"{c.name} {c.size >> 10} KiB" for c in plat.caches)
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"), "tsar": __version__,
            "commit": commit, "python": pyplatform.python_version(),
            "cpu": f"{plat.core.model} ({plat.core.uarch}{' proxy' if plat.core.uarch_proxy else ''}), "
                   f"{plat.core.cores} core(s) visible",
            "caches": caches, "native repeats": f"{repeats} timed calls per kernel (median)",
            "seeds": "weights and activations from numpy seed 0 (tsar.simulate.counts, tsar.kernels.bench)"}


def _table(obj) -> str:
    """A result's HTML table (:class:`tsar.frames.Tabular`)."""
    return obj._repr_html_()


def _figures(data: ReportData, bandwidth_gbs: float) -> list[tuple[str, str, plt.Figure | None, str]]:
    """(file stem, title, figure, HTML below it) of every section, in page order."""
    from tsar.sim.platforms import host

    plat = host(measure=False)
    ghz = plat.core.frequency_ghz
    roofs = {c.name: c.bandwidth * ghz for c in plat.caches}
    # int8 compute roof: 256-bit vpmaddubsw (32 multiply-adds = 64 ops) at the core's throughput
    mad = plat.uarch().lookup("vpmaddubsw", ("ymm", "ymm", "ymm"))
    compute = 64 / mad.recip_throughput * ghz
    first = data.host_layers[0]
    widest = max(data.host_layers, key=lambda c: c.M * c.K)
    out = [("roofline", "Roofline (host)", roofline_plot(first, bandwidth_gbs, roofs, compute),
            "".join(_table(c) for c in data.host_layers)),
           ("speedup", "Speedup over TL2 per platform", speedup_plot(data.platform_layers),
            "".join(_table(c) for name, comps in data.platform_layers.items() if name != "host"
                    for c in comps)),
           *([("prefill", f"Prefill GEMM (N = {PREFILL_TOKENS}) per platform: token-blocked kernels on both "
                 "sides", speedup_plot(data.platform_gemm, f"GEMM (prefill, N = {PREFILL_TOKENS})"),
                 "".join(_table(c) for comps in data.platform_gemm.values() for c in comps))]
             if data.platform_gemm else []),
           ("traffic", "Memory traffic per token (Figure 9 metric)", traffic_plot(widest), ""),
           ("scaling", "Thread scaling (modelled)",
            scaling_plot(widest.M, widest.K, widest.best_tsar.kernel, SHIPPED), ""),
           ("models", "Models: decode and prefill (BitLinear layers only) next to the paper's "
            "Table III", None, "".join(_table(m) for m in data.models))]
    if data.area_rows:
        out.append(("area", "RTL area (Table II)", area_plot(data.area_rows),
                    f"<pre>{html.escape(data.area_text or '')}</pre>"))
    return out


def _error_source(data: ReportData) -> str:
    for comps in (data.platform_layers or {}).values():
        for c in comps:
            if c.error_source:
                return c.error_source
    return "none available (run tsar validate-model)"


def render(data: ReportData, bandwidth_gbs: float | None = None, *, repeats: int = 20,
           files: Path | None = None) -> str:
    """The HTML page; ``bandwidth_gbs`` is the roofline's DRAM roof (measured here if None).
    With ``files`` (a path stem) every plot is also written as ``<stem>-<name>.png`` and ``.svg``."""
    if bandwidth_gbs is None:
        from tsar.kernels import bench

        bandwidth_gbs = bench.measure_bandwidths([1])[1] / 1e9
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>T-SAR report</title>",
             "<style>body{font-family:sans-serif;max-width:1150px;margin:auto}"
             "table{border-collapse:collapse;font-size:12px;margin:8px 0 16px}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}"
             "pre{font-size:12px;background:#f6f6f6;padding:8px;overflow-x:auto}</style></head><body>",
             "<h1>T-SAR: simulated T-SAR kernels against native ternary kernels</h1>",
             "<p>Like for like: every speedup is a ratio of two times obtained the same way. On "
             "<code>host</code> each kernel has a <b>measured</b> time (natives natively, T-SAR "
             "kernels through the proxy engine: their T-SAR instructions replaced by the uops the "
             "model assumes; all alternating round by round, error bar the spread of the round "
             "medians) and a <b>modelled</b> one (simulated counts and the timing model); the "
             "other platforms have modelled times only. Modelled times carry the model's "
             "validated error for the kernel family on the host: "
             + html.escape(_error_source(data)) + ". See docs/timing.md for the model and its "
             "validation.</p>", "<h2>Provenance</h2><table>"]
    parts += [f"<tr><th>{html.escape(k)}</th><td style='text-align:left'>{html.escape(v)}</td></tr>"
              for k, v in provenance(repeats).items()]
    parts.append("</table>")
    for stem, title, fig, below in _figures(data, bandwidth_gbs):
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if fig is not None:
            if files is not None:
                for ext in ("png", "svg"):
                    fig.savefig(f"{files}-{stem}.{ext}", dpi=110, bbox_inches="tight")
            parts.append(f"<img alt='{html.escape(title)}' src='data:image/png;base64,{_png(fig)}'>")
        parts.append(below)
    parts.append("</body></html>")
    return "\n".join(parts)


def write(path: Path, data: ReportData, repeats: int = 20) -> Path:
    """The page at ``path`` and its plots beside it (``<stem>-<plot>.png`` / ``.svg``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data, repeats=repeats, files=path.with_suffix("")))
    return path
