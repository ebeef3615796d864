"""Build freestanding C kernels into shared objects with gcc (the project's one build cache,
:func:`tsar.common.toolchain.build_shared`) for the simulator to load."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tsar.common.toolchain import CompileError, build_shared
from tsar.isa.cheader import header_dir

DEFAULT_FLAGS = ("-O2", "-mavx2", "-mfma", "-fPIC", "-shared", "-nostdlib", "-fno-stack-protector",
                 "-fno-builtin", "-fcf-protection=none")

__all__ = ["DEFAULT_FLAGS", "CompileError", "compile_c"]


def compile_c(source: str | Path, flags: Sequence[str] = (), *, opt: str | None = None,
              compiler: str = "gcc", include_dirs: Sequence[str | Path] = ()) -> Path:
    """Compile ``source`` to a ``.so`` with ``DEFAULT_FLAGS`` (+ ``flags``; ``opt`` replaces
    ``-O2``). The source's directory, ``include_dirs`` and the ISA's generated ``tsar.h``
    (:func:`tsar.isa.cheader.header_dir`) are on the include path, and every header there is part
    of the cache key. Returns the cached object's path."""
    source = Path(source)
    if not source.is_file():
        raise FileNotFoundError(f"no C source {source}")
    args = [f for f in DEFAULT_FLAGS if not (opt and f.startswith("-O"))]
    args = ([opt] if opt else []) + args + list(flags)
    dirs = [source.resolve().parent, *(Path(d) for d in include_dirs), header_dir()]
    headers = [h for d in dirs for h in sorted(d.glob("*.h"))]
    return build_shared([source], args, name=source.stem, include_dirs=dirs, headers=headers,
                        compiler=compiler, out_dir=None)
