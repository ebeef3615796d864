"""Optimal distribution of uops over execution ports (the port-pressure bound).

Each instruction contributes ``n`` uops that may each issue to any port of a group (e.g. 1 uop on
``{p0, p1, p5}``). With perfect scheduling the busiest port's load is minimized; that minimum is

    T* = max over port sets S of  (uops whose group lies inside S) / |S|

(Hall's condition for the bipartite uop->port assignment, i.e. the LP optimum). We evaluate it
exactly by enumerating the subsets of each connected component of the group/port graph (small:
at most ~8 ports per component on real cores), then recover one optimal assignment with a
max-flow (source -> group [demand] -> port -> sink [capacity T*]) to report per-port loads.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

MAX_COMPONENT_PORTS = 16


def port_bound(demands: Iterable[tuple[Iterable[str], float]]) -> tuple[float, dict[str, float]]:
    """(T*, per-port load) for ``demands`` = [(ports of a group, uops), ...]; units: cycles."""
    merged: dict[frozenset[str], float] = {}
    for ports, n in demands:
        key = frozenset(ports)
        if n > 0 and key:
            merged[key] = merged.get(key, 0.0) + n
    if not merged:
        return 0.0, {}
    best = 0.0
    for comp_ports, groups in _components(merged).items():
        best = max(best, _component_bound(sorted(comp_ports), groups))
    return best, _assign(merged, best)


def _components(merged: Mapping[frozenset[str], float]) -> dict[frozenset[str], dict]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for group in merged:
        first, *rest = sorted(group)
        for p in rest:
            parent[find(p)] = find(first)
    comps: dict[str, set[str]] = {}
    for group in merged:
        for p in group:
            comps.setdefault(find(p), set()).add(p)
    out: dict[frozenset[str], dict] = {}
    for ports in comps.values():
        key = frozenset(ports)
        out[key] = {g: n for g, n in merged.items() if g <= key}
    return out


def _component_bound(ports: list[str], groups: Mapping[frozenset[str], float]) -> float:
    if len(ports) > MAX_COMPONENT_PORTS:
        raise ValueError(f"port component of {len(ports)} ports is too large to enumerate")
    bit = {p: 1 << i for i, p in enumerate(ports)}
    masks = [(sum(bit[p] for p in g), n) for g, n in groups.items()]
    best = 0.0
    for s in range(1, 1 << len(ports)):
        inside = sum(n for m, n in masks if m & s == m)
        if inside:
            best = max(best, inside / s.bit_count())
    return best


def _assign(merged: Mapping[frozenset[str], float], cap: float) -> dict[str, float]:
    """Per-port loads of one optimal schedule (max-flow, Edmonds-Karp on a tiny graph)."""
    groups = list(merged)
    ports = sorted({p for g in groups for p in g})
    src, sink = "S", "T"
    g_nodes = [f"g{i}" for i in range(len(groups))]
    residual: dict[str, dict[str, float]] = {src: {}, sink: {}}
    for node in (*g_nodes, *ports):
        residual.setdefault(node, {})

    def edge(u: str, v: str, c: float) -> None:
        residual[u][v] = residual[u].get(v, 0.0) + c
        residual[v].setdefault(u, 0.0)

    limit = cap * (1 + 1e-9) + 1e-12
    for node, group in zip(g_nodes, groups, strict=True):
        edge(src, node, merged[group])
        for p in group:
            edge(node, p, float("inf"))
    for p in ports:
        edge(p, sink, limit)
    while True:
        prev = {src: src}
        queue = deque([src])
        while queue and sink not in prev:
            u = queue.popleft()
            for v, c in residual[u].items():
                if c > 1e-12 and v not in prev:
                    prev[v] = u
                    queue.append(v)
        if sink not in prev:
            break
        path, v = [], sink
        while v != src:
            path.append((prev[v], v))
            v = prev[v]
        push = min(residual[u][v] for u, v in path)
        for u, v in path:
            residual[u][v] -= push
            residual[v][u] += push
    return {p: limit - residual[p][sink] for p in ports}
