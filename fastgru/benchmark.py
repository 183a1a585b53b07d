"""Benchmark your own kernel against fastgru: named suites of shapes and a side-by-side timer.

A *candidate* is any Python callable that computes one of the three ops with the arguments of
fastgru's function of that op (``fastgru.gru_sequence``, ``gru_cell``, ``augru_sequence``): the same
positional arrays in OpenVINO's layouts, the same keywords. A *prepared* candidate is a factory
called once per shape with the weights and attributes, as ``fastgru.GRUSequence(W, R, B, ...)`` is,
returning the callable that takes the per-call inputs. `compare` checks the candidate against
fastgru on every shape of a suite, then times it side by side with fastgru's prepared op and
function, and returns one record per shape; ``python -m fastgru bench --candidate MODULE:FUNCTION``
is the same from the command line. docs/benchmarking.md says what is measured and how.

Suites (`SUITES`) are named and versioned: a published suite never changes; new shapes make a new
version. Each shape knows its FLOP count (`Shape.flops`) and the bytes of its weights
(`Shape.weight_bytes`).

Examples
--------
A NumPy candidate (the reference itself), on the tiny suite, with few rounds:

>>> from fastgru import benchmark, reference
>>> records = benchmark.compare(reference.gru_sequence, suite="tiny-v1", rounds=1, seconds=0.001)
>>> [(r["shape"], r["ok"]) for r in records]
[('seq-b1-s1-i4-h4-lbr0', True)]
>>> sorted(records[0]["seconds"])
['candidate', 'fastgru', 'fastgru_prepared']
>>> text = benchmark.table(records)                  # the markdown table of the command line
"""

import gc
import importlib
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike

from ._api import augru_sequence, gru_cell, gru_sequence
from ._ops import AUGRUSequence, GRUCell, GRUSequence
from ._validate import FastGRUError
from ._warmup import warmup

#: The ops a candidate can implement, as fastgru names its functions.
OPS = ("gru_sequence", "gru_cell", "augru_sequence")

#: Per op: fastgru's function, its prepared op, the names of its positional inputs in order, and
#: the outputs it returns.
_FUNCTIONS = {"gru_sequence": gru_sequence, "gru_cell": gru_cell, "augru_sequence": augru_sequence}
_PREPARED = {"gru_sequence": GRUSequence, "gru_cell": GRUCell, "augru_sequence": AUGRUSequence}
_INPUTS = {
    "gru_sequence": ("X", "initial_hidden_state", "sequence_lengths", "W", "R", "B"),
    "gru_cell": ("X", "initial_hidden_state", "W", "R", "B"),
    "augru_sequence": ("X", "initial_hidden_state", "sequence_lengths", "W", "R", "B", "A"),
}
_WEIGHTS = ("W", "R", "B")
_OUTPUTS = {"gru_sequence": ("Y", "Ho"), "gru_cell": ("Ho",), "augru_sequence": ("Y", "Ho")}

#: The implementations of a record, in the order of the table's columns.
IMPLEMENTATIONS = ("candidate", "fastgru_prepared", "fastgru")


