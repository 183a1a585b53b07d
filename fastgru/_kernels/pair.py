"""The two-thread protocol of a split row: a calling thread runs worker 0, fastgru's partner thread
(``fastgru._partner``) worker 1, and they talk through a **mailbox**. This module owns the
mailbox: its layout, every access to it (compiled here, or from Python through the functions at
the end), posting and taking jobs, sleeping, napping and stopping. Nobody else indexes it.

The mailbox is an int64 array, 64-byte aligned: the state on a line of its own, the partner's
flags on another (ASLEEP: it sleeps; NAP: asked to sleep now), then the job (the kernel's
arguments as addresses, sizes and the clip's bits). States: IDLE (nothing posted), POSTED,
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
from .memory import aligned
from .split import split_part, split_setup

STATE, ASLEEP, NAP, JOB = 0, 8, 9, 16
IDLE, POSTED, TAKEN, FINISHED, STOP = 0, 1, 2, 3, 4
#: A **job**, the arguments of a kernel as addresses, at an offset of an int64 array (the mailbox's
#: at JOB; a plan's, ``planned.py``, at 0): the element size, then each array's address and size in
#: this order, then the clip's bits. ``write_job`` and ``read_job`` are its only readers and writers
#: in compiled code.
JOB_ARRAYS = "X h0 lengths state_rows att y ho weights call work iwork".split()
JOB_ITEMSIZE = 0
JOB_ADDRESS = {name: 1 + 2 * i for i, name in enumerate(JOB_ARRAYS)}
JOB_CLIP = 1 + 2 * len(JOB_ARRAYS)
JOB_FIELDS = JOB_CLIP + 1
SIZE = JOB + JOB_FIELDS
(_X, _H0, _LENGTHS, _STATE_ROWS, _ATT, _Y, _HO, _WEIGHTS, _CALL, _WORK, _IWORK) = (JOB_ADDRESS[n] for n in JOB_ARRAYS)


def new_mailbox():
    """A zeroed mailbox starting on a 64-byte line (its state and flags then on lines of their own)."""
    return aligned(SIZE, np.int64, zero=True)


@kernel()
def write_job(job, at, X, h0, lengths, state_rows, att, y, ho, weights, call, clip, work, iwork):
    """Write the job of a kernel call with these arguments at offset ``at`` of ``job``."""
    job[at + JOB_ITEMSIZE] = y.itemsize
    job[at + _X], job[at + _X + 1], job[at + _H0], job[at + _H0 + 1] = address_of(X), X.size, address_of(h0), h0.size
    job[at + _LENGTHS], job[at + _LENGTHS + 1] = address_of(lengths), lengths.size
    job[at + _STATE_ROWS], job[at + _STATE_ROWS + 1] = address_of(state_rows), state_rows.size
    job[at + _ATT], job[at + _ATT + 1] = address_of(att), att.size
    job[at + _Y], job[at + _Y + 1] = address_of(y), y.size
    job[at + _HO], job[at + _HO + 1] = address_of(ho), ho.size
    job[at + _WEIGHTS], job[at + _WEIGHTS + 1] = address_of(weights), weights.size
    job[at + _CALL], job[at + _CALL + 1] = address_of(call), call.size
    job[at + _WORK], job[at + _WORK + 1] = address_of(work), work.size
    job[at + _IWORK], job[at + _IWORK + 1] = address_of(iwork), iwork.size
    job.view(np.float64)[at + JOB_CLIP] = clip


@kernel()
def read_job(job, at, like):
    """The arguments (X, h0, lengths, state_rows, att, y, ho, weights, call, clip, work, iwork) of
    the job at offset ``at`` of ``job``, whose float arrays have the dtype of ``like``, with the
    ranks the kernels are called with (their shapes do not matter: the kernels read them by flat
    offsets)."""
    ints = job
    return (
        carray(pointer_to(job[at + _X], like), (1, 1, job[at + _X + 1])),
        carray(pointer_to(job[at + _H0], like), (1, 1, job[at + _H0 + 1])),
        carray(pointer_to(job[at + _LENGTHS], ints), (job[at + _LENGTHS + 1],)),
        carray(pointer_to(job[at + _STATE_ROWS], ints), (job[at + _STATE_ROWS + 1],)),
        carray(pointer_to(job[at + _ATT], like), (1, job[at + _ATT + 1])),
        carray(pointer_to(job[at + _Y], like), (1, 1, 1, job[at + _Y + 1])),
        carray(pointer_to(job[at + _HO], like), (1, 1, job[at + _HO + 1])),
        carray(pointer_to(job[at + _WEIGHTS], like), (job[at + _WEIGHTS + 1],)),
        carray(pointer_to(job[at + _CALL], ints), (job[at + _CALL + 1],)),
        job.view(np.float64)[at + JOB_CLIP],
        carray(pointer_to(job[at + _WORK], like), (job[at + _WORK + 1],)),
        carray(pointer_to(job[at + _IWORK], ints), (job[at + _IWORK + 1],)),
    )


@kernel()
def run_pair(X, h0, lengths, state_rows, att, y, ho, weights, call, clip, work, iwork, mailbox):
    """Worker 0 here, worker 1 posted to the partner through ``mailbox`` (IDLE on entry and on return).

    Returns 1 if the partner took the job, else 0 (this thread then ran worker 1's part too)."""
    split_setup(call, h0, state_rows, work, iwork)
    write_job(mailbox, JOB, X, h0, lengths, state_rows, att, y, ho, weights, call, clip, work, iwork)
    atomic_store(mailbox, STATE, POSTED)  # seq_cst: the job's fields are visible first
    clip_at = y.dtype.type(clip)
    split_part(X, h0, lengths, state_rows, att, y, ho, weights, call, clip_at, work, iwork, 0)
    if atomic_swap(mailbox, STATE, POSTED, IDLE):  # not taken: withdrawn, worker 1's part is ours
        split_part(X, h0, lengths, state_rows, att, y, ho, weights, call, clip_at, work, iwork, 1)
        return 0
    while atomic_load(mailbox, STATE) != FINISHED:
        spin_pause()
    atomic_store(mailbox, STATE, IDLE)
    return 1


@kernel()
def _serve_job(mailbox, like):
    """Worker 1 of the job in ``mailbox``, whose float arrays have the dtype of ``like``."""
    X, h0, lengths, state_rows, att, y, ho, weights, call, clip, work, iwork = read_job(mailbox, JOB, like)
    split_part(X, h0, lengths, state_rows, att, y, ho, weights, call, y.dtype.type(clip), work, iwork, 1)


@kernel()
def serve(mailbox, spin_cycles):
    """The partner thread's loop: take each job posted in ``mailbox`` and run its worker 1, spinning
    in between. Returns, with ASLEEP set, after ``spin_cycles`` cycles without a job or when NAP
    is set; returns when the state is STOP. A job posted as it goes to sleep is not lost: its
    caller withdraws it and runs both workers (``run_pair``)."""
    f32, f64 = np.empty(0, dtype=np.float32), np.empty(0, dtype=np.float64)
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
            if mailbox[JOB + JOB_ITEMSIZE] == 4:
                _serve_job(mailbox, f32)
            else:
                _serve_job(mailbox, f64)
            atomic_store(mailbox, STATE, FINISHED)


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
