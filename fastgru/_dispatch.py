"""From checked inputs to the kernels: the packed weights of one op, the kernels' flat arrays and
call descriptor, and the results in T1 and the op's layout.

Every op is brought to the sequence form of the kernels (``_kernels/layout.py``: the cell is one
step, AUGRU a forward sequence with attention), computed in float32 (float16, bfloat16, float32)
or float64. Inputs are only read: conversions copy into the calling thread's kept buffers
(``_scratch``), never into the caller's arrays.
"""

import copy
import math

import numpy as np

from . import _paths, _scratch
from ._codes import REVERSED
from ._compact import check_weight_dtype, pack_compact
from ._kernels.direct import direct_scratch
from ._kernels.layout import CALL_FIELDS, pack_weights, packed_size
from ._kernels.memory import aligned
from ._kernels.planned import task_callback

_F32, _F64, _I64 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64)
#: The sequence lengths' dtypes that the short paths (``DirectPlan``, ``_plan.Plan``) take as they
#: are; others take the full path, which converts them.
LENGTH_DTYPES = (np.dtype(np.int32), _I64)

#: The kernels' state_rows when batch row b has state row b.
NO_ROWS = np.zeros(0, dtype=_I64)


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
    them: C-contiguous, of the compute dtype and writeable (Numba compiles other kernels for
    read-only arrays); the caller's arrays themselves when they are so (the kernels only read
    them), else copies."""
    ct = compute_dtype(spec.dtype)
    h, d, i = spec.hidden_size, spec.num_directions, spec.input_size

    def read(a, shape):
        a = np.asarray(a, dtype=ct, order="C")
        return (a if a.flags.writeable else a.copy()).reshape(shape)

    B = absent_bias(spec, ct) if B is None else read(B, (d, -1))
    return read(W, (d, 3 * h, i)), read(R, (d, 3 * h, h)), B


def absent_bias(spec, dtype):
    """The B of a call without one (GRUCell-3's B is optional): zeros of the shape a given B has,
    (D, 4H) with linear_before_reset (Rbh is a block of its own), else (D, 3H)."""
    gates = 4 if spec.linear_before_reset else 3
    return np.zeros((spec.num_directions, gates * spec.hidden_size), dtype=dtype)


class Packed:
    """The weights of one op in the kernels' layout, made once, and the per-call path from checked
    inputs to results, kept short: it is most of a small call's time."""

    def __init__(self, spec, W, R, B=None, weight_dtype=None):
        weight_dtype = check_weight_dtype(spec.op, weight_dtype, spec.dtype)
        self._describe(spec)
        ct, h, d, i = self.compute_dtype, self.n_hidden, self.n_dirs, self.n_inputs
        W, R, B = packing_inputs(spec, W, R, B)
        if weight_dtype is None:
            self.weights = aligned(packed_size(d, i, h, ct.itemsize), ct)
            pack_weights(W, R, B, self.weights)
        else:  # bfloat16 or int8 (``_compact``)
            self.weights = pack_compact(spec.op, weight_dtype, W, R, B)
        #: What the kernels read W and R as: 'float32', 'float64', 'bfloat16' or 'int8'.
        self.weight_dtype = weight_dtype or ct.name
        self._tasks = {}  # ``tasks``' addresses by path

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
        }
        self._cell = spec.layout == "cell"
        self._native = spec.dtype == ct
        #: The kernels' att of a plain GRU. Writeable all the same: Numba compiles another kernel
        #: for read-only arrays, and GRU and AUGRU calls would then not share one.
        self._no_att = np.zeros((0, 0), dtype=ct)
        self._augru2d = spec.layout == "augru2d"
        self._ones = np.ones(1, dtype=np.int64)
        #: Sizes, shapes and call descriptors by call shape (``remember``).
        self.memo = {}

    def compute(self, X, h0, lengths, att=None, out=None):
        """Run checked inputs; returns (Ho,) for the cell, else (Y, Ho), in T1 and the op's layout.

        X is (N, I) for the cell, else (N, S, I); lengths an integer array (N,), or None for every
        step; ``out`` checked outputs (``_validate.check_out``) or None. Any T1 memory layout.
        Written for a short path: it is most of a small call's time.
        """
        ct, h = self.compute_dtype, self.n_hidden
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
        if not (X.dtype is ct and X.flags.carray):
            X = _scratch.converted("X", X, ct)
        if not (h0.dtype is ct and h0.flags.carray):
            h0 = _scratch.converted("h0", h0, ct)
        if self._cell:  # the kernels' ranks: a sequence of one step
            ho = results[0].reshape(n, 1, h)
            y, X, h0 = ho.reshape(n, 1, 1, h), X.reshape(n, 1, self.n_inputs), h0.reshape(n, 1, h)
            lengths = self._ones_for(n)
        elif self._augru2d:
            y, ho, h0 = results[0].reshape(n, 1, s, h), results[1].reshape(n, 1, h), h0.reshape(n, 1, h)
        else:
            y, ho = results
        if lengths is None or lengths.dtype is not _I64 or not lengths.flags.c_contiguous:
            lengths = _scratch.lengths(lengths, n, s)  # int32, as ONNX and torch pass them: no allocation
        if att is None:
            att = self._no_att
        else:
            att = _scratch.converted("A", att, ct).reshape(n, s)
        self._run_kernel(n, s, (X, h0, lengths, NO_ROWS, att, y, ho))
        if self._native:
            return results
        if out is None:
            return tuple(r.astype(self.spec.dtype) for r in results)
        for dst, src in zip(out, results):
            np.copyto(dst, src, casting="unsafe")
        return out

    def _run_kernel(self, n, s, arrays):
        """The kernel call of ``compute``."""
        _paths.run(self, None, n, s, arrays, None, 0)

    def run(self, n, s, arrays, strides=None, keep=False, path=None):
        """The kernel call on the kernels' ``arrays`` (X, h0, lengths, state_rows, att, y, ho; see
        ``_kernels/layout.py``) of N rows and S steps; returns the name of the kernel that ran.

        ``strides`` the layout (see ``canonical_strides``; None: that one). ``keep``: a row of length
        0 keeps its initial state in ho, instead of zero, for streams fed chunk by chunk. ``path``
        forces one of ``_paths.PATHS`` (to compile it ahead, or in tests); else ``_paths.choose``
        picks it.
        """
        return _paths.run(self, path, n, s, arrays, strides, int(keep))

    def call(self, n, s, hoist, strides, keep):
        """The call descriptor (``_kernels/layout.py``) of N rows of S steps; ``strides`` a tuple of
        (name, value) pairs, or None for ``canonical_strides``."""
        strides = dict(strides) if strides else canonical_strides(self.n_dirs, s, self.n_inputs, self.n_hidden)
        fields = {**self._attributes, **strides, "n_rows": n, "seq_length": s, "keep": keep, "hoist": hoist}
        fields.update(wait=0, post=0)  # no wavefront: a stack sets them in its own copy
        return np.array([fields[name] for name in CALL_FIELDS], dtype=_I64)

    def tasks(self, path):
        """The address of the callback that runs a task of ``path``'s driver on these weights: a block
        of the parallel driver's, a worker of a split row (split and pair), else 0; compiled, or
        loaded from the cache, at its first call (``planned.task_callback``)."""
        address = self._tasks.get(path)
        if address is None:
            address = self._tasks[path] = task_callback(path, self.weights)
        return address

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

    def _ones_for(self, n):
        """sequence_lengths of ``n`` rows of one step: ones kept across calls (a cell stepped in a
        loop allocates nothing), grown when a larger batch comes."""
        if self._ones.shape[0] < n:
            self._ones = np.ones(n, dtype=np.int64)
        return self._ones


