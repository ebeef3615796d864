"""Progress that tells the truth (tsar.console): time-left estimates from measured rates within a
factor of two on uneven steps, one line per update off a terminal, ``\\r`` updates on one, and
heartbeats that leave no silent stretch."""

from __future__ import annotations

import io
import itertools
import time

import pytest

from tsar import console

# Uneven steps: expected costs (e.g. layer sizes) spanning two orders of magnitude, and the true
# durations off those costs by up to +-30 % (a real machine's noise).
WEIGHTS = [1.0, 40.0, 2.0, 100.0, 5.0, 60.0, 3.0, 80.0, 10.0, 30.0, 1.0, 50.0]
NOISE = [1.3, 0.8, 1.2, 0.75, 1.25, 1.0, 0.7, 1.3, 0.9, 1.1, 1.3, 0.7]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def _default_verbosity():
    console.set_verbosity(0)
    yield
    console.set_verbosity(0)


def _within_two(estimate: float, truth: float) -> bool:
    return truth / 2 <= estimate <= truth * 2


@pytest.mark.parametrize("per_call", [False, True], ids=["weights", "weight="])
def test_steps_estimate_within_a_factor_of_two_on_uneven_steps(per_call: bool):
    clock, said = Clock(), []
    durations = [w * n * 0.5 for w, n in zip(WEIGHTS, NOISE, strict=True)]
    steps = console.Steps(len(WEIGHTS), said.append, clock=clock,
                          weights=None if per_call else WEIGHTS)
    checked = 0
    for i, (w, d) in enumerate(zip(WEIGHTS, durations, strict=True)):
        steps(f"step {i}", weight=w if per_call else None)
        if i >= 3 and not per_call:  # a few steps done (per call: the later weights are unknown)
            for frac in (0.0, 0.5):  # at the step's start and by the heartbeat halfway through it
                truth = d * (1 - frac) + sum(durations[i + 1:])
                estimate = steps.left(clock.now + frac * d)
                assert estimate is not None and _within_two(estimate, truth), (i, frac, estimate, truth)
                checked += 1
        clock.now += d
    assert checked == 2 * (len(WEIGHTS) - 3) or per_call
    assert said[0] == "[1/12] step 0" and "left)" in said[-1]


def test_a_plain_per_step_average_would_not_be_within_two():
    """The case the weights are for: the mean step time misjudges uneven steps by far more."""
    durations = [w * n * 0.5 for w, n in zip(WEIGHTS, NOISE, strict=True)]
    worst = max(max(sum(durations[:i]) / i * (len(durations) - i) / sum(durations[i:]),
                    sum(durations[i:]) / (sum(durations[:i]) / i * (len(durations) - i)))
                for i in range(3, len(durations)))
    assert worst > 2


def test_steps_estimate_uses_completed_work_not_the_current_step():
    clock, said = Clock(), []
    steps = console.Steps(4, said.append, clock=clock)
    steps("a")
    assert steps.left() is None  # nothing completed yet: no estimate, not a guess
    clock.now += 10
    steps("b")
    assert steps.left() == pytest.approx(30)
    clock.now += 25  # b overruns: the rate slows, the estimate grows past the plain one
    assert steps.left() > 20
    assert "longer than the steps so far" in steps.describe()
    assert said == ["[1/4] a", "[2/4] b  (~30 s left)"]


def test_steps_mean_weight_for_steps_not_announced():
    clock = Clock()
    steps = console.Steps(3, lambda _m: None, clock=clock)
    steps("a", weight=1)
    clock.now += 1
    steps("b", weight=9)   # expected 9 s; the third step weighs the mean (5): 5 s
    assert steps.left() == pytest.approx(9 + 5)


def test_work_rate_from_completed_units_excludes_the_setup():
    clock, said = Clock(), []
    work = console.Work("model", 30, unit="layers", say=said.append, clock=clock, every=0)
    clock.now += 50  # setup (kernel selection, code generation) before the first layer
    work(0)
    for done in range(1, 11):
        clock.now += 2
        work(done)
    assert work.left() == pytest.approx(40)  # 20 layers at 2 s, not at (50 + 20) / 10 s
    assert said[-1] == "model: 10/30 layers  (1 min 10 s, ~40 s left)"
    for done in range(11, 31):
        clock.now += 2
        work(done)
    clock.now += 12  # a silent tail after the last layer
    assert work.describe() == "  .. model: 30/30 layers, done 12 s ago"
    assert work.describe(heartbeat=False) == "model: 30/30 layers  (done in 1 min 50 s)"


def test_work_rate_limits_its_lines_but_not_the_last():
    clock, said = Clock(), []
    work = console.Work("w", 100, say=said.append, clock=clock, every=2.0)
    for done in range(1, 101):
        clock.now += 0.1
        work(done)
    assert len(said) == 6 and said[-1].startswith("w: 100/100")


def _err(capsys) -> str:
    return capsys.readouterr().err


