"""The paper's Fig. 8 view (tsar.estimate.paper_models), on two tiny models standing for its sweep."""

from __future__ import annotations

import math

import pytest

from tsar.cli.main import main
from tsar.estimate.paper_models import PaperModels, estimate_paper_models, geomean, paper_speedup
from tsar.models import HEADLINES, PAPER_MODELS, ModelConfig, get_model

TINY = {"bitnet-125m": ModelConfig("bitnet-125m", hidden=256, intermediate=512, layers=2, heads=4),
        "bitnet-350m": ModelConfig("bitnet-350m", hidden=256, intermediate=512, layers=3, heads=4)}
"""(The same shapes, so that their counts are simulated once; the layer counts tell them apart.)"""


@pytest.fixture
def tiny(monkeypatch):
    """Two tiny models under the names of the sweep's first two, one T-SAR kernel, two natives."""
    monkeypatch.setattr("tsar.estimate.model.get_model", TINY.__getitem__)
    monkeypatch.setattr("tsar.estimate.model.kernel_names", lambda isa: ("tsar-c2s4-op",))
    monkeypatch.setattr("tsar.estimate.model.natives_for", lambda isa: ("tl2", "int2"))
    monkeypatch.setattr("tsar.estimate.paper_models.PAPER_MODELS", tuple(TINY))


def test_every_model_on_every_platform(tiny) -> None:
    result = estimate_paper_models(["mobile", "laptop"])
    assert result.platforms == ("mobile", "laptop")
    assert [(e.model, e.platform) for e in result.estimates] == [
        (m, p) for p in ("mobile", "laptop") for m in TINY]
    assert {e.threads for e in result.on("mobile")} == {4}
    assert {e.threads for e in result.on("laptop")} == {8}
    records = result.records()
    assert len(records) == 4 and all(r["context"] == 1024 for r in records)
    for e, r in zip(result.estimates, records, strict=True):
        # end to end: every operator, the same figures as the model estimate's
        assert r["decode_tsar_tok_s"] == pytest.approx(e.e2e_decode_tps("tsar"))
        assert r["prefill_tl2_s"] == pytest.approx(e.e2e_prefill_seconds("tl2"))
        pre = {f: e.e2e_prefill_seconds(f) for f in ("tsar", "tl2")}
        assert r["prefill_speedup_tl2"] == pytest.approx(pre["tl2"] / pre["tsar"])
        assert r["decode_speedup_tl2_bitlinear"] == pytest.approx(e.decode_tsar_tps / e.decode_tl2_tps)
        # the operators the BitLinear layers share with the natives dilute the speedup
        assert r["decode_speedup_tl2"] < r["decode_speedup_tl2_bitlinear"] or r["decode_speedup_tl2"] < 1
    mobile = [r for r in records if r["platform"] == "mobile"]
    want = math.exp(sum(math.log(r["prefill_speedup_tl2"]) for r in mobile) / 2)
    assert result.geomean_speedup("mobile", "prefill", "tl2") == pytest.approx(want)
    summary = {(s["platform"], s["phase"]): s for s in result.summary()}
    assert summary["mobile", "prefill"]["geomean_vs_tl2"] == pytest.approx(want)
    paper = HEADLINES["prefill_geomean_speedup_mobile"]
    assert summary["mobile", "prefill"]["paper_vs_tl2"] == f"{paper}x geomean"
    text = result.table()
    assert "mobile, 4 threads" in text and "laptop, 8 threads" in text and "the paper: 12.4x geomean" in text


def test_the_papers_figures() -> None:
    assert paper_speedup("workstation", "prefill") == "8.8x geomean"
    assert paper_speedup("workstation", "decode") == "6.4x peak"
    assert paper_speedup("mobile", "decode") == "4.1-4.2x peak"
    assert paper_speedup("host", "decode") == ""
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert len(PAPER_MODELS) == 12 and all(get_model(m).source for m in PAPER_MODELS)


def test_the_cli_json(tiny, capsys) -> None:
    import json

    assert main(["-q", "compare", "--model", "paper", "--platform", "mobile", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "paper-models" and doc["context"] == 1024
    assert [r["model"] for r in doc["rows"]] == list(TINY)
    assert [(s["platform"], s["phase"]) for s in doc["summary"]] == [("mobile", "prefill"),
                                                                      ("mobile", "decode")]


def test_the_cli_refuses_what_does_not_apply(capsys) -> None:
    assert main(["compare", "--model", "paper", "--shape", "1x256x256"]) == 1
    assert "--model paper" in capsys.readouterr().err
    assert main(["compare", "--model", "paper", "--threads", "2"]) == 1
    assert "thread count" in capsys.readouterr().err


def test_the_report_section(tiny) -> None:
    from tsar.report import paper_models_plot, paper_models_table

    result = estimate_paper_models(["mobile"])
    fig = paper_models_plot(result)
    assert len(fig.axes) == 2 and "paper: 12.4x geomean" in fig.axes[0].get_title()
    table = paper_models_table(result)
    assert "12.4x geomean" in table and "bitnet-350m" in table


@pytest.mark.slow
def test_a_real_model_end_to_end() -> None:
    """One of the sweep's real models on the Mobile platform, every kernel it runs (3.8B's head
    dimension, 120, takes RoPE's 4-float tail)."""
    result = estimate_paper_models(["mobile"], ["bitnet-3.8b"])
    assert isinstance(result, PaperModels) and len(result.estimates) == 1
    (big,) = result.estimates
    assert big.model == "bitnet-3.8b" and big.e2e_decode_tps("tsar") > 0
    assert all(r["prefill_speedup_tl2"] > 1 for r in result.records())


def test_prefill_attention_reads_one_layers_prompt_kv() -> None:
    """Decode reads every layer's whole K/V cache per token (all of it is the footprint); a prefill's
    attention re-reads the rows its own layer just wrote (one layer's prompt K/V)."""
    from tsar.estimate.operators import operator_calls
    from tsar.models import PREFILL_TOKENS

    cfg = get_model("bitnet-7b")
    calls = [c for c in operator_calls(cfg, 1024) if c[0] == "attention"]
    (decode,) = [c for c in calls if c[2]]
    (prefill,) = [c for c in calls if c[3]]
    row = 2 * cfg.n_kv_heads * cfg.dim_head * 2  # K and V, float16
    assert decode[4] == cfg.layers * row * 1024
    assert prefill[4] == row * PREFILL_TOKENS
