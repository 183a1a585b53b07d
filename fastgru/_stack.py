"""Stacks: prepared GRUSequence ops run one after another, the Y of each the X of the next, in one
kernel call per request (a plan of the stack, ``_plan.py``, with a job per layer).

A stack keeps no weights of its own: its layers' packed weights, call descriptors and drivers are
its ops', and a layer of a stack takes the path (``_paths.choose``) a call of its op of that shape
would. What the stack adds is the plumbing between the layers, which its plans make once per call
shape (``layer_calls``): the strides that write a layer's Y as the next layer's (N, S, D·H) input
into one of two buffers used in turn, and the place of each layer's states in one array.

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

import numpy as np

from . import _paths, _scratch
from ._dispatch import NO_ROWS, canonical_strides, compute_dtype
from ._ops import GRUSequence
from ._plan import StreamSteps, plan_of, run_planned
from ._validate import (
    FastGRUError,
    check_lengths,
    check_out_array,
    check_stack_layers,
    check_stack_state,
    fits,
    record,
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
        #: Each thread's (n, s, Y's shape, ``record``) of a call that passed the checks, and the plan
        #: (``_plan.Plan``) its next calls take without checks, by X's shape (as a prepared op's).
        self._seen, self._planned = threading.local(), threading.local()
        #: What a StatePool takes of an op's packed weights (``run``, ``result_shapes``,
        #: ``compute_dtype``, ``n_hidden``, ``_no_att``): a stack is its own.
        self._packed = self
        self.n_hidden = last.hidden_size
        self._no_att = np.zeros((0, 0), self.compute_dtype)
        #: What a plan (``_plan.Plan``) asks of its runner: the layers' packed weights, where each
        #: layer's states start in a row of the stack's, and each thread's plans by call shape.
        self.packs = tuple(op._packed for op in layers)
        self.offsets = tuple(self._offsets)
        self.plans = threading.local()
        self.direct = False

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
        planned, shape = self._planned.__dict__, getattr(X, "shape", None)
        plan = planned.get(shape)
        if plan is not None:
            results = plan(X, initial_hidden_state, sequence_lengths, None, out)
            if results is not None:
                return results
        given = X, initial_hidden_state, sequence_lengths
        seen = self._seen.__dict__.get(shape)
        if seen is None or not fits(seen[3], X, initial_hidden_state, sequence_lengths, *_pair(out)):
            seen = self._check(X, initial_hidden_state, sequence_lengths, out)
            X, initial_hidden_state = np.asarray(X), np.asarray(initial_hidden_state)
            if sequence_lengths is not None:
                sequence_lengths = np.asarray(sequence_lengths)
        elif sequence_lengths is not None:
            check_lengths(self.spec.op, sequence_lengths, seen[1])
        n, s, y_shape, _ = seen
        if not self._native:
            return self._by_layers(X, initial_hidden_state, sequence_lengths, out)
        ct = self.compute_dtype
        y, ho = (np.empty(y_shape, ct), np.empty((n, self.state_size), ct)) if out is None else out
        self.run(n, s, (X, initial_hidden_state, sequence_lengths, NO_ROWS, None, y, ho))
        if len(planned) >= 16:
            planned.clear()
        planned[X.shape] = self._plan_of(*given, out)
        return y, ho

    def _plan_of(self, X, h0, lengths, out):
        """The plan a call that passed the checks ran on, for its next calls of X's shape (``plan_of``)."""
        plan = plan_of(self, (X, h0, *(out or ())), lengths, False)
        if plan is not None:
            y, ho = out or (np.empty(shape, self.compute_dtype) for shape in plan.results)
            plan.expect(plan.complete((X, h0, lengths, NO_ROWS, None, y, ho)))
        return plan

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
        given = None if lengths is None else np.asarray(lengths)
        seen[X.shape] = n, s, y_shape, record(X, h0, given, *_pair(out))
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
        forces one of ``_paths.PATHS`` on every layer, or "wave" (the layers as a wavefront with the
        partner thread). Returns the path each layer ran."""
        X, h0, lengths, state_rows, _, y, ho = arrays
        ct = self.compute_dtype
        if not (X.dtype is ct and X.flags.carray):
            X = _scratch.converted("X", X, ct)
        if not (h0.dtype is ct and h0.flags.carray):
            h0 = _scratch.converted("h0", h0, ct)
        if path == "wave" and self.wave_bytes(n, s) is None:
            raise ValueError("GRUStack.run: this call cannot run as a wavefront (one row, steps > 1, forward layers)")
        return run_planned(self, (X, h0, lengths, state_rows, None, y, ho), n, s, None, int(keep), path)

    # ------------------------------------------------------------------ what a plan asks of its runner

    def layer_calls(self, n, s, strides, keep):
        """Each layer's call descriptor as a function of ``hoist`` (``_plan.Plan``): a layer before the
        last writes its Y with strides that make it the (N, S, D·H) X of the next, and each reads and
        writes its part of the stack's states."""
        widths = [op.spec.num_directions * op.hidden_size for op in self.layers]
        calls = []
        for k, packed in enumerate(self.packs):
            layout = canonical_strides(packed.n_dirs, s, packed.n_inputs, packed.n_hidden)
            layout.update(s_row=self.state_size, s_dir=packed.n_hidden)
            if k > 0:
                layout.update(x_row=s * widths[k - 1], x_step=widths[k - 1])
            if k < len(self.packs) - 1:
                layout.update(y_row=s * widths[k], y_dir=packed.n_hidden, y_step=widths[k])
            calls.append(functools.partial(packed.call, n, s, strides=tuple(layout.items()), keep=keep))
        return calls

    def wave_bytes(self, n, s):
        """(cut, bytes) of a wavefront of a call of N rows and S steps (``_paths.wave_cut``), or None
        when the call cannot run as one (not one row of more than one step, a layer not forward,
        float16 or bfloat16)."""
        if n != 1 or s < 2 or len(self.layers) < 2 or not self._native:
            return None
        if any(op.spec.direction != "forward" for op in self.layers):
            return None
        return _paths.wave_cut([packed.weights.nbytes for packed in self.packs])


