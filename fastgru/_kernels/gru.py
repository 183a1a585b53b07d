"""The one kernel core behind GRUCell-3, GRUSequence-5 and AUGRUSequence-10.

Every op reaches ``run_serial`` or ``run_parallel`` here, or ``run_split`` or ``run_pair`` in
``split.py``, with the same canonical arrays (the cell is a sequence of one step, AUGRU a forward
GRU with attention). N batch rows, S steps, I inputs, D directions, H hidden units. Gate columns
are laid out z, r, h without padding (gate g, unit j at column g*H + j); NR is the panel width
(two vectors, see microkernel.py) and the 3H columns are padded once to P = ceil(3H / NR) panels
of NR. Arrays are C-contiguous in the compute dtype (float32 or float64) unless noted:

X        : (N, S, I)      input data.
h0       : (N, D, H)      initial_hidden_state.
lengths  : (N,) int64     sequence_lengths, already checked to lie in [0, S].
att      : (N, S)         AUGRU attention scores a; shape (0, 0) for plain GRU.
y        : (N, D, S, H)   output, every element written (zero past each row's length).
ho       : (N, D, H)      output, the state after the last computed step (zero for L = 0).
weights  : flat           made by ``pack_weights``, 64-byte aligned: Wᵀ, then Rᵀ, in panels (per
                          direction, P panels holding, for every k, their NR columns' weights,
                          zero past 3H, so that products stream memory in order), then the bias
                          (D, 4, H): [Bz, Br, Bh, 0] (linear_before_reset False) or [Bz, Br, Wbh, Rbh].
reverse  : int            bit d set: direction d runs t = L-1, ..., 0.
lbr, f_code, g_code, clip: linear_before_reset, the activation codes, clip (0: none).
keep     : int            1: a row of length 0 keeps its initial state in ho (streams), else zero.
hoist    : int            1: a task computes X·Wᵀ + bias for all its rows and steps first.

Scalars are Python ints and floats: Numba types them faster than bools or NumPy scalars, and the
kernel call is a fixed cost of every op call.

Strategy. Each (direction, block of batch rows) is one task owned by one thread for all time
steps: no synchronisation inside the time loop and one fork/join per call. A task first computes
X·Wᵀ + bias for all its rows and steps when the dispatcher says so (``hoist``: it fits in cache),
else per step. The rows still running at a step are processed in chunks of up to 64 rows, and
within a chunk in tiles of 8, 4 or 1 rows that share each load of the weights
(microkernel.tile_fma), weight panels outermost so that each is read once per chunk and step.
A single row can instead be split over two threads (``split.py``). Every element is computed by
the same sequence of operations on any path, tile or thread, so results do not depend on the
thread count.

For linear_before_reset False, the h gate's product (r ⊙ H)·Rhᵀ is a second product over the
panels from column 2H on, written to its own buffer: the panel that holds both r and h columns
(and, for H < NR, z columns) is then computed twice without overwriting z or r.

Buffers are addressed by offsets (``memory.load``/``store``), never through views: every view is
a reference that Numba counts with atomic operations, which cost more than the arithmetic of a
small step (measured: 20 % of a 128-row, 36-unit sequence, 40 % of a tiny call).
"""

import numpy as np
from numba import prange

from .._config import kernel
from .activations import activate, clip
from .memory import load, store
from .microkernel import tile_fma

#: Rows per tile; tails use 4 and then 1 (the literal variants of _product).
TILE_ROWS = 8

#: Rows whose products run together, panels outermost: each group of weight panels is read once
#: for all the chunk's tiles while it is in cache (64 rows of C are at most 3*64*H floats).
CHUNK_ROWS = 64


