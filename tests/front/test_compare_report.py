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
    counts shared across the module."""
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
    dense = comp.row("dense")  # measured only: no simulated code, so no modelled time or speedup
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
    comp = compare(16, 256, 384, "laptop", tsar_kernels=("tsar-c2s4-op-tokens",))
    assert comp.row("tl2").model_error == 0.5            # GEMM: no tl2/gemm entry, family-wide
    assert comp.row("tsar-c2s4-op-tokens").model_error == 0.0625
    assert comp.row("int2").model_error is None and "±?" in comp.table()
    assert "test machine" in comp.error_source
    assert compare(1, 256, 384, "laptop", tsar_kernels=()).row("tl2").model_error == 0.25


def test_compare_bad_input(capsys: pytest.CaptureFixture) -> None:
    assert main(["compare", "--shape", "1x40x64"]) == 1
    assert "multiple of 16" in capsys.readouterr().err
    assert main(["compare", "--platform", "nowhere"]) == 1
    assert "unknown platform" in capsys.readouterr().err


def test_model_estimate_small_model(monkeypatch) -> None:
    tiny = ModelConfig("tiny", hidden=256, intermediate=512, layers=2, heads=4)
    monkeypatch.setattr("tsar.estimate.model.get_model", lambda name: tiny)
    est = evaluate("tiny", "mobile", tsar_kernels=("tsar-c2s4-op", "tsar-c4s4-ap-min"))
    assert isinstance(est, ModelEstimate) and est.threads == 4  # the paper's mobile thread count
    assert len(est.per_layer) == 5 and est.decode_tsar_tps > 0 and est.decode_tl2_tps > 0
    per_token = sum(e.tsar_prefill_seconds for e in est.per_layer)
    assert est.prefill_seconds("tsar") == pytest.approx(128 * 2 * per_token)
    assert "tiny" in format_estimates([est])


@pytest.fixture(scope="module")
def report(tmp_path_factory, _module_counts):
    """A small report (two layers, two platforms, a tiny model) written to a temporary directory."""
    from tsar.report import ReportData, write

    tiny = ModelConfig("tiny", hidden=256, intermediate=512, layers=2, heads=4)
    cache = tmp_path_factory.mktemp("report-cache")
    (cache / "counts").symlink_to(_module_counts, target_is_directory=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TSAR_CACHE_DIR", str(cache))
        mp.setattr("tsar.estimate.model.get_model", lambda name: tiny)
        kernels = ("tsar-c2s4-op", "tsar-c4s4-op")
        layers = {p: [compare(1, m, k, p, tsar_kernels=kernels) for m, k in ((256, 384), (512, 256))]
                  for p in ("workstation", "mobile")}
        gemm = {p: [compare(16, 256, 384, p, tsar_kernels=("tsar-c2s4-op-tokens", "tsar-c2s4-op"))]
                for p in ("workstation", "mobile")}
        data = ReportData(layers["workstation"], layers,
                          [evaluate("tiny", "mobile", tsar_kernels=kernels)], None, None, gemm)
    path = write(tmp_path_factory.mktemp("report") / "r.html", data)
    return path, data


def test_report_renders_every_plot(report) -> None:
    from tsar.report import render

    path, data = report
    tmp_path = path.parent
    page = path.read_text()
    assert page.count("src='data:image/png;base64,") == 5  # roofline, speedup, prefill, traffic, scaling
    assert "Prefill GEMM (N = 128)" in page and "tsar-c2s4-op-tokens" in page
    assert "Table III" in page and "<td>tiny</td>" in page and "<pre>" not in page  # HTML tables
    for field in ("date", "commit", "cpu", "caches", "native repeats", "seeds"):
        assert f"<th>{field}</th>" in page
    for stem in ("roofline", "speedup", "prefill", "traffic", "scaling"):
        for ext in ("png", "svg"):
            assert (tmp_path / f"r-{stem}.{ext}").stat().st_size > 1000
    assert render(data, bandwidth_gbs=10.0).startswith("<!doctype html>")


def test_report_in_a_headless_browser(report) -> None:
    path, _ = report
    _screenshot_is_not_blank(path, path.parent / "shot.png")


def _screenshot_is_not_blank(page, shot) -> None:
    """Open the page in headless Chromium (when installed) and check that the screenshot shows
    more than a blank page: plots and tables give many distinct pixel values."""
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no Chromium on this machine: the headless screenshot check needs one")
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1200,2400", page.as_uri()], check=True, capture_output=True,
                   timeout=120)
    import matplotlib.image as mpimg
    import numpy as np

    pixels = mpimg.imread(shot)
    assert pixels.shape[0] >= 2000 and pixels.shape[1] >= 1100
    assert np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0).shape[0] > 50
