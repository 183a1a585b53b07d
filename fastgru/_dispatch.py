"""From a validated call to the kernel core: canonical arrays, kernel variant, outputs.

Every op is brought to the sequence form of ``_kernels.gru`` (the cell is one step with
sequence_lengths = 1, AUGRU a forward sequence with attention), computed in float32 (float16,
bfloat16, float32) or float64, and its outputs are cast back to T1 and reshaped to the op's layout.
Inputs are only read: conversions make new arrays, never write into the caller's.
"""

import numba
import numpy as np

from ._kernels.gru import run_parallel, run_serial

#: Below this many floating-point operations in the recurrence a call runs on the calling thread:
#: entering a parallel region costs microseconds (PERF_NOTES.md, "No fork/join per time step"),
#: more than the whole computation at this size (~1e5 flops is ~5 µs of one core's work).
SERIAL_BELOW_FLOPS = 100_000


def compute_dtype(dtype):
    """float64 runs in float64; float16, bfloat16 and float32 in float32 (SPEC.md §5)."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def run(spec, arrays):
    """Compute a validated call. ``arrays`` maps specification names to NumPy arrays.

    Returns the op's outputs: Ho for the cell, (Y, Ho) for the sequences, in T1 and the op's layout.
    """
    ct = compute_dtype(spec.dtype)
    n, s, i, h = spec.batch_size, spec.seq_length, spec.input_size, spec.hidden_size
    d = spec.num_directions
    gates = 4 if spec.linear_before_reset else 3

    X = np.asarray(arrays["X"], dtype=ct).reshape(n * s, i)
    W = np.asarray(arrays["W"], dtype=ct).reshape(d * 3 * h, i)
    xw = np.matmul(X, W.T).reshape(n, s, d * 3 * h)
    rt = np.ascontiguousarray(np.asarray(arrays["R"], dtype=ct).reshape(d, 3 * h, h).transpose(0, 2, 1))
    bias = np.zeros((d, 4 * h), dtype=ct)
    if "B" in arrays:
        bias[:, : gates * h] = np.asarray(arrays["B"]).reshape(d, gates * h)
    h0 = np.ascontiguousarray(arrays["initial_hidden_state"], dtype=ct).reshape(n, d, h)
    if "sequence_lengths" in arrays:
        lengths = np.asarray(arrays["sequence_lengths"], dtype=np.int64)
    else:
        lengths = np.ones(n, dtype=np.int64)
    if "A" in arrays:
        att = np.ascontiguousarray(arrays["A"], dtype=ct).reshape(n, s)
    else:
        att = np.zeros((0, 0), dtype=ct)
    reversed_ = np.array([spec.direction == "reverse", True][:d], dtype=np.bool_)

    y = np.empty((n, d, s, h), dtype=ct)
    ho = np.empty((n, d, h), dtype=ct)
    args = (xw, rt, bias, h0, lengths, reversed_, spec.linear_before_reset, ct.type(spec.clip),
            spec.f_code, spec.g_code, att, y, ho)
    threads = numba.get_num_threads()
    flops = 2 * n * s * d * 3 * h * h
    if threads == 1 or n * d <= 1 or flops < SERIAL_BELOW_FLOPS:
        run_serial(*args, 1)
    else:
        run_parallel(*args, min(n, -(-threads // d)))

    if ct != spec.dtype:
        y, ho = y.astype(spec.dtype), ho.astype(spec.dtype)
    if spec.layout == "cell":
        return ho.reshape(n, h)
    if spec.layout == "augru2d":
        return y.reshape(n, s, h), ho.reshape(n, h)
    return y, ho
