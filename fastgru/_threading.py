"""Thread control: the count a calling thread asks for, and a process-wide budget of threads.

``set_num_threads``/``get_num_threads``/``threads`` are Numba's per-thread setting: each Python
thread has its own count (new threads start at ``NUMBA_NUM_THREADS``, the number of cores by
default), and every parallel kernel a thread launches uses at most that many.

Several Python threads calling fastgru at once (a thread-pool server) could each launch a
parallel region and together run more threads than there are cores. The budget prevents it: a
call that shares its work leases threads from a process-wide budget of ``BUDGET`` threads (its
own included) and gets what the running calls leave, at least its own; it never waits, so
nothing can deadlock. Numba's ``workqueue`` layer cannot run two parallel regions at once, so
with it a second concurrent call runs on its own thread. A one-row call that shares its row with
fastgru's partner thread (``_partner``) takes two threads of the budget and the partner together,
one call at a time, under the budget's one lock (``take_pair``), and gives them back with one
store (``give_pair``).

fastgru calls no BLAS (its matrix products are its own kernels), so NumPy's BLAS threads are
never involved.

The threading layer is Numba's choice (``NUMBA_THREADING_LAYER``), with one help: Numba prefers
TBB, which degrades gracefully when the cores are busy, but in a virtualenv it cannot find the
``libtbb.so.12`` that ``pip install tbb`` puts in the environment's ``lib`` folder, and silently
takes OpenMP. Before Numba starts its thread pool, fastgru loads that library (or the one
OpenVINO ships) when the layer is left to Numba's choice, at import (a few milliseconds).
"""

import contextlib
import ctypes
import glob
import os
import sys
import threading
import time

import numba

from ._validate import FastGRUError

#: Threads that the calls which share their work hold together, their calling threads included:
#: NUMBA_NUM_THREADS (by default the number of cores).
BUDGET = numba.config.NUMBA_NUM_THREADS

_lock = threading.Lock()
#: Under ``_lock``: the threads the leases hold (``busy``) and their parallel regions (``regions``),
#: the 2 threads of the one-row call that holds the partner thread, if any (``pair``: 0 or 2), and
#: whether Numba's layer runs one region at a time (``exclusive``, None until the pool starts).
_state = {"busy": 0, "regions": 0, "pair": 0, "exclusive": None}


def set_num_threads(n: int) -> None:
    """Use at most ``n`` threads in the fastgru calls of the calling thread (1 <= n <= NUMBA_NUM_THREADS).

    Per calling thread: other threads keep their own count. Results do not depend on it.
    """
    limit = numba.config.NUMBA_NUM_THREADS
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= limit:
        raise FastGRUError(f"set_num_threads: n is {n!r}; expected an integer from 1 to NUMBA_NUM_THREADS={limit}")
    numba.set_num_threads(n)


def get_num_threads() -> int:
    """The number of threads the calling thread's fastgru calls may use."""
    return numba.get_num_threads()


@contextlib.contextmanager
def threads(n: int):
    """``with fastgru.threads(n):`` run the block's fastgru calls on at most ``n`` threads.

    Applies to the calling thread only, and restores its previous count on exit.
    """
    before = numba.get_num_threads()
    set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(before)


# ------------------------------------------------------------------------------ Numba's internals
# Numba has no public way to start its pool ahead, nor a lock-free read of the calling thread's
# count; these functions are the only place fastgru touches its private module
# numba.np.ufunc.parallel (checked with Numba 0.60 to 0.68).
from numba.np.ufunc import parallel as _numba_parallel  # noqa: E402


def start_pool():
    """Start Numba's thread pool (once); returns the threading layer's name."""
    _numba_parallel._launch_threads()
    return numba.threading_layer()


def requested():
    """``numba.get_num_threads()``, the calling thread's count, without the two locks Numba takes on
    every call to check that its pool runs (0.6 µs, against 0.15 µs once the pool runs)."""
    if _numba_parallel._is_initialized:
        return _numba_parallel._get_num_threads()
    return numba.get_num_threads()


def request(n):
    """``numba.set_num_threads(n)`` for 1 <= n <= NUMBA_NUM_THREADS, unchecked once the pool runs
    (0.25 µs instead of 1.1 µs): for callers that set and restore a count around every call."""
    if _numba_parallel._is_initialized:
        _numba_parallel._set_num_threads(n)
    else:
        numba.set_num_threads(n)


def _pool_started():
    return _numba_parallel._is_initialized


# ------------------------------------------------------------------------------ the budget


