"""A small call in one kernel call: ``run_planned`` takes the arrays that change from call to call
and one int64 **plan** that holds the addresses of those that do not (the packed weights, the call
descriptor, the scratch, ...), so that Numba's dispatcher unboxes seven arguments instead of twelve.
Each array argument costs the dispatcher about 70 ns (benchmarks/tuning.md, "Tuning: the small
call"): at a one-row, one-step call of hidden size 4 the arguments were half of the kernel's time.

``planned(signature)`` is run_planned compiled for exactly the argument types of one plan (dtype,
rank, C layout, writeable, aligned): a call with other types raises TypeError instead of
compiling, so that Numba's own check of the types, which every call pays, is the plan's check of
them. The plan (``_plan.py`` makes it, and keeps every array it points to alive):

    PLAN[name]          address and size of each fixed array (``PLAN_ARRAYS``),
    PLAN["steps"]       S, the call's steps: a sequence length must lie in [0, S],
    PLAN["clip"]        the clip, as the bits of a float64,
    PLAN["shapes"]      the shapes of the changing arrays X, h0, sequence_lengths, att, y, ho
                        (``SHAPED``), 4 places each.

The changing arrays are C-contiguous (their types say so); the kernels read them by flat offsets.
A call whose arrays have other shapes, or a sequence length outside [0, S], returns 1 before
anything is written: the caller then runs the full checks, which say what is wrong.
sequence_lengths is copied into the plan's int64 lengths buffer, as the kernels take it.
"""

import numpy as np
from numba import carray

from .._config import kernel
from .atomics import pointer_to
from .rows import run_serial

#: The fixed arrays of a plan, each as (address, size) in this order; then S, the clip's bits and
#: the shapes of the changing arrays.
PLAN_ARRAYS = ("weights", "call", "work", "iwork", "state_rows", "lengths")
SHAPED = ("X", "h0", "lengths", "att", "y", "ho")
PLAN = {name: 2 * i for i, name in enumerate(PLAN_ARRAYS)}
PLAN["steps"] = 2 * len(PLAN_ARRAYS)
PLAN["clip"] = PLAN["steps"] + 1
PLAN["shapes"] = PLAN["clip"] + 1
PLAN_SIZE = PLAN["shapes"] + 4 * len(SHAPED)
_WEIGHTS, _CALL, _WORK, _IWORK, _STATE_ROWS, _LENGTHS, _STEPS, _CLIP, _SHAPES = (
    PLAN[name] for name in (*PLAN_ARRAYS, "steps", "clip", "shapes")
)


@kernel()
def _differs(array, plan, k):
    """Whether ``array``'s shape is not the k-th of the plan's shapes."""
    for axis in range(array.ndim):
        if array.shape[axis] != plan[_SHAPES + 4 * k + axis]:
            return True
    return False


def _run_planned(X, h0, lengths, att, y, ho, plan):
    """``rows.run_serial`` on the changing arrays and the plan's fixed ones; returns 0, or 1 when a
    shape differs from the plan's or a sequence length lies outside [0, S] (nothing was written
    but the plan's lengths buffer)."""
    if (
        _differs(X, plan, 0)
        or _differs(h0, plan, 1)
        or _differs(lengths, plan, 2)
        or _differs(att, plan, 3)
        or _differs(y, plan, 4)
        or _differs(ho, plan, 5)
    ):
        return 1
    steps = plan[_STEPS]
    kept = carray(pointer_to(plan[_LENGTHS], plan), (plan[_LENGTHS + 1],))
    for b in range(lengths.size):
        length = lengths[b]
        if length < 0 or length > steps:
            return 1
        kept[b] = length
    run_serial(
        X.reshape((1, 1, X.size)),
        h0.reshape((1, 1, h0.size)),
        kept,
        carray(pointer_to(plan[_STATE_ROWS], plan), (plan[_STATE_ROWS + 1],)),
        att.reshape((1, att.size)),
        y.reshape((1, 1, 1, y.size)),
        ho.reshape((1, 1, ho.size)),
        carray(pointer_to(plan[_WEIGHTS], y), (plan[_WEIGHTS + 1],)),
        carray(pointer_to(plan[_CALL], plan), (plan[_CALL + 1],)),
        plan.view(np.float64)[_CLIP],
        carray(pointer_to(plan[_WORK], y), (plan[_WORK + 1],)),
        carray(pointer_to(plan[_IWORK], plan), (plan[_IWORK + 1],)),
    )
    return 0


_ENTRIES = {}


def planned(signature):
    """run_planned compiled (or loaded from the cache) for exactly ``signature`` (its argument
    types), once per process."""
    entry = _ENTRIES.get(signature)
    if entry is None:
        entry = _ENTRIES[signature] = kernel(signature=signature)(_run_planned)
    return entry
