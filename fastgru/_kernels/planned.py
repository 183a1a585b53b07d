"""A small call in one kernel call: ``run_planned`` takes the arrays that change from call to call
and one int64 **job** that holds the addresses of those that do not (the packed weights, the call
descriptor, the scratch, ...), so that Numba's dispatcher unboxes seven arguments instead of twelve:
it looks at and unboxes each one on every call, which at a one-row, one-step call of hidden size 4
is most of the kernel call's time (benchmarks/tuning.md, "Tuning: the small call").

A job is also how a stack runs its layers (``stack.py``): ``job_callback(path, weights)`` is the
address of a C callback (``callbacks.py``) per driver (serial, parallel, split, pair) and element
type of the weights that runs that driver on a job's arrays, compiled once, whoever calls it.

``planned(signature)`` is run_planned compiled for exactly the argument types of one plan (dtype,
rank, C layout, writeable, aligned): a call with other types raises TypeError instead of
compiling, so that Numba's own look at the types, which every call pays, is the plan's check of
them. run_planned compares the shapes and the sequence lengths with the plan's, writes the
changing arrays' addresses into the job and calls the job's driver (serial, or pair) through its
callback's address: each
signature of run_planned is then a small function of its own instead of a copy of the whole
serial kernel. The job (``_plan.py`` makes it, and keeps every
array it points to alive; one per plan, and a plan serves one thread):

    JOB[name]          address and size of each array (``JOB_ARRAYS``; the fixed ones set by the
                       plan, X, h0, att, y and ho by run_planned at every call),
    JOB["steps"]       S, the call's steps: a sequence length must lie in [0, S],
    JOB["clip"]        the clip, as the bits of a float64,
    JOB["callback"]    the address of the C callback that runs the job (``job_callback``),
    JOB["shapes"]      the shapes of X, h0, sequence_lengths, att, y and ho (``SHAPED``), 4 places each.

A call whose arrays have other shapes, or a sequence length outside [0, S], returns -1 before
anything is written: the caller then runs the full checks, which say what is wrong.
sequence_lengths is copied into the job's int64 lengths buffer, as the kernels take it.
"""

import numpy as np
from numba import carray

from .._config import kernel
from .atomics import address_of, pointer_to
from .callbacks import BF16, F32, F64, I8, Callbacks, call_job, weights_key
from .pair import SIZE as MAILBOX_SIZE
from .pair import run_pair
from .rows import run_parallel, run_serial
from .split import run_split

#: The arrays of a job, each as (address, size) in this order; then S, the clip's bits, the address
#: of the job's callback (``job_callback``), the shapes of the changing arrays, and what a stack's
#: layer adds (``stack.py``): the parallel driver's blocks, the pair driver's mailbox address,
#: where the layer's state starts in the stack's states (elements), and the address of the pair
#: driver's worker 1 (``pair.worker_callback``).
JOB_ARRAYS = ("weights", "call", "work", "iwork", "state_rows", "lengths", "X", "h0", "att", "y", "ho")
SHAPED = ("X", "h0", "lengths", "att", "y", "ho")
JOB = {name: 2 * i for i, name in enumerate(JOB_ARRAYS)}
JOB["steps"] = 2 * len(JOB_ARRAYS)
JOB["clip"] = JOB["steps"] + 1
JOB["callback"] = JOB["clip"] + 1
JOB["shapes"] = JOB["callback"] + 1
JOB["blocks"] = JOB["shapes"] + 4 * len(SHAPED)
JOB["mailbox"] = JOB["blocks"] + 1
JOB["state_offset"] = JOB["mailbox"] + 1
JOB["worker"] = JOB["state_offset"] + 1
JOB_SIZE = JOB["worker"] + 1
_WEIGHTS, _CALL, _WORK, _IWORK, _STATE_ROWS, _LENGTHS, _X, _H0, _ATT, _Y, _HO = (JOB[n] for n in JOB_ARRAYS)
_STEPS, _CLIP, _CALLBACK, _SHAPES = JOB["steps"], JOB["clip"], JOB["callback"], JOB["shapes"]
_BLOCKS, _MAILBOX, _WORKER = JOB["blocks"], JOB["mailbox"], JOB["worker"]


@kernel()
def _arrays(job, like, weights_like):
    """The kernels' arguments (``layout.py``) in ``job``, whose float arrays have the dtype of ``like``
    and weights that of ``weights_like``, with the ranks the kernels are called with (their shapes
    do not matter: they read by offsets)."""
    return (
        carray(pointer_to(job[_X], like), (1, 1, job[_X + 1])),
        carray(pointer_to(job[_H0], like), (1, 1, job[_H0 + 1])),
        carray(pointer_to(job[_LENGTHS], job), (job[_LENGTHS + 1],)),
        carray(pointer_to(job[_STATE_ROWS], job), (job[_STATE_ROWS + 1],)),
        carray(pointer_to(job[_ATT], like), (1, job[_ATT + 1])),
        carray(pointer_to(job[_Y], like), (1, 1, 1, job[_Y + 1])),
        carray(pointer_to(job[_HO], like), (1, 1, job[_HO + 1])),
        carray(pointer_to(job[_WEIGHTS], weights_like), (job[_WEIGHTS + 1],)),
        carray(pointer_to(job[_CALL], job), (job[_CALL + 1],)),
        job.view(np.float64)[_CLIP],
        carray(pointer_to(job[_WORK], like), (job[_WORK + 1],)),
        carray(pointer_to(job[_IWORK], job), (job[_IWORK + 1],)),
    )


