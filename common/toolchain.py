"""The project's on-disk cache and its one gcc build cache (content-addressed shared objects).

Every layer that caches (compiled kernels and probes, synthesis results, simulated counts) asks
:func:`cache_dir` for a subdirectory, and every layer that compiles C asks :func:`build_shared`, so
``$TSAR_CACHE_DIR`` moves all of it. This sits in the lowest layer because sim, rtl and kernels all
use it and may not import one another.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tsar.common.errors import UserError


class CompileError(UserError):
    """gcc failed or is missing."""


def cache_root() -> Path:
    """``$TSAR_CACHE_DIR``, else ``$XDG_CACHE_HOME/tsar``, else ``~/.cache/tsar``."""
    env = os.environ.get("TSAR_CACHE_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tsar"


def cache_dir(sub: str) -> Path:
    """Subdirectory ``sub`` of :func:`cache_root` (created)."""
    path = cache_root() / sub
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` through a uniquely named temporary file in the same directory and
    an atomic rename, so that concurrent writers of one cache entry (pool workers, threads of a
    Dask worker) never see or rename each other's partial files."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def build_shared(sources: Sequence[Path], flags: Sequence[str], *, name: str,
                 include_dirs: Sequence[Path] = (), headers: Sequence[Path] = (),
                 compiler: str = "gcc", out_dir: Path | None = None) -> Path:
    """Compile ``sources`` into one shared object, reused while nothing that goes into it changes.

    The key hashes the sources, ``headers`` (files the sources include), the compiler's path and
    the full command line. The object is ``{name}-{key}.so`` in ``out_dir`` (default
    ``cache_dir("build")``), written atomically. Raises :class:`CompileError` naming the compiler's
    first error lines.
    """
    cc = shutil.which(compiler)
    if cc is None:
        raise CompileError(f"{compiler} not found on PATH")
    args = [*flags, *(f"-I{d}" for d in include_dirs)]
    digest = hashlib.sha256()
    for path in [*sources, *sorted(headers)]:
        digest.update(Path(path).name.encode() + b"\0" + Path(path).read_bytes())
    digest.update("\0".join([cc, *args]).encode())
    out = (out_dir or cache_dir("build")) / f"{name}-{digest.hexdigest()[:16]}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        target = Path(tmp) / out.name
        cmd = [cc, *args, *map(str, sources), "-o", str(target)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise CompileError(f"{compiler} failed on {', '.join(map(str, sources))}:\n"
                               f"{proc.stderr.strip()}")
        target.replace(out)
    return out
