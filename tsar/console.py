"""What the CLI prints besides results: progress on stderr (silenced by ``-q``) and details
(shown with ``-v``).

Progress tells the truth:

* **Where it goes.** On a terminal a status update (:func:`status`, or a heartbeat) overwrites the
  previous one with ``\\r``; anywhere else (a pipe, a file, a CI log) every update is a line of its
  own and no carriage return is written. Step lines (:func:`progress`) are always lines.
* **Time left from measured rates.** :class:`Steps` and :class:`Work` estimate the time left as
  seconds per unit of *completed* work times the work left, where a step's work is its expected
  cost (e.g. its size in weights) when the caller knows it, else 1. Uneven steps of known cost
  therefore do not mislead the estimate; a step that overruns its share slows the rate.
* **No silent stretch.** :func:`watch` (around every command, in :mod:`tsar.cli.main`) runs a
  heartbeat: once a command has said what it is doing, any silence longer than about 2 s (or 1.5
  times the cadence of regular updates, up to 8 s) is filled with a line saying for how long, and,
  inside :class:`Steps` or :class:`Work`, how much is left.
* **Library hooks.** Code that must not print takes a callback: ``progress: Callable[[str], None]``
  for named steps (wrap it in :class:`Steps` inside the library, passing ``weight=`` per step), or
  a :data:`WorkHook` ``progress(done, total, message)`` for units of work (layers, kernels, calls);
  the CLI passes ``console.Work("what")`` for the latter.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

WorkHook = Callable[..., None]
"""``progress(done, total=None, message="")``: ``done`` of ``total`` units of work are complete
(what a library calls; :class:`Work` is one)."""

HEARTBEAT_AFTER = 2.0
"""Seconds of silence after which a heartbeat says that the command is still at work."""
_TTY_EVERY = 1.0
"""Seconds between heartbeats on a terminal (each overwrites the previous one)."""
_CADENCE_MAX = 8.0
"""Progress that arrives every few seconds delays the first heartbeat to 1.5 times its cadence, up
to this many seconds."""
_LINE_EVERY_MAX = 30.0
"""Longest gap between heartbeat lines elsewhere (they start at HEARTBEAT_AFTER and grow with the
silence, a quarter of it, so that a long step does not flood a log)."""

_verbosity = 0
_lock = threading.RLock()


def clock() -> float:
    """Seconds of a monotonic clock: the time base of the output and its heartbeats (tests replace
    it; :class:`Steps` and :class:`Work` take a ``clock`` of their own)."""
    return time.monotonic()


class _State:
    """The progress output of this process (guarded by ``_lock``)."""

    def __init__(self) -> None:
        self.open = False           # a status line is on the terminal without its newline
        self.emitted = 0            # progress outputs written so far
        self.last_output = 0.0      # monotonic time of the last output (heartbeats included)
        self.last_progress = 0.0    # ... of the last output that was not a heartbeat
        self.cadence = 0.0          # seconds between the last two outputs that were not heartbeats
        self.current: Callable[[float], str] | None = None  # the heartbeat at a monotonic time


_state = _State()


def set_verbosity(level: int) -> None:
    """-1: quiet (no progress), 0: default, 1 and more: verbose."""
    global _verbosity
    _verbosity = level


def is_terminal(stream=None) -> bool:
    """Whether ``stream`` (default: stderr) is a terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def duration(seconds: float) -> str:
    """``7 s``, ``2 min 05 s``, ``1 h 03 min``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def _emit(text: str, *, transient: bool, heartbeat: bool = False, now: float | None = None) -> None:
    if _verbosity < 0:
        return
    with _lock:
        stream = sys.stderr
        if is_terminal(stream):
            if transient:
                width = max(shutil.get_terminal_size((100, 24)).columns - 1, 20)
                stream.write("\r" + text[:width] + "\x1b[K")
            else:
                stream.write(("\r\x1b[K" if _state.open else "") + text + "\n")
            _state.open = transient
        else:
            stream.write(text + "\n")
        stream.flush()
        now = clock() if now is None else now
        _state.last_output = now
        if not heartbeat:
            _state.emitted += 1
            _state.cadence = now - _state.last_progress
            _state.last_progress = now


def _end_status() -> None:
    """Keep the terminal's open status line (end it with a newline)."""
    with _lock:
        if _state.open:
            sys.stderr.write("\n")
            sys.stderr.flush()
            _state.open = False


