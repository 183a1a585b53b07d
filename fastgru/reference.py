"""A plain NumPy reference of GRUCell-3, GRUSequence-5 and AUGRUSequence-10 (docs/semantics.md).

Written to be read next to docs/semantics.md ("The gates", "Sequences"), not to be fast: one
batch row and one time step at a time, each formula as it stands there. The signatures are fastgru's. It imports
nothing from fastgru and checks nothing it does not need in order to run.

Precision (docs/semantics.md, "Types"): float64 is computed in float64; float32, float16 and bfloat16 in float32,
the last two rounded back to their own type only at the end (the state is carried in float32).
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


def _step(x, H, W, R, B, f, g, clip, linear_before_reset, a=None):
    """H' from one row's x (I,) and H (Hs,); W (3Hs, I), R (3Hs, Hs) and B (3Hs,) or (4Hs,)
    in gate order z, r, h; ``a`` the AUGRU attention score of this step (None for GRU)."""
    n = H.shape[0]
    Wz, Wr, Wh = W[0:n], W[n : 2 * n], W[2 * n : 3 * n]
    Rz, Rr, Rh = R[0:n], R[n : 2 * n], R[2 * n : 3 * n]
    Bz, Br = B[0:n], B[n : 2 * n]
    z = f(clip(x @ Wz.T + H @ Rz.T + Bz))
    r = f(clip(x @ Wr.T + H @ Rr.T + Br))
    if linear_before_reset:
        Wbh, Rbh = B[2 * n : 3 * n], B[3 * n : 4 * n]
        h = g(clip(x @ Wh.T + r * (H @ Rh.T + Rbh) + Wbh))
    else:
        Bh = B[2 * n : 3 * n]
        h = g(clip(x @ Wh.T + (r * H) @ Rh.T + Bh))
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
):
    """Ho (N, Hs) of one GRU step; activations_alpha/beta have no effect on these activations."""
    X = np.asarray(X)
    dtype = X.dtype
    ct = _compute_dtype(dtype)
    X, H0, W, R = (np.asarray(v).astype(ct) for v in (X, initial_hidden_state, W, R))
    n = R.shape[1]
    if B is None:
        B = np.zeros((4 if linear_before_reset else 3) * n, dtype=ct)
    B = np.asarray(B).astype(ct)
    f, g = _activation_pair(activations)
    Ho = np.zeros((X.shape[0], n), dtype=ct)
    for b in range(X.shape[0]):
        Ho[b] = _step(X[b], H0[b], W, R, B, f, g, _clip_function(clip), linear_before_reset)
    return Ho.astype(dtype)


def _sequence(X, H0, lengths, W, R, B, reversed_, f, g, clip, linear_before_reset, A):
    """Y (N, D, S, Hs) and Ho (N, D, Hs) in the compute dtype; H0 (N, D, Hs), W (D, 3Hs, I),
    R (D, 3Hs, Hs), B (D, 3Hs or 4Hs); reversed_[d] says whether direction d runs backwards."""
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
                H = _step(X[b, t], H, W[d], R[d], B[d], f, g, clip, linear_before_reset, a)
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
):
    """Y (N, D, S, Hs), Ho (N, D, Hs); direction index 0 forward, 1 reverse when bidirectional."""
    X = np.asarray(X)
    dtype = X.dtype
    ct = _compute_dtype(dtype)
    X, H0, W, R, B = (np.asarray(v).astype(ct) for v in (X, initial_hidden_state, W, R, B))
    lengths = [int(L) for L in np.asarray(sequence_lengths)]
    reversed_ = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[direction.lower()]
    f, g = _activation_pair(activations)
    Y, Ho = _sequence(X, H0, lengths, W, R, B, reversed_, f, g, _clip_function(clip), linear_before_reset, None)
    return Y.astype(dtype), Ho.astype(dtype)


def augru_sequence(X, initial_hidden_state, sequence_lengths, W, R, B, A, *, hidden_size=None):
    """Y, Ho of a forward GRU (sigmoid, tanh, no clip, linear_before_reset False) whose update gate
    is z' = (1 - a) z. Documented layout (h0 of rank 2): Y (N, S, Hs), Ho (N, Hs); OpenVINO layout
    (h0 (N, 1, Hs)): Y (N, 1, S, Hs), Ho (N, 1, Hs)."""
    X = np.asarray(X)
    dtype = X.dtype
    ct = _compute_dtype(dtype)
    X, H0, W, R, B, A = (np.asarray(v).astype(ct) for v in (X, initial_hidden_state, W, R, B, A))
    documented = H0.ndim == 2
    if documented:  # to the OpenVINO layout, num_directions = 1
        H0, W, R, B = H0[:, None], W[None], R[None], B[None]
    lengths = [int(L) for L in np.asarray(sequence_lengths)]
    f, g = _activation_pair(("sigmoid", "tanh"))
    Y, Ho = _sequence(X, H0, lengths, W, R, B, [False], f, g, _clip_function(math.inf), False, A)
    if documented:
        Y, Ho = Y[:, 0], Ho[:, 0]
    return Y.astype(dtype), Ho.astype(dtype)
