"""Batch-sharded GRU inference on Dask (the ``fastgru[dask]`` extra; ``import fastgru`` never imports it).

``gru_sequence``, ``augru_sequence`` and the prepared ops ``GRUSequence`` and ``AUGRUSequence``
take ``dask.array`` inputs (X, initial_hidden_state, sequence_lengths, A) and NumPy weights, and
return lazy ``dask.array`` Y and Ho. Each batch chunk is one task running fastgru's kernels;
batch rows are independent, so the result is the same, bit for bit, as one NumPy call on the
whole batch. Any Dask scheduler runs the graph: the threaded one in this process, or
``distributed`` on a laptop (``LocalCluster``) or a cluster.

How the graph is built, and why:

- Checks on the client, eagerly, with fastgru's own checks and messages: attributes and weights
  (dtype, rank, shape) and the per-chunk inputs' dtypes, ranks and shapes from the dask arrays'
  metadata, so a wrong call fails when the graph is built, not inside a worker. Only the values
  of sequence_lengths (0 <= L <= seq_length) need the data: each task checks its chunk, and a
  bad value raises ``FastGRUError`` on compute, naming its row in the whole batch.
- Chunks: the outputs take X's batch chunks (uneven and empty chunks are fine); the other inputs
  are rechunked to them, and every axis but the batch axis (seq_length, input_size,
  num_directions, hidden_size) to one chunk. A batch chunk whose inputs and outputs would then
  exceed ``max_chunk_bytes`` (default :data:`MAX_CHUNK_BYTES`, 1 GiB) is refused with a
  ``FastGRUError`` that says how many rows fit.
- Data: NumPy inputs are wrapped with ``da.asarray`` and so travel inside the graph; large data is
  better loaded by the workers themselves (``da.from_zarr``, ...).
- Weights once per graph: W, R, B and the attributes are one node of the graph (a ``Delayed``
  keyed by their token) that every chunk's task depends on, so they are serialised once per graph
  and each worker fetches them once. Each worker process builds the prepared op from them once,
  and keeps it, keyed by that token, for later tasks and graphs (:data:`CACHE_SIZE` of them).
- Threads: a task runs fastgru on ``max(1, cores // slots)`` threads (:func:`threads_per_task`),
  where ``slots`` is the number of tasks the worker runs at once, so concurrent tasks never
  oversubscribe the cores. On a ``distributed`` worker, ``slots`` is its ``nthreads`` and
  ``cores`` its share of the host's cores, which Dask's own convention makes its ``nthreads``
  (``LocalCluster`` and ``dask worker`` divide a host's cores among their workers as threads, and
  size the "auto" memory limit by the same share): one fastgru thread per task by default, as Dask
  sets ``OMP_NUM_THREADS=1`` for NumPy's BLAS in its workers (the kernels release the GIL, so a
  worker's tasks run side by side). A worker given fewer threads than
  cores says how many cores it owns with the Dask config value ``fastgru.worker-cores`` (e.g.
  ``DASK_FASTGRU__WORKER_CORES=8`` in its environment, for ``dask worker --nthreads 1``); its tasks
  then run in parallel inside fastgru (use TBB or OpenMP as Numba's threading layer there: its
  ``workqueue`` layer runs one parallel region at a time). Outside a worker (the threaded
  scheduler), ``slots`` is the scheduler's ``num_workers`` (default: the number of cores) and
  ``cores`` the number of cores.
"""

import math
import threading

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.system import CPU_COUNT

from . import _ops
from ._dispatch import result_shapes
from ._docs import shared_docs
from ._threading import BUDGET, threads
from ._validate import DEFAULT, Attributes, FastGRUError, augru_layout, check_lengths, validate, validate_call

#: The default bound on one batch chunk's inputs and outputs (X, initial_hidden_state, A, Y, Ho),
#: in bytes, once its other axes are whole; ``max_chunk_bytes=`` changes it per call or op.
MAX_CHUNK_BYTES = 1 << 30

#: Prepared ops a worker process keeps, by weights token (the oldest is dropped first).
CACHE_SIZE = 8

__all__ = [
    "AUGRUSequence",
    "CACHE_SIZE",
    "GRUSequence",
    "MAX_CHUNK_BYTES",
    "augru_sequence",
    "gru_sequence",
    "threads_per_task",
]


