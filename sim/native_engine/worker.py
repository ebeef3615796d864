"""The native engine's worker process: guest code runs in it with the system-call interface closed.

The worker is forked from the caller; everything it does after the fork is C
(:func:`library`, ``tsar_serve``): it moves its two pipe ends to descriptors :data:`COMMAND_FD`
and :data:`RESULT_FD` and closes every other one, installs the fault recorder (:mod:`.faults`),
makes the code arena read + execute (the guest cannot write code at run time), ignores SIGINT
(the caller handles Ctrl-C and kills it), sets ``PR_SET_NO_NEW_PRIVS`` and enters a
``SECCOMP_MODE_FILTER`` filter. From then on the only system calls that execute are ``read`` of
the command pipe, ``write`` of the result pipe, ``exit``/``exit_group``, ``rt_sigreturn`` and
``clock_gettime`` (the vDSO's fallback): what seccomp strict mode allows (``read``/``write`` on
any open descriptor, ``exit``, ``sigreturn``), narrowed to the worker's own pipes. Any other call,
and every call through ``int 0x80`` or ``sysenter`` (the 32-bit tables), is not executed: the
kernel raises SIGSYS, whose recorder writes RIP and the call's number into the fault record and
ends the worker; the caller reports a :class:`~tsar.sim.errors.SimulationError` of kind
``syscall``. Only then is a "ready" message sent; a worker that cannot close the interface
reports that instead, and no guest code runs (fail closed).

Messages are fixed-size little-endian records of 64-bit words (:data:`COMMAND`, :data:`RESULT`),
never pickles: the guest shares the worker's address space and may ``write`` to the result pipe,
so the caller accepts nothing but a result of the exact size with the right magic word, call
number and status, and a pipe holding more bytes than one result means the guest wrote to it (an
error; a worker whose pipe holds bytes before a call is replaced). What the guest can forge is
only what it could return anyway: its own return value, time and T-SAR counters.

The call itself: integer arguments in rdi..r9, floating-point ones in xmm0..7 (a ``float`` in
the low 32 bits), the rest in :data:`STACK_SLOTS` stack words in argument order (System V);
``rax`` and ``xmm0`` come back.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import struct
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tsar.common.toolchain import build_shared, cache_dir, write_atomic
from tsar.sim.errors import SimulationError
from tsar.sim.native_engine.faults import recorder_source

INT_ARGUMENTS, FLOAT_ARGUMENTS = 6, 8
"""Arguments passed in registers: rdi, rsi, rdx, rcx, r8, r9 and xmm0..7."""
STACK_SLOTS = 16
"""Most 8-byte stack words a worker call passes (arguments beyond the registers)."""
COMMAND = struct.Struct(f"<{4 + INT_ARGUMENTS + FLOAT_ARGUMENTS + STACK_SLOTS}Q")
"""magic, call number, entry, float return (0/1), integer registers, xmm words, stack words."""
RESULT = struct.Struct("<7Q")
"""magic, call number, status, detail, rax, xmm0 (low 64 bits), nanoseconds."""
COMMAND_MAGIC = int.from_bytes(b"TSARCMD1", "little")
RESULT_MAGIC = int.from_bytes(b"TSARRES1", "little")
OK, READY, SETUP_FAILED = 0, 1, 2
SETUP_STAGES = {1: "installing the fault recorder", 2: "making the code read-only",
                3: "ignoring SIGINT", 4: "PR_SET_NO_NEW_PRIVS", 5: "entering the seccomp filter"}
COMMAND_FD, RESULT_FD = 3, 4
"""The worker's only file descriptors: the command pipe's read end and the result pipe's write
end (0, 1 and 2 are closed: a guest ``write(1, ...)`` is a refused system call)."""
START_SECONDS = 60.0
"""How long a new worker may take to report ready."""


_SOURCE = r"""
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

struct command {
    uint64_t magic, seq, entry, float_return;
    uint64_t gpr[INT_ARGUMENTS], xmm[FLOAT_ARGUMENTS], stack[STACK_SLOTS];
};
struct result { uint64_t magic, seq, status, detail, rax, xmm0, nanoseconds; };

