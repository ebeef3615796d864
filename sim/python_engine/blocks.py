"""Pre-decoded instructions and the blocks the Python layer executes.

Each guest address is decoded once (:mod:`tsar.isa.stream`: iced-x86, or :mod:`tsar.isa.codec`
for the T-SAR map) into an :class:`Insn` holding a pre-built closure. A :class:`Block` is a
straight run of instructions the Python layer can execute, ended by a ``jmp``/``jcc`` it follows
itself or by the first instruction it leaves to Unicorn. Runs of T-SAR instructions inside a block
execute as one batch when that is exact (:mod:`.tsar_exec`). Execution counts are kept per
block; per-instruction statistics are derived from them at the end of a run, so batching does not
change them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from types import CodeType

import iced_x86 as iced

from tsar.isa.stream import MAX_LENGTH, decode_one
from tsar.sim.errors import GuestFault
from tsar.sim.python_engine.tsar_exec import TsarOp, batch_spans, compile_batch, compile_tsar, tsar_op
from tsar.sim.x86.decode import is_vex, mnemonic
from tsar.sim.x86.evex import VEX_TABLE, compile_evex, is_evex
from tsar.sim.x86.opmask import compile_opmask, is_opmask
from tsar.sim.x86.scalar import branch_target_fn, compile_scalar
from tsar.sim.x86.state import CpuState
from tsar.sim.x86.vecexec import Compiled, Unsupported, compile_vector

SCALAR, VECTOR, TSAR = "scalar", "vector", "tsar"
MAX_BLOCK = 256


@dataclass
class Insn:
    """One decoded instruction. ``run`` is None when only Unicorn can execute it."""

    address: int
    length: int
    mnemonic: str
    cls: str
    text: str
    run: Callable[[], None] | None = None
    bytes_read: int = 0
    bytes_written: int = 0
    uops: int = 0
    branch: Callable[[], int] | None = None
    error: GuestFault | None = None
    tsar: TsarOp | None = None
    raw: bytes = b""
    """The instruction's bytes (empty where they did not decode: a fault)."""

    @property
    def next(self) -> int:
        return self.address + self.length


def _raiser(fault: GuestFault) -> Callable[[], None]:
    def run() -> None:
        raise fault
    return run


def decode_insn(st: CpuState, address: int, trace: bool = False) -> Insn:
    """Decode (:func:`tsar.isa.stream.decode_one`) and compile the instruction at ``address``.

    VEX and T-SAR instructions always get a closure: one that raises #UD when the encoding is
    invalid or outside the coverage (Unicorn must never execute them).
    """
    code = st.mem.read(address, MAX_LENGTH) if address + MAX_LENGTH <= st.mem.end else \
        st.mem.read(address, st.mem.end - address)
    insn = _compiled(st, address, code, trace)
    if insn.error is None and not insn.mnemonic.startswith("(bad"):
        insn.raw = code[:insn.length]
    return insn


def _compiled(st: CpuState, address: int, code: bytes, trace: bool) -> Insn:
    d = decode_one(code, 0, address)
    if d.is_tsar:
        inst = d.tsar
        if inst is None:
            fault = GuestFault("ud", f"invalid T-SAR encoding: {d.error}")
            return Insn(address, 1, "(bad t-sar)", TSAR, f"(bad) {code[:6].hex(' ')}", _raiser(fault),
                        error=fault)
        comp = compile_tsar(inst, d.next, st)
        return Insn(address, d.length, inst.mnemonic, TSAR, d.asm, comp.run,
                    comp.bytes_read, comp.bytes_written, inst.spec.uops, tsar=tsar_op(inst))
    ins = d.x86
    if ins is None:
        return Insn(address, 1, "(bad)", SCALAR, "(bad)")
    name, txt = mnemonic(ins), d.asm
    if is_vex(ins) or is_evex(ins):
        try:
            if is_evex(ins):
                comp = compile_evex(ins, st, trace)
            elif is_opmask(ins):
                comp = compile_opmask(ins, st, trace)
            else:
                comp = compile_vector(ins, st, trace, VEX_TABLE)
        except Unsupported:
            fault = GuestFault("ud", f"instruction '{txt}' is not supported by the vector layer")
            return Insn(address, ins.len, name, VECTOR, txt, _raiser(fault), error=fault)
        return Insn(address, ins.len, name, VECTOR, txt, comp.run, comp.bytes_read, comp.bytes_written)
    if ins.encoding != iced.EncodingKind.LEGACY:
        fault = GuestFault("ud", f"instruction '{txt}' ({_encoding_name(ins)}) is not supported")
        return Insn(address, ins.len, name, VECTOR, txt, _raiser(fault), error=fault)
    insn = Insn(address, ins.len, name, SCALAR, txt)
    insn.branch = branch_target_fn(ins, st)
    if insn.branch is None:
        comp: Compiled | None = compile_scalar(ins, st, trace)
        if comp is not None:
            insn.run, insn.bytes_read, insn.bytes_written = comp.run, comp.bytes_read, comp.bytes_written
    return insn


