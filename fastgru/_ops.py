"""Prepared ops: weights validated and packed once, called per request (like a compiled model).

A prepared op keeps its weights in the kernels' layout. A call of an X shape not seen before on
its thread checks the per-request inputs, on a path of plain comparisons that falls back to the
full checks of ``_validate.validate_call`` (and their messages) when anything differs from what
the op expects, and leaves a plan (``_plan.py``) that the next calls of that shape take.
"""

import threading

import numpy as np

from ._dispatch import NO_ROWS, Packed
from ._plan import StreamSteps
from ._validate import (
    DEFAULT,
    Attributes,
    FastGRUError,
    augru_layout,
    check_lengths,
    check_out,
    check_out_array,
    fits,
    record,
    validate,
    validate_call,
)


class Described:
    """``hidden_size``, ``input_size``, ``dtype`` and the repr of an op from its checked ``spec``
    (the prepared ops here, and the ops of ``fastgru.dask``)."""

    spec = None  # a _validate.Spec

    @property
    def hidden_size(self) -> int:
        return self.spec.hidden_size

    @property
    def input_size(self) -> int:
        return self.spec.input_size

    @property
    def dtype(self) -> np.dtype:
        return self.spec.dtype

    def __repr__(self):
        spec = self.spec
        return (
            f"{type(self).__name__}(hidden_size={spec.hidden_size}, input_size={spec.input_size}, "
            f"direction={spec.direction!r}, linear_before_reset={spec.linear_before_reset}, "
            f"dtype={spec.dtype.name}{self._weights_repr()})"
        )

    def _weights_repr(self):
        return ""


class _Prepared(Described):
    """Shared per-call logic; subclasses name their inputs."""

    def __init__(self, op, layout, weights, attributes, weight_dtype=None):
        weights = {name: np.asarray(a) for name, a in weights.items()}
        self.spec = spec = validate(op, layout, weights, attributes)
        self._packed = Packed(spec, weights["W"], weights["R"], weights.get("B"), weight_dtype)
        #: Each thread's plans (``_plan.py``), and the calls that passed the checks (``record``), by X's shape.
        self._plans, self._seen = threading.local(), threading.local()

    @property
    def weight_dtype(self) -> str:
        """What W and R are stored and read as: the compute dtype's name ('float32', 'float64'), or
        'bfloat16', 'int8' or 'bfloat16x3' when the op was built with ``weight_dtype=``."""
        return self._packed.weight_dtype

    @property
    def weight_bytes(self) -> int:
        """Bytes of the op's packed weights (W, R and the bias, in the kernels' layout)."""
        return self._packed.weights.nbytes

    def _weights_repr(self):
        packed = self._packed
        if packed.weight_dtype == packed.compute_dtype.name:
            return ""
        return f", weight_dtype={packed.weight_dtype!r}, weights {_kib(packed.weights.nbytes)} ({packed.savings()})"

    def _call(self, X, initial_hidden_state, sequence_lengths=None, A=None, out=None):
        plans = self._plans.__dict__
        plan = plans.get(getattr(X, "shape", None))
        if plan is not None:
            results = plan(X, initial_hidden_state, sequence_lengths, A, out)
            if results is not None:
                return results[0] if len(results) == 1 else results
        spec = self.spec
        given = X, initial_hidden_state, sequence_lengths, A
        X, h0 = np.asarray(X), np.asarray(initial_hidden_state)
        if sequence_lengths is not None:
            sequence_lengths = np.asarray(sequence_lengths)
        if A is not None:
            A = np.asarray(A)
        seen = self._seen.__dict__
        known = seen.get(X.shape)
        if known is None or not fits(known, X, h0, sequence_lengths, A):
            arrays = {"X": X, "initial_hidden_state": h0, "sequence_lengths": sequence_lengths, "A": A}
            validate_call(spec, {name: a for name, a in arrays.items() if a is not None})
            if len(seen) >= 16:
                seen.clear()
            seen[X.shape] = record(X, h0, sequence_lengths, A)
        elif sequence_lengths is not None:
            check_lengths(spec.op, sequence_lengths, X.shape[1])
        if out is not None:
            out = check_out(spec, out, self._packed.result_shapes(X.shape[0], X.shape[1] if X.ndim == 3 else 1))
        results = self._packed.compute(X, h0, sequence_lengths, A, out)
        if len(plans) >= 16:
            plans.clear()
        plans[X.shape] = self._packed.plan_of(*given, out)  # the next calls of this shape take it
        return results[0] if len(results) == 1 else results


