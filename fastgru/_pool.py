"""A state pool: the states of many streams of one prepared op, advanced together in one kernel call.

A server that runs a GRU per live stream (keyword spotting, speech enhancement, session-based
recommendation) advances every stream that has new input in a tick. One call per stream streams
all of W and R for one row; one call for all of them shares each load of the weights among the
rows. The pool keeps one state matrix of ``capacity`` rows in the compute dtype, and a step passes
it to the kernels as both the initial and the final state with ``state_rows`` = the listed ids
(``_kernels/layout.py``): each listed stream reads and writes its own row in place, with no copy
of the states in or out.
"""

import heapq
import math
import threading

import numpy as np

from . import _scratch
from ._codes import CLOSED, IDLE
from ._kernels import marks
from ._kernels.memory import aligned
from ._ops import AUGRUSequence, GRUCell, GRUSequence
from ._stack import GRUStack
from ._validate import (
    check_batch,
    check_capacity,
    check_claim,
    check_ids,
    check_initial_state,
    check_lengths,
    check_out_array,
    check_pool_op,
    check_room,
    check_step_arguments,
    check_stream_id,
    check_stream_state,
    fits,
    record,
    validate_call,
)

_I64 = np.dtype(np.int64)


class StatePool:
    """The states of up to ``capacity`` streams of a prepared op, advanced together.

    ``pool = fastgru.StatePool(op, capacity)`` for a prepared :class:`GRUCell`, a forward
    :class:`GRUSequence` or an :class:`AUGRUSequence`; ``sid = pool.open()`` starts a stream,
    ``pool.step(ids, X)`` advances the listed streams in one kernel call, ``pool.close(sid)`` ends one.

    - **States.** Each stream's state stays in the compute dtype (float32 for float16, bfloat16
      and float32; float64) between steps, as in :class:`Stream`, and is read and written in place
      by the kernels. ``pool.state(sid)`` returns a copy in T1.
    - **Capacity** is fixed: opening a stream when ``capacity`` are open raises
      :class:`FastGRUError`; a closed stream's id is reused (the lowest free id first). The states
      take ``capacity * hidden_size`` elements of the compute dtype, allocated once.
    - **The guarantee.** Every stream gets the bits it would get alone: a step of a cell equals
      ``cell(x, h, out=h)`` on that stream's state (float32 and float64; the pool keeps float16 and
      bfloat16 states in float32), and a step of a sequence op equals the stream's next chunk of
      ``op.stream(state)``, whatever other streams share the step, on any kernel path and thread count.
    - **Errors.** Every input is checked before the kernels run: a failed call changes no state.
    - **Threads.** ``open``, ``close``, ``reset`` and ``state`` take the pool's lock. Steps may run
      from several threads at once when their ids are disjoint; a step whose ids another running
      step holds raises :class:`FastGRUError` (as do ``close``, ``reset`` and ``state`` of such a
      stream), so no two calls ever write one state at once.

    Examples
    --------
    >>> import numpy as np, fastgru
    >>> rng = np.random.default_rng(0)
    >>> cell = fastgru.GRUCell(rng.standard_normal((12, 3)), rng.standard_normal((12, 4)))
    >>> pool = fastgru.StatePool(cell, capacity=8)
    >>> a, b = pool.open(), pool.open(np.ones(4))
    >>> h = pool.step([b, a], rng.standard_normal((2, 3)))   # one step of b and a: their new states
    >>> h.shape, len(pool), np.array_equal(h[0], pool.state(b))
    ((2, 4), 2, True)
    """

    def __init__(self, op, capacity: int):
        spec = check_pool_op(op, (GRUCell, GRUSequence, AUGRUSequence, GRUStack))
        capacity = check_capacity(capacity)
        packed = op._packed  # a stack is its own: it runs like packed weights (``_stack.py``)
        ct = packed.compute_dtype
        self.op, self.capacity, self._spec, self._packed = op, capacity, spec, packed
        self._cell = spec.layout == "cell"
        self._augru = spec.op == "AUGRUSequence"
        self._x_rank = 2 if self._cell else 3
        self._native = spec.dtype == ct
        #: One stream's state as the op's Ho has it per row: (H,), or (1, H) for GRUSequence's layout.
        self.state_shape = packed.result_shapes(0, 0)[-1][1:]
        h = math.prod(self.state_shape)
        #: Every stream's state, row i for id i, as the kernels read and write it: (capacity, 1, H), or
        #: a stack's (capacity, 1, state_size).
        self._states = aligned(capacity * h, ct, zero=True).reshape(capacity, 1, h)
        #: Per id, CLOSED, IDLE or HELD (by a running step): read and written under the lock, one by
        #: one through the bytearray, by a step's claim and release through its NumPy view.
        self._marks = bytearray(capacity)
        self._mark_view = np.frombuffer(self._marks, dtype=np.uint8)
        self._free = list(range(capacity))  # a heap: the lowest free id first
        self._lock = threading.Lock()
        self._where = {name: f"{spec.op} pool.{name}" for name in ("open", "close", "reset", "state", "step")}
        self._ones = np.ones(capacity, dtype=_I64)  # a cell's lengths, kept: steps allocate nothing
        #: Per thread, by X's shape: (n, steps, result shape) of a step that passed the checks.
        self._seen = threading.local()

    # ------------------------------------------------------------------------------------ streams

    def open(self, initial_state=None) -> int:
        """Start a stream; returns its id, an int in [0, capacity).

        ``initial_state`` of ``state_shape`` ((hidden_size,), or (1, hidden_size) for GRUSequence
        and OpenVINO's AUGRU layout) and the op's dtype; None: zeros. Raises FastGRUError when
        ``capacity`` streams are open.
        """
        where = self._where["open"]
        state = self._checked_state(where, initial_state)
        with self._lock:
            check_room(where, len(self._free), self.capacity)
            stream_id = heapq.heappop(self._free)
            self._set(stream_id, state)
            self._marks[stream_id] = IDLE
        return stream_id

    def close(self, stream_id: int) -> None:
        """End stream ``stream_id``; its id may be returned by a later ``open``."""
        where = self._where["close"]
        stream_id = check_stream_id(where, stream_id, self.capacity)
        with self._lock:
            check_stream_state(where, self._marks[stream_id], stream_id)
            self._marks[stream_id] = CLOSED
            heapq.heappush(self._free, stream_id)

    def reset(self, stream_id: int, initial_state=None) -> None:
        """Set the state of open stream ``stream_id`` to ``initial_state`` (as ``open`` takes it; None: zeros)."""
        where = self._where["reset"]
        stream_id = check_stream_id(where, stream_id, self.capacity)
        state = self._checked_state(where, initial_state)
        with self._lock:
            check_stream_state(where, self._marks[stream_id], stream_id)
            self._set(stream_id, state)

    def state(self, stream_id: int) -> np.ndarray:
        """A copy of open stream ``stream_id``'s state, in T1, of ``state_shape``."""
        where = self._where["state"]
        stream_id = check_stream_id(where, stream_id, self.capacity)
        with self._lock:
            check_stream_state(where, self._marks[stream_id], stream_id)
            return self._states[stream_id].astype(self._spec.dtype).reshape(self.state_shape)

    def __len__(self) -> int:
        """The number of open streams."""
        return self.capacity - len(self._free)

    def __contains__(self, stream_id) -> bool:
        """Whether ``stream_id`` is the id of an open stream."""
        try:
            stream_id = check_stream_id("", stream_id, self.capacity)
        except (TypeError, ValueError):
            return False
        return self._marks[stream_id] != CLOSED

    def __repr__(self):
        return f"StatePool({self.op!r}, capacity={self.capacity}, open={len(self)})"

    # -------------------------------------------------------------------------------------- steps

    def step(self, ids, X, sequence_lengths=None, A=None, *, out=None) -> np.ndarray:
        """Advance the streams ``ids`` by X's steps, in one kernel call.

        Parameters
        ----------
        ids : array-like of shape (n,)
            Distinct ids of open streams, in any order; any integer dtype (int64 is used as is).
        X : ndarray of shape (n, input_size) for a cell, else (n, steps, input_size)
            Row k is the input of stream ``ids[k]``; the op's dtype.
        sequence_lengths : array-like of shape (n,), optional (sequence ops only)
            The steps of X each stream takes, in [0, steps]; default: every step. A stream of
            length 0 keeps its state (as in ``op.stream``; not zero as in the op's Ho).
        A : ndarray of shape (n, steps, 1), AUGRUSequence only
            Attention scores.
        out : ndarray, optional
            The result's array, of its shape and the op's dtype, C-contiguous; with it, a step
            allocates nothing (ids of other dtypes, and float16 or bfloat16 data, go through buffers
            each thread keeps).

        Returns
        -------
        ndarray
            For a cell, the listed streams' new states (n, hidden_size), as ``cell(X, h)`` returns
            them; for a sequence op, Y in the op's layout, (n, 1, steps, hidden_size) (AUGRU's
            2-D layout: (n, steps, hidden_size)), zero past each stream's length. In T1.

        Raises
        ------
        FastGRUError
            An id closed, repeated, out of range or held by a running step on another thread; a
            wrong shape or length. TypeError for a wrong dtype. The states are then unchanged.
        """
        spec, packed = self._spec, self._packed
        where = self._where["step"]
        seen = self._seen.__dict__.get(getattr(X, "shape", None))
        if seen is not None and fits(seen[3], ids, X, sequence_lengths, A, out):
            n, s, shape, _ = seen
            if sequence_lengths is not None:
                check_lengths(spec.op, sequence_lengths, s)
        else:
            ids = np.asarray(ids)
            X = np.asarray(X)
            if sequence_lengths is not None:
                sequence_lengths = np.asarray(sequence_lengths)
            if A is not None:
                A = np.asarray(A)
            check_ids(where, ids)
            n = ids.shape[0]
            s = self._check_inputs(where, n, X, sequence_lengths, A)
            shape = packed.result_shapes(n, s)[0]
            if out is not None:
                out = check_out_array(where, out, shape, spec.dtype)
            if len(self._seen.__dict__) >= 16:
                self._seen.__dict__.clear()
            self._seen.__dict__[X.shape] = n, s, shape, record(ids, X, sequence_lengths, A, out)
        given = ids
        if not (ids.dtype is _I64 and ids.flags.carray):
            ids = _scratch.kept("pool_ids", n, _I64)[:n]
            np.copyto(ids, given, casting="unsafe")  # an id out of range stays out of range
        with self._lock:
            if not marks.claim(self._mark_view, ids):
                check_claim(where, given, self._marks)
        try:
            return self._run(n, s, ids, X, sequence_lengths, A, out, shape)
        finally:
            with self._lock:
                marks.release(self._mark_view, ids)

    def _check_inputs(self, where, n, X, lengths, A):
        """Check X, sequence_lengths and A of n streams; returns the steps."""
        spec = self._spec
        check_step_arguments(where, spec.op, lengths, A)
        fast = (
            X.dtype is spec.dtype
            and X.ndim == self._x_rank
            and X.shape[-1] == spec.input_size
            and (lengths is None or (lengths.dtype.kind in "iu" and lengths.shape == (X.shape[0],)))
            and (A is None or (A.dtype == spec.dtype and A.shape == (X.shape[0], X.shape[1], 1)))
        )
        if not fast:
            arrays = {"X": X, "sequence_lengths": lengths, "A": A}
            validate_call(spec, {name: a for name, a in arrays.items() if a is not None})
        elif lengths is not None:
            check_lengths(spec.op, lengths, X.shape[1])
        check_batch(where, X, n)
        return 1 if self._cell else X.shape[1]

    def _run(self, n, s, ids, X, lengths, A, out, shape):
        """The kernel call on checked inputs; returns the result in T1."""
        spec, packed = self._spec, self._packed
        ct, h = packed.compute_dtype, packed.n_hidden
        if self._native:
            y = np.empty(shape, ct) if out is None else out
        else:  # float16 and bfloat16: computed in float32 in a kept buffer, rounded to T1 once
            y = _scratch.kept("result0", n * s * h, ct)[: n * s * h]
        X = _scratch.converted("X", X, ct)
        if self._cell:
            X = X.reshape(n, 1, spec.input_size)
            lengths = self._ones[:n]
        elif lengths is None:
            lengths = _scratch.lengths(None, n, s)[:n]
        elif not (lengths.dtype is _I64 and lengths.flags.carray):
            buf = _scratch.kept("lengths", n, _I64)[:n]
            np.copyto(buf, lengths, casting="unsafe")  # checked: the cast is exact
            lengths = buf
        att = packed._no_att if A is None else _scratch.converted("A", A, ct).reshape(n, s)
        states = self._states
        packed.run(n, s, (X, states, lengths, ids, att, y.reshape(n, 1, s, h), states), keep=True)
        if self._native:
            return y
        y = y.reshape(shape)
        if out is None:
            return y.astype(spec.dtype)
        np.copyto(out, y, casting="unsafe")
        return out

    # ---------------------------------------------------------------------------------- helpers

    def _checked_state(self, where, initial_state):
        """``initial_state`` checked, or None for zeros."""
        if initial_state is None:
            return None
        state = np.asarray(initial_state)
        check_initial_state(where, state, self.state_shape, self._spec.dtype)
        return state

    def _set(self, stream_id, state):
        """Write a stream's state (None: zeros), in the compute dtype. Under the lock."""
        row = self._states[stream_id, 0]
        if state is None:
            row[:] = 0
        else:
            np.copyto(row, state.reshape(-1), casting="unsafe")
