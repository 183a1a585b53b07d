"""The partner thread (fastgru/_partner.py) put in a state a test decides, so that what a test asserts
of it does not depend on how fast anything runs.

Left alone, whether a one-row call takes the partner, and whether the partner takes its part in
time, depend on the clock: a call takes a sleeping partner only in a burst (it began within
FASTGRU_SPIN_US of the end of the previous one-row call), the partner sleeps after FASTGRU_SPIN_US
without a job, and a call that finishes its own part before the partner arrives withdraws the
partner's (``_kernels/pair.py``, ``finish``). Under emulation (CI's aarch64 step) or on a loaded
host a call, and the Python between two calls, take 10 to 50 times longer, and a test that relied on
them being short enough fails now and then. So:

- ``partner_on_a_clock``: whether a call takes the partner, decided by the calls and by a clock the
  test moves, with no thread (a call that takes the partner runs both halves itself: the same
  kernel). For the rules of ``_partner.Partner``: which call of a burst takes it, which wakes it.
- ``spinning_partner``: a partner thread of the test's own that, once serving, spins until the
  test ends instead of sleeping after FASTGRU_SPIN_US: every call finds it awake, whatever the
  time between calls, and it takes a job as soon as its thread runs. For the tests that the
  partner really takes its part ("run_pair+", a wavefront's "wave"): they call until it has, with
  ``until``, whose limit only stops a hang.
"""

import contextlib
import time
import types

import pytest

from fastgru import _partner

#: The spin, in microseconds, of ``spinning_partner``'s thread: an hour, so it never sleeps by itself
#: within a test.
FOREVER_US = 3_600_000_000

#: Seconds ``until`` and ``spinning_partner`` give a thread before they fail: a guard against a hang
#: only, never a deadline a passing run comes near (a thread that is running does what they wait
#: for within microseconds).
HANG_SECONDS = 600


class Clock:
    """The clock a ``partner_on_a_clock`` reads: it stands still until the test moves it."""

    def __init__(self):
        self.now = 1000.0

    def perf_counter(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


@contextlib.contextmanager
def partner_on_a_clock():
    """``with partner_on_a_clock() as (partner, clock):`` a partner (``_partner.PARTNER`` meanwhile)
    that has no thread: it is asleep until a call wakes it, and then awake until the block ends
    (``partner.asleep`` is the test's to set, as the thread sets it when its spin ends); a call
    that takes it posts its part to a mailbox nobody serves, withdraws it and runs it itself, on
    the same kernel. Its burst rule reads ``clock``, which moves only by ``clock.advance(s)``:
    calls with no advance between them are a burst, calls ``2 * _partner.SPIN_US`` apart are not."""
    clock = Clock()
    with pytest.MonkeyPatch.context() as patch:
        _partner.PARTNER.nap()
        partner = _partner.Partner()
        assert partner.enabled, _partner.off_reason()
        patch.setattr(partner, "_start", lambda: None)  # no thread: wake() only marks it awake
        patch.setattr(_partner, "time", types.SimpleNamespace(perf_counter=clock.perf_counter, sleep=time.sleep))
        patch.setattr(_partner, "PARTNER", partner)
        yield partner, clock


@contextlib.contextmanager
def spinning_partner():
    """``with spinning_partner() as partner:`` a partner thread of the block's own
    (``_partner.PARTNER`` meanwhile), serving when the block starts, that spins between jobs until
    the block ends (FASTGRU_SPIN_US an hour: ``FOREVER_US``); stopped after. The process's own
    partner is asked to nap meanwhile."""
    with pytest.MonkeyPatch.context() as patch:
        _partner.PARTNER.nap()
        patch.setattr(_partner, "SPIN_US", FOREVER_US)
        partner = _partner.Partner()
        assert partner.enabled, _partner.off_reason()
        patch.setattr(_partner, "PARTNER", partner)
        partner.wake()
        try:
            # its first start may compile (or load) its loop: minutes under emulation
            assert partner.serving.wait(HANG_SECONDS), "the partner thread did not start"
            assert partner.enabled, "the partner thread found no counter that advances"
            yield partner
        finally:
            assert partner.stop(timeout=HANG_SECONDS), "the partner thread did not stop"


def until(done, call, what):
    """``call()`` until ``done()`` (checked after each call); fails, saying ``what`` was not seen, only
    after HANG_SECONDS. Returns the number of calls."""
    end = time.monotonic() + HANG_SECONDS
    calls = 0
    while True:
        call()
        calls += 1
        if done():
            return calls
        assert time.monotonic() < end, f"{what}: not after {calls} calls in {HANG_SECONDS} s"
