"""The two-thread protocol: a calling thread posts **jobs** (``jobs.py``) to fastgru's partner thread
(``fastgru._partner``) through a **mailbox**, runs its own part, then waits for the partner's, or
withdraws the jobs and runs them itself. This module owns the mailbox: its layout, every access to
it (compiled here, or from Python through the functions at the end), posting and taking jobs,
sleeping, napping and stopping. Nobody else indexes it. The partner runs posted jobs through the
C callback the mailbox names (``jobs_worker``), which runs each job through its own callback: its
loop holds no kernel, and a process compiles only the drivers its calls need.

The mailbox is an int64 array, 64-byte aligned: the state on a line of its own, the partner's
flags on another (ASLEEP: it sleeps; NAP: asked to sleep now), then the posting (the callback
that runs it, and the posted jobs' address, rows and row length: ``post_jobs``). States: IDLE
(nothing posted), POSTED, TAKEN (by the partner), FINISHED (by it), STOP (the partner leaves its
loop).

Three kinds of posting: a split row's worker 1 (``run_pair``), a direct call's (``run_direct_pair``),
and a stack's later layers (a wavefront: ``entry.py``). A call posts, runs its own part, then
withdraws the posting if the partner has not taken it (POSTED -> IDLE) and runs it itself: it never
waits for a partner that has not started. Once the partner has taken a split row's (or a direct
call's) worker 1, the two workers meet at every item (``split.py``), and the caller waits for the
partner's last claimed half before it returns.
"""

import numpy as np
from numba import carray

from .._config import kernel
from .atomics import address_of, atomic_load, atomic_store, atomic_swap, cycles, pointer_to, spin_pause
from .callbacks import LIKE, WEIGHTS_LIKE, Callbacks, call_job, driver
from .direct import direct_tasks
from .jobs import JOB, JOB_SIZE, run_jobs
from .memory import aligned
from .split import split_tasks

STATE, ASLEEP, NAP, POSTING = 0, 8, 9, 16
IDLE, POSTED, TAKEN, FINISHED, STOP = 0, 1, 2, 3, 4
#: The posting: the address of the callback that runs it (``jobs_worker``), then the jobs' address,
#: rows and row length.
_WORKER, _JOBS = POSTING, POSTING + 1
SIZE = _JOBS + 3
_MAILBOX, _JOB_WORKER, _CALLBACK = JOB["mailbox"], JOB["worker"], JOB["callback"]


def new_mailbox():
    """A zeroed mailbox starting on a 64-byte line (its state and flags then on lines of their own)."""
    return aligned(SIZE, np.int64, zero=True)


@driver()
def run_pair(address):
    """A split row's worker 0 here, its worker 1 posted to the partner through the job's mailbox
    (IDLE on entry and on return), which runs it through the job's worker callback (``jobs_worker``);
    the workers' jobs at the head of the job's ``iwork`` (``split.split_tasks``).

    Returns 1 if the partner took worker 1, else 0 (this thread then ran worker 1's part too)."""
    job, like, weights_like = carray(address, (JOB_SIZE,)), LIKE, WEIGHTS_LIKE
    return share(split_tasks(job, like, weights_like), job)


@driver()
def run_direct_pair(address):
    """A direct call (``direct.py``) of one direction shared as run_pair shares a split row: its
    worker 0 here, its worker 1 posted. Returns 1 if the partner took worker 1, else 0."""
    job, like, weights_like = carray(address, (JOB_SIZE,)), LIKE, WEIGHTS_LIKE
    return share(direct_tasks(job, like, weights_like), job)


@kernel()
def share(jobs, job):
    """Worker 1's job (jobs[1]) posted to ``job``'s mailbox, worker 0's run here, then worker 1's here
    too if the partner has not taken it. Returns 1 if the partner took it, else 0."""
    mailbox = carray(pointer_to(job[_MAILBOX], job), (SIZE,))
    post_jobs(mailbox, job[_JOB_WORKER], jobs, np.int64(1))
    call_job(jobs[0, _CALLBACK], jobs, np.int64(0))
    if finish(mailbox):
        return 1
    call_job(jobs[1, _CALLBACK], jobs, np.int64(JOB_SIZE))  # withdrawn: ours
    return 0