#define ARGUMENT_TYPES uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, \
    double, double, double, double, double, double, double, double, STACK_TYPES
typedef uint64_t (*int_call)(ARGUMENT_TYPES);
typedef double (*float_call)(ARGUMENT_TYPES);

static int transfer(int fd, void *buf, size_t n, int out)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = out ? write(fd, (char *)buf + done, n - done) : read(fd, (char *)buf + done, n - done);
        if (r > 0)
            done += (size_t)r;
        else if (!(r < 0 && errno == EINTR))
            return -1;
    }
    return 0;
}

static void reply(uint64_t seq, uint64_t status, uint64_t detail, uint64_t rax,
                  uint64_t xmm0, uint64_t ns)
{
    struct result r = {RESULT_MAGIC, seq, status, detail, rax, xmm0, ns};
    if (transfer(RESULT_FD, &r, sizeof r, 1))
        _exit(0);
}

static int close_range_of(unsigned first, unsigned last)
{
    if (first > last)
        return 0;
    if (syscall(SYS_close_range, first, last, 0) == 0)
        return 0;
    if (errno != ENOSYS)
        return -1;
    for (unsigned fd = first; fd <= last && fd < 65536; fd++)
        close((int)fd);
    return 0;
}

static int keep_only_pipes(int cmd_fd, int res_fd)
{
    int c = fcntl(cmd_fd, F_DUPFD, COMMAND_FD + RESULT_FD + 1);
    int r = fcntl(res_fd, F_DUPFD, COMMAND_FD + RESULT_FD + 1);
    if (c < 0 || r < 0 || dup2(c, COMMAND_FD) < 0 || dup2(r, RESULT_FD) < 0)
        return -1;
    if (close_range_of(0, COMMAND_FD - 1) || close_range_of(RESULT_FD + 1, ~0U))
        return -1;
    return 0;
}

#define LOAD(field) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, field))
#define JEQ(value, yes, no) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (value), (yes), (no))
#define RETURN(value) BPF_STMT(BPF_RET | BPF_K, (value))

