"""Stacks: prepared GRUSequence ops run one after another, the Y of each the X of the next, in one
kernel call per request (``_kernels/stack.py``).

A stack keeps no weights of its own: its layers' packed weights, call descriptors and drivers are
today's, and a layer of a stack takes the path (``_paths.choose``) a call of its op of that shape
would. What the stack adds is the plumbing between the layers, made once per call shape (a
``_Layout``): the strides that write a layer's Y as the next layer's (N, S, D·H) input into one of
two buffers used in turn, and the place of each layer's states in one array.

**States.** A stack's state is one array (N, ``state_size``), each row the layers' states one
after another, each layer's as its op's Ho row (D, H) flattened: for torch's stacks (every layer of
one size) that is (N, num_layers·D, H) reshaped. One array is what a stream of a stack carries
from frame to frame, and what a pool of stacks keeps per stream.

**Bits.** A stack gives the bits of its layers run one by one with their ops (the layer's Y, in
(N, S, D·H), as the next op's X). float16 and bfloat16 stacks run exactly that way, op after op,
since their ops round each Y to T1; the float32 and float64 ones in one kernel call.
"""

import functools
import threading
import time

import numpy as np

from . import _partner, _scratch, _tuning
from ._dispatch import NO_ROWS, canonical_strides, compute_dtype
from ._kernels.jobs import JOB, JOB_SIZE
from ._kernels.layout import CALL
from ._kernels.memory import LINE_BYTES, aligned
from ._kernels.pair import jobs_worker
from ._kernels.planned import job_callback
from ._kernels.stack import run_stack, run_stack_pair
from ._ops import GRUSequence
from ._paths import _plan, choose, with_partner
from ._threading import lease, requested
from ._validate import (
    FastGRUError,
    check_lengths,
    check_out_array,
    check_stack_layers,
    check_stack_state,
    validate_call,
)

_I64 = np.dtype(np.int64)


