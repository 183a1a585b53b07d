"""The partner thread (fastgru/_partner.py) that takes half of a one-row call: it gives the bits
of one thread, it is really used, it sleeps and wakes, it can be turned off, and a process with
it exits and forks cleanly."""

import os
import subprocess
import sys
import textwrap
import time

import numba
import numpy as np
import pytest
from conftest import watch_entries
from partner_control import HANG_SECONDS, partner_on_a_clock, spinning_partner, until

import fastgru
from fastgru import _partner, _tuning
from fastgru._kernels import pair

pytestmark = [
    pytest.mark.skipif(not _partner.PARTNER.enabled, reason=f"no partner thread ({_partner.off_reason()})"),
    pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba has a single thread here"),
]


def _cell(h=256, lbr=False, seed=0):
    rng = np.random.default_rng(seed)
    scale = 1 / np.sqrt(h)
    op = fastgru.GRUCell(
        rng.uniform(-scale, scale, (3 * h, h)).astype(np.float32),
        rng.uniform(-scale, scale, (3 * h, h)).astype(np.float32),
        rng.uniform(-scale, scale, (4 if lbr else 3) * h).astype(np.float32),
        linear_before_reset=lbr,
    )
    return op, rng.standard_normal((1, h)).astype(np.float32), rng.standard_normal((1, h)).astype(np.float32)


def _taken(monkeypatch):
    """Record the pair driver's answers, by the full path or a plan (1 when the partner took the job; a
    call the partner does not join runs run_serial instead, unrecorded)."""
    answers = []

    def see(kinds, answer):
        if "pair" in kinds:
            answers.append(answer)

    watch_entries(monkeypatch, see)
    return answers


def _wait_until(condition, seconds=2.0):
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.001)
    return True


def _until_taken(call, want, answers, calls=300):
    """``calls`` calls, then more until the partner has taken a job, each compared with ``want``; in a
    ``spinning_partner`` block, where the partner takes a job as soon as its thread runs (the limit,
    HANG_SECONDS, only stops a hang)."""
    end = time.monotonic() + HANG_SECONDS
    k = 0
    while k < calls or (sum(answers) == 0 and time.monotonic() < end):
        for g, w in zip(call(), want, strict=True):
            np.testing.assert_array_equal(g, w)
        k += 1


def test_a_cell_of_256_units_takes_the_pair_path(kernels_run):
    """With the default tuning, a cell of 256 units shares its row with an awake partner, which takes
    its half (``spinning_partner``: awake whatever the time between calls)."""
    op, x, h = _cell()
    op(x, h), op(x, h)  # the full path, then the plan's first call: both compile (or load) their kernels
    with spinning_partner():
        kernels_run.clear()
        until(lambda: "run_pair+" in kernels_run, lambda: op(x, h), "the partner taking a half")
    assert {name.rstrip("+") for name in kernels_run} == {"run_pair"}


@pytest.mark.parametrize("lbr", [False, True])
def test_the_partner_takes_half_and_the_bits_do_not_change(monkeypatch, lbr):
    op, x, h = _cell(lbr=lbr)
    with fastgru.threads(1):
        want = op(x, h)  # one thread: the calling thread runs both halves
    monkeypatch.setattr(_tuning, "PAIR_WAKE_FLOPS", 0)  # every call shares its row, waking the partner
    answers = _taken(monkeypatch)
    with spinning_partner():
        _until_taken(lambda: (op(x, h),), (want,), answers)
    # On a quiet machine the spinning partner takes nearly every job; on a busy one at least some.
    assert sum(answers) > 0 and len(answers) >= 300