@dataclass(frozen=True)
class Shape:
    """One benchmark shape: an op and its sizes and attributes.

    Parameters
    ----------
    op : {"gru_sequence", "gru_cell", "augru_sequence"}
        The op the shape is timed with.
    batch, seq, inputs, hidden : int
        batch_size, seq_length (1 for the cell), input_size and hidden_size.
    direction : {"forward", "reverse", "bidirectional"}
        GRUSequence's direction (AUGRU and the cell are forward).
    lbr : bool
        linear_before_reset.

    Examples
    --------
    >>> from fastgru.benchmark import Shape
    >>> shape = Shape("gru_sequence", 1, 100, 64, 128)
    >>> shape.id, shape.flops, shape.weight_bytes()
    ('seq-b1-s100-i64-h128-lbr0', 14745600, 296448)
    """

    op: str
    batch: int
    seq: int
    inputs: int
    hidden: int
    direction: str = "forward"
    lbr: bool = False

    @property
    def directions(self) -> int:
        """num_directions: 2 for a bidirectional sequence, else 1."""
        return 2 if self.direction == "bidirectional" else 1

    @property
    def flops(self) -> int:
        """2·N·S·D·3H·(I + H): the floating-point operations of the input and recurrent products."""
        return 2 * self.batch * self.seq * 3 * self.hidden * (self.inputs + self.hidden) * self.directions

    def weight_bytes(self, dtype: DTypeLike = "float32") -> int:
        """Bytes of W, R and B in ``dtype``: D·(3H·I + 3H·H + 3H or 4H) elements."""
        h = self.hidden
        elements = self.directions * (3 * h * self.inputs + 3 * h * h + (4 if self.lbr else 3) * h)
        return elements * _dtype(dtype).itemsize

    @property
    def id(self) -> str:
        """The shape's name in every table: op, batch, steps, input and hidden sizes, direction, lbr."""
        name = {"gru_sequence": "seq", "augru_sequence": "augru", "gru_cell": "cell"}[self.op]
        direction = {"forward": "", "reverse": "-rev", "bidirectional": "-bidi"}[self.direction]
        return f"{name}-b{self.batch}-s{self.seq}-i{self.inputs}-h{self.hidden}{direction}-lbr{int(self.lbr)}"

    def draw(self, seed: int = 0) -> dict:
        """The shape's random data, float32, in GRUSequence's layout whatever the op: X (N, S, I)
        standard normal, H0 (N, D, H) normal with scale 0.5, sequence_lengths (N,) int32 all S,
        W (D, 3H, I), R (D, 3H, H) and B (D, 3H or 4H) uniform in ±1/sqrt(H), A (N, S, 1) uniform in
        [0, 1]; the same values for every dtype and implementation."""
        rng = np.random.default_rng(seed)
        n, s, i, h, d = self.batch, self.seq, self.inputs, self.hidden, self.directions
        scale = 1 / math.sqrt(h)
        X = rng.standard_normal((n, s, i), dtype=np.float32)
        H0 = rng.standard_normal((n, d, h), dtype=np.float32) * 0.5
        W = rng.uniform(-scale, scale, (d, 3 * h, i)).astype(np.float32)
        R = rng.uniform(-scale, scale, (d, 3 * h, h)).astype(np.float32)
        B = rng.uniform(-scale, scale, (d, (4 if self.lbr else 3) * h)).astype(np.float32)
        A = rng.uniform(0, 1, (n, s, 1)).astype(np.float32)
        return {"X": X, "H0": H0, "lengths": np.full(n, s, dtype=np.int32), "W": W, "R": R, "B": B, "A": A}

    def arguments(self, dtype: DTypeLike = "float32", seed: int = 0) -> tuple[dict, dict]:
        """``(inputs, attributes)`` of one call of the op's fastgru function: the positional inputs
        by name, in order, as new C-contiguous arrays of ``dtype`` (sequence_lengths int32), and the
        keyword attributes the shape sets (gru_sequence: direction and linear_before_reset;
        gru_cell: linear_before_reset; augru_sequence: none). AUGRU takes OpenVINO's own layout:
        initial_hidden_state (N, 1, H), W (1, 3H, I), R (1, 3H, H), B (1, 3H)."""
        dtype = _dtype(dtype)
        a = self.draw(seed)
        if self.op == "gru_cell":
            arrays = {"X": a["X"][:, 0], "initial_hidden_state": a["H0"][:, 0], "W": a["W"][0]}
            arrays.update(R=a["R"][0], B=a["B"][0])
            attributes = {"linear_before_reset": self.lbr}
        else:
            arrays = {"X": a["X"], "initial_hidden_state": a["H0"], "sequence_lengths": a["lengths"]}
            arrays.update(W=a["W"], R=a["R"], B=a["B"])
            attributes = {"direction": self.direction, "linear_before_reset": self.lbr}
            if self.op == "augru_sequence":
                arrays["A"] = a["A"]
                attributes = {}
        inputs = {
            name: np.array(arrays[name], dtype=np.int32 if name == "sequence_lengths" else dtype)
            for name in _INPUTS[self.op]
        }
        return inputs, attributes


#: The named suites, each a tuple of shapes. A published suite never changes: a change of its
#: shapes is a new version (``latency-v2``), so that results under one name stay comparable.
SUITES = {
    "latency-v1": (
        Shape("gru_sequence", 1, 100, 64, 128),
        Shape("gru_sequence", 1, 100, 64, 128, lbr=True),
        Shape("gru_sequence", 1, 100, 64, 256),
        Shape("gru_sequence", 1, 100, 64, 256, lbr=True),
        Shape("gru_sequence", 1, 100, 64, 512),
        Shape("gru_sequence", 1, 100, 64, 512, lbr=True),
        Shape("gru_cell", 1, 1, 256, 256),
        Shape("gru_cell", 1, 1, 256, 256, lbr=True),
    ),
    "throughput-v1": (
        Shape("gru_sequence", 64, 100, 256, 256),
        Shape("gru_sequence", 16, 50, 128, 256, direction="bidirectional"),
        Shape("gru_cell", 64, 1, 256, 256),
        Shape("gru_cell", 64, 1, 256, 256, lbr=True),
    ),
    "dien-v1": (
        Shape("gru_sequence", 128, 50, 36, 36),
        Shape("augru_sequence", 128, 50, 36, 36),
    ),
    "tiny-v1": (
        Shape("gru_sequence", 1, 1, 4, 4),
        Shape("gru_cell", 1, 1, 4, 4),
        Shape("augru_sequence", 1, 1, 4, 4),
    ),
}