def _clear_status() -> None:
    """Remove the terminal's open status line (before other output takes the line)."""
    with _lock:
        if _state.open:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            _state.open = False


def _short(message: str, width: int = 72) -> str:
    text = " ".join(message.split())
    return text if len(text) <= width else text[:width].rsplit(" ", 1)[0] + " ..."


def _since(message: str, started: float) -> Callable[[float], str]:
    return lambda now: f"  .. {duration(now - started)} since: {_short(message)}"


def progress(message: str, *, end: str = "\n") -> None:
    """A progress line on stderr, unless quiet. A message that starts with ``\\r`` or is given
    ``end=""`` is a status update (:func:`status`); an empty one ends the terminal's status line."""
    if _verbosity < 0:
        return
    text = message.lstrip("\r")
    if not text.strip():
        _end_status()
        return
    if message.startswith("\r") or end != "\n":
        status(text)
        return
    _emit(text, transient=False)
    _state.current = _since(text, clock())


def status(message: str) -> None:
    """An update of the work under way: overwrites the previous one on a terminal, a line
    elsewhere."""
    if _verbosity < 0:
        return
    _emit(message, transient=True)
    _state.current = _since(message, clock())


def activity(message: str) -> None:
    """Name the work under way for the heartbeat without printing it (for commands whose step titles
    go to stdout)."""
    now = clock()
    with _lock:
        _state.current = _since(message, now)
        _state.last_progress = _state.last_output = now


def detail(message: str) -> None:
    """A line on stderr shown with ``-v``."""
    if _verbosity > 0:
        _emit(message, transient=False)


def _said(before: int) -> bool:
    """Whether progress was written since ``_state.emitted`` was ``before`` (a callback passed to a
    library may print or not)."""
    return _state.emitted != before


