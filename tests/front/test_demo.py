"""`tsar demo` runs end to end (on a small layer here; the README runs the BitNet-2B default)."""

import pytest

from tsar.cli.main import main


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """An empty cache, as a new user's, but the simulator library from the usual build cache
    (content addressed; compiling it takes about 6 s)."""
    from tsar.common.toolchain import cache_dir

    (tmp_path / "build").symlink_to(cache_dir("build"), target_is_directory=True)
    monkeypatch.setenv("TSAR_CACHE_DIR", str(tmp_path))


def test_demo_small_layer(capsys: pytest.CaptureFixture) -> None:
    assert main(["demo", "--shape", "1x64x256", "--repeats", "3"]) == 0
    out = capsys.readouterr().out
    for step in range(1, 6):
        assert f"[{step}/5]" in out
    assert out.count("bit-exact") == 2
    assert "demo passed" in out
    for platform in ("host", "workstation", "laptop", "mobile"):
        assert platform in out
    assert "measured (spread)" in out and "modelled (±error)" in out
    assert "best T-SAR measured (T-SAR through the proxy engine) / measured natives" in out
    assert "best T-SAR modelled / modelled" in out