@kernel(inline=True)
def _serial(job, like, weights_like):
    run_serial(*_arrays(job, like, weights_like))
    return 0


@kernel(inline=True)
def _parallel(job, like, weights_like):
    run_parallel(*_arrays(job, like, weights_like), job[_BLOCKS])
    return 0


@kernel(inline=True)
def _split(job, like, weights_like):
    run_split(*_arrays(job, like, weights_like))
    return 0


@kernel(inline=True)
def _pair(job, like, weights_like):
    """run_pair's answer: 1 when the partner took the job."""
    mailbox = carray(pointer_to(job[_MAILBOX], job), (MAILBOX_SIZE,))
    return run_pair(*_arrays(job, like, weights_like), mailbox, job[_WORKER])


# The C callbacks, one per driver and element type of the weights (``callbacks.py``).
def _serial_f32(job):
    return _serial(carray(job, (JOB_SIZE,)), F32, F32)


def _serial_f64(job):
    return _serial(carray(job, (JOB_SIZE,)), F64, F64)


def _serial_bf16(job):
    return _serial(carray(job, (JOB_SIZE,)), F32, BF16)


def _serial_i8(job):
    return _serial(carray(job, (JOB_SIZE,)), F32, I8)


def _parallel_f32(job):
    return _parallel(carray(job, (JOB_SIZE,)), F32, F32)


def _parallel_f64(job):
    return _parallel(carray(job, (JOB_SIZE,)), F64, F64)


def _parallel_bf16(job):
    return _parallel(carray(job, (JOB_SIZE,)), F32, BF16)


def _parallel_i8(job):
    return _parallel(carray(job, (JOB_SIZE,)), F32, I8)


def _split_f32(job):
    return _split(carray(job, (JOB_SIZE,)), F32, F32)


def _split_f64(job):
    return _split(carray(job, (JOB_SIZE,)), F64, F64)


def _split_bf16(job):
    return _split(carray(job, (JOB_SIZE,)), F32, BF16)


def _split_i8(job):
    return _split(carray(job, (JOB_SIZE,)), F32, I8)


def _pair_f32(job):
    return _pair(carray(job, (JOB_SIZE,)), F32, F32)


def _pair_f64(job):
    return _pair(carray(job, (JOB_SIZE,)), F64, F64)


def _pair_bf16(job):
    return _pair(carray(job, (JOB_SIZE,)), F32, BF16)


def _pair_i8(job):
    return _pair(carray(job, (JOB_SIZE,)), F32, I8)


_JOBS = Callbacks(
    {
        (path, key): function
        for path, functions in (
            ("serial", (_serial_f32, _serial_f64, _serial_bf16, _serial_i8)),
            ("parallel", (_parallel_f32, _parallel_f64, _parallel_bf16, _parallel_i8)),
            ("split", (_split_f32, _split_f64, _split_bf16, _split_i8)),
            ("pair", (_pair_f32, _pair_f64, _pair_bf16, _pair_i8)),
        )
        for key, function in zip("fdHb", functions)
    },
    threads={(path, key) for path in ("parallel", "split") for key in "fdHb"},
)


def job_callback(path, weights):
    """The address of a C callback that runs the driver of ``path`` (``_paths.PATHS``) on a job whose
    weights are ``weights`` (their element type's): compiled (or loaded from the cache) once per
    process, and a function of its own, so that the kernels that call it (``run_planned``,
    ``stack.run_stack``) do not each compile a copy of the driver."""
    return _JOBS.address((path, weights_key(weights)))


@kernel(inline=True)  # compiled on its own, it took a specialisation per rank and k: 12 of them
def _differs(shape, job, k):
    """Whether ``shape`` (an array's) is not the k-th of the job's shapes."""
    for axis in range(len(shape)):
        if shape[axis] != job[_SHAPES + 4 * k + axis]:
            return True
    return False


def _run_planned(X, h0, lengths, att, y, ho, job):
    """The job's driver on the changing arrays and the job's fixed ones; returns its callback's
    answer (0; the pair driver's: 1 when the partner took the job), or -1 when a shape differs from
    the plan's or a sequence length lies outside [0, S] (nothing was written but the job's lengths
    buffer)."""
    if (
        _differs(X.shape, job, 0)
        or _differs(h0.shape, job, 1)
        or _differs(lengths.shape, job, 2)
        or _differs(att.shape, job, 3)
        or _differs(y.shape, job, 4)
        or _differs(ho.shape, job, 5)
    ):
        return -1
    steps = job[_STEPS]
    kept = carray(pointer_to(job[_LENGTHS], job), (job[_LENGTHS + 1],))
    for b in range(lengths.size):
        length = lengths[b]
        if length < 0 or length > steps:
            return -1
        kept[b] = length
    job[_X], job[_X + 1], job[_H0], job[_H0 + 1] = address_of(X), X.size, address_of(h0), h0.size
    job[_ATT], job[_ATT + 1], job[_Y], job[_Y + 1] = address_of(att), att.size, address_of(y), y.size
    job[_HO], job[_HO + 1] = address_of(ho), ho.size
    return call_job(job[_CALLBACK], job)


_ENTRIES = {}


def planned(signature):
    """run_planned compiled (or loaded from the cache) for exactly ``signature`` (its argument
    types), once per process."""
    entry = _ENTRIES.get(signature)
    if entry is None:
        entry = _ENTRIES[signature] = kernel(signature=signature)(_run_planned)
    return entry
