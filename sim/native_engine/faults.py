"""A fault recorder for code the native engine runs in a worker process: SIGSEGV, SIGBUS, SIGILL
and SIGFPE write the signal, RIP, the fault address and the GPRs into a shared record and end
the process, so the parent can report the guest fault instead of crashing.

Record layout (uint64): ``[0]`` signal (0 = none), ``[1]`` RIP, ``[2]`` fault address,
``[GPR_WORDS]`` the GPRs in encoding order (rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8..r15).
"""

from __future__ import annotations

import ctypes
from functools import cache
from pathlib import Path

from tsar.common.toolchain import build_shared, cache_dir
from tsar.isa.operands import GPR64

GPR_WORDS = slice(3, 3 + len(GPR64))
"""Where the record holds the GPRs, in :data:`tsar.isa.operands.GPR64` order."""
RECORD_WORDS = GPR_WORDS.stop
SIGNALS = {4: "SIGILL", 7: "SIGBUS", 8: "SIGFPE", 11: "SIGSEGV"}
FAULT_EXIT = 70

_SOURCE = r"""
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

static volatile uint64_t *record;
static char altstack[1 << 16];
static const int gpr_order[GPR_COUNT] = {GPR_ORDER};

static void on_fault(int sig, siginfo_t *info, void *context)
{
    ucontext_t *uc = (ucontext_t *)context;
    record[1] = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    record[2] = (uint64_t)info->si_addr;
    for (int i = 0; i < GPR_COUNT; i++)
        record[GPR_FIRST + i] = (uint64_t)uc->uc_mcontext.gregs[gpr_order[i]];
    record[0] = (uint64_t)sig;
    _exit(FAULT_EXIT);
}

int tsar_record_faults(uint64_t *rec)
{
    struct sigaction sa;
    stack_t ss;
    record = rec;
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    ss.ss_flags = 0;
    if (sigaltstack(&ss, 0))
        return -1;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, 0);
    sigaction(SIGBUS, &sa, 0);
    sigaction(SIGILL, &sa, 0);
    sigaction(SIGFPE, &sa, 0);
    return 0;
}
"""


@cache
def recorder() -> ctypes.CDLL:
    """The compiled recorder (``int tsar_record_faults(uint64_t *record)``)."""
    src = cache_dir("src") / "tsar_faults.c"
    text = (_SOURCE.replace("FAULT_EXIT", str(FAULT_EXIT)).replace("GPR_COUNT", str(len(GPR64)))
            .replace("GPR_FIRST", str(GPR_WORDS.start))
            .replace("GPR_ORDER", ", ".join(f"REG_{name.upper()}" for name in GPR64)))
    if not src.exists() or src.read_text() != text:
        src.write_text(text)
    lib = ctypes.CDLL(str(build_shared([Path(src)], ["-O2", "-fPIC", "-shared"], name="tsar_faults")))
    lib.tsar_record_faults.argtypes = [ctypes.c_void_p]
    lib.tsar_record_faults.restype = ctypes.c_int
    return lib
