"""Plans: the short path of a prepared op's call whose shapes, dtypes and layouts were seen before.

A call goes through the full checks (``_validate``) and conversions (``_dispatch``) the first time
its X shape comes on a thread. When its arrays are ones the kernels take as they are (the op's
dtype, which is the compute dtype, C-contiguous, aligned and writeable), it leaves a **plan** in
the calling thread: the types and shapes it was checked for, and everything the kernels need
beside the arrays (its kernel compiles, or loads from the cache, when a call first takes the plan:
a process that calls once compiles nothing for plans). A later call of the same X shape on the
thread goes straight to the kernel:

- a call that runs on the calling thread anyway (the small ones) is one call of ``run_planned``
  (``_kernels/planned.py``), compiled for exactly the plan's types: Numba's dispatcher, which
  looks at each argument's type on every call, is the check of the types (another type raises
  TypeError, not a compilation), and the kernel compares the shapes and the lengths' values
  before it writes anything;
- a one-row call that shares its row with the partner thread (the 'pair' path) is the same call
  of ``run_planned``, on a second job for the pair driver when it gets the partner and a second
  thread (the leases of ``_paths``), else on the serial one;
- the others compare shapes, dtypes and flags here, check the lengths' values, and call
  ``Packed.compute``.

A call that differs in anything gets the full checks, and their messages, as if there were no
plan, and leaves its own plan; a change of ``_tuning`` remakes the plans.
"""

import numba
import numpy as np

from . import _partner, _paths, _scratch, _tuning
from ._dispatch import LENGTH_DTYPES, NO_ROWS
from ._kernels.jobs import JOB, JOB_SIZE
from ._kernels.pair import jobs_worker
from ._kernels.planned import job_callback, planned
from ._validate import check_lengths


