"""Port-group notation shared by the instruction tables and the timing model.

A port usage string is a sum of terms ``count*group``, e.g. ``1*p015+1*p23A``: one uop that may
issue to any port of group ``p015`` (ports p0, p1, p5) and one to any of ``p23A``. A group name is
a prefix (``p``, ``FP``, ``ALU``, ...) followed by one character per port, so ``FP0123`` names FP0,
FP1, FP2 and FP3. Counts are uops (or, for derived rows, port-cycles; see the README in data/).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def split_group(group: str, prefixes: Iterable[str]) -> tuple[str, ...]:
    """Ports of a group: ``split_group("p23A", ["p"]) == ("p2", "p3", "pA")``."""
    for prefix in sorted(prefixes, key=len, reverse=True):
        if group.startswith(prefix) and len(group) > len(prefix):
            return tuple(prefix + ch for ch in group[len(prefix):])
    raise ValueError(f"port group {group!r} does not start with a known prefix {list(prefixes)}")


def parse_usage(text: str) -> dict[str, float]:
    """``"1*p015+2*p5"`` -> ``{"p015": 1.0, "p5": 2.0}`` (empty text -> empty dict)."""
    usage: dict[str, float] = {}
    for term in filter(None, (t.strip() for t in text.split("+"))):
        count, _, group = term.partition("*")
        if not group:
            raise ValueError(f"bad port term {term!r} in {text!r}")
        usage[group] = usage.get(group, 0.0) + float(count)
    return usage


def format_usage(usage: Mapping[str, float]) -> str:
    """Inverse of :func:`parse_usage` (counts printed with up to 3 decimals)."""
    return "+".join(f"{_num(n)}*{g}" for g, n in usage.items() if n > 0)


def add_usage(a: Mapping[str, float], b: Mapping[str, float], scale: float = 1.0) -> dict[str, float]:
    out = dict(a)
    for group, n in b.items():
        out[group] = out.get(group, 0.0) + n * scale
    return out


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.3f}".rstrip("0").rstrip(".")
