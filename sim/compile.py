"""Build freestanding C kernels into shared objects with gcc, cached by content."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tsar.errors import UserError

DEFAULT_FLAGS = ("-O2", "-mavx2", "-mfma", "-fPIC", "-shared", "-nostdlib", "-fno-stack-protector",
                 "-fno-builtin", "-fcf-protection=none")


class CompileError(UserError):
    """gcc failed or is missing."""


def kernel_c_dir() -> Path:
    """``kernels/c``: the shipped C kernels and the ``tsar.h`` T-SAR header."""
    import tsar.kernels

    return Path(tsar.kernels.__file__).resolve().parent / "c"


def cache_dir() -> Path:
    """``$TSAR_CACHE_DIR`` or ``~/.cache/tsar``, subdirectory ``sim-so``."""
    root = Path(os.environ.get("TSAR_CACHE_DIR", Path.home() / ".cache" / "tsar"))
    path = root / "sim-so"
    path.mkdir(parents=True, exist_ok=True)
    return path


def compile_c(source: str | Path, flags: Sequence[str] = (), *, opt: str | None = None,
              compiler: str = "gcc") -> Path:
    """Compile ``source`` to a ``.so`` with ``DEFAULT_FLAGS`` (+ ``flags``; ``opt`` replaces
    ``-O2``); ``kernels/c`` is on the include path. Returns the cached object's path."""
    source = Path(source)
    cc = shutil.which(compiler)
    if cc is None:
        raise CompileError(f"{compiler} not found on PATH")
    args = [f for f in DEFAULT_FLAGS if not (opt and f.startswith("-O"))]
    args = ([opt] if opt else []) + args + list(flags) + [f"-I{kernel_c_dir()}"]
    digest = hashlib.sha256()
    digest.update(source.read_bytes())
    for header in sorted(kernel_c_dir().glob("*.h")):
        digest.update(header.read_bytes())
    digest.update(" ".join([cc, *args]).encode())
    out = cache_dir() / f"{source.stem}-{digest.hexdigest()[:16]}.so"
    if not out.exists():
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        proc = subprocess.run([cc, *args, "-o", str(tmp), str(source)], capture_output=True, text=True)
        if proc.returncode:
            raise CompileError(f"{compiler} failed on {source}:\n{proc.stderr.strip()}")
        tmp.replace(out)
    return out
