"""A small call in one kernel call: ``run_planned`` takes the arrays that change from call to call
and one int64 **job** that holds the addresses of those that do not (the packed weights, the call
descriptor, the scratch, ...), so that Numba's dispatcher unboxes seven arguments instead of twelve:
it looks at and unboxes each one on every call, which at a one-row, one-step call of hidden size 4
is most of the kernel call's time (benchmarks/tuning.md, "Tuning: the small call").

A job is also how a stack runs its layers (``stack.py``): ``job_callback(path, itemsize)`` is the
address of a C callback per driver (serial, parallel, split, pair) and compute dtype that runs
that driver on a job's arrays, compiled once, whoever calls it.

``planned(signature)`` is run_planned compiled for exactly the argument types of one plan (dtype,
rank, C layout, writeable, aligned): a call with other types raises TypeError instead of
compiling, so that Numba's own look at the types, which every call pays, is the plan's check of
them. run_planned compares the shapes and the sequence lengths with the plan's, writes the
changing arrays' addresses into the job and calls ``serial_job`` (a C callback compiled once per
compute dtype, which runs ``rows.run_serial`` on the job's arrays) through its address: each
signature of run_planned is then a small function of its own instead of a copy of the whole
serial kernel. The job (``_plan.py`` makes it, and keeps every
array it points to alive; one per plan, and a plan serves one thread):

    JOB[name]          address and size of each array (``JOB_ARRAYS``; the fixed ones set by the
                       plan, X, h0, att, y and ho by run_planned at every call),
    JOB["steps"]       S, the call's steps: a sequence length must lie in [0, S],
    JOB["clip"]        the clip, as the bits of a float64,
    JOB["callback"]    the address of the C callback that runs the job (``job_callback``),
    JOB["shapes"]      the shapes of X, h0, sequence_lengths, att, y and ho (``SHAPED``), 4 places each.

A call whose arrays have other shapes, or a sequence length outside [0, S], returns 1 before
anything is written: the caller then runs the full checks, which say what is wrong.
sequence_lengths is copied into the job's int64 lengths buffer, as the kernels take it.
"""

import numpy as np
from llvmlite import ir
from numba import carray, types
from numba.extending import intrinsic

from .._config import kernel
from .._threading import start_pool
from .atomics import address_of, pointer_to
from .pair import SIZE as MAILBOX_SIZE
from .pair import run_pair
from .rows import run_parallel, run_serial
from .split import run_split

#: The arrays of a job, each as (address, size) in this order; then S, the clip's bits, the address
#: of the job's callback (``job_callback``), the shapes of the changing arrays, and what a stack's
#: layer adds (``stack.py``): the parallel driver's blocks, the pair driver's mailbox address, and
#: where the layer's state starts in the stack's states (elements).
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
JOB_SIZE = JOB["state_offset"] + 1
_WEIGHTS, _CALL, _WORK, _IWORK, _STATE_ROWS, _LENGTHS, _X, _H0, _ATT, _Y, _HO = (JOB[n] for n in JOB_ARRAYS)
_STEPS, _CLIP, _CALLBACK, _SHAPES = JOB["steps"], JOB["clip"], JOB["callback"], JOB["shapes"]
_BLOCKS, _MAILBOX = JOB["blocks"], JOB["mailbox"]

#: Element types for serial_job's views (constants in the compiled code).
_F32, _F64 = np.zeros(0, np.float32), np.zeros(0, np.float64)


@kernel()
def _arrays(job, like):
    """The kernels' arguments (``layout.py``) in ``job``, whose float arrays have the dtype of ``like``,
    with the ranks the kernels are called with (their shapes do not matter: they read by offsets)."""
    return (
        carray(pointer_to(job[_X], like), (1, 1, job[_X + 1])),
        carray(pointer_to(job[_H0], like), (1, 1, job[_H0 + 1])),
        carray(pointer_to(job[_LENGTHS], job), (job[_LENGTHS + 1],)),
        carray(pointer_to(job[_STATE_ROWS], job), (job[_STATE_ROWS + 1],)),
        carray(pointer_to(job[_ATT], like), (1, job[_ATT + 1])),
        carray(pointer_to(job[_Y], like), (1, 1, 1, job[_Y + 1])),
        carray(pointer_to(job[_HO], like), (1, 1, job[_HO + 1])),
        carray(pointer_to(job[_WEIGHTS], like), (job[_WEIGHTS + 1],)),
        carray(pointer_to(job[_CALL], job), (job[_CALL + 1],)),
        job.view(np.float64)[_CLIP],
        carray(pointer_to(job[_WORK], like), (job[_WORK + 1],)),
        carray(pointer_to(job[_IWORK], job), (job[_IWORK + 1],)),
    )


@kernel()
def _serial(job, like):
    run_serial(*_arrays(job, like))


@kernel()
def _parallel(job, like):
    run_parallel(*_arrays(job, like), job[_BLOCKS])