#: What each suite stands for, as ``--list-suites`` prints it.
SUITE_NOTES = {
    "latency-v1": "one request at a time: batch 1, 100 steps of hidden_size 128 to 512, and one-step cells",
    "throughput-v1": "batches: 64 rows of 100 steps, 16 bidirectional rows, a cell of 64 rows",
    "dien-v1": "DIEN's interest extraction (GRU) and evolution (AUGRU) layers: batch 128, 50 behaviours, size 36",
    "tiny-v1": "one step of size 4 per op: the cost of a call itself",
}


def suite_shapes(name: str, op: str | None = None) -> tuple[Shape, ...]:
    """The shapes of a suite, of one op when ``op`` is given.

    Raises
    ------
    FastGRUError
        When the suite is unknown, or has no shape of ``op``.

    Examples
    --------
    >>> from fastgru import benchmark
    >>> [shape.id for shape in benchmark.suite_shapes("dien-v1", op="augru_sequence")]
    ['augru-b128-s50-i36-h36-lbr0']
    """
    if name not in SUITES:
        raise FastGRUError(f"benchmark: suite {name!r} is unknown; expected one of {', '.join(SUITES)}.")
    if op is not None and op not in OPS:
        raise FastGRUError(f"benchmark: op {op!r} is unknown; expected one of {', '.join(OPS)}.")
    shapes = tuple(shape for shape in SUITES[name] if op is None or shape.op == op)
    if not shapes:
        having = [other for other, members in SUITES.items() if any(s.op == op for s in members)]
        raise FastGRUError(
            f"benchmark: suite {name!r} has no {op} shape; suites with {op} shapes: {', '.join(having)}."
        )
    return shapes


def select(suite: str | Sequence[str] | None = None, op: str | None = None) -> list:
    """The (suite name, shape) pairs that `compare` runs: the shapes of ``op`` (every op when None)
    in each named suite, by default in every suite that has some. Of several suites, one without
    shapes of ``op`` adds none.

    Raises
    ------
    FastGRUError
        When a suite or the op is unknown, or no named suite has a shape of ``op``.

    Examples
    --------
    >>> from fastgru import benchmark
    >>> [(name, shape.id) for name, shape in benchmark.select(["latency-v1", "dien-v1"], "augru_sequence")]
    [('dien-v1', 'augru-b128-s50-i36-h36-lbr0')]
    """
    if op is not None and op not in OPS:
        raise FastGRUError(f"benchmark: op {op!r} is unknown; expected one of {', '.join(OPS)}.")
    if suite is None:
        suites = [key for key, shapes in SUITES.items() if op is None or any(s.op == op for s in shapes)]
    else:
        suites = [suite] if isinstance(suite, str) else list(suite)
    for key in suites:
        suite_shapes(key)  # a known name
    runs = [(key, shape) for key in suites for shape in SUITES[key] if op is None or shape.op == op]
    if not runs:
        if len(suites) == 1:
            suite_shapes(suites[0], op)  # raises, naming the suites that have such shapes
        having = [key for key, shapes in SUITES.items() if any(s.op == op for s in shapes)]
        raise FastGRUError(
            f"benchmark: suites {', '.join(suites)} have no {op} shape; suites with {op} shapes: {', '.join(having)}."
        )
    return runs


#: (rtol, atol) of a candidate against fastgru, per dtype: a value passes when
#: ``|candidate - fastgru| <= atol + rtol·|fastgru|``. Both sides round differently from the exact
#: value (fastgru's tests hold it to the NumPy reference at 1e-5, 2e-6 in float32 on small shapes),
#: and the suites' shapes are larger (512 hidden units, 100 steps):
#:
#: - float32: ten times the tests' tolerance, the one benchmarks/bench_gru.py holds OpenVINO, ONNX
#:   Runtime, torch and the NumPy reference to on these shapes;
#: - float64: a hundred times the tests' tolerance (1e-12, 1e-13);
#: - float16, bfloat16: fastgru computes in float32 and rounds once; two units of the format
#:   (2·2⁻¹⁰, 2·2⁻⁷), and float32's atol near zero.
TOLERANCES = {
    "float64": (1e-10, 1e-11),
    "float32": (1e-4, 2e-5),
    "float16": (2 * 2.0**-10, 2e-5),
    "bfloat16": (2 * 2.0**-7, 2e-5),
}


class CandidateMismatch(FastGRUError):
    """A candidate's results differ from fastgru's beyond the tolerance of their dtype, or have the
    wrong shape or dtype, or it modified its inputs. ``failures`` holds one line per problem and
    ``records`` the records of the shapes checked (not timed)."""

    def __init__(self, failures, records):
        super().__init__("\n".join(failures))
        self.failures = failures
        self.records = records


