"""The one kernel core behind GRUCell-3, GRUSequence-5 and AUGRUSequence-10.

Every op reaches ``run_parallel`` or ``run_serial`` with the same canonical arrays (the cell is
a sequence of one step, AUGRU a forward GRU with attention). N batch rows, S steps, D directions,
H hidden units; NR is the panel width of the packed weights (two vectors, see microkernel.py) and
Hp = H rounded up to a multiple of NR. All arrays C-contiguous in the compute dtype unless noted.

xw       : (N, S, D*3H)   X·Wᵀ for every step and direction, gate order z, r, h; no bias.
rp       : (D*3*Hp/NR*H*NR,) Rᵀ packed in panels: panel q (gate q // (Hp/NR)) holds, for each k,
           NR consecutive hidden units of that gate (zero past H), so the recurrent product
           streams memory in order.
bias     : (D, 4, Hp)     [Bz, Br, Bh, 0] (linear_before_reset False) or [Bz, Br, Wbh, Rbh].
h0       : (N, D, H)      initial_hidden_state.
lengths  : (N,) int64     sequence_lengths, already checked to lie in [0, S].
reversed_: (D,) bool      whether direction d runs t = L-1, ..., 0.
att      : (N, S)         AUGRU attention scores a; shape (0, 0) for plain GRU.
y        : (N, D, S, H)   output, every element written (zero past each row's length).
ho       : (N, D, H)      output, the state after the last computed step (zero for L = 0).

Each (direction, block of batch rows) is one task owned by one thread for all time steps: no
synchronisation inside the time loop and one fork/join per call. Within a task, the rows still
running at a step are processed in tiles of 8, 4 or 1 rows that share each load of the weights;
a row's arithmetic is the same in any tile and on any thread, so results do not depend on the
thread count.
"""

import numpy as np
from numba import njit, prange

from .._config import JIT_OPTIONS
from .activations import activate, clip
from .microkernel import lanes, tile_fma

#: Rows per tile; tails use 4 and then 1.
TILE_ROWS = 8


@njit(**JIT_OPTIONS)
def _rec_product(c, ldc, a, mr, rp, base, p0, p1, k_len, nr):
    """c[:mr, p0*NR:p1*NR] += Aᵀ · panels p0..p1 of rp (from ``base``), A packed (k_len, mr)."""
    stride = k_len * nr
    p = p0
    if mr == 8:
        while p < p1:
            tile_fma(c, p * nr, ldc, a, 0, rp, base + p * stride, stride, k_len, 8, 1, 2)
            p += 1
    elif mr == 4:
        while p + 2 <= p1:
            tile_fma(c, p * nr, ldc, a, 0, rp, base + p * stride, stride, k_len, 4, 2, 2)
            p += 2
        while p < p1:
            tile_fma(c, p * nr, ldc, a, 0, rp, base + p * stride, stride, k_len, 4, 1, 2)
            p += 1
    else:
        while p + 4 <= p1:
            tile_fma(c, p * nr, ldc, a, 0, rp, base + p * stride, stride, k_len, 1, 4, 2)
            p += 4
        while p < p1:
            tile_fma(c, p * nr, ldc, a, 0, rp, base + p * stride, stride, k_len, 1, 1, 2)
            p += 1


