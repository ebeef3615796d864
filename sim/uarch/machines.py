"""Per-microarchitecture parameters (``data/machines.toml``): widths and the port groups of
instruction classes, used where the measured tables have no port data."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from .ports import split_group


@dataclass(frozen=True)
class Machine:
    """Static description of one core microarchitecture (see ``data/machines.toml``)."""

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

    def ports(self, group: str) -> tuple[str, ...]:
        return split_group(group, self.port_prefixes)


@cache
def machines() -> dict[str, Machine]:
    text = resources.files(__package__).joinpath("data/machines.toml").read_text()
    raw = tomllib.loads(text)
    return {name: Machine(name=name, **{**fields, "port_prefixes": tuple(fields["port_prefixes"])})
            for name, fields in raw.items()}


def machine(name: str) -> Machine:
    try:
        return machines()[name]
    except KeyError:
        raise KeyError(f"unknown microarchitecture {name!r} (known: {', '.join(machines())})") from None
