"""`tsar compare`, model estimates and the HTML report, on small shapes."""

import re
from pathlib import Path

import pytest

from tsar.cli.main import main
from tsar.compare import compare
from tsar.estimate.model import ModelEstimate, evaluate, format_estimates
from tsar.models import ModelConfig


@pytest.fixture(scope="module")
def _module_counts(tmp_path_factory) -> Path:
    """Simulated counts shared by this module's tests (each kernel and shape simulated once)."""
    return tmp_path_factory.mktemp("counts")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch, _module_counts):
    """A cache of each test's own (no user's validation table or measurements), its simulated
    counts shared across the module, the simulator library from the usual build cache (content
    addressed; compiling it takes about 6 s)."""
    from tsar.common.toolchain import cache_dir

    (tmp_path / "build").symlink_to(cache_dir("build"), target_is_directory=True)
    (tmp_path / "counts").symlink_to(_module_counts, target_is_directory=True)
    monkeypatch.setenv("TSAR_CACHE_DIR", str(tmp_path))


def test_compare_on_a_modelled_platform() -> None:
    comp = compare(1, 256, 384, "laptop", tsar_kernels=("tsar-c2s4-op", "tsar-c4s4-op"))
    kernels = {r.kernel for r in comp.rows}
    assert {"tsar-c2s4-op", "tsar-c4s4-op", "tl2", "tl1", "i2s", "int2"} <= kernels
    assert all(r.seconds > 0 and r.bytes_per_token for r in comp.rows)
    text = comp.table()
    assert "1.00x" in text and "best T-SAR" in text
    tl2 = comp.row("tl2")
    assert tl2.bytes_per_token > comp.row("tsar-c2s4-op").bytes_per_token  # TL2 reads its tables


def test_compare_on_the_host_measures_natives(capsys: pytest.CaptureFixture) -> None:
    assert main(["compare", "--shape", "1x256x384", "--repeats", "3"]) == 0
    out = capsys.readouterr().out
    assert "measured (spread)" in out and "modelled (±error)" in out
    assert re.search(r"best T-SAR measured \(T-SAR through the proxy engine\) / measured natives: "
                     r"tsar-\S+ [0-9.]+x TL2", out)
    assert re.search(r"best T-SAR modelled / modelled: tsar-\S+ [0-9.]+x TL2", out)


def test_compare_on_the_host_is_like_for_like() -> None:
    """On the host every T-SAR kernel is measured through the proxy and modelled, the simulated
    natives measured and modelled; each speedup is a ratio of two times of the same kind."""
    from tsar.compare import MEASURED, MODELLED

    comp = compare(1, 256, 384, "host", tsar_kernels=("tsar-c2s4-op", "tsar-c4s4-op"), repeats=3)
    base = comp.baseline
    for kernel in ("tsar-c2s4-op", "tsar-c4s4-op", "tl2", "tl1", "i2s", "int2"):
        r = comp.row(kernel)
        assert r.modelled > 0 and r.measured > 0 and r.spread >= 0
        assert r.how_measured == ("proxy" if kernel.startswith("tsar-") else "native")
        assert comp.speedup(r, MEASURED) == pytest.approx(base.measured / r.measured)
        assert comp.speedup(r, MODELLED) == pytest.approx(base.modelled / r.modelled)
    dense = comp.row("dense")  # measured only: simulated and checked, not modelled, so no modelled time
    assert dense.modelled is None and comp.speedup(dense, MODELLED) is None
    rec = {r["kernel"]: r for r in comp.records()}
    assert rec["tl2"]["speedup_measured"] == pytest.approx(1.0) and rec["dense"]["modelled_s"] is None


def test_modelled_times_carry_the_validated_error(tmp_path, monkeypatch) -> None:
    """The error bars come from the last validation's table (cache) or the shipped one."""
    import json

    from tsar.validation import error_bars as model_error

    shipped = model_error.read(model_error.shipped_path())
    assert shipped.stamp["machine"] and shipped.error("tl2") is not None
    table = {"format": 1, "stamp": {"machine": "test machine", "date": "d", "commit": "c"},
             "errors": {"tl2": 0.5, "tl2/cache": 0.25, "tsar-c2s4": 0.125, "tsar-c2s4/gemm": 0.0625},
             "bias": {}}
    (tmp_path / "validation").mkdir()
    (tmp_path / "validation" / "model-error.json").write_text(json.dumps(table))
    monkeypatch.setattr("tsar.compare.natives_for", lambda isa: ("tl2", "int2"))  # (fewer simulated)
    comp = compare(16, 256, 384, "laptop", tsar_kernels=("tsar-c2s4-op-tokens",))
    assert comp.row("tl2").model_error == 0.5            # GEMM: no tl2/gemm entry, family-wide
    assert comp.row("tsar-c2s4-op-tokens").model_error == 0.0625
    assert comp.row("int2").model_error is None and "±?" in comp.table()
    assert "test machine" in comp.error_source
    assert compare(1, 256, 384, "laptop", tsar_kernels=()).row("tl2").model_error == 0.25