@kernel()
def finish(mailbox):
    """After the caller's own part: withdraw the posted jobs if the partner has not taken them
    (returns 0: the caller runs them), else wait until the partner has finished them (returns 1).
    The mailbox is IDLE after."""
    if atomic_swap(mailbox, STATE, POSTED, IDLE):
        return 0
    while atomic_load(mailbox, STATE) != FINISHED:
        spin_pause()
    atomic_store(mailbox, STATE, IDLE)
    return 1


@kernel()
def post_jobs(mailbox, worker, jobs, first):
    """Publish the rows jobs[first:] of an int64 array of jobs (a split row's worker 1, a stack's later
    layers) for the partner, which runs them through the callback at ``worker`` (``jobs_worker``)."""
    mailbox[_WORKER] = worker
    mailbox[_JOBS] = address_of(jobs) + first * jobs.shape[1] * jobs.itemsize
    mailbox[_JOBS + 1], mailbox[_JOBS + 2] = jobs.shape[0] - first, jobs.shape[1]
    atomic_store(mailbox, STATE, POSTED)


@kernel()
def posted_jobs(mailbox):
    """(address, rows, row length) of the jobs ``post_jobs`` published."""
    return mailbox[_JOBS], mailbox[_JOBS + 1], mailbox[_JOBS + 2]


@kernel()
def serve(mailbox, spin_cycles):
    """The partner thread's loop: take each posting in ``mailbox`` and run it, spinning in between.
    Returns, with ASLEEP set, after ``spin_cycles`` cycles without a posting or when NAP is set;
    returns when the state is STOP. Jobs posted as it goes to sleep are not lost: their caller
    withdraws them and runs them (``finish``)."""
    atomic_store(mailbox, ASLEEP, 0)
    while True:
        start = cycles()
        state = atomic_load(mailbox, STATE)
        while state != POSTED:
            if state == STOP:
                return
            if cycles() - start > spin_cycles or atomic_load(mailbox, NAP):
                atomic_store(mailbox, ASLEEP, 1)
                return
            spin_pause()
            state = atomic_load(mailbox, STATE)
        if atomic_swap(mailbox, STATE, POSTED, TAKEN):
            call_job(mailbox[_WORKER], mailbox, np.int64(0))
            atomic_store(mailbox, STATE, FINISHED)


def _serve_jobs(mailbox):
    """The partner's part of a posting: the jobs ``post_jobs`` published, each through its callback."""
    box = carray(mailbox, (SIZE,))
    address, rows, width = posted_jobs(box)
    run_jobs(carray(pointer_to(address, box), (rows, width)), np.int64(0), rows)
    return 0


_WORKER_CALLBACK = Callbacks({"jobs": _serve_jobs})


def jobs_worker():
    """The address of the callback with which the partner runs posted jobs (compiled on first use)."""
    return _WORKER_CALLBACK.address("jobs")


# ------------------------------------------------------------------ from Python (the partner thread's owner)


def is_asleep(mailbox):
    """Whether the partner serving ``mailbox`` has left its loop to sleep (or never entered it)."""
    return bool(mailbox[ASLEEP])


def ask_to_nap(mailbox):
    """Ask the partner to sleep at once (it leaves its loop within a spin)."""
    mailbox[NAP] = 1


def clear_nap(mailbox):
    """Before waking the partner: let it spin again."""
    mailbox[NAP] = 0


def ask_to_stop(mailbox):
    """Make the partner leave its loop for good, spinning or (once woken) asleep."""
    mailbox[STATE] = STOP


def is_stopped(mailbox):
    return mailbox[STATE] == STOP