@shared_docs
def gru_sequence(
    X,
    initial_hidden_state,
    sequence_lengths,
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
    max_chunk_bytes=MAX_CHUNK_BYTES,
):
    """Run OpenVINO GRUSequence-5 on batch-chunked dask arrays: :func:`fastgru.gru_sequence`, lazily.

    Parameters
    ----------
    X : dask.array of shape (batch_size, seq_length, input_size)
        Input sequences, T1; its batch chunks are the outputs' chunks. A NumPy array is wrapped.
    initial_hidden_state : dask.array of shape (batch_size, num_directions, hidden_size)
        T1; rechunked to X's batch chunks.
    sequence_lengths : dask.array of shape (batch_size,)
        Any integer dtype; rechunked to X's batch chunks. Values are checked by the tasks.
    W, R, B : ndarray
        The weights of :func:`fastgru.gru_sequence`, as NumPy arrays; one node of the graph.
    hidden_size, direction, activations, activations_alpha, activations_beta, clip, linear_before_reset
        The attributes of :func:`fastgru.gru_sequence`.
    max_chunk_bytes : int
        Refuse a batch chunk whose inputs and outputs exceed this many bytes.

    Returns
    -------
    Y : dask.array of shape (batch_size, num_directions, seq_length, hidden_size)
        Chunked as X along the batch axis, whole along the others; dtype T1.
    Ho : dask.array of shape (batch_size, num_directions, hidden_size)
        Chunked likewise.

    {DASK_RAISES}

    Examples
    --------
    >>> import numpy as np, dask.array as da, fastgru, fastgru.dask
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((6, 5, 3)).astype(np.float32)
    >>> H0 = np.zeros((6, 1, 4), dtype=np.float32)
    >>> W = rng.standard_normal((1, 12, 3), dtype=np.float32)
    >>> R = rng.standard_normal((1, 12, 4), dtype=np.float32)
    >>> B = np.zeros((1, 12), dtype=np.float32)
    >>> lengths = np.array([5, 3, 0, 5, 1, 2])
    >>> Y, Ho = fastgru.dask.gru_sequence(da.from_array(X, chunks=(4, 5, 3)), da.from_array(H0, chunks=2),
    ...                                   da.from_array(lengths, chunks=3), W, R, B)
    >>> Y.chunks
    ((4, 2), (1,), (5,), (4,))
    >>> bool(np.array_equal(Y.compute(), fastgru.gru_sequence(X, H0, lengths, W, R, B)[0]))
    True
    """
    attributes = Attributes(
        hidden_size, direction, activations, activations_alpha, activations_beta, clip, linear_before_reset
    )
    weights = _numpy_weights("gru_sequence", W=W, R=R, B=B)
    inputs = _dask_inputs(
        "gru_sequence", X=X, initial_hidden_state=initial_hidden_state, sequence_lengths=sequence_lengths
    )
    spec = validate("gru_sequence", "sequence", {**_stand_ins(inputs), **weights}, attributes)
    node = _weights_node("GRUSequence", weights, attributes._asdict())
    return _lazy(spec, node, inputs, max_chunk_bytes)


