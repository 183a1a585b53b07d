"""A plan: a call of one shape on one thread, seen before, made ready for the kernels once.

Every call reaches the kernels through a plan: a prepared op's, the function API's, a stream's, a
state pool's step, a stack's, fastgru.torch's. A plan keeps the road ``_paths.road`` chose for its
call shape, each layer's call descriptor, and the **jobs** (``_kernels/jobs.py``) of each way the
road can take at run time (the threads granted, the partner thread or not, a wavefront), made
when a call first takes that way, with every array they point to: the packed weights, the
descriptors, the scratch, the buffers between a stack's layers, the int64 lengths. A call then
hands its changing arrays and the way's jobs to the one compiled entry (``_kernels/entry.py``),
which compares their shapes with the plan's, copies the lengths in and runs each job's driver.

A call that took no checks (a prepared op's call of a shape seen before, whose arrays are ones the
kernels take as they are: the op's dtype, C-contiguous, aligned, writeable) goes through the
entry compiled for exactly the types of the call that made the plan (``entry.entry``): another
type raises TypeError, another shape or a length outside [0, S] returns -1, and the caller then
runs the full checks, which say what is wrong. A plan serves one thread: its jobs point to that
thread's scratch, and the entry writes the call's arrays into them.
"""

from collections import namedtuple

import numba
import numpy as np

from . import _paths, _scratch, _tuning
from ._kernels.direct import direct_scratch
from ._kernels.drivers import callback, task_callback
from ._kernels.entry import entry
from ._kernels.jobs import JOB, JOB_SIZE
from ._kernels.layout import CALL, rows_scratch, split_scratch
from ._kernels.memory import LINE_BYTES, aligned
from ._kernels.pair import jobs_worker
from ._tuning import CHUNK_ROWS  # compiled into the kernels: not a path choice

_I64 = np.dtype(np.int64)
#: The kernels' state_rows when batch row b has state row b.
NO_ROWS = np.zeros(0, dtype=_I64)
#: The sequence lengths' dtypes that a call without checks passes as they are.
LENGTH_DTYPES = (np.dtype(np.int32), _I64)


#: One layer of a way: its call descriptor, the floats and ints of its scratch, the parallel
#: driver's blocks (0: none), its driver (``_kernels/drivers.py``) and the partner's mailbox or None.
Layer = namedtuple("Layer", "call floats ints blocks kind mailbox")


class Way:
    """The jobs (L, JOB_SIZE) of one way a plan's call runs, each layer's path as it runs, and every
    array the jobs point to (kept alive with them)."""

    __slots__ = ("jobs", "paths", "kept")

    def __init__(self, jobs, paths, kept):
        self.jobs, self.paths, self.kept = jobs, paths, kept


