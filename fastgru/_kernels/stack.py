"""A stack of GRU layers in one kernel call: each layer is a **job** (``planned.py``'s format) run by
its driver's C callback, layer after layer, the outputs of one the inputs of the next.

A stack's plan (``fastgru._stack``) makes the jobs once per call shape: layer k reads X from the
buffer layer k - 1 wrote its Y to (its descriptor's strides make that Y the (N, S, D·H) input the
next layer takes, both directions of a step side by side, so nothing is copied between layers),
and every layer reads and writes its part of one state array (N, sum of D·H): layer k's states
start ``JOB["state_offset"]`` elements into it, its rows ``s_row`` apart. ``run_stack`` writes the
addresses of the arrays that change from call to call (X into the first layer's job, Y into the
last's, the states, the lengths and the state rows into every one), then runs the layers in
order: each job's callback is the driver its path chose (serial, parallel, split or pair), so a
layer takes its threads as a call of its op would, and the drivers compile once for every stack.

**Wavefront.** ``run_stack_pair`` runs the layers before ``first`` on the calling thread and the
others on fastgru's partner thread (``pair.post_jobs``), each layer on the serial driver: layer
``first`` computes step s as soon as layer ``first - 1`` has written its Y of step s, which that
layer's descriptor posts to a counter after every step and the next one's waits for (the
descriptors' ``wait`` and ``post``). Both cores work on one row without meeting inside a step, each
reading only its own layers' weights.
"""

import numpy as np

from .._config import kernel
from .atomics import address_of, atomic_store
from .jobs import JOB, run_jobs
from .pair import finish, post_jobs

_X, _H0, _HO, _Y, _LENGTHS, _STATE_ROWS = (JOB[name] for name in ("X", "h0", "ho", "y", "lengths", "state_rows"))
_OFFSET = JOB["state_offset"]


@kernel()
def _fill(jobs, X, h0, lengths, state_rows, y, ho):
    """Write the call's arrays into every layer's job: X into the first, y into the last."""
    n_layers = jobs.shape[0]
    itemsize = y.itemsize
    for k in range(n_layers):
        job = jobs[k]
        if k == 0:
            job[_X], job[_X + 1] = address_of(X), X.size
        if k == n_layers - 1:
            job[_Y], job[_Y + 1] = address_of(y), y.size
        offset = job[_OFFSET]
        job[_H0], job[_H0 + 1] = address_of(h0) + offset * itemsize, h0.size - offset
        job[_HO], job[_HO + 1] = address_of(ho) + offset * itemsize, ho.size - offset
        job[_LENGTHS], job[_LENGTHS + 1] = address_of(lengths), lengths.size
        job[_STATE_ROWS], job[_STATE_ROWS + 1] = address_of(state_rows), state_rows.size


@kernel()
def run_stack(X, h0, lengths, state_rows, y, ho, jobs):
    """Every layer of ``jobs`` (L, JOB_SIZE) on checked arrays: X the first layer's input, y the last
    layer's output, h0 and ho the states of every layer (ho may be h0: updated in place), lengths
    int64 (N,) and state_rows (empty, or a pool's rows) as the kernels take them."""
    _fill(jobs, X, h0, lengths, state_rows, y, ho)
    run_jobs(jobs, np.int64(0), jobs.shape[0])


@kernel()
def run_stack_pair(X, h0, lengths, state_rows, y, ho, jobs, first, progress, mailbox, worker):
    """``run_stack``'s layers as a wavefront: jobs[first:] posted to the partner through ``mailbox``
    (``worker``: ``pair.jobs_worker()``), jobs[:first] here; ``progress`` the int64 counter of layer
    first - 1's steps that its descriptor posts to and layer first's waits on. Returns 1 if the
    partner took its layers, else 0 (this thread withdrew them and ran them after its own)."""
    _fill(jobs, X, h0, lengths, state_rows, y, ho)
    atomic_store(progress, 0, 0)
    post_jobs(mailbox, worker, jobs, first)
    run_jobs(jobs, np.int64(0), first)
    if finish(mailbox):
        return 1
    run_jobs(jobs, first, jobs.shape[0])
    return 0
