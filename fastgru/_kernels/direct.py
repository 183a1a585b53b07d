"""The direct driver: one row and one step from the caller's W, R and B as they are.

The function API (``fastgru.gru_cell(x, h, W, R, B)``, and the sequences' calls of one row and one
step) gets new weights, or weights that may have changed in place, at every call. Packing them
first is a pass over W and R as long as the step itself, and a cache of packed weights must read
the caller's weights anyway to prove them unchanged. Here each panel is packed into a small buffer
that stays in the first-level cache, K_ROWS rows of k at a time, just before the micro-kernel
multiplies it (``layout.pack_panel``): W and R are read once, and nothing is kept between calls.
The panels, the micro-kernel and the step (``step.py``, with ``product_direct`` as its product) are
the other drivers', and a sum's C is stored and loaded between two runs of k rows exactly: the
results have the same bits.

A call of one direction can also be shared with the partner thread (``pair.run_direct_pair``): two
workers, each the split driver's protocol of claims (``split.py``) over the step's two phases.
Phase 0: X·Wᵀ + bias of half the panels, then H·Rᵀ of half the z and r panels (all panels for
linear_before_reset), f, and r ⊙ H; phase 1: the h gate and the update of half the units. Each
worker packs into a panel buffer of its own, and reads half of W and R: the two halves meet once
in the step, and the results are the serial direct call's, bit for bit.

Arguments as in ``layout.py`` (N = S = 1, any D), with W (D, 3H, I), R (D, 3H, H) and B (D, 3H or
4H; [Bz, Br, Bh] or [Bz, Br, Wbh, Rbh]) instead of the packed weights, and ``work`` at least
``direct_scratch(...).end`` elements (``iwork``, a shared call's, ``direct_ints(...)``).
"""

from collections import namedtuple

import numpy as np
from numba import carray

from .._config import kernel
from .._tuning import CHUNK_ROWS
from .atomics import atomic_add
from .callbacks import LIKE, WEIGHTS_LIKE, driver
from .jobs import JOB, JOB_SIZE, direct_weights, job_arrays, task_jobs
from .layout import _lines, pack_panel, panels, read_call, split_scratch
from .memory import load, store
from .microkernel import tile_fma
from .products import PANEL_VECTORS
from .split import claim, half_units, wait_item
from .stages import finish_row
from .step import Rows, Step, candidate, gates, one_row, whole

#: Rows of k packed into the buffer at a time (a multiple of every geometry's lanes): 8 KB of a
#: float32 panel of 32 columns.
K_ROWS = 64

#: Offsets in the float scratch: the row of X, the state, X·Wᵀ + bias, C, C2, r ⊙ H, the panel
#: buffers (the first worker's, the second's), the end.
DirectScratch = namedtuple("DirectScratch", "x state xg c c2 m panel end")

_TASK = JOB["task"]


@kernel(inline=True)  # as layout.rows_scratch
def direct_scratch(n_inputs, n_hidden, itemsize):
    """The DirectScratch of I inputs and H hidden units."""
    p = panels(n_hidden, itemsize)
    o_state = _lines(n_inputs, itemsize)
    o_xg = o_state + _lines(n_hidden, itemsize)
    o_c = o_xg + _lines(p.n * p.nr, itemsize)
    o_c2 = o_c + _lines(p.n * p.nr, itemsize)
    o_m = o_c2 + _lines((p.n - p.p2) * p.nr, itemsize)
    o_panel = o_m + _lines(n_hidden, itemsize)
    return DirectScratch(0, o_state, o_xg, o_c, o_c2, o_m, o_panel, o_panel + 2 * K_ROWS * p.nr)


@kernel()
def direct_ints(n_inputs, n_hidden, itemsize):
    """The int64 scratch of a shared direct call: its two jobs, then the claims (``split_scratch``'s
    index of one step)."""
    return 2 * JOB_SIZE + split_scratch(np.int64(1), n_inputs, n_hidden, itemsize, np.int64(CHUNK_ROWS))[1].end


