"""A fault recorder for code the native engine runs in a worker process: SIGSEGV, SIGBUS, SIGILL,
SIGFPE, SIGTRAP and SIGSYS (a system call the worker's seccomp filter refused) write the signal,
RIP, the fault address and the GPRs into a shared record and end the process, so the parent can
report the guest fault instead of crashing. The C source is compiled into the worker's library
(:mod:`tsar.sim.native_engine.worker`).

Record layout (uint64): ``[0]`` signal (0 = none), ``[1]`` RIP, ``[2]`` fault address (for
SIGSYS: the call's audit architecture in the high 32 bits, its number in the low ones),
``[GPR_WORDS]`` the GPRs in encoding order (rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8..r15).
The guest can write the record too (it is shared memory): the parent reads it as plain numbers.
"""

from __future__ import annotations

from tsar.isa.operands import GPR64

GPR_WORDS = slice(3, 3 + len(GPR64))
"""Where the record holds the GPRs, in :data:`tsar.isa.operands.GPR64` order."""
RECORD_WORDS = GPR_WORDS.stop
SIGNALS = {4: "SIGILL", 5: "SIGTRAP", 7: "SIGBUS", 8: "SIGFPE", 11: "SIGSEGV", 31: "SIGSYS"}
FAULT_EXIT = 70
AUDIT_ARCH_X86_64 = 0xC000003E
"""The architecture a 64-bit ``syscall`` reports to seccomp (``int 0x80`` reports i386's)."""

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
    if (sig == SIGSYS)
        record[2] = ((uint64_t)(uint32_t)info->si_arch << 32) | (uint32_t)info->si_syscall;
    else
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
    sigfillset(&sa.sa_mask);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    if (sigaction(SIGSEGV, &sa, 0) || sigaction(SIGBUS, &sa, 0) || sigaction(SIGILL, &sa, 0)
        || sigaction(SIGFPE, &sa, 0) || sigaction(SIGTRAP, &sa, 0) || sigaction(SIGSYS, &sa, 0))
        return -1;
    return 0;
}
"""


def recorder_source() -> str:
    """The recorder's C source (``int tsar_record_faults(uint64_t *record)``: 0, or -1 when a
    handler could not be installed)."""
    return (_SOURCE.replace("FAULT_EXIT", str(FAULT_EXIT)).replace("GPR_COUNT", str(len(GPR64)))
            .replace("GPR_FIRST", str(GPR_WORDS.start))
            .replace("GPR_ORDER", ", ".join(f"REG_{name.upper()}" for name in GPR64)))
