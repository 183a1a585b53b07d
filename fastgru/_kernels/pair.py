"""The two-thread protocol of a split row: a calling thread runs worker 0, fastgru's partner thread
(``fastgru._partner``) worker 1, and they talk through a **mailbox**. This module owns the
mailbox: its layout, every access to it (compiled here, or from Python through the functions at
the end), posting and taking jobs, sleeping, napping and stopping. Nobody else indexes it. The
partner runs a job through the C callback it names (``worker_callback``, one per element type of
the weights): its loop holds no kernel, and a process compiles only the workers its weights need.

The mailbox is an int64 array, 64-byte aligned: the state on a line of its own, the partner's
flags on another (ASLEEP: it sleeps; NAP: asked to sleep now), then the job (worker 1's callback,
the kernel's arguments as addresses and sizes, and the clip's bits; or, for a stack's wavefront, its
layers' jobs: ``post_jobs``). States: IDLE (nothing posted), POSTED,
TAKEN (by the partner), FINISHED (by it), STOP (the partner leaves its loop).

A call (``run_pair``) posts its job, runs worker 0, then withdraws the job if the partner has not
taken it (POSTED -> IDLE) and runs worker 1's part itself: it never waits for a partner that has
not started. Once the partner has taken the job the two workers meet at every item (``split.py``),
and the caller waits for the partner's last claimed half before it returns.
"""

import numpy as np
from numba import carray

from .._config import kernel
from .atomics import address_of, atomic_load, atomic_store, atomic_swap, cycles, pointer_to, spin_pause
from .callbacks import BF16, F32, F64, I8, Callbacks, call_job, weights_key
from .memory import aligned
from .split import split_part, split_setup

STATE, ASLEEP, NAP, JOB = 0, 8, 9, 16
IDLE, POSTED, TAKEN, FINISHED, STOP = 0, 1, 2, 3, 4
#: The job: the address of the callback that runs its worker 1 (``worker_callback``), then each
#: array's address and size, then the clip's bits.
_ARRAYS = "X h0 lengths state_rows att y ho weights call work iwork".split()
_WORKER = JOB
_ADDRESS = {name: JOB + 1 + 2 * i for i, name in enumerate(_ARRAYS)}
_CLIP = JOB + 1 + 2 * len(_ARRAYS)
SIZE = _CLIP + 1
(_X, _H0, _LENGTHS, _STATE_ROWS, _ATT, _Y, _HO, _WEIGHTS, _CALL, _WORK, _IWORK) = (_ADDRESS[n] for n in _ARRAYS)
#: Or, for a stack's layers (``post_jobs``), after the callback: the jobs' address, rows and row length.
_JOBS = JOB + 1


def new_mailbox():
    """A zeroed mailbox starting on a 64-byte line (its state and flags then on lines of their own)."""
    return aligned(SIZE, np.int64, zero=True)


@kernel()
def _post(mailbox, worker, X, h0, lengths, state_rows, att, y, ho, weights, call, clip, work, iwork):
    """Write the job and publish it (the seq_cst store of POSTED makes the fields visible first)."""
    job = mailbox
    job[_WORKER] = worker
    job[_X], job[_X + 1], job[_H0], job[_H0 + 1] = address_of(X), X.size, address_of(h0), h0.size
    job[_LENGTHS], job[_LENGTHS + 1] = address_of(lengths), lengths.size
    job[_STATE_ROWS], job[_STATE_ROWS + 1] = address_of(state_rows), state_rows.size
    job[_ATT], job[_ATT + 1], job[_Y], job[_Y + 1] = address_of(att), att.size, address_of(y), y.size
    job[_HO], job[_HO + 1], job[_WEIGHTS], job[_WEIGHTS + 1] = (
        address_of(ho),
        ho.size,
        address_of(weights),
        weights.size,
    )
    job[_CALL], job[_CALL + 1], job[_WORK], job[_WORK + 1] = address_of(call), call.size, address_of(work), work.size
    job[_IWORK], job[_IWORK + 1] = address_of(iwork), iwork.size
    mailbox.view(np.float64)[_CLIP] = clip
    atomic_store(mailbox, STATE, POSTED)


@kernel()
def run_pair(X, h0, lengths, state_rows, att, y, ho, weights, call, clip, work, iwork, mailbox, worker):
    """Worker 0 here, worker 1 posted to the partner through ``mailbox`` (IDLE on entry and on return);
    ``worker`` the address of the callback that runs worker 1 of these arrays' types (``worker_callback``).

    Returns 1 if the partner took the job, else 0 (this thread then ran worker 1's part too)."""
    split_setup(call, h0, state_rows, work, iwork)
    _post(mailbox, worker, X, h0, lengths, state_rows, att, y, ho, weights, call, clip, work, iwork)
    clip_at = y.dtype.type(clip)
    split_part(X, h0, lengths, state_rows, att, y, ho, weights, call, clip_at, work, iwork, 0)
    if finish(mailbox):
        return 1
    split_part(X, h0, lengths, state_rows, att, y, ho, weights, call, clip_at, work, iwork, 1)  # withdrawn: ours
    return 0