def load(spec: str) -> Callable:
    """The object named by ``"MODULE:NAME"`` (``NAME`` may be dotted: ``module:Class.method``);
    MODULE may also be the path of a ``.py`` file.

    Raises
    ------
    FastGRUError
        When ``spec`` is not of that form, or NAME is not in the module.

    Examples
    --------
    >>> from fastgru import benchmark
    >>> benchmark.load("fastgru.reference:gru_sequence").__name__
    'gru_sequence'
    """
    module_name, sep, name = str(spec).rpartition(":")
    if not sep or not module_name or not name:
        raise FastGRUError(f"benchmark: {spec!r} is not MODULE:FUNCTION (e.g. my_package.kernels:gru_sequence).")
    if module_name.endswith(".py") or os.sep in module_name:
        path = Path(module_name)
        if not path.is_file():
            raise FastGRUError(f"benchmark: {spec!r} names the file {module_name!r}, which does not exist.")
        loader = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(loader)
        sys.modules.setdefault(path.stem, module)
        loader.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    found = module
    for part in name.split("."):
        if not hasattr(found, part):
            raise FastGRUError(f"benchmark: {spec!r}: module {module_name!r} has no {name!r}.")
        found = getattr(found, part)
    if not callable(found):
        raise FastGRUError(f"benchmark: {spec!r} is a {type(found).__name__}; expected a callable.")
    return found


def _dtype(dtype):
    """A NumPy dtype from a name or dtype; "bfloat16" through ml_dtypes."""
    if str(dtype) == "bfloat16":
        try:
            import ml_dtypes
        except ImportError as exc:
            raise TypeError("benchmark: dtype 'bfloat16' needs ml_dtypes: pip install ml_dtypes.") from exc
        return np.dtype(ml_dtypes.bfloat16)
    try:
        dtype = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"benchmark: dtype {dtype!r} is not a dtype; expected float16, float32 or float64.") from exc
    if dtype.name not in TOLERANCES:
        raise TypeError(f"benchmark: dtype is {dtype.name}; expected float16, float32, float64 or bfloat16.")
    return dtype


@dataclass
class _Entry:
    """One shape of a run: its timed calls by implementation and its record."""

    shape: Shape
    calls: dict
    record: dict


def _name(candidate):
    module = getattr(candidate, "__module__", None) or "?"
    name = getattr(candidate, "__qualname__", None) or type(candidate).__name__
    return f"{module}:{name}"


def _build(shape, dtype, candidate, prepared, seed, tolerance, label):
    """(the zero-argument calls of one shape, each on its own copies of the inputs; the candidate's
    max |difference| per output, its largest share of the tolerance, and its failures). The first
    call of each implementation runs here (compilation, first touch), the candidate's checked."""
    inputs, attributes = shape.arguments(dtype, seed)
    per_call = [name for name in inputs if name not in _WEIGHTS]
    function, factory = _FUNCTIONS[shape.op], _PREPARED[shape.op]

    mine = {name: a.copy() for name, a in inputs.items()}
    args = tuple(mine.values())
    calls = {"fastgru": lambda: function(*args, **attributes)}
    op = factory(*(mine[name] for name in _WEIGHTS), **attributes)
    op_args = tuple(mine[name] for name in per_call)
    out = op(*op_args)
    calls["fastgru_prepared"] = lambda: op(*op_args, out=out)
    want = calls["fastgru"]()
    want = want if isinstance(want, tuple) else (want,)
    calls["fastgru_prepared"]()

    theirs = None
    if candidate is not None:
        theirs = {name: a.copy() for name, a in inputs.items()}
        if prepared:
            made = candidate(*(theirs[name] for name in _WEIGHTS), **attributes)
            their_args = tuple(theirs[name] for name in per_call)
            calls["candidate"] = lambda: made(*their_args)
        else:
            their_args = tuple(theirs.values())
            calls["candidate"] = lambda: candidate(*their_args, **attributes)
        try:
            got = calls["candidate"]()
        except Exception as exc:
            if hasattr(exc, "add_note"):
                exc.add_note(f"fastgru.benchmark: raised by the candidate on {label}")
            raise
        return (calls, *_check(shape, dtype, got, want, inputs, theirs, tolerance, label))
    return calls, {}, 0.0, []


