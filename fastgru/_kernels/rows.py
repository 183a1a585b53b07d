"""The batch driver: every step of blocks of batch rows, on one thread per block.

Every op reaches ``run_serial`` or ``run_parallel`` here, or ``run_split`` (``split.py``) or
``run_pair`` (``pair.py``), with the arguments described in ``layout.py`` (the cell is a sequence
of one step, AUGRU a forward GRU with attention).

Strategy. Each (direction, block of batch rows) is one task owned by one thread for all time
steps: no synchronisation inside the time loop and one fork/join per call. A task first computes
X·Wᵀ + bias for all its rows and steps when the call says so (``hoist``: it fits in cache), else
per step. The rows still running at a step are processed in chunks of up to CHUNK_ROWS rows,
and within a chunk in the geometry's tiles of rows that share each load of the weights, weight
panels outermost so that each is read once per chunk and step.

In a stack's wavefront (``entry.py``) the call descriptor's ``post`` and ``wait`` make a task post
each step it has written and wait for each step of X it reads; such a task projects WAVE_STEPS
steps at a time when it hoists.

For linear_before_reset False, the h gate's product (r ⊙ H)·Rhᵀ is a second product over the
panels from P2 on, written to its own buffer C2: the panel that holds both r and h columns (and,
for H < NR, z columns) is then computed twice without overwriting z or r.
"""

from collections import namedtuple

import numpy as np
from numba import carray, prange

from .._config import kernel
from .._tuning import CHUNK_ROWS, WAVE_STEPS
from .atomics import atomic_load, atomic_store, pointer_to, spin_pause
from .callbacks import LIKE, TILED, WEIGHTS_LIKE, call_job, driver
from .jobs import JOB, JOB_SIZE, job_arrays, task_jobs
from .layout import bias_start, panels, r_start, read_call, rows_scratch, state_at, tile_starts, w_start
from .memory import LINE_BYTES, load, store
from .products import on_tiles, pack, product_rows, project
from .stages import finish_row
from .step import Rows, Step, candidate, gates, whole

_TASK, _BLOCKS, _CALLBACK, _CALL, _CLIP = JOB["task"], JOB["blocks"], JOB["callback"], JOB["call"], JOB["clip"]
_WORK, _IWORK = JOB["work"], JOB["iwork"]


@kernel()
def order_rows(lengths, lo, hi, seq_length, iwork, order, counts):
    """Rows lo..hi by decreasing length, in batch order among equal lengths, to iwork[order:] (a
    counting sort over the lengths 0..S, counted in iwork[counts:]): the rows still running at
    step s are then a prefix."""
    for length in range(seq_length + 1):
        store(iwork, counts + length, 0)
    for b in range(lo, hi):
        store(iwork, counts + lengths[b], load(iwork, counts + lengths[b]) + 1)
    start = 0
    for length in range(seq_length, -1, -1):  # counts become each length's first place
        count = load(iwork, counts + length)
        store(iwork, counts + length, start)
        start += count
    for b in range(lo, hi):
        place = load(iwork, counts + lengths[b])
        store(iwork, order + place, b)
        store(iwork, counts + lengths[b], place + 1)


#: What the pieces of ``run_serial`` share, integers all (a tuple holding an array costs a reference
#: count where it is made and where it goes): the call descriptor ``c``, the Panels ``p``, the
#: scratch offsets ``o`` and ``io`` (``layout.rows_scratch``), the task's rows [lo, lo + n_rows),
#: where its part of the job's float and int64 scratch starts, and the clip (a float).
Task = namedtuple("Task", "c p o io lo n_rows work_at iwork_at clip_at")


