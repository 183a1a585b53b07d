"""One row of one direction on two threads: batch 1 is bound by streaming the packed weights
(PERF_NOTES.md, "Batch 1"), and each of two cores keeps half of them in its own L2.

Each step's work is cut in two halves, and so is the projection X·Wᵀ + bias of every step done
first. Two workers (0 and 1) share a row through claims: a worker claims its own half of each
item, then its partner's if the partner has not taken it in time (or has not started at all), then
waits for both halves: waiting is only ever for a half that a running thread has claimed, so it
cannot deadlock, and one worker alone computes everything. The same operations compute every
element whichever worker takes it, so results do not depend on who did what.

Two ways to run the workers:

- ``run_split``: both in one Numba parallel region (one fork/join per call; see ``fastgru._partner``
  for what it costs);
- ``run_pair``: worker 0 on the calling thread, worker 1 on fastgru's partner thread
  (``fastgru._partner``), which spins in ``serve`` between calls and picks the job up from a
  mailbox in well under a microsecond. The calling thread never waits for a partner that has not
  taken the job: it withdraws the job and runs worker 1's remaining part itself.

Arrays as in ``gru.py`` (X (1, S, I), h0 (1, 1, H), lengths (1,), att (1, S) or (0, 0), y (1, 1,
S, H), ho (1, 1, H), packed weights); ``work`` and ``iwork`` hold ``split_scratch_size`` floats
and int64s.
"""

import numpy as np
from numba import carray, prange

from .._config import kernel
from .activations import activate, clip
from .atomics import (
    address_of,
    atomic_add,
    atomic_claim,
    atomic_load,
    atomic_store,
    atomic_swap,
    cycles,
    pointer_to,
    spin_pause,
)
from .gru import CHUNK_ROWS, _geometry, _product, _project, bias_start
from .memory import load, store

#: Spins (atomic loads) a worker waits for its partner to take its own half of an item before
#: doing that half itself too; a few microseconds, far less than a step that is worth splitting.
_PATIENCE = 2000


@kernel()
def _split_units(half, n_hidden, nr, n_panels, p2):
    """The panels [q0, q1) of the h columns that half ``half`` owns, and their units [u0, u1)."""
    q0 = p2 + half * (n_panels - p2) // 2
    q1 = p2 + (half + 1) * (n_panels - p2) // 2
    return q0, q1, min(max(q0 * nr - 2 * n_hidden, 0), n_hidden), min(max(q1 * nr - 2 * n_hidden, 0), n_hidden)