@njit(**JIT_OPTIONS)
def _run_rows(xw, rp, bias, h0, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho, d, lo, hi):
    """All steps of direction ``d`` for batch rows ``lo:hi``."""
    n_hidden = y.shape[3]
    hp = bias.shape[2]
    nr = 2 * (64 // rp.itemsize)  # panel width: two vectors (microkernel.lanes)
    seq_length = xw.shape[1]
    n_rows = hi - lo
    base = d * 3 * hp * n_hidden
    n_panels = hp // nr
    off = d * 3 * n_hidden
    ldc = 3 * hp
    has_att = att.shape[0] > 0
    rev = reversed_[d]

    # Rows by decreasing length (stable): the rows still running at step s are a prefix.
    rows = lo + np.argsort(-lengths[lo:hi], kind="mergesort")
    state = np.zeros((n_rows, hp), dtype=y.dtype)
    for i in range(n_rows):
        state[i, :n_hidden] = h0[rows[i], d]
    c = np.zeros(TILE_ROWS * ldc, dtype=y.dtype)
    a = np.zeros(n_hidden * TILE_ROWS, dtype=y.dtype)
    bz_r, bh, rbh = bias[d, :2].ravel(), bias[d, 2], bias[d, 3]

    running = n_rows
    for s in range(seq_length):
        while running > 0 and lengths[rows[running - 1]] <= s:
            running -= 1
        if running == 0:
            break
        i0 = 0
        while i0 < running:
            mr = TILE_ROWS if running - i0 >= TILE_ROWS else (4 if running - i0 >= 4 else 1)
            # Pack the states (k-major) and start every gate row from X·Wᵀ + bias.
            for r in range(mr):
                b = rows[i0 + r]
                t = lengths[b] - 1 - s if rev else s
                st = state[i0 + r]
                for k in range(n_hidden):
                    a[k * mr + r] = st[k]
                row = c[r * ldc: (r + 1) * ldc]
                x = xw[b, t, off: off + 3 * n_hidden]
                for g in range(2):
                    gx, gb, gc = x[g * n_hidden: (g + 1) * n_hidden], bz_r[g * hp: g * hp + n_hidden], row[g * hp:]
                    for j in range(n_hidden):
                        gc[j] = gx[j] + gb[j]
                if lbr:
                    row[2 * hp: 3 * hp] = rbh
            # z, r (and for linear_before_reset the h gate's H·Rhᵀ + Rbh) from one product.
            _rec_product(c, ldc, a, mr, rp, base, 0, (3 if lbr else 2) * n_panels, n_hidden, nr)
            for r in range(mr):
                b = rows[i0 + r]
                t = lengths[b] - 1 - s if rev else s
                row = c[r * ldc: (r + 1) * ldc]
                zr = row[: 2 * hp]
                if clip_at > 0:
                    clip(zr, clip_at)
                activate(zr, f_code)
                x = xw[b, t, off + 2 * n_hidden: off + 3 * n_hidden]
                hg, rg = row[2 * hp: 2 * hp + n_hidden], row[hp: hp + n_hidden]
                if lbr:
                    # h = g(X·Whᵀ + Wbh + r ⊙ (H·Rhᵀ + Rbh))
                    for j in range(n_hidden):
                        hg[j] = x[j] + bh[j] + rg[j] * hg[j]
                else:
                    # h = g(X·Whᵀ + Bh + (r ⊙ H)·Rhᵀ): pack r ⊙ H for the second product.
                    st = state[i0 + r]
                    for k in range(n_hidden):
                        a[k * mr + r] = rg[k] * st[k]
                    for j in range(n_hidden):
                        hg[j] = x[j] + bh[j]
            if not lbr:
                _rec_product(c, ldc, a, mr, rp, base, 2 * n_panels, 3 * n_panels, n_hidden, nr)
            for r in range(mr):
                b = rows[i0 + r]
                t = lengths[b] - 1 - s if rev else s
                row = c[r * ldc: (r + 1) * ldc]
                z, hg = row[:n_hidden], row[2 * hp: 2 * hp + n_hidden]
                if clip_at > 0:
                    clip(hg, clip_at)
                activate(hg, g_code)
                if has_att:
                    # AUGRU: z' = (1 - a) ⊙ z, after the activation and not clamped (SPEC.md §3).
                    at = att[b, t]
                    for j in range(n_hidden):
                        z[j] = z[j] - at * z[j]
                # H' = (1 - z) ⊙ h + z ⊙ H, written as h + z ⊙ (H - h).
                st = state[i0 + r]
                out = y[b, d, t]
                for j in range(n_hidden):
                    v = hg[j] + z[j] * (st[j] - hg[j])
                    st[j] = v
                    out[j] = v
            i0 += mr

    for i in range(n_rows):
        b = rows[i]
        length = lengths[b]
        for t in range(seq_length):
            if t >= length:
                y[b, d, t] = 0
        if length == 0:
            ho[b, d] = 0
        else:
            ho[b, d] = state[i, :n_hidden]


@njit(parallel=True, **JIT_OPTIONS)
def run_parallel(xw, rp, bias, h0, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho, n_blocks):
    """Every (direction, block of rows) task, shared among Numba's threads: one fork/join per call."""
    n_rows = h0.shape[0]
    for task in prange(bias.shape[0] * n_blocks):
        d, blk = task // n_blocks, task % n_blocks
        _run_rows(xw, rp, bias, h0, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho, d,
                  blk * n_rows // n_blocks, (blk + 1) * n_rows // n_blocks)


@njit(**JIT_OPTIONS)
def run_serial(xw, rp, bias, h0, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho):
    """Every direction on the calling thread. A function of its own, not run_parallel compiled
    without parallel=True: Numba's cache keys on the function, so twins would share one entry."""
    for d in range(bias.shape[0]):
        _run_rows(xw, rp, bias, h0, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho, d, 0,
                  h0.shape[0])


def pack_recurrent(R, num_directions, hidden_size, dtype):
    """Rᵀ in the kernels' panels: R (D, 3H, H), or (3H, H) -> (flat, 64-byte aligned array, Hp)."""
    nr = 2 * lanes(dtype)
    d, h = num_directions, hidden_size
    hp = -(-h // nr) * nr
    padded = np.zeros((d, 3, hp, h), dtype=dtype)
    padded[:, :, :h, :] = np.asarray(R, dtype=dtype).reshape(d, 3, h, h)
    # (d, gate, panel, unit in panel, k) -> (d, gate, panel, k, unit in panel)
    panels = padded.reshape(d, 3, hp // nr, nr, h).transpose(0, 1, 2, 4, 3)
    out = aligned_empty(panels.size, dtype)
    out[:] = panels.reshape(-1)
    return out, hp


def aligned_empty(size, dtype, align=64):
    """An uninitialised 1-D array whose data starts on an ``align``-byte boundary (PERF_NOTES.md §4)."""
    buf = np.empty(size * dtype.itemsize + align, dtype=np.uint8)
    start = -buf.ctypes.data % align
    return buf[start: start + size * dtype.itemsize].view(dtype)
