"""The one kernel core behind GRUCell-3, GRUSequence-5 and AUGRUSequence-10.

Every op reaches ``run_serial``, ``run_parallel`` or ``run_split`` with the same canonical arrays
(the cell is a sequence of one step, AUGRU a forward GRU with attention). N batch rows, S steps,
I inputs, D directions, H hidden units. Gate columns are laid out z, r, h without padding (gate g,
unit j at column g*H + j); NR is the panel width (two vectors, see microkernel.py) and the
3H columns are padded once to P = ceil(3H / NR) panels of NR. Arrays are C-contiguous in the
compute dtype (float32 or float64) unless noted:

X        : (N, S, I)      input data.
wp, rp   : flat           Wᵀ and Rᵀ packed by ``pack_panels``: per direction, P panels holding,
                          for every k, their NR columns' weights (zero past 3H), so products
                          stream memory in order.
bias     : (D, 4, H)      [Bz, Br, Bh, 0] (linear_before_reset False) or [Bz, Br, Wbh, Rbh].
h0       : (N, D, H)      initial_hidden_state.
lengths  : (N,) int64     sequence_lengths, already checked to lie in [0, S].
reversed_: (D,) bool      whether direction d runs t = L-1, ..., 0.
att      : (N, S)         AUGRU attention scores a; shape (0, 0) for plain GRU.
y        : (N, D, S, H)   output, every element written (zero past each row's length).
ho       : (N, D, H)      output, the state after the last computed step (zero for L = 0).

Strategy. Each (direction, block of batch rows) is one task owned by one thread for all time
steps: no synchronisation inside the time loop and one fork/join per call. A task first computes
X·Wᵀ + bias for all its rows and steps when the dispatcher says so (``hoist``: it fits in cache),
else per step. The rows still running at a step are processed in chunks of up to 64 rows, and
within a chunk in tiles of 8, 4 or 1 rows that share each load of the weights
(microkernel.tile_fma), weight panels outermost so that each is read once per chunk and step.
A single row can instead be split over two threads (``run_split``). Every element is computed by
the same sequence of operations on any path, tile or thread, so results do not depend on the
thread count.

For linear_before_reset False, the h gate's product (r ⊙ H)·Rhᵀ is a second product over the
panels from column 2H on, written to its own buffer: the panel that holds both r and h columns
(and, for H < NR, z columns) is then computed twice without overwriting z or r.
"""

import numpy as np
from numba import prange

from .._config import kernel
from .activations import activate, clip
from .atomics import atomic_add, atomic_claim, atomic_load
from .microkernel import tile_fma

#: Rows per tile; tails use 4 and then 1 (the literal variants of _product).
TILE_ROWS = 8

#: Rows whose products run together, panels outermost: each group of weight panels is read once
#: for all the chunk's tiles while it is in cache (64 rows of C are at most 3*64*H floats).
CHUNK_ROWS = 64


@kernel()
def _product(c, c0, ldc, a, mr, panels, base, p0, p1, k_len, nr):
    """c[:mr, c0 + (p - p0)*NR ...] += Aᵀ · panel p, for panels p0..p1 from ``base`` in ``panels``;
    A packed (k_len, mr), C rows ``ldc`` apart."""
    stride = k_len * nr
    p = p0
    if mr == 8:
        while p < p1:
            tile_fma(c, c0 + (p - p0) * nr, ldc, a, 0, panels, base + p * stride, stride, k_len, 8, 1, 2)
            p += 1
    elif mr == 4:
        while p + 2 <= p1:
            tile_fma(c, c0 + (p - p0) * nr, ldc, a, 0, panels, base + p * stride, stride, k_len, 4, 2, 2)
            p += 2
        while p < p1:
            tile_fma(c, c0 + (p - p0) * nr, ldc, a, 0, panels, base + p * stride, stride, k_len, 4, 1, 2)
            p += 1
    else:
        while p + 4 <= p1:
            tile_fma(c, c0 + (p - p0) * nr, ldc, a, 0, panels, base + p * stride, stride, k_len, 1, 4, 2)
            p += 4
        while p < p1:
            tile_fma(c, c0 + (p - p0) * nr, ldc, a, 0, panels, base + p * stride, stride, k_len, 1, 1, 2)
            p += 1