@kernel(exact=True)
def _split_half(xg, weights, rbase, b0, lbr, clip_at, f_code, g_code, att, y, t, phase, half, state, cur, nxt, rh, c,
                c2, one):
    """One half of one phase of step ``t`` of row 0; xg (S*P*NR,) holds X·Wᵀ + bias of every step,
    row t at t*P*NR; the state before the step is state[cur:cur + H], after it state[nxt:nxt + H].

    Two phases per step (``_split_phases``): phase 0 computes the products H·Rᵀ of the z and r
    columns (and, for linear_before_reset, the h columns), cut into two contiguous runs of panels,
    f on z and r, and r ⊙ H; phase 1 the h gate and the state update for the units of a run of the
    h gate's panels. One phase for linear_before_reset when H is a whole number of panels: each
    half computes the z, r and h columns of its own run of units, then their h gate and update.
    The buffers ``c`` (P*NR,), ``c2`` (second product) and ``rh`` (H,) are shared, each half
    writing its own columns.
    """
    n_hidden = y.shape[3]
    nr, n_panels, p1, p2 = _geometry(n_hidden, y.itemsize)
    x = t * n_panels * nr
    if phase == 0 and _split_phases(lbr, n_hidden, nr) == 1:
        per_gate = n_hidden // nr
        q0, q1 = half * per_gate // 2, (half + 1) * per_gate // 2
        u0, u1 = q0 * nr, q1 * nr
        for g in range(3):
            for j in range(u0, u1):
                c[g * n_hidden + j] = load(xg, x + g * n_hidden + j) if g < 2 else load(weights, b0 + 3 * n_hidden + j)
            _product(c, g * n_hidden + u0, 0, state, cur, 1, weights, rbase, g * per_gate + q0, g * per_gate + q1,
                     n_hidden, nr)
        for g in range(2):
            if clip_at > 0:
                clip(c, g * n_hidden + u0, g * n_hidden + u1, clip_at)
            activate(c, g * n_hidden + u0, g * n_hidden + u1, f_code)
    elif phase == 0:
        total = n_panels if lbr else p1
        q0, q1 = half * total // 2, (half + 1) * total // 2
        c0, c1 = q0 * nr, q1 * nr
        for col in range(c0, c1):
            if col < 2 * n_hidden:
                c[col] = load(xg, x + col)
            elif lbr and col < 3 * n_hidden:
                c[col] = load(weights, b0 + n_hidden + col)  # Rbh: the bias's row 3, from column 2H
            else:
                c[col] = 0
        _product(c, c0, 0, state, cur, 1, weights, rbase, q0, q1, n_hidden, nr)
        c1 = min(c1, 2 * n_hidden)
        if clip_at > 0:
            clip(c, c0, c1, clip_at)
        activate(c, c0, c1, f_code)
        if not lbr:
            for col in range(max(c0, n_hidden), c1):
                rh[col - n_hidden] = c[col] * load(state, cur + col - n_hidden)
        return
    else:
        q0, q1, u0, u1 = _split_units(half, n_hidden, nr, n_panels, p2)
    if lbr:
        # h = g(X·Whᵀ + Wbh + r ⊙ (H·Rhᵀ + Rbh))
        hc, hg = c, 2 * n_hidden
        for j in range(u0, u1):
            c[2 * n_hidden + j] = load(xg, x + 2 * n_hidden + j) + c[n_hidden + j] * c[2 * n_hidden + j]
    else:
        hc, hg = c2, 2 * n_hidden - p2 * nr
        for col in range(q0 * nr, q1 * nr):
            c2[col - p2 * nr] = load(xg, x + col) if 2 * n_hidden <= col < 3 * n_hidden else 0
        _product(c2, (q0 - p2) * nr, 0, rh, 0, 1, weights, rbase, q0, q1, n_hidden, nr)
    if clip_at > 0:
        clip(hc, hg + u0, hg + u1, clip_at)
    activate(hc, hg + u0, hg + u1, g_code)
    has_att = att.shape[0] > 0
    for j in range(u0, u1):
        z = c[j]
        if has_att:
            z = z - att[0, t] * z
        v = (one - z) * load(hc, hg + j) + z * load(state, cur + j)  # SPEC.md §3, as _run_rows
        store(state, nxt + j, v)
        y[0, 0, t, j] = v


@kernel()
def _split_phases(lbr, n_hidden, nr):
    """Phases per step of the split (_split_half): 1 for linear_before_reset with H a whole number
    of panels (the halves meet once per step), else 2."""
    return 1 if lbr and n_hidden % nr == 0 else 2