@driver(exact=True)  # the step's stages are inlined here: their sums must not contract
def run_serial(address):
    """The serial driver, and a task of the parallel one, on ``job`` (``jobs.py``) whose float arrays
    are of ``like``'s dtype and weights of ``weights_like``'s (``_task``). For each direction d of the
    task's: the rows' states, X·Wᵀ + bias of every (row, step) first when the call hoists it (for a
    stack's wavefront, WAVE_STEPS steps at a time once they are there), the rows still running at
    each step in chunks of up to CHUNK_ROWS (a whole step of ``step.py`` on each, ``_chunk``), then
    Ho and Y's zeros past each row's length. The loops and the step's phases are written here, not
    in a function inlined here: Numba copies an inlined function's whole code at each level of
    inlining, block by block, and the driver took twice as long to compile."""
    job, like, weights_like = carray(address, (JOB_SIZE,)), LIKE, WEIGHTS_LIKE
    t, d0, d1 = _task(job, like)
    X, h0, lengths, state_rows, att, y, ho, weights, _, _, work, iwork = job_arrays(job, like, weights_like)
    w, iwork = work[t.work_at :], iwork[t.iwork_at :]
    c, p, o, io = t.c, t.p, t.o, t.io
    n_hidden, seq_length, n_rows, lo = c.n_hidden, c.seq_length, t.n_rows, t.lo
    ldc = p.n * p.nr
    hoist = c.hoist
    waves = hoist and (c.wait != 0 or c.post != 0)  # a stack's wavefront: WAVE_STEPS at a time
    whole_gates, whole_units = whole(c.lbr, n_hidden, p)
    product = rows_product_on_tiles if TILED else rows_product  # chosen when the callback compiles
    for d in range(d0, d1):
        w_tiles, r_tiles = tile_starts(c, d, p.n, p.nr, weights) if TILED else (None, None)  # ``products.on_tiles``'
        w_base, bias_at = w_start(c, d, p.nr, p.n, weights), bias_start(c, d, p.nr, p.n, weights, y.itemsize)
        at = d, w_base, bias_at, w_tiles
        r_at = (r_start(c, d, p.nr, p.n, weights),) + ((r_tiles,) if TILED else ())
        order_rows(lengths, lo, lo + n_rows, seq_length, iwork, io.order, io.counts)
        for i in range(n_rows):  # the initial states, in that order
            h0_at = state_at(c, state_rows, load(iwork, io.order + i), d)
            for j in range(n_hidden):
                store(w, o.state + i * n_hidden + j, load(h0, h0_at + j))
        if hoist and not waves:  # X·Wᵀ + bias of every (row, step) of the block, row (b - lo)*S + t
            total = n_rows * seq_length
            for r0 in range(0, total, CHUNK_ROWS):
                n = min(CHUNK_ROWS, total - r0)
                for r in range(n):
                    b, s = lo + (r0 + r) // seq_length, (r0 + r) % seq_length
                    store(iwork, io.offsets + r, b * c.x_row + s * c.x_step)
                _project(X, iwork, weights, w, t, (at[1], at[2], n, o.xg + r0 * ldc), at[3])
        running = n_rows  # the rows still running at step s: a prefix of the order
        for s in range(seq_length):
            while running > 0 and lengths[load(iwork, io.order + running - 1)] <= s:
                running -= 1
            if running == 0:
                break
            if c.wait != 0 and not hoist:  # a stack's wavefront: X's step s is the Y of the layer before
                _wait_for(c.wait, s, iwork)
            elif waves and s % WAVE_STEPS == 0:  # X·Wᵀ + bias of the next WAVE_STEPS steps, once there
                s1 = min(s + WAVE_STEPS, lengths[load(iwork, io.order)])  # the block's longest row
                if c.wait != 0:
                    _wait_for(c.wait, s1 - 1, iwork)
                for i in range(n_rows):  # rows past their length project X they never read
                    for t0 in range(s, s1, CHUNK_ROWS):
                        n = min(CHUNK_ROWS, s1 - t0)
                        for r in range(n):
                            store(iwork, io.offsets + r, (lo + i) * c.x_row + (t0 + r) * c.x_step)
                        _project(X, iwork, weights, w, t, (at[1], at[2], n, o.xg + (i * seq_length + t0) * ldc), at[3])
            for g0 in range(0, running, CHUNK_ROWS):
                if not hoist:  # X_t·Wᵀ + bias of the chunk's rows, to xg's rows 0..n
                    _times(lengths, iwork, t, (d, s, g0, min(CHUNK_ROWS, running - g0)))
                    _project(X, iwork, weights, w, t, (at[1], at[2], min(CHUNK_ROWS, running - g0), o.xg), at[3])
                how = _chunk(lengths, iwork, t, (d, r_at, at[2], s, g0, min(CHUNK_ROWS, running - g0)))
                gates(w, weights, weights, iwork, product, chunk_row, how, whole_gates)
                candidate(w, weights, iwork, att, y, product, chunk_row, how, whole_units)
            if c.post != 0:  # the next layer of a stack's wavefront may read step s of Y
                atomic_store(carray(pointer_to(c.post, iwork), (1,)), 0, s + 1)
        for i in range(n_rows):  # Ho, and Y's zeros past each row's length
            b = load(iwork, io.order + i)
            length = lengths[b]
            y_at, ho_at = (b * c.y_row + d * c.y_dir, c.y_step), state_at(c, state_rows, b, d)
            finish_row(w, o.state + i * n_hidden, length == 0 and not c.keep, y, y_at, (length, seq_length), ho, ho_at,
                (np.int64(0), n_hidden))  # fmt: skip
    return 0