@kernel()
def _product(c, c0, ldc, a, a0, mr, panels, base, p0, p1, k_len, nr):
    """C[:mr, (p - p0)*NR ...] += Aᵀ · panel p, for panels p0..p1 from ``base`` in ``panels``;
    C's row r at c0 + r*ldc in ``c``, A packed (k_len, mr) at a0 in ``a``."""
    stride = k_len * nr
    p = p0
    if mr == 8:
        while p < p1:
            tile_fma(c, c0 + (p - p0) * nr, ldc, a, a0, panels, base + p * stride, stride, k_len, 8, 1, 2)
            p += 1
    elif mr == 4:
        while p + 2 <= p1:
            tile_fma(c, c0 + (p - p0) * nr, ldc, a, a0, panels, base + p * stride, stride, k_len, 4, 2, 2)
            p += 2
        while p < p1:
            tile_fma(c, c0 + (p - p0) * nr, ldc, a, a0, panels, base + p * stride, stride, k_len, 4, 1, 2)
            p += 1
    else:
        while p + 4 <= p1:
            tile_fma(c, c0 + (p - p0) * nr, ldc, a, a0, panels, base + p * stride, stride, k_len, 1, 4, 2)
            p += 4
        while p < p1:
            tile_fma(c, c0 + (p - p0) * nr, ldc, a, a0, panels, base + p * stride, stride, k_len, 1, 1, 2)
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
def _pack(a, a0, m, m0, ld, n, k_len):
    """Pack n rows of k_len elements of ``m`` (any C-contiguous array, row i at flat offset
    m0 + i*ld) into ``a`` from a0, tile by tile: the tile of rows i0.. (of _tile rows) at
    a0 + i0*k_len, k-major."""
    i0 = 0
    while i0 < n:
        mr = _tile(n - i0)
        for r in range(mr):
            base = a0 + i0 * k_len + r
            row = m0 + (i0 + r) * ld
            for k in range(k_len):
                store(a, base + k * mr, load(m, row + k))
        i0 += mr


@kernel()
def _product_rows(c, c0, ldc, a, a0, k_len, n, panels, base, p0, p1, nr):
    """C[i, (p - p0)*NR ...] += A_i · panel p for rows i < n (packed by _pack at a0) and panels
    p0..p1; C's row i at c0 + i*ldc in ``c``.

    Panels run outermost, four at a time, and every tile of rows uses them while they are in cache.
    """
    p = p0
    while p < p1:
        group = min(4, p1 - p)
        i0 = 0
        while i0 < n:
            mr = _tile(n - i0)
            _product(c, c0 + i0 * ldc + (p - p0) * nr, ldc, a, a0 + i0 * k_len, mr, panels, base, p, p + group,
                     k_len, nr)
            i0 += mr
        p += group


@kernel()
def _project(X, r0, n_rows, weights, b0, n_hidden, d, out, o0, ldc, a, a0, p0, p1):
    """Rows i < n_rows of the projection: out[o0 + i*ldc + col] = [Bz, Br, Bh|Wbh][col] +
    x_(r0 + i)·Wᵀ[col] for the columns of panels p0..p1 (the padding past 3H zero), x_r being
    the r-th row of X (N, S, I) as rows (row b*S + t), the bias at b0 in ``weights``.
    ``a`` holds min(n_rows, CHUNK_ROWS) packed rows of X from a0."""
    n_inputs = X.shape[2]
    nr, n_panels, _, _ = _geometry(n_hidden, out.itemsize)
    wbase = d * n_panels * n_inputs * nr
    c0, c1 = p0 * nr, p1 * nr
    for m0 in range(0, n_rows, CHUNK_ROWS):
        n = min(CHUNK_ROWS, n_rows - m0)
        for r in range(n):
            row = o0 + (m0 + r) * ldc
            for g in range(3):
                for col in range(max(c0, g * n_hidden), min(c1, (g + 1) * n_hidden)):
                    store(out, row + col, load(weights, b0 + (d * 4 + g) * n_hidden + col - g * n_hidden))
            for col in range(max(c0, 3 * n_hidden), c1):
                store(out, row + col, 0)  # padding: computed, never read
        _pack(a, a0, X, (r0 + m0) * n_inputs, n_inputs, n, n_inputs)
        _product_rows(out, o0 + m0 * ldc + c0, ldc, a, a0, n_inputs, n, weights, wbase, p0, p1, nr)