@kernel()
def product_direct(w, M, iwork, src, to, a, n, panels):
    """w[co + (q - q0)*NR + l] += sum_k w[a + k] · M[d, q*NR + l, k] for the panels [q0, q1) (columns
    past 3H: never read), each packed K_ROWS rows of k at a time into w from ``buf`` (``src`` = (d,
    buf, NR); ``to`` = (co, its row length); one row): ``step.py``'s ``product`` from the caller's
    R as it is, and the projection's from W."""
    d, buf, nr = src
    co, (q0, q1), k_len = to[0], panels, M.shape[2]
    for q in range(q0, q1):
        for k0 in range(0, k_len, K_ROWS):
            k1 = min(k0 + K_ROWS, k_len)
            pack_panel(M, d, q, k0, k1, nr, w, buf, False)
            at = co + (q - q0) * nr, np.int64(0), a + k0, buf, np.int64(0), k1 - k0
            tile_fma(w, w, w, at, 1, 1, PANEL_VECTORS)


@driver(exact=True)  # the step's stages are inlined here: their sums must not contract
def run_direct(address):
    """Step 0 of row 0 in every direction (a length of 0 or 1), on the calling thread: ``job``'s
    arrays of ``like``'s dtype, the caller's W, R and B of ``weights_like``'s (the same) in it
    (``jobs.direct_weights``). X·Wᵀ + bias, then a whole step (``step.py``) on the row and R as it is."""
    job, like, weights_like = carray(address, (JOB_SIZE,)), LIKE, WEIGHTS_LIKE
    X, h0, lengths, _, att, y, ho, _, call, clip, work, iwork = job_arrays(job, like, weights_like)
    c = read_call(call)
    W, R, B = direct_weights(job, weights_like, c.n_dirs, c.n_inputs, c.n_hidden)
    n_hidden, n_inputs = c.n_hidden, c.n_inputs
    p = panels(n_hidden, y.itemsize)
    nr = p.nr
    o = direct_scratch(n_inputs, n_hidden, y.itemsize)
    clip_at = y.dtype.type(clip)
    length, w = lengths[0], work
    rows, units = Rows(np.int64(1), o.c, np.int64(0), o.c2, np.int64(0), o.m, o.state, o.state), (np.int64(0), n_hidden)
    panels_of_gates, units_of_step = whole(c.lbr, n_hidden, p)
    for d in range(c.n_dirs):
        so, yo, bias_at = d * c.s_dir, d * c.y_dir, d * B.shape[1]
        for j in range(n_hidden):
            store(w, o.state + j, load(h0, so + j))
        if length > 0:
            for k in range(n_inputs):
                store(w, o.x + k, load(X, k))
            _project_row(w, W, B, iwork, (d, o.panel, nr), (o.x, o.xg, bias_at, 3 * n_hidden), (np.int64(0), p.n))
            how = Step(c, rows, (d, o.panel, nr), (o.xg, yo, np.int64(0)), nr, p.p2 * nr, bias_at + 3 * n_hidden,
                clip_at)  # fmt: skip
            gates(w, R, B, iwork, product_direct, one_row, how, panels_of_gates)
            candidate(w, R, iwork, att, y, product_direct, one_row, how, units_of_step)
        finish_row(w, o.state, length == 0 and not c.keep, y, (yo, c.y_step), (length, 1), ho, so, units)
    return 0


@kernel(inline=True)
def _project_row(w, W, B, iwork, src, at, panels):
    """X·Wᵀ + bias of the row of X at x in ``w`` on the panels [q0, q1) of xg (``at`` = (x, xg, where
    the direction's bias starts in B, 3H), ``panels`` = (q0, q1)): the bias first, as
    ``products.project`` (zeros past 3H), then += the row · Wᵀ (``product_direct``; ``src`` = (the
    direction, where its panels are packed, NR))."""
    x, xg, bias_at, h3 = at
    q0, q1 = panels
    for col in range(q0 * src[2], q1 * src[2]):
        store(w, xg + col, load(B, bias_at + col) if col < h3 else 0)
    product_direct(w, W, iwork, src, (xg + q0 * src[2], np.int64(0)), x, np.int64(1), panels)


