"""A plain NumPy reference of GRUCell-3, GRUSequence-5 and AUGRUSequence-10 (SPEC.md §1-§5).

Written to be read against the specification, not to be fast: one batch row and one step at a
time, the formulas of SPEC.md §3 as they stand. It imports nothing from fastgru. float16 and
bfloat16 are computed in float32 and rounded back, float32 in float32, float64 in float64.
"""

import math

import numpy as np


def _compute_dtype(dtype):
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def _activation(name):
    name = name.lower()
    if name == "relu":
        return lambda v: np.where(v < 0, 0, v).astype(v.dtype)  # keeps NaN
    if name == "sigmoid":
        return lambda v: (1 / (1 + np.exp(-v))).astype(v.dtype)
    if name == "tanh":
        return np.tanh
    raise ValueError(name)


def _cell(x, h, W, R, B, f, g, clip, linear_before_reset, a=None):
    """One step of one row: x (I,), h (H,), W (3H, I), R (3H, H), B (3H,) or (4H,); SPEC.md §3."""
    n = h.shape[0]
    Wz, Wr, Wh = W[:n], W[n:2 * n], W[2 * n:3 * n]
    Rz, Rr, Rh = R[:n], R[n:2 * n], R[2 * n:3 * n]

    def clipped(v):
        return np.clip(v, -clip, clip) if clip else v

    z = f(clipped(x @ Wz.T + h @ Rz.T + B[:n]))
    r = f(clipped(x @ Wr.T + h @ Rr.T + B[n:2 * n]))
    if linear_before_reset:
        hh = g(clipped(x @ Wh.T + r * (h @ Rh.T + B[3 * n:4 * n]) + B[2 * n:3 * n]))
    else:
        hh = g(clipped(x @ Wh.T + (r * h) @ Rh.T + B[2 * n:3 * n]))
    if a is not None:
        z = (1 - a) * z
    return (1 - z) * hh + z * h


def _clip_value(clip):
    return 0.0 if clip == 0 or math.isinf(clip) else float(clip)


def gru_cell(X, initial_hidden_state, W, R, B=None, *, hidden_size=None, activations=("sigmoid", "tanh"),
             activations_alpha=(), activations_beta=(), clip=math.inf, linear_before_reset=False):
    X = np.asarray(X)
    dtype = X.dtype
    ct = _compute_dtype(dtype)
    W, R, H0 = (np.asarray(v, dtype=ct) for v in (W, R, initial_hidden_state))
    n = R.shape[-1]
    B = np.zeros((4 if linear_before_reset else 3) * n, dtype=ct) if B is None else np.asarray(B, dtype=ct)
    if not linear_before_reset:
        B = np.concatenate([B[:3 * n], np.zeros(n, dtype=ct)])
    f, g = (_activation(name) for name in activations)
    Xc = X.astype(ct)
    out = np.empty(H0.shape, dtype=ct)
    for b in range(Xc.shape[0]):
        out[b] = _cell(Xc[b], H0[b], W, R, B, f, g, _clip_value(clip), linear_before_reset)
    return out.astype(dtype)


def gru_sequence(X, initial_hidden_state, sequence_lengths, W, R, B, *, hidden_size=None, direction="forward",
                 activations=("sigmoid", "tanh"), activations_alpha=(), activations_beta=(), clip=math.inf,
                 linear_before_reset=False, _attention=None):
    X = np.asarray(X)
    dtype = X.dtype
    ct = _compute_dtype(dtype)
    Xc = X.astype(ct)
    H0, W, R, B = (np.asarray(v, dtype=ct) for v in (initial_hidden_state, W, R, B))
    lengths = np.asarray(sequence_lengths).astype(np.int64)
    n_batch, seq_length = Xc.shape[:2]
    n_dirs, n = W.shape[0], R.shape[-1]
    f, g = (_activation(name) for name in activations)
    Y = np.zeros((n_batch, n_dirs, seq_length, n), dtype=ct)
    Ho = np.zeros((n_batch, n_dirs, n), dtype=ct)
    for d in range(n_dirs):
        reverse = direction.lower() == "reverse" or d == 1
        bias = B[d] if linear_before_reset else np.concatenate([B[d], np.zeros(n, dtype=ct)])
        for b in range(n_batch):
            length = int(lengths[b])
            h = H0[b, d]
            steps = range(length - 1, -1, -1) if reverse else range(length)
            for t in steps:
                a = None if _attention is None else _attention[b, t, 0].astype(ct)
                h = _cell(Xc[b, t], h, W[d], R[d], bias, f, g, _clip_value(clip), linear_before_reset, a)
                Y[b, d, t] = h
            if length > 0:
                Ho[b, d] = h  # Ho stays zero for a row of length 0 (SPEC.md §4)
    return Y.astype(dtype), Ho.astype(dtype)


def augru_sequence(X, initial_hidden_state, sequence_lengths, W, R, B, A, *, hidden_size=None):
    H0 = np.asarray(initial_hidden_state)
    documented = H0.ndim == 2
    if documented:
        H0, W, R, B = H0[:, None], np.asarray(W)[None], np.asarray(R)[None], np.asarray(B)[None]
    A = np.asarray(A, dtype=_compute_dtype(np.asarray(X).dtype))
    Y, Ho = gru_sequence(X, H0, sequence_lengths, W, R, B, _attention=A)
    if documented:
        return Y[:, 0], Ho[:, 0]
    return Y, Ho