static int close_system_calls(void)
{
    struct sock_filter filter[] = {
        LOAD(arch),                           /*  0 */
        JEQ(AUDIT_ARCH_X86_64, 0, 11),        /*  1: else refuse */
        LOAD(nr),                             /*  2 */
        JEQ(__NR_read, 0, 2),                 /*  3: else 6 */
        LOAD(args[0]),                        /*  4 */
        JEQ(COMMAND_FD, 8, 7),                  /*  5: allow / refuse */
        JEQ(__NR_write, 0, 2),                /*  6: else 9 */
        LOAD(args[0]),                        /*  7 */
        JEQ(RESULT_FD, 5, 4),                   /*  8: allow / refuse */
        JEQ(__NR_exit_group, 4, 0),           /*  9 */
        JEQ(__NR_exit, 3, 0),                 /* 10 */
        JEQ(__NR_rt_sigreturn, 2, 0),         /* 11 */
        JEQ(__NR_clock_gettime, 1, 0),        /* 12 */
        RETURN(SECCOMP_RET_TRAP),             /* 13: SIGSYS, the call not executed */
        RETURN(SECCOMP_RET_ALLOW),            /* 14 */
    };
    struct sock_fprog program = {sizeof filter / sizeof filter[0], filter};
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0);
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void tsar_serve(int cmd_fd, int res_fd, uint64_t *record, void *code, size_t code_size)
{
    int stage = 0;
    if (keep_only_pipes(cmd_fd, res_fd))
        _exit(0);  /* no pipe to reply on: the caller sees the worker end before it is ready */
    if (tsar_record_faults(record))
        stage = 1;
    else if (mprotect(code, code_size, PROT_READ | PROT_EXEC))
        stage = 2;
    else if (signal(SIGINT, SIG_IGN) == SIG_ERR)
        stage = 3;
    else if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        stage = 4;
    else if (close_system_calls())
        stage = 5;
    if (stage) {
        reply(0, STATUS_SETUP_FAILED, ((uint64_t)stage << 32) | (uint32_t)errno, 0, 0, 0);
        _exit(0);
    }
    reply(0, STATUS_READY, 0, 0, 0, 0);
    for (;;) {
        struct command c;
        double x[FLOAT_ARGUMENTS];
        uint64_t rax = 0, xmm0 = 0, start;
        if (transfer(COMMAND_FD, &c, sizeof c, 0) || c.magic != COMMAND_MAGIC)
            _exit(0);  /* the caller closed the pipe */
        memcpy(x, c.xmm, sizeof x);
        start = now_ns();
        if (c.float_return) {
            double r = ((float_call)c.entry)(CALL_ARGUMENTS);
            memcpy(&xmm0, &r, sizeof xmm0);
        } else {
            rax = ((int_call)c.entry)(CALL_ARGUMENTS);
        }
        reply(c.seq, STATUS_OK, 0, rax, xmm0, now_ns() - start);
    }
}
"""


def worker_source() -> str:
    """The worker library's C source: the fault recorder and ``tsar_serve``."""
    calls = [f"c.gpr[{i}]" for i in range(INT_ARGUMENTS)] + [f"x[{i}]" for i in range(FLOAT_ARGUMENTS)]
    calls += [f"c.stack[{i}]" for i in range(STACK_SLOTS)]
    defines = {
        "INT_ARGUMENTS": INT_ARGUMENTS, "FLOAT_ARGUMENTS": FLOAT_ARGUMENTS, "STACK_SLOTS": STACK_SLOTS,
        "STACK_TYPES": ", ".join(["uint64_t"] * STACK_SLOTS), "CALL_ARGUMENTS": ", ".join(calls),
        "COMMAND_MAGIC": f"{COMMAND_MAGIC:#x}ULL", "RESULT_MAGIC": f"{RESULT_MAGIC:#x}ULL",
        "COMMAND_FD": COMMAND_FD, "RESULT_FD": RESULT_FD,
        "STATUS_OK": OK, "STATUS_READY": READY, "STATUS_SETUP_FAILED": SETUP_FAILED,
    }
    text = "".join(f"#define {name} {value}\n" for name, value in defines.items()) + _SOURCE
    return recorder_source() + text


@cache
def library() -> ctypes.CDLL:
    """The compiled worker library (built and loaded before a fork)."""
    src = cache_dir("src") / "tsar_worker.c"
    text = worker_source()
    if not src.exists() or src.read_text() != text:
        write_atomic(src, text)
    lib = ctypes.CDLL(str(build_shared([Path(src)], ["-O2", "-fPIC", "-shared"], name="tsar_worker")))
    lib.tsar_serve.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_size_t]
    lib.tsar_serve.restype = None
    return lib


class WorkerEnded(Exception):
    """Internal: the worker process ended (a guest fault, or the guest ended it)."""


@dataclass(frozen=True)
class Arguments:
    """One call's argument words, placed as System V places them."""

    gpr: tuple[int, ...]
    xmm: tuple[int, ...]
    stack: tuple[int, ...]

    @classmethod
    def place(cls, spec: list[tuple[str, int | float]]) -> Arguments:
        """``spec``: ``("u64", int)``, ``("f32", float)`` or ``("f64", float)`` per argument."""
        gpr: list[int] = []
        xmm: list[int] = []
        stack: list[int] = []
        for kind, value in spec:
            if kind == "u64":
                word = int(value)
                (gpr if len(gpr) < INT_ARGUMENTS else stack).append(word)
                continue
            raw = struct.pack("<f", value) if kind == "f32" else struct.pack("<d", value)
            word = int.from_bytes(raw, "little")
            (xmm if len(xmm) < FLOAT_ARGUMENTS else stack).append(word)
        if len(stack) > STACK_SLOTS:
            raise SimulationError("argument", f"{len(stack)} arguments on the stack: a worker call "
                                  f"passes at most {STACK_SLOTS} (in_process=True passes any number)")
        return cls(tuple(gpr), tuple(xmm), tuple(stack))


