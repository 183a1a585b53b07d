"""fastgru.gru_cell against the NumPy reference (fastgru/reference.py): every dtype, both
linear_before_reset variants, with and without B, every activation pair, clip, odd sizes."""

import itertools
import math

import numpy as np
import pytest
from conftest import DTYPES, assert_close, make_case, run_both

import fastgru
from fastgru import reference

ACTIVATION_PAIRS = list(itertools.product(["relu", "sigmoid", "tanh"], repeat=2))


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("linear_before_reset", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gru_cell_matches_reference(rng, dtype, linear_before_reset, with_bias):
    case = make_case(
        rng,
        op="gru_cell",
        batch=4,
        input_size=5,
        hidden_size=6,
        dtype=dtype,
        linear_before_reset=linear_before_reset,
        with_bias=with_bias,
    )
    got, want = run_both("gru_cell", case)
    assert_close(got, want)
    assert got.dtype == np.dtype(dtype) and got.flags.c_contiguous


@pytest.mark.parametrize("linear_before_reset", [False, True])
@pytest.mark.parametrize("f, g", ACTIVATION_PAIRS)
def test_every_activation_pair(rng, f, g, linear_before_reset):
    case = make_case(
        rng,
        op="gru_cell",
        batch=5,
        input_size=3,
        hidden_size=7,
        dtype=np.float32,
        linear_before_reset=linear_before_reset,
        activations=(f, g),
    )
    assert_close(*run_both("gru_cell", case))


@pytest.mark.parametrize("f, g", [("relu", "tanh"), ("tanh", "relu"), ("sigmoid", "sigmoid")])
@pytest.mark.parametrize("dtype", DTYPES)
def test_activation_pairs_in_every_dtype(rng, dtype, f, g):
    case = make_case(
        rng,
        op="gru_cell",
        batch=3,
        input_size=4,
        hidden_size=5,
        dtype=dtype,
        linear_before_reset=True,
        activations=(f, g),
    )
    assert_close(*run_both("gru_cell", case))


@pytest.mark.parametrize("clip", [math.inf, 0, 0.5])
@pytest.mark.parametrize("linear_before_reset", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clip(rng, dtype, linear_before_reset, clip):
    # Large weights, so that pre-activations go well past 0.5 and the clip changes the answer.
    case = make_case(
        rng,
        op="gru_cell",
        batch=4,
        input_size=4,
        hidden_size=5,
        dtype=dtype,
        linear_before_reset=linear_before_reset,
        activations=("tanh", "relu"),
        clip=clip,
    )
    for name in ("W", "R", "B"):
        case.inputs[name] *= 4
    got, want = run_both("gru_cell", case)
    assert_close(got, want)
    unclipped = fastgru.gru_cell(**case.inputs, **{**case.attrs, "clip": math.inf})
    if clip == 0.5:
        assert np.abs(got.astype(np.float64) - unclipped).max() > 0.1
    else:  # 0 and inf both mean no clipping (docs/semantics.md, "The gates")
        np.testing.assert_array_equal(got, unclipped)


@pytest.mark.parametrize("hidden_size, input_size", [(1, 1), (3, 1), (17, 1), (1, 5), (17, 4), (33, 2), (20, 0)])
@pytest.mark.parametrize("linear_before_reset", [False, True])
def test_odd_sizes(rng, hidden_size, input_size, linear_before_reset):
    case = make_case(
        rng,
        op="gru_cell",
        batch=3,
        input_size=input_size,
        hidden_size=hidden_size,
        linear_before_reset=linear_before_reset,
    )
    assert_close(*run_both("gru_cell", case))


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_batch(rng, dtype):
    case = make_case(rng, op="gru_cell", batch=0, input_size=3, hidden_size=4, dtype=dtype)
    got, want = run_both("gru_cell", case)
    assert got.shape == (0, 4) and got.dtype == np.dtype(dtype)
    assert_close(got, want)


@pytest.mark.parametrize("linear_before_reset", [False, True])
def test_missing_bias_is_a_zero_bias(rng, linear_before_reset):
    case = make_case(
        rng,
        op="gru_cell",
        batch=3,
        input_size=2,
        hidden_size=4,
        dtype=np.float64,
        linear_before_reset=linear_before_reset,
        with_bias=False,
    )
    zero = np.zeros((4 if linear_before_reset else 3) * 4)
    got, want = run_both("gru_cell", case)
    assert_close(got, want)
    np.testing.assert_array_equal(got, fastgru.gru_cell(**case.inputs, B=zero, **case.attrs))


@pytest.mark.parametrize(
    "extra",
    [
        {"activations": ("SIGMOID", "TANH")},
        {"activations": ["Sigmoid", "tanH"]},
        {"hidden_size": 6},
        {"activations_alpha": [0.5, 2.0], "activations_beta": [1.5]},
        {"clip": 0.0},
    ],
    ids=["upper", "mixed-case-list", "hidden_size", "alpha-beta", "clip-zero"],
)
def test_attribute_spellings_do_not_change_the_answer(rng, extra):
    case = make_case(rng, op="gru_cell", batch=3, input_size=4, hidden_size=6, linear_before_reset=True)
    want = fastgru.gru_cell(**case.inputs, **case.attrs)
    got = fastgru.gru_cell(**case.inputs, **case.attrs, **extra)
    np.testing.assert_array_equal(got, want)
    assert_close(got, reference.gru_cell(**case.inputs, **case.attrs, **extra))


@pytest.mark.parametrize("activations", [("sigmoid", "tanh"), ("relu", "relu"), ("tanh", "sigmoid")])
def test_nan_stays_in_its_row(rng, activations):
    case = make_case(rng, op="gru_cell", batch=4, input_size=3, hidden_size=5, activations=activations)
    case.inputs["initial_hidden_state"][2, 1] = np.nan
    got, want = run_both("gru_cell", case)
    assert np.isnan(got[2]).all()  # R is dense: the NaN reaches every unit
    assert not np.isnan(got[[0, 1, 3]]).any()
    assert_close(got, want)  # NaN exactly where the reference has it


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_infinite_candidate_state_stays_infinite(dtype):
    # z = sigmoid(0) = 1/2 and h = relu(4 * the largest float) = inf: H' = inf/2 + 1/4 = inf.
    X, H0 = np.array([[np.finfo(dtype).max]], dtype=dtype), np.array([[0.5]], dtype=dtype)
    W, R = np.array([[0.0], [0.0], [4.0]], dtype=dtype), np.zeros((3, 1), dtype=dtype)
    with np.errstate(over="ignore"):
        want = reference.gru_cell(X, H0, W, R, activations=("sigmoid", "relu"))
    got = fastgru.gru_cell(X, H0, W, R, activations=("sigmoid", "relu"))
    assert want[0, 0] == np.inf
    assert_close(got, want)
