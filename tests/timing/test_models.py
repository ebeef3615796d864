"""Model shapes and the paper's reported numbers."""

from __future__ import annotations

import pytest

from tsar.models import HEADLINES, MODELS, PAPER_MODELS, TABLE_III, get_model


def test_2b4t_shapes() -> None:
    m = get_model("bitnet-b1.58-2B-4T")
    shapes = {s.name: (s.m, s.k, s.n) for s in m.gemv_shapes()}
    assert shapes == {"qkv": (2560 + 2 * 640, 2560, 1), "o": (2560, 2560, 1), "gate": (6912, 2560, 1),
                      "up": (6912, 2560, 1), "down": (2560, 6912, 1)}
    assert all(s.n == 128 for s in m.gemm_shapes())


def test_gqa_models() -> None:
    llama = {s.name: (s.m, s.k) for s in get_model("llama3-8b").gemv_shapes()}
    assert llama["qkv"] == (4096 + 2 * 1024, 4096) and llama["down"] == (4096, 14336)
    falcon = {s.name: (s.m, s.k) for s in get_model("falcon3-10b").gemv_shapes()}
    assert falcon["qkv"] == (3072 + 2 * 1024, 3072) and falcon["o"] == (3072, 3072)
    assert falcon["up"] == (23040, 3072)


@pytest.mark.parametrize("name", PAPER_MODELS)
def test_bitnet_sweep_is_mha_and_sized_as_named(name: str) -> None:
    m = MODELS[name]
    qkv = m.gemv_shapes()[0]
    assert qkv.m == 3 * m.hidden and qkv.k == m.hidden
    nominal = float(name.split("-")[1].rstrip("bm")) * (1e9 if name.endswith("b") else 1e6)
    assert 0.6 * nominal < m.linear_weights < 1.25 * nominal


def test_100b_and_125m() -> None:
    big = {s.name: (s.m, s.k) for s in get_model("100b").gemv_shapes()}
    assert big["down"] == (8192, 45568)
    small = get_model("125M")
    assert (small.hidden, small.intermediate, small.layers, small.heads) == (768, 3072, 11, 12)


def test_reported_numbers() -> None:
    ws = {(r.platform, r.model): r for r in TABLE_III}
    assert ws["workstation", "llama3-8b"].tokens_per_s == 128.96
    assert ws["mobile", "falcon3-10b"].joules_per_token == 0.953
    assert HEADLINES["gemv_throughput_speedup"] == (1.1, 86.2)
    assert all(r.source for r in TABLE_III)
