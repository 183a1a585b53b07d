"""The public functions: validate, dispatch, return."""

import threading

import numpy as np

from ._dispatch import Unpacked
from ._docs import shared_docs
from ._packs import packed_weights
from ._validate import DEFAULT, Attributes, attributes_key, augru_layout, validate


@shared_docs
def gru_cell(
    X,
    initial_hidden_state,
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
):
    """Run OpenVINO GRUCell-3: one GRU step for a batch.

    Parameters
    ----------
    X : array_like of shape (batch_size, input_size)
        Input data; float16, float32, float64 or bfloat16 (T).
    initial_hidden_state : array_like of shape (batch_size, hidden_size)
        The state before the step, same dtype as X.
    W : array_like of shape (3*hidden_size, input_size)
        Input weights, gate order z, r, h.
    R : array_like of shape (3*hidden_size, hidden_size)
        Recurrence weights, gate order z, r, h.
    B : array_like of shape (3*hidden_size,) or (4*hidden_size,), optional
        Summed biases [Bz, Br, Bh]; with linear_before_reset, [Bz, Br, Wbh, Rbh]. Zero when omitted.
    hidden_size : int, optional
        Taken from R when omitted; when given it must agree with R.
    {GATE_ATTRIBUTES}

    Returns
    -------
    Ho : ndarray of shape (batch_size, hidden_size)
        The new hidden state, dtype of X.

    Raises
    ------
    FastGRUError
        (a ValueError) for a wrong shape, rank, dimension or attribute value.
    TypeError
        For a dtype that is not T or inputs of different dtypes.

    Examples
    --------
    >>> import numpy as np, fastgru
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((2, 3), dtype=np.float32)
    >>> H = np.zeros((2, 4), dtype=np.float32)
    >>> W = rng.standard_normal((12, 3), dtype=np.float32)
    >>> R = rng.standard_normal((12, 4), dtype=np.float32)
    >>> fastgru.gru_cell(X, H, W, R).shape
    (2, 4)
    """
    attributes = (
        hidden_size,
        DEFAULT.direction,
        activations,
        activations_alpha,
        activations_beta,
        clip,
        linear_before_reset,
    )
    given = X, initial_hidden_state, None, W, R, B, None
    key, results = _short_path("gru_cell", attributes, given)
    if results is not None:
        return results[0]
    arrays = _arrays(X=X, initial_hidden_state=initial_hidden_state, W=W, R=R, **({} if B is None else {"B": B}))
    spec = validate("gru_cell", "cell", arrays, Attributes(*attributes))
    return _run(spec, arrays, key, given)[0]


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
):
    """Run OpenVINO GRUSequence-5: a GRU over a batch of sequences.

    Parameters
    ----------
    X : array_like of shape (batch_size, seq_length, input_size)
        Input sequences; float16, float32, float64 or bfloat16 (T1).
    initial_hidden_state : array_like of shape (batch_size, num_directions, hidden_size)
        The state before the first step of each direction, dtype T1.
    sequence_lengths : array_like of shape (batch_size,)
        Valid steps per row, any integer dtype (T2), each in [0, seq_length].
    W : array_like of shape (num_directions, 3*hidden_size, input_size)
        Input weights, gate order z, r, h.
    R : array_like of shape (num_directions, 3*hidden_size, hidden_size)
        Recurrence weights, gate order z, r, h.
    B : array_like of shape (num_directions, 3*hidden_size) or (num_directions, 4*hidden_size)
        Summed biases [Bz, Br, Bh]; with linear_before_reset, [Bz, Br, Wbh, Rbh].
    hidden_size : int, optional
        Taken from R when omitted; when given it must agree with R.
    direction : {'forward', 'reverse', 'bidirectional'}
        'reverse' runs each row's valid prefix backwards; 'bidirectional' stacks forward (index 0)
        and reverse (index 1); num_directions is 2 for it, else 1.
    {GATE_ATTRIBUTES}

    Returns
    -------
    Y : ndarray of shape (batch_size, num_directions, seq_length, hidden_size)
        The state after every step, zero at steps t >= sequence_lengths.
    Ho : ndarray of shape (batch_size, num_directions, hidden_size)
        The state after each row's last valid step; zero for a row of length 0.

    {SEQUENCE_RAISES}

    Examples
    --------
    >>> import numpy as np, fastgru
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((2, 5, 3), dtype=np.float32)
    >>> H0 = np.zeros((2, 2, 4), dtype=np.float32)
    >>> W = rng.standard_normal((2, 12, 3), dtype=np.float32)
    >>> R = rng.standard_normal((2, 12, 4), dtype=np.float32)
    >>> B = np.zeros((2, 12), dtype=np.float32)
    >>> Y, Ho = fastgru.gru_sequence(X, H0, [5, 3], W, R, B, direction="bidirectional")
    >>> Y.shape, Ho.shape
    ((2, 2, 5, 4), (2, 2, 4))
    >>> bool(np.all(Y[1, :, 3:] == 0))
    True
    """
    attributes = hidden_size, direction, activations, activations_alpha, activations_beta, clip, linear_before_reset
    given = X, initial_hidden_state, sequence_lengths, W, R, B, None
    key, results = _short_path("gru_sequence", attributes, given)
    if results is not None:
        return results
    arrays = _arrays(X=X, initial_hidden_state=initial_hidden_state, sequence_lengths=sequence_lengths, W=W, R=R, B=B)
    spec = validate("gru_sequence", "sequence", arrays, Attributes(*attributes))
    return _run(spec, arrays, key, given)


