"""``tsar report``: one HTML page that answers first, then shows the figures, then the tables.

Page order: the answer (per platform and phase, the best T-SAR kernel against TL2 and against the
best native kernel on the BitNet-b1.58-2B-4T layers, like for like: modelled / modelled on the
modelled platforms, measured / measured on the host, with error bars); the figures (the host
roofline under its measured DRAM, cache and int8 compute roofs, speedups for decode (GEMV) and
prefill (GEMM at N = 128, token-blocked kernels on both sides), memory traffic per token (the
paper's Figure 9 metric), modelled thread scaling, the RTL area next to the paper's Table II);
tables with units, a few columns each (per kernel and layer, models next to the paper's Table III,
area); links to the raw data, written beside the page as CSV (and Parquet where pyarrow is
installed); provenance.
"""

from __future__ import annotations

import base64
import csv
import html
import io
from collections.abc import Callable, Sequence
from concurrent.futures import as_completed
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from tsar.compare import MEASURED, MODELLED, Comparison, Row, compare, compare_requests
from tsar.console import Steps, Work, detail
from tsar.estimate.model import ModelEstimate, evaluate, model_requests
from tsar.estimate.paper_models import FAMILIES, PaperModels, paper_requests, paper_speedup
from tsar.models import BITNET_2B, BITNET_2B_LAYERS, PAPER_MODELS, PREFILL_TOKENS
from tsar.sim.platforms import SHIPPED
from tsar.simulate.counts import prefetch, worker_pool, workers

REPORT_MODELS = (BITNET_2B.name, "llama3-8b", "falcon3-10b")


@dataclass
class ReportData:
    host_layers: list[Comparison]
    platform_layers: dict[str, list[Comparison]]
    models: list[ModelEstimate]
    area_text: str | None
    area_rows: list | None
    platform_gemm: dict[str, list[Comparison]] | None = None  # prefill: N = PREFILL_TOKENS per layer
    paper: PaperModels | None = None  # with --paper-models: the paper's 125M..100B sweep (Fig. 8)


