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


@kernel()
def _xg_panels(o, w, B, W, d, bias_at, n_hidden, q0, q1, nr):
    """X·Wᵀ + bias for the panels q0..q1: the bias first, as ``products.project``, zero past 3H."""
    for col in range(q0 * nr, min(q1 * nr, 3 * n_hidden)):
        store(w, o.xg + col, load(B, bias_at + col))
    for col in range(max(q0 * nr, 3 * n_hidden), q1 * nr):
        store(w, o.xg + col, 0)
    product_direct(w, o.xg + q0 * nr, o.x, W, d, q0, q1, o.panel, nr)


@kernel()
def _gates_panels(o, w, B, R, d, rbh_at, lbr, n_hidden, q0, q1, nr):
    """C for the panels q0..q1: X·Wᵀ + bias and Rbh (``begin_gates``), then + H·Rᵀ."""
    begin_gates(w, o.c, o.xg, B, rbh_at, lbr, n_hidden, q0 * nr, q1 * nr)
    product_direct(w, o.c + q0 * nr, o.state, R, d, q0, q1, o.panel, nr)


@kernel(exact=True)  # the stages are inlined here: their sums must not contract
def direct_units(X, h0, lengths, att, y, ho, W, R, B, call, clip_at, d, u0, u1, w):
    """Step 0 of row 0, direction d, for the units [u0, u1) (a length of 0 or 1), in the task's
    scratch ``w``. It computes the columns those units need: their z and h columns, and every r
    column (r ⊙ H takes all of r), in whole panels, each once: the two workers of a pair
    (``pair.run_direct_pair``) each compute every r column, and meet only at the end."""
    c = read_call(call)
    n_hidden, n_inputs = c.n_hidden, c.n_inputs
    p = panels(n_hidden, y.itemsize)
    nr, first = p.nr, p.p2 * p.nr
    o = direct_scratch(n_inputs, n_hidden, y.itemsize)
    length = lengths[0]
    so, yo, bias_at = d * c.s_dir, d * c.y_dir, d * B.shape[1]
    for j in range(n_hidden):
        store(w, o.state + j, load(h0, so + j))
    if length > 0:
        for k in range(n_inputs):
            store(w, o.x + k, load(X, k))
        # The panels of the z columns of the units, of every r column, of the h columns of the
        # units: three runs, in order, each starting where the one before ended.
        z0, z1 = u0 // nr, -(-u1 // nr)
        r0, r1 = max(n_hidden // nr, z1), -(-2 * n_hidden // nr)
        h0_, h1 = (2 * n_hidden + u0) // nr, -(-(2 * n_hidden + u1) // nr)
        hq0 = max(h0_, r1)
        for q0, q1 in ((z0, z1), (r0, r1), (hq0, h1)):
            _xg_panels(o, w, B, W, d, bias_at, n_hidden, q0, q1, nr)
        rbh_at = bias_at + 3 * n_hidden
        _gates_panels(o, w, B, R, d, rbh_at, c.lbr, n_hidden, z0, z1, nr)
        _gates_panels(o, w, B, R, d, rbh_at, c.lbr, n_hidden, r0, r1, nr)
        activate_gates(w, o.c + u0, o.c + u1, clip_at, c.f_code)
        activate_gates(w, o.c + n_hidden, o.c + 2 * n_hidden, clip_at, c.f_code)
        if c.lbr:
            _gates_panels(o, w, B, R, d, rbh_at, c.lbr, n_hidden, hq0, h1, nr)
            candidate_lbr(w, o.c, o.xg, n_hidden, u0, u1)
            hg = o.c + 2 * n_hidden
        else:  # C2, the h gate's product, from column ``first``: for the panels h0_..h1
            reset_state(w, o.m, o.c, o.state, n_hidden, 0, n_hidden)
            begin_candidate(w, o.c2 + (h0_ - p.p2) * nr, o.xg, n_hidden, h0_ * nr, h0_ * nr, h1 * nr)
            product_direct(w, o.c2 + (h0_ - p.p2) * nr, o.m, R, d, h0_, h1, o.panel, nr)
            hg = o.c2 + 2 * n_hidden - first
        activate_gates(w, hg + u0, hg + u1, clip_at, c.g_code)
        score = load(att, 0) if att.size > 0 else w.dtype.type(0)
        update_state(w, o.c, hg, o.state, o.state, score, att.size > 0, y, yo, u0, u1)
    finish_row(w, o.state, length == 0 and not c.keep, y, yo, c.y_step, length, 1, ho, so, u0, u1)


@kernel()
def run_direct(X, h0, lengths, att, y, ho, W, R, B, call, clip, work):
    """Every direction on the calling thread."""
    c = read_call(call)
    for d in range(c.n_dirs):
        direct_units(X, h0, lengths, att, y, ho, W, R, B, call, y.dtype.type(clip), d, 0, c.n_hidden, work)
