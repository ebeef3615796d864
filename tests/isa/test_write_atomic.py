"""Cache entries are written atomically, also by concurrent writers of the same entry."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tsar.common.toolchain import write_atomic


def test_concurrent_writers_of_one_entry(tmp_path: Path) -> None:
    """Sweep workers simulate the same counts and store them at once: every write succeeds, the
    entry holds one writer's whole payload, and no temporary file is left behind."""
    path = tmp_path / "entry.pkl"
    payloads = [bytes([i]) * 100_000 for i in range(16)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: write_atomic(path, p), payloads * 4))
    assert path.read_bytes() in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["entry.pkl"]


def test_text_is_written_as_utf8(tmp_path: Path) -> None:
    path = tmp_path / "h.txt"
    write_atomic(path, "µ-op\n")
    assert path.read_text(encoding="utf-8") == "µ-op\n"