def test_a_sleeping_partner_is_woken_by_a_burst_of_calls_only(kernels_run):
    """Calls further apart than FASTGRU_SPIN_US run alone and leave a sleeping partner asleep; in a
    burst the second call wakes it and the later ones take it, before it has arrived (it joins when
    it does). The partner's state is the calls' and a clock's (``partner_on_a_clock``), so that
    neither the host's speed nor an emulator's changes what the rule decides."""
    op, x, h = _cell(seed=1)
    with fastgru.threads(1):
        want = op(x, h)
    with partner_on_a_clock() as (partner, clock):
        kernels_run.clear()
        for _ in range(4):
            clock.advance(2 * _partner.SPIN_US * 1e-6)
            np.testing.assert_array_equal(op(x, h), want)  # alone: no call ended shortly before
        assert kernels_run == ["run_serial"] * 4 and partner.asleep
        clock.advance(2 * _partner.SPIN_US * 1e-6)
        for _ in range(5):  # a burst
            np.testing.assert_array_equal(op(x, h), want)
        assert kernels_run[4:] == ["run_serial"] * 2 + ["run_pair"] * 3 and not partner.asleep


def test_a_sleeping_partner_once_woken_takes_its_half_again(kernels_run):
    """The partner's thread, asleep after a nap, woken by the calls, takes their halves again (it then
    spins until the test ends: ``spinning_partner``, called until it has)."""
    op, x, h = _cell(seed=1)
    with fastgru.threads(1):
        want = op(x, h)
    with spinning_partner() as partner:
        partner.nap()
        until(lambda: pair.is_asleep(partner.mailbox), lambda: time.sleep(0.001), "the partner asleep after a nap")
        kernels_run.clear()
        until(
            lambda: "run_pair+" in kernels_run,
            lambda: np.testing.assert_array_equal(op(x, h), want),
            "the woken partner taking a half",
        )


def test_calls_longer_than_the_spin_take_the_partner_in_a_burst(kernels_run):
    """A burst of one-row calls that each take longer than the partner spins, and are too short to
    wake it first, still shares its rows: the call after a wake-up takes the partner on its way
    (it joins when it arrives) instead of finding it asleep again at every call. Here the partner
    never comes, and falls asleep again during each call that took it, as its thread does when its
    spin ends before the call does (the rule's worst case; ``partner_on_a_clock``): every other
    call of the burst still takes it."""
    rng = np.random.default_rng(3)
    h, i, s = 256, 128, 200  # about 2 ms of one core, under PAIR_WAKE_FLOPS
    assert 6 * s * h * (h + i) < _tuning.PAIR_WAKE_FLOPS
    op = fastgru.GRUSequence(
        rng.uniform(-0.1, 0.1, (1, 3 * h, i)).astype(np.float32),
        rng.uniform(-0.1, 0.1, (1, 3 * h, h)).astype(np.float32),
        np.zeros((1, 3 * h), np.float32),
    )
    x, h0, lengths = rng.standard_normal((1, s, i)).astype(np.float32), np.zeros((1, 1, h), np.float32), [s]
    with fastgru.threads(1):
        want = op(x, h0, lengths)
    with partner_on_a_clock() as (partner, clock):
        clock.advance(2 * _partner.SPIN_US * 1e-6)
        kernels_run.clear()
        for _ in range(20):  # back to back, as a server's burst
            for got, expected in zip(op(x, h0, lengths), want):
                np.testing.assert_array_equal(got, expected)
            if kernels_run[-1] == "run_pair":
                partner.asleep = True  # it had not come, and its spin ended during the call
    # the first call alone; then each call that finds the partner asleep runs alone and wakes it, and
    # the next one takes it (before this was fixed they all ran alone)
    assert kernels_run == ["run_serial"] + ["run_serial", "run_pair"] * 9 + ["run_serial"], kernels_run


def test_a_sequence_row_with_the_partner_matches_one_thread(monkeypatch):
    """An AUGRU row: its attention scores reach the partner through the mailbox too."""
    rng = np.random.default_rng(3)
    h, i, s = 256, 16, 40
    op = fastgru.AUGRUSequence(
        rng.uniform(-0.06, 0.06, (1, 3 * h, i)).astype(np.float32),
        rng.uniform(-0.06, 0.06, (1, 3 * h, h)).astype(np.float32),
        rng.uniform(-0.06, 0.06, (1, 3 * h)).astype(np.float32),
    )
    inputs = (
        rng.standard_normal((1, s, i)).astype(np.float32),
        rng.standard_normal((1, 1, h)).astype(np.float32),
        np.array([s - 3]),
        rng.uniform(0, 1, (1, s, 1)).astype(np.float32),
    )
    with fastgru.threads(1):
        want = op(*inputs)
    monkeypatch.setattr(_tuning, "PAIR_WAKE_FLOPS", 0)
    answers = _taken(monkeypatch)
    with spinning_partner():
        _until_taken(lambda: op(*inputs), want, answers, calls=20)
    assert sum(answers) > 0


