"""The split driver: one row of one direction on two workers. Batch 1 is bound by streaming the
packed weights, and each of two cores keeps half of them in its own cache.

Each step's work is cut in two halves, and so is the projection X·Wᵀ + bias of every step, done
first (item 0). Two workers (0 and 1) share a row through claims: a worker claims its own half of
each item, then its partner's if the partner has not taken it in time (or has not started at all),
then waits for both halves: waiting is only ever for a half that a running worker has claimed,
so it cannot deadlock, and one worker alone computes everything. The same stage functions
compute every element whichever worker takes it, so results do not depend on who did what.

Steps have two phases (``phases``): phase 0 computes the products H·Rᵀ of the z and r columns
(and, for linear_before_reset, the h columns), cut into two runs of panels, f on z and r, and
r ⊙ H; phase 1 the h gate and the state update for the units of a run of the h gate's panels.
With linear_before_reset and H a whole number of panels, one phase: each half computes the z, r
and h columns of its own units, then their h gate and update, and the workers meet once per step.

Two ways to run the workers: ``run_split`` here, both in one Numba parallel region; ``run_pair``
(``pair.py``), worker 0 on the calling thread and worker 1 on fastgru's partner thread. Either
way each worker is a job (``split_tasks``) run by a C callback (``drivers.py``'s 'part'),
so that split_part is compiled once per element type of the weights, not into each driver.
Arguments as in ``layout.py``, for one row (N = D = 1).
"""

import numpy as np
from numba import carray, prange

from .._config import kernel
from .._tuning import CHUNK_ROWS, PATIENCE_SPINS
from .atomics import atomic_add, atomic_load, atomic_swap, spin_pause
from .callbacks import LIKE, WEIGHTS_LIKE, call_job, driver
from .jobs import JOB, JOB_SIZE, job_arrays, task_jobs
from .layout import bias_start, panels, r_start, read_call, split_scratch, state_at, w_start
from .memory import load, store
from .products import product_row, project
from .stages import finish_row
from .step import Rows, Step, candidate, gates, one_row

_TASK, _CALLBACK = JOB["task"], JOB["callback"]


@kernel()
def phases(lbr, n_hidden, nr):
    """Phases per step: 1 for linear_before_reset with H a whole number of panels, else 2."""
    return 1 if lbr and n_hidden % nr == 0 else 2


@kernel()
def half_units(half, n_hidden, p):
    """The panels [q0, q1) of the h columns that half ``half`` owns in phase 1, and their units [u0, u1)."""
    q0 = p.p2 + half * (p.n - p.p2) // 2
    q1 = p.p2 + (half + 1) * (p.n - p.p2) // 2
    u0 = min(max(q0 * p.nr - 2 * n_hidden, 0), n_hidden)
    u1 = min(max(q1 * p.nr - 2 * n_hidden, 0), n_hidden)
    return q0, q1, u0, u1


