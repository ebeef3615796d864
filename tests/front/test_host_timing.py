"""The alternating measurement harness and the model error table (no native code needed)."""

import json

import pytest

from tsar.estimate.host import Measured, interleaved, weight_copies
from tsar.validation.error_bars import ErrorTable, family_of, read


def test_interleaved_alternates_and_takes_the_median_of_round_minima() -> None:
    log: list[str] = []

    def timer(name: str, seconds: list[float]):
        it = iter(seconds)

        def run(calls: int) -> list[float]:
            log.append(name)
            return [next(it) for _ in range(calls)]
        return run

    # each batch starts with an untimed call (value 99: dropped)
    a = timer("a", [99, 1, 1, 3, 99, 2, 2, 2, 99, 4, 4, 4])
    b = timer("b", [99, 10, 10, 99, 30, 30, 99, 20, 20])
    got = interleaved({"a": a, "b": b}, rounds=3, calls={"a": 3, "b": 2})
    assert log == ["a", "b", "b", "a", "a", "b"]  # order rotated every round
    assert got["a"] == Measured(2.0, (4.0 - 1.0) / 2.0, 3, 9, 2.0)  # round fastest 1, 2, 4
    assert got["b"].seconds == 20.0 and got["b"].spread == pytest.approx(1.0)
    c = interleaved({"c": timer("c", [99, 5, 1, 9, 99, 7, 3, 2])}, rounds=2, calls=3)["c"]
    assert c.seconds == 1.5 and c.median == 4.0  # fastest per round 1 and 2; medians 5 and 3


def test_weight_copies_exceed_the_dram_size() -> None:
    assert weight_copies(1000, None) == 1
    assert weight_copies(1000, 10_000) == 11 and weight_copies(10**9, 10) == 2


def test_error_table_lookup_and_families(tmp_path) -> None:
    t = ErrorTable({"tl2": 0.3, "tl2/DRAM": 0.5, "tsar-c4s4/gemm": 0.1, "tsar-c4s4": 0.2}, {})
    assert t.error("tl2") == 0.3 and t.error("tl2", variant="DRAM") == 0.5
    assert t.error("tsar-c4s4-ap-tokens", N=128) == 0.1 and t.error("tsar-c4s4-op") == 0.2
    assert t.error("tsar-c2s4-op") is None and t.error("dense") is None
    assert family_of("tsar-c2s4-128-op") == "tsar-c2s4-128" and family_of("i2s") == "i2s"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": 99}))
    with pytest.raises(ValueError, match=r"bad\.json: not a model error table"):
        read(bad)
