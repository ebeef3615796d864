"""Help that matches the code: every command's ``--help`` is parsed as a user reads it, and each list
of kernels, configurations, models, platforms or engines in it equals its registry (with ``--isa``
files, the variants they register too); a text that names two or more members of a registry is a
list, and every list must be one of those checked here."""

from __future__ import annotations

import argparse
import itertools
import re

import pytest

from tsar.cli.main import build_parser


def _registries() -> dict[str, set[str]]:
    from tsar.isa.config import configs
    from tsar.kernels.registry import KERNELS
    from tsar.kernels.tsar_plan import kernel_names
    from tsar.models import MODELS
    from tsar.sim import ENGINES
    from tsar.sim.platforms import PLATFORM_NAMES

    return {"T-SAR kernels": set(kernel_names()), "configurations": {c.name for c in configs()},
            "models": set(MODELS), "platforms": set(PLATFORM_NAMES), "engines": set(ENGINES),
            "native kernels": set(KERNELS)}


def _expected() -> dict[tuple[str, str], dict[str, set[str]]]:
    """(command, entry) -> the lists it shows; entry "" is the command's description."""
    from tsar.kernels.registry import SIMULATED

    reg = _registries()
    configs = {"configurations": reg["configurations"]}
    call_engines = reg["engines"] - {"proxy"}  # the proxy engine's results are meaningless
    return {
        ("tsar", "bench-native"): {"native kernels": reg["native kernels"]},
        ("tsar", "validate-model"): {"native kernels": set(SIMULATED)},
        ("tsar run", "model"): {"models": reg["models"]},
        ("tsar run", "--kernel"): {"T-SAR kernels": reg["T-SAR kernels"]},
        ("tsar run", "--engine"): {"engines": call_engines},
        ("tsar compare", "--platform"): {"platforms": reg["platforms"]},
        ("tsar compare", "--model"): {"models": reg["models"]},
        ("tsar time", "--platform"): {"platforms": reg["platforms"]},
        ("tsar bench-native", ""): {"native kernels": reg["native kernels"]},
        ("tsar bench-native", "--kernels"): {"native kernels": reg["native kernels"]},
        ("tsar validate-model", ""): {"native kernels": set(SIMULATED)},
        ("tsar validate-model", "--kernel"): {"native kernels": set(SIMULATED)},
        ("tsar bench-sim", "--kernel"): {"T-SAR kernels": reg["T-SAR kernels"]},
        ("tsar bench-sim", "--engine"): {"engines": call_engines},  # the two it measures
        ("tsar rtl sim", "--config"): configs,
        ("tsar rtl area", "--config"): configs,
        ("tsar rtl power", "--config"): configs,
        ("tsar rtl verilog", "--config"): configs,
    }


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += _parsers(child)
    return found


_ENTRY = re.compile(r"^( {2}| {4})(\S.*)$")