@shared_docs
def augru_sequence(
    X,
    initial_hidden_state,
    sequence_lengths,
    W,
    R,
    B,
    A,
    *,
    hidden_size=DEFAULT.hidden_size,
    max_chunk_bytes=MAX_CHUNK_BYTES,
):
    """Run OpenVINO AUGRUSequence-10 on batch-chunked dask arrays: :func:`fastgru.augru_sequence`, lazily.

    Both layouts of :func:`fastgru.augru_sequence`, picked by the rank of initial_hidden_state.

    Parameters
    ----------
    X : dask.array of shape (batch_size, seq_length, input_size)
        Input sequences, T1; its batch chunks are the outputs' chunks. A NumPy array is wrapped.
    initial_hidden_state : dask.array of shape (batch_size, hidden_size) or (batch_size, 1, hidden_size)
        T1; rechunked to X's batch chunks.
    sequence_lengths : dask.array of shape (batch_size,)
        Any integer dtype; rechunked to X's batch chunks. Values are checked by the tasks.
    W, R, B : ndarray
        The weights of :func:`fastgru.augru_sequence`, as NumPy arrays; one node of the graph.
    A : dask.array of shape (batch_size, seq_length, 1)
        Attention scores, T1; rechunked to X's batch chunks.
    hidden_size : int, optional
        Taken from R when omitted.
    max_chunk_bytes : int
        Refuse a batch chunk whose inputs and outputs exceed this many bytes.

    Returns
    -------
    Y : dask.array of shape (batch_size, seq_length, hidden_size) or (batch_size, 1, seq_length, hidden_size)
        Chunked as X along the batch axis, whole along the others; dtype T1.
    Ho : dask.array of shape (batch_size, hidden_size) or (batch_size, 1, hidden_size)
        Chunked as Y along the batch axis.

    {DASK_RAISES}

    Examples
    --------
    >>> import numpy as np, dask.array as da, fastgru, fastgru.dask
    >>> rng = np.random.default_rng(0)
    >>> X = da.from_array(rng.standard_normal((6, 5, 3), dtype=np.float32), chunks=(3, 5, 3))
    >>> W = rng.standard_normal((12, 3), dtype=np.float32)
    >>> R = rng.standard_normal((12, 4), dtype=np.float32)
    >>> A = da.random.default_rng(1).uniform(size=(6, 5, 1)).astype(np.float32)
    >>> Y, Ho = fastgru.dask.augru_sequence(X, da.zeros((6, 4), dtype=np.float32), da.full(6, 5), W, R,
    ...                                     np.zeros(12, dtype=np.float32), A)
    >>> Y.shape, Y.chunks[0], Ho.compute().shape
    ((6, 5, 4), (3, 3), (6, 4))
    """
    weights = _numpy_weights("augru_sequence", W=W, R=R, B=B)
    inputs = _dask_inputs(
        "augru_sequence", X=X, initial_hidden_state=initial_hidden_state, sequence_lengths=sequence_lengths, A=A
    )
    layout = augru_layout("augru_sequence", "initial_hidden_state", inputs["initial_hidden_state"])
    spec = validate("augru_sequence", layout, {**_stand_ins(inputs), **weights}, Attributes(hidden_size))
    node = _weights_node("AUGRUSequence", weights, {"hidden_size": hidden_size})
    return _lazy(spec, node, inputs, max_chunk_bytes)


class _Prepared(_ops.Described):
    """Weights checked on the client once, as fastgru's prepared op checks them (but not packed:
    the client runs no kernel), and made one graph node once."""

    _kind = None  # the class of fastgru._ops that the workers build

    def __init__(self, weights, attrs, max_chunk_bytes):
        """``attrs``: the keyword attributes of the op's class (all of Attributes', or hidden_size)."""
        weights = _numpy_weights(self._kind, **weights)
        layout = augru_layout(self._kind, "W", weights["W"]) if self._kind == "AUGRUSequence" else "sequence"
        self.spec = validate(self._kind, layout, weights, Attributes(**attrs))
        self._node = _weights_node(self._kind, weights, attrs)
        self.max_chunk_bytes = max_chunk_bytes

    def _call(self, **inputs):
        spec = self.spec
        inputs = _dask_inputs(spec.op, **inputs)
        validate_call(spec, _stand_ins(inputs))
        return _lazy(spec, self._node, inputs, self.max_chunk_bytes)

    def __repr__(self):
        return f"fastgru.dask.{super().__repr__()}"


class GRUSequence(_Prepared):
    """A prepared GRUSequence-5 for dask arrays: ``op = GRUSequence(W, R, B, ...)``, then
    ``Y, Ho = op(X, initial_hidden_state, sequence_lengths)``, lazily.

    Weights and attributes are those of :class:`fastgru.GRUSequence`, checked here once; the
    inputs, outputs and chunks those of :func:`fastgru.dask.gru_sequence`. Every graph the op
    builds holds the weights as one node with the same key, and a worker process builds the
    prepared op once for all of them.

    Examples
    --------
    >>> import numpy as np, dask.array as da, fastgru.dask
    >>> rng = np.random.default_rng(0)
    >>> op = fastgru.dask.GRUSequence(rng.standard_normal((2, 12, 3)), rng.standard_normal((2, 12, 4)),
    ...                               np.zeros((2, 12)), direction="bidirectional")
    >>> X = da.random.default_rng(0).standard_normal((10, 5, 3), chunks=(4, 5, 3))
    >>> Y, Ho = op(X, da.zeros((10, 2, 4), chunks=4), da.full(10, 5, chunks=4))
    >>> Y.chunks, Ho.compute().shape
    (((4, 4, 2), (2,), (5,), (4,)), (10, 2, 4))
    """

    _kind = "GRUSequence"

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
        max_chunk_bytes=MAX_CHUNK_BYTES,
    ):
        attributes = Attributes(
            hidden_size, direction, activations, activations_alpha, activations_beta, clip, linear_before_reset
        )
        super().__init__({"W": W, "R": R, "B": B}, attributes._asdict(), max_chunk_bytes)

    def __call__(self, X, initial_hidden_state, sequence_lengths):
        return self._call(X=X, initial_hidden_state=initial_hidden_state, sequence_lengths=sequence_lengths)


