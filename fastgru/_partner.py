"""fastgru's partner thread: a second worker for one-row calls, kept spinning between calls.

A batch-1 call is bound by streaming its packed weights, which two cores do about twice as fast
as one, each from its own cache. Sharing the row through Numba's threading layer costs a
parallel region per call, tens of microseconds after a pause: as much as a 256-unit cell takes on
one thread. The partner is one daemon thread that waits for jobs in compiled code without the
GIL (``_kernels.pair.serve``): a call posts its job to a mailbox and runs its own half; the
partner, spinning, picks the other half up within a microsecond. When it has had no job for
``FASTGRU_SPIN_US`` microseconds it goes to sleep; a call never waits for it to start (see
``Partner`` for when it is woken), and does both halves itself if the partner comes too late.

One call at a time uses the partner (others take the usual paths), and only while the process-wide
thread budget (``_threading``) grants it two threads.

Environment: ``FASTGRU_SPIN_US`` (default ``_tuning.SPIN_US``, 1000): how long the partner spins
after its last job before it sleeps, burning one core meanwhile as ONNX Runtime's spinning
threads do; ``0``: no partner, one-row calls share their work through Numba's threading layer
(``run_split``). The partner needs a counter of constant rate that user space reads, to time its
spinning: x86's time-stamp counter or aarch64's generic timer (``_kernels.atomics.cycles``); on
other CPUs it is off.
"""

import atexit
import os
import platform
import threading
import time

from numba import config

from . import _tuning
from ._config import kernel
from ._kernels import pair
from ._kernels.atomics import STEADY_COUNTER, cycles
from ._threading import give_pair, hold_pair, take_pair


def _spin_us(text):
    """FASTGRU_SPIN_US's value: a whole number of microseconds, at least 0."""
    if not text.strip().isdigit():
        raise ValueError(
            f"FASTGRU_SPIN_US is {text!r}; expected a whole number of microseconds (0 turns the partner thread off)"
        )
    return int(text)


#: Microseconds the partner spins without a job before it sleeps; 0: no partner.
SPIN_US = _spin_us(os.environ.get("FASTGRU_SPIN_US", str(_tuning.SPIN_US)))
_SPIN_SECONDS = SPIN_US * 1e-6


def off_reason():
    """Why this process has no partner thread, or '' when it has one (it may still turn itself off
    when it starts, if the counter does not advance: ``Partner._serve``)."""
    if SPIN_US == 0:
        return "FASTGRU_SPIN_US=0"
    if config.DISABLE_JIT:
        return "NUMBA_DISABLE_JIT: the kernels run as Python"
    if not STEADY_COUNTER:
        return f"{platform.machine()} has no user-space counter fastgru reads (x86-64 and aarch64 have)"
    return ""


@kernel()
def _cycles():
    return cycles()


def _cycles_per_second():
    """The cycle counter's rate, measured over 2 ms (0 where the machine has no such counter)."""
    c0, t0 = _cycles(), time.perf_counter()
    time.sleep(0.002)
    return max(0.0, (_cycles() - c0) / (time.perf_counter() - t0))


