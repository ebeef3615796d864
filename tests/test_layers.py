"""The import contract of DESIGN.md section 2: isa depends on nothing of the project; sim, rtl and
kernels only on isa; the front end (``tsar``) on everything. Every import statement counts, the
ones inside functions and ``TYPE_CHECKING`` blocks included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYER_DIRS = {"isa": "isa", "sim": "sim", "rtl": "rtl", "kernels": "kernels", "front": "tsar"}
ALLOWED = {
    "isa": {"isa"},
    "sim": {"isa", "sim"},
    "rtl": {"isa", "rtl"},
    "kernels": {"isa", "kernels"},
    "front": {"isa", "sim", "rtl", "kernels", "front"},
}


def layer_of_module(name: str) -> str | None:
    """``tsar.sim.timing.core`` -> ``"sim"``; ``tsar.compare`` -> ``"front"``; others None."""
    parts = name.split(".")
    if parts[0] != "tsar":
        return None
    if len(parts) > 1 and parts[1] in ("isa", "sim", "rtl", "kernels"):
        return parts[1]
    return "front"


def package_of(path: Path, layer: str) -> list[str]:
    rel = path.relative_to(REPO / LAYER_DIRS[layer]).with_suffix("").parts
    root = ["tsar"] if layer == "front" else ["tsar", layer]
    return (root + list(rel))[:-1]  # the package holding the module (``__init__`` or not)


def imported_modules(path: Path, layer: str) -> list[tuple[int, str]]:
    """Absolute module names of every import in ``path`` (relative imports resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = package_of(path, layer)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[:len(pkg) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((node.lineno, name))
            if name in ("tsar", "tsar.sim", "tsar.rtl", "tsar.kernels", "tsar.isa"):
                out += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
    return out


def layer_files() -> list[tuple[str, Path]]:
    return [(layer, p) for layer, d in LAYER_DIRS.items() for p in sorted((REPO / d).rglob("*.py"))]


def test_every_layer_has_modules() -> None:
    layers = {layer for layer, _ in layer_files()}
    assert layers == set(LAYER_DIRS)


def test_no_upward_or_sideways_import() -> None:
    bad = []
    for layer, path in layer_files():
        for line, module in imported_modules(path, layer):
            target = layer_of_module(module)
            if target is None:
                continue
            if module in ("tsar",) and layer != "front":
                bad.append(f"{path.relative_to(REPO)}:{line}: imports the front end ({module})")
            elif target not in ALLOWED[layer]:
                bad.append(f"{path.relative_to(REPO)}:{line}: {layer} imports {module} ({target})")
    assert not bad, "layering violations:\n" + "\n".join(bad)


@pytest.mark.parametrize("source, layer, expected", [
    ("from tsar.compare import x\n", "sim", "front"),
    ("from tsar.rtl.bench import x\n", "sim", "rtl"),
    ("import tsar.kernels.baselines\n", "rtl", "kernels"),
])
def test_checker_catches_violations(tmp_path: Path, source: str, layer: str, expected: str) -> None:
    path = REPO / LAYER_DIRS[layer] / "_layer_probe.py"
    try:
        path.write_text(source)
        targets = {layer_of_module(m) for _, m in imported_modules(path, layer)}
    finally:
        path.unlink()
    assert expected in targets and expected not in ALLOWED[layer]