@kernel(inline=True)
def _task(job, like):
    """(Task, d0, d1): the rows, directions [d0, d1) and scratch of the job's task. JOB["blocks"] 0:
    every direction and row on the calling thread, in the whole scratch. JOB["blocks"] n > 0: task
    k = JOB["task"] of run_parallel's D·n, direction k // n, block k % n of the rows, in the k-th of
    equal parts of ``work`` (whole 64-byte lines) and ``iwork``. A task's scratch is
    ``layout.rows_scratch``'s. One driver for both, with the task in the job, not a loop around a
    function of a task's rows: Numba links a callee's code into each of its callers and LLVM
    optimises it again there (docs/tuning.md, "One compilation of each driver's body")."""
    c = read_call(carray(pointer_to(job[_CALL], job), (job[_CALL + 1],)))
    task, n_blocks = job[_TASK], job[_BLOCKS]
    d0, d1, lo, hi, work_at, iwork_at = 0, c.n_dirs, 0, c.n_rows, 0, 0
    if n_blocks > 0:
        n_tasks, line = c.n_dirs * n_blocks, LINE_BYTES // like.itemsize
        d0, blk = task // n_blocks, task % n_blocks
        d1, lo, hi = d0 + 1, blk * c.n_rows // n_blocks, (blk + 1) * c.n_rows // n_blocks
        work_at = task * (job[_WORK + 1] // n_tasks // line * line)
        iwork_at = task * (job[_IWORK + 1] // n_tasks)
    o, io = rows_scratch(hi - lo, c.seq_length, c.n_inputs, c.n_hidden, c.hoist, like.itemsize, np.int64(CHUNK_ROWS))
    clip_at = like.dtype.type(job.view(np.float64)[_CLIP])
    return Task(c, panels(c.n_hidden, like.itemsize), o, io, lo, hi - lo, work_at, iwork_at, clip_at), d0, d1


@kernel(exact=True, inline=True)
def _project(X, iwork, weights, w, t, at, tiles):
    """X·Wᵀ + bias of the n rows whose offsets in X ``iwork`` holds at ``io.offsets``, to xg's rows from
    ``xg`` on; ``at`` = (w_base, bias_at, n, xg): where direction d's panels of Wᵀ and its bias start;
    ``tiles`` ``products.on_tiles``' for Wᵀ (None: a driver without tiles)."""
    c, p = t.c, t.p
    w_base, bias_at, n, xg = at
    rows = t.io.offsets, n, w_base, bias_at, c.n_inputs, c.n_hidden
    project(X, iwork, weights, w, w, (*rows, xg, p.n * p.nr, t.o.a, np.int64(0), p.n, p.nr), tiles)


@kernel(inline=True)
def _times(lengths, iwork, t, step):
    """The offsets in X of step s of the chunk's rows (``step`` = (d, s, g0, n)), for ``_project``."""
    d, s, g0, n = step
    c, io = t.c, t.io
    rev = (c.reverse >> d) & 1
    for i in range(n):
        b = load(iwork, io.order + g0 + i)
        store(iwork, io.offsets + i, b * c.x_row + (lengths[b] - 1 - s if rev else s) * c.x_step)


@kernel(inline=True)
def _chunk(lengths, iwork, t, step):
    """The ``step.Step`` of step s of direction d for the rows g0..g0 + n of the order (``step`` = (d,
    r_at, bias_at, s, g0, n): where direction d's Rᵀ and bias start in the packed weights, r_at
    (r_base,) or, in a driver with tiles, (r_base, ``products.on_tiles``' tiles for Rᵀ)), whose
    X·Wᵀ + bias is in xg: the chunk's rows (``chunk_row``; their times are written first) and the
    packed weights (``rows_product``)."""
    d, r_at, bias_at, s, g0, n = step
    c, p, o, io = t.c, t.p, t.o, t.io
    n_hidden, nr, ldc = c.n_hidden, t.p.nr, t.p.n * t.p.nr
    rev = (c.reverse >> d) & 1
    for i in range(n):
        b = load(iwork, io.order + g0 + i)
        store(iwork, io.times + i, lengths[b] - 1 - s if rev else s)
    states = o.state + g0 * n_hidden
    rows = Rows(n, o.c, ldc, o.c2, (p.n - p.p2) * nr, o.m, states, states)
    src = (o.a, io.offsets, r_at[0], n_hidden, nr) + r_at[1:]
    at = io.order + g0, io.times, t.lo, c.seq_length, c.hoist, o.xg, ldc, d * c.y_dir, c.y_row, c.y_step
    return Step(c, rows, src, at, nr, p.p2 * nr, bias_at + 3 * n_hidden, t.clip_at)


@kernel()
def chunk_row(at, iwork, i):
    """``step.py``'s ``where`` of row i of a chunk: where its X·Wᵀ + bias of the step is (its own
    row of xg's, or its step's row of the block's hoisted ones), its place in Y and its attention
    score's (``at`` = (the chunk's first place in the order, the times, the block's first row, S,
    hoist, xg, xg's row length, Y's direction offset, Y's row and step strides))."""
    order, times, lo, seq_length, hoist, xg, ldc, y_dir, y_row, y_step = at
    b, step_t = load(iwork, order + i), load(iwork, times + i)
    xo = xg + ((b - lo) * seq_length + step_t) * ldc if hoist else xg + i * ldc
    return xo, b * y_row + y_dir + step_t * y_step, b * seq_length + step_t


@kernel()
def rows_product(w, weights, iwork, src, to, a, n, panels):
    """``step.py``'s ``product`` of a chunk: C's n rows (``to`` = (row 0's column of panel q0, the
    row length)) += the rows of A, H apart from ``a`` in ``w``, · the panels [q0, q1) of the
    packed Rᵀ (``src`` = (where A is packed, iwork's row offsets, Rᵀ's first panel, H, NR))."""
    a_at, offsets, r_base, k_len, nr = src
    _row_offsets(iwork, offsets, a, n, k_len)
    pack(w, a_at, w, iwork, offsets, n, k_len)
    product_rows(w, w, weights, n, (to[0], to[1], a_at, r_base, k_len, panels[0], panels[1], nr))


@kernel()
def rows_product_on_tiles(w, weights, iwork, src, to, a, n, panels):
    """``rows_product`` in a driver with tiles, by ``products.on_tiles``: ``src`` has its tiles for Rᵀ
    last."""
    a_at, offsets, r_base, k_len, nr, tiles = src
    _row_offsets(iwork, offsets, a, n, k_len)
    on_tiles(w, w, w, iwork, weights, n, (to[0], to[1], a_at, r_base, k_len, panels[0], panels[1], nr, offsets), tiles)


@kernel(inline=True)
def _row_offsets(iwork, offsets, a, n, k_len):
    """The n rows of A, k_len apart from ``a``, as the offsets that packing reads, at ``offsets``."""
    for i in range(n):
        store(iwork, offsets + i, a + i * k_len)


@kernel()
def _wait_for(address, s, like):
    """Spin until the int64 counter at ``address`` exceeds s (``like``: an int64 array)."""
    counter = carray(pointer_to(address, like), (1,))
    while atomic_load(counter, 0) <= s:
        spin_pause()


@driver(parallel=True)
def run_parallel(address):
    """Every (direction, block of rows) task of ``run_serial``, shared among Numba's threads: one
    fork/join per call. Each task runs through the job's tasks callback (``run_serial``'s) on a copy
    of the job (``task_jobs``, at the head of ``iwork``, before the tasks' scratch): linked in
    here, run_serial's body would be compiled twice more, once in the parallel region's function and
    once in this one."""
    job, like, weights_like = carray(address, (JOB_SIZE,)), LIKE, WEIGHTS_LIKE
    arrays = job_arrays(job, like, weights_like)  # call and iwork: the 9th and the 12th
    jobs = task_jobs(job, arrays[11], read_call(arrays[8]).n_dirs * job[_BLOCKS])
    n_tasks = jobs.shape[0]
    for task in prange(n_tasks):
        call_job(jobs[task, _CALLBACK], jobs, task * JOB_SIZE)
    return 0
