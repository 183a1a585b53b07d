"""The plain NumPy reference of GRUCell-3, GRUSequence-5 and AUGRUSequence-10: the semantics' executable form.

Every statement of docs/semantics.md ("The gates", "Sequences", "Types") is written here as code, to be
read next to it, not to be fast: one batch row and one time step at a time, each formula as it stands
there. fastgru's tests hold its kernels to these functions, and anyone writing another implementation
can hold theirs to them too (``fastgru.benchmark`` compares a candidate with fastgru itself).

The signatures are those of ``fastgru.gru_cell``, ``fastgru.gru_sequence`` and
``fastgru.augru_sequence``: the same positional inputs in OpenVINO's layouts, the same keyword-only
attributes with the same defaults. This module is self-contained NumPy: it imports nothing from
fastgru, and it checks nothing it does not need in order to run (give it what fastgru accepts).

Precision (docs/semantics.md, "Types"): float64 is computed in float64; float32, float16 and bfloat16
in float32, the last two rounded back to their own type only at the end (the state is carried in
float32). Matrix products are NumPy's (``@``), so results differ from fastgru's by rounding only:
tests/conftest.py holds the tolerance per dtype (float32: ``|fastgru - reference| <= 2e-6 +
1e-5 * |reference|``).

Examples
--------
>>> import numpy as np
>>> import fastgru
>>> from fastgru import reference
>>> rng = np.random.default_rng(0)
>>> X = rng.standard_normal((3, 5, 4)).astype(np.float32)          # (batch, seq_length, input_size)
>>> H0 = rng.standard_normal((3, 2, 6)).astype(np.float32)         # (batch, num_directions, hidden)
>>> W = rng.uniform(-0.4, 0.4, (2, 18, 4)).astype(np.float32)
>>> R = rng.uniform(-0.4, 0.4, (2, 18, 6)).astype(np.float32)
>>> B = rng.uniform(-0.4, 0.4, (2, 18)).astype(np.float32)
>>> lengths = [5, 2, 0]                                              # ragged: Y is zero past each length
>>> Y, Ho = reference.gru_sequence(X, H0, lengths, W, R, B, direction="bidirectional")
>>> Y.shape, Ho.shape, Y.dtype
((3, 2, 5, 6), (3, 2, 6), dtype('float32'))
>>> Y_fast, Ho_fast = fastgru.gru_sequence(X, H0, lengths, W, R, B, direction="bidirectional")
>>> bool(np.abs(Y_fast - Y).max() < 1e-5 and np.abs(Ho_fast - Ho).max() < 1e-5)
True
"""

import math

import numpy as np


def _compute_dtype(dtype):
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def _relu(v):
    return np.where(v < 0, 0, v).astype(v.dtype)  # NaN < 0 is False: NaN stays NaN


def _sigmoid(v):
    with np.errstate(over="ignore"):  # exp(-v) = inf for very negative v gives 1 / inf = 0
        return (1 / (1 + np.exp(-v))).astype(v.dtype)


_ACTIVATIONS = {"relu": _relu, "sigmoid": _sigmoid, "tanh": np.tanh}


def _activation_pair(activations):
    f, g = activations
    return _ACTIVATIONS[f.lower()], _ACTIVATIONS[g.lower()]


def _clip_function(clip):
    """clip(v) of docs/semantics.md, "The gates": clamp to [-clip, clip]; clip = inf or 0 means no clipping."""
    if clip == 0 or math.isinf(clip):
        return lambda v: v
    return lambda v: np.clip(v, -clip, clip)


class _Gates:
    """The attributes that shape the gates, as functions where they are: f and g (of
    ``activations``), clip(v) (of ``clip``) and ``linear_before_reset``."""

    def __init__(self, activations, clip, linear_before_reset):
        self.f, self.g = _activation_pair(activations)
        self.clip = _clip_function(clip)
        self.linear_before_reset = linear_before_reset