class GRUStack:
    """Prepared GRUSequence ops run as one stack: ``stack = fastgru.GRUStack([op1, op2, ...])``, then
    ``Y, Ho = stack(X, initial_hidden_state, sequence_lengths)``.

    Layer k + 1 takes layer k's Y, both directions of a step side by side (forward first), as its
    X: its input_size is layer k's num_directions·hidden_size. The layers may differ in anything
    else (hidden size, direction, activations, clip, linear_before_reset) but share one dtype.

    - ``X`` (batch_size, seq_length, input_size of the first layer); ``sequence_lengths`` as for
      GRUSequence, for every layer.
    - ``initial_hidden_state`` (batch_size, ``state_size``): each row the layers' initial states one
      after another, layer k's as its op's (num_directions, hidden_size) row flattened; for layers
      of one size, (batch_size, num_layers·num_directions, hidden_size) reshaped. ``states(Ho)``
      splits such an array into the layers' (batch_size, num_directions, hidden_size) views.
    - Returns ``Y`` of the last layer in its op's layout (batch_size, num_directions, seq_length,
      hidden_size), and ``Ho`` (batch_size, state_size), the layers' final states in the same
      order. ``out=`` takes a preallocated tuple (Y, Ho).

    The result is the bits of the layers run one by one with their ops, on every path and thread
    count; bad input gets the errors of the first layer (X, sequence_lengths), or of the stack
    (initial_hidden_state, out). The intermediate layers' outputs stay in the kernels' buffers.

    Examples
    --------
    >>> import numpy as np, fastgru
    >>> rng = np.random.default_rng(0)
    >>> layer = lambda i, h: fastgru.GRUSequence(rng.standard_normal((1, 3 * h, i)),
    ...                                          rng.standard_normal((1, 3 * h, h)), np.zeros((1, 3 * h)))
    >>> stack = fastgru.GRUStack([layer(3, 4), layer(4, 4)])
    >>> Y, Ho = stack(rng.standard_normal((2, 5, 3)), np.zeros((2, stack.state_size)), [5, 2])
    >>> Y.shape, Ho.shape, [h.shape for h in stack.states(Ho)]
    ((2, 1, 5, 4), (2, 8), [(2, 1, 4), (2, 1, 4)])
    """

    def __init__(self, layers):
        layers = tuple(layers)
        check_stack_layers(layers, GRUSequence)
        self.layers = layers
        first, last = layers[0].spec, layers[-1].spec
        self.spec = first  # what checks X and sequence_lengths: the errors of the first layer
        self.dtype = first.dtype
        self.input_size = first.input_size
        self.compute_dtype = compute_dtype(first.dtype)
        widths = [op.spec.num_directions * op.spec.hidden_size for op in layers]
        #: Elements of one row's states, every layer's.
        self.state_size = sum(widths)
        self._offsets = np.cumsum([0, *widths])[:-1].tolist()
        self._last = last
        self._native = first.dtype == self.compute_dtype
        #: Each thread's (n, s, Y's shape) of a call shape that passed the checks, by X's shape.
        self._seen = threading.local()
        #: Each thread's _Layouts by call shape: their jobs point to the thread's scratch, and
        #: run_stack writes the call's arrays into them.
        self._layouts = threading.local()
        #: What a StatePool takes of an op's packed weights (``run``, ``result_shapes``,
        #: ``compute_dtype``, ``n_hidden``, ``_no_att``): a stack is its own.
        self._packed = self
        self.n_hidden = last.hidden_size
        self._no_att = np.zeros((0, 0), self.compute_dtype)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def __repr__(self):
        sizes = ", ".join(f"{op.hidden_size}{'x2' if op.spec.num_directions == 2 else ''}" for op in self.layers)
        return (
            f"GRUStack(num_layers={self.num_layers}, input_size={self.input_size}, hidden_sizes=[{sizes}], "
            f"state_size={self.state_size}, dtype={self.dtype.name})"
        )

    def states(self, Ho):
        """The layers' states in ``Ho`` (N, state_size): a list of (N, num_directions, hidden_size) views."""
        Ho = np.asarray(Ho)
        check_stack_state("GRUStack.states", "Ho", Ho, (Ho.shape[0] if Ho.ndim else 0, self.state_size), self.dtype)
        return [
            Ho[:, at : at + op.spec.num_directions * op.hidden_size].reshape(-1, op.spec.num_directions, op.hidden_size)
            for at, op in zip(self._offsets, self.layers)
        ]

    def __call__(self, X, initial_hidden_state, sequence_lengths, *, out=None):
        seen = self._seen.__dict__.get(getattr(X, "shape", None))
        if seen is None or not _fits(seen, self.dtype, X, initial_hidden_state, sequence_lengths, out):
            seen = self._check(X, initial_hidden_state, sequence_lengths, out)
            X, initial_hidden_state = np.asarray(X), np.asarray(initial_hidden_state)
            if sequence_lengths is not None:
                sequence_lengths = np.asarray(sequence_lengths)
        elif sequence_lengths is not None:
            check_lengths(self.spec.op, sequence_lengths, seen[1])
        n, s, y_shape = seen
        if not self._native:
            return self._by_layers(X, initial_hidden_state, sequence_lengths, out)
        ct = self.compute_dtype
        y, ho = (np.empty(y_shape, ct), np.empty((n, self.state_size), ct)) if out is None else out
        self.run(n, s, (X, initial_hidden_state, sequence_lengths, NO_ROWS, None, y, ho))
        return y, ho

    def result_shapes(self, n, s):
        """(Y, Ho) shapes of a call of N rows and S steps."""
        return (n, self._last.num_directions, s, self._last.hidden_size), (n, self.state_size)

    def _check(self, X, h0, lengths, out):
        """The full checks of a call; returns (n, s, Y's shape) and remembers them for X's shape."""
        X, h0 = np.asarray(X), np.asarray(h0)
        arrays = {"X": X} if lengths is None else {"X": X, "sequence_lengths": np.asarray(lengths)}
        validate_call(self.spec, arrays)
        n, s = X.shape[0], X.shape[1]
        check_stack_state("GRUStack", "initial_hidden_state", h0, (n, self.state_size), self.dtype)
        y_shape = (n, self._last.num_directions, s, self._last.hidden_size)
        if out is not None:
            if type(out) is not tuple or len(out) != 2:
                raise FastGRUError(f"GRUStack: out is {type(out).__name__}; expected a tuple (Y, Ho) of ndarrays")
            check_out_array("GRUStack", out[0], y_shape, self.dtype, "out Y")
            check_out_array("GRUStack", out[1], (n, self.state_size), self.dtype, "out Ho")
        seen = self._seen.__dict__
        if len(seen) >= 16:
            seen.clear()
        seen[X.shape] = n, s, y_shape
        return seen[X.shape]

    def _by_layers(self, X, h0, lengths, out):
        """The layers run one by one with their ops (float16 and bfloat16 stacks; the bits a stack gives)."""
        n, s = X.shape[0], X.shape[1]
        ho = np.empty((n, self.state_size), self.dtype) if out is None else out[1]
        for op, at in zip(self.layers, self._offsets):
            d, h = op.spec.num_directions, op.hidden_size
            y, ho_k = op(X, np.ascontiguousarray(h0[:, at : at + d * h]).reshape(n, d, h), lengths)
            ho[:, at : at + d * h] = ho_k.reshape(n, d * h)
            X = y.transpose(0, 2, 1, 3).reshape(n, s, d * h)
        if out is not None:
            np.copyto(out[0], y)
            return out
        return y, ho

    def stream(self, initial_hidden_state, sequence_lengths=None):
        """A :class:`StackStream` that takes a long sequence chunk by chunk (every layer forward):
        ``initial_hidden_state`` (batch_size, state_size), ``sequence_lengths`` those of the whole
        sequence (default: unbounded)."""
        return StackStream(self, initial_hidden_state, sequence_lengths)

    # ---------------------------------------------------------------------------------- the kernel call

    def run(self, n, s, arrays, strides=None, keep=False, path=None):
        """The kernel call on checked ``arrays`` (X, h0, lengths, state_rows, att, y, ho) of N rows and
        S steps, as ``Packed.run`` takes them (att unused, strides the canonical ones): X in any T1
        layout (converted here), h0 and ho (N, state_size) or a pool's states with ``state_rows``, y
        the last layer's Y; ``keep``: a row of length 0 keeps its state (streams, pools); ``path``
        forces one of ``_paths.PATHS`` on every layer, or "wave" (``_wavefront``). Returns the path each layer ran."""
        X, h0, lengths, state_rows, _, y, ho = arrays
        ct = self.compute_dtype
        if not (X.dtype is ct and X.flags.carray):
            X = _scratch.converted("X", X, ct)
        if not (h0.dtype is ct and h0.flags.carray):
            h0 = _scratch.converted("h0", h0, ct)
        if h0.ndim != 2:  # a pool's states (capacity, 1, state_size)
            h0, ho = h0.reshape(h0.shape[0], self.state_size), ho.reshape(ho.shape[0], self.state_size)
        layout = self._layout(n, s, int(keep))
        lengths = layout.full if lengths is None else _scratch.lengths(lengths, n, s)
        arrays = (X, h0, lengths, state_rows, y, ho)
        if path == "wave":
            if layout.cut is None:
                raise ValueError(
                    "GRUStack.run: this call cannot run as a wavefront (one row, steps > 1, forward layers)"
                )
            return ("wave" if self._wavefront(layout, arrays, True) else "serial",) * len(self.layers)
        if path is None and layout.wave is not None and requested() > 1:
            return self._raced(layout, arrays)
        return self._on_paths(layout, arrays, path)

    def _raced(self, layout, arrays):
        """A call that can run as a wavefront: as one, or on its layers' own paths, as ``layout.race``
        says, which is told how long the call took, unless the way found no second thread (a
        partner asleep after a pause, say) and the call ran on one: the time of neither way."""
        wave = layout.race.wave()
        start = time.perf_counter_ns()
        took = self._wavefront(layout, arrays, False) if wave else None
        if took is None:
            ran = self._on_paths(layout, arrays, None)
            if wave or ran != layout.paths:
                return ran
        else:
            ran = ("wave" if took else "serial",) * len(self.layers)
        layout.race.record(wave, time.perf_counter_ns() - start)
        return ran

    def _on_paths(self, layout, arrays, path):
        """The layers on their own paths (``layout.paths``), or all on ``path``."""
        X, h0, lengths, state_rows, y, ho = arrays
        if path is None and (layout.serial or requested() == 1):  # every layer on this thread: the short way
            run_stack(X, h0, lengths, state_rows, y, ho, layout.serial_jobs)
            return ("serial",) * len(self.layers)
        paths = layout.paths if path is None else (path,) * len(self.layers)
        forced = path is not None
        if "parallel" in paths or "split" in paths:
            _partner.PARTNER.nap()  # a parallel region needs the cores the partner would spin on
            with lease(requested()) as granted:
                ways, jobs = layout.ways(paths, granted, None, forced)
                run_stack(X, h0, lengths, state_rows, y, ho, jobs)
        elif "pair" in paths:
            with with_partner(layout.flops >= _tuning.PAIR_WAKE_FLOPS, forced) as mailbox:
                ways, jobs = layout.ways(paths, 1, mailbox, forced)  # 1: no layer here runs Numba's threads
                run_stack(X, h0, lengths, state_rows, y, ho, jobs)
        else:
            ways, jobs = layout.ways(paths, 1, None, forced)
            run_stack(X, h0, lengths, state_rows, y, ho, jobs)
        return tuple(way[0] for way in ways)

    def _wavefront(self, layout, arrays, forced):
        """The layers as a wavefront with the partner thread (``_kernels/stack.py``), when the call can
        have it and a second thread; ``forced``: with this thread's own mailbox otherwise, which
        nobody serves (this thread then runs every layer). Returns None if it did not run, else
        whether the partner took its layers."""
        with with_partner(layout.flops >= _tuning.PAIR_WAKE_FLOPS, forced) as mailbox:
            if mailbox is None:
                return None
            jobs, progress = layout.wave_jobs(mailbox)
            return bool(run_stack_pair(*arrays, jobs, layout.cut, progress, mailbox, jobs_worker()))

    def _layout(self, n, s, keep):
        layouts = self._layouts.__dict__
        key = n, s, keep, _tuning.GENERATION
        layout = layouts.get(key)
        if layout is None:
            if len(layouts) >= 16:
                layouts.clear()
            layout = layouts[key] = _Layout(self, n, s, keep)
        return layout


