"""From checked inputs to the kernels: the packed weights of one op, the kernels' flat arrays and
call descriptor, and the results in T1 and the op's layout.

Every op is brought to the sequence form of the kernels (``_kernels/layout.py``: the cell is one
step, AUGRU a forward sequence with attention), computed in float32 (float16, bfloat16, float32)
or float64. Inputs are only read: conversions copy into the calling thread's kept buffers
(``_scratch``), never into the caller's arrays.
"""

import functools
import math
import threading

import numpy as np

from . import _scratch
from ._codes import REVERSED
from ._compact import (
    THREE_PASS,
    TILE_MIN_ROWS,
    check_weight_dtype,
    pack_compact,
    tile_copies,
    tile_kernel,
    with_tile_copies,
)
from ._kernels.layout import CALL_FIELDS, pack_weights, packed_size
from ._kernels.memory import aligned
from ._plan import LENGTH_DTYPES, NO_ROWS, plan_of, run_planned

_F32, _F64, _I64 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64)


def compute_dtype(dtype):
    """float64 runs in float64; float16, bfloat16 and float32 in float32."""
    return _F64 if dtype == _F64 else _F32


def canonical_strides(n_dirs, n_steps, n_inputs, n_hidden):
    """The strides of the call descriptor for the ops' C-contiguous layouts: X (N, S, I), states
    (N, D, H) and Y (N, D, S, H); the cell's (N, I), (N, H) and AUGRU's 2-D layouts have the same."""
    return {
        "x_row": n_steps * n_inputs,
        "x_step": n_inputs,
        "y_row": n_dirs * n_steps * n_hidden,
        "y_dir": n_steps * n_hidden,
        "y_step": n_hidden,
        "s_row": n_dirs * n_hidden,
        "s_dir": n_hidden,
    }


def result_shapes(spec, n, s):
    """Shapes of the op's results: (Ho,) for the cell, (Y, Ho) for the sequences."""
    d, h = spec.num_directions, spec.hidden_size
    if spec.layout == "cell":
        return ((n, h),)
    if spec.layout == "augru2d":
        return (n, s, h), (n, h)
    return (n, d, s, h), (n, d, h)


def packing_inputs(spec, W, R, B):
    """W (D, 3H, I), R (D, 3H, H) and B (D, 3H or 4H; zeros when None) as the packing kernels read
    them: ``kernel_ready`` and reshaped to the sequences' ranks."""
    h, d, i = spec.hidden_size, spec.num_directions, spec.input_size
    W, R, B = kernel_ready(spec, W, R, B)
    return W.reshape(d, 3 * h, i), R.reshape(d, 3 * h, h), B.reshape(d, -1)


def kernel_ready(spec, *arrays):
    """``arrays`` (B None: ``absent_bias``) as the kernels read them, in their shapes: C-contiguous,
    of the compute dtype and writeable (Numba compiles other kernels for read-only arrays); the
    caller's arrays themselves when they are so (the kernels only read them), else copies."""
    ct = compute_dtype(spec.dtype)

    def read(a):
        a = np.asarray(a, dtype=ct, order="C")
        return a if a.flags.writeable else a.copy()

    return tuple(absent_bias(spec, ct) if a is None else read(a) for a in arrays)


def absent_bias(spec, dtype):
    """The B of a call without one (GRUCell-3's B is optional): zeros of the shape a given B has,
    4H with linear_before_reset (Rbh is a block of its own), else 3H, per direction: (D, 4H or 3H),
    or (4H or 3H,) for the cell, whose B has one axis."""
    gates = 4 if spec.linear_before_reset else 3
    shape = (gates * spec.hidden_size,) if spec.layout == "cell" else (spec.num_directions, gates * spec.hidden_size)
    return np.zeros(shape, dtype=dtype)