class Plan:
    """The plan of calls of one shape through ``runner`` (a ``_dispatch.Packed``, an ``Unpacked``
    template of direct calls, or a ``GRUStack``), on one thread: see the module. ``arrays`` are the
    first call's, as the entry takes them (X, h0, lengths, state_rows, att, y, ho, and a direct
    call's W, R, B): their shapes are the plan's. ``strides``: the layout of X, Y and the states
    (``_dispatch.canonical_strides``'s names; None: the op's); ``keep``: a row of length 0 keeps its
    state (streams, pools); ``path``: forced (``_paths.PATHS``, or 'wave')."""

    __slots__ = ("runner", "n", "s", "keep", "generation", "road", "race", "calls", "lengths", "full", "rows")
    __slots__ += ("shapes", "buffers", "ways", "static", "large", "signature", "entry", "dtype", "results")
    __slots__ += ("no_att", "no_bias", "cell", "shared")

    def __init__(self, runner, arrays, n, s, strides=None, keep=0, path=None):
        self.runner, self.n, self.s, self.keep = runner, n, s, keep
        self.no_att = runner._no_att
        self.generation = _tuning.GENERATION
        layers = runner.packs
        self.road = _paths.road(layers, n, s, path, runner.direct, runner.wave_bytes(n, s))
        self.race = _paths.Race() if self.road.race else None
        #: What its calls take of the partner thread and the budget (``_paths.shared_for``), or None.
        self.shared = _paths.shared_for(self.road)
        #: Each layer's call descriptor as a function of (rows per task, a wavefront's wait/post).
        self.calls = runner.layer_calls(n, s, strides, keep)
        #: The int64 lengths the drivers read (the entry copies each call's in); a call without
        #: lengths passes ``full``: every step.
        self.lengths = np.ones(n, dtype=_I64)
        self.full = np.full(n, s, dtype=_I64)
        #: The state rows the drivers read: none, or a state pool's step's, copied in at each call.
        self.rows = NO_ROWS if runner.direct or arrays[3].size == 0 else np.zeros(n, dtype=_I64)
        arrays = self.complete(arrays)
        self.shapes = [a.shape for a in arrays]
        widths = [p.n_dirs * p.n_hidden for p in layers]
        between = max(widths[:-1], default=0) * n * s
        #: The two buffers a stack's layers' Y and X alternate between.
        self.buffers = [aligned(between, runner.compute_dtype) for _ in range(2 if len(layers) > 1 else 0)]
        self.ways = {}
        #: The one Way of a road that takes nothing at run time (every layer serial), once made.
        self.static = None
        #: Whether a way's scratch was too large to keep (``_tuning.KEEP_SCRATCH_BYTES``): the plan
        #: then serves its call only.
        self.large = False
        self.signature, self.entry = None, None
        self.expect(arrays)
        #: What a call that took no checks needs beside: the results' dtype and shapes ((Ho,) for a
        #: cell, else (Y, Ho)), no attention, an absent B's zeros (a direct call's).
        self.dtype, self.results = runner.compute_dtype, runner.result_shapes(n, s)
        self.cell, self.no_bias = len(self.results) == 1, getattr(runner, "no_bias", None)

    # ------------------------------------------------------------------------------- calls

    def complete(self, arrays):
        """The entry's arrays (X, h0, lengths, att, y, ho; a direct call's, then W, R, B) of a call's
        ``arrays`` as ``Plan`` takes them: the plan's lengths of every step for lengths None, no
        attention for att None, and the state rows of a pool's step copied into the plan's."""
        if self.runner.direct:
            X, h0, lengths, att, y, ho, W, R, B = arrays
            weights = W, R, B
        else:
            X, h0, lengths, rows, att, y, ho = arrays
            weights = ()
            if rows.size:
                self.rows[:] = rows
        lengths = self.full if lengths is None else lengths
        return X, h0, lengths, self.no_att if att is None else att, y, ho, *weights

    def run(self, arrays):
        """Run a call (the entry's arrays: ``complete``'s) through the entry compiled for the plan's
        types; returns each layer's path as it ran (``_paths.run``), or None
        when a type, a shape or a length is not the plan's (nothing was written)."""
        try:
            return _paths.run(self, arrays, self.entry)
        except TypeError:  # another type than the plan's
            return None

    def __call__(self, X, h0, lengths, A, out):
        """The results of a prepared op's call that took no checks (``out`` as the op takes it), or
        None when anything is not the plan's and nothing was written: the caller then runs the full
        checks."""
        if self.generation != _tuning.GENERATION:  # a plan of another tuning or partner
            return None
        if out is None:
            results = tuple([np.empty(shape, self.dtype) for shape in self.results])
        elif self.cell:  # a cell's out is its Ho
            if type(out) is tuple:
                return None
            results = (out,)
        elif type(out) is tuple and len(out) == 2:
            results = out
        else:
            return None
        lengths = self.full if lengths is None else lengths
        att, y, ho = self.no_att if A is None else A, results[0], results[-1]
        way = self.static
        try:
            if way is not None:  # the one way of its road: straight to the entry (Python is most of a small call)
                return results if self.entry(X, h0, lengths, att, y, ho, way.jobs) >= 0 else None
            return None if _paths.run(self, (X, h0, lengths, att, y, ho), self.entry) is None else results
        except TypeError:  # another type than the plan's
            return None

    def direct(self, X, h0, lengths, W, R, B, A):
        """The results of a function API's direct call that took no checks, or None (as ``__call__``)."""
        if self.generation != _tuning.GENERATION:
            return None
        results = tuple([np.empty(shape, self.dtype) for shape in self.results])
        lengths = self.full if lengths is None else lengths
        B = self.no_bias if B is None else B
        att, y, ho = self.no_att if A is None else A, results[0], results[-1]
        way = self.static
        try:
            if way is not None:
                return results if self.entry(X, h0, lengths, att, y, ho, W, R, B, way.jobs) >= 0 else None
            return None if _paths.run(self, (X, h0, lengths, att, y, ho, W, R, B), self.entry) is None else results
        except TypeError:  # another type than the plan's
            return None

    def expect(self, arrays):
        """Take the types of ``arrays`` (completed, as ``run`` takes them) as the plan's: a call of other
        types gets None from ``run``."""
        signature = numba.int64(*[numba.typeof(a) for a in arrays], numba.typeof(np.zeros((1, JOB_SIZE), _I64)))
        if signature != self.signature:  # compiled (or loaded from the cache) now, once per process
            self.signature, self.entry = signature, entry(signature, self.runner.direct)

    # ------------------------------------------------------------------------------- ways

    def way(self, granted, mailbox):
        """The Way of a call that got ``granted`` threads and the partner's ``mailbox`` (None: none),
        made once each, kept under the granted threads (a road of parallel regions) or the mailbox's
        id (a pair road; None without it)."""
        key = (None if mailbox is None else id(mailbox)) if self.road.needs == "partner" else granted
        found = self.ways.get(key)
        if found is None:
            forced = self.road.forced is not None
            found = self.ways[key] = self._make(_paths.effective(self.road.paths, granted, mailbox, forced))
        return found

    def wave(self, mailbox):
        """The Way of the wavefront with ``mailbox``, made once."""
        key = "wave", id(mailbox)
        found = self.ways.get(key)
        if found is None:
            serial = (("serial", 0, None),) * len(self.road.paths)
            found = self.ways[key] = self._make(serial, mailbox)
        return found

    def _make(self, ways, wave_mailbox=None):
        """The Way of ``ways`` (each layer's path, threads, mailbox; ``_paths.effective``), or, with
        ``wave_mailbox``, of the wavefront cut at ``road.cut`` with that mailbox: each part with
        scratch of its own, the layer before the cut posting its steps to a counter that the layer
        at the cut waits for."""
        layers = [self._layer(k, *way) for k, way in enumerate(ways)]
        kept = []
        if wave_mailbox is None:
            scratch = [self._scratch(layers, kept)] * len(layers)
        else:  # the parts run at once: scratch of their own
            cut = self.road.cut
            parts = self._scratch(layers[:cut], kept, True), self._scratch(layers[cut:], kept, True)
            scratch = [parts[0]] * cut + [parts[1]] * (len(layers) - cut)
            progress = aligned(LINE_BYTES // 8, _I64, zero=True)  # a line of its own
            kept.append(progress)
            layers[cut - 1].call[CALL["post"]] = layers[cut].call[CALL["wait"]] = progress.ctypes.data
            layers[0] = layers[0]._replace(mailbox=wave_mailbox)
        jobs = np.zeros((len(layers), JOB_SIZE), dtype=_I64)
        for k, (layer, (work, iwork)) in enumerate(zip(layers, scratch)):
            write_job(jobs[k], self, k, layer, work, iwork, kept)
        if wave_mailbox is not None:
            jobs[0, JOB["cut"]], jobs[0, JOB["progress"]] = cut, progress.ctypes.data
        for k, shape in enumerate(self.shapes):
            jobs[0, JOB["shapes"] + 4 * k : JOB["shapes"] + 4 * k + len(shape)] = shape
        if wave_mailbox is not None:
            paths = ("wave",) * len(layers)
        else:  # the direct road's drivers are named for it
            paths = tuple(layer.kind if self.road.direct else path for layer, (path, _, _) in zip(layers, ways))
        return Way(jobs, paths, kept)

    def _layer(self, k, path, granted, mailbox):
        """The Layer of layer k on ``path`` with ``granted`` threads and ``mailbox``."""
        packed = self.runner.packs[k]
        n, s, itemsize = self.n, self.s, self.runner.compute_dtype.itemsize
        i, h = packed.n_inputs, packed.n_hidden
        if self.road.direct:
            floats = direct_scratch(i, h, itemsize).end
            ints = _paths.direct_ints_of(i, h, itemsize) if path == "pair" else 0
            return Layer(self.calls[k](0), floats, ints, 0, "direct_pair" if path == "pair" else "direct", mailbox)
        if path in ("split", "pair"):
            o, io = split_scratch(s, i, h, itemsize, CHUNK_ROWS)
            return Layer(self.calls[k](0), o.end, io.end + 2 * JOB_SIZE, 0, path, mailbox)
        if path == "parallel":
            blocks = max(1, min(n, -(-granted // packed.n_dirs)))  # a call of no rows: one block of none
            rows, tasks = -(-n // blocks), packed.n_dirs * blocks
        else:
            blocks, rows, tasks = 0, n, 1
        hoist = _paths.hoists(rows, s, h, itemsize)
        o, io = rows_scratch(rows, s, i, h, int(hoist), itemsize, CHUNK_ROWS)  # an int, as the kernels pass it
        ints = (io.end + JOB_SIZE) * tasks  # each task's job first (the parallel driver's)
        return Layer(self.calls[k](hoist), o.end * tasks, ints, blocks, path, mailbox)

    def _scratch(self, layers, kept, own=False):
        """The float and int64 scratch of ``layers`` (Layers), which run one after another: the
        thread's kept buffers (too large to keep: the call's own), or, ``own``, the plan's."""
        floats, ints = max(layer.floats for layer in layers), max(layer.ints for layer in layers)
        if own:
            work, iwork = aligned(floats, self.runner.compute_dtype), aligned(ints, _I64)
        else:
            work, iwork = _scratch.work(floats, ints, self.runner.compute_dtype)
        self.large |= work.nbytes > _tuning.KEEP_SCRATCH_BYTES or iwork.nbytes > _tuning.KEEP_SCRATCH_BYTES
        kept += [work, iwork]
        return work, iwork


def run_planned(runner, arrays, n, s, strides=None, keep=0, path=None):
    """Run a checked call of N rows and S steps through ``runner``'s plan of its shape on this thread
    (``Plan``'s arguments; lengths None: every step, att None: none), made on its first call, and
    made again when the tuning changed or another caller's arrays have other shapes or types for the
    same call shape (a pool's states, int32 lengths, say). Returns each layer's path as it ran."""
    plans = runner.plans.__dict__
    key = _key(n, s, strides, keep, path, not runner.direct and arrays[3].size > 0)
    plan = plans.get(key)
    if plan is None or plan.generation != _tuning.GENERATION:
        plan = _kept(plans, key, Plan(runner, arrays, n, s, strides, keep, path))
    ran = plan.run(plan.complete(arrays))
    if ran is None:  # the same call shape with arrays of other shapes or types: a plan of their own
        plan = _kept(plans, key, Plan(runner, arrays, n, s, strides, keep, path))
        ran = plan.run(plan.complete(arrays))
        if ran is None:
            raise RuntimeError(f"fastgru: a checked call did not fit its own plan ({runner!r}, {key})")
    if plan.large:  # its scratch is its call's only
        plans.pop(key, None)
    return ran


def plan_of(runner, arrays, lengths, cell):
    """The plan that a call of ``runner`` which passed the full checks ran on (``run_planned``'s, of
    X's rows and steps: one for a ``cell``), for its next calls of that shape, which take no checks
    (``Plan.__call__``, ``Plan.direct``), or None when the call's ``arrays`` (X first, then its other
    float arrays, None where absent) or ``lengths`` are not ones the kernels take as they are: not
    ndarrays (lists), or of another dtype or layout, which the checked call converted."""
    dt = runner.compute_dtype
    if not runner._native or numba.config.DISABLE_JIT:  # T1 computed in another dtype: converted
        return None
    if not all(a is None or (type(a) is np.ndarray and a.dtype is dt and a.flags.carray) for a in arrays):
        return None
    if lengths is not None and not (
        type(lengths) is np.ndarray and lengths.dtype in LENGTH_DTYPES and lengths.flags.carray
    ):
        return None
    X = arrays[0]
    return runner.plans.__dict__.get(_key(X.shape[0], 1 if cell else X.shape[1]))


def _key(n, s, strides=None, keep=0, path=None, rows=False):
    """The key of a plan among its runner's plans of this thread (``run_planned``): N rows, S steps,
    the layout (None: canonical), ``keep``, the path forced, and whether a pool's state rows come."""
    return n, s, strides, keep, path, rows


class StreamSteps:
    """What a stream (``_ops.Stream``, ``_stack.StackStream``) keeps between its chunks for the kernel
    call: each row's steps left (``remaining``; ``started``: the rows with a step) and the int64
    array of each row's steps of a chunk. Without sequence_lengths (``bounded`` False) every row
    runs every step: the array is refilled only when the chunk's number of steps changes and
    nothing is counted, so that a frame loop spends no NumPy call on them; the values are those
    ``remaining`` would give."""

    __slots__ = ("remaining", "started", "_chunk", "_steps", "_bounded")

    def __init__(self, lengths, bounded):
        self.remaining = lengths.astype(np.int64)
        self.started = self.remaining > 0
        self._chunk = np.zeros(len(lengths), np.int64)  # kept: a chunk allocates nothing
        self._steps, self._bounded = -1, bounded

    def chunk(self, s):
        """Each row's steps of the next chunk of ``s`` steps (the stream's lengths for the call)."""
        if self._bounded:
            return np.minimum(self.remaining, s, out=self._chunk)
        if s != self._steps:
            self._chunk.fill(s)
            self._steps = s
        return self._chunk

    def run(self, runner, n, s, arrays):
        """Run a checked chunk: ``arrays`` as ``runner.run`` takes them (X, h0, lengths, state_rows,
        att, y, ho) with ``chunk``'s lengths, through the calling thread's plan of a chunk of this
        shape when there is one and the chunk fits it (``Plan.__call__``: no checks), else
        ``runner.run``, which makes it; then the steps fed are counted."""
        X, h0, lengths, _, att, y, ho = arrays
        plan = runner.plans.__dict__.get(_key(n, s, keep=1))
        if plan is None or plan(X, h0, lengths, att, (y, ho)) is None:
            runner.run(n, s, arrays, keep=True)
        if self._bounded:
            self.remaining -= lengths


def _kept(plans, key, plan):
    """``plan``, kept under ``key`` (at most 64 plans, then afresh)."""
    if len(plans) >= 64:
        plans.clear()
    plans[key] = plan
    return plan


def write_job(job, plan, k, layer, work, iwork, kept):
    """Write the job of layer k of ``plan`` (``_kernels/jobs.py``): every array but the call's
    (which the entry writes), with ``work`` and ``iwork`` its scratch, and the Layer's driver,
    blocks and mailbox; every array it points to goes to ``kept``. The one place a job is written
    in Python."""
    runner, last = plan.runner, len(plan.runner.packs) - 1
    packed = runner.packs[k]
    fixed = {"call": layer.call, "work": work, "iwork": iwork, "lengths": plan.lengths, "state_rows": plan.rows}
    if packed.weights is not None:  # a direct call's W comes with each call
        fixed["weights"] = packed.weights
    if k > 0:  # a stack's layer reads the Y of the one before from the buffers they alternate between
        fixed["X"] = plan.buffers[(k - 1) % 2]
    if k < last:
        fixed["y"] = plan.buffers[k % 2]
    for name, array in fixed.items():
        job[JOB[name]], job[JOB[name] + 1] = array.ctypes.data, array.size
    kept += fixed.values()
    if layer.mailbox is not None:
        job[JOB["mailbox"]], job[JOB["worker"]] = layer.mailbox.ctypes.data, jobs_worker()
        kept.append(layer.mailbox)
    job[JOB["steps"]], job[JOB["blocks"]], job[JOB["state_offset"]] = plan.s, layer.blocks, runner.offsets[k]
    job.view(np.float64)[JOB["clip"]] = packed.clip
    tiled = layer.call[CALL["tile_call"]] != 0  # a call of an op with matrix tiles, of rows enough for them
    job[JOB["callback"]] = callback(layer.kind, packed.like, tiled)
    job[JOB["tasks"]] = task_callback(layer.kind, packed.like, tiled)
