"""What the build caches of the RTL (synthesis, Verilator) hash: the design without its source
locations."""

from __future__ import annotations

import re

_SRC_ATTR = re.compile(r'^\s*attribute \\src "[^"]*"\n|\(\* src = "[^"]*" \*\)', re.M)


def design_key(text: str) -> str:
    """``text`` (RTLIL or Verilog from Amaranth) without its ``src`` attributes (source file and
    line of each signal, which Amaranth records): a cached build stays valid when only the
    Python source of the design moves."""
    return _SRC_ATTR.sub("", text)


__all__ = ["design_key"]