class Unpacked(Packed):
    """The weights of a one-off call of one row and one step (the function API's): the caller's W, R
    and B as the kernels read them (``packing_inputs``: themselves when they can), multiplied as they
    are by ``run_direct``, which packs each panel in cache as it goes. Nothing is packed ahead or
    kept, so nothing can go stale. ``compute`` only: the other drivers need packed weights.

    ``Unpacked(spec)`` is a call's template, without weights (``weights`` None): ``with_weights``
    makes the call's own from it, a shallow copy that shares its memo of call descriptors."""

    def __init__(self, spec):
        self._describe(spec)
        self.weights = None
        self.weight_dtype = self.compute_dtype.name
        #: The direct driver's float scratch and its dtype (``_paths.direct``).
        self._scratch = (
            direct_scratch(self.n_inputs, self.n_hidden, self.compute_dtype.itemsize).end,
            self.compute_dtype,
        )
        #: What ``_paths.direct`` chooses by: directions, hidden units, the products' flops.
        self._shares = self.n_dirs, self.n_hidden, self.flops(1, 1)

    def with_weights(self, W, R, B):
        """A copy of this template that computes with W, R and B."""
        call = copy.copy(self)
        call.weights = packing_inputs(self.spec, W, R, B)
        return call

    def _run_kernel(self, n, s, arrays):
        self.run(n, s, arrays)

    def run(self, n, s, arrays, strides=None, keep=False, path=None):
        """``Packed.run`` for one row and one step in the op's layout (``strides`` None, ``keep``
        False), by ``_paths.direct``; ``path`` 'serial' or 'pair' forces one."""
        X, h0, lengths, _, att, y, ho = arrays
        direct_arrays = X, h0, lengths, att, y, ho
        return _paths.direct(
            direct_arrays, self.weights, self._direct_call(), self.clip, self._scratch, *self._shares, path
        )

    def _direct_call(self):
        call = self.memo.get("direct")
        if call is None:
            call = self.remember("direct", self.call(1, 1, 0, None, 0))
        return call