def parse_help(text: str) -> dict[str, str]:
    """A formatted help page -> {entry: its text}: "" for the description, an option's or a
    positional's (or a sub-command's) first name for its help, usage and choices included."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if not line.strip())
    entries: dict[str, list[str]] = {"": []}
    key = ""
    for line in lines[start:]:
        if line and not line[0].isspace() and line.rstrip().endswith(":"):
            key = None  # a section header ("options:")
            continue
        m = _ENTRY.match(line)
        if m and key != "":
            first = m.group(2).split()[0].rstrip(",")
            key = first
            entries[key] = [m.group(2)[len(first):]]
        elif key is not None:
            entries[key].append(line)
    return {k: " ".join(" ".join(v).split()) for k, v in entries.items()}


_WORD = re.compile(r"[\w.+-]+")
_SEPARATOR = re.compile(r"^(\s*[,|/{}]\s*|\s+(or|and)\s+|\s*,\s*(or|and)\s+)$")


def _names(text: str, registry: set[str]) -> set[str]:
    return {m.group().rstrip(".") for m in _WORD.finditer(text)} & registry


def _listed(text: str, registry: set[str]) -> set[str]:
    """Members of ``registry`` written as a list: two or more with only separators between them
    (``a, b``, ``a|b``, ``{a,b}``, ``a or b``), not each in a sentence of its own."""
    words = [m for m in _WORD.finditer(text) if m.group().rstrip(".") in registry]
    found = set()
    for a, b in itertools.pairwise(words):
        if _SEPARATOR.match(text[a.end():b.start()]):
            found |= {a.group().rstrip("."), b.group().rstrip(".")}
    return found


def help_pages(monkeypatch) -> dict[str, dict[str, str]]:
    monkeypatch.setenv("COLUMNS", "100")
    return {p.prog: parse_help(p.format_help()) for p in _parsers(build_parser())}


def test_the_parser_reads_a_help_page():
    page = parse_help("usage: tsar x [-h]\n\nwhat x does,\n  wrapped\n\noptions:\n  -h, --help  show\n"
                      "  --kernel KERNEL\n                        one of a, b,\n                        c\n")
    assert page == {"": "what x does, wrapped", "-h": ", --help show", "--kernel": "KERNEL one of a, b, c"}


def test_every_list_in_help_equals_its_registry(monkeypatch):
    registries, expected = _registries(), _expected()
    pages = help_pages(monkeypatch)
    seen = set()
    for prog, page in pages.items():
        for entry, text in page.items():
            want = expected.get((prog, entry), {})
            for name, members in registries.items():
                found = _names(text, members)
                if name in want:
                    assert found == want[name], f"{prog} {entry or '(description)'}: {name} " \
                        f"missing {sorted(want[name] - found)}, extra {sorted(found - want[name])}"
                    seen.add((prog, entry))
                else:
                    listed = _listed(text, members)
                    assert not listed, (f"{prog} {entry or '(description)'} lists {name} {sorted(listed)}: "
                                        "derive it from the registry and add it here")
    assert seen == set(expected)  # every expected list was found where it belongs


def test_help_lists_follow_registered_variants(monkeypatch, tmp_path):
    """Lists are built when the parser is, after --isa files are registered: their variants show."""
    from tsar.cli.main import load_isa_files
    from tsar.isa.config import unregister_config

    spec = tmp_path / "v.toml"
    spec.write_text('[[config]]\nname = "c2s4-help"\nc = 2\ns = 4\nacc_bits = 32\n')
    added = load_isa_files([str(spec)])
    try:
        pages = help_pages(monkeypatch)
        assert "tsar-c2s4-help-op" in pages["tsar run"]["--kernel"]
        assert "c2s4-help" in pages["tsar rtl sim"]["--config"]
        test_every_list_in_help_equals_its_registry(monkeypatch)
    finally:
        for cfg in added:
            unregister_config(cfg.name)


def test_names_are_not_broken_at_hyphens(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    text = next(p for p in _parsers(build_parser()) if p.prog == "tsar run").format_help()
    for line in text.splitlines():
        assert not re.search(r"tsar-\S*-$", line.strip()), line


@pytest.mark.parametrize("prog", ["tsar run", "tsar bench-native", "tsar compare"])
def test_old_hard_coded_lists_are_gone(monkeypatch, prog):
    page = " ".join(help_pages(monkeypatch)[prog].values())
    assert "<c2s4|c4s4>" not in page and "I2_S, dense int8" not in page and "e.g. bitnet" not in page


def test_a_hard_coded_list_is_caught():
    reg = _registries()
    assert _listed("gemv/gemm: tsar-<c2s4|c4s4>-<ap-min|ap-max|op>, or auto", reg["configurations"]) == {
        "c2s4", "c4s4"}
    assert _listed("a whole model (e.g. bitnet-b1.58-2b-4t or 2b-4t, llama3-8b, falcon3-10b)",
                   reg["models"]) == {"llama3-8b", "falcon3-10b"}
    assert not _listed("the host CPU runs the native code; the proxy engine times it", reg["engines"])