def _encoding_name(ins: iced.Instruction) -> str:
    return {iced.EncodingKind.EVEX: "EVEX", iced.EncodingKind.XOP: "XOP",
            iced.EncodingKind.D3NOW: "3DNow!"}.get(ins.encoding, "non-legacy encoding")


def compile_one(st: CpuState, address: int, trace: bool = False) -> Insn:
    """The instruction at ``address`` (for single-instruction use, e.g. differential tests)."""
    return decode_insn(st, address, trace)


@dataclass
class Step:
    """One call of a block's fused function: one instruction, or a batch of T-SAR instructions
    whose ``fallback`` runs them one by one (line ``i + 2`` of it calls ``insns[i]``)."""

    run: Callable[[], None]
    insns: list[Insn]
    fallback: Callable[[], None] | None = None


@dataclass
class Block:
    """Instructions ``insns`` executed in order by ``steps``. After them the next RIP is
    ``branch()`` when the last instruction is a branch, else ``exit`` (Unicorn takes over)."""

    address: int
    insns: list[Insn]
    steps: list[Step]
    branch: Callable[[], int] | None
    exit: int
    hits: int = 0
    fn: Callable[[], None] = field(default=lambda: None)

    def __post_init__(self) -> None:
        self.fn = fuse([step.run for step in self.steps])
        self.n = len(self.insns)

    def faulting_insn(self, tb) -> Insn:
        """The instruction whose closure raised, from the traceback through :attr:`fn` (and
        through a batch's fallback)."""
        step = None
        while tb is not None:
            code = tb.tb_frame.f_code
            if code is self.fn.__code__:
                step = self.steps[tb.tb_lineno - 2]
                if step.fallback is None:
                    return step.insns[0]
            elif step is not None and step.fallback is not None and code is step.fallback.__code__:
                return step.insns[tb.tb_lineno - 2]
            tb = tb.tb_next
        return step.insns[0] if step is not None else self.insns[0]


def fuse(runs: list[Callable[[], None]]) -> Callable[[], None]:
    """One Python function calling ``runs`` in order (line ``i + 2`` calls ``runs[i]``), which
    saves the per-instruction loop overhead."""
    names = {f"r{i}": run for i, run in enumerate(runs)}
    namespace: dict = {}
    exec(_fused_code(len(runs)), names, namespace)
    return namespace["block"]


@cache
def _fused_code(n: int) -> CodeType:
    """The compiled module defining :func:`fuse`'s function of ``n`` calls (the same for every
    block of ``n`` steps)."""
    body = "".join(f"    r{i}()\n" for i in range(n)) or "    pass\n"
    return compile(f"def block():\n{body}", "<block>", "exec")


def make_steps(st: CpuState, insns: list[Insn], batch: bool = True) -> list[Step]:
    """The steps executing ``insns``: one per instruction with a closure, except that spans of
    T-SAR instructions :func:`~tsar.sim.python_engine.tsar_exec.batch_spans` allows become one batch step."""
    runnable = [i for i in insns if i.run is not None]
    spans = batch_spans([i.tsar if i.error is None else None for i in runnable]) if batch else []
    steps: list[Step] = []
    pos = 0
    for start, end in spans:
        steps += [Step(i.run, [i]) for i in runnable[pos:start]]
        span = runnable[start:end]
        fallback = fuse([i.run for i in span])
        run = compile_batch([i.tsar for i in span], [i.next for i in span], st, fallback)
        steps.append(Step(run, span, fallback))
        pos = end
    steps += [Step(i.run, [i]) for i in runnable[pos:]]
    return steps