@pytest.mark.parametrize("length", [0, 7, 30])
def test_a_stream_of_one_row_with_the_partner_equals_one_call(monkeypatch, length):
    """Streams keep a row's state across chunks (the kernels' keep flag), on the pair path too
    (every call shares its row: each wakes the partner rather than run alone)."""
    monkeypatch.setattr(_tuning, "PAIR_WAKE_FLOPS", 0)
    rng = np.random.default_rng(4)
    h, i, s = 256, 8, 30
    op = fastgru.GRUSequence(
        rng.uniform(-0.06, 0.06, (1, 3 * h, i)).astype(np.float32),
        rng.uniform(-0.06, 0.06, (1, 3 * h, h)).astype(np.float32),
        rng.uniform(-0.06, 0.06, (1, 4 * h)).astype(np.float32),
        linear_before_reset=True,
    )
    X, h0 = rng.standard_normal((1, s, i)).astype(np.float32), rng.standard_normal((1, 1, h)).astype(np.float32)
    lengths = np.array([length])
    answers = _taken(monkeypatch)
    Y, Ho = op(X, h0, lengths)
    stream = op.stream(h0, lengths)
    ys = [stream(X[:, a:b]) for a, b in ((0, 10), (10, 20), (20, 30))]
    np.testing.assert_array_equal(np.concatenate(ys, axis=2), Y)
    np.testing.assert_array_equal(stream.Ho, Ho)
    assert len(answers) == 4  # every call ran the pair kernel


def _python(code, **env):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


_CELL = """
    import threading, numpy as np, fastgru
    from fastgru import _partner
    rng = np.random.default_rng(0)
    h = 256
    op = fastgru.GRUCell(rng.uniform(-.06, .06, (3 * h, h)).astype(np.float32),
                         rng.uniform(-.06, .06, (3 * h, h)).astype(np.float32))
    x, h0 = rng.standard_normal((1, h)).astype(np.float32), np.zeros((1, h), np.float32)
    with fastgru.threads(1):
        want = op(x, h0)
    partners = lambda: sum(t.name == "fastgru-partner" for t in threading.enumerate())
"""


def test_parallel_work_puts_the_partner_to_sleep():
    # The partner spins for 100 s here: only a nap puts it to sleep within the test.
    done = _python(
        _CELL
        + """
    import time
    from fastgru._kernels import pair
    partner = _partner.PARTNER
    partner.wake()
    assert partner.serving.wait(120)
    op(x, h0)
    spinning = not pair.is_asleep(partner.mailbox)
    big = fastgru.GRUSequence(rng.uniform(-.1, .1, (1, 192, 64)).astype(np.float32),
                              rng.uniform(-.1, .1, (1, 192, 64)).astype(np.float32), np.zeros((1, 192), np.float32))
    X, state = rng.standard_normal((32, 20, 64)).astype(np.float32), np.zeros((32, 1, 64), np.float32)
    assert big._packed.flops(32, 20) >= fastgru._tuning.SERIAL_BELOW_FLOPS
    big(X, state, np.full(32, 20))
    end = time.monotonic() + 50  # a guard only: far below the spin, far above a nap's microseconds
    while not pair.is_asleep(partner.mailbox) and time.monotonic() < end:
        time.sleep(0.001)
    print(spinning, pair.is_asleep(partner.mailbox))
    """,
        FASTGRU_SPIN_US="100000000",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]


