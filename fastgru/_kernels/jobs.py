"""A **job**: one call of a driver, as one int64 array of addresses, sizes and numbers. Every driver
takes a job and nothing else (``callbacks.py`` compiles it as a C callback of one), and reads its
arrays from it (``job_arrays``). The layout:

    JOB[name]           address and size of each array (``JOB_ARRAYS``; R and B: a direct call's,
                        whose W is the weights),
    JOB["steps"]        S, the call's steps: a sequence length must lie in [0, S],
    JOB["clip"]         the clip, as the bits of a float64,
    JOB["callback"]     the address of the C callback that runs the job (its driver's),
    JOB["shapes"]       the shapes the entry's arrays must have (``SHAPED``), 4 places each,
    JOB["blocks"]       the parallel driver's blocks of rows (0: the serial driver's whole call),
    JOB["mailbox"]      the mailbox of the partner thread, for the pair drivers and a wavefront,
    JOB["state_offset"] where a stack's layer's state starts in the stack's states (elements),
    JOB["worker"]       the address of the callback with which the partner runs posted jobs
                        (``pair.jobs_worker``),
    JOB["tasks"]        the address of the callback that runs one task of the driver: a block of
                        the parallel driver, a worker of a split row or of a shared direct call,
    JOB["task"]         the task a job runs (``task_jobs``),
    JOB["cut"]          a wavefront's first layer on the partner thread (0: none), and
    JOB["progress"]     the address of the counter its layers meet at (the first job of a stack).

Python writes a plan's jobs once (``fastgru._plan``), the entry (``entry.py``) the arrays that change
from call to call, and a driver that shares its call makes its tasks' jobs as copies of its own
(``task_jobs``): nothing else writes a job.
"""

import numpy as np
from numba import carray

from .._config import kernel
from .atomics import address_of, pointer_to
from .callbacks import call_job

JOB_ARRAYS = ("weights", "call", "work", "iwork", "state_rows", "lengths", "X", "h0", "att", "y", "ho", "R", "B")
#: The arrays whose shapes the entry compares with the plan's, in the entry's order.
SHAPED = ("X", "h0", "lengths", "att", "y", "ho", "weights", "R", "B")
JOB = {name: 2 * i for i, name in enumerate(JOB_ARRAYS)}
_NEXT = 2 * len(JOB_ARRAYS)
for _name, _size in (("steps", 1), ("clip", 1), ("callback", 1), ("shapes", 4 * len(SHAPED)), ("blocks", 1),
                     ("mailbox", 1), ("state_offset", 1), ("worker", 1), ("tasks", 1), ("task", 1), ("cut", 1),
                     ("progress", 1)):  # fmt: skip
    JOB[_name], _NEXT = _NEXT, _NEXT + _size
