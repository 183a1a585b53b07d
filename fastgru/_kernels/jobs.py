"""A **job**: a kernel's arguments as one int64 array of addresses and sizes, so that compiled code
can hand them to a C callback (``callbacks.py``), which takes nothing else: the plans' kernel
(``planned.run_planned``), a stack's layers (``stack.py``) and the parallel driver's tasks
(``rows.run_parallel``) run their drivers this way. The layout:

    JOB[name]          address and size of each array (``JOB_ARRAYS``),
    JOB["steps"]       S, the call's steps: a sequence length must lie in [0, S] (plans),
    JOB["clip"]        the clip, as the bits of a float64,
    JOB["callback"]    the address of the C callback that runs the job (``planned.job_callback``),
    JOB["shapes"]      the shapes of X, h0, sequence_lengths, att, y and ho (``SHAPED``), 4 places
                       each (plans),
    JOB["blocks"]      the parallel driver's blocks of rows (0: the serial driver's whole call),
    JOB["mailbox"]     the pair driver's mailbox address,
    JOB["state_offset"] where a stack's layer's state starts in the stack's states (elements),
    JOB["worker"]      the address of the callback with which the partner runs posted jobs
                       (``pair.jobs_worker``: the pair driver posts its worker 1),
    JOB["tasks"]       the address of the callback that runs a task of the driver: a block of the
                       parallel driver, a worker of a split row (``planned.task_callback``),
    JOB["task"]        the task a job runs: a block of the parallel driver, a split row's worker,
    JOB["R"], JOB["B"] a shared direct call's R and B, address and size (its W is the weights:
                       ``direct.direct_jobs``).
"""

import numpy as np
from numba import carray

from .._config import kernel
from .atomics import address_of, pointer_to
from .callbacks import call_job

JOB_ARRAYS = ("weights", "call", "work", "iwork", "state_rows", "lengths", "X", "h0", "att", "y", "ho")
SHAPED = ("X", "h0", "lengths", "att", "y", "ho")
JOB = {name: 2 * i for i, name in enumerate(JOB_ARRAYS)}
JOB["steps"] = 2 * len(JOB_ARRAYS)
JOB["clip"] = JOB["steps"] + 1
JOB["callback"] = JOB["clip"] + 1
JOB["shapes"] = JOB["callback"] + 1
JOB["blocks"] = JOB["shapes"] + 4 * len(SHAPED)
JOB["mailbox"] = JOB["blocks"] + 1
JOB["state_offset"] = JOB["mailbox"] + 1
JOB["worker"] = JOB["state_offset"] + 1
JOB["tasks"] = JOB["worker"] + 1
JOB["task"] = JOB["tasks"] + 1
JOB["R"] = JOB["task"] + 1
JOB["B"] = JOB["R"] + 2
#: Whole 64-byte lines: the scratch after a driver's jobs (``rows.run_parallel``, ``split.split_jobs``) keeps the
#: line alignment its atomic counters were laid out for.
JOB_SIZE = -(-(JOB["B"] + 2) // 8) * 8
_WEIGHTS, _CALL, _WORK, _IWORK, _STATE_ROWS, _LENGTHS, _X, _H0, _ATT, _Y, _HO = (JOB[n] for n in JOB_ARRAYS)
_CLIP, _CALLBACK = JOB["clip"], JOB["callback"]


@kernel()
def job_arrays(job, like, weights_like):
    """The kernels' arguments (``layout.py``) in ``job``, whose float arrays have the dtype of ``like``
    and weights that of ``weights_like``, with the ranks the kernels are called with (their shapes
    do not matter: they read by offsets)."""
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


@kernel()
def write_job(job, X, h0, lengths, state_rows, att, y, ho, weights, call, clip, work, iwork):
    """Write the kernels' arguments into ``job`` (what ``job_arrays`` reads)."""
    job[_X], job[_X + 1], job[_H0], job[_H0 + 1] = address_of(X), X.size, address_of(h0), h0.size
    job[_LENGTHS], job[_LENGTHS + 1] = address_of(lengths), lengths.size
    job[_STATE_ROWS], job[_STATE_ROWS + 1] = address_of(state_rows), state_rows.size
    job[_ATT], job[_ATT + 1], job[_Y], job[_Y + 1] = address_of(att), att.size, address_of(y), y.size
    job[_HO], job[_HO + 1] = address_of(ho), ho.size
    job[_WEIGHTS], job[_WEIGHTS + 1] = address_of(weights), weights.size
    job[_CALL], job[_CALL + 1], job[_WORK], job[_WORK + 1] = address_of(call), call.size, address_of(work), work.size
    job[_IWORK], job[_IWORK + 1] = address_of(iwork), iwork.size
    job.view(np.float64)[_CLIP] = clip


@kernel()
def run_jobs(jobs, k0, k1):
    """The jobs k0..k1 of ``jobs`` (rows of JOB_SIZE) in order, each through its callback."""
    for k in range(k0, k1):
        call_job(jobs[k, _CALLBACK], jobs[k])
