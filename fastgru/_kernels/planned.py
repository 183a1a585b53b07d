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
callback's address: each signature of run_planned is then a small function of its own instead of
a copy of the whole serial kernel. The job (``jobs.py``'s layout; ``_plan.py`` makes it, and keeps
every array it points to alive; one per plan, and a plan serves one thread) holds the fixed
arrays, set by the plan; X, h0, att, y and ho, set by run_planned at every call; S, against which
the sequence lengths are checked; and the shapes the changing arrays must have.

A call whose arrays have other shapes, or a sequence length outside [0, S], returns -1 before
anything is written: the caller then runs the full checks, which say what is wrong.
sequence_lengths is copied into the job's int64 lengths buffer, as the kernels take it.
"""

from numba import carray

from .._config import kernel
from .atomics import address_of, pointer_to
from .callbacks import BF16, F32, F64, I8, Callbacks, call_job, weights_key
from .direct import direct_part
from .jobs import JOB, JOB_SIZE, SHAPED, job_arrays
from .layout import read_call
from .pair import SIZE as MAILBOX_SIZE
from .pair import run_pair
from .rows import run_parallel, run_serial
from .split import run_split, split_part

_STEPS, _CALLBACK, _SHAPES = JOB["steps"], JOB["callback"], JOB["shapes"]
_BLOCKS, _MAILBOX, _WORKER, _TASKS, _TASK = (JOB[name] for name in ("blocks", "mailbox", "worker", "tasks", "task"))
_X, _H0, _LENGTHS, _ATT, _Y, _HO = (JOB[name] for name in SHAPED)
_R, _B = JOB["R"], JOB["B"]


@kernel(inline=True)
def _serial(job, like, weights_like):
    """The serial driver (JOB["blocks"] 0), or a task of the parallel one (``rows.run_parallel``)."""
    run_serial(*job_arrays(job, like, weights_like), job[_TASK], job[_BLOCKS])
    return 0


@kernel(inline=True)
def _parallel(job, like, weights_like):
    run_parallel(*job_arrays(job, like, weights_like), job[_BLOCKS], job[_TASKS])
    return 0


@kernel(inline=True)
def _part(job, like, weights_like):
    """A worker of a split row (``split.split_jobs``)."""
    X, h0, lengths, state_rows, att, y, ho, weights, call, clip, work, iwork = job_arrays(job, like, weights_like)
    split_part(X, h0, lengths, state_rows, att, y, ho, weights, call, y.dtype.type(clip), work, iwork, job[_TASK])
    return 0


@kernel(inline=True)
def _split(job, like, weights_like):
    run_split(*job_arrays(job, like, weights_like), job[_TASKS])
    return 0


@kernel(inline=True)
def _pair(job, like, weights_like):
    """run_pair's answer: 1 when the partner took worker 1."""
    mailbox = carray(pointer_to(job[_MAILBOX], job), (MAILBOX_SIZE,))
    return run_pair(*job_arrays(job, like, weights_like), mailbox, job[_WORKER], job[_TASKS])


@kernel(inline=True)
def _direct_part(job, like):
    """A worker of a shared direct call (``direct.direct_jobs``: W in the weights, R and B apart)."""
    _, _, lengths, _, att, y, ho, weights, call, clip, work, iwork = job_arrays(job, like, like)
    c = read_call(call)
    W = weights.reshape((1, 3 * c.n_hidden, c.n_inputs))
    R = carray(pointer_to(job[_R], like), (1, 3 * c.n_hidden, c.n_hidden))
    B = carray(pointer_to(job[_B], like), (1, job[_B + 1]))
    direct_part(lengths, att, y, ho, W, R, B, call, y.dtype.type(clip), work, iwork, job[_TASK])
    return 0


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


def _part_f32(job):
    return _part(carray(job, (JOB_SIZE,)), F32, F32)


def _part_f64(job):
    return _part(carray(job, (JOB_SIZE,)), F64, F64)


def _part_bf16(job):
    return _part(carray(job, (JOB_SIZE,)), F32, BF16)


def _part_i8(job):
    return _part(carray(job, (JOB_SIZE,)), F32, I8)


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


def _direct_part_f32(job):
    return _direct_part(carray(job, (JOB_SIZE,)), F32)


def _direct_part_f64(job):
    return _direct_part(carray(job, (JOB_SIZE,)), F64)


_JOBS = Callbacks(
    {
        (path, key): function
        for path, functions in (
            ("serial", (_serial_f32, _serial_f64, _serial_bf16, _serial_i8)),
            ("parallel", (_parallel_f32, _parallel_f64, _parallel_bf16, _parallel_i8)),
            ("part", (_part_f32, _part_f64, _part_bf16, _part_i8)),
            ("split", (_split_f32, _split_f64, _split_bf16, _split_i8)),
            ("pair", (_pair_f32, _pair_f64, _pair_bf16, _pair_i8)),
        )
        for key, function in zip("fdHb", functions)
    }
    | {("direct_part", "f"): _direct_part_f32, ("direct_part", "d"): _direct_part_f64},
    threads={(path, key) for path in ("parallel", "split") for key in "fdHb"},
)


def job_callback(path, weights):
    """The address of a C callback that runs the driver of ``path`` (``_paths.PATHS``, whose 'serial'
    also runs the parallel driver's tasks; 'part': a worker of a split row; 'direct_part': one of a
    shared direct call, float weights only) on a job whose weights are ``weights``
    (their element type's): compiled (or loaded from the cache) once per process, and a function of
    its own, so that the kernels that call it (``run_planned``, ``stack.run_stack``, the parallel,
    split and pair drivers) do not each compile a copy of the driver."""
    return _JOBS.address((path, weights_key(weights)))


#: The kind of callback that runs one task of each path's driver: a block of the parallel
#: driver's rows ('serial' runs it), a worker of a split row ('part'). The serial driver has none.
TASKS = {"parallel": "serial", "split": "part", "pair": "part"}


def task_callback(path, weights):
    """The address of the callback that runs a task of ``path``'s driver (``TASKS``) on a job whose
    weights are ``weights``, or 0 when the path has no tasks."""
    kind = TASKS.get(path)
    return 0 if kind is None else job_callback(kind, weights)


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