def test_off_a_terminal_every_update_is_a_line_of_its_own(capsys):
    console.progress("step one")
    console.progress("\rlayer 1/3", end="")   # the old carriage-return style
    console.progress("\rlayer 2/3", end="")
    console.status("layer 3/3")
    console.progress("")                      # ends a status line: nothing off a terminal
    err = _err(capsys)
    assert "\r" not in err
    assert err.splitlines() == ["step one", "layer 1/3", "layer 2/3", "layer 3/3"]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_updates_overwrite_and_lines_stay(monkeypatch):
    tty = _Tty()
    monkeypatch.setattr("sys.stderr", tty)
    console.progress("step one")
    console.status("layer 1/3")
    console.status("layer 2/3")
    console.progress("step two")   # removes the status line, then a line of its own
    console.status("layer 3/3")
    console.progress("")           # keeps the last status: a newline
    assert tty.getvalue() == ("step one\n\rlayer 1/3\x1b[K\rlayer 2/3\x1b[K\r\x1b[Kstep two\n"
                              "\rlayer 3/3\x1b[K\n")


def test_quiet_prints_nothing(capsys):
    console.set_verbosity(-1)
    console.progress("a")
    console.status("b")
    console.Steps(2)("c")
    with console.watch(poll=0.001):
        time.sleep(0.01)
    assert _err(capsys) == ""


def test_heartbeat_fills_silence_after_a_step(capsys, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(console, "clock", clock)
    with console.watch(poll=3600):  # no thread beats here: the test calls heartbeat() itself
        steps = console.Steps(3, clock=clock, weights=[1, 8, 4])
        steps("first")
        clock.now += 1
        steps("second")
        clock.now += 1
        assert not console.heartbeat()      # silent for 1 s: not yet
        clock.now += 2
        assert console.heartbeat()
        clock.now += 0.5
        assert not console.heartbeat()      # a line per gap, growing with the silence
        clock.now += 7.5                    # 11 s into a step expected to take 8
        assert console.heartbeat()
    err = _err(capsys).splitlines()
    assert err == ["[1/3] first", "[2/3] second  (~12 s left)",
                   "  .. [2/3] second: 3 s in this step, ~9 s left",
                   "  .. [2/3] second: 11 s in this step, longer than the steps so far; ~5 s left after it"]


def test_heartbeat_gaps_grow_off_a_terminal(capsys, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(console, "clock", clock)
    with console.watch(poll=3600):
        console.progress("a long step")
        beats = []
        for t in range(1, 600):
            clock.now += 1
            if console.heartbeat():
                beats.append(t)
    assert beats[0] == 2 and 10 < len(beats) < 40  # every 2 s at first, at most every 30 s later
    assert max(b - a for a, b in itertools.pairwise(beats)) <= 30
    lines = _err(capsys).splitlines()
    assert lines[1] == "  .. 2 s since: a long step" and "\r" not in "".join(lines)


def test_regular_updates_need_no_heartbeat_between_them(capsys, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(console, "clock", clock)
    with console.watch(poll=3600):
        console.progress("layer 1/30")
        clock.now += 3.5
        console.progress("layer 2/30")
        clock.now += 4
        assert not console.heartbeat()    # within 1.5 x the 3.5 s cadence of the updates
        clock.now += 2
        assert console.heartbeat()        # a layer that takes longer: a heartbeat
    assert _err(capsys).splitlines() == ["layer 1/30", "layer 2/30", "  .. 6 s since: layer 2/30"]


def test_no_heartbeat_before_a_command_says_anything(capsys, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(console, "clock", clock)
    with console.watch(poll=3600):
        clock.now += 100
        assert not console.heartbeat()
    assert _err(capsys) == ""


def test_watch_thread_beats_in_real_time(capsys, monkeypatch):
    monkeypatch.setattr(console, "HEARTBEAT_AFTER", 0.02)
    with console.watch(poll=0.005):
        console.progress("working")
        time.sleep(0.3)
    lines = _err(capsys).splitlines()
    assert lines[0] == "working" and any(line.startswith("  .. ") for line in lines[1:])


def test_a_library_callback_that_stays_silent_gets_no_heartbeat(capsys, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(console, "clock", clock)
    with console.watch(poll=3600):
        steps = console.Steps(2, lambda _m: None)  # e.g. compare(progress=None)
        steps("hidden")
        clock.now += 100
        assert not console.heartbeat()
    assert _err(capsys) == ""


def test_duration():
    assert [console.duration(s) for s in (0.4, 7, 59.6, 125, 3725)] == [
        "0 s", "7 s", "1 min 00 s", "2 min 05 s", "1 h 02 min"]



def test_steps_announced_as_they_complete():
    """Parallel jobs are announced as they complete: the clock starts at begin(), so the first
    completion's time is measured work, and the time left is the measured rate times the work left."""
    clock, said = Clock(), []
    steps = console.Steps(4, said.append, clock=clock, weights=[2, 1, 1, 4])
    steps.begin()
    clock.now += 10  # the first job (2 units) completes after 10 s
    steps("a", 2, done=True)
    clock.now += 5
    steps("b", 1, done=True)
    steps("c")  # then a step announced as it starts
    assert said == ["[1/4] a  (~30 s left)", "[2/4] b  (~25 s left)", "[3/4] c  (~25 s left)"]
    said.clear()
    steps = console.Steps(3, said.append, clock=clock)
    steps.begin(parallel=2)  # two at once: the first completion alone says nothing of the rate
    clock.now += 10
    steps("a", done=True)
    steps("b", done=True)
    assert said == ["[1/3] a", "[2/3] b  (~5 s left)"]
