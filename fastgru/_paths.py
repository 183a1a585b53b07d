"""Which kernel runs a call, on how many threads, and running it.

Four paths (``choose``): 'serial', every row on the calling thread; 'parallel', blocks of rows
(and the directions) shared among Numba's threads; and, for a single row (batch 1, one
direction), 'pair', split with fastgru's partner thread, or 'split', split in a Numba parallel
region when the partner is off. The thresholds are ``_tuning``'s, read at every call. Paths that
share work lease their threads from the process-wide budget (``_threading.lease``) and get at
least the calling thread: a call never waits for threads.
"""

import contextlib
import functools

from . import _partner, _scratch, _tuning
from ._kernels.direct import direct_ints, run_direct
from ._kernels.jobs import JOB_SIZE
from ._kernels.layout import rows_scratch, split_scratch
from ._kernels.pair import jobs_worker, run_direct_pair, run_pair
from ._kernels.planned import job_callback
from ._kernels.rows import run_parallel, run_serial
from ._kernels.split import run_split
from ._threading import lease, requested
from ._tuning import CHUNK_ROWS  # compiled into the kernels: not a run-time setting

PATHS = ("serial", "parallel", "split", "pair")


def pair_sized(n_hidden, flops):
    """Whether a call of one row and one direction is large enough for the pair path (``choose``'s
    test, the partner aside): H hidden units and ``flops`` (the products')."""
    return n_hidden >= _tuning.PAIR_FROM_HIDDEN and flops >= _tuning.PAIR_FROM_FLOPS


def choose(n_rows, n_steps, n_dirs, n_hidden, flops):
    """The path of a call of N rows of S steps, D directions, H hidden units and ``flops`` (the products')."""
    if n_rows * n_dirs == 1:
        if _partner.PARTNER.enabled and pair_sized(n_hidden, flops):
            return "pair"
        if (
            n_hidden >= _tuning.SPLIT_FROM_HIDDEN
            and n_steps >= _tuning.SPLIT_FROM_STEPS
            and flops >= _tuning.SERIAL_BELOW_FLOPS
        ):
            return "split"
        return "serial"
    return "serial" if flops < _tuning.SERIAL_BELOW_FLOPS else "parallel"