def _png(fig: plt.Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _family(kernel: str, family: str) -> str:
    """The roofline's marker groups: T-SAR (every dataflow) or the native format."""
    return "T-SAR" if family == "T-SAR" else kernel.upper()


def roofline_plot(comp: Comparison, bandwidth_gbs: float, roofs: dict[str, float] | None = None,
                  compute: dict[str, float] | None = None) -> plt.Figure:
    """Gop/s against ops per weight byte: the measured DRAM roof, the platform's cache roofs
    (``roofs``: name -> GB/s) and the int8 compute roofs (``compute``: label -> Gop/s, the highest
    solid: the host's widest SIMD, the others dashed, see :func:`compute_roofs`); per kernel family
    the best kernel, measured (filled marker, error bar: spread over rounds) and modelled (open
    marker, error bar: the model's validated error for the family), each placed by the time
    obtained its own way."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    xs = [0.5, 64]
    ax.plot(xs, [bandwidth_gbs * x for x in xs], "k--", lw=1,
            label=f"DRAM roof ({bandwidth_gbs:.1f} GB/s measured)")
    for i, (name, gbs) in enumerate((roofs or {}).items()):
        ax.plot(xs, [gbs * x for x in xs], ":", lw=1, color=f"C{7 + i % 3}",
                label=f"{name} roof ({gbs:.0f} GB/s)")
    for i, (label, gops) in enumerate(sorted((compute or {}).items(), key=lambda kv: -kv[1])):
        ax.axhline(gops, color="k", lw=1 if i == 0 else 0.8, ls="-" if i == 0 else "-.",
                   label=f"{label} int8 compute roof ({gops:.0f} Gop/s, 1 thread)")
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
    """Relative error of a ratio of two times with relative errors ``a`` and ``b`` (independent
    errors added in quadrature)."""
    return None if a is None or b is None else (a * a + b * b) ** 0.5


def _row_error(r: Row, how: str) -> float | None:
    """A time's relative error bar: the model's validated error (modelled) or half the spread of
    the per-round fastest calls (measured)."""
    if how == MODELLED:
        return r.model_error
    return None if r.spread is None else r.spread / 2


def speedup_plot(platform_layers: dict[str, list[Comparison]], phase: str = "GEMV (decode)") -> plt.Figure:
    """Best T-SAR kernel over TL2 per platform and shape: modelled / modelled everywhere (error bar:
    the model's validated errors of both families, in quadrature) and, for the host, a second
    group measured / measured (T-SAR through the proxy engine; error bar: half the spreads of both,
    in quadrature)."""
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
            e = _ratio_error(_row_error(t, how), _row_error(c.baseline, how)) if s and t is not None else None
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


def scaling_plot(layers: dict[str, Comparison], gemm: dict[str, Comparison]) -> plt.Figure:
    """The paper's Fig. 10 view: per platform, the fastest T-SAR kernel (solid) and TL2 (dashed) of
    a comparison, modelled at 1, 2, 4, ... threads (:func:`tsar.estimate.scaling.sweep`, over the
    comparison's kernels), prefill GEMM (left, ``gemm``) and decode GEMV (right, ``layers``), with
    the speedup over TL2 at the platform's full thread count."""
    from tsar.estimate.scaling import sweep

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, comps, phase in ((axes[0], gemm, "GEMM"), (axes[1], layers, "GEMV")):
        for index, (name, comp) in enumerate(comps.items()):
            result = sweep(comp.N, comp.M, comp.K, name,
                           tsar_kernels=[r.kernel for r in comp.rows if r.family == "T-SAR"],
                           natives=[r.kernel for r in comp.rows if r.family != "T-SAR"])
            threads = [p.threads for p in result.points]
            ax.plot(threads, [p.tsar_seconds * 1e6 for p in result.points], "-o", color=f"C{index}",
                    label=f"{name} T-SAR")
            ax.plot(threads, [p.tl2_seconds * 1e6 for p in result.points], "--s", color=f"C{index}",
                    label=f"{name} TL2")
            last = result.points[-1]
            ax.annotate(f"{last.over_tl2:.1f}x", (last.threads, last.tsar_seconds * 1e6), fontsize=7,
                        xytext=(4, -10), textcoords="offset points", color=f"C{index}")
        some = next(iter(comps.values()), None)
        shape = f", {some.N}x{some.M}x{some.K}" if some else ""
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("threads")
        ax.set_ylabel("modelled time (us)")
        ax.set_title(f"{phase}{shape} (solid: fastest T-SAR, dashed: TL2)", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
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
            with_area: bool = True, paper_models: bool = False, remeasure: bool = False) -> ReportData:
    """Every comparison and estimate of the page; ``paper_models``: also every model of the paper's
    125M..100B sweep on every shipped platform (its Fig. 8 view; minutes more from an empty cache).
    The host's measurements are reused from an earlier report on the same machine and code unless
    ``remeasure`` (:mod:`tsar.estimate.measurements`)."""
    say = progress or (lambda _m: None)
    swept = tuple(m for m in PAPER_MODELS if m not in REPORT_MODELS) if paper_models else ()
    model_jobs = (len(REPORT_MODELS) + len(swept)) * len(SHIPPED)
    layer_jobs = 2 * len(BITNET_2B_LAYERS) * len(SHIPPED)
    host = [_host_weight(m, k, n, repeats, remeasure)
            for n in (1, PREFILL_TOKENS) for m, k in BITNET_2B_LAYERS]
    weights = [MODEL_WEIGHT] * model_jobs + [1.0] * layer_jobs + host + [1.0] * with_area
    step = Steps(len(weights), say, weights=weights)
    inner = detail  # the steps inside each comparison: with -v

    def layer(platform: str, m: int, k: int, n: int = 1, **options: int) -> Comparison:
        step(f"{platform}: layer {n} x {m} x {k} "
             f"({'measured natives' if platform == 'host' else 'modelled'})")
        return compare(n, m, k, platform, progress=inner, reuse_measurements=not remeasure, **options)

    import multiprocessing

    fork = multiprocessing.get_context("fork")
    synthesis = None
    if with_area:  # Yosys runs beside the simulations (minutes uncached); the host is measured after
        from tsar.isa.config import C2S4
        from tsar.rtl.synth import area_table, format_area_table, synthesize

        variants = [(256, ()), (256, (C2S4,))]

        received, send = fork.Pipe(duplex=False)

        def synthesize_beside() -> None:
            with suppress(KeyboardInterrupt):  # Ctrl-C: the report says it was interrupted
                try:
                    send.send(synthesize(variants))
                except Exception:  # synthesized again below, where the error is reported
                    send.send(None)
        synthesis = fork.Process(target=synthesize_beside, daemon=True)
        synthesis.start()
        send.close()  # the child's end: a child that dies without sending is an EOF here
    # every simulated count of the report, simulated in parallel (each cached as it completes)
    natives = _report_natives()
    requests = [r for m, k in BITNET_2B_LAYERS for n in (1, PREFILL_TOKENS)
                for r in compare_requests(n, m, k, natives=natives)]
    requests += [r for model in REPORT_MODELS for r in model_requests(model, natives=natives)]
    requests += paper_requests(SHIPPED, swept) if swept else []
    say("simulating the kernels on every layer shape, in parallel (cached after the first run)")
    prefetch(requests, progress=Work("simulating", unit="%", say=say, every=2.0))
    # the modelled platforms' comparisons and model estimates: timing-model work, in parallel
    jobs = [("model", model, name) for model in (*REPORT_MODELS, *swept) for name in SHIPPED]
    jobs += [("layer", name, m, k, n) for n in (1, PREFILL_TOKENS) for name in SHIPPED
             for m, k in BITNET_2B_LAYERS]
    results: dict[tuple, object] = {}
    pool = worker_pool()
    with pool:
        try:
            step.begin(parallel=workers())
            futures = {pool.submit(_modelled_job, job, inner): job for job in jobs}
            for future in as_completed(futures):
                job = futures[future]
                if job[0] == "model":
                    step(f"{job[2]}: model {job[1]}", MODEL_WEIGHT, done=True)
                else:
                    step(f"{job[1]}: layer {job[4]} x {job[2]} x {job[3]} (modelled)", 1.0, done=True)
                results[job] = future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    synthesized = None
    if synthesis:
        with suppress(EOFError):
            synthesized = received.recv()  # (small: block figures and paths)
        synthesis.join()
    host_layers = [layer("host", m, k, repeats=repeats) for m, k in BITNET_2B_LAYERS]
    platform_layers = {"host": host_layers}
    for name in SHIPPED:
        platform_layers[name] = [results["layer", name, m, k, 1] for m, k in BITNET_2B_LAYERS]
    platform_gemm = {"host": [layer("host", m, k, PREFILL_TOKENS, repeats=gemm_repeats(repeats))
                              for m, k in BITNET_2B_LAYERS]}
    for name in SHIPPED:
        platform_gemm[name] = [results["layer", name, m, k, PREFILL_TOKENS] for m, k in BITNET_2B_LAYERS]
    models = [results["model", model, name] for model in REPORT_MODELS for name in SHIPPED]
    area_text = area_rows = None
    if with_area:
        step("synthesizing the RTL slices (cached after the first run)")
        base, tsar = synthesized or synthesize(variants)  # the run beside the simulations
        area_rows = area_table(base, tsar)
        area_text = format_area_table(area_rows, "256-bit slice, base vs T-SAR c2s4")
    paper = PaperModels(tuple(results["model", model, name] for name in SHIPPED for model in PAPER_MODELS
                              if ("model", model, name) in results)) if paper_models else None
    return ReportData(host_layers, platform_layers, models, area_text, area_rows, platform_gemm, paper)


def gemm_repeats(repeats: int) -> int:
    """Timed calls per kernel of a host prefill layer: a quarter of a decode layer's (each call
    is 128 tokens), at least 3."""
    return max(3, repeats // 4)


MODEL_WEIGHT = 8.0
"""Expected time of one model estimate (every layer and operator of a model on a platform, from
cached counts) in units of one modelled layer comparison: about 2.5 s against 0.3 s."""

MEASURE_WEIGHT = 25.0
"""Expected seconds of measuring one BitNet-2B GEMV layer on the host (every kernel, alternating
rounds) in units of one modelled job of the report (a comparison or model estimate from cached
counts): about 8 s against 0.3 s on a 2-core host; a prefill layer takes its size over 2560 x 2560
times as long. Only the ratio matters: :class:`tsar.console.Steps` measures the seconds per unit."""


def _host_weight(m: int, k: int, n: int, repeats: int, remeasure: bool) -> float:
    """A host layer's step weight: one unit where its measurements are stored and reused, else
    :data:`MEASURE_WEIGHT` scaled by its size (prefill)."""
    from tsar.compare import measurements_stored

    if not remeasure and measurements_stored(n, m, k, repeats=repeats if n == 1 else gemm_repeats(repeats)):
        return 1.0
    return MEASURE_WEIGHT * (1.0 if n == 1 else m * k / (BITNET_2B_LAYERS[0][0] * BITNET_2B_LAYERS[0][1]))


def _report_natives() -> tuple[str, ...]:
    """Every simulated native build a platform of the report models (each platform's ISA's)."""
    from tsar.sim.platforms import detect, load
    from tsar.simulate.native_kernel import natives_for

    isas = [load(name).core.isa for name in SHIPPED] + [detect.host(measure=False).core.isa]
    return tuple(dict.fromkeys(k for isa in isas for k in natives_for(isa)))


def _modelled_job(job: tuple, progress: Callable[[str], None]) -> Comparison | ModelEstimate:
    """One of :func:`collect`'s modelled results, in a worker process."""
    if job[0] == "model":
        return evaluate(job[1], job[2], progress=progress)
    _, name, m, k, n = job
    return compare(n, m, k, name, progress=progress, threads=1)


def provenance(repeats: int, measured_at: Sequence[str] = ()) -> dict[str, str]:
    """Where and how the figures were made: date, version, commit, CPU, caches, repeats, seeds, and
    when the host's measurements were taken (``measured_at``: the comparisons' times)."""
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
            "seeds": "weights and activations from numpy seed 0 (tsar.simulate.counts, tsar.kernels.bench)",
            **({"host measurements": _measured_at(measured_at)} if measured_at else {})}


def _host_times(data: ReportData) -> list[str]:
    """When each measured host layer (decode and prefill) was measured."""
    layers = [*data.host_layers, *(data.platform_gemm or {}).get("host", [])]
    return [c.measured_at for c in layers if c.measured_at]


def _measured_at(times: Sequence[str]) -> str:
    """When the host's layers were measured: now, or reused from an earlier report."""
    first, last = min(times), max(times)
    span = first if first == last else f"{first} to {last}"
    return (f"taken {span}; a report on the same machine and code reuses them "
            "(tsar report --remeasure measures again)")


# --- roofs -------------------------------------------------------------------------------------------

ISA_LABELS = {"avx2": "AVX2", "avx512": "AVX-512 VNNI"}


def compute_roofs(plat=None) -> dict[str, float]:
    """The host's one-thread int8 compute roofs in Gop/s by instruction set: AVX2 and, where the
    host runs it, AVX-512 VNNI, each measured by the peak probe (``kernels/native/peak.c``:
    independent ``vpmaddubsw`` + ``vpaddw``, or ``vpdpbusd``, no loads). Without the native
    library, from the core's instruction table: 256-bit ``vpmaddubsw`` (64 ops) and, on a core with
    a 512-bit datapath, ``vpdpbusd zmm`` (128 ops) at their reciprocal throughputs."""
    try:
        from tsar.kernels.baselines import cpu_isa, int8_peak

        isas = ["avx2", "avx512"] if cpu_isa() == "avx512" else ["avx2"]
        return {f"{ISA_LABELS[isa]} (measured)": int8_peak(isa) / 1e9 for isa in isas}
    except (ImportError, OSError, ValueError):
        pass
    if plat is None:
        from tsar.sim.platforms import host

        plat = host(measure=False)
    ghz, table = plat.core.frequency_ghz, plat.uarch()
    out = {"AVX2 (instruction table)":
           64 / table.lookup("vpmaddubsw", ("ymm", "ymm", "ymm")).recip_throughput * ghz}
    if plat.core.vector_bits >= 512:
        out["AVX-512 VNNI (instruction table)"] = \
            128 / table.lookup("vpdpbusd", ("zmm", "zmm", "zmm")).recip_throughput * ghz
    return out


# --- numbers with units --------------------------------------------------------------------------------

def _us(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    us = seconds * 1e6
    return f"{us:,.0f} us" if us >= 100 else f"{us:.1f} us" if us >= 10 else f"{us:.2f} us"


def _x(ratio: float | None, rel_error: float | None = None, bar: bool = False) -> str:
    """A ratio, with its error bar (``rel_error``: relative) where known; with ``bar``, an unknown
    one is shown as ``± ?`` (a kernel whose model error was never validated)."""
    if ratio is None:
        return "-"
    if rel_error is None and bar:
        return f"{ratio:.2f}x ± ?"
    return f"{ratio:.2f}x" + (f" ± {ratio * rel_error:.2f}" if rel_error else "")


def _seconds(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.3g} ms"


def _tps(tokens_per_second: float | None) -> str:
    if tokens_per_second is None:
        return "-"
    return f"{tokens_per_second:,.0f} tok/s" if tokens_per_second >= 100 else f"{tokens_per_second:.1f} tok/s"


def _pct(fraction: float | None) -> str:
    return "-" if fraction is None else f"±{100 * fraction:.0f}%"


def _mb(nbytes: float | None) -> str:
    return "-" if not nbytes else f"{nbytes / 1e6:.2f} MB"


def _shape(c: Comparison) -> str:
    return f"{c.N}x{c.M}x{c.K}"


# --- the answer ----------------------------------------------------------------------------------------

PHASES = {"decode": "Decode (GEMV, 1 token)", "prefill": f"Prefill (GEMM, N = {PREFILL_TOKENS} tokens)"}


@dataclass(frozen=True)
class Answer:
    """The best T-SAR kernel against TL2 and against the best native kernel on one layer, both
    times of each ratio obtained the same way (``how``); errors relative (model error or half the
    measured spread of both sides, in quadrature)."""

    phase: str
    platform: str
    how: str
    shape: str
    tsar: str
    over_tl2: float
    tl2_error: float | None
    native: str
    over_native: float
    native_error: float | None


def _phases(data: ReportData) -> list[tuple[str, dict[str, list[Comparison]]]]:
    return [(phase, groups) for phase, groups in (("decode", data.platform_layers),
                                                  ("prefill", data.platform_gemm or {})) if groups]


def _how(platform: str, comps: Sequence[Comparison]) -> str:
    """Like for like: measured / measured on the host (where it was measured), modelled / modelled
    on the modelled platforms."""
    return MEASURED if platform == "host" and all(c.measured for c in comps) else MODELLED


def answers(data: ReportData) -> list[Answer]:
    """Per phase, platform and layer: the best T-SAR kernel against TL2 and the best native."""
    out = []
    for phase, groups in _phases(data):
        for platform, comps in groups.items():
            how = _how(platform, comps)
            for c in comps:
                t, n = c.best("T-SAR", how), c.best("native", how)
                base = c.baseline
                if t is None or n is None or not base.time(how):
                    continue
                tt, te = t.time(how), _row_error(t, how)
                out.append(Answer(phase, platform, how, _shape(c), t.kernel,
                                  base.time(how) / tt, _ratio_error(te, _row_error(base, how)),
                                  n.kernel, n.time(how) / tt, _ratio_error(te, _row_error(n, how))))
    return out


def _span(values: Sequence[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}x to {hi:.2f}x"


def headline(rows: Sequence[Answer]) -> list[str]:
    """One sentence per phase (HTML): the ranges of the answer's ratios over layers and platforms,
    the modelled platforms and the host's measurements stated apart."""
    out = []
    for phase, title in PHASES.items():
        mine = [a for a in rows if a.phase == phase]
        if not mine:
            continue
        parts = []
        modelled_rows = [a for a in mine if a.how == MODELLED]
        if modelled_rows:
            names = ", ".join(dict.fromkeys(a.platform for a in modelled_rows))
            parts.append(f"on the modelled platforms ({html.escape(names)}; modelled / modelled) the best "
                         f"T-SAR kernel is <b>{_span([a.over_tl2 for a in modelled_rows])} TL2</b> and "
                         f"<b>{_span([a.over_native for a in modelled_rows])} the best native kernel</b>")
        measured_rows = [a for a in mine if a.how == MEASURED]
        if measured_rows:
            parts.append("on this host, measured / measured (T-SAR through the proxy engine), "
                         f"<b>{_span([a.over_tl2 for a in measured_rows])} TL2</b> and "
                         f"<b>{_span([a.over_native for a in measured_rows])} the best native kernel</b>")
        layers = len(dict.fromkeys(a.shape for a in mine))
        out.append(f"<b>{html.escape(title)}</b>, over {layers} layer shape(s): " + "; ".join(parts) + ".")
    return out


# --- tables ----------------------------------------------------------------------------------------------

MAX_COLUMNS = 8
"""No table of the page has more columns (tests/front/test_compare_report.py checks it)."""


def _table(caption: str, head: Sequence[str], rows: Sequence[Sequence[str]], *,
           names: int | Sequence[int] = 1, note: str = "", css: str = "") -> str:
    """An HTML table of formatted cells: the name columns (the first ``names``, or those indices)
    left-aligned and never broken, the others numbers with units; ``note`` below it."""
    assert len(head) <= MAX_COLUMNS, f"{caption}: {len(head)} columns"
    cls = f" class='{css}'" if css else ""
    named = set(range(names)) if isinstance(names, int) else set(names)

    def cells(row: Sequence[str], tag: str) -> str:
        return "".join(f"<{tag}{' class=n' if i in named else ''}>{html.escape(v)}</{tag}>"
                       for i, v in enumerate(row))

    body = "".join(f"<tr>{cells(r, 'td')}</tr>" for r in rows)
    foot = f"<p class='note'>{note}</p>" if note else ""
    return (f"<p class='cap'>{html.escape(caption)}</p><table{cls}><thead><tr>{cells(head, 'th')}</tr>"
            f"</thead><tbody>{body}</tbody></table>{foot}")


def _answer_table(rows: Sequence[Answer]) -> str:
    out = []
    for phase, title in PHASES.items():
        mine = [a for a in rows if a.phase == phase]
        if not mine:
            continue
        body = [[a.platform, a.how, a.shape, a.tsar, _x(a.over_tl2, a.tl2_error, bar=True), a.native,
                 _x(a.over_native, a.native_error, bar=True)] for a in mine]
        out.append(_table(title, ["platform", "timed", "layer NxMxK", "best T-SAR", "vs TL2",
                                  "best native", "vs best native"], body, names=(0, 1, 2, 3, 5)))
    return "".join(out)


def _kernel_table(phase: str, platform: str, comps: Sequence[Comparison], how: str) -> str:
    """Kernels x layers: time per layer call and the speedup over TL2, all obtained ``how``."""
    first = comps[0]
    kernels = [r.kernel for r in sorted((r for r in first.rows if r.time(how)),
                                        key=lambda r: r.time(how))]  # type: ignore[arg-type,return-value]
    modelled_here = how == MODELLED
    head = ["kernel", "bits/weight"] + (["model error"] if modelled_here else []) + [_shape(c) for c in comps]
    body = []
    for kernel in kernels:
        r0 = first.row(kernel)
        line = [kernel, f"{r0.bits_per_weight:.2f} b"] + ([_pct(r0.model_error)] if modelled_here else [])
        for c in comps:
            try:
                r = c.row(kernel)
            except KeyError:
                line.append("-")
                continue
            t = r.time(how)
            spread = f" {_pct(r.spread / 2)}" if how == MEASURED and r.spread is not None and t else ""
            line.append("-" if t is None else f"{_us(t)}{spread} ({_x(c.speedup(r, how))})")
        body.append(line)
    threads = first.threads
    caption = (f"{PHASES[phase]} on {platform}, {how}, {threads} thread{'s' if threads > 1 else ''}: "
               "time per layer call (speedup over TL2, "
               + ("measured / measured" if how == MEASURED else "modelled / modelled") + ")")
    note = ""
    if how == MEASURED:
        note = ("±: half the spread of the per-round fastest calls; natives in the build of each row's "
                "ISA, T-SAR through the proxy engine (one thread)")
    skipped = dict.fromkeys(f"{k} ({why})" for c in comps for k, why in c.skipped)
    if skipped and how == MEASURED:
        note += "; not measured: " + html.escape("; ".join(skipped))
    return _table(caption, head, body, note=note)


def _traffic_table(comps: Sequence[Comparison]) -> str:
    first = comps[0]
    rows = sorted((r for r in first.rows if r.bytes_per_token), key=lambda r: r.bytes_per_token or 0.0)
    body = []
    for r0 in rows:
        line = [r0.kernel, f"{r0.bits_per_weight:.2f} b"]
        for c in comps:
            r, base = c.row(r0.kernel), c.baseline.bytes_per_token
            ratio = f" ({r.bytes_per_token / base:.2f}x TL2)" if r.bytes_per_token and base else ""
            line.append(_mb(r.bytes_per_token) + ratio)
        body.append(line)
    return _table("Memory traffic per token: bytes loaded and stored by the kernel's instructions "
                  "(simulated; the paper's Figure 9 metric)", ["kernel", "bits/weight",
                                                               *(_shape(c) for c in comps)], body)


def _model_tables(models: Sequence[ModelEstimate]) -> str:
    decode, prefill = [], []
    for m in models:
        dk, dn = m.best_native("decode")
        pk, pn = m.best_native("prefill")
        tsar_s, tl2_s = m.prefill_seconds("tsar"), m.prefill_seconds("tl2")
        where = f"{m.platform}, {m.threads} thr"
        decode.append([m.model, where, _tps(m.decode_tsar_tps), _tps(m.decode_tl2_tps),
                       _x(m.decode_tsar_tps / m.decode_tl2_tps), f"{_tps(dn)} ({dk})",
                       _x(m.decode_tsar_tps / dn), _tps(m.reported_tps())])
        prefill.append([m.model, where, _seconds(tsar_s), _seconds(tl2_s),
                        _x(tl2_s / tsar_s), f"{_seconds(pn)} ({pk})", _x(pn / tsar_s)])
    return (_table("Decode: tokens per second (BitLinear layers only, modelled), next to the paper's "
                   "Table III; best native: of the platform's ISA, fastest over the whole model",
                   ["model", "platform, threads", "T-SAR", "TL2", "T-SAR vs TL2", "best native",
                    "T-SAR vs it", "paper (T-SAR)"], decode, names=2)
            + _table(f"Prefill: time for {PREFILL_TOKENS} tokens (BitLinear layers only, modelled)",
                     ["model", "platform, threads", "T-SAR", "TL2", "T-SAR vs TL2", "best native",
                      "T-SAR vs it"], prefill, names=2)
            + _e2e_table(models))


def _e2e_table(models: Sequence[ModelEstimate]) -> str:
    """End to end: every operator of a token, next to the paper's Table III."""
    decode, prefill = [], []
    for m in (m for m in models if m.operators):
        d = {f: m.e2e_decode_tps(f) for f in ("tsar", "tl2", "native")}
        p = {f: m.e2e_prefill_seconds(f) for f in ("tsar", "tl2", "native")}
        share = m.breakdown("decode")
        decode.append([m.model, f"{m.platform}, {m.threads} thr, ctx {m.context}", _tps(d["tsar"]),
                       _x(d["tsar"] / d["tl2"]), _x(d["tsar"] / d["native"]), _tps(m.reported_tps()),
                       _pct(share["bitlinear"] / sum(share.values()))])
        prefill.append([m.model, f"{m.platform}, {m.threads} thr", _seconds(p["tsar"]),
                        _x(p["tl2"] / p["tsar"]), _x(p["native"] / p["tsar"])])
    if not decode:
        return ""
    both = ("every operator of a token, the same operator code on both sides (the natives also "
            "quantize their activations)")
    return (_table(f"Decode end to end (modelled): {both}; attention over ctx KV-cache positions",
                   ["model", "platform, threads, context", "T-SAR tok/s", "vs TL2", "vs best native",
                    "paper (T-SAR)", "BitLinear share"], decode, names=2)
            + _table(f"Prefill end to end (modelled, {PREFILL_TOKENS} tokens): {both}",
                     ["model", "platform, threads", "T-SAR", "vs TL2", "vs best native"], prefill, names=2))


def operators_plot(models: Sequence[ModelEstimate]) -> plt.Figure:
    """Each operator's share of a decoded token (T-SAR side), per model and platform."""
    shown = [m for m in models if m.operators]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(shown) + 1.6))
    labels = [f"{m.model} / {m.platform}" for m in shown]
    ops = list(dict.fromkeys(op for m in shown for op in m.breakdown("decode")))
    left = [0.0] * len(shown)
    for i, op in enumerate(ops):
        shares = []
        for m in shown:
            parts = m.breakdown("decode")
            shares.append(100 * parts.get(op, 0.0) / sum(parts.values()))
        ax.barh(labels, shares, left=left, label=op, color=f"C{i}")
        left = [a + b for a, b in zip(left, shares, strict=True)]
    ax.set_xlabel("% of a decoded token (modelled, T-SAR side)")
    ax.set_xlim(0, 100)
    ax.invert_yaxis()
    below = -0.35 if len(shown) < 4 else -0.12
    ax.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, below))
    ax.set_title("Where a decoded token's time goes, by operator", fontsize=9)
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    return fig


LABELS = {"tsar": "T-SAR", "tl2": "TL2", "native": "best native"}


def paper_models_plot(paper: PaperModels) -> plt.Figure:
    """Prefill seconds (top) and decode tokens/s (bottom) of every model, per platform (columns):
    T-SAR, TL2 and the best native, end to end, log scale; each panel titled with the geomean
    speedup over TL2 and the paper's."""
    platforms = paper.platforms
    fig, axes = plt.subplots(2, len(platforms), figsize=(3.6 * len(platforms), 5.6), squeeze=False)
    width = 0.27
    for col, platform in enumerate(platforms):
        rows = paper.on(platform)
        x = range(len(rows))
        for phase, ax in zip(("prefill", "decode"), axes[:, col], strict=True):
            value = paper.prefill if phase == "prefill" else paper.decode
            for i, family in enumerate(FAMILIES):
                ax.bar([j + (i - 1) * width for j in x], [value(e, family) for e in rows], width,
                       label=LABELS[family], color=f"C{i}")
            ax.set_yscale("log")
            ax.set_xticks(list(x), [e.model.removeprefix("bitnet-") for e in rows], rotation=60, fontsize=7)
            ax.tick_params(axis="y", labelsize=7)
            reported = paper_speedup(platform, phase)
            ours = paper.geomean_speedup(platform, phase, "tl2")
            ax.set_title(f"{platform} {phase}: {ours:.{1 if ours >= 2 else 2}f}x TL2 (geomean)"
                         + (f"\npaper: {reported}" if reported else ""), fontsize=8)
            ax.set_ylabel(f"seconds for {PREFILL_TOKENS} tokens" if phase == "prefill" else "tokens / s",
                          fontsize=7)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def paper_models_table(paper: PaperModels) -> str:
    rows = []
    for e in paper.estimates:
        pre = {f: paper.prefill(e, f) for f in FAMILIES}
        dec = {f: paper.decode(e, f) for f in FAMILIES}
        rows.append([e.model, f"{e.platform}, {e.threads} thr", _seconds(pre["tsar"]),
                     _x(pre["tl2"] / pre["tsar"]), _x(pre["native"] / pre["tsar"]), _tps(dec["tsar"]),
                     _x(dec["tsar"] / dec["tl2"]), _x(dec["tsar"] / dec["native"])])
    summary = [[s["platform"], s["phase"], _x(s["geomean_vs_tl2"]), _x(s["geomean_vs_native"]),
                _x(s["geomean_vs_tl2_bitlinear"]), _x(s["peak_vs_tl2"]), s["paper_vs_tl2"] or "-"]
               for s in paper.summary()]
    context = paper.estimates[0].context
    return (_table("Geomean over the models of T-SAR's speedup (modelled against modelled), end to end "
                   "and over the BitLinear layers only, next to the paper's (section IV-B)",
                   ["platform", "phase", "vs TL2", "vs best native", "vs TL2, BitLinear only",
                    "peak vs TL2", "paper vs TL2"], summary, names=2)
            + _table(f"Every model end to end (modelled): prefill of {PREFILL_TOKENS} tokens, decode at "
                     f"{context} KV-cache positions", ["model", "platform, threads", "prefill T-SAR",
                                                         "vs TL2", "vs best native", "decode T-SAR tok/s",
                                                         "vs TL2", "vs best native"], rows, names=2))


def _area_table(data: ReportData) -> str:
    title = (data.area_text or "").splitlines()[0] if data.area_text else "RTL area"
    def um2(area: float) -> str:
        return f"{area:,.0f} um²" if area else "-"

    body = [[r.row, um2(r.base.area_um2), um2(r.tsar.area_um2), f"{r.overhead_pct:+.1f}%",
             um2(r.paper_base), um2(r.paper_tsar), f"{r.paper_pct:+.1f}%"] for r in data.area_rows or ()]
    return _table(f"RTL area by block (Table II): {title}; ours sky130 cells, paper TSMC 28 nm; "
                  "added area in % of the base slice",
                  ["block", "ours base", "ours T-SAR", "ours added", "paper base", "paper T-SAR",
                   "paper added"], body)


# --- raw data ------------------------------------------------------------------------------------------

def raw_tables(data: ReportData) -> dict[str, list[dict]]:
    """The page's data as flat records by file name: every comparison row (with its phase), the
    model estimates and the area rows."""
    comparisons = [{"phase": phase, **rec} for phase, groups in _phases(data)
                   for comps in groups.values() for c in comps for rec in c.records()]
    out = {"comparisons": comparisons, "models": [rec for m in data.models for rec in m.records()]}
    if data.paper:
        out["paper-models"] = data.paper.records()
    if data.area_rows:
        out["area"] = [{"block": r.row, "base_um2": r.base.area_um2, "tsar_um2": r.tsar.area_um2,
                        "added_pct": r.overhead_pct, "paper_base_um2": r.paper_base,
                        "paper_tsar_um2": r.paper_tsar, "paper_added_pct": r.paper_pct}
                       for r in data.area_rows]
    return out


def write_raw(stem: Path, data: ReportData) -> list[Path]:
    """``<stem>-<table>.csv`` for each of :func:`raw_tables`, and ``.parquet`` where pyarrow is
    installed; the paths written."""
    written = []
    for name, records in raw_tables(data).items():
        if not records:
            continue
        keys = list(dict.fromkeys(k for r in records for k in r))
        path = Path(f"{stem}-{name}.csv")
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, keys)
            writer.writeheader()
            writer.writerows(records)
        written.append(path)
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            continue
        pq.write_table(pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in records]),
                       path.with_suffix(".parquet"))
        written.append(path.with_suffix(".parquet"))
    return written