#: Whole 64-byte lines: the scratch after a driver's task jobs (``task_jobs``) keeps the line
#: alignment its atomic counters were laid out for.
JOB_SIZE = -(-_NEXT // 8) * 8
_WEIGHTS, _CALL, _WORK, _IWORK, _STATE_ROWS, _LENGTHS, _X, _H0, _ATT, _Y, _HO, _R, _B = (JOB[n] for n in JOB_ARRAYS)
_CLIP, _CALLBACK, _TASKS, _TASK, _OFFSET = (JOB[n] for n in ("clip", "callback", "tasks", "task", "state_offset"))


@kernel(inline=True)  # returned, its 12 arrays were copied through memory at every call (docs/tuning.md)
def job_arrays(job, like, weights_like):
    """The arrays of ``job`` (X, h0, lengths, state_rows, att, y, ho, weights, call, clip, work,
    iwork), whose float arrays have the dtype of ``like`` and weights that of ``weights_like``, with
    the ranks the drivers read them in (their shapes do not matter: they read by offsets)."""
    return (
        carray(pointer_to(job[_X], like), (1, 1, job[_X + 1])),
        carray(pointer_to(job[_H0], like), (1, 1, job[_H0 + 1])),
        carray(pointer_to(job[_LENGTHS], job), (job[_LENGTHS + 1],)),
        carray(pointer_to(job[_STATE_ROWS], job), (job[_STATE_ROWS + 1],)),
        carray(pointer_to(job[_ATT], like), (1, job[_ATT + 1])),
        carray(pointer_to(job[_Y], like), (1, 1, 1, job[_Y + 1])),
        carray(pointer_to(job[_HO], like), (1, 1, job[_HO + 1])),
        carray(pointer_to(job[_WEIGHTS], weights_like), (job[_WEIGHTS + 1],)),
        carray(pointer_to(job[_CALL], job), (job[_CALL + 1],)),
        job.view(np.float64)[_CLIP],
        carray(pointer_to(job[_WORK], like), (job[_WORK + 1],)),
        carray(pointer_to(job[_IWORK], job), (job[_IWORK + 1],)),
    )


@kernel(inline=True)
def direct_weights(job, like, n_dirs, n_inputs, n_hidden):
    """A direct call's W (D, 3H, I), R (D, 3H, H) and B (D, 3H or 4H) in ``job``."""
    W = carray(pointer_to(job[_WEIGHTS], like), (n_dirs, 3 * n_hidden, n_inputs))
    R = carray(pointer_to(job[_R], like), (n_dirs, 3 * n_hidden, n_hidden))
    B = carray(pointer_to(job[_B], like), (n_dirs, job[_B + 1] // n_dirs))
    return W, R, B


@kernel(inline=True)
def task_jobs(job, iwork, count):
    """``count`` tasks of the driver of ``job``, whose int64 scratch is ``iwork``: copies of the job at
    the head of iwork, task k in the k-th, run by the job's tasks callback, with the rest of iwork
    as their int64 scratch. Returns them, an int64 array (count, JOB_SIZE)."""
    jobs = iwork[: count * JOB_SIZE].reshape((count, JOB_SIZE))
    rest = iwork[count * JOB_SIZE :]
    for k in range(count):
        for i in range(JOB_SIZE):
            jobs[k, i] = job[i]
        jobs[k, _IWORK], jobs[k, _IWORK + 1] = address_of(rest), rest.size
        jobs[k, _CALLBACK], jobs[k, _TASK] = job[_TASKS], k
    return jobs


@kernel(inline=True)  # into the entry, whose call of it took longer than the writes
def fill_jobs(jobs, X, h0, att, y, ho):
    """Write a call's arrays into its jobs (L, JOB_SIZE), one per layer of a stack (one for an op): X
    into the first, y into the last, the states into every one, each layer's from its
    ``state_offset`` on (h0 and ho may be one array: updated in place), and att. The state rows
    are the plan's (a state pool's step copies its ids there)."""
    n_layers = jobs.shape[0]
    itemsize = y.itemsize
    jobs[0, _X], jobs[0, _X + 1] = address_of(X), X.size
    jobs[n_layers - 1, _Y], jobs[n_layers - 1, _Y + 1] = address_of(y), y.size
    for k in range(n_layers):  # jobs[k, i], not a view jobs[k]: a view counts a reference
        offset = jobs[k, _OFFSET]
        jobs[k, _H0], jobs[k, _H0 + 1] = address_of(h0) + offset * itemsize, h0.size - offset
        jobs[k, _HO], jobs[k, _HO + 1] = address_of(ho) + offset * itemsize, ho.size - offset
        jobs[k, _ATT], jobs[k, _ATT + 1] = address_of(att), att.size


@kernel()
def run_jobs(jobs, k0, k1):
    """The jobs k0..k1 of ``jobs`` (rows of JOB_SIZE) in order, each through its callback; returns the
    largest answer (a pair driver's is 1 when the partner took its part)."""
    answer = 0
    for k in range(k0, k1):
        answer = max(answer, call_job(jobs[k, _CALLBACK], jobs, k * JOB_SIZE))
    return answer