@shared_docs
def augru_sequence(X, initial_hidden_state, sequence_lengths, W, R, B, A, *, hidden_size=DEFAULT.hidden_size):
    """Run OpenVINO AUGRUSequence-10: a forward GRU whose update gate is scaled by attention.

    z' = (1 - a) ⊙ z with a = A[:, t, 0]; activations sigmoid and tanh, no clip,
    linear_before_reset False (the op's fixed attributes). Two layouts are accepted, picked by
    the rank of initial_hidden_state; the outputs follow it.

    Parameters
    ----------
    X : array_like of shape (batch_size, seq_length, input_size)
        Input sequences; float16, float32, float64 or bfloat16 (T1).
    initial_hidden_state : array_like of shape (batch_size, hidden_size) or (batch_size, 1, hidden_size)
        The documented layout, or OpenVINO's layout with a num_directions axis of 1.
    sequence_lengths : array_like of shape (batch_size,)
        Valid steps per row, any integer dtype (T2), each in [0, seq_length].
    W : array_like of shape (3*hidden_size, input_size) or (1, 3*hidden_size, input_size)
        Input weights, gate order z, r, h.
    R : array_like of shape (3*hidden_size, hidden_size) or (1, 3*hidden_size, hidden_size)
        Recurrence weights, gate order z, r, h.
    B : array_like of shape (3*hidden_size,) or (1, 3*hidden_size)
        Summed biases [Bz, Br, Bh].
    A : array_like of shape (batch_size, seq_length, 1)
        Attention scores; not clamped to [0, 1].
    hidden_size : int, optional
        Taken from R when omitted; when given it must agree with R.

    Returns
    -------
    Y : ndarray of shape (batch_size, seq_length, hidden_size) or (batch_size, 1, seq_length, hidden_size)
        The state after every step, zero at steps t >= sequence_lengths.
    Ho : ndarray of shape (batch_size, hidden_size) or (batch_size, 1, hidden_size)
        The state after each row's last valid step; zero for a row of length 0.

    Raises
    ------
    FastGRUError
        (a ValueError) for a wrong shape, rank, dimension or sequence length.
    TypeError
        For a dtype that is not T1 (or T2 for sequence_lengths), or T1 inputs of different dtypes.

    Examples
    --------
    >>> import numpy as np, fastgru
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((2, 5, 3), dtype=np.float32)
    >>> H0 = np.zeros((2, 4), dtype=np.float32)
    >>> W = rng.standard_normal((12, 3), dtype=np.float32)
    >>> R = rng.standard_normal((12, 4), dtype=np.float32)
    >>> B = np.zeros(12, dtype=np.float32)
    >>> A = rng.uniform(size=(2, 5, 1)).astype(np.float32)
    >>> Y, Ho = fastgru.augru_sequence(X, H0, [5, 2], W, R, B, A)
    >>> Y.shape, Ho.shape
    ((2, 5, 4), (2, 4))
    """
    given = X, initial_hidden_state, sequence_lengths, W, R, B, A
    key, results = _short_path("augru_sequence", (hidden_size,), given)
    if results is not None:
        return results
    arrays = _arrays(
        X=X, initial_hidden_state=initial_hidden_state, sequence_lengths=sequence_lengths, W=W, R=R, B=B, A=A
    )
    layout = augru_layout("augru_sequence", "initial_hidden_state", arrays["initial_hidden_state"])
    spec = validate("augru_sequence", layout, arrays, Attributes(hidden_size))
    return _run(spec, arrays, key, given)