def calls(
    shape: Shape,
    candidate: Callable | None = None,
    *,
    prepared: Callable | None = None,
    dtype: DTypeLike = "float32",
    tolerance: tuple[float, float] | None = None,
    seed: int = 0,
) -> dict:
    """The zero-argument calls that `compare` times for one shape, checked: for a pytest-benchmark
    session of your own (docs/benchmarking.md has the recipe).

    Parameters
    ----------
    shape : Shape
        A shape, e.g. of `suite_shapes`.
    candidate, prepared, dtype, tolerance, seed
        As in `compare`.

    Returns
    -------
    dict
        ``"fastgru_prepared"`` (the prepared op called with ``out=``), ``"fastgru"`` (the function),
        and ``"candidate"`` when one is given, each called once already; each works on its own
        copies of the shape's inputs.

    Raises
    ------
    CandidateMismatch
        When the candidate's results differ from fastgru's, as in `compare`.

    Examples
    --------
    >>> from fastgru import benchmark, reference
    >>> shape = benchmark.suite_shapes("tiny-v1", "gru_cell")[0]
    >>> run = benchmark.calls(shape, reference.gru_cell)
    >>> sorted(run)
    ['candidate', 'fastgru', 'fastgru_prepared']
    >>> Ho = run["candidate"]()
    """
    if candidate is not None and prepared is not None:
        raise FastGRUError("benchmark: give a candidate or a prepared candidate (factory), not both.")
    dtype = _dtype(dtype)
    tolerance = TOLERANCES[dtype.name] if tolerance is None else (float(tolerance[0]), float(tolerance[1]))
    implementation = candidate if candidate is not None else prepared
    built, _, _, failures = _build(shape, dtype, implementation, prepared is not None, seed, tolerance, shape.id)
    if failures:
        raise CandidateMismatch(failures, [])
    return built


def _check(shape, dtype, got, want, inputs, theirs, tolerance, label):
    """(max |difference| per output, the largest share of the tolerance, failure lines)."""
    names = _OUTPUTS[shape.op]
    rtol, atol = tolerance
    failures, differences, share = [], {}, 0.0
    if isinstance(got, list):
        got = tuple(got)
    if not isinstance(got, tuple):
        got = (got,)
    if len(got) != len(names):
        expected = names[0] if len(names) == 1 else f"({', '.join(names)})"
        count = f"{len(got)} result{'' if len(got) == 1 else 's'}"
        return {}, math.inf, [f"{label}: the candidate returned {count}; expected {expected}."]
    for name, g, w in zip(names, got, want):
        try:
            g = np.asarray(g)
        except Exception as exc:  # noqa: BLE001 - anything that is no array is a failure to report
            failures.append(f"{label}: {name} is a {type(g).__name__}, not an array ({exc}).")
            continue
        if g.shape != w.shape:
            failures.append(f"{label}: {name} has shape {g.shape}; expected {w.shape}.")
            continue
        if g.dtype != w.dtype:
            failures.append(f"{label}: {name} is {g.dtype}; expected {w.dtype}, the dtype of X.")
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        with np.errstate(invalid="ignore"):
            difference = np.abs(g64 - w64)
        bound = atol + rtol * np.abs(w64)
        both_nan = np.isnan(g64) & np.isnan(w64)
        bad = ~((difference <= bound) | both_nan)
        finite = np.isfinite(difference)
        differences[name] = float(difference[finite].max()) if finite.any() else None  # None: no finite value
        if finite.any():
            share = max(share, float((difference[finite] / bound[finite]).max()))
        if (~finite & ~both_nan).any():
            share = math.inf
        if bad.any():
            excess = np.where(bad, np.where(finite, difference / bound, np.inf), -1.0)
            worst = np.unravel_index(np.argmax(excess), bad.shape)
            failures.append(
                f"{label}: {name} differs from fastgru's by up to {np.max(np.where(bad, difference, 0)):.3g} "
                f"(at {tuple(int(k) for k in worst)}: candidate {g64[worst]:.7g}, fastgru {w64[worst]:.7g}; "
                f"{int(bad.sum())} of {bad.size} values), beyond the {np.dtype(dtype).name} tolerance "
                f"|difference| <= {atol:g} + {rtol:g}·|fastgru|."
            )
    for name, original in inputs.items():
        if not np.array_equal(theirs[name], original, equal_nan=True):
            failures.append(f"{label}: the candidate modified its input {name}; inputs must be left as they are.")
    return differences, share, failures


def _time(call, n):
    """The median seconds of ``n`` calls, each timed alone: the one loop every implementation is
    timed by."""
    clock = time.perf_counter
    times = [0.0] * n
    for k in range(n):
        start = clock()
        call()
        times[k] = clock() - start
    return statistics.median(times)


#: The fewest timed calls per implementation and round, and the most.
MIN_CALLS, MAX_CALLS = 3, 10_000