def test_thread_sweep_models_each_thread_count(capsys, monkeypatch) -> None:
    """The Fig. 10 view: each thread count up to the platform's, the fastest T-SAR kernel against
    TL2 and the best native, modelled against modelled; the CLI prints it as a table and JSON."""
    import json

    from tsar.estimate.layer import platform_named
    from tsar.estimate.scaling import sweep
    from tsar.sim.timing.memory import thread_counts

    assert thread_counts(16) == (1, 2, 4, 8, 16) and thread_counts(6) == (1, 2, 4, 6)
    assert thread_counts(1) == (1,)
    kernels = ("tsar-c2s4-op", "tsar-c4s4-op")
    result = sweep(1, 256, 384, "mobile", tsar_kernels=kernels, natives=("int2",))
    assert [p.threads for p in result.points] == list(thread_counts(platform_named("mobile").threads))
    assert all(p.tsar_kernel in kernels and p.native_kernel in ("tl2", "int2") for p in result.points)
    assert all(p.over_tl2 == pytest.approx(p.tl2_seconds / p.tsar_seconds) for p in result.points)
    times = [p.tsar_seconds for p in result.points]
    assert times == sorted(times, reverse=True) and times[-1] < times[0]
    monkeypatch.setattr("tsar.estimate.scaling.kernel_names", lambda isa: kernels)
    monkeypatch.setattr("tsar.estimate.scaling.natives_for", lambda isa: ("int2",))
    assert main(["compare", "--shape", "1x256x384", "--platform", "mobile", "--threads-sweep", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "thread-sweep"
    assert [p["threads"] for p in doc["points"]] == [p.threads for p in result.points]
    assert main(["compare", "--threads-sweep", "--threads", "2"]) != 0


def test_compare_bad_input(capsys: pytest.CaptureFixture) -> None:
    assert main(["compare", "--shape", "1x40x64"]) == 1
    assert "multiple of 16" in capsys.readouterr().err
    assert main(["compare", "--platform", "nowhere"]) == 1
    assert "unknown platform" in capsys.readouterr().err


def test_model_estimate_small_model(monkeypatch) -> None:
    tiny = ModelConfig("tiny", hidden=256, intermediate=512, layers=2, heads=4)
    monkeypatch.setattr("tsar.estimate.model.get_model", lambda name: tiny)
    monkeypatch.setattr("tsar.estimate.model.natives_for", lambda isa: ("tl2", "int2", "int2-avxvnni"))
    est = evaluate("tiny", "mobile", tsar_kernels=("tsar-c2s4-op", "tsar-c4s4-op"))  # (the report's)
    assert isinstance(est, ModelEstimate) and est.threads == 4  # the paper's mobile thread count
    assert len(est.per_layer) == 5 and est.decode_tsar_tps > 0 and est.decode_tl2_tps > 0
    per_token = sum(e.tsar_prefill_seconds for e in est.per_layer)
    assert est.prefill_seconds("tsar") == pytest.approx(128 * 2 * per_token)
    assert "tiny" in format_estimates([est])
    # every other operator of a token, the same on both sides but the natives' quantization
    from tsar.simulate.operators import OPERATORS

    assert [o.op for o in est.operators] == list(OPERATORS) and est.context == 1024
    assert all(o.decode_seconds > 0 and o.prefill_seconds > 0 for o in est.operators)
    assert [o.op for o in est.operators if o.natives_only] == ["quantize"]
    quantize = next(o for o in est.operators if o.op == "quantize").decode_seconds
    others = est.other_seconds("decode", "tsar")
    assert est.other_seconds("decode", "tl2") == pytest.approx(others + quantize)
    assert 1 / est.e2e_decode_tps("tsar") == pytest.approx(1 / est.decode_tsar_tps + others)
    assert 1 / est.e2e_decode_tps("tl2") == pytest.approx(1 / est.decode_tl2_tps + others + quantize)
    assert sum(est.breakdown("decode").values()) == pytest.approx(1 / est.e2e_decode_tps("tsar"))
    from dataclasses import replace

    from tsar.estimate.layer import platform_named
    from tsar.estimate.operators import operator_times

    longer = operator_times(tiny, platform_named("mobile"), est.threads, context=4096)
    attention = [next(o for o in ops if o.op == "attention").decode_seconds
                 for ops in (est.operators, longer)]
    assert attention[1] > 2 * attention[0]   # the KV cache read grows with the context
    text = format_estimates([est])
    assert "End to end" in text and "lm_head" in text
    record = est.records()[0]
    assert record["decode_tsar_e2e_tok_s"] == pytest.approx(est.e2e_decode_tps("tsar"))
    bitlinear_only = replace(est, operators=(), context=0)
    assert "End to end" not in format_estimates([bitlinear_only])
    assert "context" not in bitlinear_only.records()[0]


@pytest.fixture(scope="module")
def report(tmp_path_factory, _module_counts):
    """A small report (two layers, two platforms, a tiny model) written to a temporary directory."""
    from tsar.report import ReportData, write

    tiny = ModelConfig("tiny", hidden=256, intermediate=512, layers=2, heads=4)
    from tsar.common.toolchain import cache_dir

    cache = tmp_path_factory.mktemp("report-cache")
    (cache / "counts").symlink_to(_module_counts, target_is_directory=True)
    (cache / "build").symlink_to(cache_dir("build"), target_is_directory=True)
    from tsar.simulate.native_kernel import natives_for

    def fewer(isa):  # the TL2 and int2 builds each platform runs (every native: compare's own tests)
        return tuple(k for k in natives_for(isa) if k.split("-")[0] in ("tl2", "int2"))

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TSAR_CACHE_DIR", str(cache))
        mp.setattr("tsar.estimate.model.get_model", lambda name: tiny)
        mp.setattr("tsar.compare.natives_for", fewer)
        mp.setattr("tsar.estimate.model.natives_for", fewer)
        kernels = ("tsar-c2s4-op", "tsar-c4s4-op")
        layers = {p: [compare(1, m, k, p, tsar_kernels=kernels) for m, k in ((256, 384), (512, 256))]
                  for p in ("workstation", "mobile")}
        gemm = {p: [compare(16, 256, 384, p, tsar_kernels=("tsar-c2s4-op-tokens", "tsar-c2s4-op"))]
                for p in ("workstation", "mobile")}
        from tsar.estimate.paper_models import PaperModels

        tiny_estimate = evaluate("tiny", "mobile", tsar_kernels=kernels)
        data = ReportData(layers["workstation"], layers, [tiny_estimate], None, None, gemm,
                          PaperModels((tiny_estimate,)))
    path = write(tmp_path_factory.mktemp("report") / "r.html", data)
    return path, data


def test_report_renders_every_plot(report) -> None:
    from tsar.report import render

    path, data = report
    tmp_path = path.parent
    page = path.read_text()
    # roofline, speedup, prefill, traffic, scaling, operators, the paper's models (Fig. 8)
    assert page.count("src='data:image/png;base64,") == 7
    assert "Prefill GEMM (N = 128)" in page and "tsar-c2s4-op-tokens" in page
    assert "Table III" in page and "<td class=n>tiny</td>" in page and "<pre>" not in page  # HTML tables
    for field in ("date", "commit", "cpu", "caches", "native repeats", "seeds"):
        assert f"<th>{field}</th>" in page
    for stem in ("roofline", "speedup", "prefill", "traffic", "scaling", "operators", "paper-models"):
        for ext in ("png", "svg"):
            assert (tmp_path / f"r-{stem}.{ext}").stat().st_size > 1000
    assert render(data, bandwidth_gbs=10.0).startswith("<!doctype html>")


def test_report_opens_with_the_answer(report) -> None:
    """The page states the answer before any figure: per phase the best T-SAR kernel's ratios over
    TL2 and over the best native kernel, with error bars, in a sentence and a table."""
    path, data = report
    page = path.read_text()
    answer = page[page.index("id='answer'"):page.index("id='figures'")]
    for phase in ("Decode (GEMV, 1 token)", "Prefill (GEMM, N = 128 tokens)"):
        sentence = re.search(re.escape(phase) + r".*?</p>", answer).group(0)
        assert re.search(r"\d+\.\d\dx( to \d+\.\d\dx)? TL2", sentence), sentence
        assert re.search(r"\d+\.\d\dx( to \d+\.\d\dx)? the best native kernel", sentence), sentence
        assert "modelled / modelled" in sentence
    rows = _tables(answer)[0]
    assert rows[0] == ["platform", "timed", "layer NxMxK", "best T-SAR", "vs TL2", "best native",
                       "vs best native"]
    assert len(rows) == 1 + sum(len(comps) for comps in data.platform_layers.values())
    for row in rows[1:]:
        assert row[1] == "modelled" and row[3].startswith("tsar-")
        ratio = re.compile(r"\d+\.\d\dx ± (\d+\.\d\d|\?)")   # ?: a family never validated
        assert ratio.fullmatch(row[4]) and ratio.fullmatch(row[6])
    assert "measured on another CPU" in answer or "validate-model" in answer  # where the error bars are from


def test_report_answers_like_for_like() -> None:
    """The answer divides measured by measured on the host and modelled by modelled elsewhere; its
    error bars are half the spreads (measured) or the model errors (modelled), in quadrature."""
    from tsar.compare import MEASURED, MODELLED, Comparison, Row
    from tsar.report import ReportData, answers, headline

    rows = (Row("tsar-c2s4-op", "T-SAR", 1.0, 1e5, 2.0, model_error=0.3, measured=2.0, spread=0.2),
            Row("tl2", "native", 4.0, 3e5, 1.67, model_error=0.4, measured=8.0, spread=0.0),
            Row("int2", "native", 2.0, 2e5, 2.0, model_error=0.0, measured=3.0, spread=0.1),
            Row("dense", "native", None, None, 8.0, measured=1.0, spread=0.0))
    host = [Comparison(1, 256, 384, "host", 1, rows)]
    laptop = [Comparison(1, 256, 384, "laptop", 1, rows)]
    found = answers(ReportData(host, {"host": host, "laptop": laptop}, [], None, None))
    on_host, on_laptop = found
    assert (on_host.how, on_host.tsar, on_host.native) == (MEASURED, "tsar-c2s4-op", "dense")
    assert on_host.over_tl2 == pytest.approx(4.0) and on_host.over_native == pytest.approx(0.5)
    assert on_host.tl2_error == pytest.approx(0.1) and on_host.native_error == pytest.approx(0.1)
    assert (on_laptop.how, on_laptop.native) == (MODELLED, "int2")  # dense: no modelled time
    assert on_laptop.over_tl2 == pytest.approx(4.0) and on_laptop.over_native == pytest.approx(2.0)
    assert on_laptop.tl2_error == pytest.approx(0.5) and on_laptop.native_error == pytest.approx(0.3)
    (line,) = headline(found)
    assert "<b>4.00x TL2</b>" in line and "<b>2.00x the best native kernel</b>" in line
    assert "<b>0.50x the best native kernel</b>" in line and "measured / measured" in line


def test_report_tables_are_narrow_and_carry_units(report) -> None:
    """No table has more than 8 columns; every number of a table carries its unit (us, ms, s, x, %,
    MB, b, tok/s, um²) and none is in exponent notation."""
    from tsar.report import MAX_COLUMNS

    path, _ = report
    page = path.read_text()
    tables = _tables(page, with_names=True)
    assert len(tables) >= 8 and MAX_COLUMNS <= 8
    unit = re.compile(r"\d(?:[\d,]*)(?:\.\d+)? ?(?:us|ms|s|x|%|MB|GB/s|b|tok/s|um²)(?![\w/])")
    for rows in tables:
        assert max(len(r) for r in rows) <= MAX_COLUMNS, rows[0]
        for row in rows[1:]:
            for name, cell in row:
                assert not re.search(r"\de[-+]\d", cell), cell
                if not name and cell != "-" and "text" not in rows[0]:
                    assert unit.search(cell), f"{cell!r} has no unit ({rows[0]})"


def test_report_writes_its_raw_data_as_csv(report) -> None:
    """The raw values live beside the page (CSV, and Parquet with pyarrow), linked from it, not in it."""
    import csv

    path, data = report
    page = path.read_text()
    comparisons = path.parent / "r-comparisons.csv"
    with comparisons.open(newline="") as f:
        records = list(csv.DictReader(f))
    expected = sum(len(c.rows) for groups in (data.platform_layers, data.platform_gemm)
                   for comps in groups.values() for c in comps)
    assert len(records) == expected
    assert {r["phase"] for r in records} == {"decode", "prefill"}
    assert all(float(r["modelled_s"]) > 0 for r in records if r["modelled_s"])
    with (path.parent / "r-models.csv").open(newline="") as f:
        (model,) = list(csv.DictReader(f))
    assert model["model"] == "tiny" and float(model["decode_speedup"]) > 0
    assert "href='r-comparisons.csv'" in page and "href='r-models.csv'" in page
    with (path.parent / "r-paper-models.csv").open(newline="") as f:
        (paper,) = list(csv.DictReader(f))
    assert paper["model"] == "tiny" and float(paper["prefill_speedup_tl2"]) > 0
    assert "modelled_s" not in page and "e-0" not in page  # the raw columns stay out of the page
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return
    assert pq.read_table(comparisons.with_suffix(".parquet")).num_rows == expected
    assert "href='r-comparisons.parquet'" in page


def _tables(page: str, with_names: bool = False) -> list[list]:
    """Every table of ``page`` as rows of cell texts (header first; the first row holds the table's
    class when it has one); with ``with_names``, cells as (is a name column, text)."""
    from html.parser import HTMLParser

    class Tables(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tables: list[list] = []
            self.cell: list[str] | None = None
            self.name = False

        def handle_starttag(self, tag, attrs) -> None:
            if tag == "table":
                self.tables.append([])
                self.css = dict(attrs).get("class") or ""
            elif tag == "tr":
                self.tables[-1].append([])
            elif tag in ("td", "th"):
                self.cell, self.name = [], dict(attrs).get("class") == "n" or tag == "th"

        def handle_endtag(self, tag) -> None:
            if tag in ("td", "th") and self.cell is not None:
                text = "".join(self.cell).strip()
                self.tables[-1][-1].append((self.name, text) if with_names else text)
                self.cell = None
            elif tag == "table" and self.css and self.tables[-1]:
                self.tables[-1][0] = [*self.tables[-1][0], self.css]

        def handle_data(self, data) -> None:
            if self.cell is not None:
                self.cell.append(data)

    parser = Tables()
    parser.feed(page)
    return parser.tables


def _browser() -> str:
    import shutil

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no Chromium on this machine: the headless browser checks need one "
                    "(e.g. apt-get install chromium)")
    return browser


def test_report_in_a_headless_browser(report) -> None:
    path, _ = report
    _screenshot_is_not_blank(path, path.parent / "shot.png")


def test_report_fits_the_page_in_a_headless_browser(report, tmp_path) -> None:
    """Rendered 1000 pixels wide, no table and no plot runs past the page's right edge and the page
    does not scroll sideways (a script in a copy of the page measures; --dump-dom returns it)."""
    import json
    import subprocess

    browser = _browser()
    path, _ = report
    probe = """<script>window.addEventListener('load', function () {
      var width = document.documentElement.clientWidth, over = [];
      document.querySelectorAll('table, img').forEach(function (e) {
        var right = e.getBoundingClientRect().right;
        if (right > width + 0.5) over.push(e.tagName + ' ' + Math.round(right) + ' ' +
                                          (e.previousElementSibling || e).textContent.slice(0, 80));
      });
      var out = document.createElement('pre');
      out.id = 'layout';
      out.textContent = JSON.stringify({width: width, scroll: document.documentElement.scrollWidth,
                                        over: over, tables: document.querySelectorAll('table').length});
      document.body.appendChild(out);
    });</script>"""
    copy = path.parent / "layout-check.html"
    copy.write_text(path.read_text().replace("</body>", probe + "</body>"))
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1000,2000",
                          "--dump-dom", copy.as_uri()], check=True, capture_output=True, text=True,
                         timeout=120).stdout
    found = re.search(r"<pre id=\"layout\">(.*?)</pre>", dom)
    assert found, "the layout probe did not run"
    layout = json.loads(found.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    assert layout["tables"] >= 8 and 900 <= layout["width"] <= 1000
    assert layout["over"] == [] and layout["scroll"] <= layout["width"], layout


def _screenshot_is_not_blank(page, shot) -> None:
    """Open the page in headless Chromium (when installed) and check that the screenshot shows
    more than a blank page: plots and tables give many distinct pixel values."""
    import subprocess

    browser = _browser()
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1200,2400", page.as_uri()], check=True, capture_output=True,
                   timeout=120)
    import matplotlib.image as mpimg
    import numpy as np

    pixels = mpimg.imread(shot)
    assert pixels.shape[0] >= 2000 and pixels.shape[1] >= 1100
    assert np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0).shape[0] > 50


def test_isa_names_say_what_a_build_needs() -> None:
    """A native build's ISA label adds the flags its rows need beyond the level (trit5: VBMI)."""
    from tsar.compare import isa_name

    assert isa_name("trit5-avx512", "avx512") == "AVX-512 VNNI, VBMI"
    assert isa_name("int2-avx512", "avx512") == "AVX-512 VNNI"
    assert isa_name("trit5-avxvnni", "avxvnni") == "AVX-VNNI" and isa_name("tl2", "avx2") == "AVX2"
