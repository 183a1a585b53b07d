"""fastgru.gru_sequence against the NumPy reference (fastgru/reference.py): every direction, dtype,
activation pair, clip, linear_before_reset, sequence-length pattern and T2 dtype, odd and empty
sizes, and where NaN and inf may and may not go (docs/semantics.md)."""

import itertools
import math

import numpy as np
import pytest
from conftest import DTYPES, assert_close, make_case, run_both

import fastgru
from fastgru import reference

DIRECTIONS = ["forward", "reverse", "bidirectional"]
ACTIVATION_PAIRS = list(itertools.product(["relu", "sigmoid", "tanh"], repeat=2))
T2_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("linear_before_reset", [False, True])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_gru_sequence_matches_reference(rng, direction, linear_before_reset, dtype):
    case = make_case(
        rng,
        batch=4,
        seq_len=5,
        input_size=3,
        hidden_size=6,
        dtype=dtype,
        direction=direction,
        linear_before_reset=linear_before_reset,
        ragged=True,
    )
    got, want = run_both("gru_sequence", case)
    assert_close(got, want)
    d = 2 if direction == "bidirectional" else 1
    assert got[0].shape == (4, d, 5, 6) and got[1].shape == (4, d, 6)
    for result in got:
        assert result.dtype == np.dtype(dtype) and result.flags.c_contiguous


@pytest.mark.parametrize("linear_before_reset", [False, True])
@pytest.mark.parametrize("f, g", ACTIVATION_PAIRS)
def test_every_activation_pair(rng, f, g, linear_before_reset):
    case = make_case(
        rng,
        batch=4,
        seq_len=5,
        input_size=3,
        hidden_size=7,
        dtype=np.float32,
        direction="bidirectional",
        linear_before_reset=linear_before_reset,
        activations=(f, g),
    )
    assert_close(*run_both("gru_sequence", case))