def compare(
    candidate: Callable | None = None,
    *,
    prepared: Callable | None = None,
    op: str | None = "gru_sequence",
    suite: str | Sequence[str] | None = None,
    dtype: DTypeLike = "float32",
    rounds: int = 5,
    seconds: float = 0.25,
    tolerance: tuple[float, float] | None = None,
    seed: int = 0,
    name: str | None = None,
    progress: Callable | None = None,
) -> list:
    """Check a candidate against fastgru on every shape of a suite, then time both side by side.

    Parameters
    ----------
    candidate : callable, optional
        Called as fastgru's function of ``op`` is: ``candidate(X, initial_hidden_state,
        sequence_lengths, W, R, B, direction=..., linear_before_reset=...)`` for gru_sequence,
        ``candidate(X, initial_hidden_state, W, R, B, linear_before_reset=...)`` for gru_cell,
        ``candidate(X, initial_hidden_state, sequence_lengths, W, R, B, A)`` for augru_sequence
        (OpenVINO's layout: initial_hidden_state (N, 1, H)). It returns what fastgru returns:
        ``(Y, Ho)``, or ``Ho`` for the cell, of the inputs' dtype; it must not modify its inputs.
        None times fastgru alone.
    prepared : callable, optional
        Instead of ``candidate``: a factory called once per shape as fastgru's prepared op is
        (``prepared(W, R, B, direction=..., linear_before_reset=...)``, ``prepared(W, R, B,
        linear_before_reset=...)``, ``prepared(W, R, B)``), returning the callable of the per-call
        inputs (``(X, initial_hidden_state, sequence_lengths)``, ``(X, initial_hidden_state)``,
        ``(X, initial_hidden_state, sequence_lengths, A)``).
    op : {"gru_sequence", "gru_cell", "augru_sequence"}
        The op the candidate computes; the suite's shapes of this op are run. None (only without a
        candidate) runs every shape of the suite.
    suite : str or sequence of str, optional
        A name of `SUITES`, or several; by default every suite with shapes of ``op`` (`select`).
    dtype : {"float32", "float64", "float16", "bfloat16"}
        The dtype of every floating-point input.
    rounds : int
        Rounds of timed calls, after every kernel that the shapes' ops run is compiled or loaded
        (`fastgru.warmup`); every implementation is timed once per round, in an order that
        rotates from round to round, and the result is the median of the rounds' medians.
    seconds : float
        Timing budget per implementation and shape, shared by the rounds: each round times
        ``seconds / rounds`` of calls, at least `MIN_CALLS` and at most `MAX_CALLS` of them.
    tolerance : (float, float), optional
        (rtol, atol) instead of ``TOLERANCES[dtype]``.
    seed : int
        Seed of the shapes' random data (`Shape.draw`).
    name : str, optional
        The candidate's name in the records and the table; by default ``module:qualified_name``.
    progress : callable, optional
        Called as ``progress(done, total, label)`` as the shapes are checked and timed.

    Returns
    -------
    list of dict
        One record per shape: ``suite``, ``shape`` (its id), ``op``, ``batch``, ``seq_length``,
        ``input_size``, ``hidden_size``, ``direction``, ``linear_before_reset``, ``dtype``,
        ``flops``, ``weight_bytes``, ``candidate`` (its name, or None), ``prepared`` (bool),
        ``seconds`` (per implementation: the median of the rounds' medians), ``round_seconds`` (each
        round's median), ``calls_per_round``, ``gflops``, ``ratio_prepared`` and
        ``ratio_function`` (the candidate's time over fastgru_prepared's and fastgru's: below 1
        when the candidate is faster), ``max_abs_difference`` (per output), ``share_of_tolerance``
        (the largest ``|difference| / (atol + rtol·|fastgru|)``), ``tolerance`` ([rtol, atol]), ``ok``.

    Raises
    ------
    CandidateMismatch
        When the candidate's results differ from fastgru's on any shape, beyond the tolerance, or
        have another shape or dtype, or it modified an input: every shape is checked before any is
        timed, and nothing is timed then. Its ``failures`` name the shape and the output.
    FastGRUError
        For an unknown suite or op, a suite without shapes of ``op``, both or neither of
        ``candidate`` and ``prepared`` where one is needed, or rounds or seconds out of range.

    Examples
    --------
    A candidate off by 1e-2 in Ho:

    >>> import fastgru
    >>> from fastgru import benchmark
    >>> def wrong(*args, **attributes):
    ...     Y, Ho = fastgru.gru_sequence(*args, **attributes)
    ...     return Y, Ho + 0.01
    >>> benchmark.compare(wrong, suite="tiny-v1", rounds=1, seconds=0.001)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fastgru.benchmark.CandidateMismatch: tiny-v1 seq-b1-s1-i4-h4-lbr0: Ho differs from fastgru's by up to 0.01 ...

    fastgru's own prepared op is a prepared candidate:

    >>> records = benchmark.compare(prepared=fastgru.GRUCell, op="gru_cell", suite="tiny-v1", rounds=1, seconds=0.001)
    >>> records[0]["max_abs_difference"]
    {'Ho': 0.0}
    """
    if candidate is not None and prepared is not None:
        raise FastGRUError("benchmark: give a candidate or a prepared candidate (factory), not both.")
    if op is None and (candidate is not None or prepared is not None):
        raise FastGRUError("benchmark: op is None; a candidate computes one op: expected one of " + ", ".join(OPS))
    if not (isinstance(rounds, int) and rounds >= 1):
        raise FastGRUError(f"benchmark: rounds is {rounds!r}; expected an int >= 1.")
    if not (isinstance(seconds, (int, float)) and seconds > 0):
        raise FastGRUError(f"benchmark: seconds is {seconds!r}; expected a number > 0.")
    dtype = _dtype(dtype)
    rtol, atol = TOLERANCES[dtype.name] if tolerance is None else (float(tolerance[0]), float(tolerance[1]))
    runs = select(suite, op)
    implementation = candidate if candidate is not None else prepared
    # Every kernel path of the ops, compiled or loaded now: a path first taken in a timed call
    # (the partner thread awake or asleep picks another) must not compile there.
    warmup(dtypes=[dtype.name], ops=sorted({shape.op for _, shape in runs}))
    impls = IMPLEMENTATIONS if implementation is not None else IMPLEMENTATIONS[1:]
    total = len(runs)

    entries, failures = [], []
    for k, (suite_name, shape) in enumerate(runs):
        label = f"{suite_name} {shape.id}"
        built, differences, share, wrong = _build(
            shape, dtype, implementation, prepared is not None, seed, (rtol, atol), label
        )
        record = {
            "suite": suite_name,
            "shape": shape.id,
            "op": shape.op,
            "batch": shape.batch,
            "seq_length": shape.seq,
            "input_size": shape.inputs,
            "hidden_size": shape.hidden,
            "direction": shape.direction,
            "linear_before_reset": shape.lbr,
            "dtype": dtype.name,
            "flops": shape.flops,
            "weight_bytes": shape.weight_bytes(dtype),
            "candidate": None if implementation is None else name or _name(implementation),
            "prepared": prepared is not None,
            "tolerance": [rtol, atol],
            "ok": True,
        }
        if implementation is not None:
            record.update(max_abs_difference=differences, share_of_tolerance=share, ok=not wrong)
            failures += wrong
        entries.append(_Entry(shape, built, record))
        if progress is not None:
            progress(k + 1, total, f"checked {shape.id}")
    if failures:
        raise CandidateMismatch(failures, [entry.record for entry in entries])

    for k, entry in enumerate(entries):
        _time_entry(entry, impls, rounds, seconds)
        entry.calls = None  # the shape's arrays can go
        if progress is not None:
            progress(k + 1, total, f"timed {entry.shape.id}")
    return [entry.record for entry in entries]


