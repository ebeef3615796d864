"""The Python-executed scalar subset against the host CPU: GPRs, memory and defined flags."""

from __future__ import annotations

import numpy as np
import pytest
from keystone import KS_ARCH_X86, KS_MODE_64, Ks
from sim_inputs import make_records

from tsar.sim import run_native, simulate_records
from tsar.sim.blocks import compile_one
from tsar.sim.memory import GuestMemory
from tsar.sim.native import FLAGS_MASK, FLAGS_OUT
from tsar.sim.state import CpuState

CF, PF, AF, ZF, SF, OF = 0x1, 0x4, 0x10, 0x40, 0x80, 0x800

# (text, flags the architecture leaves undefined)
FORMS: list[tuple[str, int]] = []
for op in ("add", "sub", "cmp"):
    FORMS += [(f"{op} rax, rcx", 0), (f"{op} eax, ecx", 0), (f"{op} rsi, 0x7f", 0),
              (f"{op} edi, -5", 0), (f"{op} r8, qword ptr [rdx + 8]", 0),
              (f"{op} r9d, dword ptr [rdx - 4]", 0), (f"{op} rbx, 0x12345678", 0)]
for op in ("and", "or", "xor", "test"):
    FORMS += [(f"{op} rax, rcx", AF), (f"{op} ecx, eax", AF), (f"{op} r10, 0x55", AF),
              (f"{op} r11d, dword ptr [rdx]", AF)]
FORMS += [("xor eax, eax", AF), ("inc rax", 0), ("dec rcx", 0), ("inc r8d", 0), ("dec esi", 0)]
for op in ("shl", "shr", "sar"):
    FORMS += [(f"{op} rax, 1", AF), (f"{op} ecx, 1", AF), (f"{op} rsi, 3", AF | OF),
              (f"{op} edi, 31", AF | OF), (f"{op} r8, 63", AF | OF), (f"{op} rbx, cl", AF | OF),
              (f"{op} r9d, cl", AF | OF)]
_IMUL_UNDEFINED = SF | ZF | AF | PF
FORMS += [(text, _IMUL_UNDEFINED) for text in ("imul rax, rcx", "imul ecx, eax", "imul rsi, rdi, 12345",
                                               "imul r8d, dword ptr [rdx + 4], -3")]
FORMS += [("mov rax, rcx", 0), ("mov eax, ecx", 0), ("mov rsi, 0x123456789abc", 0), ("mov edi, -1", 0),
          ("mov rbx, qword ptr [rdx + 16]", 0), ("mov r10d, dword ptr [rdx - 8]", 0),
          ("mov qword ptr [rdx + 8], rcx", 0), ("mov dword ptr [rdx + 3], eax", 0),
          ("mov word ptr [rdx], cx", 0), ("mov byte ptr [rdx + 1], al", 0),
          ("mov qword ptr [rdx + 24], -7", 0),
          ("movzx eax, byte ptr [rdx + 5]", 0), ("movzx ecx, word ptr [rdx + 6]", 0), ("movzx eax, cl", 0),
          ("movsx rax, byte ptr [rdx + 5]", 0), ("movsx ecx, word ptr [rdx]", 0),
          ("movsxd rsi, dword ptr [rdx + 12]", 0), ("movsxd rdi, eax", 0),
          ("lea rax, [rcx + rsi*4 + 0x10]", 0), ("lea ecx, [rax + rbx - 3]", 0),
          ("lea r8, [rsi + rdi*8 + 8]", 0)]
for cc in ("e", "ne", "b", "ae", "be", "a", "l", "ge", "le", "g", "s", "ns", "o", "no", "p", "np"):
    FORMS += [(f"cmov{cc} rax, rcx", 0), (f"cmov{cc} esi, dword ptr [rdx + 4]", 0)]


def _assemble(text: str) -> bytes:
    return bytes(Ks(KS_ARCH_X86, KS_MODE_64).asm(text, 0)[0])


def test_forms_execute_in_python():
    st = CpuState(GuestMemory(code_size=4096, data_size=4096, stack_size=4096))
    for text, _ in FORMS:
        st.mem.write(st.mem.code_start, _assemble(text) + b"\x90" * 8, code=True)
        assert compile_one(st, st.mem.code_start).run is not None, text


@pytest.mark.native
def test_scalar_matches_host():
    rng = np.random.default_rng(7)
    jobs = [(_assemble(text), make_records(rng, 400)) for text, _ in FORMS]
    for (text, undefined), (insn, records), native in zip(FORMS, jobs, run_native(jobs), strict=True):
        sim = simulate_records(insn, records)
        mask = np.uint64(FLAGS_MASK & ~undefined)
        for arr in (native, sim):
            arr[:, FLAGS_OUT:FLAGS_OUT + 8].view(np.uint64)[:] &= mask
        bad = np.flatnonzero((native != sim).any(axis=1))
        assert not bad.size, f"{text}: {bad.size} cases differ, e.g. bytes " \
            f"{np.flatnonzero(native[bad[0]] != sim[bad[0]])[:8].tolist()}"