def _kib(n_bytes):
    return f"{n_bytes / 1024:,.1f} KiB"


class _Sequence(_Prepared):
    """What the sequence ops add: streams."""

    def stream(self, initial_hidden_state, sequence_lengths=None):
        """A :class:`Stream` that takes a long sequence chunk by chunk (forward direction only):
        ``stream(X)`` per chunk, ``stream(X, A)`` for AUGRUSequence.

        ``sequence_lengths`` are those of the whole sequence (default: unbounded, every step of
        every chunk is valid). See :class:`Stream`.
        """
        return Stream(self, initial_hidden_state, sequence_lengths)


class GRUCell(_Prepared):
    """A prepared GRUCell-3: ``cell = GRUCell(W, R, B)``, then ``Ho = cell(X, initial_hidden_state)``.

    Weights and attributes are those of :func:`fastgru.gru_cell`; ``out=`` takes a preallocated
    Ho (batch_size, hidden_size) of the weights' dtype, which may be initial_hidden_state itself.
    ``weight_dtype='bfloat16'`` or ``'int8'`` stores W and R in 2 or 1 bytes per weight, read and
    computed in float32 (float32, float16 or bfloat16 ops; docs/semantics.md, "Compact weights":
    the error bounds); the default, None, keeps them exact. ``weight_dtype='bfloat16x3'`` keeps
    them exact too, and on a CPU with matrix tiles (Intel AMX) multiplies calls of 16 rows or more
    as three bfloat16 products, near float32 (docs/semantics.md, "Matrix tiles").

    Examples
    --------
    >>> import numpy as np, fastgru
    >>> rng = np.random.default_rng(0)
    >>> cell = fastgru.GRUCell(rng.standard_normal((12, 3)), rng.standard_normal((12, 4)))
    >>> h = np.zeros((2, 4))
    >>> for x in rng.standard_normal((5, 2, 3)):
    ...     _ = cell(x, h, out=h)
    >>> h.shape
    (2, 4)
    """

    def __init__(
        self,
        W,
        R,
        B=None,
        *,
        hidden_size=DEFAULT.hidden_size,
        activations=DEFAULT.activations,
        activations_alpha=DEFAULT.activations_alpha,
        activations_beta=DEFAULT.activations_beta,
        clip=DEFAULT.clip,
        linear_before_reset=DEFAULT.linear_before_reset,
        weight_dtype=None,
    ):
        weights = {"W": W, "R": R} if B is None else {"W": W, "R": R, "B": B}
        super().__init__(
            "GRUCell",
            "cell",
            weights,
            Attributes(
                hidden_size, "forward", activations, activations_alpha, activations_beta, clip, linear_before_reset
            ),
            weight_dtype,
        )

    def __call__(self, X, initial_hidden_state, *, out=None):
        return self._call(X, initial_hidden_state, out=out)