#: Unpacked templates by spec (a serving loop's calls share one).
_templates = {}

#: Each thread's plans (``_plan.Plan``) of one-row, one-step calls seen before, by ``_key``.
_seen = threading.local()


def _short_path(op, attributes, given):
    """(key, results) of a call of ``op`` with the ``given`` arrays (X, initial_hidden_state,
    sequence_lengths, W, R, B, A; None where the op has none): the results of its plan, which takes
    no checks, or None, with the key under which ``_run`` keeps the plan it runs on (None: no
    plan)."""
    key = _key(op, given[0], given[3], given[4], attributes)
    plan = _seen.__dict__.get(key)
    return key, None if plan is None else plan.direct(*given)


def _key(op, X, W, R, attributes):
    """What a call's short path is found by: the op, the shapes of X, W and R, and the attributes
    (the first fields of ``Attributes``, as ``attributes_key`` types them: an attribute equal to an
    accepted one but of another type, ``clip=True`` beside ``clip=1``, is checked in full). None
    (no short path) when the call is not of one row and one step, X, W or R has no shape, or an
    attribute cannot be hashed."""
    shapes = getattr(X, "shape", None), getattr(W, "shape", None), getattr(R, "shape", None)
    if None in shapes or not _one_row_one_step(op == "gru_cell", shapes[0]):
        return None
    values = attributes_key(attributes)
    return None if values is None else (op, shapes, values)


def _one_row_one_step(cell, x_shape):
    """Whether X of this shape (the cell's (N, I), else (N, S, I)) is one row of one step: a call
    that computes from the caller's weights as they are (``Unpacked``)."""
    return len(x_shape) > 1 and x_shape[0] == 1 and (cell or len(x_shape) > 2 and x_shape[1] == 1)


def _run(spec, arrays, key=None, given=None):
    """Compute from the caller's weights as they are for a call of one row and one step
    (``Unpacked``; the next such calls with the same ``key`` take its plan, if the caller's
    ``given`` arrays are ones the kernels take as they are), else with the weights packed
    (``_packs``: kept while they are unchanged)."""
    X, h0, lengths, A = (arrays.get(name) for name in ("X", "initial_hidden_state", "sequence_lengths", "A"))
    if not _one_row_one_step(spec.layout == "cell", X.shape):
        packed = packed_weights(spec, arrays["W"], arrays["R"], arrays.get("B"))
        return packed.compute(X, h0, lengths, A)
    template = _templates.get(spec)
    if template is None:
        if len(_templates) >= 64:
            _templates.clear()
        template = _templates[spec] = Unpacked(spec)
    results = template.compute_direct(X, h0, lengths, A, arrays["W"], arrays["R"], arrays.get("B"))
    if key is not None:
        plan = template.plan_of(*given)
        if plan is not None:
            seen = _seen.__dict__
            if len(seen) >= 64:
                seen.clear()
            seen[key] = plan
    return results


def _arrays(**inputs):
    """The given inputs as NumPy arrays (no copy of an array), keyed by specification name."""
    return {name: np.asarray(value) for name, value in inputs.items()}
