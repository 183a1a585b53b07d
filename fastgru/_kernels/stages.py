"""The GRU equations, one function each, on one batch row's columns or units.

With gate order z, r, h in the rows of W, R and B:

    z = f(clip(X·Wzᵀ + H·Rzᵀ + Bz))                  r = f(clip(X·Wrᵀ + H·Rrᵀ + Br))
    h = g(clip(X·Whᵀ + (r ⊙ H)·Rhᵀ + Bh))            linear_before_reset False
    h = g(clip(X·Whᵀ + r ⊙ (H·Rhᵀ + Rbh) + Wbh))     linear_before_reset True
    AUGRU: z' = (1 - a) ⊙ z, after f, not clamped
    H' = (1 - z) ⊙ h + z ⊙ H

A step of a row runs: the input gates X·Wᵀ + bias (``products.project``), ``begin_gates``, the
recurrent product H·Rᵀ, ``activate_gates`` on z and r, then ``candidate_lbr``, or ``reset_state``,
``begin_candidate`` and the product (r ⊙ H)·Rhᵀ, then ``activate_gates`` on h and
``update_state``; ``finish_row`` after the last step. The batch driver (``rows.py``) calls them on
whole rows, the split driver (``split.py``) on each worker's columns or units: every path computes
every element with these functions, so results do not depend on the path.

Every buffer of a step (X·Wᵀ + bias, C, C2, r ⊙ H, the states) lives in the task's float scratch
``w`` and is addressed by offsets (``memory.load``/``store``), never through views: a view is a
reference that Numba counts with atomic operations, which cost more than the arithmetic of a
small step, and one array lets LLVM vectorise each loop with a single check of overlap. The
functions compile without contraction (``exact``): a sum of products must round alike wherever
it is called.
"""

from .._config import kernel
from .activations import activate, clip
from .memory import load, load_as, store


@kernel(exact=True, inline=True)
def begin_gates(w, co, xo, weights, rbh_at, lbr, n_hidden, col0, col1):
    """Columns [col0, col1) of a row of C (at co) before the recurrent product adds H·Rᵀ: X·Wᵀ + bias
    of z and r (the row at xo); the h gate's Rbh (at rbh_at in ``weights``) for
    linear_before_reset; zero elsewhere (h columns sharing a panel with r, padding: never read)."""
    h2, h3 = 2 * n_hidden, 3 * n_hidden
    for col in range(col0, min(col1, h2)):
        store(w, co + col, load(w, xo + col))
    if lbr:
        for col in range(max(col0, h2), min(col1, h3)):
            store(w, co + col, load_as(weights, rbh_at + col - h2, w))
        for col in range(max(col0, h3), col1):
            store(w, co + col, 0)
    else:
        for col in range(max(col0, h2), col1):
            store(w, co + col, 0)


@kernel(inline=True)
def activate_gates(w, lo, hi, clip_at, code):
    """clip, then the activation ``code``, on w[lo:hi] in place (clip_at 0: no clipping)."""
    if clip_at > 0:
        clip(w, lo, hi, clip_at)
    activate(w, lo, hi, code)


@kernel(exact=True, inline=True)
def reset_state(w, mo, co, so, n_hidden, k0, k1):
    """r ⊙ H for units [k0, k1) to w[mo + k]: r from a row of C at co (column H + k), H at so."""
    for k in range(k0, k1):
        store(w, mo + k, load(w, co + n_hidden + k) * load(w, so + k))


@kernel(exact=True, inline=True)
def begin_candidate(w, c2o, xo, n_hidden, first, col0, col1):
    """Columns [col0, col1) of a row of C2, the h gate's product (r ⊙ H)·Rhᵀ, which starts at column
    ``first`` (a panel's first column) and is stored from c2o: X·Whᵀ + Bh (the row at xo) at the h
    columns, zero elsewhere (z or r columns sharing a panel with h, padding: never read)."""
    h2, h3 = 2 * n_hidden, 3 * n_hidden
    at = c2o - first
    for col in range(col0, min(col1, h2)):  # three loops, not a test per column: each vectorises
        store(w, at + col, 0)
    for col in range(max(col0, h2), min(col1, h3)):
        store(w, at + col, load(w, xo + col))
    for col in range(max(col0, h3), col1):
        store(w, at + col, 0)


@kernel(exact=True, inline=True)
def candidate_lbr(w, co, xo, n_hidden, u0, u1):
    """The h gate's pre-activation with linear_before_reset, for units [u0, u1):
    X·Whᵀ + Wbh (the row at xo) + r ⊙ (H·Rhᵀ + Rbh), the last factor in C's h columns, where it goes."""
    h1, h2 = n_hidden, 2 * n_hidden
    for j in range(u0, u1):
        store(w, co + h2 + j, load(w, xo + h2 + j) + load(w, co + h1 + j) * load(w, co + h2 + j))


@kernel(exact=True, inline=True)
def update_state(w, co, ho, states, att, y, yo, units):
    """H' = (1 - z) ⊙ h + z ⊙ H for units [u0, u1) = ``units``, as the specification writes it
    (h + z ⊙ (H - h) would turn an infinite h into NaN): z from a row of C at co, h at ho, H at
    ``before`` and H' to ``after`` (``states`` = (before, after)) and to y at yo. AUGRU (``att`` =
    (True, its score a)) scales z by 1 - a first, as the specification writes it."""
    before, after = states
    has_att, att_score = att
    u0, u1 = units
    one = w.dtype.type(1)  # a 1 of the compute dtype (a literal 1 would promote to float64)
    if has_att:  # a loop of its own: each loop vectorises
        scale = one - att_score
        for j in range(u0, u1):
            store(w, co + j, scale * load(w, co + j))
    for j in range(u0, u1):
        z = load(w, co + j)
        v = (one - z) * load(w, ho + j) + z * load(w, before + j)
        store(w, after + j, v)
        store(y, yo + j, v)


@kernel(exact=True, inline=True)
def finish_row(w, so, zero, y, y_at, steps, ho, hoo, units):
    """After a row's last step, for units [u0, u1) = ``units``: Y zero at steps t >= length (``y_at``
    = (yo, y_step): the row at yo in y, steps y_step apart; ``steps`` = (length, S)), and Ho (at hoo
    in ho) the state (at so), or zero when ``zero``."""
    yo, y_step = y_at
    length, seq_length = steps
    u0, u1 = units
    for t in range(length, seq_length):
        for j in range(u0, u1):
            store(y, yo + t * y_step + j, 0)
    for j in range(u0, u1):
        store(ho, hoo + j, 0 if zero else load(w, so + j))