class Steps:
    """Numbered progress for a job of ``total`` steps: ``steps("what")`` starts the next step and
    reports ``[i/total] what  (~N s left)``.

    The time left is the seconds per unit of completed work (measured from the start of the first
    step to the start of the current one) times the work not done yet. A step's work is
    ``weights[i]`` or the ``weight=`` of its call (its expected cost: its size, instructions,
    bytes...), else 1; steps not started yet weigh ``weights[i]`` or the mean of those seen. Between
    steps the heartbeat of :func:`watch` shows the current step's time and the updated estimate.
    Steps run in parallel are announced as they complete (``done=True``), after :meth:`begin`
    started the clock. ``clock``: seconds (tests pass a simulated one)."""

    def __init__(self, total: int, say: Callable[[str], None] | None = None, *,
                 weights: Sequence[float] | None = None, clock: Callable[[], float] | None = None) -> None:
        self.total, self.done = max(total, 1), 0
        self.say = say or progress
        self.weights = None if weights is None else [float(w) for w in weights]
        self._clock = clock or time.monotonic
        self._seen: list[float] = []      # the work of each step started, the current one last
        self._first: float | None = None  # when the first step started
        self._at = 0.0                    # when the current step started
        self._message = ""
        self._finished = False            # the current step was announced complete (done=True)
        self._parallel = 1                # steps run at once (begin)

    def _weight(self, index: int, given: float | None) -> float:
        if given is not None:
            return max(float(given), 0.0)
        if self.weights and index < len(self.weights):
            return self.weights[index]
        return sum(self._seen) / len(self._seen) if self._seen else 1.0

    def _total_work(self) -> float:
        seen = len(self._seen)
        known = self.weights[seen:self.total] if self.weights else []
        mean = sum(self._seen) / seen if seen else 1.0
        return sum(self._seen) + sum(known) + mean * max(self.total - seen - len(known), 0)

    def _estimate(self, now: float) -> tuple[float, float, bool] | None:
        """(seconds left in the current step, seconds left after it, whether the step has overrun its
        expected time), or None before a step with work has completed."""
        if self._finished and self._first is not None:  # the work of every step seen is done
            done_work = sum(self._seen)
            if done_work <= 0 or self._at <= self._first or len(self._seen) < self._parallel:
                return None
            rest = max(self._total_work() - done_work, 0.0)
            left = (self._at - self._first) / done_work * rest - max(now - self._at, 0.0)
            return 0.0, max(left, 0.0), False
        if len(self._seen) < 2 or self._first is None:
            return None
        done_work = sum(self._seen[:-1])
        if done_work <= 0:
            return None
        spent, in_step, current = self._at - self._first, max(now - self._at, 0.0), self._seen[-1]
        rate = max(spent / done_work, (spent + in_step) / (done_work + current))
        rest = max(self._total_work() - done_work - current, 0.0)
        expected = spent / done_work * current
        return max(rate * current - in_step, 0.0), rate * rest, in_step > expected

    def left(self, now: float | None = None) -> float | None:
        """Seconds left (the current step included) at ``now`` (default: the clock), or None before
        a step with work has completed."""
        estimate = self._estimate(self._clock() if now is None else now)
        return None if estimate is None else estimate[0] + estimate[1]

    def begin(self, parallel: int = 1) -> None:
        """Start the clock now, before the first step is announced (steps announced as they
        complete: the time to the first completion is that step's); ``parallel``: steps run at
        once, so that no time is estimated before that many have completed (the first completion
        took the time of all of them)."""
        if self._first is None:
            self._first = self._clock()
        self._parallel = max(parallel, 1)

    def __call__(self, message: str, weight: float | None = None, *, done: bool = False) -> None:
        """Announce the next step: starting now, or (``done``) complete now."""
        now = self._clock()
        if self._first is None:
            self._first = now
        self._seen.append(self._weight(len(self._seen), weight))
        self.done += 1
        self._at, self._message, self._finished = now, message, done
        left = self.left(now)
        text = f"[{min(self.done, self.total)}/{self.total}] {message}"
        before = _state.emitted
        self.say(text + (f"  (~{duration(left)} left)" if left is not None else ""))
        if _said(before):
            _state.current = lambda _now: self.describe()

    def describe(self, now: float | None = None) -> str:
        """The heartbeat: the current step, its time so far and the time left."""
        now = self._clock() if now is None else now
        text = (f"  .. [{min(self.done, self.total)}/{self.total}] {self._message}: "
                f"{duration(now - self._at)} in this step")
        estimate = self._estimate(now)
        if estimate is None:
            return text
        current, rest, overrun = estimate
        if not overrun:
            return text + f", ~{duration(current + rest)} left"
        return text + (", longer than the steps so far" if rest < 0.5
                       else f", longer than the steps so far; ~{duration(rest)} left after it")