class GRUSequence(_Sequence):
    """A prepared GRUSequence-5: ``op = GRUSequence(W, R, B, ...)``, then
    ``Y, Ho = op(X, initial_hidden_state, sequence_lengths)``.

    Weights and attributes are those of :func:`fastgru.gru_sequence`; ``out=`` takes a
    preallocated tuple (Y, Ho) of the weights' dtype.
    ``weight_dtype`` as :class:`GRUCell`'s.

    Examples
    --------
    >>> import numpy as np, fastgru
    >>> rng = np.random.default_rng(0)
    >>> op = fastgru.GRUSequence(rng.standard_normal((1, 12, 3)), rng.standard_normal((1, 12, 4)),
    ...                          np.zeros((1, 12)))
    >>> Y, Ho = op(rng.standard_normal((2, 5, 3)), np.zeros((2, 1, 4)), [5, 2])
    >>> Y.shape, Ho.shape
    ((2, 1, 5, 4), (2, 1, 4))
    """

    def __init__(
        self,
        W,
        R,
        B,
        *,
        hidden_size=DEFAULT.hidden_size,
        direction=DEFAULT.direction,
        activations=DEFAULT.activations,
        activations_alpha=DEFAULT.activations_alpha,
        activations_beta=DEFAULT.activations_beta,
        clip=DEFAULT.clip,
        linear_before_reset=DEFAULT.linear_before_reset,
        weight_dtype=None,
    ):
        super().__init__(
            "GRUSequence",
            "sequence",
            {"W": W, "R": R, "B": B},
            Attributes(
                hidden_size, direction, activations, activations_alpha, activations_beta, clip, linear_before_reset
            ),
            weight_dtype,
        )

    def __call__(self, X, initial_hidden_state, sequence_lengths, *, out=None):
        return self._call(X, initial_hidden_state, sequence_lengths, out=out)


class AUGRUSequence(_Sequence):
    """A prepared AUGRUSequence-10: ``op = AUGRUSequence(W, R, B)``, then
    ``Y, Ho = op(X, initial_hidden_state, sequence_lengths, A)``.

    The rank of W picks the layout, as initial_hidden_state does for :func:`fastgru.augru_sequence`:
    W (3*hidden_size, input_size) for the documented one, (1, 3*hidden_size, input_size) for OpenVINO's.
    ``weight_dtype`` as :class:`GRUCell`'s.

    Examples
    --------
    >>> import numpy as np, fastgru
    >>> rng = np.random.default_rng(0)
    >>> op = fastgru.AUGRUSequence(rng.standard_normal((12, 3)), rng.standard_normal((12, 4)), np.zeros(12))
    >>> Y, Ho = op(rng.standard_normal((2, 5, 3)), np.zeros((2, 4)), [5, 2], rng.uniform(size=(2, 5, 1)))
    >>> Y.shape, Ho.shape
    ((2, 5, 4), (2, 4))
    """

    def __init__(self, W, R, B, *, hidden_size=DEFAULT.hidden_size, weight_dtype=None):
        W = np.asarray(W)
        layout = augru_layout("AUGRUSequence", "W", W)
        super().__init__("AUGRUSequence", layout, {"W": W, "R": R, "B": B}, Attributes(hidden_size), weight_dtype)

    def __call__(self, X, initial_hidden_state, sequence_lengths, A, *, out=None):
        return self._call(X, initial_hidden_state, sequence_lengths, A, out=out)


