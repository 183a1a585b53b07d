"""Infinities and NaN in any input follow the formulas in IEEE arithmetic within each row's valid
steps: fastgru's results are NaN exactly where fastgru/reference.py, computing in the same dtype,
gives NaN, +inf and -inf exactly where it gives them, and the finite values agree within the
dtype's tolerance. Values past a row's length never reach the outputs (test_kernel_paths.py)."""

import zlib

import numpy as np
import pytest
from conftest import assert_close, make_case, reach

import fastgru
from fastgru import reference

#: NumPy warns of the infinities and NaN the reference computes with; they are the point here.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

POISONS = np.array([np.inf, -np.inf, np.nan])

#: The inputs each op has, poisoned one at a time and then all together.
INPUTS = {
    "gru_cell": ["X", "initial_hidden_state", "W", "R", "B"],
    "gru_sequence": ["X", "initial_hidden_state", "W", "R", "B"],
    "augru_sequence": ["X", "initial_hidden_state", "W", "R", "B", "A"],
}


def _poison(rng, inputs, names, count):
    """A copy of ``inputs`` with ``count`` elements of each of ``names`` set to inf, -inf or NaN."""
    poisoned = {name: (value.copy() if isinstance(value, np.ndarray) else value) for name, value in inputs.items()}
    for name in names:
        flat = poisoned[name].reshape(-1)
        where = rng.choice(flat.size, size=min(count, flat.size), replace=False)
        flat[where] = rng.choice(POISONS, size=where.size).astype(flat.dtype)
    return poisoned


def _cases():
    for op, names in INPUTS.items():
        for attrs in (
            {},
            {"linear_before_reset": True, "clip": 2.0},
            {"activations": ("relu", "tanh")},
            {"direction": "bidirectional"},
            {"direction": "reverse", "activations": ("tanh", "sigmoid")},
        ):
            if op == "augru_sequence" and attrs:
                continue
            if op == "gru_cell" and "direction" in attrs:
                continue
            for poisoned in [[name] for name in names] + [names]:
                yield pytest.param(
                    op,
                    attrs,
                    poisoned,
                    id=f"{op}-{'-'.join(f'{k}={v}' for k, v in attrs.items())}-{'+'.join(poisoned)}",
                )


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize(("op", "attrs", "names"), list(_cases()))
def test_infinities_and_nan_follow_the_formulas(op, attrs, names, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{op}{names}{attrs}".encode()))
    case = make_case(
        rng, op=op, batch=5, seq_len=4, input_size=3, hidden_size=7, dtype=dtype, ragged=False, **attrs
    )  # every step valid: the poison is inside
    inputs = _poison(rng, case.inputs, names, count=2)
    got = getattr(fastgru, op)(**inputs, **case.attrs)
    want = getattr(reference, op)(**inputs, **case.attrs)
    assert_close(got, want, dtype, what=f"{op} {names}")


@pytest.mark.parametrize("path", ["serial", "parallel", "split", "pair"])
def test_on_every_path(monkeypatch, path):
    from fastgru import _partner

    if path == "pair" and not _partner.PARTNER.enabled:
        pytest.skip("no partner thread here")
    rng = np.random.default_rng(3)
    n = 1 if path in ("split", "pair") else 6
    case = make_case(
        rng,
        op="gru_sequence",
        batch=n,
        seq_len=6,
        input_size=4,
        hidden_size=40,
        linear_before_reset=path == "pair",
        ragged=False,
    )
    inputs = _poison(rng, case.inputs, ["X", "initial_hidden_state", "R"], count=1)
    want = reference.gru_sequence(**inputs, **case.attrs)
    reach(monkeypatch, path)
    assert_close(fastgru.gru_sequence(**inputs, **case.attrs), want, np.float32, what=path)


@pytest.mark.parametrize("z_sign", [1, -1])
def test_an_infinite_state_meets_an_exact_gate(z_sign):
    """An infinite state H with r = 1 and h = tanh(+inf) = 1: H·Rzᵀ = ±inf makes z exactly 1 or 0, and
    H' = (1 - z)·h + z·H is 0·1 + 1·inf = inf, or 1·1 + 0·inf = NaN, as the formula says (a gate that
    only came close to 0 would give inf both times)."""
    h = 3
    R = np.ones((3 * h, h), np.float32)
    R[:h] = z_sign  # the z rows
    state = np.full((1, h), np.inf, np.float32)
    args = (np.zeros((1, 1), np.float32), state, np.zeros((3 * h, 1), np.float32), R)
    got, want = fastgru.gru_cell(*args), reference.gru_cell(*args)
    assert_close(got, want)
    assert np.isposinf(got).all() if z_sign == 1 else np.isnan(got).all()