@kernel()
def _tile(n):
    """Rows of the next tile when ``n`` rows are left: 8, 4 or 1 (the variants _product has)."""
    return TILE_ROWS if n >= TILE_ROWS else (4 if n >= 4 else 1)


@kernel()
def _geometry(n_hidden, itemsize):
    """(NR, P, P1, P2): panel width, panels of 3H columns, panels of the z and r columns
    [0, P1), and the first panel of the h columns P2."""
    nr = 2 * (64 // itemsize)
    return nr, (3 * n_hidden + nr - 1) // nr, (2 * n_hidden + nr - 1) // nr, 2 * n_hidden // nr


@kernel()
def _pack(a, m):
    """Pack the rows of m (n, K) into ``a`` tile by tile: tile i0 (of _tile rows) at i0*K, k-major."""
    n, k_len = m.shape
    i0 = 0
    while i0 < n:
        mr = _tile(n - i0)
        for r in range(mr):
            row = m[i0 + r]
            for k in range(k_len):
                a[i0 * k_len + k * mr + r] = row[k]
        i0 += mr


@kernel()
def _product_rows(c, ldc, a, k_len, n, panels, base, p0, p1, nr):
    """c[i, (p - p0)*NR ...] += A_i · panel p for rows i < n (packed by _pack) and panels p0..p1.

    Panels run outermost, four at a time, and every tile of rows uses them while they are in cache.
    """
    p = p0
    while p < p1:
        group = min(4, p1 - p)
        i0 = 0
        while i0 < n:
            mr = _tile(n - i0)
            _product(c[i0 * ldc:], (p - p0) * nr, ldc, a[i0 * k_len:], mr, panels, base, p, p + group, k_len, nr)
            i0 += mr
        p += group


@kernel()
def _project(x2, wp, bias, d, out, a, p0=0, p1=-1):
    """out[m] = [Bz, Br, Bh|Wbh] + x2[m]·Wᵀ for every row m of x2 (M, I), in the columns of panels
    p0..p1 (all by default); out is (M, P*NR). ``a`` holds min(M, CHUNK_ROWS) packed rows."""
    n_hidden = bias.shape[2]
    n_inputs = x2.shape[1]
    nr, n_panels, _, _ = _geometry(n_hidden, out.itemsize)
    p1 = n_panels if p1 < 0 else p1
    ldc = out.shape[1]
    xbias = bias[d, :3].ravel()
    c0, c1, c2 = p0 * nr, min(p1 * nr, 3 * n_hidden), p1 * nr
    for m0 in range(0, x2.shape[0], CHUNK_ROWS):
        n = min(CHUNK_ROWS, x2.shape[0] - m0)
        for r in range(n):
            out[m0 + r, c0:c1] = xbias[c0:c1]
            out[m0 + r, c1:c2] = 0  # padding columns: computed, never read, kept finite
        _pack(a, x2[m0: m0 + n])
        _product_rows(out[m0:].ravel()[p0 * nr:], ldc, a, n_inputs, n, wp, d * n_panels * n_inputs * nr, p0, p1, nr)


@kernel()
def scratch_size(n_rows, seq_length, n_inputs, n_hidden, hoist, itemsize):
    """Elements of the float and int64 scratch that ``_run_rows`` needs for ``n_rows`` rows."""
    nr, n_panels, _, p2 = _geometry(n_hidden, itemsize)
    sizes = _scratch_sizes(n_rows, seq_length, n_inputs, n_hidden, hoist, nr, n_panels, p2)
    return sizes[0] + sizes[1] + sizes[2] + sizes[3] + sizes[4] + sizes[5], n_rows + min(n_rows, CHUNK_ROWS)


@kernel()
def _scratch_sizes(n_rows, seq_length, n_inputs, n_hidden, hoist, nr, n_panels, p2):
    """Sizes of _run_rows' buffers: products C and C2, packed rows A, rows to pack M, states, and
    X·Wᵀ + bias (all steps, or a chunk's)."""
    chunk = min(n_rows, CHUNK_ROWS)
    width = max(n_hidden, n_inputs, 1)
    ldc = n_panels * nr
    packed_rows = min(CHUNK_ROWS, n_rows * seq_length) if hoist else chunk
    n_xg = (n_rows * seq_length if hoist else chunk) * ldc
    return (chunk * ldc, chunk * (n_panels - p2) * nr, width * max(packed_rows, 1), chunk * width,
            n_rows * n_hidden, n_xg)


@kernel(exact=True)
def _run_rows(X, wp, rp, bias, h0, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho, keep, hoist, d, lo,
              hi, work, iwork):
    """All steps of direction ``d`` for batch rows ``lo:hi``; ``hoist``: X·Wᵀ for all steps first.

    ``work`` and ``iwork`` are the task's scratch of ``scratch_size`` elements (float and int64):
    the kernel allocates nothing unless the rows need sorting by length.
    """
    n_hidden = y.shape[3]
    seq_length, n_inputs = X.shape[1], X.shape[2]
    nr, n_panels, p1, p2 = _geometry(n_hidden, y.itemsize)
    n_rows = hi - lo
    ldc = n_panels * nr
    ld2 = (n_panels - p2) * nr  # the h gate's second product (linear_before_reset False)
    h2 = 2 * n_hidden - p2 * nr  # where column 2H falls in it
    rbase = d * n_panels * n_hidden * nr
    wbase = d * n_panels * n_inputs * nr
    has_att = att.shape[0] > 0
    rev = reversed_[d]

    chunk = min(n_rows, CHUNK_ROWS)
    width = max(n_hidden, n_inputs, 1)
    sizes = _scratch_sizes(n_rows, seq_length, n_inputs, n_hidden, hoist, nr, n_panels, p2)
    e0 = sizes[0]
    e1 = e0 + sizes[1]
    e2 = e1 + sizes[2]
    e3 = e2 + sizes[3]
    e4 = e3 + sizes[4]
    c = work[:e0].reshape(chunk, ldc)
    c2 = work[e0:e1].reshape(chunk, ld2)
    a = work[e1:e2]
    m = work[e2:e3].reshape(chunk, width)  # rows to pack
    state = work[e3:e4].reshape(n_rows, n_hidden)
    xg = work[e4: e4 + sizes[5]].reshape(sizes[5] // ldc, ldc)
    if hoist:
        _project(X[lo:hi].reshape(n_rows * seq_length, n_inputs), wp, bias, d, xg, a)
    xbias, rbh = bias[d, :3].ravel(), bias[d, 3]
    one = y.dtype.type(1)  # a 1 of the compute dtype (a literal 1 would promote to float64)

    # Rows by decreasing length (stable): the rows still running at step s are a prefix.
    rows = iwork[:n_rows]
    times = iwork[n_rows: n_rows + chunk]
    ordered = True
    for i in range(n_rows):
        rows[i] = lo + i
        if i > 0 and lengths[lo + i] > lengths[lo + i - 1]:
            ordered = False
    if not ordered:
        rows[:] = lo + np.argsort(-lengths[lo:hi], kind="mergesort")
    for i in range(n_rows):
        state[i] = h0[rows[i], d]

    running = n_rows
    for s in range(seq_length):
        while running > 0 and lengths[rows[running - 1]] <= s:
            running -= 1
        if running == 0:
            break
        for g0 in range(0, running, CHUNK_ROWS):
            n = min(CHUNK_ROWS, running - g0)
            for i in range(n):
                times[i] = lengths[rows[g0 + i]] - 1 - s if rev else s
            if not hoist:
                # X_t·Wᵀ + bias for the chunk's rows, as _project does for a whole block.
                for i in range(n):
                    xg[i, : 3 * n_hidden] = xbias
                    xg[i, 3 * n_hidden:] = 0  # padding
                    m[i, :n_inputs] = X[rows[g0 + i], times[i]]
                _pack(a, m[:n, :n_inputs])
                _product_rows(xg.ravel(), ldc, a, n_inputs, n, wp, wbase, 0, n_panels, nr)
            # Start z, r from X·Wᵀ + bias, and for linear_before_reset the h gate's recurrent
            # part from Rbh; then z, r (and H·Rhᵀ + Rbh) from one product over the packed states.
            for i in range(n):
                x = xg[(rows[g0 + i] - lo) * seq_length + times[i]] if hoist else xg[i]
                row = c[i]
                row[: 2 * n_hidden] = x[: 2 * n_hidden]
                if lbr:
                    row[2 * n_hidden: 3 * n_hidden] = rbh
                    row[3 * n_hidden:] = 0  # padding: computed, never read, kept finite
                else:
                    row[2 * n_hidden:] = 0  # h columns sharing a panel with r: computed, unused
            _pack(a, state[g0: g0 + n])
            _product_rows(c.ravel(), ldc, a, n_hidden, n, rp, rbase, 0, n_panels if lbr else p1, nr)
            for i in range(n):
                row = c[i]
                zr = row[: 2 * n_hidden]
                if clip_at > 0:
                    clip(zr, clip_at)
                activate(zr, f_code)
                x = xg[(rows[g0 + i] - lo) * seq_length + times[i]] if hoist else xg[i]
                xh, rg = x[2 * n_hidden: 3 * n_hidden], row[n_hidden: 2 * n_hidden]
                if lbr:
                    # h = g(X·Whᵀ + Wbh + r ⊙ (H·Rhᵀ + Rbh))
                    hg = row[2 * n_hidden: 3 * n_hidden]
                    for j in range(n_hidden):
                        hg[j] = xh[j] + rg[j] * hg[j]
                else:
                    # h = g(X·Whᵀ + Bh + (r ⊙ H)·Rhᵀ): r ⊙ H for the second product.
                    st, rh = state[g0 + i], m[i]
                    for k in range(n_hidden):
                        rh[k] = rg[k] * st[k]
                    c2[i, :h2] = 0  # z or r columns sharing a panel with h: unused
                    c2[i, h2: h2 + n_hidden] = xh
                    c2[i, h2 + n_hidden:] = 0  # padding
            if not lbr:
                _pack(a, m[:n, :n_hidden])
                _product_rows(c2.ravel(), ld2, a, n_hidden, n, rp, rbase, p2, n_panels, nr)
            for i in range(n):
                b = rows[g0 + i]
                z = c[i, :n_hidden]
                hg = c[i, 2 * n_hidden: 3 * n_hidden] if lbr else c2[i, h2: h2 + n_hidden]
                if clip_at > 0:
                    clip(hg, clip_at)
                activate(hg, g_code)
                if has_att:
                    # AUGRU: z' = (1 - a) ⊙ z, after the activation and not clamped (SPEC.md §3).
                    at = att[b, times[i]]
                    for j in range(n_hidden):
                        z[j] = z[j] - at * z[j]
                # H' = (1 - z) ⊙ h + z ⊙ H, as SPEC.md §3 writes it (h + z ⊙ (H - h) would turn
                # an infinite h into NaN).
                st = state[g0 + i]
                out = y[b, d, times[i]]
                for j in range(n_hidden):
                    v = (one - z[j]) * hg[j] + z[j] * st[j]
                    st[j] = v
                    out[j] = v

    for i in range(n_rows):
        b = rows[i]
        length = lengths[b]
        for t in range(length, seq_length):
            y[b, d, t] = 0
        if length == 0 and not keep:
            ho[b, d] = 0
        else:
            ho[b, d] = state[i]


@kernel(parallel=True)
def run_parallel(X, wp, rp, bias, h0, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho, keep, hoist,
                 n_blocks, work, iwork):
    """Every (direction, block of rows) task, shared among Numba's threads: one fork/join per call.
    Task k uses the k-th of equal parts of the scratch ``work`` and ``iwork``."""
    n_rows = h0.shape[0]
    n_tasks = bias.shape[0] * n_blocks
    per_task, per_task_i = work.shape[0] // n_tasks, iwork.shape[0] // n_tasks
    for task in prange(n_tasks):
        d, blk = task // n_blocks, task % n_blocks
        _run_rows(X, wp, rp, bias, h0, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho, keep, hoist, d,
                  blk * n_rows // n_blocks, (blk + 1) * n_rows // n_blocks,
                  work[task * per_task: (task + 1) * per_task], iwork[task * per_task_i: (task + 1) * per_task_i])


@kernel()
def run_serial(X, wp, rp, bias, h0, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho, keep, hoist, work,
               iwork):
    """Every direction on the calling thread. A function of its own, not run_parallel compiled
    without parallel=True: Numba's cache keys on the function, so twins would share one entry."""
    for d in range(bias.shape[0]):
        _run_rows(X, wp, rp, bias, h0, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho, keep, hoist, d,
                  0, h0.shape[0], work, iwork)


# ------------------------------------------------------------------------------ one row, two threads

#: Spins (atomic loads) a worker waits for its partner to take its own half of a step before
#: doing that half itself too; a few microseconds, far less than a step that is worth splitting.
_PATIENCE = 2000


@kernel()
def _split_units(half, n_hidden, nr, n_panels, p2):
    """The panels [q0, q1) of the h columns that half ``half`` owns, and their units [u0, u1)."""
    q0 = p2 + half * (n_panels - p2) // 2
    q1 = p2 + (half + 1) * (n_panels - p2) // 2
    return q0, q1, min(max(q0 * nr - 2 * n_hidden, 0), n_hidden), min(max(q1 * nr - 2 * n_hidden, 0), n_hidden)


@kernel(exact=True)
def _split_half(xg, rp, bias, lbr, clip_at, f_code, g_code, att, y, t, phase, half, h_cur, h_next, rh, c, c2, one):
    """One half of one phase of step ``t`` of row 0; xg (S, P*NR) holds X·Wᵀ + bias of every step.

    Phase 0: the products H·Rᵀ of the z and r columns (and, for linear_before_reset, the h
    columns), cut into two contiguous runs of panels, f on z and r, and r ⊙ H. Phase 1: the h
    gate and the state update for the units of a run of the h gate's panels. The buffers ``c``
    (P*NR,), ``c2`` (second product) and ``rh`` (H,) are shared, each half writing its own columns.
    """
    n_hidden = y.shape[3]
    nr, n_panels, p1, p2 = _geometry(n_hidden, y.itemsize)
    x = xg[t]
    if phase == 0:
        total = n_panels if lbr else p1
        q0, q1 = half * total // 2, (half + 1) * total // 2
        c0, c1 = q0 * nr, q1 * nr
        for col in range(c0, c1):
            if col < 2 * n_hidden:
                c[col] = x[col]
            elif lbr and col < 3 * n_hidden:
                c[col] = bias[0, 3, col - 2 * n_hidden]
            else:
                c[col] = 0
        _product(c, c0, 0, h_cur, 1, rp, 0, q0, q1, n_hidden, nr)
        zr = c[c0: min(c1, 2 * n_hidden)]
        if clip_at > 0:
            clip(zr, clip_at)
        activate(zr, f_code)
        if not lbr:
            for col in range(max(c0, n_hidden), min(c1, 2 * n_hidden)):
                rh[col - n_hidden] = c[col] * h_cur[col - n_hidden]
        return
    q0, q1, u0, u1 = _split_units(half, n_hidden, nr, n_panels, p2)
    if lbr:
        # h = g(X·Whᵀ + Wbh + r ⊙ (H·Rhᵀ + Rbh))
        hg = c[2 * n_hidden + u0: 2 * n_hidden + u1]
        for j in range(u0, u1):
            c[2 * n_hidden + j] = x[2 * n_hidden + j] + c[n_hidden + j] * c[2 * n_hidden + j]
    else:
        h2 = 2 * n_hidden - p2 * nr
        for col in range(q0 * nr, q1 * nr):
            c2[col - p2 * nr] = x[col] if 2 * n_hidden <= col < 3 * n_hidden else 0
        _product(c2, (q0 - p2) * nr, 0, rh, 1, rp, 0, q0, q1, n_hidden, nr)
        hg = c2[h2 + u0: h2 + u1]
    if clip_at > 0:
        clip(hg, clip_at)
    activate(hg, g_code)
    has_att = att.shape[0] > 0
    out = y[0, 0, t]
    for j in range(u0, u1):
        z = c[j]
        if has_att:
            z = z - att[0, t] * z
        v = (one - z) * hg[j - u0] + z * h_cur[j]  # SPEC.md §3, as _run_rows
        h_next[j] = v
        out[j] = v


@kernel()
def _split_worker(xg, rp, bias, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho, keep, worker, state,
                  rh, c, c2, claims, done, present):
    """Worker ``worker`` of two sharing row 0 of direction 0, each phase of a step cut in two
    halves. A worker claims its own half of each phase, then the other half if its partner has
    not taken it in time (or has not started at all), then waits for both: waiting is only ever
    for a half that a running thread has claimed, so it cannot deadlock, even when the threading
    layer runs both workers one after the other on one thread."""
    n_hidden = y.shape[3]
    length = lengths[0]
    other = 1 - worker
    one = y.dtype.type(1)  # a 1 of the compute dtype (a literal 1 would promote to float64)
    atomic_add(present, worker, 1)
    for s in range(length):
        t = length - 1 - s if reversed_[0] else s
        h_cur, h_next = state[s % 2], state[(s + 1) % 2]
        for phase in range(2):
            m = 2 * s + phase
            if atomic_claim(claims, 2 * m + worker):
                _split_half(xg, rp, bias, lbr, clip_at, f_code, g_code, att, y, t, phase, worker, h_cur, h_next, rh, c,
                            c2, one)
                atomic_add(done, m, 1)
            if atomic_load(present, other) > 0:
                spins = 0
                while atomic_load(claims, 2 * m + other) == 0 and spins < _PATIENCE:
                    spins += 1
            if atomic_claim(claims, 2 * m + other):
                _split_half(xg, rp, bias, lbr, clip_at, f_code, g_code, att, y, t, phase, other, h_cur, h_next, rh, c,
                            c2, one)
                atomic_add(done, m, 1)
            while atomic_load(done, m) < 2:
                pass
    # Own units of the outputs that no step wrote: Y past the length, and Ho.
    nr, n_panels, _, p2 = _geometry(n_hidden, y.itemsize)
    _, _, u0, u1 = _split_units(worker, n_hidden, nr, n_panels, p2)
    for t in range(length, y.shape[2]):
        y[0, 0, t, u0:u1] = 0
    if length == 0 and not keep:
        ho[0, 0, u0:u1] = 0
    else:
        ho[0, 0, u0:u1] = state[length % 2, u0:u1]


@kernel(parallel=True)
def run_split(X, wp, rp, bias, h0, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho, keep):
    """One row of one direction on two threads, each streaming half of the packed weights per
    step (batch 1 is bound by reading R: PERF_NOTES.md, "Batch 1"). One fork/join per call."""
    n_hidden = y.shape[3]
    seq_length, n_inputs = X.shape[1], X.shape[2]
    nr, n_panels, _, p2 = _geometry(n_hidden, y.itemsize)
    xg = np.empty((seq_length, n_panels * nr), dtype=y.dtype)
    for half in prange(2):  # X·Wᵀ + bias of every step, half of the columns each
        _project(X[0], wp, bias, 0, xg, np.empty(max(1, n_inputs) * CHUNK_ROWS, dtype=y.dtype),
                 half * n_panels // 2, (half + 1) * n_panels // 2)
    state = np.zeros((2, n_hidden), dtype=y.dtype)
    state[0] = h0[0, 0]
    rh = np.zeros(n_hidden, dtype=y.dtype)
    c = np.zeros(n_panels * nr, dtype=y.dtype)
    c2 = np.zeros((n_panels - p2) * nr, dtype=y.dtype)
    slots = max(1, 2 * lengths[0])
    claims = np.zeros(2 * slots, dtype=np.int64)
    done = np.zeros(slots, dtype=np.int64)
    present = np.zeros(2, dtype=np.int64)
    for worker in prange(2):
        _split_worker(xg, rp, bias, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho, keep, worker, state,
                      rh, c, c2, claims, done, present)


@kernel()
def pack_panels(M, nr):
    """Mᵀ in the kernels' panels: M (D, 3H, K), W or R, -> flat 64-byte aligned array of
    (D, P, K, NR), columns past 3H zero."""
    n_dirs, n_cols, k_len = M.shape
    n_panels = (n_cols + nr - 1) // nr
    size = max(1, n_dirs * n_panels * k_len * nr)
    # 64-byte aligned (PERF_NOTES.md §4): NumPy guarantees 16 bytes only.
    lanes_64 = 64 // M.itemsize
    buf = np.zeros(size + lanes_64, dtype=M.dtype)
    start = (-(buf.ctypes.data // M.itemsize)) % lanes_64
    out = buf[start: start + size]
    for d in range(n_dirs):
        for p in range(n_panels):
            base = (d * n_panels + p) * k_len * nr
            for col in range(p * nr, min((p + 1) * nr, n_cols)):
                row = M[d, col]
                j = col - p * nr
                for k in range(k_len):
                    out[base + k * nr + j] = row[k]
    return out
