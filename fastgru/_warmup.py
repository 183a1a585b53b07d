"""Compile ahead: ``fastgru.warmup()`` at a server's start-up instead of on its first request."""

import functools
import time

import numpy as np

from . import _partner
from ._api import gru_cell
from ._compact import FORMATS, THREE_PASS, TILE_MIN_ROWS, takes_tiles
from ._dispatch import NO_ROWS, Unpacked, compute_dtype
from ._kernels.drivers import callback
from ._ops import AUGRUSequence, GRUCell, GRUSequence
from ._plan import run_planned
from ._stack import GRUStack
from ._validate import FastGRUError

#: The kernel paths each op can take (_dispatch.Packed.run); a cell (one step) is never split in
#: a parallel region.
_PATHS = {
    "gru_cell": ("serial", "parallel", "pair"),
    "gru_sequence": ("serial", "parallel", "split", "pair"),
    "augru_sequence": ("serial", "parallel", "split", "pair"),
}
_T1_NAMES = ("float16", "float32", "float64", "bfloat16")
#: What ``ops`` may name: the ops, and 'gru_stack' (not a default: a stack's layers run the drivers
#: through C callbacks of their own, which compile apart from the ops' kernels).
_OPS = (*_PATHS, "gru_stack")


#: What ``weight_dtypes`` may name: the exact weights ('exact', or None), the compact ones and the
#: three-pass mode's.
_WEIGHT_NAMES = ("exact", *FORMATS, THREE_PASS)


def warmup(dtypes=("float32",), ops=tuple(_PATHS), weight_dtypes=("exact",)) -> float:
    """Compile every kernel that ``ops`` run for ``dtypes``, or load it from the cache; returns seconds.

    The first call of an op in a process compiles its kernels, or loads them from fastgru's cache
    folder (see ``python -m fastgru info``); docs/guide/serving.md, "Start-up and the kernel cache",
    has the times of both (``benchmarks/results/emeraldrapids-avx512/cold_start_results.md``). A
    server calls this once at start-up so that no request pays for it. float16 and bfloat16 run the
    float32 kernels (docs/semantics.md, "Types").

    Parameters
    ----------
    dtypes : iterable of str or dtype
        T1 dtypes among float16, float32, float64 and bfloat16.
    ops : iterable of str
        Among 'gru_cell', 'gru_sequence', 'augru_sequence' and 'gru_stack'. The three ops
        (functions and prepared ops alike) run the same kernels; ``ops`` only leaves out the
        kernel paths that none of them takes (a cell is never split in a parallel region).
        'gru_stack' (:class:`fastgru.GRUStack`, and what runs on it: ``fastgru.from_torch`` and
        ``fastgru.torch`` GRUs) is not among the defaults: its layers run the kernel paths
        through callbacks that compile on their own.
    weight_dtypes : iterable of str or None
        Among 'exact' (or None: the weights of T1's compute dtype, the default), 'bfloat16', 'int8'
        and 'bfloat16x3': the kernels of ops built with ``weight_dtype=`` (float32's compute dtype
        only), with those of calls on the matrix tiles where they are used.

    Examples
    --------
    >>> import fastgru
    >>> seconds = fastgru.warmup(dtypes=["float32"], ops=["gru_cell"])
    """
    start = time.perf_counter()
    for _, step in steps(dtypes, ops, weight_dtypes):
        step()
    return time.perf_counter() - start


def steps(dtypes=("float32",), ops=tuple(_PATHS), weight_dtypes=("exact",)):
    """What ``warmup`` does, as (label, callable) pairs, for ``python -m fastgru warmup``'s progress:
    each kernel path of each compute dtype and weights, the kernels of the prepared ops' plans, the
    function API's calls of one row and one step, then the partner thread's loop."""
    names = _names("ops", ops, _OPS)
    weights = [None if w in (None, "exact") else w for w in _names("weight_dtypes", weight_dtypes, _WEIGHT_NAMES)]
    paths = dict.fromkeys(path for op in names if op in _PATHS for path in _PATHS[op])
    computes = dict.fromkeys(
        compute_dtype(np.dtype(np.float32 if name == "bfloat16" else name))
        for name in _names("dtypes", dtypes, _T1_NAMES)
    )
    # (compute dtype, weight_dtype): compact weights compute in float32
    kinds = [(ct, w) for ct in computes for w in dict.fromkeys(weights) if w is None or ct == np.float32]
    tiny = {}

    def run(kind, path):
        if kind not in tiny:
            tiny[kind] = _tiny(*kind)
        packed, inputs = tiny[kind]
        packed.run(2, 2, inputs, path=path)

    def partner():
        # the partner thread's loop compiles (or loads) in wake(); its cycle counter would compile in
        # the new thread, after warmup returns (and perhaps after the process ends, unsaved)
        if _partner.PARTNER.enabled:
            _partner._cycles()
        _partner.PARTNER.wake()

    def plans(kind):
        for call in _planned_calls(*kind, names):
            call()
            call()  # the plan of the first call (fastgru/_plan.py)
        if "pair" in paths and _partner.PARTNER.enabled:  # a one-row plan's job for the pair driver
            if kind not in tiny:
                tiny[kind] = _tiny(*kind)
            callback("pair", tiny[kind][0].weights)

    def matrix_tiles(kind):  # the rows' drivers with tiles, which calls of TILE_MIN_ROWS rows or more take
        packed, inputs = _tiny(*kind, n=TILE_MIN_ROWS)
        for path in ("serial", "parallel"):
            packed.run(TILE_MIN_ROWS, 2, inputs, path=path)

    def stacks(kind):
        stack, arrays = _tiny_stack(*kind)
        for path in (*_PATHS["gru_sequence"], "wave"):  # wave: the layer wavefront and the partner's callback
            stack.run(1, 2, arrays, path=path)

    def label(kind, what):
        ct, w = kind
        return f"{np.dtype(ct).name} {what}" if w is None else f"{np.dtype(ct).name} {w} weights {what}"

    def function_calls(ct):  # a call of one row and one step from the caller's weights (run_direct)
        W, R, B = np.zeros((6, 3), ct), np.zeros((6, 2), ct), np.zeros(6, ct)
        x, h = np.zeros((1, 3), ct), np.zeros((1, 2), ct)
        for _ in range(2):  # the first call, then its plan's
            gru_cell(x, h, W, R, B)
        if "pair" in paths and _partner.PARTNER.enabled:  # one shared with the partner (run_direct_pair)
            template = Unpacked(GRUCell(W, R, B).spec)
            arrays = (x, h, np.ones(1, np.int64), template._no_att, np.empty_like(h), np.empty_like(h), W, R, B)
            run_planned(template, arrays, 1, 1, path="pair")

    found = [(label(kind, path), functools.partial(run, kind, path)) for kind in kinds for path in paths]
    found += [(label(kind, "plans"), functools.partial(plans, kind)) for kind in kinds]
    tiled = [kind for kind in kinds if takes_tiles(kind[1])]
    found += [(label(kind, "matrix tiles"), functools.partial(matrix_tiles, kind)) for kind in tiled]
    if any(op in _PATHS for op in names):
        found += [(label((ct, None), "function calls"), functools.partial(function_calls, ct)) for ct in computes]
    if "gru_stack" in names:
        found += [(label(kind, "stacks"), functools.partial(stacks, kind)) for kind in kinds]
    return [*found, ("partner thread", partner)]


