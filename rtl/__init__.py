"""Amaranth model of the 256-bit SIMD slice, base and with the T-SAR additions.

* :class:`SimdSlice` (blocks ``decode``, ``lanes``, ``trees``, ``writeback`` and, for T-SAR,
  ``tsar_operands``, ``tsar_writeback``, ``tsar_sequencer``); :class:`VectorUnit` adds a
  register-file model; :class:`SliceModel` is the instruction-level reference model of both;
* :mod:`.schedule`: the TLUT/TGEMV uop schedules on the base lanes and adder trees, checked against
  the ISA's golden semantics by :func:`check_schedules`;
* :mod:`.bench`: simulation driver, random checks, :func:`measured_cycles`;
* :mod:`.synth`, :mod:`.cells`, :mod:`.power`: Verilog, Yosys synthesis (cells, transistors, sky130
  area per block) and an activity-based relative power estimate.
"""

from .base import SliceOp
from .bench import measured_cycles
from .reference import Instr, SliceModel
from .schedule import ScheduleError, check_schedules, format_schedule, tgemv_schedule, tlut_schedule
from .slice import SimdSlice
from .unit import VectorUnit

__all__ = ["Instr", "ScheduleError", "SimdSlice", "SliceModel", "SliceOp", "VectorUnit",
           "check_schedules", "format_schedule", "measured_cycles", "tgemv_schedule", "tlut_schedule"]