def _time_entry(entry, impls, rounds, seconds):
    """Time the implementations of one shape in interleaved rounds; fill its record."""
    calls = entry.calls
    budget = seconds / rounds
    counts = {}
    for impl in impls:  # one more untimed call each, then one timed: the number of calls per round
        calls[impl]()
        start = time.perf_counter()
        calls[impl]()
        once = max(time.perf_counter() - start, 1e-7)
        counts[impl] = int(min(MAX_CALLS, max(MIN_CALLS, budget / once)))
    medians = {impl: [] for impl in impls}
    enabled = gc.isenabled()
    gc.disable()  # as timeit does: a collection would land on whichever call is running
    try:
        for r in range(rounds):
            for j in range(len(impls)):
                impl = impls[(r + j) % len(impls)]  # each round starts with the next implementation
                calls[impl]()  # warm-up: the other implementations ran in between
                medians[impl].append(_time(calls[impl], counts[impl]))
    finally:
        if enabled:
            gc.enable()
    record = entry.record
    record["seconds"] = {impl: statistics.median(medians[impl]) for impl in impls}
    record["round_seconds"] = medians
    record["calls_per_round"] = counts
    record["gflops"] = {impl: entry.shape.flops / t / 1e9 for impl, t in record["seconds"].items()}
    if "candidate" in medians:
        t = record["seconds"]
        record["ratio_prepared"] = t["candidate"] / t["fastgru_prepared"]
        record["ratio_function"] = t["candidate"] / t["fastgru"]


def machine() -> dict:
    """The facts of this machine and process that a record's times depend on: CPU, fastgru's kernel
    geometry and threads, library versions."""
    import numba

    from . import __version__
    from ._isa import GEOMETRY, TARGET_CPU
    from ._threading import get_num_threads

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "geometry": GEOMETRY.name,
        "compiled_for": TARGET_CPU,
        "fastgru_threads": get_num_threads(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "fastgru": __version__,
    }


