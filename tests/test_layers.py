"""The import contract of DESIGN.md section 2: ``common`` depends on nothing of the project, isa
only on common; sim, rtl and kernels only on isa and common; the front end (``tsar``) on everything;
inside the front end, CLI commands never import each other and the library never imports the CLI.

Every import counts: statements inside functions and ``TYPE_CHECKING`` blocks, relative imports,
``importlib.import_module("...")`` and ``__import__("...")`` with a literal name, and bare top-level
names of the project's directories (``from kernels import registry``, ``import sim.timing``), which
only resolve when run from the repository root and bypass the ``tsar.`` namespace.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYER_DIRS = {"common": "common", "isa": "isa", "sim": "sim", "rtl": "rtl", "kernels": "kernels",
              "front": "tsar"}
ALLOWED = {
    "common": {"common"},
    "isa": {"common", "isa"},
    "sim": {"common", "isa", "sim"},
    "rtl": {"common", "isa", "rtl"},
    "kernels": {"common", "isa", "kernels"},
    "front": {"common", "isa", "sim", "rtl", "kernels", "front"},
}
BARE_TOP_LEVEL = {"common", "isa", "sim", "rtl", "kernels"}
"""Directory names that are packages only inside the ``tsar`` namespace."""


def layer_of_module(name: str) -> str | None:
    """``tsar.sim.timing.core`` -> ``"sim"``; ``tsar.compare`` -> ``"front"``; bare ``sim.x`` ->
    ``"bare"``; modules outside the project None."""
    parts = name.split(".")
    if parts[0] in BARE_TOP_LEVEL:
        return "bare"
    if parts[0] != "tsar":
        return None
    if len(parts) > 1 and parts[1] in LAYER_DIRS and parts[1] != "front":
        return parts[1]
    return "front"


def package_of(path: Path, root: Path, layer: str) -> list[str]:
    rel = path.relative_to(root / LAYER_DIRS[layer]).with_suffix("").parts
    base = ["tsar"] if layer == "front" else ["tsar", layer]
    return (base + list(rel))[:-1]  # the package holding the module (``__init__`` or not)


def _literal_import(node: ast.Call) -> str | None:
    """The module name of ``importlib.import_module("x")`` / ``import_module("x")`` /
    ``__import__("x")`` with a string literal, else None."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value).rstrip(".")  # f"tsar.cli.commands.{name}" -> its package
    return None


def imported_modules(path: Path, layer: str, root: Path = REPO) -> list[tuple[int, str]]:
    """Absolute module names of every import in ``path`` (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    pkg = package_of(path, root, layer)
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
            out += [(node.lineno, f"{name}.{alias.name}") for alias in node.names
                    if (name == "tsar" or name.startswith("tsar.") or name.split(".")[0] in BARE_TOP_LEVEL)
                    and alias.name != "*"]
        elif isinstance(node, ast.Call):
            name = _literal_import(node)
            if name:
                out.append((node.lineno, name))
    return out


def layer_files(root: Path = REPO) -> list[tuple[str, Path]]:
    return [(layer, p) for layer, d in LAYER_DIRS.items() for p in sorted((root / d).rglob("*.py"))]


def violations(root: Path = REPO) -> list[str]:
    """Every import that breaks the contract, as ``path:line: what``."""
    bad = []
    for layer, path in layer_files(root):
        rel = path.relative_to(root)
        in_cli = rel.parts[:2] == ("tsar", "cli") or rel == Path("tsar/__main__.py")
        command = rel.parts[:3] == ("tsar", "cli", "commands") and path.stem != "__init__"
        for line, module in imported_modules(path, layer, root):
            target = layer_of_module(module)
            if target is None:
                continue
            if target == "bare":
                bad.append(f"{rel}:{line}: imports the bare top-level name {module} (use tsar.{module})")
            elif target not in ALLOWED[layer]:
                bad.append(f"{rel}:{line}: {layer} imports {module} ({target})")
            elif layer == "front" and module.startswith("tsar.cli") and not in_cli and module != "tsar.cli":
                bad.append(f"{rel}:{line}: the library imports the CLI ({module})")
            elif command and module.startswith("tsar.cli.commands.") and \
                    module.split(".")[3] != path.stem:
                bad.append(f"{rel}:{line}: a command imports another command ({module})")
    return bad


def test_every_layer_has_modules() -> None:
    layers = {layer for layer, _ in layer_files()}
    assert layers == set(LAYER_DIRS)


def test_no_upward_or_sideways_import() -> None:
    bad = violations()
    assert not bad, "layering violations:\n" + "\n".join(bad)


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the layer directories to plant probes in (the source tree is never written)."""
    root = tmp_path_factory.mktemp("layers")
    for d in LAYER_DIRS.values():
        shutil.copytree(REPO / d, root / d, ignore=shutil.ignore_patterns("__pycache__", "data"))
    return root


