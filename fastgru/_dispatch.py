"""From validated inputs to the kernel core: packed weights, canonical arrays, kernel variant.

Every op is brought to the sequence form of ``_kernels.gru`` (the cell is one step with
sequence_lengths = 1, AUGRU a forward sequence with attention), computed in float32 (float16,
bfloat16, float32) or float64, and its outputs are written in T1 and the op's layout.
Inputs are only read: conversions make new arrays, never write into the caller's.
"""

import threading

import numba
import numpy as np

from . import _partner
from ._kernels.gru import pack_weights, run_parallel, run_serial, scratch_size
from ._kernels.microkernel import lanes
from ._kernels.split import MAILBOX_SIZE, run_pair, run_split, split_scratch_size
from ._threading import release, requested, reserve

#: Below this many floating-point operations (2·N·S·D·3H·(I + H), the products) a call runs on
#: the calling thread: entering a parallel region costs 20-30 µs with TBB on these machines even
#: when its workers are warm (~100 µs after 50 ms idle; OpenMP 3 µs warm, 6-8 ms after idle).
#: Measured, serial against two threads: a b8 i256 h256 cell (6.3 MFLOP) 35 µs both ways, b16
#: (12.6 MFLOP) 83 against 54 µs; b8 s10 i64 h64 (3.9 MFLOP) 48 µs both, b16 88 against 65 µs.
SERIAL_BELOW_FLOPS = 6_000_000

#: A task computes X·Wᵀ + bias for all its rows and steps up front when the result fits in this
#: many bytes (it stays in L2); beyond, one step at a time (PERF_NOTES.md §5: hoisting helps at
#: batch 1, computing it per step at B=64, T=100, H=256).
HOIST_BYTES = 1 << 20

#: Scratch up to this many bytes is kept per Python thread and reused by its next calls (a serving
#: loop allocates nothing); a larger one (a big batch's states) is allocated for its call only.
KEEP_SCRATCH_BYTES = 4 << 20

#: A single row (batch 1, one direction) is split over two threads from this hidden_size and this
#: many steps on. Measured (benchmarks/, and A/B runs of 100 steps, I=64): 1.3-1.6x faster at
#: H=512, 0.9-1.4x at H=256, none at H=128, where one core streams R from its L2 as fast as two
#: meet at their per-step barriers; a one-step cell pays the split's set-up without gaining.
#: Re-measured after the kernels moved to offsets: 1.06x at H=128 alone, but 1.3-1.5x *slower* in
#: the benchmark's process, where other runtimes' spinning threads (ONNX Runtime's) hold the
#: other core and the per-step barriers wait for it.
SPLIT_FROM_HIDDEN = 256
SPLIT_FROM_STEPS = 16

#: With the partner thread (_partner.py), a single row is shared from this hidden_size and this
#: much work (2·S·3H·(I + H) flops) on, a one-step cell included: handing half of a call to the
#: spinning partner costs about a microsecond (a parallel region: see _partner.py). Measured
#: (b1, float32, prepared op, medians of interleaved runs, partner against one thread): cells
#: i256 h256 15.3 against 21.9 µs, i192 h192 11.6 against 13.6, i512 h128 11.6 against 14.6, but
#: i192 h64 10.3 against 9.9 and i128 h128 9.6 against 7.8; sequences of 100 steps, I=64: h128
#: 148-179 against 187-212 µs (in the benchmark's process 164-172 against 195-208), h64 92-97
#: against 73-79; h128 of 4 steps 13.9 against 13.8, of 16 steps 32-34 against 37.
PAIR_FROM_HIDDEN = 128
PAIR_FROM_FLOPS = 400_000

#: A one-row call of at least this many flops (about 100 µs of one core) wakes a sleeping partner
#: before it starts, rather than running alone (_partner.Partner): the partner's tens of
#: microseconds to wake up are then a small part of the call.
PAIR_WAKE_FLOPS = 20_000_000


_F32, _F64, _I64 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64)