class Work:
    """Progress through units of work, reported by the code doing it: ``work(done, total, message)``
    (a :data:`WorkHook`) says that ``done`` of ``total`` units are complete (``unit="%"``: shown as a
    percentage of ``total``, for units of weighted work). The time left is the
    measured rate of completed units (from the first report on, or from the start when the first
    report already counts work) times the units left. Updates are status lines (:func:`status`), at
    most one per ``every`` seconds (default: 0.25 on a terminal, 2 elsewhere) unless the work is
    complete; once it is, the heartbeat says for how long the command has gone on since."""

    def __init__(self, what: str, total: float | None = None, *, unit: str = "",
                 say: Callable[[str], None] | None = None, clock: Callable[[], float] | None = None,
                 every: float | None = None) -> None:
        self.what, self.total, self.unit = what, total, unit
        self.every = every if every is not None else (0.25 if is_terminal() else 2.0)
        self.say = say or status
        self._clock = clock or time.monotonic
        self._start = self._clock()
        self._first: tuple[float, float] | None = None  # (time, done) of the first report
        self._last: tuple[float, float] = (self._start, 0.0)
        self._shown = -float("inf")
        self._message = ""

    @property
    def complete(self) -> bool:
        return self.total is not None and self._last[1] >= self.total

    def __call__(self, done: float, total: float | None = None, message: str = "") -> None:
        now = self._clock()
        if total is not None:
            self.total = total
        if self._first is None:
            self._first = (now, done)
        self._last, self._message = (now, done), message
        if now - self._shown < self.every and not self.complete:
            return
        self._shown = now
        before = _state.emitted
        self.say(self.describe(now, heartbeat=False))
        if _said(before):
            _state.current = lambda _now: self.describe()

    def rate(self) -> float | None:
        """Seconds per unit of work, from the completed units."""
        t1, d1 = self._last
        t0, d0 = self._start, 0.0
        if self._first is not None and self._first[1] < d1 and self._first[1] == 0:
            t0 = self._first[0]  # a report of no work yet: the work started then
        elif self._first is not None and 0 < self._first[1] < d1:
            t0, d0 = self._first
        return (t1 - t0) / (d1 - d0) if d1 > d0 else None

    def left(self, now: float | None = None) -> float | None:
        """Seconds left at ``now``, or None before any unit has completed."""
        rate = self.rate()
        if self.total is None or rate is None:
            return None
        now = self._clock() if now is None else now
        t1, d1 = self._last
        return max(rate * (self.total - d1) - (now - t1), 0.0)

    def describe(self, now: float | None = None, heartbeat: bool = True) -> str:
        """The update (``heartbeat``: the heartbeat line, after the work is complete how long ago)."""
        now = self._clock() if now is None else now
        t1, done = self._last
        if self.unit == "%" and self.total:
            head = f"{self.what}: {100 * done / self.total:.0f} %"
        else:
            count = f"{done:,.0f}" + (f"/{self.total:,.0f}" if self.total is not None else "")
            head = f"{self.what}: {count}{f' {self.unit}' if self.unit else ''}"
        if self._message:
            head += f", {self._message}"
        if self.complete:
            return (f"  .. {head}, done {duration(now - t1)} ago" if heartbeat
                    else f"{head}  (done in {duration(t1 - self._start)})")
        left = self.left(now)
        text = f"{head}  ({duration(now - self._start)}" + (f", ~{duration(left)} left)" if left is not None
                                                             else ")")
        return f"  .. {text}" if heartbeat else text


def _heartbeat_due(now: float, tty: bool) -> bool:
    silent, since_progress = now - _state.last_output, now - _state.last_progress
    if since_progress < max(HEARTBEAT_AFTER, min(1.5 * _state.cadence, _CADENCE_MAX)):
        return False  # (updates that come regularly, e.g. one per layer, need no heartbeat between)
    if tty:
        return silent >= _TTY_EVERY
    return silent >= max(HEARTBEAT_AFTER, min(_LINE_EVERY_MAX, since_progress / 4))


def heartbeat(now: float | None = None) -> bool:
    """Write a heartbeat if one is due (what :func:`watch`'s thread calls); returns whether it did."""
    now = clock() if now is None else now
    with _lock:
        describe = _state.current
        if _verbosity < 0 or describe is None or not _heartbeat_due(now, is_terminal()):
            return False
        try:
            text = describe(now)
        except Exception:  # a heartbeat never breaks the command
            return False
        _emit(text, transient=True, heartbeat=True, now=now)
        return True


class _StdoutGuard:
    """sys.stdout while a status line may be open on the same terminal: output first removes it."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if text:
            _clear_status()
        return self._stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextmanager
def watch(poll: float = 0.25) -> Iterator[None]:
    """Heartbeats while the block runs (a daemon thread), and no status line left open after it."""
    with _lock:
        _state.current, _state.open, _state.cadence = None, False, 0.0
        _state.last_output = _state.last_progress = clock()
    if _verbosity < 0:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(poll):
            heartbeat()

    thread = threading.Thread(target=beat, name="tsar-heartbeat", daemon=True)
    stdout = sys.stdout
    guarded = is_terminal() and is_terminal(stdout)
    if guarded:
        sys.stdout = _StdoutGuard(stdout)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if guarded and isinstance(sys.stdout, _StdoutGuard):
            sys.stdout = stdout
        _end_status()
        _state.current = None