# --- the page ------------------------------------------------------------------------------------------

def _figures(data: ReportData, bandwidth_gbs: float) -> list[tuple[str, str, plt.Figure]]:
    """(file stem, title, figure) of every plot, in page order."""
    from tsar.sim.platforms import host

    plat = host(measure=False)
    ghz = plat.core.frequency_ghz
    roofs = {c.name: c.bandwidth * ghz for c in plat.caches}
    first = data.host_layers[0]
    widest = max(data.host_layers, key=lambda c: c.M * c.K)
    out = [("roofline", "Roofline (host): every kernel family's best kernel",
            roofline_plot(first, bandwidth_gbs, roofs, compute_roofs(plat))),
           ("speedup", "Decode: best T-SAR kernel over TL2 per platform", speedup_plot(data.platform_layers))]
    if data.platform_gemm:
        out.append(("prefill", f"Prefill GEMM (N = {PREFILL_TOKENS}) per platform: token-blocked kernels on "
                    "both sides", speedup_plot(data.platform_gemm, f"GEMM (prefill, N = {PREFILL_TOKENS})")))
    out += [("traffic", "Memory traffic per token (Figure 9 metric)", traffic_plot(widest)),
            ("scaling", "Thread scaling (modelled; the paper's Fig. 10)", scaling_plot(
                {p: max(c, key=lambda x: x.M * x.K) for p, c in data.platform_layers.items() if p != "host"},
                {p: max(c, key=lambda x: x.M * x.K) for p, c in (data.platform_gemm or {}).items()
                 if p != "host"}))]
    if any(m.operators for m in data.models):
        out.append(("operators", "Decode: every operator of a token (modelled)", operators_plot(data.models)))
    if data.paper:
        out.append(("paper-models", "The paper's models end to end (modelled; the paper's Fig. 8)",
                    paper_models_plot(data.paper)))
    if data.area_rows:
        out.append(("area", "RTL area (Table II)", area_plot(data.area_rows)))
    return out