#: The kernels' att of a plain GRU, made once; the kernels only read it. It stays writeable all
#: the same: Numba compiles a separate kernel for read-only arrays, and GRU and AUGRU calls (whose
#: A is a fresh array) would then not share one.
_NO_ATTENTION = {_F32: np.zeros((0, 0), dtype=_F32), _F64: np.zeros((0, 0), dtype=_F64)}


#: Each Python thread's kept scratch (_kept_scratch): {dtype char: floats, "i": int64}, and its
#: own mailbox (_own_mailbox).
_kept = threading.local()


def kernel_array(a, dtype):
    """``a`` as a C-contiguous, writeable array of ``dtype``: itself when it is one already, else a
    copy. The kernels only read it; a read-only array would make Numba compile (and cache) a
    second variant of every kernel for it, a multi-second stall in a serving process."""
    if a.dtype is dtype and a.flags.carray:  # C-contiguous, aligned and writeable already
        return a
    a = np.ascontiguousarray(a, dtype=dtype)
    return a if a.flags.writeable else a.copy()


def _aligned(size, dtype):
    """An empty 1-D array of ``size`` elements whose data starts on a 64-byte line (NumPy promises
    16 bytes; the kernels' vector loads and stores of scratch run 1.3-2x slower across lines)."""
    lanes = 64 // dtype.itemsize
    buf = np.empty(size + lanes, dtype=dtype)
    first = (-buf.ctypes.data // dtype.itemsize) % lanes
    return buf[first: first + size]


def _kept_scratch(ct, floats, ints):
    """``floats`` elements of dtype ``ct`` and ``ints`` int64s of scratch: the calling thread's own
    buffers when they are large enough (the common case, first: it is part of every call), else
    grown, or new ones beyond KEEP_SCRATCH_BYTES."""
    kept = _kept.__dict__
    work, iwork = kept.get(ct.char), kept.get("i")
    if work is not None and iwork is not None and work.shape[0] >= floats and iwork.shape[0] >= ints:
        return work, iwork
    if floats * ct.itemsize > KEEP_SCRATCH_BYTES:
        return _aligned(floats, ct), np.empty(ints, dtype=_I64)
    if work is None or work.shape[0] < floats:
        work = kept[ct.char] = _aligned(max(floats, 2 * (0 if work is None else work.shape[0])), ct)
    if iwork is None or iwork.shape[0] < ints:
        iwork = kept["i"] = np.empty(max(ints, 2 * (0 if iwork is None else iwork.shape[0])), dtype=_I64)
    return work, iwork


def _own_mailbox():
    """The calling thread's mailbox for ``run_pair`` without the partner: nobody serves it."""
    box = _kept.__dict__.get("mailbox")
    if box is None:
        box = _kept.mailbox = np.zeros(MAILBOX_SIZE, dtype=_I64)
    return box


def compute_dtype(dtype):
    """float64 runs in float64; float16, bfloat16 and float32 in float32 (SPEC.md §5)."""
    return _F64 if dtype == _F64 else _F32


class Packed:
    """The weights of one op in the kernels' layout, made once (see ``_kernels.gru``), and the
    per-call path from checked inputs to results, kept short: it is most of a small call's time."""

    def __init__(self, spec, W, R, B=None):
        ct = compute_dtype(spec.dtype)
        h, d, i = spec.hidden_size, spec.num_directions, spec.input_size
        B = np.zeros((d, 3 * h), dtype=ct) if B is None else kernel_array(B, ct).reshape(d, -1)
        self.spec = spec
        self.compute_dtype = ct
        self.weights = pack_weights(kernel_array(W, ct).reshape(d, 3 * h, i), kernel_array(R, ct).reshape(d, 3 * h, h),
                                    B, 2 * lanes(ct))
        # The kernels' scalar arguments, as Python ints and floats (_kernels/gru.py).
        self._reverse = {"forward": 0, "reverse": 1, "bidirectional": 2}[spec.direction]
        self._lbr, self._f, self._g, self._clip = int(spec.linear_before_reset), spec.f_code, spec.g_code, spec.clip
        self._no_att = _NO_ATTENTION[ct]
        self._cell = spec.layout == "cell"
        self._augru2d = spec.layout == "augru2d"
        self._native = spec.dtype == ct
        self._directions, self._hidden, self._inputs = d, h, i
        self._ones = np.ones(1, dtype=np.int64)
        self._memo = {}  # sizes and shapes by call shape (_remember)

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
        X, h0 = kernel_array(X, ct), kernel_array(h0, ct)
        if cell:
            ho = results[0].reshape(n, 1, h)
            y = ho.reshape(n, 1, 1, h)
            X, h0 = X.reshape(n, 1, self._inputs), h0.reshape(n, 1, h)
        elif self._augru2d:
            y, ho = results[0].reshape(n, 1, s, h), results[1].reshape(n, 1, h)
            h0 = h0.reshape(n, 1, h)
        else:
            y, ho = results
        if lengths is None:  # every step of every row (the cell: one)
            lengths = self._ones_for(n) if s == 1 else np.full(n, s, dtype=_I64)
        elif lengths.dtype is not _I64 or not lengths.flags.carray:
            lengths = lengths.astype(_I64)  # a new C-contiguous array (lengths are 1-D)
        self.run(X, h0, lengths, att, y, ho)
        if results is out:
            return out
        if not self._native:
            results = tuple(r.astype(self.spec.dtype) for r in results)
            if out is not None:
                for dst, src in zip(out, results):
                    dst[...] = src
                return out
        return results

    def run(self, X, h0, lengths, att, y, ho, keep=False, path=None):
        """The kernel call on canonical arrays of the compute dtype: X (N, S, I), h0 (N, D, H),
        lengths int64 (N,), att (N, S, 1)-like or None, y (N, D, S, H), ho (N, D, H), which may be h0.

        ``keep``: a row of length 0 keeps its initial state in ho, instead of zero (SPEC.md §4),
        for streams fed chunk by chunk. ``path`` forces one of the kernel paths ('serial',
        'parallel', 'split' or 'pair'), to compile it ahead; else ``_path`` picks it. The paths
        but 'serial' use the threads the calling thread may use, as many as the process-wide
        budget leaves (``_threading``: only calls that may share their work take part).
        """
        n, s = X.shape[0], X.shape[1]
        att = self._no_att if att is None else kernel_array(att, self.compute_dtype).reshape(n, s)
        args = (X, h0, lengths, att, y, ho, self.weights, self._reverse, self._lbr, self._f, self._g, self._clip,
                int(keep))
        flops = self._flops(n, s)
        forced, path = path is not None, path or self._path(n, s, flops)
        if path == "serial":
            run_serial(*args, *self._scratch(n, s, 1))
            return
        if path == "pair":
            self._pair(args, n, s, flops, forced)
            return
        _partner.PARTNER.nap()  # a parallel region needs the cores the partner would spin on
        wanted = requested()
        granted = reserve(wanted)
        try:
            if granted != wanted:
                numba.set_num_threads(granted)
            if path == "split" and (granted > 1 or forced):
                run_split(*args, *self._split_scratch(s))
            elif path == "parallel" and (granted > 1 or forced):
                d = self._directions
                blocks = min(n, -(-granted // d))
                run_parallel(*args, *self._scratch(-(-n // blocks), s, d * blocks), blocks)
            else:
                run_serial(*args, *self._scratch(n, s, 1))
        finally:
            if granted != wanted:
                numba.set_num_threads(wanted)
            release(granted)

    def _pair(self, args, n, s, flops, forced):
        """A one-row call on the 'pair' path: with the partner thread (``_partner.Partner`` says
        when) if no other call has it and the budget leaves a thread for it; else on this thread
        alone, with the serial kernel (a split row alone is slower: the kernel of a b1 i256 h256
        cell took 25.1 against 22.1 µs, and 42.8 against 39.4 µs after 2 ms idle), or, forced,
        with run_pair and this thread's own mailbox, which nobody serves."""
        partner = _partner.PARTNER
        if partner.acquire(wake=flops >= PAIR_WAKE_FLOPS and requested() > 1):
            try:
                granted = reserve(min(2, requested()))
                try:
                    if granted > 1:
                        run_pair(*args, *self._split_scratch(s), partner.mailbox)
                        return
                finally:
                    release(granted)
            finally:
                partner.release()
        if forced:
            run_pair(*args, *self._split_scratch(s), _own_mailbox())
        else:
            run_serial(*args, *self._scratch(n, s, 1))
        partner.after_alone()

    def _flops(self, n, s):
        """2·N·S·D·3H·(I + H): the floating-point operations of the products."""
        return 2 * n * s * self._directions * 3 * self._hidden * (self._hidden + self._inputs)

    def _path(self, n, s, flops=None):
        """The kernel path for N rows of S steps (``flops``: ``_flops(n, s)`` when the caller has
        it): 'serial' for small work and for one row not worth sharing, 'pair' or 'split' (without
        the partner) for one row that is, else 'parallel'."""
        d, h = self._directions, self._hidden
        flops = self._flops(n, s) if flops is None else flops
        if n * d == 1:
            if _partner.PARTNER.enabled and h >= PAIR_FROM_HIDDEN and flops >= PAIR_FROM_FLOPS:
                return "pair"
            if h >= SPLIT_FROM_HIDDEN and s >= SPLIT_FROM_STEPS and flops >= SERIAL_BELOW_FLOPS:
                return "split"
            return "serial"
        return "serial" if flops < SERIAL_BELOW_FLOPS else "parallel"

    def _scratch(self, rows, s, tasks):
        """The kernels' ``hoist`` flag, float and int64 scratch for ``tasks`` kernel tasks of up to
        ``rows`` rows of S steps each. hoist: 1 if a task computes X·Wᵀ for all its steps first
        (HOIST_BYTES), else 0."""
        key = "scratch", rows, s, tasks, HOIST_BYTES
        plan = self._memo.get(key)
        if plan is None:
            hoist = int(rows * s * 3 * self._hidden * self.compute_dtype.itemsize <= HOIST_BYTES)
            floats, ints = scratch_size(rows, s, self._inputs, self._hidden, hoist, self.compute_dtype.itemsize)
            plan = self._remember(key, (hoist, floats * tasks, ints * tasks))
        return (plan[0], *_kept_scratch(self.compute_dtype, plan[1], plan[2]))

    def _split_scratch(self, s):
        """Float and int64 scratch of a row of S steps split over two threads."""
        key = "split", s
        sizes = self._memo.get(key)
        if sizes is None:
            sizes = self._remember(key, split_scratch_size(s, self._inputs, self._hidden,
                                                           self.compute_dtype.itemsize))
        return _kept_scratch(self.compute_dtype, *sizes)

    def result_shapes(self, n, s):
        """``result_shapes`` of the op for N rows of S steps (a serving loop asks for the same)."""
        key = "results", n, s
        shapes = self._memo.get(key)
        if shapes is None:
            shapes = self._remember(key, result_shapes(self.spec, n, s))
        return shapes

    def _remember(self, key, value):
        """Keep ``value`` in the memo of sizes and shapes per call shape (at most 64, then afresh)."""
        if len(self._memo) >= 64:
            self._memo.clear()
        self._memo[key] = value
        return value

    def _ones_for(self, n):
        """sequence_lengths of ``n`` rows of one step: a view of ones kept across calls (a cell
        stepped in a loop allocates nothing), grown when a larger batch comes."""
        if self._ones.shape[0] < n:
            self._ones = np.ones(n, dtype=np.int64)
        return self._ones[:n]


def result_shapes(spec, n, s):
    """Shapes of the op's results: (Ho,) for the cell, (Y, Ho) for the sequences."""
    d, h = spec.num_directions, spec.hidden_size
    if spec.layout == "cell":
        return ((n, h),)
    if spec.layout == "augru2d":
        return (n, s, h), (n, h)
    return (n, d, s, h), (n, d, h)