def lease(wanted, count=None):
    """``with lease(wanted) as granted:`` threads for one call that shares its work: up to ``wanted``
    of the budget, its calling thread included, and the calling thread's Numba count set to
    ``granted`` meanwhile. When fewer than two are left, granted is 1: the call runs alone on its
    own thread, as a serial call does, and holds nothing of the budget. So the calls that share
    their work never hold more than BUDGET threads together, and no call waits. ``count``: the
    calling thread's count (``requested()``), when the caller has just read it."""
    return _Lease(wanted, requested() if count is None else count)


def take_pair(wanted):
    """The partner thread and two threads of the budget for a one-row call that would share its row
    with the partner (``_partner.Shared``), taken under the budget's one lock: (the calling thread's
    count, what the call holds). 2: the partner and the two threads, held until ``give_pair()``,
    when the count and the budget allow two, as ``lease(2)`` would grant them, the call ``wanted``
    the partner (it is on, and spins or is to be woken) and no other call holds it; 1: the count
    and the budget allow two, but the call does not take the partner, and holds nothing; 0: the
    call has one thread. One call at a time holds the partner. The calling thread's Numba count is
    left as it is: such a call runs no parallel region."""
    count = requested()
    if count < 2:
        return count, 0
    _lock.acquire()  # not ``with``: 80 ns more on every call (CPython 3.11)
    try:
        if _left() < 2:
            return count, 0
        if _state["pair"] or not wanted:
            return count, 1
        _state["pair"] = 2
    finally:
        _lock.release()
    return count, 2


def give_pair():
    """Give back what ``take_pair`` took (its 2): one store, without the lock, as only the holder
    writes it then; a grant that reads it a moment before sees the threads still held, and grants
    less, never more."""
    _state["pair"] = 0


def hold_pair(timeout):
    """Take the partner as a call does, whatever the budget, waiting up to ``timeout`` seconds for
    the call that holds it (``Partner.stop``: nobody posts to the mailbox meanwhile). Returns
    whether it did; ``give_pair()`` gives it back."""
    end = time.monotonic() + timeout
    while True:
        with _lock:
            if not _state["pair"]:
                _state["pair"] = 2
                return True
        if time.monotonic() > end:
            return False
        time.sleep(0.001)


def _left():
    """Threads of the budget left now (under ``_lock``): none while another call holds some with
    Numba's workqueue layer, which runs one parallel region at a time (the partner's call counts
    as one)."""
    state = _state
    if state["exclusive"] is None:
        # Start Numba's thread pool now, under the lock, to learn the layer before any launch.
        state["exclusive"] = start_pool() == "workqueue"
    if state["exclusive"] and (state["regions"] or state["pair"]):
        return 0
    return BUDGET - state["busy"] - state["pair"]


def _grant(wanted):
    """How many of ``wanted`` threads the budget grants now, held until ``give_back``: 1 (nothing
    held) when fewer than two are left (``_left``)."""
    with _lock:
        granted = min(wanted, _left())
        if granted < 2:
            return 1
        _state["busy"] += granted
        _state["regions"] += 1
    return granted


def give_back(granted):
    """Give back the ``granted`` threads (more than 1) that ``_grant`` held."""
    with _lock:
        _state["busy"] -= granted
        _state["regions"] -= 1


class _Lease:
    """``lease``'s context: a class, cheaper than a generator's context manager, and the count set
    by ``request``, unchecked."""

    __slots__ = ("wanted", "granted", "count")

    def __init__(self, wanted, count):
        self.wanted, self.count = wanted, count

    def __enter__(self):
        self.granted = granted = _grant(self.wanted)
        if granted != self.count:
            request(granted)  # the pool runs: unchecked (1 <= granted <= BUDGET)
        return granted

    def __exit__(self, *exc):
        granted = self.granted
        if granted != self.count:
            request(self.count)
        if granted > 1:
            give_back(granted)
        return False


def busy():
    """Threads the running calls hold now, the partner's call's included (read under the lock: at
    one moment)."""
    with _lock:
        return _state["busy"] + _state["pair"]


def _load_tbb():
    """Make ``libtbb.so.12`` loadable for Numba's TBB layer, if it is installed and Numba may pick it."""
    if _pool_started() or str(numba.config.THREADING_LAYER).lower() not in ("default", "tbb"):
        return
    candidates = [os.path.join(sys.prefix, "lib", "libtbb.so.12")]
    candidates += glob.glob(
        os.path.join(sys.prefix, "lib", "python*", "site-packages", "openvino", "libs", "libtbb.so.12")
    )
    for path in candidates:
        if os.path.exists(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                return
            except OSError:
                continue


_load_tbb()  # at import: numba.get_num_threads(), among others, starts Numba's pool