class AUGRUSequence(_Prepared):
    """A prepared AUGRUSequence-10 for dask arrays: ``op = AUGRUSequence(W, R, B)``, then
    ``Y, Ho = op(X, initial_hidden_state, sequence_lengths, A)``, lazily.

    The rank of W picks the layout, as for :class:`fastgru.AUGRUSequence`.

    Examples
    --------
    >>> import numpy as np, dask.array as da, fastgru.dask
    >>> rng = np.random.default_rng(0)
    >>> op = fastgru.dask.AUGRUSequence(rng.standard_normal((1, 12, 3)), rng.standard_normal((1, 12, 4)),
    ...                                 np.zeros((1, 12)))
    >>> X = da.random.default_rng(0).standard_normal((10, 5, 3), chunks=(4, 5, 3))
    >>> Y, Ho = op(X, da.zeros((10, 1, 4)), da.full(10, 5), da.ones((10, 5, 1)))
    >>> Y.chunks[0], Y.shape, Ho.shape
    ((4, 4, 2), (10, 1, 5, 4), (10, 1, 4))
    """

    _kind = "AUGRUSequence"

    def __init__(self, W, R, B, *, hidden_size=DEFAULT.hidden_size, max_chunk_bytes=MAX_CHUNK_BYTES):
        super().__init__({"W": W, "R": R, "B": B}, {"hidden_size": hidden_size}, max_chunk_bytes)

    def __call__(self, X, initial_hidden_state, sequence_lengths, A):
        return self._call(X=X, initial_hidden_state=initial_hidden_state, sequence_lengths=sequence_lengths, A=A)