class Worker:
    """One forked worker process serving calls over two pipes (see the module docstring)."""

    def __init__(self, code: int, code_size: int, record: int) -> None:
        lib = library()
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker: C from here on; it never returns
            try:
                lib.tsar_serve(cmd_r, res_w, record, code, code_size)
            finally:
                os._exit(1)
        os.close(cmd_r)
        os.close(res_w)
        self.pid, self.commands, self.results = pid, cmd_w, res_r
        self.calls = 0
        self.status: int | None = None
        try:
            _, _, status, detail, *_ = self._receive(time.monotonic() + START_SECONDS, 0)
        except (WorkerEnded, TimeoutError):
            self.close()
            raise SimulationError("native", "the worker process did not start") from None
        if status != READY:
            self.close()
            stage = SETUP_STAGES.get(detail >> 32, "setting up")
            raise SimulationError("native", f"the worker could not close the system-call interface "
                                  f"({stage}: {os.strerror(detail & 0xFFFFFFFF)}); guest code runs "
                                  "only in a contained worker (in_process=True runs trusted code "
                                  "without one)")

    def pending(self) -> bool:
        """Whether the result pipe holds bytes nobody asked for."""
        return bool(self._poll(0))

    def _poll(self, seconds: float) -> list:
        poller = select.poll()
        poller.register(self.results, select.POLLIN)
        return poller.poll(max(0, int(seconds * 1000)))

    def call(self, entry: int, arguments: Arguments, float_return: bool,
             timeout: float) -> tuple[int, int, float]:
        """Run one call; returns rax, the low 64 bits of xmm0 and the seconds it took. Raises
        :class:`WorkerEnded` when the worker ended, :class:`TimeoutError` past ``timeout``, and a
        :class:`SimulationError` for a reply that is not the call's result."""
        self.calls += 1
        words = (COMMAND_MAGIC, self.calls, entry, int(float_return),
                 *arguments.gpr, *[0] * (INT_ARGUMENTS - len(arguments.gpr)),
                 *arguments.xmm, *[0] * (FLOAT_ARGUMENTS - len(arguments.xmm)),
                 *arguments.stack, *[0] * (STACK_SLOTS - len(arguments.stack)))
        try:
            os.write(self.commands, COMMAND.pack(*words))  # smaller than PIPE_BUF: one write
        except BrokenPipeError:
            raise WorkerEnded from None
        deadline = time.monotonic() + timeout
        magic, seq, status, _, rax, xmm0, ns = self._receive(deadline, timeout)
        while magic == RESULT_MAGIC and status == OK and 0 < seq < self.calls:
            # the real reply of an earlier call whose place a forged reply took: dropped
            magic, seq, status, _, rax, xmm0, ns = self._receive(deadline, timeout)
        if magic != RESULT_MAGIC or seq != self.calls or status != OK or self._poll(0):
            raise SimulationError("native", "the worker's reply is not the call's result: the guest "
                                  "wrote to the worker's result pipe")
        return rax, xmm0, ns / 1e9

    def _receive(self, deadline: float, timeout: float) -> tuple[int, ...]:
        data = b""
        while len(data) < RESULT.size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"wall-time limit of {timeout:g} s reached")
            if not self._poll(min(left, 3600.0)):
                continue
            chunk = os.read(self.results, RESULT.size - len(data))
            if not chunk:
                raise WorkerEnded
            data += chunk
        return RESULT.unpack(data)

    def exit_code(self, wait: float = 5.0) -> int | None:
        """The worker's exit code once it has ended (negative: the signal that ended it), waiting
        up to ``wait`` seconds; None while it runs."""
        if self.status is None:
            deadline = time.monotonic() + wait
            while True:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.status = os.waitstatus_to_exitcode(status)
                    break
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.001)
        return self.status

    def close(self) -> None:
        """End the worker (killed if it still runs) and close the pipes; idempotent."""
        if self.status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                self.exit_code(5.0)
        for fd in (self.commands, self.results):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.commands = self.results = -1


__all__ = ["COMMAND", "RESULT", "STACK_SLOTS", "Arguments", "Worker", "WorkerEnded", "library",
           "worker_source"]