def _fits(seen, dtype, X, h0, lengths, out):
    """Plain comparisons for a call like one that passed the checks on this thread (X's shape is the
    key); False means: run the checks, which accept the call or say what is wrong."""
    n, _, y_shape = seen
    try:
        if X.dtype is not dtype or h0.dtype is not dtype or h0.shape[0] != n or h0.ndim != 2:
            return False
        if lengths is not None and (lengths.dtype.kind not in "iu" or lengths.shape != (n,)):
            return False
        return out is None or (
            type(out) is tuple
            and len(out) == 2
            and type(out[0]) is np.ndarray
            and out[0].shape == y_shape
            and out[0].dtype is dtype
            and out[0].flags.carray
            and type(out[1]) is np.ndarray
            and out[1].shape == h0.shape
            and out[1].dtype is dtype
            and out[1].flags.carray
        )
    except AttributeError:  # not an array: the checks say what it is
        return False


def _effective(paths, granted, mailbox, forced):
    """(path, threads, mailbox) of each layer when the call got ``granted`` threads and the partner's
    ``mailbox`` (None: no partner), as ``_paths.run`` decides for one op: threads for the parallel
    driver's blocks, the mailbox for the pair driver's, else 0 and None."""
    result = []
    for path in paths:
        if path in ("parallel", "split") and granted == 1 and not forced:
            path = "serial"
        elif path == "pair" and mailbox is None:
            path = "serial"
        result.append((path, granted if path == "parallel" else 0, mailbox if path == "pair" else None))
    return tuple(result)


