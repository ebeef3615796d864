"""Issue and control of the port: the instruction register, the base-op decode ROM (from
:data:`~tsar.rtl.ops.BASE_OPS`), the hazard check and the write-port reservation.

An instruction executes in the cycle it leaves the instruction register: an ALU operation writes
its result at the end of that cycle (latency 1), a multiplier operation enters stage M1 and is
written ``L - 1`` cycles later. The instruction waits in the register while

* a register it names (``dst``, ``src1``, ``src2``) is the destination of an operation in flight
  (read-after-write and write-after-write; no result bypass beyond the register file), or
* its write would fall in a cycle the single write port is already reserved for (``res``: bit
  ``k`` = a multiplier result is written ``k`` cycles from now).

T-SAR instructions (``TLUT``, ``TGEMV``) start when nothing is in flight and hold the register
until their sequencer finishes.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from tsar.rtl.mul import STAGES
from tsar.rtl.ops import BASE_OPS, MAX_LATENCY, MUL_LATENCIES, SUBTRACTING, AluFn
from tsar.rtl.regfile import reg_bits

FUNC_BITS = bits_for(len(BASE_OPS) - 1)


class SliceOp(enum.Enum, shape=2):
    """Instruction class: ``BASE`` (``func`` indexes :data:`~tsar.rtl.ops.BASE_OPS`), or the T-SAR
    instruction of configuration ``cfg``: ``TLUT dst_group, src2``, ``TGEMV dst, src1_group, src2``
    (``src2`` from the load-data input when ``mem``)."""

    NOP = 0
    BASE = 1
    TLUT = 2
    TGEMV = 3


def instr_layout(n_configs: int, vector_bits: int) -> data.StructLayout:
    """One decoded instruction of a ``vector_bits`` port: class, base function, configuration
    index, registers (:func:`reg_bits`), memory flag."""
    regs = reg_bits(vector_bits)
    return data.StructLayout({
        "op": SliceOp,
        "func": FUNC_BITS,
        "cfg": max(1, bits_for(max(0, n_configs - 1))),
        "dst": regs,
        "src1": regs,
        "src2": regs,
        "mem": 1,
    })


def issue_signature(n_configs: int, vector_bits: int) -> wiring.Signature:
    """Issue port, from the front end's side: ``instr`` is taken when ``valid & ready``."""
    return wiring.Signature({
        "valid": Out(1),
        "ready": In(1),
        "instr": Out(instr_layout(n_configs, vector_bits)),
    })


class Decode(wiring.Component):
    """Instruction register, decode ROM, hazard check, write-port reservation; ``isolate`` adds
    ``mul_op`` (a valid multiplier operation is in the instruction register: the enable of the
    multiplier's operand isolation, straight from the register and the decode ROM)."""

    def __init__(self, n_configs: int, vector_bits: int, isolate: bool = False):
        self.isolate = isolate
        super().__init__({
            "issue": In(issue_signature(n_configs, vector_bits)),
            "ir_valid": Out(1),
            "ir": Out(instr_layout(n_configs, vector_bits)),
            # decoded controls
            "alu_fn": Out(4),
            "esize": Out(2),
            "sub": Out(1),
            "mul_fn": Out(3),
            "mul_lat": Out(range(len(MUL_LATENCIES))),
            "go_alu": Out(1),
            "go_mul": Out(1),
            # pipeline state
            "busy": In(1 + STAGES),
            "busy_dst": In(reg_bits(vector_bits)).array(1 + STAGES),
            "tsar_done": In(1),
            "idle": Out(1),
            "done": Out(1),
            # operand isolation: a multiplier operation is in the instruction register
            **({"mul_op": Out(1)} if isolate else {}),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        ir = self.ir
        is_alu, is_mul = Signal(), Signal()
        latency = Signal(range(MAX_LATENCY + 1))
        with m.Switch(ir.func):
            for op in BASE_OPS:
                with m.Case(op.code):
                    if op.unit == "alu":
                        m.d.comb += [is_alu.eq(1), self.alu_fn.eq(op.fn), self.esize.eq(op.esize),
                                     self.sub.eq(AluFn(op.fn) in SUBTRACTING)]
                    else:
                        m.d.comb += [is_mul.eq(1), self.mul_fn.eq(op.fn),
                                     self.mul_lat.eq(MUL_LATENCIES.index(op.latency))]
                    m.d.comb += latency.eq(op.latency)
        if self.isolate:
            m.d.comb += self.mul_op.eq(self.ir_valid & (ir.op == SliceOp.BASE) & is_mul)
        res = Signal(MAX_LATENCY, name="wb_reserved")
        hazard = Signal()
        clashes = [self.busy[k] & ((self.busy_dst[k] == ir.dst) | (self.busy_dst[k] == ir.src1) |
                                   ((self.busy_dst[k] == ir.src2) & ~ir.mem))
                   for k in range(1 + STAGES)]
        m.d.comb += hazard.eq(Cat(*clashes).any())
        base = self.ir_valid & (ir.op == SliceOp.BASE)
        slot_free = ~Cat(Const(0, 1), res).bit_select(latency, 1)  # res[latency - 1]
        go = Signal()
        m.d.comb += [
            go.eq(base & ~hazard & slot_free),
            self.go_alu.eq(go & is_alu),
            self.go_mul.eq(go & is_mul),
        ]
        reserve = Signal(MAX_LATENCY)
        with m.If(self.go_mul), m.Switch(self.mul_lat):
            for i, lat in enumerate(MUL_LATENCIES):
                with m.Case(i):
                    m.d.comb += reserve.eq(1 << (lat - 2))
        m.d.sync += res.eq((res >> 1) | reserve)
        complete = Signal()
        m.d.comb += [
            complete.eq(go | (ir.op == SliceOp.NOP) | self.tsar_done),
            self.done.eq(self.ir_valid & complete),
            self.issue.ready.eq(~self.ir_valid | complete),
            self.idle.eq(~self.ir_valid & ~self.busy.any()),
        ]
        with m.If(self.issue.ready):
            m.d.sync += [self.ir_valid.eq(self.issue.valid), self.ir.eq(self.issue.instr)]
        return m


class WriteBack(wiring.Component):
    """Base write-back interface: the ALU result in its execute cycle, else the multiplier result
    written from the result pipeline (the reservation keeps them apart)."""

    def __init__(self, bits: int):
        regs = reg_bits(bits)
        super().__init__({
            "alu_en": In(1),
            "alu_dst": In(regs),
            "alu_data": In(bits),
            "pipe_en": In(1),
            "pipe_dst": In(regs),
            "pipe_data": In(bits),
            "en": Out(1),
            "addr": Out(regs),
            "data": Out(bits),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        m.d.comb += self.en.eq(self.alu_en | self.pipe_en)
        with m.If(self.alu_en):
            m.d.comb += [self.addr.eq(self.alu_dst), self.data.eq(self.alu_data)]
        with m.Else():
            m.d.comb += [self.addr.eq(self.pipe_dst), self.data.eq(self.pipe_data)]
        return m
