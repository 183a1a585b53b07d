"""From validated inputs to the kernel core: packed weights, canonical arrays, kernel variant.

Every op is brought to the sequence form of ``_kernels.gru`` (the cell is one step with
sequence_lengths = 1, AUGRU a forward sequence with attention), computed in float32 (float16,
bfloat16, float32) or float64, and its outputs are written in T1 and the op's layout.
Inputs are only read: conversions make new arrays, never write into the caller's.
"""

import numba
import numpy as np

from ._kernels.gru import pack_panels, run_parallel, run_serial, run_split

#: Below this many floating-point operations in the recurrence a call runs on the calling thread:
#: entering a parallel region costs microseconds (PERF_NOTES.md, "No fork/join per time step"),
#: more than the whole computation at this size (~1e5 flops is ~5 µs of one core's work).
SERIAL_BELOW_FLOPS = 100_000

#: A task computes X·Wᵀ + bias for all its rows and steps up front when the result fits in this
#: many bytes (it stays in L2); beyond, one step at a time (PERF_NOTES.md §5: hoisting helps at
#: batch 1, computing it per step at B=64, T=100, H=256).
HOIST_BYTES = 1 << 20

#: A single row (batch 1, one direction) is split over two threads from this hidden_size and this
#: many steps on. Measured (benchmarks/, and A/B runs of 100 steps, I=64): 1.3-1.6x faster at
#: H=512, 0.9-1.4x at H=256, none at H=128, where one core streams R from its L2 as fast as two
#: meet at their per-step barriers; a one-step cell pays the split's set-up without gaining.
SPLIT_FROM_HIDDEN = 256
SPLIT_FROM_STEPS = 16


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)

#: Constant kernel arguments, made once; the kernels only read them. They stay writeable all the
#: same: Numba compiles a separate kernel for read-only arrays, and GRU and AUGRU calls (whose A
#: is a fresh array) would then not share one.
_REVERSED = {direction: np.array(flags, dtype=np.bool_) for direction, flags in
             (("forward", [False]), ("reverse", [True]), ("bidirectional", [False, True]))}
_NO_ATTENTION = {_F32: np.zeros((0, 0), dtype=_F32), _F64: np.zeros((0, 0), dtype=_F64)}


def compute_dtype(dtype):
    """float64 runs in float64; float16, bfloat16 and float32 in float32 (SPEC.md §5)."""
    return _F64 if dtype == _F64 else _F32


class Packed:
    """The weights of one op in the kernels' layout, made once (see ``_kernels.gru``), and the
    per-call path from checked inputs to results, kept short: it is most of a small call's time."""

    def __init__(self, spec, W, R, B=None):
        ct = compute_dtype(spec.dtype)
        h, d = spec.hidden_size, spec.num_directions
        gates = 4 if spec.linear_before_reset else 3
        self.spec = spec
        self.compute_dtype = ct
        self.wp = pack_panels(W, d, h, ct)
        self.rp = pack_panels(R, d, h, ct)
        self.bias = np.zeros((d, 4, h), dtype=ct)
        if B is not None:
            self.bias[:, :gates] = np.asarray(B).reshape(d, gates, h)
        self.reversed = _REVERSED[spec.direction]
        self.clip = ct.type(spec.clip)
        self._no_att = _NO_ATTENTION[ct]
        self._cell = spec.layout == "cell"
        self._augru2d = spec.layout == "augru2d"
        self._native = spec.dtype == ct
        self._directions, self._hidden, self._inputs = d, h, spec.input_size
        self._lbr, self._f, self._g = spec.linear_before_reset, spec.f_code, spec.g_code

    def compute(self, X, h0, lengths, att=None, out=None):
        """Run checked inputs; returns (Ho,) for the cell, else (Y, Ho), in T1 and the op's layout.

        X is (N, I) for the cell, else (N, S, I); lengths an integer array (N,), or None for every
        step; ``out`` checked outputs (``_validate.check_out``) or None. Any T1 memory layout.
        Written for a short path: it is most of a small call's time.
        """
        ct, d, h, cell = self.compute_dtype, self._directions, self._hidden, self._cell
        n = X.shape[0]
        s = 1 if cell else X.shape[1]
        if out is not None and self._native:
            results = out
        elif cell:
            results = (np.empty((n, h), dtype=ct),)
        elif self._augru2d:
            results = (np.empty((n, s, h), dtype=ct), np.empty((n, h), dtype=ct))
        else:
            results = (np.empty((n, d, s, h), dtype=ct), np.empty((n, d, h), dtype=ct))
        # To the kernels' canonical shapes (reshapes of C-contiguous arrays: views, no copies).
        X, h0 = np.ascontiguousarray(X, dtype=ct), np.ascontiguousarray(h0, dtype=ct)
        if cell:
            ho = results[0].reshape(n, 1, h)
            y = ho.reshape(n, 1, 1, h)
            X, h0 = X.reshape(n, 1, self._inputs), h0.reshape(n, 1, h)
        elif self._augru2d:
            y, ho = results[0].reshape(n, 1, s, h), results[1].reshape(n, 1, h)
            h0 = h0.reshape(n, 1, h)
        else:
            y, ho = results
        lengths = np.full(n, s, dtype=np.int64) if lengths is None else np.ascontiguousarray(lengths, dtype=np.int64)
        att = self._no_att if att is None else np.ascontiguousarray(att, dtype=ct).reshape(n, s)
        args = (X, self.wp, self.rp, self.bias, h0, lengths, self.reversed, self._lbr, self.clip, self._f, self._g,
                att, y, ho)
        # Asking Numba for the thread count costs ~2 µs: only when the work may be shared.
        threads = 1 if 2 * n * s * d * 3 * h * h < SERIAL_BELOW_FLOPS else numba.get_num_threads()
        if threads > 1 and n * d == 1 and h >= SPLIT_FROM_HIDDEN and s >= SPLIT_FROM_STEPS:
            run_split(*args)
        else:
            blocks = 1 if threads == 1 else min(n, -(-threads // d))
            hoist = -(-n // blocks) * s * 3 * h * ct.itemsize <= HOIST_BYTES
            if threads == 1 or blocks == 1 and d == 1:
                run_serial(*args, hoist)
            else:
                run_parallel(*args, hoist, blocks)
        if results is out:
            return out
        if not self._native:
            results = tuple(r.astype(self.spec.dtype) for r in results)
            if out is not None:
                for dst, src in zip(out, results):
                    dst[...] = src
                return out
        return results


def result_shapes(spec, n, s):
    """Shapes of the op's results: (Ho,) for the cell, (Y, Ho) for the sequences."""
    d, h = spec.num_directions, spec.hidden_size
    if spec.layout == "cell":
        return ((n, h),)
    if spec.layout == "augru2d":
        return (n, s, h), (n, h)
    return (n, d, s, h), (n, d, h)