@pytest.mark.parametrize("f, g", [("relu", "relu"), ("tanh", "sigmoid"), ("sigmoid", "relu")])
@pytest.mark.parametrize("direction", ["forward", "reverse"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_activation_pairs_in_every_dtype(rng, dtype, direction, f, g):
    case = make_case(
        rng,
        batch=3,
        seq_len=4,
        input_size=2,
        hidden_size=5,
        dtype=dtype,
        direction=direction,
        linear_before_reset=True,
        activations=(f, g),
    )
    assert_close(*run_both("gru_sequence", case))


@pytest.mark.parametrize("clip", [math.inf, 0, 0.5])
@pytest.mark.parametrize("linear_before_reset", [False, True])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_clip(rng, direction, linear_before_reset, clip):
    # Large weights, so that pre-activations go well past 0.5 and the clip changes the answer.
    case = make_case(
        rng,
        batch=3,
        seq_len=4,
        input_size=3,
        hidden_size=5,
        dtype=np.float64,
        direction=direction,
        linear_before_reset=linear_before_reset,
        activations=("sigmoid", "tanh"),
        clip=clip,
    )
    for name in ("W", "R", "B"):
        case.inputs[name] *= 4
    got, want = run_both("gru_sequence", case)
    assert_close(got, want)
    unclipped = fastgru.gru_sequence(**case.inputs, **{**case.attrs, "clip": math.inf})
    if clip == 0.5:
        assert np.abs(got[0] - unclipped[0]).max() > 0.1
    else:  # 0 and inf both mean no clipping (docs/semantics.md, "The gates")
        np.testing.assert_array_equal(got[0], unclipped[0])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("f, g", [("sigmoid", "tanh"), ("relu", "relu")])
def test_clip_in_every_dtype(rng, f, g, dtype):
    case = make_case(
        rng,
        batch=3,
        seq_len=4,
        input_size=3,
        hidden_size=5,
        dtype=dtype,
        direction="bidirectional",
        activations=(f, g),
        clip=0.5,
    )
    assert_close(*run_both("gru_sequence", case))


@pytest.mark.parametrize(
    "hidden_size, input_size", [(1, 1), (3, 1), (17, 1), (1, 4), (17, 3), (33, 2), (64, 3), (20, 0)]
)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_odd_sizes(rng, hidden_size, input_size, direction):
    case = make_case(
        rng,
        batch=3,
        seq_len=4,
        input_size=input_size,
        hidden_size=hidden_size,
        direction=direction,
        linear_before_reset=hidden_size == 17,
    )
    assert_close(*run_both("gru_sequence", case))


@pytest.mark.parametrize("direction", ["forward", "reverse"])
@pytest.mark.parametrize("t2", T2_DTYPES)
def test_every_integer_t2(rng, t2, direction):
    case = make_case(rng, batch=5, seq_len=6, input_size=2, hidden_size=4, direction=direction, lengths_dtype=t2)
    assert case.inputs["sequence_lengths"].dtype == np.dtype(t2)
    lengths = case.inputs["sequence_lengths"]
    assert 0 in lengths and 6 in lengths
    got, want = run_both("gru_sequence", case)
    assert_close(got, want)
    as_int64 = fastgru.gru_sequence(**{**case.inputs, "sequence_lengths": lengths.astype(np.int64)}, **case.attrs)
    for a, b in zip(got, as_int64):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_lengths_zero_and_full(rng, direction, dtype):
    case = make_case(
        rng, batch=4, seq_len=5, input_size=3, hidden_size=4, dtype=dtype, direction=direction, lengths=[0, 5, 2, 0]
    )
    (Y, Ho), want = run_both("gru_sequence", case)
    assert_close((Y, Ho), want)
    assert np.all(Y[[0, 3]] == 0) and np.all(
        Ho[[0, 3]] == 0
    )  # L = 0: Ho is zero, not h0 (docs/semantics.md, "Sequences")
    assert np.all(Y[2, :, 2:] == 0) and np.all(Y[2, :, :2] != 0)  # zero past the length only
    forward, backward = 0, Y.shape[1] - 1
    if direction != "reverse":  # Ho is the state after the last step, t = L - 1
        np.testing.assert_array_equal(Ho[1, forward], Y[1, forward, 4])
        np.testing.assert_array_equal(Ho[2, forward], Y[2, forward, 1])
    if direction != "forward":  # ... and after t = 0 going backwards
        np.testing.assert_array_equal(Ho[1, backward], Y[1, backward, 0])
        np.testing.assert_array_equal(Ho[2, backward], Y[2, backward, 0])


def test_reverse_runs_the_valid_prefix_backwards(rng):
    """A reverse row of length L is the forward run of its first L steps in reverse order."""
    case = make_case(
        rng, batch=3, seq_len=6, input_size=2, hidden_size=4, dtype=np.float64, direction="reverse", lengths=[6, 3, 1]
    )
    Y, Ho = fastgru.gru_sequence(**case.inputs, **case.attrs)
    for b, L in enumerate([6, 3, 1]):
        forward = {
            **case.inputs,
            "X": case.inputs["X"][b : b + 1, L - 1 :: -1],
            "initial_hidden_state": case.inputs["initial_hidden_state"][b : b + 1],
            "sequence_lengths": [L],
        }
        Yf, Hof = fastgru.gru_sequence(**forward, **{**case.attrs, "direction": "forward"})
        np.testing.assert_allclose(Y[b, 0, :L], Yf[0, 0, ::-1], rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(Ho[b], Hof[0], rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("batch, seq_len", [(0, 4), (3, 0), (0, 0)])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_empty_batch_or_sequence(rng, direction, batch, seq_len):
    case = make_case(rng, batch=batch, seq_len=seq_len, input_size=3, hidden_size=4, direction=direction)
    (Y, Ho), want = run_both("gru_sequence", case)
    d = 2 if direction == "bidirectional" else 1
    assert Y.shape == (batch, d, seq_len, 4) and Ho.shape == (batch, d, 4)
    assert np.all(Ho == 0)  # with S = 0 every length is 0
    assert_close((Y, Ho), want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_values_past_a_length_never_reach_the_outputs(rng, direction, dtype):
    case = make_case(
        rng, batch=4, seq_len=6, input_size=3, hidden_size=5, dtype=dtype, direction=direction, lengths=[6, 2, 0, 5]
    )
    X = case.inputs["X"]
    X[1, 2:] = np.nan
    X[2, :] = np.inf
    X[3, 5:] = -np.inf
    case.inputs["initial_hidden_state"][2] = np.nan  # a row of length 0 never reads its h0
    (Y, Ho), want = run_both("gru_sequence", case)
    assert np.all(np.isfinite(Y)) and np.all(np.isfinite(Ho))
    assert_close((Y, Ho), want)


@pytest.mark.parametrize("direction", ["forward", "reverse"])
@pytest.mark.parametrize("activations", [("sigmoid", "tanh"), ("relu", "relu"), ("tanh", "sigmoid")])
def test_nan_in_a_valid_step_stays_in_its_row(rng, activations, direction):
    case = make_case(
        rng,
        batch=3,
        seq_len=6,
        input_size=3,
        hidden_size=5,
        direction=direction,
        activations=activations,
        lengths=[6, 5, 6],
    )
    case.inputs["X"][1, 2, 0] = np.nan
    (Y, Ho), want = run_both("gru_sequence", case)
    after = slice(2, 5) if direction == "forward" else slice(0, 3)  # steps computed from t = 2 on
    before = slice(0, 2) if direction == "forward" else slice(3, 5)
    assert np.all(np.isnan(Y[1, 0, after])) and np.all(np.isnan(Ho[1]))
    assert not np.any(np.isnan(Y[1, 0, before]))
    assert np.all(Y[1, 0, 5] == 0)  # past the row's length
    assert not np.any(np.isnan(Y[[0, 2]])) and not np.any(np.isnan(Ho[[0, 2]]))
    assert_close((Y, Ho), want)


@pytest.mark.parametrize(
    "extra",
    [
        {"activations": ("SIGMOID", "TANH")},
        {"activations": ["Sigmoid", "tanH"]},
        {"hidden_size": 6},
        {"activations_alpha": [0.5, 2.0], "activations_beta": [1.5, -1.0]},
        {"activations_alpha": [1.0]},
    ],
    ids=["upper", "mixed-case-list", "hidden_size", "alpha-beta", "alpha-only"],
)
def test_attribute_spellings_do_not_change_the_answer(rng, extra):
    case = make_case(
        rng, batch=3, seq_len=4, input_size=2, hidden_size=6, direction="bidirectional", linear_before_reset=True
    )
    want = fastgru.gru_sequence(**case.inputs, **case.attrs)
    got = fastgru.gru_sequence(**case.inputs, **case.attrs, **extra)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert_close(got, reference.gru_sequence(**case.inputs, **case.attrs, **extra))


@pytest.mark.parametrize("f, g", [("RELU", "Tanh"), ("tanh", "SIGMOID")])
def test_upper_case_activations_select_the_same_functions(rng, f, g):
    case = make_case(rng, batch=3, seq_len=4, input_size=2, hidden_size=5, direction="reverse", activations=(f, g))
    lower = fastgru.gru_sequence(**case.inputs, **{**case.attrs, "activations": (f.lower(), g.lower())})
    got, want = run_both("gru_sequence", case)
    assert_close(got, want)
    for a, b in zip(got, lower):
        np.testing.assert_array_equal(a, b)


def test_directions_have_their_own_weights(rng):
    """Bidirectional: index 0 uses W[0], R[0], B[0], h0[:, 0] forwards; index 1 the rest backwards."""
    case = make_case(rng, batch=3, seq_len=4, input_size=2, hidden_size=5, dtype=np.float64, direction="bidirectional")
    Y, Ho = fastgru.gru_sequence(**case.inputs, **case.attrs)
    swapped = {
        **case.inputs,
        **{name: case.inputs[name][::-1].copy() for name in ("W", "R", "B")},
        "initial_hidden_state": case.inputs["initial_hidden_state"][:, ::-1].copy(),
    }
    Ys, _ = fastgru.gru_sequence(**swapped, **case.attrs)
    assert not np.allclose(Y, Ys[:, ::-1])  # swapping the directions' weights changes the answer
    assert_close((Y, Ho), reference.gru_sequence(**case.inputs, **case.attrs))


@pytest.mark.parametrize("linear_before_reset", [False, True])
def test_a_longer_sequence(rng, linear_before_reset):
    case = make_case(
        rng,
        batch=3,
        seq_len=30,
        input_size=4,
        hidden_size=16,
        direction="bidirectional",
        linear_before_reset=linear_before_reset,
    )
    assert_close(*run_both("gru_sequence", case))


@pytest.mark.parametrize("linear_before_reset", [False, True])
def test_more_rows_than_a_chunk(rng, linear_before_reset):
    """More batch rows than the kernel processes together (64, fastgru/_kernels/gru.py)."""
    case = make_case(
        rng,
        batch=70,
        seq_len=3,
        input_size=2,
        hidden_size=5,
        direction="bidirectional",
        linear_before_reset=linear_before_reset,
    )
    assert_close(*run_both("gru_sequence", case))


@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_an_infinite_candidate_state_stays_infinite(rng, direction):
    case = make_case(
        rng,
        batch=2,
        seq_len=2,
        input_size=1,
        hidden_size=1,
        dtype=np.float64,
        direction=direction,
        activations=("sigmoid", "relu"),
        lengths=[2, 2],
    )
    last = 1 if direction == "forward" else 0
    # At the last step of row 0: z = sigmoid(0) = 1/2, h = relu(4 * the largest float) = inf, H' = inf.
    case.inputs["X"][0, last, 0] = np.finfo(np.float64).max
    case.inputs["W"][0] = [[0.0], [0.0], [4.0]]
    case.inputs["R"][0] = 0.0
    case.inputs["B"][0] = 0.0
    with np.errstate(over="ignore"):
        (Y, Ho), want = run_both("gru_sequence", case)
    assert want[0][0, 0, last, 0] == np.inf and want[1][0, 0, 0] == np.inf
    assert_close((Y, Ho), want)