class DirectPlan:
    """The short path of the function API's calls of one row and one step that look like one that
    passed the full checks (same op, attributes and shapes of X, W and R: the caller's key): each
    array's type, dtype, layout and shape compared with that call's, the sequence length with
    [0, 1], then ``run_direct``. Returns the results, or None when anything differs and nothing was
    written: the caller then runs the full checks, which say what is wrong.

    Made only for arrays the kernels take as they are (T1 float32 or float64, C-contiguous, aligned
    and writeable): the plan passes them on without a copy, as ``Unpacked`` would."""

    __slots__ = (
        "dtype",
        "shapes",
        "views",
        "result_shapes",
        "lengths",
        "no_att",
        "no_bias",
        "call",
        "clip",
        "scratch",
        "shares",
    )

    def __init__(self, template, X, h0, lengths, W, R, B, A):
        self.dtype = template.compute_dtype
        #: X, h0, W, R, B (None: zero), sequence_lengths (None: the cell's), A (None: a GRU).
        self.shapes = tuple(None if a is None else a.shape for a in (X, h0, W, R, B, lengths, A))
        self.result_shapes = template.result_shapes(1, 1)
        #: What makes X, h0, W, R, B, Y and Ho the views run_direct takes, (1, 1, I), (1, D, H),
        #: (D, 3H, I), (D, 3H, H), (D, 3H or 4H), (1, D, 1, H) and (1, D, H): axes of length one in
        #: front of the op's shapes (an index, cheaper than a reshape), or none.
        ranks = 3, 3, 3, 3, 2, 4, 3
        given = [X.ndim, h0.ndim, W.ndim, R.ndim, 1 if B is None else B.ndim]
        given += [len(shape) for shape in (self.result_shapes[0], self.result_shapes[-1])]
        self.views = tuple((None,) * (rank - ndim) for rank, ndim in zip(ranks, given))
        self.lengths = template._ones_for(1)  # the cell's: one step; only read
        self.no_att = template._no_att
        self.call, self.clip, self.scratch = template._direct_call(), template.clip, template._scratch
        self.shares = template._shares
        self.no_bias = absent_bias(template.spec, self.dtype) if B is None else None

    @classmethod
    def of(cls, template, X, h0, lengths, W, R, B, A):
        """The plan of a call that passed the full checks (its arrays as the caller gave them), or
        None when they are not ones the kernels take as they are."""
        if template.spec.dtype is not template.compute_dtype:
            return None
        arrays = [a for a in (X, h0, lengths, W, R, B, A) if a is not None]
        if not all(type(a) is np.ndarray and a.flags.carray for a in arrays):
            return None
        if any(a.dtype is not template.compute_dtype for a in (X, h0, W, R, B, A) if a is not None):
            return None
        return cls(template, X, h0, lengths, W, R, B, A)

    def __call__(self, X, h0, lengths, W, R, B, A):
        """The results ((Ho,) for the cell, else (Y, Ho)), or None: see the class."""
        dt = self.dtype
        x_shape, h_shape, w_shape, r_shape, b_shape, n_shape, a_shape = self.shapes
        if not (_fits(X, x_shape, dt) and _fits(h0, h_shape, dt) and _fits(W, w_shape, dt) and _fits(R, r_shape, dt)):
            return None
        if b_shape is None:
            if B is not None:
                return None
            B = self.no_bias
        elif not _fits(B, b_shape, dt):
            return None
        if n_shape is None:
            if lengths is not None:
                return None
            lengths = self.lengths
        elif (
            type(lengths) is np.ndarray
            and lengths.dtype in LENGTH_DTYPES
            and lengths.shape == n_shape
            and 0 <= lengths[0] <= 1
        ):
            lengths = _scratch.lengths(lengths, 1, 1)
        else:
            return None
        if a_shape is None:
            if A is not None:
                return None
            att = self.no_att
        elif _fits(A, a_shape, dt):
            att = A.reshape(1, 1)  # (N, S, 1)
        else:
            return None
        x, h, w, r, b, y, ho = self.views
        results = tuple([np.empty(shape, dt) for shape in self.result_shapes])
        X, h0, W, R, B, y, ho = X[x], h0[h], W[w], R[r], B[b], results[0][y], results[-1][ho]
        n_dirs, n_hidden, flops = self.shares
        if n_dirs > 1 or not _paths.pair_sized(n_hidden, flops):  # never shared
            work = _scratch.work(self.scratch[0], 0, dt)[0]  # the kernel at once: Python is most of a small call
            _paths.run_direct(X, h0, lengths, att, y, ho, W, R, B, self.call, self.clip, work)
        else:
            _paths.direct((X, h0, lengths, att, y, ho), (W, R, B), self.call, self.clip, self.scratch, *self.shares)
        return results


def _fits(a, shape, dtype):
    """Whether ``a`` is an ndarray of this shape and dtype that the kernels take as it is."""
    return type(a) is np.ndarray and a.dtype is dtype and a.shape == shape and a.flags.carray