def run(packed, path, n, s, arrays, strides, keep):
    """Run ``path`` ('serial', 'parallel', 'split' or 'pair') on the kernels' ``arrays`` (X, h0,
    lengths, state_rows, att, y, ho) of N rows and S steps; ``path`` None: ``choose``'s.

    Returns the kernel that ran ('run_serial', 'run_parallel', 'run_split' or 'run_pair'), which
    may differ from the path's when the budget or the partner leaves one thread.
    """
    flops = packed.flops(n, s)
    forced = path is not None
    if path is None:
        path = choose(n, s, packed.n_dirs, packed.n_hidden, flops)
    if path == "serial":
        return _serial(packed, n, s, arrays, strides, keep)
    if path == "pair":
        return _pair(packed, n, s, arrays, strides, keep, flops, forced)
    _partner.PARTNER.nap()  # a parallel region needs the cores the partner would spin on
    with lease(requested()) as granted:
        if granted == 1 and not forced:
            return _serial(packed, n, s, arrays, strides, keep)
        if path == "split":
            _split(run_split, packed, s, arrays, strides, keep, packed.tasks(path))
            return "run_split"
        n_blocks = min(n, -(-granted // packed.n_dirs))
        call, floats, ints = _plan(packed, n, s, strides, keep, -(-n // n_blocks), packed.n_dirs * n_blocks)
        work, iwork = _scratch.work(floats, ints, packed.compute_dtype)
        run_parallel(*arrays, packed.weights, call, packed.clip, work, iwork, n_blocks, packed.tasks(path))
        return "run_parallel"


def direct(arrays, weights, call, clip, scratch, n_dirs, n_hidden, flops, path=None):
    """A direct call (``direct.py``: one row and one step from the caller's W, R and B) on the
    kernels' ``arrays`` (X, h0, lengths, att, y, ho) and ``weights`` (W, R, B), with its ``scratch``
    (floats, dtype); returns the name of the kernel that ran.

    Shared with the partner thread (``run_direct_pair``) where ``choose`` gives a call of one
    direction and these products the pair path, when the partner and a second thread of the budget
    come (``with_partner``); else ``run_direct`` on this thread. ``path`` 'serial' or 'pair'
    forces one (a forced pair without the partner runs both halves here, as ``_pair`` does)."""
    floats, dtype = scratch
    forced = path is not None
    if path is None:
        path = "pair" if n_dirs == 1 and choose(1, 1, 1, n_hidden, flops) == "pair" else "serial"
    threads = with_partner(flops >= _tuning.PAIR_WAKE_FLOPS, forced) if path == "pair" else _ALONE
    with threads as mailbox:
        if mailbox is None:
            run_direct(*arrays, *weights, call, clip, _scratch.work(floats, 0, dtype)[0])
            return "run_direct"
        work, iwork = _scratch.work(floats, _direct_ints(weights[0].shape[2], n_hidden, dtype.itemsize), dtype)
        parts = job_callback("direct_part", weights[0])
        run_direct_pair(*arrays, *weights, call, clip, work, iwork, mailbox, jobs_worker(), parts)
        return "run_direct_pair"


#: ``with_partner``'s stand-in for a call that runs on its own thread.
_ALONE = contextlib.nullcontext()


@functools.lru_cache(maxsize=256)
def _direct_ints(n_inputs, n_hidden, itemsize):
    """``direct_ints``, computed (and compiled) on the first shared call of these sizes only: the
    one-row calls that never share do not pay for its compilation on their first call."""
    return direct_ints(n_inputs, n_hidden, itemsize)


def with_partner(wake, forced=False):
    """``with with_partner(wake, forced) as mailbox:`` the partner thread and a second thread of the
    budget for one one-row call: the partner's mailbox; else (the partner neither spins nor comes,
    another call has it, or the budget is spent) None, when the call runs on its own thread, or,
    ``forced``, this thread's own mailbox, which nobody serves (the calling thread then runs the
    partner's part too). ``wake``: the call is long enough to wake a sleeping partner; else it takes
    the partner only if it spins (``_partner.Partner``)."""
    return _WithPartner(wake, forced)


class _WithPartner:
    __slots__ = ("partner", "budget", "forced")

    def __init__(self, wake, forced):
        self.partner = _partner.PARTNER.lease(wake and requested() > 1)  # a forked child makes its own
        self.budget, self.forced = None, forced

    def __enter__(self):
        if self.partner.__enter__():
            count = requested()
            self.budget = lease(min(2, count), count)
            if self.budget.__enter__() > 1:
                return self.partner.partner.mailbox
        return _scratch.mailbox() if self.forced else None

    def __exit__(self, *exc):
        if self.budget is not None:
            self.budget.__exit__(*exc)
        return self.partner.__exit__(*exc)


def _serial(packed, n, s, arrays, strides, keep):
    call, floats, ints = _plan(packed, n, s, strides, keep, n, 1)
    work, iwork = _scratch.work(floats, ints, packed.compute_dtype)
    run_serial(*arrays, packed.weights, call, packed.clip, work, iwork, 0, 0)
    return "run_serial"


def _split(kernel, packed, s, arrays, strides, keep, *addresses):
    call, floats, ints = _plan(packed, 1, s, strides, keep, 0, 2)
    work, iwork = _scratch.work(floats, ints, packed.compute_dtype)
    return kernel(*arrays, packed.weights, call, packed.clip, work, iwork, *addresses)


def _pair(packed, n, s, arrays, strides, keep, flops, forced):
    """A one-row call with the partner thread when it can have it and the budget leaves a thread for
    it; else on this thread alone, with the serial kernel (a split row alone is slower), or, when
    the path is forced, with run_pair and this thread's own mailbox, which nobody serves."""
    with with_partner(flops >= _tuning.PAIR_WAKE_FLOPS, forced) as mailbox:
        if mailbox is not None:
            _split(run_pair, packed, s, arrays, strides, keep, mailbox, *_pair_callbacks(packed))
            return "run_pair"
        return _serial(packed, n, s, arrays, strides, keep)


def _pair_callbacks(packed):
    """run_pair's callbacks: the partner's for posted jobs, and the one that runs a split row's worker."""
    return jobs_worker(), packed.tasks("pair")


def _plan(packed, n, s, strides, keep, rows, tasks):
    """(call descriptor, floats, ints) of N rows of S steps run as ``tasks`` tasks of up to ``rows``
    rows each (``rows`` 0: a split row, two workers), made once per call shape. A task computes
    X·Wᵀ for all its steps first when that fits in ``_tuning.HOIST_BYTES``."""
    key = n, s, strides, keep, rows, tasks, _tuning.HOIST_BYTES
    plan = packed.memo.get(key)
    if plan is None:
        ct = packed.compute_dtype
        if rows == 0:
            hoist = 0
            floats, ints = split_scratch(s, packed.n_inputs, packed.n_hidden, ct.itemsize, CHUNK_ROWS)
        else:
            hoist = int(rows * s * 3 * packed.n_hidden * ct.itemsize <= _tuning.HOIST_BYTES)
            floats, ints = rows_scratch(rows, s, packed.n_inputs, packed.n_hidden, hoist, ct.itemsize, CHUNK_ROWS)
        ints = (ints.end + JOB_SIZE) * tasks  # each task's job first (the parallel and split drivers')
        plan = packed.remember(key, (packed.call(n, s, hoist, strides, keep), floats.end * tasks, ints))
    return plan