def _tables(data: ReportData) -> list[tuple[str, str]]:
    """(title, HTML) of every table section, in page order."""
    out = []
    for phase, groups in _phases(data):
        parts = []
        for platform, comps in groups.items():
            hows = [MEASURED, MODELLED] if _how(platform, comps) == MEASURED else [MODELLED]
            parts += [_kernel_table(phase, platform, comps, how) for how in hows]
        out.append((f"{PHASES[phase]}: every kernel", "".join(parts)))
    traffic = next(iter(data.platform_layers.values()), None)
    if traffic:
        out.append(("Memory traffic", _traffic_table(traffic)))
    if data.models:
        out.append(("Models: decode and prefill next to the paper's Table III", _model_tables(data.models)))
    if data.paper:
        out.append(("The paper's models end to end (Fig. 8)", paper_models_table(data.paper)))
    if data.area_rows:
        out.append(("RTL area (Table II)", _area_table(data)))
    return out


def _error_source(data: ReportData) -> str:
    for comps in (data.platform_layers or {}).values():
        for c in comps:
            if c.error_source:
                return c.error_source
    return "none available (run tsar validate-model)"


STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:0 auto;padding:0 16px;line-height:1.4;"
         "color:#222}"
         "img{max-width:100%;height:auto;display:block;margin:8px 0}"
         "table{border-collapse:collapse;font-size:13px;margin:8px 0 4px;max-width:100%}"
         ".cap{font-weight:bold;font-size:13px;margin:14px 0 2px}"
         "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;white-space:nowrap}"
         "th{background:#eee;white-space:normal}.n{text-align:left}"
         "table.text td{white-space:normal;text-align:left}"
         ".answer{background:#f2f7f2;border-left:4px solid #4a8a4a;padding:6px 14px;font-size:15px}"
         ".note{font-size:12px;color:#555;margin:0 0 18px}"
         "h2{border-bottom:1px solid #ddd;padding-bottom:2px;margin-top:32px}")