class Packed:
    """The weights of one op in the kernels' layout, made once, and the per-call path from checked
    inputs to results, kept short: it is most of a small call's time. A runner of plans
    (``_plan.Plan``): one layer, its own."""

    direct = False

    def __init__(self, spec, W, R, B=None, weight_dtype=None):
        weight_dtype = check_weight_dtype(spec.op, weight_dtype, spec.dtype)
        self._describe(spec)
        ct, h, d, i = self.compute_dtype, self.n_hidden, self.n_dirs, self.n_inputs
        W, R, B = packing_inputs(spec, W, R, B)
        if weight_dtype in (None, THREE_PASS):
            self.weights = aligned(packed_size(d, i, h, ct.itemsize), ct)
            pack_weights(W, R, B, self.weights)
        else:  # bfloat16 or int8 (``_compact``)
            self.weights = pack_compact(spec.op, weight_dtype, W, R, B)
        tile_call = tile_kernel(weight_dtype)
        if tile_call:  # products of 16 rows or more on the matrix tiles (``_compact``)
            copies = tile_copies(weight_dtype, W, R)
            self.weights, offset = with_tile_copies(self.weights, copies)
            self._attributes.update(tiles=offset, tile_call=tile_call)
        #: What the kernels read W and R as: 'float32', 'float64', 'bfloat16' or 'int8' ('bfloat16x3':
        #: float32, and three bfloat16 products on the matrix tiles).
        self.weight_dtype = weight_dtype or ct.name
        #: The element type of the weights, which picks the drivers' callbacks.
        self.like = self.weights[:0]

    def _describe(self, spec):
        """Everything but the weights: sizes, attributes and the per-call constants."""
        ct = compute_dtype(spec.dtype)
        h, d, i = spec.hidden_size, spec.num_directions, spec.input_size
        self.spec = spec
        self.compute_dtype = ct
        self.n_dirs, self.n_hidden, self.n_inputs = d, h, i
        self.clip = spec.clip
        self._attributes = {
            "n_inputs": i,
            "n_hidden": h,
            "n_dirs": d,
            "reverse": REVERSED[spec.direction],
            "lbr": int(spec.linear_before_reset),
            "f_code": spec.f_code,
            "g_code": spec.g_code,
            "tiles": 0,  # no matrix tiles (``__init__`` sets them)
            "tile_call": 0,
        }
        self._cell = spec.layout == "cell"
        self._native = spec.dtype == ct
        #: The kernels' att of a plain GRU. Writeable all the same: Numba compiles another kernel
        #: for read-only arrays, and GRU and AUGRU calls would then not share one.
        self._no_att = np.zeros((0, 0), dtype=ct)
        #: Sizes and shapes by call shape (``remember``).
        self.memo = {}
        #: Each thread's plans (``_plan.Plan``) by call shape.
        self.plans = threading.local()
        self.packs, self.offsets = (self,), (0,)

    def compute(self, X, h0, lengths, att=None, out=None):
        """Run checked inputs; returns (Ho,) for the cell, else (Y, Ho), in T1 and the op's layout.

        X is (N, I) for the cell, else (N, S, I); lengths an integer array (N,), or None for every
        step; ``out`` checked outputs (``_validate.check_out``) or None. Any T1 memory layout.
        Written for a short path: it is most of a small call's time.
        """
        ct = self.compute_dtype
        n = X.shape[0]
        s = 1 if self._cell else X.shape[1]
        if not self._native:  # float16 and bfloat16: computed in float32 in kept buffers, rounded to T1 once
            results = tuple(
                _scratch.kept(f"result{k}", math.prod(shape), ct)[: math.prod(shape)].reshape(shape)
                for k, shape in enumerate(self.result_shapes(n, s))
            )
        elif out is None:
            results = tuple(np.empty(shape, ct) for shape in self.result_shapes(n, s))
        else:
            results = out
        X, h0 = _scratch.converted("X", X, ct), _scratch.converted("h0", h0, ct)
        if lengths is not None and lengths.dtype not in LENGTH_DTYPES:
            lengths = _scratch.lengths(lengths, n, s)  # the checked values, in int64 (the cast is exact)
        if att is not None:
            att = _scratch.converted("A", att, ct)
        self.run(n, s, (X, h0, lengths, NO_ROWS, att, results[0], results[-1]))
        if self._native:
            return results
        if out is None:
            return tuple(r.astype(self.spec.dtype) for r in results)
        for dst, src in zip(out, results):
            np.copyto(dst, src, casting="unsafe")
        return out

    def run(self, n, s, arrays, strides=None, keep=False, path=None):
        """The kernel call on the kernels' ``arrays`` (X, h0, lengths, state_rows, att, y, ho; see
        ``_kernels/layout.py``; lengths None: every step; att None: none) of N rows and S steps;
        returns the path of each layer as it ran (``_paths.run``).

        ``strides`` the layout (see ``canonical_strides``; None: that one). ``keep``: a row of length
        0 keeps its initial state in ho, instead of zero, for streams fed chunk by chunk. ``path``
        forces one of ``_paths.PATHS`` (to compile it ahead, or in tests); else the road picks it.
        """
        return run_planned(self, arrays, n, s, strides, int(keep), path)

    def plan_of(self, X, h0, lengths, A, out):
        """The plan a call that passed the full checks ran on, for its next calls of that shape (which
        take no checks: ``planned``), or None when its arrays are not ones the kernels take as they
        are: not ndarrays (lists), or of another dtype or layout, which ``compute`` converts."""
        plan = plan_of(self, (X, h0, A, *(out or ())), lengths, self._cell)
        if plan is None:
            return None
        results = out if out is not None else tuple(np.empty(shape, self.compute_dtype) for shape in plan.results)
        plan.expect(plan.complete((X, h0, lengths, NO_ROWS, A, results[0], results[-1])))
        return plan

    # ------------------------------------------------------------------ what a plan asks of its runner

    def layer_calls(self, n, s, strides, keep):
        """Each layer's call descriptor as a function of ``hoist`` (``_plan.Plan``): this op's."""
        return [functools.partial(self.call, n, s, strides=strides, keep=keep)]

    def wave_bytes(self, n, s):
        """An op is one layer: it never runs as a wavefront."""
        return None

    def call(self, n, s, hoist, strides, keep):
        """The call descriptor (``_kernels/layout.py``) of N rows of S steps; ``strides`` a tuple of
        (name, value) pairs, or None for ``canonical_strides``."""
        strides = dict(strides) if strides else canonical_strides(self.n_dirs, s, self.n_inputs, self.n_hidden)
        fields = {**self._attributes, **strides, "n_rows": n, "seq_length": s, "keep": keep, "hoist": int(hoist)}
        fields.update(wait=0, post=0)  # no wavefront: a stack's plan sets them in its own copy
        if n < TILE_MIN_ROWS:  # fewer rows stay on the vector tiles (``_compact``)
            fields["tile_call"] = 0
        return np.array([fields[name] for name in CALL_FIELDS], dtype=_I64)

    def savings(self):
        """How many times fewer bytes the packed weights take than float32's would, for ``repr``."""
        floats = packed_size(self.n_dirs, self.n_inputs, self.n_hidden, _F32.itemsize) * _F32.itemsize
        return f"{floats / self.weights.nbytes:.1f}x less than float32"

    def flops(self, n, s):
        """2·N·S·D·3H·(I + H): the floating-point operations of the products."""
        return 6 * n * s * self.n_dirs * self.n_hidden * (self.n_hidden + self.n_inputs)

    def result_shapes(self, n, s):
        """``result_shapes`` of the op for N rows of S steps (a serving loop asks for the same)."""
        key = "results", n, s
        shapes = self.memo.get(key)
        if shapes is None:
            shapes = self.remember(key, result_shapes(self.spec, n, s))
        return shapes

    def remember(self, key, value):
        """Keep ``value`` in the memo of sizes and shapes per call shape (at most 256, then afresh)."""
        if len(self.memo) >= 256:
            self.memo.clear()
        self.memo[key] = value
        return value