@kernel()
def _split(job, like):
    run_split(*_arrays(job, like))


@kernel()
def _pair(job, like):
    run_pair(*_arrays(job, like), carray(pointer_to(job[_MAILBOX], job), (MAILBOX_SIZE,)))


# The C callbacks, one per driver and compute dtype: module-level functions, as Numba's cache keys
# on a function's name and place (closures made in a loop would share one entry).
def _serial_f32(job):
    _serial(carray(job, (JOB_SIZE,)), _F32)
    return 0


def _serial_f64(job):
    _serial(carray(job, (JOB_SIZE,)), _F64)
    return 0


def _parallel_f32(job):
    _parallel(carray(job, (JOB_SIZE,)), _F32)
    return 0


def _parallel_f64(job):
    _parallel(carray(job, (JOB_SIZE,)), _F64)
    return 0


def _split_f32(job):
    _split(carray(job, (JOB_SIZE,)), _F32)
    return 0


def _split_f64(job):
    _split(carray(job, (JOB_SIZE,)), _F64)
    return 0


def _pair_f32(job):
    _pair(carray(job, (JOB_SIZE,)), _F32)
    return 0


def _pair_f64(job):
    _pair(carray(job, (JOB_SIZE,)), _F64)
    return 0


_JOBS = {
    ("serial", 4): _serial_f32,
    ("serial", 8): _serial_f64,
    ("parallel", 4): _parallel_f32,
    ("parallel", 8): _parallel_f64,
    ("split", 4): _split_f32,
    ("split", 8): _split_f64,
    ("pair", 4): _pair_f32,
    ("pair", 8): _pair_f64,
}
_JOB_SIGNATURE = types.int64(types.CPointer(types.int64))
_callbacks = {}


def job_callback(path, itemsize):
    """The address of a C callback that runs the driver of ``path`` (``_paths.PATHS``) on a job whose
    floats have ``itemsize`` bytes: compiled (or loaded from the cache) once per process, and a
    function of its own, so that the kernels that call it (``run_planned``, ``stack.run_stack``) do
    not each compile a copy of the driver."""
    key = path, itemsize
    callback = _callbacks.get(key)
    if callback is None:
        if path in ("parallel", "split"):  # code loaded from the cache links to the threading layer's symbols
            start_pool()
        callback = _callbacks[key] = kernel(callback=_JOB_SIGNATURE)(_JOBS[key])
    return callback.address


def serial_job(itemsize):
    """The address of serial_job for floats of ``itemsize`` bytes (compiled, or loaded from the cache,
    once per process)."""
    return job_callback("serial", itemsize)


@intrinsic
def call_job(typingctx, address, job):
    """Call the C function int64(int64*) at ``address`` with the data of the int64 array ``job``."""
    if not isinstance(address, types.Integer) or not isinstance(job, types.Array):
        return None

    def codegen(context, builder, signature, args):
        function = ir.FunctionType(ir.IntType(64), [ir.IntType(64).as_pointer()])
        target = builder.inttoptr(args[0], function.as_pointer())
        data = context.make_array(signature.args[1])(context, builder, args[1]).data
        return builder.call(target, [data])

    return types.int64(address, job), codegen


@kernel()
def _differs(array, job, k):
    """Whether ``array``'s shape is not the k-th of the job's shapes."""
    for axis in range(array.ndim):
        if array.shape[axis] != job[_SHAPES + 4 * k + axis]:
            return True
    return False


def _run_planned(X, h0, lengths, att, y, ho, job):
    """The serial kernel on the changing arrays and the job's fixed ones; returns 0, or 1 when a
    shape differs from the plan's or a sequence length lies outside [0, S] (nothing was written
    but the job's lengths buffer)."""
    if (
        _differs(X, job, 0)
        or _differs(h0, job, 1)
        or _differs(lengths, job, 2)
        or _differs(att, job, 3)
        or _differs(y, job, 4)
        or _differs(ho, job, 5)
    ):
        return 1
    steps = job[_STEPS]
    kept = carray(pointer_to(job[_LENGTHS], job), (job[_LENGTHS + 1],))
    for b in range(lengths.size):
        length = lengths[b]
        if length < 0 or length > steps:
            return 1
        kept[b] = length
    job[_X], job[_X + 1], job[_H0], job[_H0 + 1] = address_of(X), X.size, address_of(h0), h0.size
    job[_ATT], job[_ATT + 1], job[_Y], job[_Y + 1] = address_of(att), att.size, address_of(y), y.size
    job[_HO], job[_HO + 1] = address_of(ho), ho.size
    call_job(job[_CALLBACK], job)
    return 0


_ENTRIES = {}


def planned(signature):
    """run_planned compiled (or loaded from the cache) for exactly ``signature`` (its argument
    types), once per process."""
    entry = _ENTRIES.get(signature)
    if entry is None:
        entry = _ENTRIES[signature] = kernel(signature=signature)(_run_planned)
    return entry