def threads_per_task() -> int:
    """The fastgru threads of a task started now: ``max(1, cores // slots)``, at most NUMBA_NUM_THREADS.

    On a ``distributed`` worker, ``slots`` is the worker's ``nthreads`` and ``cores`` the Dask
    config value ``fastgru.worker-cores`` or, by default, its ``nthreads`` (so 1 thread); elsewhere
    ``slots`` is the threaded scheduler's ``num_workers`` (default: the number of cores) and
    ``cores`` the number of cores. See the module's docstring.

    Examples
    --------
    >>> import dask, fastgru.dask
    >>> with dask.config.set(num_workers=1):
    ...     fastgru.dask.threads_per_task() >= 1
    True
    """
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):  # no distributed, or not in a worker's task
        worker = None
    if worker is not None:
        slots = worker.state.nthreads
        cores = dask.config.get("fastgru.worker-cores", None) or slots
    else:
        slots = dask.config.get("num_workers", None) or CPU_COUNT
        cores = CPU_COUNT
    return max(1, min(int(cores) // slots, BUDGET))


# ------------------------------------------------------------------------------------------- client


class _Weights:
    """W, R, B and the attributes of one op, and their token: the single graph node of the weights."""

    def __init__(self, kind, weights, attrs, token):
        self.kind, self.weights, self.attrs, self.token = kind, weights, attrs, token

    def build(self):
        return getattr(_ops, self.kind)(**self.weights, **self.attrs)

    def __repr__(self):
        return f"<fastgru weights of {self.kind} {self.token}>"


def _weights_node(kind, weights, attrs):
    """The weights as one Delayed, keyed by their token: every chunk's task depends on this key."""
    token = tokenize(kind, weights, attrs)
    return dask.delayed(_Weights(kind, weights, attrs, token), name=f"fastgru-weights-{token}", pure=True)


def _numpy_weights(op, **weights):
    """The weights as NumPy arrays; dask arrays are refused (they would be computed here)."""
    for name, value in weights.items():
        if dask.is_dask_collection(value):
            raise TypeError(
                f"{op}: {name} is a dask collection; expected a NumPy array: the weights go to each "
                f"worker whole. Pass {name}.compute()."
            )
    return {name: np.asarray(value) for name, value in weights.items()}


def _dask_inputs(op, **inputs):
    """The per-chunk inputs as dask arrays (NumPy ones wrapped), with known shapes."""
    arrays = {}
    for name, value in inputs.items():
        array = value if isinstance(value, da.Array) else da.asarray(value)
        if any(math.isnan(size) for size in array.shape):
            raise FastGRUError(
                f"{op}: {name} has unknown chunk sizes (shape {array.shape}); expected known "
                f"ones. Call {name}.compute_chunk_sizes() first."
            )
        arrays[name] = array
    return arrays


def _stand_ins(inputs):
    """NumPy arrays of each input's dtype and shape that take no memory (all zeros: valid lengths), so that
    fastgru's own checks and messages apply to the dask arrays' metadata."""
    return {name: np.broadcast_to(np.zeros((), dtype=a.dtype), a.shape) for name, a in inputs.items()}


def _lazy(spec, node, inputs, max_chunk_bytes):
    """The graph: one task per batch chunk of X, then Y and Ho picked from its result."""
    X = inputs["X"]
    batch, (n, s, _) = X.chunks[0], X.shape
    y_shape, ho_shape = result_shapes(spec, 0, s)
    _check_chunk_bytes(spec, inputs, batch, y_shape, ho_shape, max_chunk_bytes)
    args = [spec.op, None, node, None, da.arange(n, chunks=(batch,)), "n"]
    letters = iter("abcdefghijkl")  # other axes: whole, contracted, and distinct letters as their sizes differ
    for array in inputs.values():
        args += [array.rechunk((batch, *array.shape[1:])), "n" + "".join(next(letters) for _ in array.shape[1:])]
    results = da.blockwise(
        _run_chunk,
        "n",
        *args,
        concatenate=False,
        dtype=object,
        meta=np.empty((0,), dtype=object),
        token=f"fastgru-{spec.op}",
    )
    return tuple(
        results.map_blocks(
            _item,
            i,
            new_axis=list(range(1, len(shape))),
            chunks=(batch, *shape[1:]),
            meta=np.empty((0,) * len(shape), dtype=spec.dtype),
        )
        for i, shape in enumerate((y_shape, ho_shape))
    )


def _check_chunk_bytes(spec, inputs, batch, y_shape, ho_shape, max_chunk_bytes):
    """Refuse a batch chunk whose inputs and outputs, with their other axes whole, exceed max_chunk_bytes."""
    row = sum(math.prod(a.shape[1:]) * a.dtype.itemsize for a in inputs.values())
    row += (math.prod(y_shape[1:]) + math.prod(ho_shape[1:])) * spec.dtype.itemsize
    rows = max(batch, default=0)
    if rows * row > max_chunk_bytes:
        fit = max_chunk_bytes // row
        advice = (
            f"Use at most {fit} rows per chunk: X.rechunk({{0: {fit}}})."
            if fit
            else f"One row alone takes {row} bytes: raise max_chunk_bytes."
        )
        raise FastGRUError(
            f"{spec.op}: a batch chunk of {rows} rows takes {rows * row} bytes ({', '.join(inputs)}, Y and Ho, "
            f"with every axis but the batch one whole); expected at most max_chunk_bytes={max_chunk_bytes}. " + advice
        )


# ------------------------------------------------------------------------------------------- worker

_prepared = {}  # weights token -> prepared op, in this process
_built = {}  # weights token -> how many times this process built its op (for the tests)
_lock = threading.Lock()


def _prepared_op(weights):
    """The prepared op of these weights, built once per process (tasks of one worker share it)."""
    op = _prepared.get(weights.token)
    if op is None:
        with _lock:
            op = _prepared.get(weights.token)
            if op is None:
                op = weights.build()
                while len(_prepared) >= CACHE_SIZE:
                    del _prepared[next(iter(_prepared))]
                _prepared[weights.token] = op
                _built[weights.token] = _built.get(weights.token, 0) + 1
    return op


def _run_chunk(op_name, weights, rows, X, initial_hidden_state, sequence_lengths, A=None):
    """One batch chunk: its rows of the whole batch (for messages), then the op's (Y, Ho)."""
    X, h0, lengths, A = (_block(a) for a in (X, initial_hidden_state, sequence_lengths, A))
    # Checked here first, so that the message names the row of the whole batch, not of the chunk.
    check_lengths(op_name, lengths, X.shape[1], first_row=int(rows[0]) if len(rows) else 0)
    op = _prepared_op(weights)
    with threads(threads_per_task()):
        return op(X, h0, lengths) if A is None else op(X, h0, lengths, A)


def _block(block):
    """The single block of an input whose non-batch axes are whole: blockwise passes it in nested lists."""
    while isinstance(block, list):
        (block,) = block
    return block


def _item(pair, i):
    return pair[i]
