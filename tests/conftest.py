"""Shared fixtures: a seeded generator, random cases, and one tolerance table per dtype."""

from dataclasses import dataclass, field

import numpy as np
import pytest

try:
    import ml_dtypes

    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # bfloat16 is optional (SPEC.md §5)
    BFLOAT16 = None

#: Every T1 dtype, bfloat16 as a skipped parameter when ml_dtypes is absent.
DTYPES = [
    np.dtype(np.float16),
    np.dtype(np.float32),
    np.dtype(np.float64),
    pytest.param(BFLOAT16, marks=pytest.mark.skipif(BFLOAT16 is None, reason="ml_dtypes is not installed"),
                 id="bfloat16"),
]

#: (rtol, atol) of fastgru against tests/reference.py. float32: both compute in float32, but
#: fastgru's tanh is a rational approximation within 3e-7 and its sums run in another order;
#: float16/bfloat16: the same float32 computation rounded to the format, so a few units in the
#: last place where rounding lands on the other side; float64: summation order only.
TOLERANCES = {
    "float16": (4e-3, 2e-3),
    "bfloat16": (3e-2, 1.6e-2),
    "float32": (2e-5, 2e-6),
    "float64": (1e-12, 1e-13),
}


def assert_close(got, want, dtype=None, what=""):
    """Compare results (an array or a tuple of arrays) with the tolerance of their dtype."""
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{what}: dtype {g.dtype} != {w.dtype}"
        rtol, atol = TOLERANCES[(g.dtype if dtype is None else np.dtype(dtype)).name]
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol, err_msg=what)


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


@dataclass
class Case:
    inputs: dict
    attrs: dict = field(default_factory=dict)


def make_case(rng, *, op="gru_sequence", batch=3, seq_len=5, input_size=4, hidden_size=6, dtype=np.float32,
              direction="forward", linear_before_reset=False, ragged=True, lengths=None, layout="documented",
              **attrs):
    """Random inputs of one call. Weights are uniform in ±1/sqrt(hidden_size), as frameworks
    initialise them, so states neither vanish nor saturate in a few steps."""
    dtype = np.dtype(dtype)
    d = 2 if direction == "bidirectional" else 1
    scale = 1 / np.sqrt(hidden_size)

    def uniform(*shape):
        return rng.uniform(-scale, scale, shape).astype(dtype)

    gates = 4 if linear_before_reset else 3
    if lengths is None:
        lengths = rng.integers(0, seq_len + 1, batch) if ragged else np.full(batch, seq_len)
        if ragged and batch >= 2:
            lengths[:2] = [seq_len, 0]  # always both ends
    X = rng.standard_normal((batch, seq_len, input_size)).astype(dtype)
    if op == "gru_cell":
        inputs = {"X": X[:, 0], "initial_hidden_state": rng.standard_normal((batch, hidden_size)).astype(dtype),
                  "W": uniform(3 * hidden_size, input_size), "R": uniform(3 * hidden_size, hidden_size),
                  "B": uniform(gates * hidden_size)}
        return Case(inputs, {"linear_before_reset": linear_before_reset, **attrs})
    inputs = {"X": X, "initial_hidden_state": rng.standard_normal((batch, d, hidden_size)).astype(dtype),
              "sequence_lengths": np.asarray(lengths), "W": uniform(d, 3 * hidden_size, input_size),
              "R": uniform(d, 3 * hidden_size, hidden_size), "B": uniform(d, gates * hidden_size)}
    if op == "augru_sequence":
        inputs["A"] = rng.uniform(0, 1, (batch, seq_len, 1)).astype(dtype)
        if layout == "documented":
            for name in ("initial_hidden_state", "W", "R", "B"):
                inputs[name] = inputs[name][:, 0] if name == "initial_hidden_state" else inputs[name][0]
        return Case(inputs, attrs)
    return Case(inputs, {"direction": direction, "linear_before_reset": linear_before_reset, **attrs})