class Plan:
    """The short path of one op's calls of one shape on one thread (see the module's docstring)."""

    __slots__ = (
        "packed",
        "dtype",
        "generation",
        "cell",
        "shapes",
        "result_shapes",
        "s",
        "run",
        "job",
        "fixed",
        "lengths",
        "full",
        "no_att",
        "signature",
        "pair_job",
        "partner",
        "wake",
    )

    def __init__(self, packed, X, h0, lengths, A, results):
        n = X.shape[0]
        self.cell = packed.spec.layout == "cell"
        s = 1 if self.cell else X.shape[1]
        self.packed, self.dtype, self.generation, self.s = packed, packed.compute_dtype, _tuning.GENERATION, s
        self.result_shapes = packed.result_shapes(n, s)
        flops = packed.flops(n, s)
        d, h = packed.n_dirs, packed.n_hidden
        pairs = n * d == 1 and h >= _tuning.PAIR_FROM_HIDDEN and flops >= _tuning.PAIR_FROM_FLOPS
        path = _paths.choose(n, s, d, h, flops)
        self.pair_job, self.partner, self.wake = None, None, False
        # Planned: a call that runs serial whether the partner runs or not, and one on the pair path.
        if not (path == "pair" or path == "serial" and not pairs):
            self.run = self.job = self.fixed = self.lengths = self.full = self.no_att = self.signature = None
            self.shapes = tuple(None if a is None else a.shape for a in (X, h0, lengths, A))
            return
        self.lengths = np.ones(n, dtype=np.int64)  # the cell's; a sequence's, copied in by the kernel
        self.full = np.full(n, s, dtype=np.int64)  # a sequence's without sequence_lengths: every step
        self.no_att = packed._no_att
        #: The arrays the jobs point to, alive as long as the plan.
        self.fixed = {}
        changing = (X, h0, self.lengths if lengths is None else lengths, self.no_att if A is None else A)
        changing += (results[0], results[-1])  # y and ho: the cell's Ho is both
        self.job = self._job(packed, changing, n, 1)
        if path == "pair":
            self.partner = _partner.PARTNER  # a forked child has another, and its own mailbox
            self.pair_job = self._job(packed, changing, 0, 2)
            self.pair_job[JOB["mailbox"]] = self.partner.mailbox.ctypes.data
            self.pair_job[JOB["worker"]] = jobs_worker()
            self.pair_job[JOB["tasks"]] = packed.tasks("pair")
            self.wake = flops >= _tuning.PAIR_WAKE_FLOPS
        self.shapes, self.run = None, None
        self.signature = numba.int64(*[numba.typeof(a) for a in changing], numba.typeof(self.job))

    def _job(self, packed, changing, rows, tasks):
        """The job of ``_paths._plan``'s tasks of ``rows`` rows (0: a split row's two workers)."""
        n, s = changing[0].shape[0], self.s
        call, floats, ints = _paths._plan(packed, n, s, None, 0, rows, tasks)
        work, iwork = _scratch.work(floats, ints, self.dtype)
        fixed = {"weights": packed.weights, "call": call, "work": work, "iwork": iwork}
        fixed.update(state_rows=NO_ROWS, lengths=self.lengths)
        job = np.zeros(JOB_SIZE, dtype=np.int64)
        for name, array in fixed.items():
            job[JOB[name]], job[JOB[name] + 1] = array.ctypes.data, array.size
        job[JOB["steps"]] = s
        job.view(np.float64)[JOB["clip"]] = packed.clip
        for k, array in enumerate(changing):  # in the order of SHAPED
            job[JOB["shapes"] + 4 * k : JOB["shapes"] + 4 * k + array.ndim] = array.shape
        self.fixed[rows] = fixed
        return job

    def __call__(self, X, h0, lengths, A, out):
        """The results of a call that matches the plan, else None (nothing was written)."""
        if self.generation != _tuning.GENERATION:
            return None
        if self.job is None:
            return self._checked(X, h0, lengths, A, out)
        if out is None:
            results = tuple([np.empty(shape, self.dtype) for shape in self.result_shapes])
        elif self.cell:
            if type(out) is tuple:
                return None
            results = (out,)
        elif type(out) is tuple and len(out) == 2:
            results = out
        else:
            return None
        if lengths is None:
            lengths = self.lengths if self.cell else self.full
        if self.run is None:  # the first call that takes the plan compiles (or loads) its kernels
            self.job[JOB["callback"]] = job_callback("serial", self.packed.weights)
            if self.pair_job is not None:
                self.pair_job[JOB["callback"]] = job_callback("pair", self.packed.weights)
            self.run = planned(self.signature)
        A = self.no_att if A is None else A
        try:
            if self.pair_job is None:
                answer = self.run(X, h0, lengths, A, results[0], results[-1], self.job)
            else:  # as _paths._pair: the partner if it comes, and a second thread of the budget
                if self.partner is not _partner.PARTNER or not self.partner.enabled:
                    return None
                with _paths.with_partner(self.wake) as mailbox:
                    job = self.job if mailbox is None else self.pair_job
                    answer = self.run(X, h0, lengths, A, results[0], results[-1], job)
        except TypeError:  # another type than the plan's
            return None
        return None if answer < 0 else results

    def _checked(self, X, h0, lengths, A, out):
        """A call that shares its work: shapes, dtypes and flags compared here, then Packed.compute."""
        dt = self.dtype
        x_shape, h_shape, n_shape, a_shape = self.shapes
        try:
            if (
                X.shape != x_shape
                or X.dtype is not dt
                or not X.flags.carray
                or h0.shape != h_shape
                or h0.dtype is not dt
                or not h0.flags.carray
                or (lengths is None) != (n_shape is None)
                or (A is None) != (a_shape is None)
            ):
                return None
            if lengths is not None and (
                lengths.shape != n_shape or lengths.dtype not in LENGTH_DTYPES or not lengths.flags.c_contiguous
            ):
                return None
            if A is not None and (A.shape != a_shape or A.dtype is not dt or not A.flags.carray):
                return None
            if out is None:
                results = tuple([np.empty(shape, dt) for shape in self.result_shapes])
            else:
                results = (out,) if self.cell and type(out) is not tuple else out
                if type(results) is not tuple or len(results) != len(self.result_shapes):
                    return None
                for array, shape in zip(results, self.result_shapes):
                    if array.shape != shape or array.dtype is not dt or not array.flags.carray:
                        return None
        except AttributeError:  # not an array: the full checks say what it is
            return None
        if lengths is not None:
            check_lengths(self.packed.spec.op, lengths, self.s)
        return self.packed.compute(X, h0, lengths, A, results)


def plan_for(packed, X, h0, lengths, A, out):
    """A Plan for a call that passed the full checks (the caller's own arguments, and its checked
    outputs or None), or None when its arrays are not ones the kernels take as they are: not
    ndarrays (lists), or of another dtype or layout, which the full path converts."""
    dt = packed.compute_dtype
    if packed.spec.dtype is not dt or numba.config.DISABLE_JIT:
        return None
    arrays = [X, h0] + ([] if A is None else [A]) + ([] if out is None else list(out))
    if not all(type(a) is np.ndarray and a.dtype is dt and a.flags.carray for a in arrays):
        return None
    if lengths is not None and not (
        type(lengths) is np.ndarray and lengths.dtype in LENGTH_DTYPES and lengths.flags.carray and lengths.ndim == 1
    ):
        return None
    results = out if out is not None else tuple(np.empty(shape, dt) for shape in packed.result_shapes(*_ns(packed, X)))
    return Plan(packed, X, h0, lengths, A, results)


def _ns(packed, X):
    return X.shape[0], 1 if packed.spec.layout == "cell" else X.shape[1]