@kernel()
def scratch_size(n_rows, seq_length, n_inputs, n_hidden, hoist, itemsize):
    """Elements of the float and int64 scratch that ``_run_rows`` needs for ``n_rows`` rows."""
    sizes = _scratch_sizes(n_rows, seq_length, n_inputs, n_hidden, hoist, itemsize)
    line = 64 // itemsize  # whole lines, so that the next task's part starts on one (run_parallel)
    return -(-sizes[6] // line) * line, n_rows + min(n_rows, CHUNK_ROWS)


@kernel()
def _scratch_sizes(n_rows, seq_length, n_inputs, n_hidden, hoist, itemsize):
    """Offsets in _run_rows' float scratch: products C and C2, packed rows A, rows to pack M,
    states, X·Wᵀ + bias (all steps, or a chunk's), and the end."""
    nr, n_panels, _, p2 = _geometry(n_hidden, itemsize)
    chunk = min(n_rows, CHUNK_ROWS)
    width = max(n_hidden, n_inputs, 1)
    packed_rows = min(CHUNK_ROWS, n_rows * seq_length) if hoist else chunk
    line = 64 // itemsize  # every buffer starts on a 64-byte line, as the scratch does (PERF_NOTES.md §4)
    o_c2 = chunk * n_panels * nr
    o_a = o_c2 + chunk * (n_panels - p2) * nr
    o_m = o_a + -(-width * max(packed_rows, 1) // line) * line
    o_state = o_m + -(-chunk * width // line) * line
    o_xg = o_state + -(-n_rows * n_hidden // line) * line
    return 0, o_c2, o_a, o_m, o_state, o_xg, o_xg + (n_rows * seq_length if hoist else chunk) * n_panels * nr


@kernel()
def _hoisted_row(iwork, row_at, time_at, lo, seq_length):
    """The row of X·Wᵀ + bias computed for all steps (hoist) that the chunk's row at ``row_at`` of
    iwork needs at the time at ``time_at``."""
    return (load(iwork, row_at) - lo) * seq_length + load(iwork, time_at)


@kernel(exact=True)
def _run_rows(X, h0, lengths, att, y, ho, weights, b0, rev, lbr, f_code, g_code, clip_at, keep, hoist, d, lo, hi,
              work, iwork):
    """All steps of direction ``d`` for batch rows ``lo:hi``; ``rev``: in reverse; ``hoist``: X·Wᵀ
    for all steps first; ``b0`` where the bias (D, 4, H) starts in ``weights``, ``clip_at`` of the dtype.

    ``work`` and ``iwork`` are the task's scratch of ``scratch_size`` elements (float and int64):
    the kernel allocates nothing unless the rows need sorting by length.
    """
    n_hidden = y.shape[3]
    seq_length, n_inputs = X.shape[1], X.shape[2]
    nr, n_panels, p1, p2 = _geometry(n_hidden, y.itemsize)
    n_rows = hi - lo
    h1, h2, h3 = n_hidden, 2 * n_hidden, 3 * n_hidden
    ldc = n_panels * nr
    ld2 = (n_panels - p2) * nr  # the h gate's second product (linear_before_reset False)
    hc2 = h2 - p2 * nr  # where column 2H falls in it
    wbase = d * n_panels * n_inputs * nr
    rbase = h0.shape[1] * n_panels * n_inputs * nr + d * n_panels * n_hidden * nr
    has_att = att.shape[0] > 0
    width = max(n_hidden, n_inputs, 1)
    o_c, o_c2, o_a, o_m, o_state, o_xg, o_end = _scratch_sizes(n_rows, seq_length, n_inputs, n_hidden, hoist,
                                                               y.itemsize)
    w = work
    if hoist:
        _project(X, lo * seq_length, n_rows * seq_length, weights, b0, n_hidden, d, w, o_xg, ldc, w, o_a, 0,
                 n_panels)
    one = y.dtype.type(1)  # a 1 of the compute dtype (a literal 1 would promote to float64)

    # Rows by decreasing length (stable): the rows still running at step s are a prefix. iwork
    # holds the rows (batch indices) in that order, then the chunk's times.
    rows, times = 0, n_rows
    ordered = True
    for i in range(n_rows):
        store(iwork, rows + i, lo + i)
        if i > 0 and lengths[lo + i] > lengths[lo + i - 1]:
            ordered = False
    if not ordered:
        order = np.argsort(-lengths[lo:hi], kind="mergesort")
        for i in range(n_rows):
            store(iwork, rows + i, lo + order[i])
    for i in range(n_rows):
        for j in range(n_hidden):
            store(w, o_state + i * n_hidden + j, h0[load(iwork, rows + i), d, j])

    running = n_rows
    for s in range(seq_length):
        while running > 0 and lengths[load(iwork, rows + running - 1)] <= s:
            running -= 1
        if running == 0:
            break
        for g0 in range(0, running, CHUNK_ROWS):
            n = min(CHUNK_ROWS, running - g0)
            for i in range(n):
                store(iwork, times + i, lengths[load(iwork, rows + g0 + i)] - 1 - s if rev else s)
            if not hoist:
                # X_t·Wᵀ + bias for the chunk's rows, as _project does for a whole block.
                for i in range(n):
                    xo = o_xg + i * ldc
                    for g in range(3):
                        for j in range(n_hidden):
                            store(w, xo + g * n_hidden + j, load(weights, b0 + (d * 4 + g) * n_hidden + j))
                    for col in range(h3, ldc):
                        store(w, xo + col, 0)  # padding: computed, never read
                    b, t = load(iwork, rows + g0 + i), load(iwork, times + i)
                    for k in range(n_inputs):
                        store(w, o_m + i * width + k, X[b, t, k])
                _pack(w, o_a, w, o_m, width, n, n_inputs)
                _product_rows(w, o_xg, ldc, w, o_a, n_inputs, n, weights, wbase, 0, n_panels, nr)
            # Start z, r from X·Wᵀ + bias, and for linear_before_reset the h gate's recurrent
            # part from Rbh; then z, r (and H·Rhᵀ + Rbh) from one product over the packed states.
            for i in range(n):
                xo = o_xg + (_hoisted_row(iwork, rows + g0 + i, times + i, lo, seq_length) if hoist else i) * ldc
                co = o_c + i * ldc
                for col in range(h2):
                    store(w, co + col, load(w, xo + col))
                if lbr:
                    for j in range(n_hidden):
                        store(w, co + h2 + j, load(weights, b0 + (d * 4 + 3) * n_hidden + j))
                    for col in range(h3, ldc):
                        store(w, co + col, 0)  # padding
                else:
                    for col in range(h2, ldc):
                        store(w, co + col, 0)  # h columns sharing a panel with r: computed, unused
            _pack(w, o_a, w, o_state + g0 * n_hidden, n_hidden, n, n_hidden)
            _product_rows(w, o_c, ldc, w, o_a, n_hidden, n, weights, rbase, 0, n_panels if lbr else p1, nr)
            for i in range(n):
                xo = o_xg + (_hoisted_row(iwork, rows + g0 + i, times + i, lo, seq_length) if hoist else i) * ldc
                co = o_c + i * ldc
                if clip_at > 0:
                    clip(w, co, co + h2, clip_at)
                activate(w, co, co + h2, f_code)
                if lbr:
                    # h = g(X·Whᵀ + Wbh + r ⊙ (H·Rhᵀ + Rbh))
                    for j in range(n_hidden):
                        store(w, co + h2 + j, load(w, xo + h2 + j) + load(w, co + h1 + j) * load(w, co + h2 + j))
                else:
                    # h = g(X·Whᵀ + Bh + (r ⊙ H)·Rhᵀ): r ⊙ H for the second product.
                    so, mo, c2o = o_state + (g0 + i) * n_hidden, o_m + i * width, o_c2 + i * ld2
                    for k in range(n_hidden):
                        store(w, mo + k, load(w, co + h1 + k) * load(w, so + k))
                    for col in range(hc2):
                        store(w, c2o + col, 0)  # z or r columns sharing a panel with h: unused
                    for j in range(n_hidden):
                        store(w, c2o + hc2 + j, load(w, xo + h2 + j))
                    for col in range(hc2 + n_hidden, ld2):
                        store(w, c2o + col, 0)  # padding
            if not lbr:
                _pack(w, o_a, w, o_m, width, n, n_hidden)
                _product_rows(w, o_c2, ld2, w, o_a, n_hidden, n, weights, rbase, p2, n_panels, nr)
            for i in range(n):
                b, t = load(iwork, rows + g0 + i), load(iwork, times + i)
                co = o_c + i * ldc
                hg = co + h2 if lbr else o_c2 + i * ld2 + hc2
                if clip_at > 0:
                    clip(w, hg, hg + n_hidden, clip_at)
                activate(w, hg, hg + n_hidden, g_code)
                if has_att:
                    # AUGRU: z' = (1 - a) ⊙ z, after the activation and not clamped (SPEC.md §3).
                    at = att[b, t]
                    for j in range(n_hidden):
                        z = load(w, co + j)
                        store(w, co + j, z - at * z)
                # H' = (1 - z) ⊙ h + z ⊙ H, as SPEC.md §3 writes it (h + z ⊙ (H - h) would turn
                # an infinite h into NaN).
                so = o_state + (g0 + i) * n_hidden
                for j in range(n_hidden):
                    z = load(w, co + j)
                    v = (one - z) * load(w, hg + j) + z * load(w, so + j)
                    store(w, so + j, v)
                    y[b, d, t, j] = v

    for i in range(n_rows):
        b = load(iwork, rows + i)
        length = lengths[b]
        for t in range(length, seq_length):
            for j in range(n_hidden):
                y[b, d, t, j] = 0
        zero = length == 0 and not keep
        for j in range(n_hidden):
            ho[b, d, j] = 0 if zero else load(w, o_state + i * n_hidden + j)


@kernel(parallel=True)
def run_parallel(X, h0, lengths, att, y, ho, weights, reverse, lbr, f_code, g_code, clip, keep, hoist, work, iwork,
                 n_blocks):
    """Every (direction, block of rows) task, shared among Numba's threads: one fork/join per call.
    Task k uses the k-th of equal parts of the scratch ``work`` (whole 64-byte lines) and ``iwork``."""
    n_rows = h0.shape[0]
    n_tasks = h0.shape[1] * n_blocks
    b0, clip_at = bias_start(h0, X.shape[2], weights.itemsize), y.dtype.type(clip)
    line = 64 // work.itemsize
    per_task, per_task_i = work.shape[0] // n_tasks // line * line, iwork.shape[0] // n_tasks
    for task in prange(n_tasks):
        d, blk = task // n_blocks, task % n_blocks
        _run_rows(X, h0, lengths, att, y, ho, weights, b0, (reverse >> d) & 1, lbr, f_code, g_code, clip_at, keep,
                  hoist, d, blk * n_rows // n_blocks, (blk + 1) * n_rows // n_blocks,
                  work[task * per_task: (task + 1) * per_task], iwork[task * per_task_i: (task + 1) * per_task_i])


@kernel()
def run_serial(X, h0, lengths, att, y, ho, weights, reverse, lbr, f_code, g_code, clip, keep, hoist, work, iwork):
    """Every direction on the calling thread. A function of its own, not run_parallel compiled
    without parallel=True: Numba's cache keys on the function, so twins would share one entry."""
    b0, clip_at = bias_start(h0, X.shape[2], weights.itemsize), y.dtype.type(clip)
    for d in range(h0.shape[1]):
        _run_rows(X, h0, lengths, att, y, ho, weights, b0, (reverse >> d) & 1, lbr, f_code, g_code, clip_at, keep,
                  hoist, d, 0, h0.shape[0], work, iwork)


@kernel()
def bias_start(h0, n_inputs, itemsize):
    """Where the bias (D, 4, H) starts in the packed weights (see pack_weights)."""
    n_dirs, n_hidden = h0.shape[1], h0.shape[2]
    nr, n_panels, _, _ = _geometry(n_hidden, itemsize)
    return n_dirs * n_panels * (n_inputs + n_hidden) * nr


@kernel()
def pack_weights(W, R, B, nr):
    """The kernels' ``weights`` from W (D, 3H, I), R (D, 3H, H) and B (D, 3H or 4H, zero rows
    past it): Wᵀ and Rᵀ in panels of ``nr`` columns, then the bias (D, 4, H), in one flat array,
    64-byte aligned (PERF_NOTES.md §4: NumPy guarantees 16 bytes only)."""
    n_dirs, n_cols, n_inputs = W.shape
    n_hidden = R.shape[2]
    n_panels = (n_cols + nr - 1) // nr
    r_start = n_dirs * n_panels * n_inputs * nr
    b_start = r_start + n_dirs * n_panels * n_hidden * nr
    size = b_start + n_dirs * 4 * n_hidden
    lanes_64 = 64 // W.itemsize
    buf = np.zeros(size + lanes_64, dtype=W.dtype)
    first = (-(buf.ctypes.data // W.itemsize)) % lanes_64
    out = buf[first: first + size]
    for start, M in ((0, W), (r_start, R)):
        k_len = M.shape[2]
        for d in range(n_dirs):
            for p in range(n_panels):
                base = start + (d * n_panels + p) * k_len * nr
                for col in range(p * nr, min((p + 1) * nr, n_cols)):
                    j = col - p * nr
                    for k in range(k_len):
                        out[base + k * nr + j] = M[d, col, k]
    gates = B.shape[1] // n_hidden
    for d in range(n_dirs):
        for g in range(gates):
            for j in range(n_hidden):
                out[b_start + (d * 4 + g) * n_hidden + j] = B[d, g * n_hidden + j]
    return out
