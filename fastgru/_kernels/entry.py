"""The one way into the kernels: the entry takes a call's arrays that change from call to call and
the plan's **jobs** (``jobs.py``; one per layer of a stack, one for an op), which hold everything
else, and runs each job through its driver's C callback (``drivers.py``); a direct call's entry
(``direct.py``) adds the caller's W, R and B to its job first.

Numba's dispatcher unboxes seven arguments instead of a driver's dozen, and looks at each one's type
on every call: ``entry(signature)`` is the entry compiled for exactly one plan's types, which
raises TypeError for others instead of compiling: that look is the plan's check of the types (a
prepared op's call that took no checks: ``fastgru._plan``). The entry then compares the arrays'
shapes with the plan's and the sequence lengths with [0, S], and returns -1 before it writes
anything when one differs: the caller then runs the full checks, which say what is wrong. The
lengths, of any integer dtype, are copied into the plan's int64 buffer, as the drivers read them.

A stack whose first job names a ``cut`` runs as a **wavefront**: the jobs from the cut on are posted
to the partner thread (``pair.post_jobs``), the others run here, and the layer at the cut computes
step s as soon as the one before has written it (their descriptors' ``wait`` and ``post``, on the
counter at ``progress``): each core reads only its own layers' weights. A partner that has not taken
its layers when this thread is done has them withdrawn, and this thread runs them.
"""

import numpy as np
from numba import carray

from .._config import kernel
from .atomics import address_of, atomic_store, pointer_to
from .jobs import JOB, fill_jobs, run_jobs
from .pair import SIZE as MAILBOX_SIZE
from .pair import finish, post_jobs

_STEPS, _SHAPES, _CUT, _PROGRESS, _MAILBOX, _WORKER = (
    JOB[n] for n in ("steps", "shapes", "cut", "progress", "mailbox", "worker")
)
_LENGTHS, _WEIGHTS, _R, _B = (JOB[n] for n in ("lengths", "weights", "R", "B"))


@kernel(inline=True)  # compiled on its own, it took a specialisation per rank and k: 12 of them
def _differs(shape, jobs, k):
    """Whether ``shape`` (an array's) is not the k-th of the first job's shapes (``SHAPED``). The
    jobs are read as jobs[0, i]: a view jobs[0] of an array Python made would count a reference."""
    for axis in range(len(shape)):
        if shape[axis] != jobs[0, _SHAPES + 4 * k + axis]:
            return True
    return False


@kernel(inline=True)
def _took_lengths(lengths, jobs):
    """Copy ``lengths`` into the jobs' int64 lengths buffer; False if one lies outside [0, S]."""
    steps = jobs[0, _STEPS]
    kept = carray(pointer_to(jobs[0, _LENGTHS], jobs), (jobs[0, _LENGTHS + 1],))
    for b in range(lengths.size):
        length = lengths[b]
        if length < 0 or length > steps:
            return False
        kept[b] = length
    return True


def _run_plan(X, h0, lengths, att, y, ho, jobs):
    """The entry of every call but a direct one: the plan's jobs on the call's arrays; returns the
    largest answer of the drivers (0; a pair driver's, a wavefront's: 1 when the partner took its
    part), or -1 when a shape differs from the plan's or a sequence length lies outside [0, S]
    (nothing was written but the lengths buffer). The shapes are compared in ``jobs.SHAPED``'s
    order."""
    if (
        _differs(X.shape, jobs, 0)
        or _differs(h0.shape, jobs, 1)
        or _differs(lengths.shape, jobs, 2)
        or _differs(att.shape, jobs, 3)
        or _differs(y.shape, jobs, 4)
        or _differs(ho.shape, jobs, 5)
        or not _took_lengths(lengths, jobs)
    ):
        return -1
    fill_jobs(jobs, X, h0, att, y, ho)
    if jobs[0, _CUT] == 0:
        return run_jobs(jobs, np.int64(0), jobs.shape[0])
    return _wavefront(jobs)


@kernel()  # compiled once, for every entry: the jobs' type is theirs
def _wavefront(jobs):
    """The jobs as a wavefront: those from the cut on posted to the partner thread, the others run
    here; 1 when the partner took its part, else 0 (withdrawn, this thread ran them)."""
    cut = jobs[0, _CUT]
    mailbox = carray(pointer_to(jobs[0, _MAILBOX], jobs), (MAILBOX_SIZE,))
    atomic_store(carray(pointer_to(jobs[0, _PROGRESS], jobs), (1,)), 0, 0)
    post_jobs(mailbox, jobs[0, _WORKER], jobs, cut)
    run_jobs(jobs, np.int64(0), cut)
    if finish(mailbox):
        return 1
    run_jobs(jobs, cut, jobs.shape[0])  # withdrawn: ours
    return 0


#: ``_run_plan`` inlined into the direct entry. The plan's entry compiles ``_run_plan`` itself, not a
#: function that inlines it: Numba copies an inlined function's code at each level of inlining.
_run = kernel(inline=True)(_run_plan)


def _run_direct_plan(X, h0, lengths, att, y, ho, W, R, B, jobs):
    """The entry of a direct call's job, with the caller's W, R and B (their shapes compared with the
    plan's too)."""
    if _differs(W.shape, jobs, 6) or _differs(R.shape, jobs, 7) or _differs(B.shape, jobs, 8):
        return -1
    jobs[0, _WEIGHTS], jobs[0, _WEIGHTS + 1] = address_of(W), W.size
    jobs[0, _R], jobs[0, _R + 1], jobs[0, _B], jobs[0, _B + 1] = address_of(R), R.size, address_of(B), B.size
    return _run(X, h0, lengths, att, y, ho, jobs)


_ENTRIES = {}


def entry(signature, direct=False):
    """The entry (``direct``: ``run_direct_plan``) compiled, or loaded from the cache, for exactly
    ``signature`` (its argument types), once per process: a call of other types raises TypeError."""
    compiled = _ENTRIES.get((signature, direct))
    if compiled is None:
        source = _run_direct_plan if direct else _run_plan
        compiled = _ENTRIES[signature, direct] = kernel(signature=signature)(source)
    return compiled
