"""The direct driver: one row and one step from the caller's W, R and B as they are.

The function API (``fastgru.gru_cell(x, h, W, R, B)``, and the sequences' calls of one row and one
step) gets new weights, or weights that may have changed in place, at every call. Packing them
first is a pass over W and R as long as the step itself, and a cache of packed weights must read
the caller's weights anyway to prove them unchanged. Here each panel is packed into a small buffer
that stays in the first-level cache, K_ROWS rows of k at a time, just before the micro-kernel
multiplies it (``layout.pack_panel``): W and R are read once, and nothing is kept between calls.
The panels, the micro-kernel and the stage functions are the other drivers', and a sum's C is
stored and loaded between two runs of k rows exactly: the results have the same bits.

Arguments as in ``layout.py`` (N = S = 1, any D), with W (D, 3H, I), R (D, 3H, H) and B (D, 3H or
4H; [Bz, Br, Bh] or [Bz, Br, Wbh, Rbh]) instead of the packed weights, and ``work`` at least
``direct_scratch(...).end`` elements.
"""

from collections import namedtuple

import numpy as np

from .._config import kernel
from .layout import _lines, pack_panel, panels, read_call
from .memory import load, store
from .microkernel import tile_fma
from .products import PANEL_VECTORS
from .stages import activate_gates, begin_candidate, begin_gates, candidate_lbr, finish_row, reset_state, update_state

#: Rows of k packed into the buffer at a time (a multiple of every geometry's lanes): 8 KB of a
#: float32 panel of 32 columns.
K_ROWS = 64

#: Offsets in the float scratch: the row of X, the state, X·Wᵀ + bias, C, C2, r ⊙ H, the panel
#: buffer, the end.
DirectScratch = namedtuple("DirectScratch", "x state xg c c2 m panel end")


@kernel()
def direct_scratch(n_inputs, n_hidden, itemsize):
    """The DirectScratch of I inputs and H hidden units."""
    p = panels(n_hidden, itemsize)
    o_state = _lines(n_inputs, itemsize)
    o_xg = o_state + _lines(n_hidden, itemsize)
    o_c = o_xg + _lines(p.n * p.nr, itemsize)
    o_c2 = o_c + _lines(p.n * p.nr, itemsize)
    o_m = o_c2 + _lines((p.n - p.p2) * p.nr, itemsize)
    o_panel = o_m + _lines(n_hidden, itemsize)
    return DirectScratch(0, o_state, o_xg, o_c, o_c2, o_m, o_panel, o_panel + K_ROWS * p.nr)


@kernel()
def product_direct(w, co, ao, M, d, q0, q1, buf, nr):
    """w[co + (q - q0)*NR + l] += sum_k w[ao + k] · M[d, q*NR + l, k] for the panels q0..q1 (columns
    past 3H: never read), each packed K_ROWS rows of k at a time into w from ``buf``."""
    k_len = M.shape[2]
    for q in range(q0, q1):
        for k0 in range(0, k_len, K_ROWS):
            k1 = min(k0 + K_ROWS, k_len)
            pack_panel(M, d, q, k0, k1, nr, w, buf, False)
            tile_fma(w, co + (q - q0) * nr, 0, w, ao + k0, w, buf, 0, k1 - k0, 1, 1, PANEL_VECTORS)


@kernel(exact=True)  # the stages are inlined here: their sums must not contract
def run_direct(X, h0, lengths, att, y, ho, W, R, B, call, clip, work):
    """Step 0 of row 0 in every direction (a length of 0 or 1), on the calling thread."""
    c = read_call(call)
    n_hidden, n_inputs = c.n_hidden, c.n_inputs
    p = panels(n_hidden, y.itemsize)
    nr, first = p.nr, p.p2 * p.nr
    o = direct_scratch(n_inputs, n_hidden, y.itemsize)
    clip_at = y.dtype.type(clip)
    length, w = lengths[0], work
    for d in range(c.n_dirs):
        so, yo, bias_at = d * c.s_dir, d * c.y_dir, d * B.shape[1]
        for j in range(n_hidden):
            store(w, o.state + j, load(h0, so + j))
        if length > 0:
            for k in range(n_inputs):
                store(w, o.x + k, load(X, k))
            for col in range(3 * n_hidden):  # X·Wᵀ + bias: the bias first, as products.project
                store(w, o.xg + col, load(B, bias_at + col))
            for col in range(3 * n_hidden, p.n * nr):
                store(w, o.xg + col, 0)
            product_direct(w, o.xg, o.x, W, d, np.int64(0), p.n, o.panel, nr)
            begin_gates(w, o.c, o.xg, B, bias_at + 3 * n_hidden, c.lbr, n_hidden, 0, p.n * nr)
            product_direct(w, o.c, o.state, R, d, np.int64(0), p.n if c.lbr else p.p1, o.panel, nr)
            activate_gates(w, o.c, o.c + 2 * n_hidden, clip_at, c.f_code)
            if c.lbr:
                candidate_lbr(w, o.c, o.xg, n_hidden, 0, n_hidden)
                hg = o.c + 2 * n_hidden
            else:
                reset_state(w, o.m, o.c, o.state, n_hidden, 0, n_hidden)
                begin_candidate(w, o.c2, o.xg, n_hidden, first, first, p.n * nr)
                product_direct(w, o.c2, o.m, R, d, p.p2, p.n, o.panel, nr)
                hg = o.c2 + 2 * n_hidden - first
            activate_gates(w, hg, hg + n_hidden, clip_at, c.g_code)
            score = load(att, 0) if att.size > 0 else w.dtype.type(0)
            update_state(w, o.c, hg, o.state, o.state, score, att.size > 0, y, yo, 0, n_hidden)
        finish_row(w, o.state, length == 0 and not c.keep, y, yo, c.y_step, length, 1, ho, so, 0, n_hidden)