def _names(what, values, allowed):
    values = [values] if isinstance(values, str) or values is None else list(values)
    names = [np.dtype(v).name if what == "dtypes" and not isinstance(v, str) else v for v in values]
    names = ["exact" if what == "weight_dtypes" and v is None else v for v in names]
    for name in names:
        if name not in allowed:
            raise FastGRUError(f"warmup: {what} has {name!r}; expected some of {', '.join(allowed)}")
    return names


def _tiny(dtype, weight_dtype, n=2):
    """A prepared GRUSequence of hidden_size 2 and the kernels' flat arrays for n rows of 2 steps (with
    attention scores: every array of one type serves both GRU and AUGRU)."""
    s, i, h = 2, 3, 2
    W, R, B = np.zeros((1, 3 * h, i), dtype), np.zeros((1, 3 * h, h), dtype), np.zeros((1, 3 * h), dtype)
    op = GRUSequence(W, R, B, weight_dtype=weight_dtype)
    return op._packed, (
        np.zeros((n, s, i), dtype),
        np.zeros((n, 1, h), dtype),
        np.full(n, s),
        NO_ROWS,
        np.zeros((n, s), dtype),
        np.empty((n, 1, s, h), dtype),
        np.empty((n, 1, h), dtype),
    )


def _tiny_stack(dtype, weight_dtype):
    """A GRUStack of two layers of hidden_size 2 and its arrays for 1 row of 2 steps."""
    zeros = functools.partial(np.zeros, dtype=dtype)
    layers = [GRUSequence(zeros((1, 6, i)), zeros((1, 6, 2)), zeros((1, 6)), weight_dtype=weight_dtype) for i in (3, 2)]
    stack = GRUStack(layers)
    arrays = (np.zeros((1, 2, 3), dtype), np.zeros((1, 4), dtype), None, NO_ROWS, None)
    return stack, arrays + (np.empty((1, 1, 2, 2), dtype), np.empty((1, 4), dtype))


def _planned_calls(dtype, weight_dtype, ops):
    """Calls of the prepared ops whose second call runs the plan of the first, for each kind of plan
    ``ops`` make: a cell, a sequence with int64 and int32 lengths, AUGRU in both layouts."""
    i, h = 3, 2
    x, h1, h2 = np.zeros((1, i), dtype), np.zeros((1, h), dtype), np.zeros((1, 1, h), dtype)
    X, A = np.zeros((1, 2, i), dtype), np.zeros((1, 2, 1), dtype)
    W, R, B = np.zeros((3 * h, i), dtype), np.zeros((3 * h, h), dtype), np.zeros(3 * h, dtype)
    calls = []
    if "gru_cell" in ops:
        cell = GRUCell(W, R, B, weight_dtype=weight_dtype)
        calls.append(lambda: cell(x, h1))
    if "gru_sequence" in ops:
        seq = GRUSequence(W[None], R[None], B[None], weight_dtype=weight_dtype)
        calls += [lambda t=t: seq(X, h2, np.full(1, 2, t)) for t in (np.int64, np.int32)]
    if "augru_sequence" in ops:
        augru = AUGRUSequence(W, R, B, weight_dtype=weight_dtype)
        augru3 = AUGRUSequence(W[None], R[None], B[None], weight_dtype=weight_dtype)
        calls += [lambda: augru(X, h1, np.full(1, 2), A), lambda: augru3(X, h2, np.full(1, 2), A)]
    return calls
