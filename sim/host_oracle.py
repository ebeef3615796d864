"""Host-CPU oracle: run one instruction natively on batches of register and memory states.

A small harness (:mod:`tsar.sim.vector_spill`'s register image at the record's start)
loops over records; for each it loads the vector registers, the opmask registers, nine GPRs and the
arithmetic flags from the record, points ``rdx`` at the record's memory window, runs the
instruction under test and stores everything back in place. On a host with AVX-512 the harness
loads and stores zmm0..31 and k0..7 (:data:`HOST_AVX512`); elsewhere ymm0..15 only, and the rest
of the record passes through unchanged (:func:`simulate_records` then leaves it unchanged too).
The code runs in a forked child process, so a fault (SIGSEGV, SIGILL) is reported as
:class:`HostOracleError` instead of killing the caller.

Record layout (bytes, ``RECORD_BYTES`` per case, 64-byte aligned):

* ``[0, K_OFFSET)`` (``[0, 2048)``): zmm0..zmm31, ``REGISTER_BYTES`` (64) each;
* ``[K_OFFSET, GPR_OFFSET)`` (``[2048, 2112)``): k0..k7, 8 bytes each;
* ``[GPR_OFFSET, FLAGS_IN)`` (``[2112, 2184)``): the GPRs of ``GPRS`` (8 bytes each, little-endian);
* ``[2184, 2192)``: RFLAGS in (arithmetic bits), ``[2192, 2200)``: RFLAGS out;
* ``[2200, 2204)``: MXCSR in (keep every exception masked: the harness does not catch #XM),
  ``[2204, 2208)``: MXCSR out;
* ``[MEM_OFFSET, MEM_OFFSET + MEM_BYTES)`` (``MEM_OFFSET`` = 2240, the end of the MXCSR rounded up
  to 64 bytes): memory; ``rdx`` = record + ``MEM_OFFSET + MEM_BIAS``.

The offsets are derived from the register image's (:mod:`tsar.sim.vector_spill`); the numbers
above are their values.
"""

from __future__ import annotations

import ctypes
import mmap
import multiprocessing as mp
from collections.abc import Sequence

import numpy as np

from tsar.isa.assembler import keystone_code
from tsar.isa.operands import GPR_NUMBER
from tsar.sim.vector_spill import HOST_AVX512, IMAGE_BYTES, K_OFFSET, spill_lines

GPRS = ("rax", "rcx", "rbx", "rsi", "rdi", "r8", "r9", "r10", "r11")
"""GPRs loaded from / stored to each record (``rdx`` is the memory pointer; r12-r15 belong to
the harness)."""
GPR_OFFSET = IMAGE_BYTES
FLAGS_IN = GPR_OFFSET + 8 * len(GPRS)
FLAGS_OUT = FLAGS_IN + 8
MXCSR_IN = FLAGS_OUT + 8
MXCSR_OUT = MXCSR_IN + 4
MEM_BYTES, MEM_BIAS = 256, 64
MEM_OFFSET = -(-(MXCSR_OUT + 4) // 64) * 64
RECORD_BYTES = MEM_OFFSET + MEM_BYTES
FLAGS_MASK = 0x8D5  # CF PF AF ZF SF OF


class HostOracleError(RuntimeError):
    """The native run failed (the instruction faulted or the child process died)."""


def harness(insn: bytes, avx512: bool = HOST_AVX512) -> bytes:
    """Machine code of ``void run(uint8_t *records, size_t count)`` around ``insn``."""
    store, load = spill_lines("r12", avx512)
    gl = [f"mov {r}, qword ptr [r12 + {GPR_OFFSET + 8 * i}]" for i, r in enumerate(GPRS)]
    gs = [f"mov qword ptr [r12 + {GPR_OFFSET + 8 * i}], {r}" for i, r in enumerate(GPRS)]
    text = "\n".join([
        "push rbx", "push rbp", "push r12", "push r13", "push r14", "push r15",
        "sub rsp, 8", "stmxcsr dword ptr [rsp]",
        "mov r12, rdi", "mov r13, rsi", "test r13, r13", "jz done",
        "next:", *load, *gl,
        f"lea rdx, [r12 + {MEM_OFFSET + MEM_BIAS}]",
        f"ldmxcsr dword ptr [r12 + {MXCSR_IN}]",
        f"push qword ptr [r12 + {FLAGS_IN}]", "popfq",
        ".byte " + ", ".join(f"{b:#04x}" for b in insn),
        "pushfq", f"pop qword ptr [r12 + {FLAGS_OUT}]", f"stmxcsr dword ptr [r12 + {MXCSR_OUT}]",
        *store, *gs,
        f"add r12, {RECORD_BYTES}", "dec r13", "jnz next",
        "done:", "vzeroupper", "ldmxcsr dword ptr [rsp]", "add rsp, 8",
        "pop r15", "pop r14", "pop r13", "pop r12", "pop rbp", "pop rbx", "ret",
    ])
    return keystone_code(text, 0)


def _execute(code: bytes, records: np.ndarray) -> np.ndarray:
    """Run ``code`` on ``records`` in this process (the child)."""
    page = mmap.mmap(-1, max(mmap.PAGESIZE, len(code)),
                     prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    func = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t)(address)
    buf = np.zeros(records.size + 64, np.uint8)
    start = (-buf.ctypes.data) % 64
    work = buf[start:start + records.size].reshape(records.shape)
    work[:] = records
    func(work.ctypes.data, records.shape[0])
    return work.copy()


def _child(conn, jobs: Sequence[tuple[bytes, np.ndarray]]) -> None:
    for n, (insn, records) in enumerate(jobs):
        conn.send(("start", n))
        conn.send(("done", _execute(harness(insn), records)))
    conn.close()


def run_on_host(jobs: Sequence[tuple[bytes, np.ndarray]], timeout: float = 120.0) -> list[np.ndarray]:
    """Run each ``(instruction bytes, records (N, RECORD_BYTES) uint8)`` job natively.

    Returns the records after execution. Raises :class:`HostOracleError` naming the job whose
    instruction crashed the child process.
    """
    for _, records in jobs:
        if records.ndim != 2 or records.shape[1] != RECORD_BYTES or records.dtype != np.uint8:
            raise ValueError(f"records must be (N, {RECORD_BYTES}) uint8")
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, list(jobs)), daemon=True)
    proc.start()
    child.close()
    results: list[np.ndarray] = []
    current = -1
    try:
        while len(results) < len(jobs):
            if not parent.poll(timeout):
                raise HostOracleError(f"native run timed out in job {current}")
            try:
                tag, value = parent.recv()
            except EOFError:
                proc.join(5)
                insn = jobs[current][0].hex(" ") if current >= 0 else "?"
                raise HostOracleError(f"native child died (exit code {proc.exitcode}) in job {current}: "
                                  f"{insn}") from None
            if tag == "start":
                current = value
            else:
                results.append(value)
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
    return results


