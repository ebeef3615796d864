"""Functional simulator of x86-64 + AVX2 + T-SAR code.

Unicorn executes scalar code, control flow and memory; every VEX-encoded instruction (AVX/AVX2/FMA
and the T-SAR map) is intercepted and executed by a Python vector layer on a numpy register file,
T-SAR instructions through the ISA's golden semantics. See :class:`Machine`.
"""

from tsar.sim.compile import compile_c
from tsar.sim.errors import SimulationError
from tsar.sim.host_oracle import NativeError, run_native, simulate_records
from tsar.sim.memory import GuestMemory
from tsar.sim.python_engine.machine import Machine
from tsar.sim.stats import MemoryTrace, Stats
from tsar.sim.x86.vecops import supported_mnemonics

__all__ = [
    "GuestMemory", "Machine", "MemoryTrace", "NativeError", "SimulationError", "Stats", "compile_c",
    "run_native", "simulate_records", "supported_mnemonics",
]