class _Layout:
    """A stack's plumbing for calls of N rows and S steps: each layer's strides and path, the
    buffers between layers, and the jobs of each way the layers can run (``ways``)."""

    def __init__(self, stack, n, s, keep):
        self.stack, self.n, self.s, self.keep = stack, n, s, keep
        layers, ct = stack.layers, stack.compute_dtype
        widths = [op.spec.num_directions * op.hidden_size for op in layers]
        between = max(widths[:-1], default=0) * n * s
        #: The two buffers the layers' Y and X alternate between.
        self.buffers = [aligned(between, ct), aligned(between, ct)] if len(layers) > 1 else []
        self.strides, self.paths, self.flops = [], [], 0
        for k, op in enumerate(layers):
            packed = op._packed
            d, h = packed.n_dirs, packed.n_hidden
            strides = canonical_strides(d, s, packed.n_inputs, h)
            strides.update(s_row=stack.state_size, s_dir=h)
            if k > 0:
                strides.update(x_row=s * widths[k - 1], x_step=widths[k - 1])
            if k < len(layers) - 1:
                strides.update(y_row=s * widths[k], y_dir=h, y_step=widths[k])
            self.strides.append(tuple(strides.items()))
            flops = packed.flops(n, s)
            self.paths.append(choose(n, s, d, h, flops))
            self.flops = max(self.flops, flops)
        self.paths = tuple(self.paths)
        self._ways = {}
        #: sequence_lengths of every step of every row.
        self.full = np.full(n, s, dtype=_I64)
        #: Whether every layer runs on the calling thread whatever the call gets.
        self.serial = set(self.paths) == {"serial"}
        #: The first of the partner's layers in a wavefront (None: this call shape cannot run as
        #: one), and whether fastgru may take it (each part within one core's L2) or not (None).
        self.cut, part = _wave_cut(stack, n, s)
        self.wave = self.cut if part <= _tuning.WAVE_MAX_BYTES else None
        #: Which of the two, the wavefront or the layers' paths, a call that may take the wavefront takes.
        self.race = _Race()

    @functools.cached_property
    def serial_jobs(self):
        """The jobs of every layer on the calling thread (made when a call first needs them: their
        scratch may be large for a batch that never runs on one thread)."""
        return self.ways(("serial",) * len(self.stack.layers), 1, None, False)[1]

    def ways(self, paths, granted, mailbox, forced):
        """(``_effective``'s ways, their jobs (L, JOB_SIZE)) of a call that got ``granted`` threads and
        ``mailbox``: made once each, the jobs kept with every array they point to."""
        key = paths, granted, None if mailbox is None else id(mailbox), forced
        found = self._ways.get(key)
        if found is None:
            ways = _effective(paths, granted, mailbox, forced)
            jobs, kept = self._make(ways)
            found = self._ways[key] = ways, jobs, kept
        return found[:2]

    def wave_jobs(self, mailbox):
        """(jobs, progress) of the wavefront with ``mailbox``: made once each (``_make``)."""
        key = "wave", id(mailbox)
        found = self._ways.get(key)
        if found is None:
            jobs, kept = self._make((("serial", 0, None),) * len(self.stack.layers), self.cut)
            found = self._ways[key] = jobs, kept[-1], kept
        return found[:2]

    def _make(self, ways, wave=None):
        """(jobs, every array they point to) of ``ways``; with ``wave`` (every way serial), the jobs of
        a wavefront cut before layer ``wave``: each part with scratch of its own, layer wave - 1
        posting its steps to a counter (the last array kept) and layer ``wave`` waiting for them."""
        stack, n, s = self.stack, self.n, self.s
        ct = stack.compute_dtype
        plans = []
        for op, strides, (path, granted, _) in zip(stack.layers, self.strides, ways):
            packed = op._packed
            if path == "serial":
                rows, tasks = n, 1
            elif path == "parallel":
                blocks = min(n, -(-granted // packed.n_dirs))
                rows, tasks = -(-n // blocks), packed.n_dirs * blocks
            else:
                rows, tasks = 0, 2
            plans.append(_plan(packed, n, s, strides, self.keep, rows, tasks) + (tasks // packed.n_dirs,))
        last = len(stack.layers) - 1
        if wave is None:
            scratch = [_scratch.work(max(p[1] for p in plans), max(p[2] for p in plans), ct)] * (last + 1)
        else:  # the parts run at once: scratch of their own
            scratch = []
            for part in (plans[:wave], plans[wave:]):
                floats, ints = max(p[1] for p in part), max(p[2] for p in part)
                scratch += [(aligned(floats, ct), aligned(ints, _I64))] * len(part)
            progress = aligned(LINE_BYTES // 8, _I64, zero=True)  # a line of its own
            plans = [list(p) for p in plans]
            for k, field in ((wave - 1, "post"), (wave, "wait")):
                plans[k][0] = call = plans[k][0].copy()  # the op's descriptor is shared: a copy
                call[CALL[field]] = progress.ctypes.data
        jobs = np.zeros((len(stack.layers), JOB_SIZE), dtype=_I64)
        kept = []  # every array the jobs point to, alive as long as they are
        for k, (op, (path, _, mailbox), (call, _, _, blocks)) in enumerate(zip(stack.layers, ways, plans)):
            packed = op._packed
            job = jobs[k]
            work, iwork = scratch[k]
            fixed = {"weights": packed.weights, "call": call, "work": work, "iwork": iwork, "att": packed._no_att}
            if k > 0:
                fixed["X"] = self.buffers[(k - 1) % 2]
            if k < last:
                fixed["y"] = self.buffers[k % 2]
            for name, array in fixed.items():
                job[JOB[name]], job[JOB[name] + 1] = array.ctypes.data, array.size
            kept += list(fixed.values())
            job[JOB["steps"]] = s
            job.view(np.float64)[JOB["clip"]] = packed.clip
            job[JOB["callback"]] = job_callback(path, packed.weights)
            job[JOB["blocks"]] = blocks if path == "parallel" else 0  # 0: run_serial's whole call
            job[JOB["tasks"]] = packed.tasks(path)
            if mailbox is not None:
                job[JOB["mailbox"]] = mailbox.ctypes.data
                job[JOB["worker"]] = jobs_worker()
                kept.append(mailbox)
            job[JOB["state_offset"]] = stack._offsets[k]
        if wave is not None:
            kept.append(progress)
        return jobs, kept


class _Race:
    """Whether a call that may run as a wavefront (``_Layout.wave``) runs as one or on its layers' own
    paths, for the calls of one shape on one thread. They run the current way, the wavefront at
    first; the other way has a **trial** of ``TRIAL`` calls in a row after ``_tuning.WAVE_RETRY``
    calls of the current one, after twice as many each time it loses (up to ``WAVE_RETRY_MAX``),
    and at once when the current way's time grows past ``COLLAPSE`` times the other's. A trial wins,
    and its way becomes the current one, when the median of its times beats the current way's by
    ``MARGIN``. A way's time is the median of its last ``TRIAL`` calls: one slow call does not move
    it, and a trial's first call, which finds the weights in the other way's caches, does not
    decide it. The first call of each way makes its jobs: its time is left out.

    The partner thread shares the second core with whatever else the process runs (another
    runtime's spinning workers, say), and a wavefront, which cannot take back the layers it gave
    the partner, is the way that loses most when that core is busy ("Tuning: a layer
    wavefront"). ``WAVE_RETRY = 0``: always the wavefront."""

    TRIAL, COLLAPSE, MARGIN = 3, 1.25, 0.97

    def __init__(self):
        self.current = True
        self.runs = {True: 0, False: 0}
        self.times = {True: [], False: []}  # ns of each way's last TRIAL calls
        self.every, self.left = _tuning.WAVE_RETRY, self.TRIAL  # the first trial soon
        self.trial = 0  # calls of the other way's trial still to run

    def time(self, wave):
        """The median of the way's last times, or None."""
        times = sorted(self.times[wave])
        return times[(len(times) - 1) // 2] if times else None

    def wave(self):
        """Whether this call runs as a wavefront."""
        if not _tuning.WAVE_RETRY:
            return True
        return self.current != (self.trial > 0)

    def record(self, wave, ns):
        """A call's time: ``wave``, whether it ran as a wavefront."""
        self.runs[wave] += 1
        if self.runs[wave] > 1:
            self.times[wave] = [*self.times[wave][1 - self.TRIAL :], ns]
        if self.trial:
            self.trial -= 1
            if not self.trial:
                self._judge()
            return
        self.left -= 1
        ours, theirs = self.time(self.current), self.time(not self.current)
        if self.left <= 0 or (ours is not None and theirs is not None and ours > self.COLLAPSE * theirs):
            self.trial = self.TRIAL

    def _judge(self):
        ours, theirs = self.time(self.current), self.time(not self.current)
        if theirs is not None and (ours is None or theirs < self.MARGIN * ours):
            self.current, self.every = not self.current, _tuning.WAVE_RETRY
        else:
            self.every = min(2 * self.every, _tuning.WAVE_RETRY_MAX)
        self.left = self.every


def _wave_cut(stack, n, s):
    """(cut, bytes) of a wavefront of a call of N rows and S steps: where it cuts the layers (the first
    layer of the partner's part, chosen to balance the parts' packed weights) and the larger part's
    packed weights, which fastgru compares with one core's L2 (``_tuning.WAVE_MAX_BYTES``: beyond
    it, the split of each row, whose halves fit, is faster); (None, 0) when the call cannot run as
    one (not one row of more than one step, a layer not forward, float16 or bfloat16)."""
    layers = stack.layers
    if n != 1 or s < 2 or len(layers) < 2 or not stack._native:
        return None, 0
    if any(op.spec.direction != "forward" for op in layers):
        return None, 0
    sizes = [op._packed.weights.nbytes for op in layers]
    parts = {cut: max(sum(sizes[:cut]), sum(sizes[cut:])) for cut in range(1, len(layers))}
    cut = min(parts, key=parts.get)
    return cut, parts[cut]


class StackStream:
    """A stack of forward layers fed one chunk of steps at a time: ``stream = stack.stream(h0)``, then
    ``Y = stream(X)`` per chunk X (batch_size, steps, input_size), one kernel call each; ``stream.Ho``
    is every layer's state after the steps fed so far (batch_size, state_size).

    As :class:`Stream` for one op: the chunks' Y, concatenated along the time axis, and the last
    ``Ho`` are the bits one call of the stack on the whole sequence gives; between chunks the
    states stay in the compute dtype, in one array updated in place, and a row whose length has
    run out keeps its state.
    """

    def __init__(self, stack, initial_hidden_state, sequence_lengths=None):
        for k, op in enumerate(stack.layers):
            if op.spec.direction != "forward":
                raise FastGRUError(
                    f"GRUStack.stream: layer {k}'s direction is {op.spec.direction!r}; only stacks of "
                    "'forward' layers can be streamed (a reverse pass starts at the last step): call the "
                    "stack on the whole sequence"
                )
        if not stack._native:
            raise TypeError(
                f"GRUStack.stream: the stack's dtype is {stack.dtype.name}; streams of stacks take float32 "
                "or float64 (a float16 or bfloat16 stack rounds each layer's Y to T1: run it whole)"
            )
        h0 = np.asarray(initial_hidden_state)
        n = h0.shape[0] if h0.ndim else 0
        check_stack_state("GRUStack.stream", "initial_hidden_state", h0, (n, stack.state_size), stack.dtype)
        lengths = np.full(n, np.iinfo(np.int64).max) if sequence_lengths is None else np.asarray(sequence_lengths)
        first = stack.spec  # the lengths get the first layer's checks, with its part of the states
        first_h0 = h0[:, : first.num_directions * first.hidden_size].reshape(n, *first.state_shape)
        validate_call(first, {"initial_hidden_state": first_h0, "sequence_lengths": lengths})
        self._stack = stack
        self._state = np.array(h0, dtype=stack.compute_dtype, order="C")
        self._remaining = lengths.astype(np.int64)
        self._started = self._remaining > 0
        self.steps = 0
        self._checked = None

    @property
    def Ho(self):
        """Every layer's state after the chunks fed so far, in T1 (zero for a row of length 0)."""
        return np.where(self._started[:, None], self._state, 0).astype(self._stack.dtype)

    def __call__(self, X):
        """Feed the next chunk X (batch_size, steps, input_size); returns the last layer's Y of it."""
        stack = self._stack
        X = np.asarray(X)
        if not (X.shape == self._checked and X.dtype is stack.dtype):
            validate_call(stack.spec, {"X": X})
            if X.shape[0] != self._state.shape[0]:
                raise FastGRUError(
                    f"GRUStack stream: X has batch_size {X.shape[0]}; expected {self._state.shape[0]}, the "
                    "batch_size of the stream's initial_hidden_state"
                )
            self._checked = X.shape
        n, s = X.shape[0], X.shape[1]
        chunk = np.clip(self._remaining, 0, s)
        last = stack._last
        y = np.empty((n, last.num_directions, s, last.hidden_size), dtype=stack.compute_dtype)
        stack.run(n, s, (X, self._state, chunk, NO_ROWS, None, y, self._state), keep=True)
        self._remaining -= chunk
        self.steps += s
        return y