@kernel()
def _split_offsets(seq_length, n_inputs, n_hidden, itemsize):
    """Offsets in the split's float scratch: X·Wᵀ + bias of every step, the two halves' packed
    rows of X, the state (two copies: before and after a step), r ⊙ H, the products C and C2, the
    end; then the int64 scratch's: claims (two per item), halves done per item, workers present,
    the end. Float buffers start on 64-byte lines."""
    nr, n_panels, _, p2 = _geometry(n_hidden, itemsize)
    line = 64 // itemsize
    o_packed = -(-seq_length * n_panels * nr // line) * line
    o_state = o_packed + -(-2 * max(1, n_inputs) * min(CHUNK_ROWS, max(seq_length, 1)) // line) * line
    o_rh = o_state + -(-2 * n_hidden // line) * line
    o_c = o_rh + -(-n_hidden // line) * line
    o_c2 = o_c + n_panels * nr
    o_end = o_c2 + (n_panels - p2) * nr
    items = 1 + 2 * seq_length  # the projection, then up to two phases per step
    return o_packed, o_state, o_rh, o_c, o_c2, o_end, 2 * items, 3 * items, 3 * items + 2


@kernel()
def split_scratch_size(seq_length, n_inputs, n_hidden, itemsize):
    """Elements of the float and the int64 scratch of a split row."""
    offsets = _split_offsets(seq_length, n_inputs, n_hidden, itemsize)
    return offsets[5], offsets[8]


@kernel()
def _split_setup(h0, work, iwork, seq_length, n_inputs):
    """Before the workers start: the state from h0, no item claimed or done, no worker present."""
    n_hidden = h0.shape[2]
    o = _split_offsets(seq_length, n_inputs, n_hidden, work.itemsize)
    for j in range(n_hidden):
        work[o[1] + j] = h0[0, 0, j]
    for k in range(o[2], o[5]):  # r ⊙ H, C, C2: every element is written before it is read; zero all the same
        work[k] = 0
    for k in range(o[8]):
        iwork[k] = 0


@kernel()
def _split_part(X, h0, lengths, att, y, ho, weights, reverse, lbr, f_code, g_code, clip_at, keep, work, iwork,
                worker):
    """Worker ``worker`` (0 or 1) of a split row, after ``_split_setup``: the items it claims,
    then its own units of the outputs that no step wrote (Y past the length, Ho)."""
    n_hidden = y.shape[3]
    seq_length, n_inputs = X.shape[1], X.shape[2]
    length = lengths[0]
    rev = reverse & 1
    nr, n_panels, _, p2 = _geometry(n_hidden, y.itemsize)
    ldc = n_panels * nr
    o_packed, o_state, o_rh, o_c, o_c2, o_end, o_done, o_present, _ = _split_offsets(seq_length, n_inputs,
                                                                                     n_hidden, y.itemsize)
    # Views made once per call: the kernels below take whole buffers.
    xg, packed = work[:o_packed], work[o_packed:o_state]
    state, rh, c, c2 = work[o_state:o_rh], work[o_rh:o_rh + n_hidden], work[o_c:o_c2], work[o_c2:o_end]
    claims, done, present = iwork[:o_done], iwork[o_done:o_present], iwork[o_present:o_present + 2]
    b0 = bias_start(h0, n_inputs, y.itemsize)
    rbase = n_panels * n_inputs * nr
    one = y.dtype.type(1)  # a 1 of the compute dtype (a literal 1 would promote to float64)
    other = 1 - worker
    atomic_add(present, worker, 1)
    phases = _split_phases(lbr, n_hidden, nr)
    for m in range(1 + phases * length):  # item 0: the projection; then the steps' phases
        for k in range(2):
            half = worker if k == 0 else other
            if half == other and atomic_load(present, other) > 0:
                spins = 0
                while atomic_load(claims, 2 * m + other) == 0 and spins < _PATIENCE:
                    spins += 1
            if atomic_claim(claims, 2 * m + half):
                if m == 0:
                    # X·Wᵀ + bias of every step (the whole sequence: lengths[0] <= S), half of the panels.
                    _project(X, 0, length, weights, b0, n_hidden, 0, xg, 0, ldc, packed, half * (packed.shape[0] // 2),
                             half * n_panels // 2, (half + 1) * n_panels // 2)
                else:
                    s, phase = (m - 1) // phases, (m - 1) % phases
                    t = length - 1 - s if rev else s
                    cur, nxt = (s % 2) * n_hidden, ((s + 1) % 2) * n_hidden
                    _split_half(xg, weights, rbase, b0, lbr, clip_at, f_code, g_code, att, y, t, phase, half,
                                state, cur, nxt, rh, c, c2, one)
                atomic_add(done, m, 1)
        while atomic_load(done, m) < 2:
            pass
    _, _, u0, u1 = _split_units(worker, n_hidden, nr, n_panels, p2)
    last = (length % 2) * n_hidden
    for t in range(length, seq_length):
        for j in range(u0, u1):
            y[0, 0, t, j] = 0
    zero = length == 0 and not keep
    for j in range(u0, u1):
        ho[0, 0, j] = 0 if zero else load(state, last + j)


@kernel(parallel=True)
def run_split(X, h0, lengths, att, y, ho, weights, reverse, lbr, f_code, g_code, clip, keep, work, iwork):
    """Both workers in one Numba parallel region."""
    _split_setup(h0, work, iwork, X.shape[1], X.shape[2])
    clip_at = y.dtype.type(clip)
    for worker in prange(2):
        _split_part(X, h0, lengths, att, y, ho, weights, reverse, lbr, f_code, g_code, clip_at, keep, work, iwork,
                    np.int64(worker))  # prange's index is unsigned


# ---------------------------------------------------------------------------------- the partner

#: The mailbox (int64) shared by a calling thread and the partner thread: the state on a line
#: of its own, the partner's flags on another (ASLEEP: it sleeps; NAP: asked to sleep now), then
#: the job.
STATE, ASLEEP, NAP, JOB = 0, 8, 9, 16
#: States: nothing posted, a job posted, taken by the partner, done by it; stop serving.
IDLE, POSTED, TAKEN, FINISHED, STOP = 0, 1, 2, 3, 4
#: The job: element size, then addresses and sizes of the arrays, then the scalar arguments.
(_ITEMSIZE, _X, _STEPS, _INPUTS, _HIDDEN, _H0, _LENGTHS, _ATT, _ATT_ROWS, _Y, _HO, _WEIGHTS, _WEIGHTS_SIZE, _WORK,
 _WORK_SIZE, _IWORK, _IWORK_SIZE, _REVERSE, _LBR, _F, _G, _KEEP, _CLIP) = range(JOB, JOB + 23)
MAILBOX_SIZE = JOB + 24


@kernel()
def run_pair(X, h0, lengths, att, y, ho, weights, reverse, lbr, f_code, g_code, clip, keep, work, iwork, mailbox):
    """Worker 0 here, worker 1 posted to the partner through ``mailbox`` (IDLE on entry and on return).

    Returns 1 if the partner took the job, else 0 (this thread then ran worker 1's part too)."""
    _split_setup(h0, work, iwork, X.shape[1], X.shape[2])
    job = mailbox
    job[_ITEMSIZE] = y.itemsize
    job[_X], job[_STEPS], job[_INPUTS], job[_HIDDEN] = address_of(X), X.shape[1], X.shape[2], y.shape[3]
    job[_H0], job[_LENGTHS], job[_Y], job[_HO] = address_of(h0), address_of(lengths), address_of(y), address_of(ho)
    job[_ATT], job[_ATT_ROWS] = address_of(att), att.shape[0]
    job[_WEIGHTS], job[_WEIGHTS_SIZE] = address_of(weights), weights.shape[0]
    job[_WORK], job[_WORK_SIZE], job[_IWORK], job[_IWORK_SIZE] = address_of(work), work.shape[0], address_of(iwork), \
        iwork.shape[0]
    job[_REVERSE], job[_LBR], job[_F], job[_G], job[_KEEP] = reverse, lbr, f_code, g_code, keep
    mailbox.view(np.float64)[_CLIP] = clip
    atomic_store(mailbox, STATE, POSTED)  # publishes the job's fields: seq_cst
    clip_at = y.dtype.type(clip)
    _split_part(X, h0, lengths, att, y, ho, weights, reverse, lbr, f_code, g_code, clip_at, keep, work, iwork, 0)
    if atomic_swap(mailbox, STATE, POSTED, IDLE):  # not taken: withdrawn, worker 1's part is ours
        _split_part(X, h0, lengths, att, y, ho, weights, reverse, lbr, f_code, g_code, clip_at, keep, work, iwork, 1)
        return 0
    while atomic_load(mailbox, STATE) != FINISHED:
        spin_pause()
    atomic_store(mailbox, STATE, IDLE)
    return 1


@kernel()
def _serve_job(mailbox, like):
    """Worker 1 of the job in ``mailbox``, whose arrays have the dtype of ``like``."""
    s, i, h = mailbox[_STEPS], mailbox[_INPUTS], mailbox[_HIDDEN]
    X = carray(pointer_to(mailbox[_X], like), (1, s, i))
    h0 = carray(pointer_to(mailbox[_H0], like), (1, 1, h))
    lengths = carray(pointer_to(mailbox[_LENGTHS], mailbox), (1,))
    att = carray(pointer_to(mailbox[_ATT], like), (mailbox[_ATT_ROWS], s if mailbox[_ATT_ROWS] else 0))
    y = carray(pointer_to(mailbox[_Y], like), (1, 1, s, h))
    ho = carray(pointer_to(mailbox[_HO], like), (1, 1, h))
    weights = carray(pointer_to(mailbox[_WEIGHTS], like), (mailbox[_WEIGHTS_SIZE],))
    work = carray(pointer_to(mailbox[_WORK], like), (mailbox[_WORK_SIZE],))
    iwork = carray(pointer_to(mailbox[_IWORK], mailbox), (mailbox[_IWORK_SIZE],))
    clip_at = y.dtype.type(mailbox.view(np.float64)[_CLIP])
    _split_part(X, h0, lengths, att, y, ho, weights, mailbox[_REVERSE], mailbox[_LBR], mailbox[_F], mailbox[_G],
                clip_at, mailbox[_KEEP], work, iwork, 1)


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
            if mailbox[_ITEMSIZE] == 4:
                _serve_job(mailbox, f32)
            else:
                _serve_job(mailbox, f64)
            atomic_store(mailbox, STATE, FINISHED)