#: The matrix product of the gates: NumPy's. tests/test_tiles.py replaces it to carry another
#: product's rounding (the matrix tiles') through the gate equations.
_product = np.matmul


def _step(x, H, W, R, B, gates, a=None):
    """H' from one row's x (I,) and H (Hs,); W (3Hs, I), R (3Hs, Hs) and B (3Hs,) or (4Hs,)
    in gate order z, r, h; ``gates`` the attributes' _Gates; ``a`` the AUGRU attention score of
    this step (None for GRU)."""
    f, g, clip, linear_before_reset = gates.f, gates.g, gates.clip, gates.linear_before_reset
    n = H.shape[0]
    Wz, Wr, Wh = W[0:n], W[n : 2 * n], W[2 * n : 3 * n]
    Rz, Rr, Rh = R[0:n], R[n : 2 * n], R[2 * n : 3 * n]
    Bz, Br = B[0:n], B[n : 2 * n]
    z = f(clip(_product(x, Wz.T) + _product(H, Rz.T) + Bz))
    r = f(clip(_product(x, Wr.T) + _product(H, Rr.T) + Br))
    if linear_before_reset:
        Wbh, Rbh = B[2 * n : 3 * n], B[3 * n : 4 * n]
        h = g(clip(_product(x, Wh.T) + r * (_product(H, Rh.T) + Rbh) + Wbh))
    else:
        Bh = B[2 * n : 3 * n]
        h = g(clip(_product(x, Wh.T) + _product(r * H, Rh.T) + Bh))
    if a is not None:
        z = (1 - a) * z  # AUGRU: after f, not clamped to [0, 1]
    return (1 - z) * h + z * H


def gru_cell(
    X,
    initial_hidden_state,
    W,
    R,
    B=None,
    *,
    hidden_size=None,
    activations=("sigmoid", "tanh"),
    activations_alpha=(),
    activations_beta=(),
    clip=math.inf,
    linear_before_reset=False,
) -> np.ndarray:
    """GRUCell-3: one GRU step of every row.

    Parameters
    ----------
    X : array_like of shape (batch_size, input_size)
        The input of the step.
    initial_hidden_state : array_like of shape (batch_size, hidden_size)
        The state before the step.
    W : array_like of shape (3 * hidden_size, input_size)
        Input weights, gate order z, r, h.
    R : array_like of shape (3 * hidden_size, hidden_size)
        Recurrence weights, gate order z, r, h.
    B : array_like of shape (3 * hidden_size,) or (4 * hidden_size,), optional
        Biases [Bz, Br, Bh], or [Bz, Br, Wbh, Rbh] with ``linear_before_reset``; zeros when omitted.
    hidden_size : int, optional
        Unused: taken from R, as fastgru does when it is omitted.
    activations : pair of str
        f (z and r) and g (h), from "relu", "sigmoid", "tanh" (case-insensitive).
    activations_alpha, activations_beta : sequence of float
        Accepted and unused, as in OpenVINO: these activations take no parameter.
    clip : float
        Every gate's pre-activation is clamped to [-clip, clip]; ``math.inf`` and 0 mean no clipping.
    linear_before_reset : bool
        Apply the reset gate after the recurrent product of h (docs/semantics.md, "The gates").

    Returns
    -------
    Ho : ndarray of shape (batch_size, hidden_size)
        The state after the step, of X's dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from fastgru import reference
    >>> W, R = np.full((6, 3), 0.1), np.full((6, 2), 0.1)
    >>> reference.gru_cell(np.ones((1, 3)), np.zeros((1, 2)), W, R).round(4)
    array([[0.124, 0.124]])
    """
    X = np.asarray(X)
    dtype = X.dtype
    ct = _compute_dtype(dtype)
    X, H0, W, R = (np.asarray(v).astype(ct) for v in (X, initial_hidden_state, W, R))
    n = R.shape[1]
    if B is None:
        B = np.zeros((4 if linear_before_reset else 3) * n, dtype=ct)
    B = np.asarray(B).astype(ct)
    gates = _Gates(activations, clip, linear_before_reset)
    Ho = np.zeros((X.shape[0], n), dtype=ct)
    for b in range(X.shape[0]):
        Ho[b] = _step(X[b], H0[b], W, R, B, gates)
    return Ho.astype(dtype)


