"""Per-microarchitecture parameters (``data/cores.toml``): widths and the port groups of
instruction classes, used where the measured tables have no port data."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from tsar.sim.uarch.ports import split_group


@dataclass(frozen=True)
class CoreDescription:
    """Static description of one core microarchitecture (see ``data/cores.toml``)."""

    name: str
    title: str
    port_prefixes: tuple[str, ...]
    issue_width: int          # fused-domain uops per cycle at rename/allocation
    retire_width: int
    alu: str                  # port groups (table notation)
    mul: str
    branch: str
    load: str
    store: str
    vector: str
    load_bits: int            # widest access one load uop performs
    store_bits: int
    vector_datapath_bits: int  # native SIMD width; wider ops take several passes
    load_latency: float       # cycles, L1D load-to-use
    store_forward_latency: float | None = None
    """cycles from a vector store's data to a dependent load of the same address (store-to-load
    forwarding); None: not known, taken as ``load_latency`` (an L1 hit: optimistic)."""

    def ports(self, group: str) -> tuple[str, ...]:
        return split_group(group, self.port_prefixes)


@cache
def core_descriptions() -> dict[str, CoreDescription]:
    text = resources.files(__package__).joinpath("data/cores.toml").read_text()
    raw = tomllib.loads(text)
    return {name: CoreDescription(name=name, **{**fields, "port_prefixes": tuple(fields["port_prefixes"])})
            for name, fields in raw.items()}


def core_description(name: str) -> CoreDescription:
    try:
        return core_descriptions()[name]
    except KeyError:
        known = ", ".join(core_descriptions())
        raise KeyError(f"unknown microarchitecture {name!r} (known: {known})") from None