@kernel(exact=True)  # the step's stages are inlined here: their sums must not contract
def _direct_half(c, W, R, B, att, y, iwork, w, o, item):
    """Half ``half`` of phase ``phase`` of the step (``item`` = (phase, half, clip, buf); see the
    module), packing panels at ``buf``: phase 0, X·Wᵀ + bias of its panels then ``step.gates``;
    phase 1, ``step.candidate``."""
    phase, half, clip_at, buf = item
    n_hidden = c.n_hidden
    h3 = 3 * n_hidden
    p = panels(n_hidden, w.itemsize)
    nr = p.nr
    rows = Rows(np.int64(1), o.c, np.int64(0), o.c2, np.int64(0), o.m, o.state, o.state)
    how = Step(c, rows, (np.int64(0), buf, nr), (o.xg, np.int64(0), np.int64(0)), nr, p.p2 * nr, h3, clip_at)
    if phase == 0:
        total = p.n if c.lbr else p.p1
        q0, q1 = half * total // 2, (half + 1) * total // 2
        e0, e1 = total + half * (p.n - total) // 2, total + (half + 1) * (p.n - total) // 2  # h panels past r's
        for a, b in ((q0, q1), (e0, e1)):
            _project_row(w, W, B, iwork, (np.int64(0), buf, nr), (o.x, o.xg, np.int64(0), h3), (a, b))
        gates(w, R, B, iwork, product_direct, one_row, how, (q0, q1, 1, 0))
    else:
        candidate(w, R, iwork, att, y, product_direct, one_row, how, half_units(half, n_hidden, p))


@driver(exact=True)  # finish_row is inlined here
def direct_part(address):
    """Worker JOB["task"] (0 or 1) of a shared direct call, after ``direct_tasks``: the halves it
    claims, then its own units of the outputs."""
    job, like, weights_like = carray(address, (JOB_SIZE,)), LIKE, WEIGHTS_LIKE
    _, _, lengths, _, att, y, ho, _, call, clip, work, iwork = job_arrays(job, like, weights_like)
    c = read_call(call)
    W, R, B = direct_weights(job, weights_like, np.int64(1), c.n_inputs, c.n_hidden)
    worker, clip_at = job[_TASK], y.dtype.type(clip)
    n_hidden = c.n_hidden
    p = panels(n_hidden, work.itemsize)
    o = direct_scratch(c.n_inputs, n_hidden, work.itemsize)
    _, io = split_scratch(np.int64(1), c.n_inputs, n_hidden, work.itemsize, np.int64(CHUNK_ROWS))
    length, other = lengths[0], 1 - worker
    atomic_add(iwork, io.present + worker, 1)
    for m in range(2 * length):
        for k in range(2):
            half = worker if k == 0 else other
            if claim(iwork, io, m, half, other):
                _direct_half(c, W, R, B, att, y, iwork, work, o, (m, half, clip_at, o.panel + worker * K_ROWS * p.nr))
                atomic_add(iwork, io.done + m, 1)
        wait_item(iwork, io, m)
    _, _, u0, u1 = half_units(worker, n_hidden, p)
    finish_row(work, o.state, length == 0 and not c.keep, y, (np.int64(0), c.y_step), (length, 1), ho, 0, (u0, u1))
    return 0


@kernel()
def direct_tasks(job, like, weights_like):
    """A shared direct call's set-up (the row of X, the state, no half claimed, no worker present),
    then its two workers' jobs (``jobs.task_jobs``), at the head of the job's ``iwork``: an int64
    array (2, JOB_SIZE)."""
    X, h0, _, _, _, _, _, _, call, _, work, iwork = job_arrays(job, like, weights_like)
    c = read_call(call)
    o = direct_scratch(c.n_inputs, c.n_hidden, work.itemsize)
    _, io = split_scratch(np.int64(1), c.n_inputs, c.n_hidden, work.itemsize, np.int64(CHUNK_ROWS))
    for j in range(c.n_hidden):
        store(work, o.state + j, load(h0, j))
    for k in range(c.n_inputs):
        store(work, o.x + k, load(X, k))
    for k in range(io.end):
        store(iwork, 2 * JOB_SIZE + k, 0)
    return task_jobs(job, iwork, np.int64(2))
