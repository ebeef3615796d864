"""Every fact declared once, and used through public names.

* No private name crosses a module boundary in the project's sources or tests: ``from tsar.x import
  _name``, ``name._attr`` where ``name`` was bound by an import from the project (a module, a class,
  a function), and a private module (``tsar.kernels.formats._common``) imported from outside its
  package. A name another module needs is public (``semantics.fast_tables``,
  ``detect.aligned_buffer``, ``rtl.bench.run_to_completion``, ``fpops.PREDICATES``, ...).
* The vector register count is :data:`tsar.isa.config.VECTOR_REGISTERS` (and the GPRs are
  :data:`tsar.isa.operands.GPR64`): the literal 16 (or 15, or the 512-byte image of 16 ymm
  registers) as a register count does not come back in the simulator modules that once spelled it.
* The copies the kernels layer must keep of front-end facts (it may not import :mod:`tsar.models`)
  equal them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = {"common": "tsar.common", "isa": "tsar.isa", "sim": "tsar.sim", "rtl": "tsar.rtl",
            "kernels": "tsar.kernels", "tsar": "tsar", "tests": "tests"}
"""Project directories and the module namespace each maps to."""

REGISTER_COUNT_MODULES = (
    "sim/host_oracle.py",
    "sim/native_engine/rewrite.py",
    "sim/native_engine/tsar_stubs.py",
    "sim/native_engine/machine.py",
    "sim/proxy_engine/machine.py",
    "sim/python_engine/ucfast.py",
    "sim/python_engine/machine.py",
    "sim/x86/vecexec.py",
    "sim/x86/state.py",
)
"""Modules that spelled the register count (vector or general-purpose) as a literal."""


def private(name: str) -> bool:
    """``_x`` and ``__x`` but not dunders nor protocol names such as ``_repr_html_``."""
    return name.startswith("_") and not name.endswith("_")


def module_name(path: Path, root: Path = REPO) -> str:
    """``sim/x86/state.py`` -> ``tsar.sim.x86.state``, ``tests/isa/test_codec.py`` ->
    ``tests.isa.test_codec``."""
    rel = path.relative_to(root).with_suffix("").parts
    parts = PACKAGES[rel[0]].split(".") + list(rel[1:])
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_files(root: Path = REPO) -> Iterator[Path]:
    for top in PACKAGES:
        yield from sorted(p for p in (root / top).rglob("*.py") if "egg-info" not in str(p))


def _package(module: str, is_package: bool) -> list[str]:
    parts = module.split(".")
    return parts if is_package else parts[:-1]


def private_crossings(source: str, module: str, is_package: bool = False) -> list[str]:
    """Every private name of another module that ``source`` (module ``module``) uses, as
    ``"line: text"``."""
    tree = ast.parse(source)
    package = _package(module, is_package)
    bound: dict[str, str] = {}  # local name -> what it names in the project
    out: list[str] = []

    def check_module(line: int, name: str) -> None:
        parts = name.split(".")
        for i, part in enumerate(parts):
            if private(part) and package[:i] != parts[:i]:
                out.append(f"{line}: private module {name} imported from {module}")
                return

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "tsar":
                    continue
                check_module(node.lineno, alias.name)
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound["tsar"] = "tsar"
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                source_module = ".".join(base + ([node.module] if node.module else []))
            else:
                source_module = node.module or ""
            if source_module.split(".")[0] != "tsar":
                continue
            check_module(node.lineno, source_module)
            for alias in node.names:
                sibling = source_module.split(".") == package and _holds_module(source_module, alias.name)
                if private(alias.name) and source_module != module and not sibling:
                    out.append(f"{node.lineno}: from {source_module} import {alias.name}")
                bound[alias.asname or alias.name] = f"{source_module}.{alias.name}"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not private(node.attr):
            continue
        chain = [node.attr]
        value = node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in bound:
            out.append(f"{node.lineno}: {bound[value.id]}.{'.'.join(reversed(chain))}")
    return out


def _holds_module(package: str, name: str) -> bool:
    """Whether ``package`` (``tsar.kernels.formats``) holds a module ``name`` (``_common``)."""
    parts = package.split(".")[1:]
    directory = REPO.joinpath(*parts) if parts and parts[0] in PACKAGES else REPO.joinpath("tsar", *parts)
    return (directory / f"{name}.py").is_file() or (directory / name / "__init__.py").is_file()


def test_no_private_name_crosses_modules() -> None:
    found = []
    for path in project_files():
        module = module_name(path)
        for hit in private_crossings(path.read_text(encoding="utf-8"), module, path.name == "__init__.py"):
            found.append(f"{path.relative_to(REPO)}:{hit}")
    assert not found, "private names used outside their module:\n" + "\n".join(found)


@pytest.mark.parametrize("source, hits", [
    ("from tsar.isa.semantics import _tables\n", 1),
    ("from tsar.isa import semantics\nsemantics._tables(1)\n", 1),
    ("import tsar.isa.config\ntsar.isa.config._REGISTRY.clear()\n", 1),
    ("import tsar.isa.config as c\nc._REGISTRY\n", 1),
    ("from tsar.isa.config import TsarConfig\nTsarConfig._code_arrays\n", 1),
    ("from tsar.kernels.formats._common import check_ternary\n", 1),
    ("from tsar.kernels.formats import _common\n", 1),
    ("from tsar.isa.semantics import fast_tables\nfast_tables.__doc__\n", 0),
    ("import numpy as np\nnp._NoValue\n", 0),
    ("from tsar.isa import semantics\nx = semantics\n", 0),
])
def test_the_private_name_scan_finds_planted_uses(source: str, hits: int) -> None:
    assert len(private_crossings(source, "tests.probe")) == hits, source


def test_a_package_may_use_its_own_private_modules() -> None:
    source = ("from tsar.kernels.formats._common import check_ternary\n"
              "from tsar.kernels.formats import _common\n")
    assert private_crossings(source, "tsar.kernels.formats.tl2") == []


def _mentions_register(node: ast.AST) -> bool:
    text = ast.unparse(node).lower()
    return "reg" in text


def _is_const(node: ast.AST, *values: int) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value in values


ARRAY_MAKERS = ("zeros", "empty", "ones", "full")


def register_count_literals(source: str) -> list[str]:
    """Places where ``source`` spells a register count (16 registers, the last one 15, or the
    512-byte image of the ymm file) as a literal, as ``"line: code"``."""
    out = []
    tree = ast.parse(source)
    sizes = {id(n.left) for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.LShift)}
    for node in ast.walk(tree):
        hit = False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            hit = any(_is_const(a, 16) for a in node.args)
        elif isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ARRAY_MAKERS:
            hit = bool(node.args) and isinstance(node.args[0], ast.Tuple) and bool(node.args[0].elts) \
                and _is_const(node.args[0].elts[0], 16)
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            hit = any(_is_const(s, 15, 16) for s in sides) and any(_mentions_register(s) for s in sides)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for const, other in ((node.left, node.right), (node.right, node.left)):
                if _is_const(const, 16) and (isinstance(other, ast.List) or _mentions_register(other)):
                    hit = True
        elif isinstance(node, ast.Assign) and _is_const(node.value, 16):
            hit = any("REG" in ast.unparse(t).upper() for t in node.targets)
        elif _is_const(node, 512):
            hit = id(node) not in sizes  # ``512 << 20`` is a memory size, not the register image
        if hit:
            out.append(f"{node.lineno}: {ast.unparse(node)}")
    return out


@pytest.mark.parametrize("path", REGISTER_COUNT_MODULES)
def test_the_register_count_is_not_spelled_out(path: str) -> None:
    found = register_count_literals((REPO / path).read_text(encoding="utf-8"))
    assert not found, f"{path}: use tsar.isa.config.VECTOR_REGISTERS (or len(GPR64)):\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "regs = range(16)\n",
    "if o.reg >= 16: pass\n",
    "ymm = np.zeros((16, 32), np.uint8)\n",
    "gpr = [0] * 16\n",
    "image = alloc(16 * REGISTER_BYTES)\n",
    "VECTOR_REGISTERS = 16\n",
    "rec[:512] = 0\n",
])
def test_the_register_count_scan_finds_planted_literals(source: str) -> None:
    assert register_count_literals(source), source


@pytest.mark.parametrize("source", [
    "low, high = y[n, :16], y[n, 16:]\n",
    "zero_high = size == 16\n",
    "chunk, offset = divmod(16 * h, rb)\n",
    "pad = b'\\xcc' * 16\n",
    "regs = range(VECTOR_REGISTERS)\n",
    "inner = in_reg & 15\n",
])
def test_the_register_count_scan_leaves_byte_counts(source: str) -> None:
    assert register_count_literals(source) == [], source


def test_gpr_names_are_declared_once() -> None:
    from tsar.isa.operands import GPR64
    from tsar.sim.x86.state import GPR_NAMES

    assert GPR_NAMES is GPR64


def test_kernels_copies_of_front_end_facts_agree() -> None:
    """kernels.bench keeps the BitNet-2B layer shapes and the prefill length (the kernels layer
    may not import tsar.models); they must stay equal to the front end's."""
    from tsar.kernels import bench
    from tsar.models import BITNET_2B_LAYERS, PREFILL_TOKENS

    assert bench.BITNET_2B_LAYERS == BITNET_2B_LAYERS
    assert bench.GEMM_N == PREFILL_TOKENS