def render(data: ReportData, bandwidth_gbs: float | None = None, *, repeats: int = 20,
           files: Path | None = None) -> str:
    """The HTML page; ``bandwidth_gbs`` is the roofline's DRAM roof (measured here if None).
    With ``files`` (a path stem) every plot is also written as ``<stem>-<name>.png`` and ``.svg``
    and the raw data as ``<stem>-<table>.csv`` (and ``.parquet``), linked from the page."""
    if bandwidth_gbs is None:
        from tsar.kernels import bench

        bandwidth_gbs = bench.measure_bandwidths([1])[1] / 1e9
    found = answers(data)
    error_note = ("± on modelled ratios: the model's validated errors of both kernels' families in "
                  "quadrature, " + html.escape(_error_source(data)) + "; ± on measured ratios: half the "
                  "spread of both kernels' per-round fastest calls, in quadrature")
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>T-SAR report</title>",
             f"<style>{STYLE}</style></head><body>",
             "<h1>T-SAR against native ternary kernels</h1>",
             "<h2 id='answer'>The answer</h2>",
             "<div class='answer'>" + "".join(f"<p>{line}</p>" for line in headline(found))
             + ("" if found else "<p>No comparison with both a T-SAR and a native kernel.</p>") + "</div>",
             "<p>Like for like: every ratio divides two times obtained the same way. On the modelled "
             "platforms both come from the simulated counts and the timing model; on <code>host</code> "
             "both are measured (natives natively in their AVX2 builds, T-SAR kernels through the proxy "
             "engine: their T-SAR instructions replaced by the uops the model assumes; all kernels "
             "alternating round by round). Best native: the fastest native kernel of those timed the "
             "same way (TL2 included). See docs/timing.md for the model and its validation.</p>",
             _answer_table(found), f"<p class='note'>{error_note}</p>"]
    parts.append("<h2 id='figures'>Figures</h2>")
    for stem, title, fig in _figures(data, bandwidth_gbs):
        parts.append(f"<h3>{html.escape(title)}</h3>")
        if files is not None:
            for ext in ("png", "svg"):
                fig.savefig(f"{files}-{stem}.{ext}", dpi=110, bbox_inches="tight")
        parts.append(f"<img alt='{html.escape(title)}' src='data:image/png;base64,{_png(fig)}'>")
    parts.append("<h2 id='tables'>Tables</h2>")
    for title, body in _tables(data):
        parts += [f"<h3>{html.escape(title)}</h3>", body]
    parts.append("<h2 id='data'>Raw data</h2>")
    if files is not None:
        links = ", ".join(f"<a href='{html.escape(p.name)}'>{html.escape(p.name)}</a>"
                          for p in write_raw(files, data))
        parts.append(f"<p>Every value of the tables at full precision, beside this page: {links}.</p>")
    else:
        parts.append("<p>Not written: <code>tsar report -o PAGE</code> writes the raw data as CSV "
                     "(and Parquet) beside the page.</p>")
    parts.append("<h2 id='provenance'>Provenance</h2><table class='text'>")
    parts += [f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
              for k, v in provenance(repeats, _host_times(data)).items()]
    parts.append("</table></body></html>")
    return "\n".join(parts)


def write(path: Path, data: ReportData, repeats: int = 20) -> Path:
    """The page at ``path``, its plots beside it (``<stem>-<plot>.png`` / ``.svg``) and its raw data
    (``<stem>-<table>.csv`` / ``.parquet``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data, repeats=repeats, files=path.with_suffix("")))
    return path
