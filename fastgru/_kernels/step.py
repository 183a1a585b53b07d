"""The GRU time step, written once: its stage order, on whichever rows, columns and weights a
driver gives it.

A step has two phases. ``gates``: C = X·Wᵀ + bias of z and r (and, with linear_before_reset, the h
gate's Rbh) plus H·Rᵀ over a range of panels, f on its z and r columns, and r ⊙ H of their units
(linear_before_reset False). ``candidate``: the h gate's pre-activation of a range of units,
X·Whᵀ + Wbh + r ⊙ (H·Rhᵀ + Rbh) or X·Whᵀ + Bh + (r ⊙ H)·Rhᵀ, then g and the update
H' = (1 - z) ⊙ h + z ⊙ H. The stages are ``stages.py``'s, and X·Wᵀ + bias is already computed.

Every driver runs a step through these two, and they differ only in three parameters:

- which rows: ``Rows``, where the rows' C, C2, r ⊙ H and states are in the float scratch, and
  ``where`` (a kernel, with its integers ``Step.at``): each row's X·Wᵀ + bias, its place in Y and
  its attention score. The batch driver (``rows.py``) gives a chunk of rows and reads them from its
  order; one row gives its own (``one_row``);
- which columns: a range of panels for ``gates`` (the split driver's halves), repeated once per
  gate for the split's one-phase steps, and a range of units for ``candidate``; a whole step is
  ``gates`` on the panels of z and r (and h, with linear_before_reset), then ``candidate`` on every
  unit (``whole``);
- which weights: ``product`` (a kernel, with its integers ``Step.src``): C's rows += A's rows ·
  panels of Rᵀ, from packed weights (a chunk's rows, ``rows.rows_product``, or one row,
  ``products.product_row``) or from the caller's R as it is (``direct.product_direct``).

Numba compiles the phases into each driver with its kernels (they are inlined, and the kernels
passed to them are compile-time constants): one source, a specialisation per driver, and the stages
of every path compute every element alike, so results do not depend on the path. The drivers call
the phases themselves, not through a function of their own that they inline: Numba copies an
inlined function's code block by block at each level of inlining, and a level more doubled the
batch driver's compile time.
"""

from collections import namedtuple

import numpy as np

from .._config import kernel
from .memory import load
from .stages import activate_gates, begin_candidate, begin_gates, candidate_lbr, reset_state, update_state

#: The rows of a step in the float scratch: n rows; row i's C at c + i*ldc, C2 (the h gate's
#: product, from column ``Step.first``) at c2 + i*ld2, r ⊙ H at m + i*H, its state before the step
#: at before + i*H and after it at after + i*H (the same place, or another copy).
Rows = namedtuple("Rows", "n c ldc c2 ld2 m before after")

#: What the phases of a step share, integers but the clip: the call descriptor ``c`` (``layout.py``),
#: the ``rows``, the integers of the ``product`` kernel (``src``) and of the ``where`` kernel
#: (``at``), the panels' width NR, C2's first column, where the h gate's Rbh is in the bias array,
#: and the clip (0: none).
Step = namedtuple("Step", "c rows src at nr first rbh_at clip_at")


@kernel()
def one_row(at, iwork, i):
    """``where`` of one row: ``at`` = (X·Wᵀ + bias's offset, Y's, the attention score's)."""
    return at


@kernel(exact=True, inline=True)
def gates(w, weights, bias, iwork, product, where, step, panels):
    """The gates' phase of a step for the rows of ``step``, on the panels [q0, q1) of C, repeated
    ``repeat`` times ``every`` panels apart (``panels`` = (q0, q1, repeat, every)): C = X·Wᵀ + bias
    and Rbh (``begin_gates``; Rbh at ``step.rbh_at`` in ``bias``), + H·Rᵀ (``product`` on
    ``weights``), f on their z and r columns, and r ⊙ H of those units."""
    c, rows, nr = step.c, step.rows, step.nr
    n_hidden = c.n_hidden
    q0, q1, repeat, every = panels
    for k in range(repeat):
        p0, p1 = q0 + k * every, q1 + k * every
        c0, c1 = p0 * nr, p1 * nr
        for i in range(rows.n):
            xo = where(step.at, iwork, i)[0]
            begin_gates(w, rows.c + i * rows.ldc, xo, bias, step.rbh_at, c.lbr, n_hidden, c0, c1)
        product(w, weights, iwork, step.src, (rows.c + c0, rows.ldc), rows.before, rows.n, (p0, p1))
        hi = min(c1, 2 * n_hidden)
        for i in range(rows.n):
            co = rows.c + i * rows.ldc
            activate_gates(w, co + c0, co + hi, step.clip_at, c.f_code)
            if not c.lbr:
                reset_state(w, rows.m + i * n_hidden, co, rows.before + i * n_hidden, n_hidden, max(c0, n_hidden)
                    - n_hidden, hi - n_hidden)  # fmt: skip


@kernel(exact=True, inline=True)
def candidate(w, weights, iwork, att, y, product, where, step, units):
    """The candidate's phase of a step for the rows of ``step``, on the units [u0, u1) of the h gate
    whose columns are the panels [q0, q1) (``units`` = (q0, q1, u0, u1)): the h gate's
    pre-activation (for linear_before_reset False, C2 = X·Whᵀ + Bh + (r ⊙ H)·Rhᵀ, ``product`` on
    ``weights``), g, and the update, to the state after the step and to Y."""
    c, rows, nr, first = step.c, step.rows, step.nr, step.first
    n_hidden = c.n_hidden
    q0, q1, u0, u1 = units
    if c.lbr:
        for i in range(rows.n):
            candidate_lbr(w, rows.c + i * rows.ldc, where(step.at, iwork, i)[0], n_hidden, u0, u1)
    else:
        for i in range(rows.n):
            xo = where(step.at, iwork, i)[0]
            begin_candidate(w, rows.c2 + i * rows.ld2, xo, n_hidden, first, q0 * nr, q1 * nr)
        product(w, weights, iwork, step.src, (rows.c2 + q0 * nr - first, rows.ld2), rows.m, rows.n, (q0, q1))
    has_att = att.size > 0
    for i in range(rows.n):
        co = rows.c + i * rows.ldc
        hg = co + 2 * n_hidden if c.lbr else rows.c2 + i * rows.ld2 + 2 * n_hidden - first
        activate_gates(w, hg + u0, hg + u1, step.clip_at, c.g_code)
        _, y_at, att_at = where(step.at, iwork, i)
        score = load(att, att_at) if has_att else w.dtype.type(0)
        states = rows.before + i * n_hidden, rows.after + i * n_hidden
        update_state(w, co, hg, states, (has_att, score), y, y_at, (u0, u1))


@kernel(inline=True)
def whole(lbr, n_hidden, p):
    """(gates' panels, candidate's units) of a whole step (``p``: the Panels): the panels that hold z
    and r (and h, with linear_before_reset) once, and every unit of the h gate's panels."""
    return (np.int64(0), p.n if lbr else p.p1, np.int64(1), np.int64(0)), (p.p2, p.n, np.int64(0), n_hidden)
