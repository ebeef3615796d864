"""Timing model groundwork: loop profiles, core bound, memory (ECM/roofline) bound.

* :class:`InstructionForm`, :class:`LoopProfile` - input data (from the simulator, iced-x86 or
  T-SAR instructions, or :mod:`tsar.isa.stream` records via :mod:`tsar.sim.timing.adapters`).
* :func:`core_bound` - cycles per iteration from ports, front end and loop-carried chains.
* :class:`DataStream`, :func:`memory_time`, :func:`kernel_time`, :func:`thread_scaling` - data
  transfer time through the cache hierarchy and its combination with the core bound.
Method and assumptions: ``docs/timing.md``.
"""

from tsar.sim.timing.adapters import (
    decode_forms,
    form_from_decoded,
    form_from_iced,
    form_from_tsar,
    profile_from_forms,
    profile_from_iced,
)
from tsar.sim.timing.core import CoreBound, core_bound, dependency_bound
from tsar.sim.timing.memory import (
    DataStream,
    KernelTime,
    MemoryTime,
    kernel_time,
    memory_time,
    thread_scaling,
)
from tsar.sim.timing.ports import port_bound
from tsar.sim.timing.profile import InstructionForm, LoopEntry, LoopProfile, normalize_register

__all__ = [
    "CoreBound", "DataStream", "InstructionForm", "KernelTime", "LoopEntry", "LoopProfile",
    "MemoryTime", "core_bound", "decode_forms", "dependency_bound", "form_from_decoded", "form_from_iced",
    "form_from_tsar", "kernel_time", "memory_time", "normalize_register", "port_bound",
    "profile_from_forms", "profile_from_iced", "thread_scaling",
]