def _sequence(X, H0, lengths, W, R, B, reversed_, gates, A):
    """Y (N, D, S, Hs) and Ho (N, D, Hs) in the compute dtype; H0 (N, D, Hs), W (D, 3Hs, I),
    R (D, 3Hs, Hs), B (D, 3Hs or 4Hs); reversed_[d] says whether direction d runs backwards;
    ``gates`` the attributes' _Gates; A (N, S, 1) the AUGRU attention scores (None for GRU)."""
    N, S = X.shape[0], X.shape[1]
    D, n = W.shape[0], R.shape[2]
    Y = np.zeros((N, D, S, n), dtype=X.dtype)
    Ho = np.zeros((N, D, n), dtype=X.dtype)  # stays zero for a row of length 0 (docs/semantics.md, "Sequences")
    for d in range(D):
        for b in range(N):
            L = int(lengths[b])
            steps = range(L - 1, -1, -1) if reversed_[d] else range(L)  # only the valid prefix
            H = H0[b, d]
            for t in steps:
                a = None if A is None else A[b, t, 0]
                H = _step(X[b, t], H, W[d], R[d], B[d], gates, a)
                Y[b, d, t] = H
            if L > 0:
                Ho[b, d] = H
    return Y, Ho


def gru_sequence(
    X,
    initial_hidden_state,
    sequence_lengths,
    W,
    R,
    B,
    *,
    hidden_size=None,
    direction="forward",
    activations=("sigmoid", "tanh"),
    activations_alpha=(),
    activations_beta=(),
    clip=math.inf,
    linear_before_reset=False,
) -> tuple[np.ndarray, np.ndarray]:
    """GRUSequence-5: a GRU over every row's valid prefix, in one or both directions.

    Parameters
    ----------
    X : array_like of shape (batch_size, seq_length, input_size)
        The input sequence.
    initial_hidden_state : array_like of shape (batch_size, num_directions, hidden_size)
        The state before the first step of each direction.
    sequence_lengths : array_like of int, shape (batch_size,)
        Each row's length L in [0, seq_length]; steps t >= L are not computed.
    W : array_like of shape (num_directions, 3 * hidden_size, input_size)
        Input weights, gate order z, r, h.
    R : array_like of shape (num_directions, 3 * hidden_size, hidden_size)
        Recurrence weights, gate order z, r, h.
    B : array_like of shape (num_directions, 3 * hidden_size) or (num_directions, 4 * hidden_size)
        Biases, as in `gru_cell`, per direction.
    hidden_size : int, optional
        Unused: taken from R.
    direction : {"forward", "reverse", "bidirectional"}
        Direction index 0 is forward, 1 reverse when bidirectional (num_directions = 2).
    activations, activations_alpha, activations_beta, clip, linear_before_reset
        As in `gru_cell`.

    Returns
    -------
    Y : ndarray of shape (batch_size, num_directions, seq_length, hidden_size)
        The state after every step, at the step's original position (reverse included); zero at
        t >= L.
    Ho : ndarray of shape (batch_size, num_directions, hidden_size)
        The state after each direction's last computed step; zero for a row of length 0.

    Examples
    --------
    >>> import numpy as np
    >>> from fastgru import reference
    >>> X, H0 = np.ones((2, 3, 1)), np.zeros((2, 1, 1))
    >>> W, R, B = np.full((1, 3, 1), 0.5), np.full((1, 3, 1), 0.5), np.zeros((1, 3))
    >>> Y, Ho = reference.gru_sequence(X, H0, [3, 1], W, R, B)
    >>> Y[:, 0, :, 0].round(3)
    array([[0.174, 0.293, 0.376],
           [0.174, 0.   , 0.   ]])
    >>> Ho[:, 0, 0].round(3)
    array([0.376, 0.174])
    """
    X = np.asarray(X)
    dtype = X.dtype
    ct = _compute_dtype(dtype)
    X, H0, W, R, B = (np.asarray(v).astype(ct) for v in (X, initial_hidden_state, W, R, B))
    lengths = [int(L) for L in np.asarray(sequence_lengths)]
    reversed_ = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[direction.lower()]
    gates = _Gates(activations, clip, linear_before_reset)
    Y, Ho = _sequence(X, H0, lengths, W, R, B, reversed_, gates, None)
    return Y.astype(dtype), Ho.astype(dtype)