@kernel()
def _project_half(X, c, weights, work, iwork, o, io, half, length):
    """Item 0, half ``half``: X·Wᵀ + bias of steps 0..length for half of the panels (lengths[0] <= S)."""
    p = panels(c.n_hidden, work.itemsize)
    ldc = p.n * p.nr
    offsets = io.offsets + half * CHUNK_ROWS
    packed = o.packed + half * ((o.state - o.packed) // 2)
    for t0 in range(0, length, CHUNK_ROWS):
        n = min(CHUNK_ROWS, length - t0)
        for i in range(n):
            store(iwork, offsets + i, (t0 + i) * c.x_step)
        w_base = w_start(c, np.int64(0), p.nr, p.n, weights)
        bias_at = bias_start(c, np.int64(0), p.nr, p.n, weights, work.itemsize)
        at = offsets, n, w_base, bias_at, c.n_inputs, c.n_hidden, o.xg + t0 * ldc, ldc, packed
        project(X, iwork, weights, work, work, (*at, half * p.n // 2, (half + 1) * p.n // 2, p.nr), None)


@kernel(exact=True)  # the step's stages are inlined here: their sums must not contract
def _step_half(c, weights, clip_at, att, y, iwork, w, o, item, states):
    """One half of one phase of step t (``item`` = (t, phase, half)), by ``step.py``'s phases on the
    row (``products.product_row``): xg's row t holds X·Wᵀ + bias; the state before the step is at
    ``cur`` in ``w``, after it at ``nxt`` (``states`` = (cur, nxt)); C, C2 and r ⊙ H are shared, each
    half writing its own columns."""
    t, phase, half = item
    n_hidden = c.n_hidden
    p = panels(n_hidden, w.itemsize)
    nr = p.nr
    rows = Rows(np.int64(1), o.c, np.int64(0), o.c2, np.int64(0), o.rh, states[0], states[1])
    src = r_start(c, np.int64(0), nr, p.n, weights), n_hidden, nr
    rbh_at = bias_start(c, np.int64(0), nr, p.n, weights, w.itemsize) + 3 * n_hidden
    how = Step(c, rows, src, (o.xg + t * p.n * nr, t * c.y_step, t), nr, p.p2 * nr, rbh_at, clip_at)
    one_phase = phases(c.lbr, n_hidden, nr) == 1
    if one_phase:  # each half the z, r and h columns of its own units
        per_gate = n_hidden // nr
        q0, q1 = half * per_gate // 2, (half + 1) * per_gate // 2
        panels_of, units = (q0, q1, np.int64(3), per_gate), (q0, q1, q0 * nr, q1 * nr)
    else:
        total = p.n if c.lbr else p.p1
        panels_of, units = (
            (half * total // 2, (half + 1) * total // 2, np.int64(1), np.int64(0)),
            half_units(half, n_hidden, p),
        )
    if one_phase or phase == 0:  # each phase called once: Numba copies an inlined function's code at each call
        gates(w, weights, weights, iwork, product_row, one_row, how, panels_of)
    if one_phase or phase == 1:
        candidate(w, weights, iwork, att, y, product_row, one_row, how, units)


@kernel()
def claim(iwork, io, m, half, other):
    """Whether this worker (whose partner is ``other``) claims half ``half`` of item m. Before it
    takes its partner's half, it gives a partner that is present PATIENCE_SPINS spins to claim it."""
    if half == other and atomic_load(iwork, io.present + other) > 0:
        spins = 0
        while atomic_load(iwork, io.claims + 2 * m + other) == 0 and spins < PATIENCE_SPINS:
            spins += 1
    return atomic_swap(iwork, io.claims + 2 * m + half, 0, 1)


@kernel()
def wait_item(iwork, io, m):
    """Wait until both halves of item m are done (by whichever worker claimed each)."""
    while atomic_load(iwork, io.done + m) < 2:
        spin_pause()


@kernel()
def split_setup(call, h0, state_rows, work, iwork):
    """Before the workers start: the state from h0, no item claimed or done, no worker present."""
    c = read_call(call)
    o, io = split_scratch(c.seq_length, c.n_inputs, c.n_hidden, work.itemsize, np.int64(CHUNK_ROWS))
    at = state_at(c, state_rows, np.int64(0), np.int64(0))
    for j in range(c.n_hidden):
        store(work, o.state + j, load(h0, at + j))
    for k in range(o.rh, o.end):  # r ⊙ H, C, C2: every element is written before it is read; zero all the same
        store(work, k, 0)
    for k in range(io.end):
        store(iwork, k, 0)


@driver(exact=True)  # finish_row is inlined here
def split_part(address):
    """Worker JOB["task"] (0 or 1) of a split row, after ``split_tasks``: the items it claims, then
    its own units of the outputs that no step wrote (Y past the length, Ho)."""
    job, like, weights_like = carray(address, (JOB_SIZE,)), LIKE, WEIGHTS_LIKE
    X, h0, lengths, state_rows, att, y, ho, weights, call, clip, work, iwork = job_arrays(job, like, weights_like)
    worker, clip_at = job[_TASK], y.dtype.type(clip)
    c = read_call(call)
    n_hidden = c.n_hidden
    p = panels(n_hidden, work.itemsize)
    o, io = split_scratch(c.seq_length, c.n_inputs, n_hidden, work.itemsize, np.int64(CHUNK_ROWS))
    length = lengths[0]
    other = 1 - worker
    atomic_add(iwork, io.present + worker, 1)
    n_phases = phases(c.lbr, n_hidden, p.nr)
    for m in range(1 + n_phases * length):  # item 0: the projection; then the steps' phases
        for k in range(2):
            half = worker if k == 0 else other
            if claim(iwork, io, m, half, other):
                if m == 0:
                    _project_half(X, c, weights, work, iwork, o, io, half, length)
                else:
                    s, phase = (m - 1) // n_phases, (m - 1) % n_phases
                    t = length - 1 - s if c.reverse & 1 else s
                    cur, nxt = o.state + (s % 2) * n_hidden, o.state + ((s + 1) % 2) * n_hidden
                    _step_half(c, weights, clip_at, att, y, iwork, work, o, (t, phase, half), (cur, nxt))
                atomic_add(iwork, io.done + m, 1)
        wait_item(iwork, io, m)
    _, _, u0, u1 = half_units(worker, n_hidden, p)
    state = o.state + (length % 2) * n_hidden
    ho_at = state_at(c, state_rows, np.int64(0), np.int64(0))
    y_at, steps = (np.int64(0), c.y_step), (length, c.seq_length)
    finish_row(work, state, length == 0 and not c.keep, y, y_at, steps, ho, ho_at, (u0, u1))
    return 0


@kernel()
def split_tasks(job, like, weights_like):
    """``split_setup``, then the two workers' jobs (``jobs.task_jobs``), at the head of the job's
    ``iwork``, before the row's scratch: an int64 array (2, JOB_SIZE)."""
    _, h0, _, state_rows, _, _, _, _, call, _, work, iwork = job_arrays(job, like, weights_like)
    split_setup(call, h0, state_rows, work, iwork[2 * JOB_SIZE :])
    return task_jobs(job, iwork, np.int64(2))


@driver(parallel=True)
def run_split(address):
    """Both workers in one Numba parallel region, each through the job's tasks callback (linked in
    here, split_part would be compiled twice more: in the region's function and in this one)."""
    job, like, weights_like = carray(address, (JOB_SIZE,)), LIKE, WEIGHTS_LIKE
    jobs = split_tasks(job, like, weights_like)
    for worker in prange(2):
        call_job(jobs[worker, _CALLBACK], jobs, worker * JOB_SIZE)
    return 0
