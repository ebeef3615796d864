"""Host measurements kept for a report run again on the same machine and code."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsar.compare import compare
from tsar.estimate import measurements

KERNELS = ("tsar-c2s4-op",)


def test_a_second_comparison_reuses_the_measurements(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(measurements, "directory", lambda: tmp_path)  # (the counts' cache is shared)
    monkeypatch.setattr("tsar.compare.natives_for", lambda isa: ("tl2", "int2"))  # (fewer simulated)
    first = compare(1, 256, 384, "host", tsar_kernels=KERNELS, repeats=3, reuse_measurements=True)
    assert first.measured and first.measured_at
    calls = []
    monkeypatch.setattr("tsar.compare._measure", lambda *a, **k: calls.append(a) or pytest.fail("measured"))
    again = compare(1, 256, 384, "host", tsar_kernels=KERNELS, repeats=3, reuse_measurements=True)
    assert not calls and again.measured_at == first.measured_at
    assert [(r.kernel, r.measured, r.spread, r.how_measured, r.isa) for r in again.rows] == [
        (r.kernel, r.measured, r.spread, r.how_measured, r.isa) for r in first.rows]
    # the modelled times on the host take the clock measured in the same rounds: the same again
    assert [r.modelled for r in again.rows] == pytest.approx([r.modelled for r in first.rows])
    assert again.skipped == first.skipped
    # other settings (repeats), or without reuse, measure afresh
    with pytest.raises(pytest.fail.Exception):
        compare(1, 256, 384, "host", tsar_kernels=KERNELS, repeats=4, reuse_measurements=True)
    with pytest.raises(pytest.fail.Exception):
        compare(1, 256, 384, "host", tsar_kernels=KERNELS, repeats=3)


def test_the_key_holds_the_machine_and_the_code(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(measurements, "directory", lambda: tmp_path)
    key = {"N": 1, "M": 256}
    taken = measurements.store(key, {"x": 1})
    assert measurements.stored(key) == ({"x": 1}, taken)
    assert measurements.stored({"N": 1, "M": 512}) is None
    monkeypatch.setattr(measurements, "source_digest", lambda: "another version of the code")
    assert measurements.stored(key) is None
    monkeypatch.undo()
    monkeypatch.setattr(measurements, "directory", lambda: tmp_path)
    monkeypatch.setattr(measurements, "machine", lambda: {"cpu": "another CPU"})
    assert measurements.stored(key) is None


def test_the_digest_covers_the_kernels_c_code() -> None:
    """A native kernel's C source changes what is measured: it is part of the digest."""
    import tsar.kernels

    native = sorted((Path(tsar.kernels.__file__).parent / "native").glob("*.c"))
    assert native and len(measurements.source_digest()) == 16
    roots = measurements.source_roots()
    assert any(native[0].is_relative_to(r) for r in roots)