def augru_sequence(
    X, initial_hidden_state, sequence_lengths, W, R, B, A, *, hidden_size=None
) -> tuple[np.ndarray, np.ndarray]:
    """AUGRUSequence-10: a forward GRU whose update gate is scaled by an attention score, z' = (1 - a) z.

    sigmoid and tanh, no clip, linear_before_reset False; ``a = A[:, t, 0]``, not clamped. The rank of
    initial_hidden_state picks the layout: 2 is the specification page's, 3 is OpenVINO's own
    (GRUSequence ranks with num_directions = 1); the outputs follow it.

    Parameters
    ----------
    X : array_like of shape (batch_size, seq_length, input_size)
        The input sequence.
    initial_hidden_state : array_like of shape (batch_size, hidden_size) or (batch_size, 1, hidden_size)
        The state before the first step.
    sequence_lengths : array_like of int, shape (batch_size,)
        Each row's length L in [0, seq_length].
    W, R, B : array_like
        (3 * hidden_size, input_size), (3 * hidden_size, hidden_size), (3 * hidden_size,), each with a
        leading axis of 1 in OpenVINO's layout.
    A : array_like of shape (batch_size, seq_length, 1)
        The attention score of every step.
    hidden_size : int, optional
        Unused: taken from R.

    Returns
    -------
    Y : ndarray of shape (batch_size, seq_length, hidden_size) or (batch_size, 1, seq_length, hidden_size)
        The state after every step, zero at t >= L.
    Ho : ndarray of shape (batch_size, hidden_size) or (batch_size, 1, hidden_size)
        The state after the last computed step; zero for a row of length 0.

    Examples
    --------
    With A = 0 it is the GRU:

    >>> import numpy as np
    >>> from fastgru import reference
    >>> rng = np.random.default_rng(0)
    >>> X, H0 = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 5))
    >>> W, R, B = rng.uniform(-1, 1, (15, 3)), rng.uniform(-1, 1, (15, 5)), rng.uniform(-1, 1, 15)
    >>> Y, Ho = reference.augru_sequence(X, H0, [4, 2], W, R, B, np.zeros((2, 4, 1)))
    >>> Y.shape, Ho.shape
    ((2, 4, 5), (2, 5))
    >>> Y_gru, Ho_gru = reference.gru_sequence(X, H0[:, None], [4, 2], W[None], R[None], B[None])
    >>> bool(np.array_equal(Y, Y_gru[:, 0]) and np.array_equal(Ho, Ho_gru[:, 0]))
    True
    """
    X = np.asarray(X)
    dtype = X.dtype
    ct = _compute_dtype(dtype)
    X, H0, W, R, B, A = (np.asarray(v).astype(ct) for v in (X, initial_hidden_state, W, R, B, A))
    documented = H0.ndim == 2
    if documented:  # to the OpenVINO layout, num_directions = 1
        H0, W, R, B = H0[:, None], W[None], R[None], B[None]
    lengths = [int(L) for L in np.asarray(sequence_lengths)]
    gates = _Gates(("sigmoid", "tanh"), math.inf, False)
    Y, Ho = _sequence(X, H0, lengths, W, R, B, [False], gates, A)
    if documented:
        Y, Ho = Y[:, 0], Ho[:, 0]
    return Y.astype(dtype), Ho.astype(dtype)