def simulate_records(insn: bytes, records: np.ndarray, python_scalar: bool = True) -> np.ndarray:
    """Run ``insn`` (one instruction, or a short straight sequence the Python layer executes) in
    the simulator on each record (same layout and register conventions as the native harness).
    Returns the records after execution."""
    from tsar.sim.memory import GuestMemory
    from tsar.sim.python_engine.blocks import compile_one
    from tsar.sim.x86.state import CpuState

    mem = GuestMemory(code_size=4096, data_size=1 << 16, stack_size=4096)
    st = CpuState(mem)
    if HOST_AVX512:  # the harness stores bits 511:256 only where the host has them
        st.widen()
    window = mem.data_start
    rdx = window + MEM_BIAS
    code_addr = mem.code_start
    mem.write(code_addr, insn, code=True)
    steps = []
    addr = code_addr
    while addr < code_addr + len(insn):  # a short sequence (e.g. a register set-up, then the form)
        compiled = compile_one(st, addr, trace=False)
        if compiled.run is None:
            raise ValueError(f"{compiled.text}: not executed by the Python layer")
        steps.append(compiled.run)
        addr = compiled.next
    out = records.copy()
    with st.fp.session():
        _simulate_each(out, st, steps, mem, window, rdx)
    return out


def _simulate_each(out: np.ndarray, st, steps: list, mem, window: int, rdx: int) -> None:
    """Load each record into ``st``, run ``steps``, store the state back into the record."""
    from tsar.sim.x86 import flags as fl

    for rec in out:
        st.zmm[:] = rec[:K_OFFSET].reshape(st.zmm.shape)
        st.k[:] = [int(v) for v in rec[K_OFFSET:GPR_OFFSET].view(np.uint64)]
        gv = rec[GPR_OFFSET:GPR_OFFSET + 8 * len(GPRS)].view(np.uint64)
        for i, name in enumerate(GPRS):
            st.gpr[GPR_NUMBER[name]] = int(gv[i])
        st.gpr[GPR_NUMBER["rdx"]] = rdx
        flags_in = int(rec[FLAGS_IN:FLAGS_IN + 8].view(np.uint64)[0])
        st.rflags_base = flags_in | 0x2
        st.flags[0] = fl.raw(flags_in | 0x2)
        st.fp.mxcsr = int(rec[MXCSR_IN:MXCSR_IN + 4].view(np.uint32)[0])
        mem.buf[window - mem.base:window - mem.base + MEM_BYTES] = rec[MEM_OFFSET:]
        for step in steps:
            step()
        rec[:K_OFFSET] = st.zmm.reshape(-1)
        rec[K_OFFSET:GPR_OFFSET].view(np.uint64)[:] = st.k
        for i, name in enumerate(GPRS):
            gv[i] = st.gpr[GPR_NUMBER[name]]
        rec[FLAGS_OUT:FLAGS_OUT + 8].view(np.uint64)[0] = fl.materialize(st.flags[0], st.rflags_base)
        rec[MXCSR_OUT:MXCSR_OUT + 4].view(np.uint32)[0] = st.fp.mxcsr
        rec[MEM_OFFSET:] = mem.buf[window - mem.base:window - mem.base + MEM_BYTES]