class BlockCache:
    """Blocks and instructions by address, built on first use."""

    def __init__(self, st: CpuState, trace: bool = False, python_scalar: bool = True,
                 batch_tsar: bool = True) -> None:
        self.st, self.trace, self.python_scalar = st, trace, python_scalar
        self.batch_tsar = batch_tsar
        self.insns: dict[int, Insn] = {}
        self.shelf: dict[int, dict[bytes, Insn]] = {}  # compiled for code replaced since, by bytes
        self.blocks: dict[int, Block | None] = {}
        self.generation = st.generation
        self.retired: list[Block] = []  # dropped blocks that ran in this call: their counts stay

    def _check_generation(self) -> None:
        """Drop every instruction and block compiled before the state's ``generation`` changed
        (:meth:`CpuState.widen`: their closures assumed bits 511:256 zero)."""
        if self.generation != self.st.generation:
            self.generation = self.st.generation
            self.retired += [b for b in self.blocks.values() if b is not None and b.hits]
            self.insns.clear()
            self.shelf.clear()
            self.blocks.clear()

    def insn(self, address: int) -> Insn:
        self._check_generation()
        insn = self.insns.get(address)
        if insn is None:
            insn = self._shelved(address) or decode_insn(self.st, address, self.trace)
            self.insns[address] = insn
        return insn

    def replace_code(self, start: int, old: bytes, new: bytes) -> None:
        """The code at ``start`` changes from ``old`` to ``new`` (bytes of equal length): every block
        is dropped, and every instruction overlapping the range whose bytes change is shelved (an
        instruction that did not decode is dropped: its decode may have looked further). When
        bytes at that address are the instruction's again, :meth:`insn` takes it off the shelf
        instead of compiling it again."""
        end = start + len(new)
        self.blocks.clear()
        self.retired.clear()
        for address, insn in list(self.insns.items()):
            if address + insn.length <= start or address >= end:
                continue
            lo, hi = address - start, address - start + insn.length
            if insn.raw and lo >= 0 and hi <= len(new) and old[lo:hi] == new[lo:hi]:
                continue
            del self.insns[address]
            if insn.raw:
                self.shelf.setdefault(address, {})[insn.raw] = insn

    def _shelved(self, address: int) -> Insn | None:
        """The shelved instruction whose bytes are at ``address`` now, if any."""
        for raw, insn in self.shelf.get(address, {}).items():
            if self.st.mem.read(address, len(raw)) == raw:
                return insn
        return None

    def python_executable(self, insn: Insn) -> bool:
        if insn.cls != SCALAR:
            return True
        return self.python_scalar and (insn.run is not None or insn.branch is not None)

    def counted_blocks(self) -> list[Block]:
        """Every block whose execution counts belong to the current call (live and retired)."""
        return [b for b in self.blocks.values() if b is not None] + self.retired

    def block(self, address: int) -> Block | None:
        """The block starting at ``address``, or None when its first instruction is Unicorn's."""
        self._check_generation()
        if address in self.blocks:
            return self.blocks[address]
        generation = self.generation
        insns: list[Insn] = []
        branch = None
        addr = address
        while len(insns) < MAX_BLOCK:
            try:
                insn = self.insn(addr)
            except GuestFault:
                break
            if not self.python_executable(insn):
                break
            insns.append(insn)
            addr = insn.next
            if insn.branch is not None:
                branch = insn.branch
                break
        if self.st.generation != generation:  # an instruction of it widened the state: rebuild
            return self.block(address)
        block = None
        if insns:
            block = Block(address, insns, make_steps(self.st, insns, self.batch_tsar), branch, addr)
        self.blocks[address] = block
        return block
