"""Run tasks in a forked child process pinned to one CPU, so that native code which faults
(SIGILL, SIGSEGV) or hangs costs one task, not the caller.

The child runs the tasks in order and sends each result back through a pipe; when it dies or a
task overruns ``timeout`` seconds, that task is reported as :class:`TaskFailed` and a fresh child
goes on with the next one.
"""

from __future__ import annotations

import faulthandler
import multiprocessing as mp
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TaskFailed:
    """A task whose child process died (``signal`` set when a signal killed it) or timed out."""

    reason: str
    signal: int | None = None


def default_cpu() -> int | None:
    """The CPU to pin measurements to: the highest one this process may run on (None where the
    platform has no affinity control)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    return max(os.sched_getaffinity(0))


def _child(conn: Any, tasks: Sequence[Callable[[], Any]], first: int, cpu: int | None) -> None:
    faulthandler.disable()  # a fault is reported by the parent, in one line
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    for i in range(first, len(tasks)):
        conn.send(("start", i))
        try:
            conn.send(("done", tasks[i]()))
        except Exception as exc:  # a Python-level error in a task: report it, keep going
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
    conn.close()


def _describe(exitcode: int | None) -> tuple[str, int | None]:
    if exitcode is not None and exitcode < 0:
        sig = -exitcode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"the native code died of {name}", sig
    return f"the child process exited with code {exitcode}", None


def run_isolated(tasks: Sequence[Callable[[], Any]], *, cpu: int | None = None,
                 timeout: float = 120.0) -> Iterator[tuple[int, Any]]:
    """Yield ``(index, result)`` for each task in order; ``result`` is the task's return value or
    a :class:`TaskFailed`. ``cpu``: the CPU the child is pinned to (None: not pinned)."""
    ctx = mp.get_context("fork")
    next_task = 0
    while next_task < len(tasks):
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(child, tasks, next_task, cpu), daemon=True)
        proc.start()
        child.close()
        current = next_task
        try:
            while next_task < len(tasks):
                if not parent.poll(timeout):
                    proc.kill()
                    yield current, TaskFailed(f"timed out after {timeout:.0f} s")
                    next_task = current + 1
                    break
                try:
                    tag, value = parent.recv()
                except EOFError:
                    proc.join(5)
                    reason, sig = _describe(proc.exitcode)
                    yield current, TaskFailed(reason, sig)
                    next_task = current + 1
                    break
                if tag == "start":
                    current = value
                    continue
                yield current, (value if tag == "done" else TaskFailed(value))
                next_task = current + 1
        finally:
            if proc.is_alive():
                proc.kill()
            proc.join(5)
            parent.close()