class Stream:
    """A forward GRUSequence (or AUGRUSequence) fed one chunk of steps at a time.

    ``stream = op.stream(initial_hidden_state, sequence_lengths)``, then ``Y = stream(X)`` for
    each chunk X (batch_size, steps, input_size) of the sequence in order (``stream(X, A)`` for
    AUGRU); ``stream.Ho`` is the state after the steps fed so far. The chunks' Y, concatenated
    along the time axis, and the last ``Ho`` are the bits one call on the whole sequence gives.
    ``stream(X, out=Y)`` writes the chunk's Y into ``Y`` (of its shape and T1, C-contiguous and
    writeable) and returns it: with X (and A) C-contiguous arrays of the compute dtype, a chunk then
    allocates no array (a frame-by-frame loop).

    Between chunks the state stays in the compute dtype (float32 for float16 and bfloat16), as it
    does between the steps of one call, and a row whose length has run out keeps its state:
    passing each chunk's Ho to the next call of the op instead would zero it (docs/semantics.md, "Sequences": Ho is
    zero for a row with no step) and round it to T1 at every chunk.
    """

    def __init__(self, op, initial_hidden_state, sequence_lengths=None):
        spec = op.spec
        if spec.direction != "forward":
            raise FastGRUError(
                f"{spec.op}.stream: direction is {spec.direction!r}; only 'forward' can be streamed "
                "(a reverse pass starts at the last step): call the op on the whole sequence"
            )
        h0 = np.asarray(initial_hidden_state)
        n = h0.shape[0] if h0.ndim else 0
        lengths = np.full(n, np.iinfo(np.int64).max) if sequence_lengths is None else np.asarray(sequence_lengths)
        validate_call(spec, {"initial_hidden_state": h0, "sequence_lengths": lengths})
        packed = op._packed
        self._op, self._packed = op, packed
        self._state = np.array(h0, dtype=packed.compute_dtype).reshape(n, 1, spec.hidden_size)
        # rows with a step: the others' Ho is zero (docs/semantics.md, "Sequences")
        self._feed = StreamSteps(lengths, sequence_lengths is not None)
        self._y = None  # the compute dtype's Y of chunks written into an ``out`` of another T1
        self.steps = 0
        self._checked = None  # the last chunk that passed the checks (``record``)

    @property
    def Ho(self):
        """The state after the chunks fed so far, in T1 and the op's layout (zero for a row of length 0)."""
        spec = self._op.spec
        state = np.where(self._feed.started[:, None, None], self._state, 0).astype(spec.dtype)
        return state.reshape(self._packed.result_shapes(state.shape[0], 0)[-1])

    def __call__(self, X, A=None, *, out=None):
        """Feed the next chunk X (batch_size, steps, input_size); returns its Y, in T1 and the op's
        layout (written into ``out`` when given)."""
        spec, packed = self._op.spec, self._packed
        X = np.asarray(X)
        arrays = {"X": X} if A is None else {"X": X, "A": np.asarray(A)}
        A = arrays.get("A")
        if (A is None) == (spec.op == "AUGRUSequence"):
            raise FastGRUError(
                f"{spec.op} stream: A is {'missing' if A is None else 'given'}; expected "
                f"{'stream(X, A)' if A is None else 'stream(X): only AUGRUSequence takes A'}"
            )
        if self._checked is None or not fits(self._checked, X, A, out):  # as a chunk that passed the checks?
            validate_call(spec, arrays)
            if X.shape[0] != self._state.shape[0]:
                raise FastGRUError(
                    f"{spec.op} stream: X has batch_size {X.shape[0]}; expected {self._state.shape[0]}, the "
                    "batch_size of the stream's initial_hidden_state"
                )
            if out is not None:
                check_out_array(f"{spec.op} stream", out, packed.result_shapes(X.shape[0], X.shape[1])[0], spec.dtype)
            self._checked = record(X, A, out)
        n, s = X.shape[0], X.shape[1]
        ct, shape = packed.compute_dtype, (n, 1, s, spec.hidden_size)
        if out is None:
            y = np.empty(shape, dtype=ct)
        elif spec.dtype is ct:
            y = out.reshape(shape)  # a view: the kernels write the caller's array
        else:  # computed in float32, rounded into out
            if self._y is None or self._y.shape != shape:
                self._y = np.empty(shape, dtype=ct)
            y = self._y
        att = packed._no_att if A is None else np.ascontiguousarray(A, dtype=ct).reshape(n, s)
        X = np.ascontiguousarray(X, dtype=ct)
        self._feed.run(packed, n, s, (X, self._state, self._feed.chunk(s), NO_ROWS, att, y, self._state))
        self.steps += s
        if out is None:
            return y.astype(spec.dtype, copy=False).reshape(packed.result_shapes(n, s)[0])
        if y is self._y:
            np.copyto(out.reshape(shape), y, casting="unsafe")
        return out