class Unpacked(Packed):
    """The template of the function API's calls of one row and one step of one op's attributes and
    shapes: the caller's W, R and B are multiplied as they are by the direct drivers
    (``_kernels/direct.py``), which pack each panel in cache as they go, so nothing is packed ahead
    or kept, and nothing can go stale. A runner of plans, whose calls bring their weights."""

    direct = True

    def __init__(self, spec):
        self._describe(spec)
        self.weights = None
        self.weight_dtype = self.compute_dtype.name
        self.like = np.zeros(0, self.compute_dtype)
        #: An absent B's zeros (GRUCell-3's B is optional).
        self.no_bias = absent_bias(spec, self.compute_dtype)

    def compute_direct(self, X, h0, lengths, A, W, R, B):
        """The results ((Ho,) for the cell, else (Y, Ho)) of a checked call, in T1 and the op's layout."""
        ct = self.compute_dtype
        results = tuple(np.empty(shape, ct) for shape in self.result_shapes(1, 1))
        X, h0 = _scratch.converted("X", X, ct), _scratch.converted("h0", h0, ct)
        W, R, B = kernel_ready(self.spec, W, R, B)
        if lengths is not None and lengths.dtype not in LENGTH_DTYPES:
            lengths = _scratch.lengths(lengths, 1, 1)
        att = None if A is None else _scratch.converted("A", A, ct)
        arrays = (X, h0, lengths, att, results[0], results[-1], W, R, B)
        run_planned(self, arrays, 1, 1)
        return results if self._native else tuple(r.astype(self.spec.dtype) for r in results)

    def plan_of(self, X, h0, lengths, W, R, B, A):
        """The plan a checked call ran on, for its next calls (``_plan.Plan.direct``), or None when its arrays
        are not ones the kernels take as they are (as ``Packed.plan_of``)."""
        plan = plan_of(self, (X, h0, W, R, B, A), lengths, True)
        if plan is None:
            return None
        results = [np.empty(shape, self.compute_dtype) for shape in plan.results]
        B = self.no_bias if B is None else B
        plan.expect(plan.complete((X, h0, lengths, A, results[0], results[-1], W, R, B)))
        return plan

    def layer_calls(self, n, s, strides, keep):
        return [functools.partial(self.call, 1, 1, strides=None, keep=0)]