def test_spin_us_0_turns_the_partner_off():
    done = _python(
        _CELL
        + """
    from fastgru import _paths
    got = op(x, h0)
    print(_partner.PARTNER.enabled, _paths.choose(1, 1, 1, 256, op._packed.flops(1, 1)), partners(),
          np.array_equal(got, want))
    """,
        FASTGRU_SPIN_US="0",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "serial", "0", "True"]


def test_a_bad_spin_us_says_what_is_wrong():
    done = _python("import fastgru", FASTGRU_SPIN_US="1ms")
    assert done.returncode != 0
    assert "ValueError: FASTGRU_SPIN_US is '1ms'; expected a whole number of microseconds" in done.stderr


def test_a_process_with_a_spinning_partner_exits_at_once():
    # The partner spins for 100 s here, so it is spinning when the process exits.
    done = _python(
        _CELL
        + """
    import time
    from fastgru._kernels import pair
    for _ in range(50):
        assert np.array_equal(op(x, h0), want)
    print(partners(), pair.is_asleep(_partner.PARTNER.mailbox), time.monotonic())
    """,
        FASTGRU_SPIN_US="100000000",
    )
    assert done.returncode == 0, done.stderr
    count, asleep, printed = done.stdout.split()
    assert (count, asleep) == ("1", "False")
    # exit took the partner down at once, not after its 100 s spin (a loaded host may take seconds)
    assert time.monotonic() - float(printed) < 50


def test_a_forked_child_makes_its_own_partner():
    done = _python(
        _CELL
        + """
    import multiprocessing
    _partner.PARTNER.wake()  # the parent's partner runs
    print(partners())

    def child(queue):
        before, same = partners(), True
        for _ in range(50):  # a burst of calls starts the child's own partner
            same = same and bool(np.array_equal(op(x, h0), want))
            if partners():
                break
        queue.put((before, same, partners()))

    queue = multiprocessing.get_context("fork").Queue()
    process = multiprocessing.get_context("fork").Process(target=child, args=(queue,))
    process.start()
    print(*queue.get(timeout=120))
    process.join(60)
    print(process.exitcode)
    """,
        FASTGRU_SPIN_US="100000000",  # the child's calls a burst (within 100 s of each other), however slow the host
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "0", "True", "1", "0"]


def test_the_partner_thread_compiles_nothing():
    """The partner's thread compiles nothing itself (its kernels are compiled by the thread that starts
    it): a thread compiling holds Numba's compiler lock, and a process forked meanwhile inherits the
    lock held and hangs at its first compilation. Here the counter the thread reads first takes the
    lock for a second the first time it is called, as compiling it would."""
    done = _python(
        """
        import os, threading, time, fastgru
        from fastgru import _partner
        from numba.core.compiler_lock import global_compiler_lock

        counter, first, called = _partner._cycles, [True], threading.Event()

        def compiled_once():
            if first:
                first.clear()
                with global_compiler_lock:
                    called.set()
                    time.sleep(1.0)
            return counter()

        _partner._cycles = compiled_once
        _partner.PARTNER.wake()
        assert called.wait(600)  # its first call, by whichever thread: then the fork, not after a guess
        pid = os.fork()
        if pid == 0:
            os._exit(0 if global_compiler_lock._lock.acquire(timeout=5) else 1)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"], "the forked child found Numba's compiler lock held"


def test_stop_stops_the_thread_spinning_or_asleep():
    done = _python(
        _CELL
        + """
    partner = _partner.PARTNER
    for _ in range(50):
        op(x, h0)  # a burst: the partner spins
    spinning = partners() == 1 and not pair.is_asleep(partner.mailbox)
    thread = partner._thread
    print(spinning, partner.stop(timeout=60), thread.is_alive(), partners(), np.array_equal(op(x, h0), want))
    """.replace("partner = _partner.PARTNER", "from fastgru._kernels import pair\n    partner = _partner.PARTNER"),
        FASTGRU_SPIN_US="100000000",
    )
    assert done.returncode == 0, done.stderr
    # Stopped, joined, and later calls run without it (alone).
    assert done.stdout.split() == ["True", "True", "False", "0", "True"]