def _us(seconds):
    return f"{seconds * 1e6:,.1f}"


def _g(value):
    return f"{value:#.3g}".rstrip(".")


def table(records: list, facts: dict | None = None) -> str:
    """The markdown table of `compare`'s records, with a line of the settings and the machine.

    With a candidate: per shape the candidate's, fastgru_prepared's and fastgru's median µs, the
    GFLOP/s of the candidate and of fastgru_prepared, the candidate's time over each of fastgru's,
    and the candidate's max ``|difference|`` from fastgru with its share of the tolerance. Without:
    fastgru_prepared's and fastgru's µs and GFLOP/s.
    """
    if not records:
        return ""
    with_candidate = records[0]["candidate"] is not None
    first = records[0]
    if with_candidate:
        kind = "prepared candidate" if first["prepared"] else "candidate"
        head = (
            "| suite | shape | candidate µs | fastgru_prepared µs | fastgru µs | candidate GFLOP/s | "
            "fastgru_prepared GFLOP/s | candidate / fastgru_prepared | candidate / fastgru | "
            "max abs difference (share of tolerance) |"
        )
        lines = [head, "|---" * 10 + "|"]
        for r in records:
            t, g = r["seconds"], r["gflops"]
            difference = max(r["max_abs_difference"].values(), default=0.0)
            lines.append(
                f"| {r['suite']} | {r['shape']} | {_us(t['candidate'])} | {_us(t['fastgru_prepared'])} | "
                f"{_us(t['fastgru'])} | {_g(g['candidate'])} | {_g(g['fastgru_prepared'])} | "
                f"{r['ratio_prepared']:.2f} | {r['ratio_function']:.2f} | "
                f"{difference:.2g} ({r['share_of_tolerance']:.2g}) |"
            )
        rtol, atol = first["tolerance"]
        intro = (
            f"{kind} {first['candidate']}, op {first['op']}, {first['dtype']}; tolerance "
            f"|difference| <= {atol:g} + {rtol:g}·|fastgru|, met on every shape"
        )
    else:
        lines = [
            "| suite | shape | fastgru_prepared µs | fastgru µs | fastgru_prepared GFLOP/s | fastgru GFLOP/s |",
            "|---" * 6 + "|",
        ]
        for r in records:
            t, g = r["seconds"], r["gflops"]
            lines.append(
                f"| {r['suite']} | {r['shape']} | {_us(t['fastgru_prepared'])} | {_us(t['fastgru'])} | "
                f"{_g(g['fastgru_prepared'])} | {_g(g['fastgru'])} |"
            )
        intro = f"fastgru alone, {first['dtype']}"
    rounds = len(next(iter(first["round_seconds"].values())))
    facts = machine() if facts is None else facts
    described = ", ".join(f"{k} {v}" for k, v in facts.items())
    return (
        f"{intro}; median µs per call of {rounds} interleaved rounds; fastgru_prepared is the "
        "prepared op called with out=, fastgru the function.\n\n" + "\n".join(lines) + f"\n\nMachine: {described}.\n"
    )


def save_json(records: list, path, facts: dict | None = None) -> None:
    """Write ``{"machine": machine(), "records": records}`` to ``path`` as JSON."""
    facts = machine() if facts is None else facts
    Path(path).write_text(json.dumps({"machine": facts, "records": records}, indent=1) + "\n")


def plot(records: list, path) -> None:
    """A bar chart of the records' median times per shape and implementation (log scale), as a PNG
    at ``path``, like the charts of the documentation's performance pages.

    Raises
    ------
    ImportError
        When matplotlib is not installed (it is optional: ``pip install matplotlib``).
    """
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError("fastgru.benchmark.plot needs matplotlib: pip install matplotlib") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    impls = [impl for impl in IMPLEMENTATIONS if any(impl in r["seconds"] for r in records)]
    labels = [f"{r['suite']}\n{r['shape']}" for r in records]
    width = 0.8 / len(impls)
    fig, ax = plt.subplots(figsize=(max(8, len(records) * 1.1), 5.5))
    for k, impl in enumerate(impls):
        xs = [j + (k - (len(impls) - 1) / 2) * width for j in range(len(records))]
        ys = [r["seconds"].get(impl, math.nan) * 1e6 for r in records]
        name = records[0]["candidate"] if impl == "candidate" else impl
        ax.bar(xs, ys, width, label=name)
    ax.set_yscale("log")
    ax.set_ylabel("median time per call (µs, log scale)")
    ax.set_xticks(range(len(records)))
    ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=8)
    ax.legend(fontsize=8)
    ax.set_title(f"{records[0]['op']}, {records[0]['dtype']}: lower is better")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
