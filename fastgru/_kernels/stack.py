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
"""

from .._config import kernel
from .atomics import address_of
from .callbacks import call_job
from .planned import JOB

_X, _H0, _HO, _Y, _LENGTHS, _STATE_ROWS = (JOB[name] for name in ("X", "h0", "ho", "y", "lengths", "state_rows"))
_CALLBACK, _OFFSET = JOB["callback"], JOB["state_offset"]


@kernel()
def run_stack(X, h0, lengths, state_rows, y, ho, jobs):
    """Every layer of ``jobs`` (L, JOB_SIZE) on checked arrays: X the first layer's input, y the last
    layer's output, h0 and ho the states of every layer (ho may be h0: updated in place), lengths
    int64 (N,) and state_rows (empty, or a pool's rows) as the kernels take them."""
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
        call_job(job[_CALLBACK], job)