def _pair(out):
    """``out`` as the pair (Y, Ho) that ``fits`` compares: (None, None) for None, and for anything but a
    pair something that never fits (the checks then say what is wrong)."""
    if out is None:
        return None, None
    return out if type(out) is tuple and len(out) == 2 else (out, False)


class StackStream:
    """A stack of forward layers fed one chunk of steps at a time: ``stream = stack.stream(h0)``, then
    ``Y = stream(X)`` per chunk X (batch_size, steps, input_size), one kernel call each; ``stream.Ho``
    is every layer's state after the steps fed so far (batch_size, state_size).

    As :class:`Stream` for one op: the chunks' Y, concatenated along the time axis, and the last
    ``Ho`` are the bits one call of the stack on the whole sequence gives; between chunks the
    states stay in the compute dtype, in one array updated in place, and a row whose length has
    run out keeps its state. ``stream(X, out=Y)`` writes the chunk's Y into ``Y``.
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
        self._feed = StreamSteps(lengths, sequence_lengths is not None)
        self.steps = 0
        self._checked = None

    @property
    def Ho(self):
        """Every layer's state after the chunks fed so far, in T1 (zero for a row of length 0)."""
        return np.where(self._feed.started[:, None], self._state, 0).astype(self._stack.dtype)

    def __call__(self, X, *, out=None):
        """Feed the next chunk X (batch_size, steps, input_size); returns the last layer's Y of it,
        written into ``out`` when given (as :class:`Stream`'s: with X a C-contiguous array of the
        stack's dtype, a chunk then allocates no array)."""
        stack = self._stack
        X = np.asarray(X)
        if self._checked is None or not fits(self._checked, X, out):  # as a chunk that passed the checks?
            validate_call(stack.spec, {"X": X})
            if X.shape[0] != self._state.shape[0]:
                raise FastGRUError(
                    f"GRUStack stream: X has batch_size {X.shape[0]}; expected {self._state.shape[0]}, the "
                    "batch_size of the stream's initial_hidden_state"
                )
            if out is not None:
                check_out_array("GRUStack stream", out, stack.result_shapes(X.shape[0], X.shape[1])[0], stack.dtype)
            self._checked = record(X, out)
        n, s = X.shape[0], X.shape[1]
        y = np.empty(stack.result_shapes(n, s)[0], dtype=stack.compute_dtype) if out is None else out
        self._feed.run(stack, n, s, (X, self._state, self._feed.chunk(s), NO_ROWS, None, y, self._state))
        self.steps += s
        return y
