"""Amaranth model of one integer SIMD port, base and with the T-SAR additions: 256-bit AVX2
(16 ymm), and at the other widths of :data:`~tsar.isa.config.VECTOR_WIDTHS` (128 bits; 512 bits,
32 zmm, one full-width pass per operation as Zen 5 executes AVX-512).

* :class:`SimdSlice` (base blocks ``decode``, ``alu``, ``mul``, ``dot``, ``pipe``, ``writeback``;
  T-SAR adds ``tsar_operands``, ``tsar_trees``, ``tsar_lutbuf``, ``tsar_writeback``,
  ``tsar_sequencer``); :class:`VectorUnit` adds a three-read-port register-file model;
  :class:`SliceModel` is the instruction-level reference model of both;
* :mod:`.ops`: the base operations (AVX2 mnemonics, units, latencies);
* :mod:`.schedule`: the TLUT/TGEMV uop schedules on the base ALU words and the reduction trees,
  checked against the ISA's golden semantics by :func:`check_schedules` (:func:`tlut_cycles`:
  TLUT4x4 on 512 bits writes each register in two passes);
* :mod:`.bench`: simulation driver, random checks, measured latency and throughput;
* :mod:`.synth`, :mod:`.cells`, :mod:`.power`: Verilog, Yosys synthesis (cells, transistors, sky130
  area and NAND2-equivalents per block) and an activity-based relative power estimate.
"""

from tsar.rtl.base import SliceOp
from tsar.rtl.bench import Timing, measure_timing, measured_cycles
from tsar.rtl.ops import BASE_OPS
from tsar.rtl.reference import Instr, SliceModel
from tsar.rtl.regfile import vector_registers
from tsar.rtl.schedule import (
    ScheduleError,
    check_schedules,
    format_schedule,
    tgemv_schedule,
    tlut_cycles,
    tlut_schedule,
)
from tsar.rtl.slice import SimdSlice
from tsar.rtl.unit import VectorUnit

__all__ = ["BASE_OPS", "Instr", "ScheduleError", "SimdSlice", "SliceModel", "SliceOp", "Timing",
           "VectorUnit", "check_schedules", "format_schedule", "measure_timing", "measured_cycles",
           "tgemv_schedule", "tlut_cycles", "tlut_schedule", "vector_registers"]
