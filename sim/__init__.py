"""Functional simulator of x86-64 + AVX2 + T-SAR code, and the performance model.

Three execution engines behind one protocol (:class:`Machine`, created by :func:`create_machine`;
:mod:`tsar.sim.engine`): ``python`` (Unicorn runs scalar code, control flow and memory; every
VEX-encoded instruction is executed by the project's vector layer, :mod:`tsar.sim.x86`, on a numpy
register file, T-SAR through the ISA's golden semantics), ``native`` (the host runs the code, T-SAR
through rewritten stubs) and ``proxy`` (timing on silicon). :mod:`tsar.sim.host_oracle` runs single
instructions on the host CPU as the oracle of the differential tests. The performance model is in
:mod:`tsar.sim.timing`, :mod:`tsar.sim.uarch` and :mod:`tsar.sim.platforms`.
"""

from tsar.sim.compile import compile_c
from tsar.sim.engine import ENGINES, Machine, call_options, create_machine, engine_options
from tsar.sim.errors import SimulationError
from tsar.sim.host_oracle import HostOracleError, run_on_host, simulate_records
from tsar.sim.memory import GuestMemory
from tsar.sim.stats import MemoryTrace, Stats
from tsar.sim.x86.vecops import supported_mnemonics

__all__ = [
    "ENGINES", "GuestMemory", "HostOracleError", "Machine", "MemoryTrace", "SimulationError", "Stats",
    "call_options", "compile_c", "create_machine", "engine_options", "run_on_host", "simulate_records",
    "supported_mnemonics",
]