class Partner:
    """The partner thread and its mailbox: a one-row call takes it through ``Shared`` and runs
    ``run_pair`` with ``partner.mailbox`` when it came, else alone. ``nap``
    before other parallel work, so that the partner does not spin on a core it needs.

    A sleeping partner takes tens of microseconds to wake, and the wake-up slows the call that
    wakes it. So a short call takes the partner only if it spins, and otherwise runs alone and
    then wakes it if it began within ``FASTGRU_SPIN_US`` of the end of the previous one-row call:
    in a burst of calls the partner joins from the third call on, and calls spaced further apart
    neither wait for it nor keep it spinning. A long call (``wake``) wakes it first: the partner
    takes its part of the steps that remain when it arrives.
    """

    @property
    def enabled(self):
        """Whether one-row calls may take the partner: a change of it changes the roads calls take,
        so it counts as a change of the tuning (``_tuning.GENERATION``: plans are made again)."""
        return self._enabled

    @enabled.setter
    def enabled(self, value):
        self._enabled = value
        _tuning.GENERATION += 1

    def __init__(self):
        self.enabled = not off_reason()
        self.mailbox = pair.new_mailbox()
        self._wake = threading.Event()
        self._thread = None
        self._last_end = -1.0  # time.perf_counter() at the end of the latest one-row call (``Shared``)
        #: The thread sleeps (or has not started): set by it when it stops spinning, cleared when
        #: it is woken. A fast path only: the mailbox's ASLEEP, set before, is what counts.
        self.asleep = True
        #: Set once the thread serves (a few milliseconds after ``wake`` starts it).
        self.serving = threading.Event()

    def wake(self):
        """Start the partner thread, or wake it if it sleeps (it then spins for SPIN_US)."""
        if not self.enabled:
            return
        if self._thread is None:
            self._start()
        elif pair.is_asleep(self.mailbox):
            pair.clear_nap(self.mailbox)
            self._wake.set()
        self.asleep = False

    def nap(self):
        """Ask the partner, if it spins, to sleep until the next ``wake``."""
        if self._thread is not None and not pair.is_asleep(self.mailbox):
            pair.ask_to_nap(self.mailbox)

    def _start(self):
        # Compile (or load) the partner's loop here, as the first call of any kernel does: in the
        # new thread, Numba's compiler would hold the GIL while the caller goes on.
        stopped = pair.new_mailbox()
        pair.ask_to_stop(stopped)
        pair.serve(stopped, 0)
        pair.jobs_worker()  # the callback that runs posted jobs; each job's own when a call first needs it
        _cycles()  # and the counter its thread reads first: a thread that compiles holds Numba's compiler
        # lock, and a process forked meanwhile would inherit it held, and hang at its first compilation
        self._thread = threading.Thread(target=self._serve, name="fastgru-partner", daemon=True)
        self._thread.start()

    def _serve(self):
        rate = _cycles_per_second()
        if rate <= 0:
            self.enabled = False
            return
        spin_cycles = int(rate * SPIN_US * 1e-6)
        self.serving.set()
        while True:
            pair.serve(self.mailbox, spin_cycles)  # without the GIL; returns asleep or stopped
            if pair.is_stopped(self.mailbox):
                return
            self.asleep = True
            self._wake.wait()
            self._wake.clear()
            self.asleep = False

    def stop(self, timeout=1.0):
        """Stop the thread (at exit): it leaves its loop at once, spinning or asleep. Returns whether it
        has stopped within ``timeout`` seconds (False while a call holds the partner that long)."""
        self.enabled = False
        if self._thread is None:
            return True
        if not hold_pair(timeout):
            return False
        try:
            pair.ask_to_stop(self.mailbox)
            self._wake.set()
            self._thread.join(timeout=timeout)
            return not self._thread.is_alive()
        finally:
            give_pair()


class Shared:
    """The partner thread and a second thread of the budget for the one-row calls of one plan (a
    plan is its thread's, and runs one call at a time): ``take(wake)`` takes both before a call, in
    one call of ``_threading`` (``take_pair``), and ``release()`` gives them back after it. One
    object per plan, taken and released by every call: nothing is made per call, and it is not a
    context manager, whose entry would be another call on the call's way to the kernels.

    After ``take``, ``mailbox`` is the partner's when both came, else ``alone`` (None: the call
    runs on its own thread; a mailbox that nobody serves: the calling thread runs the partner's
    part too), and nothing of the budget is held then; ``count`` is the calling thread's count of
    threads (1: the call has no second thread). The partner's rule (``Partner``): a call takes it
    if it spins, or, with ``wake``, sleeps (it is then woken, and joins the call when it can); a
    call that had the budget's two threads but not the partner wakes it after the call when it
    began within SPIN_US of the end of the previous such call (a burst); its end is the next
    call's reference. The clock is read once per call that takes the partner, twice otherwise."""

    __slots__ = ("alone", "partner", "taken", "burst", "mailbox", "count")

    def __init__(self, alone):
        self.alone, self.mailbox, self.partner, self.count = alone, alone, None, 1

    def take(self, wake):
        """Take the partner and a second thread for a call; ``wake``: the call is long enough to
        wake a sleeping partner."""
        partner = PARTNER
        self.count, held = take_pair(partner._enabled and (wake or not partner.asleep))
        if held == 2:
            self.partner, self.taken, self.mailbox = partner, True, partner.mailbox
            if wake and partner.asleep:
                partner.wake()  # it joins the call when it arrives
            return
        self.mailbox = self.alone
        if held:  # two threads, not the partner: ``release`` wakes it if the call is one of a burst
            self.partner, self.taken = partner, False
            self.burst = time.perf_counter() - partner._last_end < _SPIN_SECONDS

    def release(self):
        """Give back the budget's threads and the partner (once: a second call does nothing)."""
        partner = self.partner
        if partner is None:
            return
        self.partner = None
        if self.taken:
            give_pair()
        elif self.burst and partner._enabled:
            partner.wake()  # a call of a burst ran alone: the partner joins the next ones
        partner._last_end = time.perf_counter()


PARTNER = Partner()
atexit.register(lambda: PARTNER.stop())


def _after_fork():
    """A forked child has no partner thread: it makes its own when it needs one. No call of the
    child holds the partner (the thread that forked is in none), whatever the parent's did."""
    global PARTNER
    PARTNER = Partner()
    give_pair()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
