"""The one kernel core behind GRUCell-3, GRUSequence-5 and AUGRUSequence-10.

Every op reaches ``run_parallel`` or ``run_serial`` with the same canonical arrays (the cell is
a sequence of one step, AUGRU a forward GRU with attention). Shapes, with N batch rows, S steps,
D directions and H hidden units, all C-contiguous in the compute dtype (float32 or float64):

xw       : (N, S, D*3H)  X·Wᵀ for every step and direction, gate order z, r, h; no bias.
rt       : (D, H, 3H)    Rᵀ, so the recurrent product is a sum of contiguous row updates.
bias     : (D, 4H)       [Bz, Br, Bh, 0] (linear_before_reset False) or [Bz, Br, Wbh, Rbh].
h0       : (N, D, H)     initial_hidden_state.
lengths  : (N,) int64    sequence_lengths, already checked to lie in [0, S].
reversed_: (D,) bool     whether direction d runs t = L-1, ..., 0.
att      : (N, S)        AUGRU attention scores a; shape (0, 0) for plain GRU.
y        : (N, D, S, H)  output, every element written (zero past each row's length).
ho       : (N, D, H)     output, the state after the last computed step (zero for L = 0).

Each (direction, block of batch rows) is one task owned by one thread for all time steps: no
synchronisation inside the time loop, one fork/join per call, and every row's arithmetic is the
same whichever thread runs it, so the result does not depend on the thread count.
"""

import numpy as np
from numba import njit, prange

from .._config import CACHE, FASTMATH
from .activations import activate, clip


@njit(cache=CACHE, fastmath=FASTMATH)
def _matvec_acc(v, rt, c0, c1, acc):
    """acc[c0:c1] += v · rt[:, c0:c1] as row updates (contiguous, vectorised), k unrolled by 4.

    The column loops run over slices from 0 so that Numba emits no negative-index wrap-around,
    which would keep LLVM from vectorising them.
    """
    n = v.shape[0]
    out = acc[c0:c1]
    m = c1 - c0
    k = 0
    while k + 4 <= n:
        v0, v1, v2, v3 = v[k], v[k + 1], v[k + 2], v[k + 3]
        r0, r1, r2, r3 = rt[k, c0:c1], rt[k + 1, c0:c1], rt[k + 2, c0:c1], rt[k + 3, c0:c1]
        for j in range(m):
            out[j] = out[j] + v0 * r0[j] + v1 * r1[j] + v2 * r2[j] + v3 * r3[j]
        k += 4
    while k < n:
        vk = v[k]
        rk = rt[k, c0:c1]
        for j in range(m):
            out[j] = out[j] + vk * rk[j]
        k += 1


@njit(cache=CACHE, fastmath=FASTMATH)
def _gates(x, rt, bias, h, lbr, clip_at, f_code, g_code, gates, rh):
    """The activated gates of one step of one row (SPEC.md §3; gate order z, r, h).

    x: (3H,) this step's X·Wᵀ; rt: (H, 3H); bias: (4H,); h: (H,) state; clip_at: 0 for no clip.
    Writes z, r, h into ``gates`` (3H,); ``rh`` (H,) is scratch. Loops run over views from 0
    (see _matvec_acc).
    """
    n = h.shape[0]
    zr, zr_x, zr_b = gates[: 2 * n], x[: 2 * n], bias[: 2 * n]
    r = gates[n: 2 * n]
    hg, hg_x, hg_b, rbh = gates[2 * n:], x[2 * n:], bias[2 * n: 3 * n], bias[3 * n:]
    if lbr:
        # h = g(X·Whᵀ + Wbh + r ⊙ (H·Rhᵀ + Rbh)): one product over all three gates.
        gates[:] = 0
        _matvec_acc(h, rt, 0, 3 * n, gates)
        for j in range(2 * n):
            zr[j] = zr_x[j] + zr_b[j] + zr[j]
        if clip_at > 0:
            clip(zr, clip_at)
        activate(zr, f_code)
        for j in range(n):
            hg[j] = hg_x[j] + hg_b[j] + r[j] * (hg[j] + rbh[j])
    else:
        # z, r first; then h = g(X·Whᵀ + Bh + (r ⊙ H)·Rhᵀ) needs r before its product.
        for j in range(2 * n):
            zr[j] = zr_x[j] + zr_b[j]
        _matvec_acc(h, rt, 0, 2 * n, gates)
        if clip_at > 0:
            clip(zr, clip_at)
        activate(zr, f_code)
        for j in range(n):
            rh[j] = r[j] * h[j]
            hg[j] = hg_x[j] + hg_b[j]
        _matvec_acc(rh, rt, 2 * n, 3 * n, gates)
    if clip_at > 0:
        clip(hg, clip_at)
    activate(hg, g_code)


@njit(cache=CACHE, fastmath=FASTMATH)
def _run_rows(xw, rt, bias, h0, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho, d, lo, hi):
    """All steps of direction ``d`` for batch rows ``lo:hi``, one row after the other."""
    n_hidden = rt.shape[1]
    seq_length = xw.shape[1]
    off = d * 3 * n_hidden
    gates = np.empty(3 * n_hidden, dtype=y.dtype)
    rh = np.empty(n_hidden, dtype=y.dtype)
    z, hg = gates[:n_hidden], gates[2 * n_hidden:]
    has_att = att.shape[0] > 0
    for b in range(lo, hi):
        length = lengths[b]
        h = ho[b, d]
        h[:] = h0[b, d]
        for s in range(length):
            t = length - 1 - s if reversed_[d] else s
            _gates(xw[b, t, off:off + 3 * n_hidden], rt[d], bias[d], h, lbr, clip_at, f_code, g_code, gates, rh)
            if has_att:
                # AUGRU: z' = (1 - a) ⊙ z, after the activation and not clamped (SPEC.md §3).
                a = att[b, t]
                for j in range(n_hidden):
                    z[j] = z[j] - a * z[j]
            # H' = (1 - z) ⊙ h + z ⊙ H, written as h + z ⊙ (H - h).
            for j in range(n_hidden):
                h[j] = hg[j] + z[j] * (h[j] - hg[j])
            y[b, d, t] = h
        for t in range(length, seq_length):
            y[b, d, t] = 0
        if length == 0:
            h[:] = 0


def _run(xw, rt, bias, h0, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho, n_blocks):
    """Run every (direction, row block) task; ``n_blocks`` blocks of rows per direction."""
    n_dirs = rt.shape[0]
    n_rows = h0.shape[0]
    for task in prange(n_dirs * n_blocks):
        d = task // n_blocks
        blk = task % n_blocks
        _run_rows(xw, rt, bias, h0, lengths, reversed_, lbr, clip_at, f_code, g_code, att, y, ho, d,
                  blk * n_rows // n_blocks, (blk + 1) * n_rows // n_blocks)


run_parallel = njit(parallel=True, cache=CACHE, fastmath=FASTMATH)(_run)
run_serial = njit(cache=CACHE, fastmath=FASTMATH)(_run)