@pytest.mark.parametrize("where, source, expected", [
    ("sim/_probe.py", "from tsar.compare import x\n", "sim imports tsar.compare"),
    ("sim/x86/_probe.py", "from tsar.rtl.bench import x\n", "sim imports tsar.rtl.bench"),
    ("rtl/_probe.py", "import tsar.kernels.baselines\n", "rtl imports tsar.kernels.baselines"),
    ("isa/_probe.py", "def f():\n    import tsar.sim.timing\n", "isa imports tsar.sim.timing"),
    ("common/_probe.py", "from tsar.isa import config\n", "common imports tsar.isa"),
    ("kernels/_probe.py", "from kernels import registry\n", "bare top-level name kernels"),
    ("sim/_probe.py", "import sim.timing\n", "bare top-level name sim.timing"),
    ("isa/_probe.py", "import importlib\nimportlib.import_module('tsar.rtl.synth')\n",
     "isa imports tsar.rtl.synth"),
    ("kernels/_probe.py", "from importlib import import_module\nimport_module(f'tsar.sim.{x}')\n",
     "kernels imports tsar.sim"),
    ("rtl/_probe.py", "__import__('tsar.compare')\n", "rtl imports tsar.compare"),
    ("sim/python_engine/_probe.py", "from ..proxy_engine import x\nfrom ...rtl import y\n",
     "sim imports tsar.rtl"),
    ("tsar/_probe.py", "from tsar.cli.shapes import parse_shape\n", "the library imports the CLI"),
    ("tsar/cli/commands/_probe.py", "from tsar.cli.commands.run import x\n",
     "a command imports another command"),
    ("tsar/cli/commands/_probe.py", "from . import compare\n", "a command imports another command"),
])
def test_checker_catches_violations(tree_copy: Path, where: str, source: str, expected: str) -> None:
    probe = tree_copy / where
    probe.write_text(source)
    try:
        found = [v for v in violations(tree_copy) if v.startswith(where)]
    finally:
        probe.unlink()
    assert any(expected in v for v in found), found


def test_checker_allows_the_contract(tree_copy: Path) -> None:
    probe = tree_copy / "sim/_probe.py"
    probe.write_text("from tsar.isa import config\nfrom tsar.common.errors import UserError\n"
                     "from .x86 import state\nimport importlib\nimportlib.import_module(name)\n")
    try:
        assert not [v for v in violations(tree_copy) if v.startswith("sim/_probe.py")]
    finally:
        probe.unlink()


def module_name(layer: str, path: Path, root: Path = REPO) -> str:
    """``sim/x86/state.py`` -> ``tsar.sim.x86.state``; a package's ``__init__`` -> the package."""
    parts = ["tsar"] + ([] if layer == "front" else [layer]) + \
        list(path.relative_to(root / LAYER_DIRS[layer]).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycles(root: Path = REPO) -> list[list[str]]:
    """Strongly connected groups of more than one module in the graph of every import (a package
    importing its own submodules, as ``__init__`` re-exports do, is not counted)."""
    files = layer_files(root)
    known = {module_name(layer, p, root) for layer, p in files}
    graph: dict[str, set[str]] = {}
    for layer, path in files:
        me = module_name(layer, path, root)
        deps = graph.setdefault(me, set())
        for _, target in imported_modules(path, layer, root):
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != me and not me.startswith(target + ".") \
                    and not target.startswith(me + "."):
                deps.add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycles() -> None:
    assert not import_cycles(), import_cycles()


def test_cycle_check_catches_a_cycle(tree_copy: Path) -> None:
    a, b = tree_copy / "tsar/_probe_a.py", tree_copy / "tsar/_probe_b.py"
    a.write_text("def f():\n    from tsar._probe_b import g\n")
    b.write_text("from tsar import _probe_a\n")
    try:
        assert ["tsar._probe_a", "tsar._probe_b"] in import_cycles(tree_copy)
    finally:
        a.unlink()
        b.unlink()