@kernel()
def finish(mailbox):
    """After the caller's own part: withdraw the posted job if the partner has not taken it (returns
    0: the caller runs it), else wait until the partner has finished it (returns 1). The mailbox
    is IDLE after."""
    if atomic_swap(mailbox, STATE, POSTED, IDLE):
        return 0
    while atomic_load(mailbox, STATE) != FINISHED:
        spin_pause()
    atomic_store(mailbox, STATE, IDLE)
    return 1


@kernel()
def post_jobs(mailbox, worker, jobs, first):
    """Publish the rows jobs[first:] of an int64 array of jobs (a stack's layers, ``stack.py``) for the
    partner, which runs them through the callback at ``worker`` (it reads them with ``posted_jobs``)."""
    mailbox[_WORKER] = worker
    mailbox[_JOBS] = address_of(jobs) + first * jobs.shape[1] * jobs.itemsize
    mailbox[_JOBS + 1], mailbox[_JOBS + 2] = jobs.shape[0] - first, jobs.shape[1]
    atomic_store(mailbox, STATE, POSTED)


@kernel()
def posted_jobs(mailbox):
    """(address, rows, row length) of the jobs ``post_jobs`` published."""
    return mailbox[_JOBS], mailbox[_JOBS + 1], mailbox[_JOBS + 2]


@kernel()
def _serve_job(mailbox, like, weights_like):
    """Worker 1 of the job in ``mailbox``, whose float arrays have the dtype of ``like`` and weights that
    of ``weights_like``. The arrays get the ranks the kernels are called with (their shapes do not
    matter: the kernels read them by flat offsets)."""
    ints = mailbox
    y = carray(pointer_to(mailbox[_Y], like), (1, 1, 1, mailbox[_Y + 1]))
    clip_at = y.dtype.type(mailbox.view(np.float64)[_CLIP])
    split_part(
        carray(pointer_to(mailbox[_X], like), (1, 1, mailbox[_X + 1])),
        carray(pointer_to(mailbox[_H0], like), (1, 1, mailbox[_H0 + 1])),
        carray(pointer_to(mailbox[_LENGTHS], ints), (mailbox[_LENGTHS + 1],)),
        carray(pointer_to(mailbox[_STATE_ROWS], ints), (mailbox[_STATE_ROWS + 1],)),
        carray(pointer_to(mailbox[_ATT], like), (1, mailbox[_ATT + 1])),
        y,
        carray(pointer_to(mailbox[_HO], like), (1, 1, mailbox[_HO + 1])),
        carray(pointer_to(mailbox[_WEIGHTS], weights_like), (mailbox[_WEIGHTS + 1],)),
        carray(pointer_to(mailbox[_CALL], ints), (mailbox[_CALL + 1],)),
        clip_at,
        carray(pointer_to(mailbox[_WORK], like), (mailbox[_WORK + 1],)),
        carray(pointer_to(mailbox[_IWORK], ints), (mailbox[_IWORK + 1],)),
        1,
    )


@kernel()
def serve(mailbox, spin_cycles):
    """The partner thread's loop: take each job posted in ``mailbox`` and run its worker 1, spinning
    in between. Returns, with ASLEEP set, after ``spin_cycles`` cycles without a job or when NAP
    is set; returns when the state is STOP. A job posted as it goes to sleep is not lost: its
    caller withdraws it and runs both workers (``run_pair``)."""
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
            call_job(mailbox[_WORKER], mailbox)
            atomic_store(mailbox, STATE, FINISHED)


# Worker 1's callbacks, one per element type of the weights (``callbacks.py``).
def _worker_f32(mailbox):
    _serve_job(carray(mailbox, (SIZE,)), F32, F32)
    return 0


def _worker_f64(mailbox):
    _serve_job(carray(mailbox, (SIZE,)), F64, F64)
    return 0


def _worker_bf16(mailbox):
    _serve_job(carray(mailbox, (SIZE,)), F32, BF16)
    return 0


def _worker_i8(mailbox):
    _serve_job(carray(mailbox, (SIZE,)), F32, I8)
    return 0


_WORKERS = Callbacks({"f": _worker_f32, "d": _worker_f64, "H": _worker_bf16, "b": _worker_i8})


def worker_callback(weights):
    """The address of the callback that runs worker 1 of a split row on ``weights`` (their type's)."""
    return _WORKERS.address(weights_key(weights))


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
