"""The README's measured figures are quoted from docs/figures.json, which `tsar figures` writes."""

import json
from pathlib import Path

import pytest

from tsar.cli.figures import (
    Figure,
    Figures,
    cpu_model,
    machine_line,
    markdown,
    parse_table,
    read,
    readme_block,
    rewrite_readme,
)
from tsar.cli.main import main

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
FIGURES = REPO / "docs" / "figures.json"


def test_the_readme_quotes_only_figures_the_file_holds() -> None:
    """Every row of the README's measured table is a figure of docs/figures.json, word for word,
    and every figure of the file is in the table; the line above it names the file's machine."""
    figs = read(FIGURES)
    _, block, _ = readme_block(README.read_text())
    quoted = parse_table(block)
    held = [(f.what, f.value) for f in figs.figures]
    assert quoted, "the README's measured table is empty"
    missing = [row for row in quoted if row not in held]
    assert not missing, f"the README quotes figures docs/figures.json does not hold: {missing}"
    assert quoted == held, "the README's table is not the file's (run tsar figures --readme README.md)"
    assert block.splitlines()[0] == machine_line(figs)


def test_the_figures_file_is_stamped() -> None:
    figs = read(FIGURES)
    for key in ("cpu", "cores", "simd", "date", "commit", "command"):
        assert figs.stamp.get(key) not in (None, ""), key
    assert len({f.id for f in figs.figures}) == len(figs.figures)
    assert all(f.what and f.value for f in figs.figures)


def test_a_quote_the_file_does_not_hold_is_caught(tmp_path) -> None:
    """parse_table reads back what markdown writes (pipes escaped); an edited value reads as a
    different figure."""
    figs = Figures({"cpu": "a CPU", "cores": 2, "simd": "avx2", "date": "d", "commit": "c"},
                   [Figure("x", "g", "speed | one thread", "1.5 M simulated instructions/s"),
                    Figure("y", "g", "area", "base 1 um^2")])
    block = markdown(figs)
    assert parse_table(block) == [(f.what, f.value) for f in figs.figures]
    edited = block.replace("1.5 M", "2.5 M")
    assert ("speed | one thread", "2.5 M simulated instructions/s") in parse_table(edited)
    assert parse_table(edited) != [(f.what, f.value) for f in figs.figures]


def test_tsar_figures_writes_the_file_and_the_readme_table(tmp_path, capsys) -> None:
    """One cheap group measured into a file, then a README copy's table rewritten from it."""
    from tsar.cli.figures import BEGIN, END

    out = tmp_path / "figures.json"
    assert main(["-q", "figures", "--only", "model-error", "-o", str(out), "--note", "a test"]) == 0
    doc = json.loads(out.read_text())
    assert doc["format"] == 1 and doc["stamp"]["cpu"] == cpu_model() and doc["stamp"]["note"] == "a test"
    (fig,) = doc["figures"]
    assert fig["id"] == "model-error" and fig["value"].startswith("MAPE ")
    assert "| what | figure |" in capsys.readouterr().out
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n\n{BEGIN}\nold table\n{END}\n\nrest\n")
    assert main(["-q", "figures", "--no-measure", "-o", str(out), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("intro\n\n" + BEGIN + "\n") and text.endswith(END + "\n\nrest\n")
    assert "old table" not in text and fig["value"] in text
    rewrite_readme(readme, read(out))
    assert readme.read_text() == text  # idempotent
    assert main(["figures", "--only", "nothing", "-o", str(out)]) == 1
    assert "unknown figure group" in capsys.readouterr().err
    readme.write_text("no markers\n")
    assert main(["figures", "--no-measure", "-o", str(out), "--readme", str(readme)]) == 1


@pytest.mark.parametrize("machine, other", [(None, False), ("AMD EPYC (zen4), 2 core(s) visible", True),
                                            ("test machine", True)])
def test_model_error_bars_say_when_another_cpu_measured_them(machine, other) -> None:
    """ErrorTable.describe says next to the error bars' source that they were measured on another
    CPU when the stamp's CPU model is not this host's."""
    from tsar.validation.error_bars import ErrorTable

    host = cpu_model()
    stamp = {"machine": machine or f"{host} (zen4), 2 core(s) visible", "date": "d", "commit": "c"}
    table = ErrorTable({"tl2": 0.1}, {}, stamp, "model-error.json")
    assert table.other_cpu() is other
    text = table.describe()
    assert stamp["machine"] in text
    assert ("measured on another CPU than this host's " + host in text) is other


def test_measuring_some_groups_keeps_the_others_with_their_stamps() -> None:
    """``tsar figures --only G``: G's figures replace the file's, the others stay, and the machine
    line says where and when those were measured."""
    from tsar.cli.figures import Figure, Figures, machine_line, merged

    def stamp(date: str, commit: str) -> dict:
        return {"cpu": "CPU A", "cores": 2, "simd": "avx2", "date": date, "commit": commit,
                "command": "tsar figures"}

    old = Figures(stamp("2026-01-01", "aaa"), [Figure("s", "sim", "sim speed", "1"),
                                               Figure("c", "compare", "speedup", "2x")])
    new = Figures(stamp("2026-02-02", "bbb"), [Figure("c", "compare", "speedup", "3x")])
    figs = merged(old, new)
    assert [(f.id, f.value) for f in figs.figures] == [("s", "1"), ("c", "3x")]
    assert figs.stamp["earlier"] == {"sim": {"cpu": "CPU A", "date": "2026-01-01", "commit": "aaa"}}
    line = machine_line(figs)
    assert "commit bbb" in line and "The sim figures are from an earlier run: 2026-01-01, commit aaa." in line
    again = merged(figs, Figures(stamp("2026-03-03", "ccc"), [Figure("s", "sim", "sim speed", "4")]))
    assert again.stamp["earlier"] == {"compare": {"cpu": "CPU A", "date": "2026-02-02", "commit": "bbb"}}


def test_the_default_file_is_the_checkouts() -> None:
    from tsar.cli.figures import DEFAULT_PATH

    assert DEFAULT_PATH == FIGURES
